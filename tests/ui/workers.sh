#!/bin/sh
# DataLoader-style workers: a rank named with -p brings its forked Python children that carry
# its rank; drilling into the rank (Rank view) shows each worker's main thread and stack under
# it, while the rank table keeps one row per rank and the merged tree merges ranks only.
. "$(dirname "$0")/lib.sh"

RANK=5 LOCAL_RANK=1 WORLD_SIZE=8 python3 "$RANKTOP_SRCDIR/tests/py/workers.py" "$WORK/ready" &
RANK_PID=$!
PIDS="$PIDS $RANK_PID"
wait_for test -s "$WORK/ready" || fail "the rank did not start"
W1=$(sed -n 1p "$WORK/ready.workers")
W2=$(sed -n 2p "$WORK/ready.workers")

ui_start wk 160 45 -- "$RANKTOP_BIN" -p "$RANK_PID"
wait_screen "^ +5 +$RANK_PID .*train_step" 30 || fail "rank 5 not listed in train_step"
rank_row_count_is 1 || { show_screen "table"; fail "a worker got a row of its own"; }
keys 2
wait_screen "Worker pid $W1 Thread MainThread \(tid $W1\)" 30 || fail "Rank view: no worker $W1"
wait_screen "Worker pid $W2 Thread MainThread \(tid $W2\)" 30 || fail "Rank view: no worker $W2"
screen_has 'fetch_batch \(.*workers\.py:[0-9]+\)' || { show_screen "Rank view"; fail "no worker stack"; }
screen_has 'Thread MainThread \(tid [0-9]+\) main' || fail "the rank's own main thread is missing"
# The merged tree compares ranks: the workers' fetch_batch is not merged into it.
keys 1
wait_screen 'train_step' 20 || fail "merged tree without the rank"
screen_lacks 'fetch_batch' || { show_screen "merged"; fail "a worker's stack was merged as a rank"; }
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
