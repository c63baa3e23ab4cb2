#!/bin/sh
# htop's marks in the monitor: the sort s/F6 chose shows in the header (`[sort CPU%]`) and its
# column title is highlighted; q or Esc on the help screen closes the help, not ranktop;
# Space tags a rank (`*` before its rank, `[1 tagged]` in the header), the merged tree and
# the export (e) then keep only the tagged ranks, U untags all; ΔRSS counts from each rank's
# first reading before any baseline is taken with m.
. "$(dirname "$0")/lib.sh"

CUE="$WORK/cue"
RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 python3 -S -c 'import time
def spot_alpha():
    while True: time.sleep(0.05)
spot_alpha()' &
A=$!
RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 python3 -S -c "import os, time
def spot_beta():
    block = None
    while True:
        if block is None and os.path.exists('$CUE'):
            block = b'x' * (64 << 20)
        time.sleep(0.05)
spot_beta()" &
B=$!
PIDS="$PIDS $A $B"
mkdir -p "$WORK/exp"
ui_start st 160 40 -- "$RANKTOP_BIN" -p "$A,$B" --hang-after 600 --export-dir "$WORK/exp"
wait_screen "^ +1 +$B .*spot_beta" 30 || fail "rank 1 not listed"
wait_screen "spot_beta \(.*\) +\[1\] x1" 30 || fail "the merged tree lacks rank 1"

# ΔRSS (after the RSS column) from the first reading, without m: 0 at first, then the
# 64 MiB rank 1 allocates (plus what it grew by after its first reading, at start-up).
wait_screen "^ +0 +$A .* [0-9.]+[KMG] +(0|[-+][0-9.]+[KMG]) .*spot_alpha" 20 ||
    fail "ΔRSS is not counted from the first reading before m"
touch "$CUE"
wait_screen "^ +1 +$B .* [0-9.]+[KMG] +\+(6[4-9]|7[0-9])M .*spot_beta" 30 ||
    fail "ΔRSS does not show rank 1's 64 MiB without a baseline"

# sorted_title TITLE: the column title TITLE is drawn as the sort column (black on cyan).
sorted_title() {
    screen_attrs | python3 -c 'import re, sys
for line in sys.stdin.read().splitlines():
    if re.search(r"RANK +PID", re.sub(r"\x1b\[[0-9;]*m", "", line)):
        i = line.find(sys.argv[1])
        codes = re.findall(r"\x1b\[([0-9;]*)m", line[:i])
        sys.exit(0 if i > 0 and codes and "46" in codes[-1].split(";") else 1)
sys.exit(1)' "$1"
}
until_deadline 10 sorted_title RANK || { show_screen "titles"; fail "RANK is not marked as the sort column"; }
keys s
wait_screen '^ranktop .*\[sort CPU%\]' 10 || fail "the header does not show the CPU sort"
until_deadline 10 sorted_title CPU% || fail "CPU% is not marked as the sort column"
keys F6
wait_screen '^ranktop .*\[sort RSS\]' 10 || fail "the header does not show the RSS sort (F6)"
keys s s s
wait_screen_gone '\[sort ' 10 || fail "the sort did not come back to the rank order"

# q and Esc close the help; ranktop goes on.
keys F1
wait_screen '^F3 or / +search as you type' 10 || fail "F1 did not open the help"
keys q
wait_screen '^ +RANK +PID ' 10 || fail "q did not close the help"
screen_lacks '^EXITED' || fail "q on the help screen quit ranktop"
keys '?'
wait_screen '^F3 or / +search as you type' 10 || fail "? did not open the help"
keys Escape
wait_screen '^ +RANK +PID ' 10 || fail "Esc did not close the help"

# Space tags rank 0 (the cursor's row): marked, counted in the header; the merged tree and
# the export keep it alone.
keys Space
wait_screen "^ +\*0 +$A " 10 || fail "the tagged rank is not marked"
wait_screen '^ranktop .*\[1 tagged\]' 10 || fail "the header does not count the tags"
wait_screen "spot_alpha \(.*\) +\[0\] x1" 10 || fail "the merged tree lost the tagged rank"
wait_screen_gone "spot_beta \(.*\) +\[" 10 || fail "the merged tree still shows the untagged rank"
keys e
wait_screen 'exported .*/exp/ranktop-.*\.json' 30 || fail "the export did not finish"
python3 - "$A" "$B" "$WORK"/exp/ranktop-*.json << 'PY' || fail "the export does not hold the tagged rank alone"
import json, sys
a, b = int(sys.argv[1]), int(sys.argv[2])
ev = json.load(open(sys.argv[3]))["traceEvents"]
pids = {e.get("pid") for e in ev}
names = " ".join(str(e.get("name")) for e in ev)
sys.exit(0 if a in pids and b not in pids and "spot_alpha" in names and "spot_beta" not in names else 1)
PY
keys U
wait_screen "spot_beta \(.*\) +\[1\] x1" 10 || fail "U did not bring the untagged rank back"
wait_screen_gone '\[1 tagged\]' 10 || fail "the header still counts tags after U"
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
echo ok
