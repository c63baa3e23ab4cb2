#!/bin/sh
# The monitor's `n`: native frames for the selected rank. A rank blocked in libc pause() through
# ctypes shows, in the Rank view, the native frame marked [native] above its Python frames
# (the thread was read while stopped, so the two line up), the merged tree marks it too, and
# `n` again turns it off: the next samples are Python-only. The target is never left stopped.
. "$(dirname "$0")/lib.sh"

python3 "$RANKTOP_SRCDIR/tests/py/pause_native.py" "$WORK/ready" &
T=$!
PIDS="$PIDS $T"
wait_for test -s "$WORK/ready" || fail "the target did not start"

ui_start nt 160 45 -- "$RANKTOP_BIN" -p "$T"
wait_screen "^ +- +$T .*wait_in_pause" 30 || { show_screen "table"; fail "the target is not listed"; }
keys 2
wait_screen 'wait_in_pause \(.*pause_native\.py:[0-9]+\)' 30 || fail "Rank view: no Python stack"
screen_lacks '\[native\]' || fail "native frames before n"
keys n
wait_screen 'native frames on: 2 samples/s' 20 || { show_screen "after n"; fail "no native note"; }
wait_screen '^ +pause \(.*libc\.so\.6\) \[native\]' 30 || { show_screen "after n"; fail "no pause frame"; }
# Innermost first: the native pause frame comes before (above) the Python frame that called it.
screen | awk '/pause \(.*libc\.so\.6\) \[native\]/ { p = NR } /wait_in_pause \(/ { w = NR }
    END { exit !(p && w && p < w) }' || { show_screen "order"; fail "pause is not inside wait_in_pause"; }
keys 1
wait_screen 'pause \(libc\.so\.6\) \[native\]' 20 || { show_screen "merged"; fail "merged tree: no marked frame"; }
keys 2 n
wait_screen 'native frames off' 10 || fail "n did not turn native frames off"
# Python-only samples again: the current stack has no native frame once the next one lands.
python_only() { screen | grep -q 'wait_in_pause' && ! screen | grep -q '\[native\]'; }
until_deadline 20 python_only || { show_screen "after off"; fail "native frames still shown"; }
st=$(awk '/^State:/ { print $2 }' "/proc/$T/status")
tr=$(awk '/^TracerPid:/ { print $2 }' "/proc/$T/status")
[ "$st" != t ] && [ "$st" != T ] && [ "$tr" = 0 ] || fail "the target was left stopped or traced ($st, $tr)"
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
