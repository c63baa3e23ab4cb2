#!/bin/sh
# GC and on-CPU in the monitor. A rank that collects garbage most of the time
# (tests/py/gc_loop.py) shows a GC% above 0 in the rank table and in the GIL view, and its top
# frame is <gc> (the collecting thread's samples have it on top); `o` turns on-CPU sampling on
# and says so in the header, and off again. With native frames on (`n`), <gc> stays on top of
# the merged stack.
. "$(dirname "$0")/lib.sh"

python3 "$RANKTOP_SRCDIR/tests/py/gc_loop.py" "$WORK/ready" &
T=$!
PIDS="$PIDS $T"
wait_for test -s "$WORK/ready" || fail "the target did not start"

ui_start gc 160 40 -- "$RANKTOP_BIN" -p "$T"
wait_screen "^ +- +$T .*<gc>" 30 || { show_screen "table"; fail "no <gc> top frame"; }
screen | grep -Eq 'GIL% +GC% +TOP FRAME' || { show_screen "header"; fail "no GC% column"; }
# The GC% cell, right before the top frame: above 0 once a second of GIL probes is in.
gc_row() { screen | grep -Eq "^ +- +$T .* [0-9.]*[1-9][0-9.]* +<gc>"; }
until_deadline 30 gc_row || { show_screen "row"; fail "GC% is not above 0"; }
keys 4
gc_gil() {
    screen | awk -v pid="$T" '/GC%/ { h = 1 } h && $2 == pid && $6 + 0 > 0 { ok = 1 } END { exit !ok }'
}
until_deadline 20 gc_gil || { show_screen "GIL view"; fail "GIL view: no GC% above 0"; }
keys o
wait_screen '\[on-CPU\]' 10 || { show_screen "after o"; fail "o: no [on-CPU] in the header"; }
keys o
wait_screen 'idle samples kept again' 10 || fail "o again: no note"
screen_lacks '\[on-CPU\]' || fail "o again: [on-CPU] still shown"
# `n` merges native frames into the Rank view's stack: <gc> stays on top of them (innermost
# first, so above the first [native] frame).
keys 2 n
wait_screen 'native frames on' 20 || { show_screen "after n"; fail "no native note"; }
gc_native() {
    screen | awk '/<gc>/ && !g { g = NR } /\[native\]/ && !n { n = NR } END { exit !(g && n && g < n) }'
}
until_deadline 30 gc_native || { show_screen "native"; fail "n: no <gc> above the native frames"; }
keys n
wait_screen 'native frames off' 10 || fail "n did not turn native frames off"
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
