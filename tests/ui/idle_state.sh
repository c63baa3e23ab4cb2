#!/bin/sh
# The STATE column tells a waiting rank from a working one: a rank asleep in time.sleep (off
# the CPU, its stack not yet unchanged for --hang-after) reads `idle`, a rank spinning on the
# CPU reads `run`; with a short --hang-after both read `stuck` once their stacks have kept
# their functions that long.
. "$(dirname "$0")/lib.sh"

RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 python3 -S -c 'import time
def nap():
    while True: time.sleep(0.05)
nap()' &
A=$!
RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 python3 -S -c 'def spin():
    while True: pass
spin()' &
B=$!
PIDS="$PIDS $A $B"
ui_start idle 160 30 -- "$RANKTOP_BIN" -p "$A,$B" --hang-after 600
wait_screen "^ +0 +$A .* idle .*nap" 30 || fail "the sleeping rank 0 is not idle"
wait_screen "^ +1 +$B .* run .*spin" 30 || fail "the spinning rank 1 is not running"
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"

# Unchanged past --hang-after: stuck, whether asleep or spinning.
ui_start stuck 160 30 -- "$RANKTOP_BIN" -p "$A,$B" --hang-after 2
wait_screen "^ +0 +$A .* stuck .*nap" 30 || fail "the sleeping rank 0 is not stuck past --hang-after"
wait_screen "^ +1 +$B .* stuck .*spin" 30 || fail "the spinning rank 1 is not stuck past --hang-after"
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
echo ok
