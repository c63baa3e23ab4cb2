#!/bin/sh
# At 80x24 the monitor keeps what matters: a merged-tree line keeps its rank set and count
# (`[0-1,3] x3`) whole, its long function name giving way, and the Memory view's sparkline
# keeps its newest values (the row ends in sparkline cells, not in a cut); at 200x50 every
# line is shown whole with every memory column.
. "$(dirname "$0")/lib.sh"

for r in 0 1 2 3; do
    if [ "$r" = 2 ]; then where=elsewhere; else where=outer_caller_with_a_rather_long_name; fi
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=4 python3 -S -c "import time
def waiting_for_the_next_batch_in_a_long_named_function():
    while True: time.sleep(0.05)
def outer_caller_with_a_rather_long_name():
    waiting_for_the_next_batch_in_a_long_named_function()
def elsewhere():
    while True: time.sleep(0.05)
$where()" &
    PIDS="$PIDS $!"
    eval "P$r=$!"
done
LEAF='waiting_for_the_next_batch_in_a_long_named'

ui_start narrow 80 24 -- "$RANKTOP_BIN" -p "$P0,$P1,$P2,$P3" --hang-after 600
wait_screen "^ +3 +$P3 " 30 || fail "rank 3 not listed at 80x24"
wait_screen "$LEAF.* +\[0-1,3\] x3( |$)" 30 || fail "the rank set of the leaf is cut at 80x24"
keys 5
wait_screen '^RANK +PID +RSS +dBASE .*RSS history$' 10 || fail "no Memory view at 80x24"
# spark_whole: rank 0's memory row ends in sparkline cells within 80 columns.
spark_whole() {
    screen > "$WORK/screen.txt" 2> /dev/null || return 1
    grep -Eq "^0 +$P0 .*(▁|▂|▃|▄|▅|▆|▇|█)$" "$WORK/screen.txt"
}
until_deadline 20 spark_whole || { show_screen "memory"; fail "the sparkline's newest cells are cut at 80x24"; }

resize 200 50
keys 1
wait_screen "$LEAF\_function \(<string>:3\) +\[0-1,3\] x3 +unchanged [0-9]" 20 ||
    fail "the leaf's line is not whole at 200x50"
keys 5
wait_screen '^RANK +PID +RSS +dBASE +d60s +USS +SWAP +RSS history$' 10 ||
    fail "the Memory view lacks columns at 200x50"
until_deadline 20 spark_whole || { show_screen "memory"; fail "no whole sparkline at 200x50"; }
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
echo ok
