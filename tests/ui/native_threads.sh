#!/bin/sh
# The monitor's `t` while `n` is on: the Rank view lists the threads that have no Python
# thread state too, by their comm, with native frames only. tests/py/c_thread.py runs a thread
# started by libc's pthread_create through ctypes, its start routine libc's pause, named
# "cpause"; with `n` on and `t` (all threads) it shows, with a pause frame marked [native],
# while the main thread keeps its Python frames; `n` off takes it away again.
. "$(dirname "$0")/lib.sh"

python3 "$RANKTOP_SRCDIR/tests/py/c_thread.py" "$WORK/ready" &
T=$!
PIDS="$PIDS $T"
wait_for test -s "$WORK/ready" || fail "the target did not start"

ui_start nt 160 45 -- "$RANKTOP_BIN" -p "$T"
wait_screen "^ +- +$T .*main_wait" 30 || { show_screen "table"; fail "the target is not listed"; }
keys 2 t
wait_screen 'main_wait \(.*c_thread\.py:[0-9]+\)' 30 || fail "Rank view: no Python stack"
screen_lacks 'cpause' || { show_screen "before n"; fail "a thread without Python before n"; }
keys n
wait_screen 'cpause' 30 || { show_screen "after n"; fail "no cpause thread"; }
# Its frames: pause (libc), marked native, under the cpause line.
cpause_pause() {
    screen | awk '/cpause/ { c = NR } c && NR > c && /pause \(.*libc\.so\.6\) \[native\]/ { ok = 1 }
        END { exit !ok }'
}
until_deadline 20 cpause_pause || { show_screen "cpause"; fail "no pause frame under cpause"; }
screen | grep -q 'main_wait (' || { show_screen "main"; fail "the main thread lost its Python frames"; }
keys n
wait_screen 'native frames off' 10 || fail "n did not turn native frames off"
wait_screen_gone 'cpause' 30 || { show_screen "after off"; fail "cpause still shown after n off"; }
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
