#!/bin/sh
# Issue 9 on the first screen: two ranks whose main thread spins in one function, changing
# line all the time, while a thread named "tokenizer" holds the GIL. The rank table names the
# GIL holder, `t` shows the tokenizer in the Rank view, the GIL view names every thread (no
# "?"), the HANG banner, once up, stays up for 20 s of polling, and a rank killed by SIGSEGV
# shows as such (or "exited" where the exit status cannot be learnt).
. "$(dirname "$0")/lib.sh"

for r in 0 1; do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 python3 "$RANKTOP_SRCDIR/tests/py/spin_gil.py" &
    PIDS="$PIDS $!"
    eval "PID_$r=$!"
done
ui_start nv 160 45 -- "$RANKTOP_BIN" -p "$PID_0" -p "$PID_1" --hang-after 3
wait_screen "^ +0 +$PID_0 " 30 || fail "rank 0 not listed"
wait_screen "^ +1 +$PID_1 " 30 || fail "rank 1 not listed"

# First screen: the GIL column names the holder thread.
wait_screen "^ +0 +$PID_0 .* [0-9.]+ tokenizer " 30 || fail "the rank table does not name the GIL holder"

# Spinning in spin(): the banner comes and then never goes, though the line changes.
wait_screen '^HANG [0-9]+s: 2 ranks in spin \(spin_gil\.py:[0-9]+\)' 30 ||
    fail "no HANG banner for the ranks spinning in spin()"
end=$(($(now_ms) + 20000))
polls=0
while [ "$(now_ms)" -lt "$end" ]; do
    screen_has '^HANG [0-9]+s: 2 ranks in spin ' || {
        show_screen "banner gone after $polls polls"
        fail "the HANG banner flickered off while the ranks spun in spin()"
    }
    polls=$((polls + 1))
    sleep 0.2
done
[ "$polls" -ge 20 ] || fail "only $polls polls of the banner in 20 s"

# GIL view: every holder named.
keys 4
wait_screen "^0 +$PID_0 .* tokenizer [0-9]+%" 20 || fail "the GIL view does not name tokenizer"
screen_lacks '\? [0-9]+%' || { show_screen "GIL view"; fail "the GIL view shows a thread as ?"; }

# Rank view: the main thread alone, then with t every thread, named.
keys 2
wait_screen 'Thread MainThread \(tid [0-9]+\) main' 20 || fail "Rank view: no named MainThread"
keys t
wait_screen 'Thread tokenizer \(tid [0-9]+\)' 20 || fail "t did not show tokenizer in the Rank view"
screen_lacks 'Thread \? ' || { show_screen "Rank view"; fail "a thread is named ? in the Rank view"; }
keys t

# A rank killed by a signal: SIGSEGV when the status is known, else "exited".
kill -SEGV "$PID_1"
wait_screen "^ +1 +$PID_1 .* (SIGSEGV|exited) " 30 || fail "rank 1 not shown as killed"
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
