#!/bin/sh
# The WAIT column and the HANG banner name each rank's kind of wait: two ranks asleep in
# time.sleep in host code read `host`, a third blocked reading a pipe nobody writes reads `io`
# and is the odd rank the banner names with its kind; SIGSTOPped, it reads `stopped`.
. "$(dirname "$0")/lib.sh"

for r in 0 1; do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=3 python3 -S -c 'import time
def nap():
    while True: time.sleep(0.05)
nap()' &
    PIDS="$PIDS $!"
    eval "P$r=$!"
done
RANK=2 LOCAL_RANK=2 WORLD_SIZE=3 python3 -S -c 'import os
r, w = os.pipe()
def read_pipe():
    os.read(r, 1)
read_pipe()' &
P2=$!
PIDS="$PIDS $P2"
ui_start wait 160 30 -- "$RANKTOP_BIN" -p "$P0,$P1,$P2" --hang-after 3
wait_screen "^ +0 +$P0 .* host .*nap" 30 || fail "rank 0 asleep in host code is not host"
wait_screen "^ +2 +$P2 .* io .*read_pipe" 30 || fail "rank 2 reading a pipe is not io"
wait_screen '^HANG [0-9]+s: 2 ranks in nap .*; odd: rank 2 in read_pipe .* \[io\]' 30 ||
    fail "the banner does not name rank 2's kind of wait"
kill -STOP "$P2"
wait_screen "^ +2 +$P2 .* stopped +stopped .*read_pipe" 30 || fail "the stopped rank is not stopped"
kill -CONT "$P2"
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
echo ok
