#!/bin/sh
# py-spy's -g/--gil, -F/--function and --nolineno in the monitor, as in record. On
# tests/py/busy_idle.py ("busy" spins holding the GIL; "sleeper" and MainThread wait on events,
# never holding it): with -g only busy's stack is sampled (the header says [GIL only]; nap, the
# sleeper's function, never shows) and with -F no frame has a line number, in the merged tree,
# the Rank view and an exported folded file. --nolineno alone drops the lines and keeps every
# thread's samples.
. "$(dirname "$0")/lib.sh"

python3 "$RANKTOP_SRCDIR/tests/py/busy_idle.py" "$WORK/ready" &
T=$!
PIDS="$PIDS $T"
wait_for test -s "$WORK/ready" || fail "the target did not start"

ui_start gil 160 40 -- "$RANKTOP_BIN" -p "$T" --all-threads -g -F --export-dir "$WORK"
wait_screen '\[GIL only\]' 30 || fail "-g: no [GIL only] in the header"
# Seconds of samples in: busy's frame by function and file only, the sleeper's never.
wait_screen '^ *[^ ]*spin \(.*busy_idle\.py\) .*unchanged [3-9]s' 30 || fail "-F: no spin frame"
screen_lacks 'nap \(' || { show_screen "merged"; fail "-g: the sleeper's nap frame is shown"; }
screen_lacks '\.py:[0-9]+\)' || { show_screen "merged"; fail "-F: a line number in the tree"; }
keys 2
wait_screen '^ +spin \(.*busy_idle\.py\)$' 20 || fail "Rank view: no spin frame without its line"
screen_lacks '\.py:[0-9]+\)' || { show_screen "rank"; fail "-F: a line number in the Rank view"; }
screen_lacks 'nap \(' || { show_screen "rank"; fail "-g: the sleeper's nap frame is shown"; }
keys E
wait_screen 'export format: ' 10 || fail "E shows no format prompt"
keys f
wait_screen "exported $WORK/ranktop-.*\\.folded" 30 || fail "E f: no folded file"
grep -q ';spin (.*busy_idle\.py) [0-9]*$' "$WORK"/ranktop-*.folded ||
    fail "export: no spin frame without its line: $(cat "$WORK"/ranktop-*.folded)"
! grep -q '\.py:[0-9]' "$WORK"/ranktop-*.folded || fail "export: line numbers with -F"
! grep -q 'nap (' "$WORK"/ranktop-*.folded || fail "export: the sleeper sampled with -g"
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"

# --nolineno alone: every thread again (nap shows), still without lines.
ui_start nol 160 40 -- "$RANKTOP_BIN" -p "$T" --all-threads --nolineno
wait_screen '^ *[^ ]*nap \(.*busy_idle\.py\)' 30 || fail "--nolineno: no nap frame"
screen_lacks '\[GIL only\]' || fail "--nolineno: [GIL only] shown"
screen_lacks '\.py:[0-9]+\)' || { show_screen "nolineno"; fail "--nolineno: a line number"; }
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
echo ok
