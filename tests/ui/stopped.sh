#!/bin/sh
# A rank stopped with SIGSTOP (or held by a debugger) shows as stopped in the rank table, not
# as running, idle or stuck; once continued it is a live (idle) rank again. A process named with -p that
# cannot be read (here: not Python) gets a line under the table saying so, instead of vanishing.
. "$(dirname "$0")/lib.sh"

RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 python3 -S -c 'import time
def wait_here():
    while True: time.sleep(0.05)
wait_here()' &
A=$!
RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 python3 -S -c 'import time
def wait_here():
    while True: time.sleep(0.05)
wait_here()' &
B=$!
sleep 600 &
SL=$!
PIDS="$PIDS $A $B $SL"
ui_start st 160 40 -- "$RANKTOP_BIN" -p "$A,$B,$SL" --hang-after 600
wait_screen "^ +1 +$B .* (run|idle) .*wait_here" 30 || fail "rank 1 not listed as running"
wait_screen "pid $SL not sampled: process $SL is not a Python process" 30 ||
    fail "the unreadable process has no line"
kill -STOP "$B"
wait_screen "^ +1 +$B .* stopped .*wait_here" 30 || fail "the stopped rank is not shown as stopped"
screen_has "^ +0 +$A .* (run|idle) " || { show_screen "table"; fail "rank 0 is not running"; }
kill -CONT "$B"
wait_screen "^ +1 +$B .* (run|idle) .*wait_here" 30 || fail "the continued rank is not running again"
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
