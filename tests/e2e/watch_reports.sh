#!/bin/sh
# `ranktop watch` reports without torch: a rank killed by SIGSEGV while three wait gives a
# report at once (before --hang-after) with the signal (where exit statuses can be learnt) and
# the survivors' stacks, and --exit-on-hang exits 3; SIGUSR1 gives a report whatever the
# verdict (one asked for at once waits for the first sample), with the asyncio tasks of a rank
# that runs a loop; one hang gives one report, however many ticks judge it; a rank that is the
# odd one out in most ticks gets a straggler report (--slow-after); a watcher SIGKILLed while
# writing leaves every report directory complete or absent (only a hidden temp directory,
# which the next watcher removes); the help names the command; a process it cannot read is
# named on stderr.
. "$(dirname "$0")/lib.sh"
CHECK="python3 $RANKTOP_SRCDIR/tests/tools/report_check.py"
NOSMI="--nvidia-smi /nonexistent --npu-smi /nonexistent"

run_ranks() { # four ranks; rank 3 computes, ranks 0-2 wait in all_reduce
    for r in 0 1 2 3; do
        RANK=$r WORLD_SIZE=4 python3 -c 'import os, time
def all_reduce():
    while True:
        time.sleep(0.05)
def compute():
    while True:
        time.sleep(0.05)
(compute if os.environ["RANK"] == "3" else all_reduce)()' &
        PIDS="$PIDS $!"
        eval "P$r=$!"
    done
}
run_ranks
LIST="$P0,$P1,$P2,$P3"

"$RANKTOP_BIN" watch --help | grep -q -- '--exit-on-hang' || fail "watch --help"
"$RANKTOP_BIN" --help | grep -q '^  watch' || fail "ranktop --help names no watch"
run_rc 2 "$RANKTOP_BIN" watch -p "$LIST"
grep -q 'use --out DIR' "$WORK/err" || fail "no --out: $(cat "$WORK/err")"
# A process it cannot read is named on stderr, not watched in silence.
sleep 600 &
NP=$!
PIDS="$PIDS $NP"
# shellcheck disable=SC2086
"$RANKTOP_BIN" watch -p "$NP" --out "$WORK/n" $NOSMI 2> "$WORK/n.err" &
N=$!
PIDS="$PIDS $N"
notpy() { grep -q "process $NP is not a Python process" "$WORK/n.err"; }
wait_for notpy || fail "no word of a process that is not Python: $(cat "$WORK/n.err")"
kill -TERM $N
wait $N || true

# SIGUSR1: a report now, though nothing hangs yet (--hang-after 600).
# shellcheck disable=SC2086
"$RANKTOP_BIN" watch -p "$LIST" --out "$WORK/u" --hang-after 600 $NOSMI 2> "$WORK/u.err" &
U=$!
PIDS="$PIDS $U"
# A signal before the watcher takes it would end it: its "watching" line says it does.
watching() { grep -q '^ranktop watch: watching' "$1"; }
# ask PID DIR: SIGUSR1 until an on-demand report with every rank's stack is in DIR.
ask() {
    kill -USR1 "$1"
    sleep 1
    for j in "$2"/ranktop-ondemand-*/report.json; do
        [ -f "$j" ] && python3 -c 'import json, sys
sys.exit(len(json.load(open(sys.argv[1]))["stacks"]) < int(sys.argv[2]))' "$j" "$3" && return 0
    done
    return 1
}
wait_for watching "$WORK/u.err" || fail "watch did not start: $(cat "$WORK/u.err")"
# Asked for as soon as it listens, the report still names every rank: it waits for the
# first sample.
kill -USR1 $U
first() { ls "$WORK/u"/ranktop-ondemand-*/report.json > /dev/null 2>&1; }
wait_for first || fail "SIGUSR1 gave no report: $(cat "$WORK/u.err")"
json_check "$(ls "$WORK/u"/ranktop-ondemand-*/report.json | head -1)" "len(d['ranks']) == 4"
wait_for ask $U "$WORK/u" 4 || fail "SIGUSR1 gave no report: $(cat "$WORK/u.err")"
kill -TERM $U
wait $U || fail "watch exited $? on SIGTERM"
$CHECK "$WORK"/u/ranktop-ondemand-* > /dev/null || fail "on-demand report check"
for j in "$WORK"/u/ranktop-ondemand-*/report.json; do
    json_check "$j" "d['kind'] == 'ondemand' and d['verdict']['hang'] is False"
done

# asyncio: a rank running a loop has its tasks in the report.
python3 -c 'import asyncio
async def fetch_batch():
    await asyncio.sleep(3600)
async def main():
    await asyncio.gather(asyncio.create_task(fetch_batch(), name="loader"))
asyncio.run(main())' &
AP=$!
PIDS="$PIDS $AP"
# shellcheck disable=SC2086
"$RANKTOP_BIN" watch -p "$AP" --out "$WORK/a" --hang-after 600 $NOSMI 2> "$WORK/a.err" &
AW=$!
PIDS="$PIDS $AW"
wait_for watching "$WORK/a.err" || fail "watch did not start: $(cat "$WORK/a.err")"
tasks_read() { ask $AW "$WORK/a" 1 && grep -q 'Task "loader"' "$WORK"/a/ranktop-ondemand-*/report.txt; }
wait_for tasks_read || fail "no asyncio task in the report: $(cat "$WORK"/a/*/report.txt)"
kill -TERM $AW
wait $AW || true
kill $AP

# SIGSEGV of rank 3 while 0-2 wait: a report at once, exit 3.
# shellcheck disable=SC2086
"$RANKTOP_BIN" watch -p "$LIST" --out "$WORK/s" --hang-after 600 --exit-on-hang $NOSMI \
    2> "$WORK/s.err" &
S=$!
PIDS="$PIDS $S"
wait_for watching "$WORK/s.err" || fail "watch did not start: $(cat "$WORK/s.err")"
wait_for ask $S "$WORK/s" 4 || fail "SIGUSR1 gave no report: $(cat "$WORK/s.err")"
kill -SEGV "$P3"
rc=0
wait $S || rc=$?
[ $rc -eq 3 ] || fail "watch exited $rc after a rank died, not 3: $(cat "$WORK/s.err")"
R=$(echo "$WORK"/s/ranktop-hang-*)
$CHECK "$R" > /dev/null || fail "death report check"
json_check "$R/report.json" "d['kind'] == 'exit' and d['dead']['rank'] == 3"
json_check "$R/report.json" "d['dead']['exit_signal'] == 'SIGSEGV' or not d['exit_status_known']"
json_check "$R/report.json" "sorted(p['rank'] for p in d['stacks'] if any(t['frames'] for t in p['threads'])) == [0, 1, 2]"
grep -q "^dead: rank 3 (pid $P3) on .*: \(SIGSEGV\|exited\)" "$R/report.txt" || fail "report.txt: $(head -5 "$R/report.txt")"

# One hang report however long the hang lasts: ranks 0-2 hang; two ticks asked for with SIGUSR1
# after the hang report (each judges the verdict again) write no second one.
# shellcheck disable=SC2086
"$RANKTOP_BIN" watch -p "$P0,$P1,$P2" --out "$WORK/o" --hang-after 2 $NOSMI 2> "$WORK/o.err" &
O=$!
PIDS="$PIDS $O"
wait_for watching "$WORK/o.err" || fail "watch did not start: $(cat "$WORK/o.err")"
hung() { ls "$WORK/o" 2> /dev/null | grep -q '^ranktop-hang-'; }
wait_for hung || fail "no hang report: $(cat "$WORK/o.err")"
ondemand() { [ "$(ls "$WORK/o" | grep -c '^ranktop-ondemand-')" -ge "$1" ]; }
kill -USR1 $O
wait_for ondemand 1 || fail "no first on-demand report"
sleep 1 # a second stamp: the two on-demand reports are told apart by name anyway (-N)
kill -USR1 $O
wait_for ondemand 2 || fail "no second on-demand report"
kill -TERM $O
wait $O || true
[ "$(ls "$WORK/o" | grep -c '^ranktop-hang-')" -eq 1 ] || fail "the same hang reported again: $(ls "$WORK/o")"

# A straggler: every rank moves (no hang), in step with the others by the clock as a collective
# would keep them, but rank 3 is always somewhere the others are not.
# Its report names it and gives every rank's shares of the kinds of wait.
for r in 0 1 2 3; do
    RANK=$r WORLD_SIZE=4 python3 -c 'import os, time
def all_reduce(s):
    time.sleep(s)
def load_batch(s):
    time.sleep(s)
slow = os.environ["RANK"] == "3"
while True:
    t = time.time() % 0.9
    if t < 0.6:
        (load_batch if slow else all_reduce)(0.6 - t)
    else:
        (all_reduce if slow else load_batch)(0.9 - t)' &
    PIDS="$PIDS $!"
    eval "Q$r=$!"
done
# shellcheck disable=SC2086
"$RANKTOP_BIN" watch -p "$Q0,$Q1,$Q2,$Q3" --out "$WORK/g" --slow-after 5 $NOSMI 2> "$WORK/g.err" &
G=$!
PIDS="$PIDS $G"
straggled() { ls "$WORK/g" 2> /dev/null | grep -q '^ranktop-straggler-'; }
wait_for straggled || fail "no straggler report: $(cat "$WORK/g.err")"
kill -TERM $G
wait $G || true
R=$(echo "$WORK"/g/ranktop-straggler-*)
$CHECK "$R" > /dev/null || fail "straggler report check"
json_check "$R/report.json" "d['kind'] == 'straggler' and d['straggler']['rank'] == 3 and d['straggler']['odd_share'] > 0.5"
json_check "$R/report.json" "sorted(r['rank'] for r in d['straggler']['ranks']) == [0, 1, 2, 3] and all(abs(sum(r['wait_shares'].values()) - 1) < 0.01 for r in d['straggler']['ranks'])"
grep -q '^straggler: rank 3' "$R/report.txt" || fail "report.txt: $(head -3 "$R/report.txt")"
kill $Q0 $Q1 $Q2 $Q3

# SIGKILL while writing: each report directory is whole or absent. The three live ranks hang
# (--hang-after 1); each watcher is asked for reports and killed after a growing delay.
i=0
while [ $i -lt 6 ]; do
    # shellcheck disable=SC2086
    "$RANKTOP_BIN" watch -p "$P0,$P1,$P2" --out "$WORK/k" --hang-after 1 $NOSMI 2> /dev/null &
    K=$!
    sleep 1.$i
    kill -USR1 $K 2> /dev/null || true
    sleep 0.$((i * 15 % 10))
    kill -KILL $K
    wait $K 2> /dev/null || true
    i=$((i + 1))
done
for d in "$WORK"/k/ranktop-*; do
    [ -e "$d" ] || continue
    for f in report.txt report.json; do
        [ -s "$d/$f" ] || fail "$d has no $f after a SIGKILL"
    done
    # The traces report.json names are there whole; one it names none of (nothing sampled
    # yet) is absent.
    python3 -c 'import gzip, json, os, sys
d = sys.argv[1]
t = json.load(open(os.path.join(d, "report.json")))["trace"]
for k, f in (("perfetto", "trace.pftrace.gz"), ("chrome", "trace.json.gz")):
    p = os.path.join(d, f)
    if t[k] is None:
        assert not os.path.exists(p), p + " is there, not named"
    else:
        assert t[k] == f and len(gzip.open(p).read()) > 0, p' "$d" || fail "$d is cut after a SIGKILL"
done
# The next watcher removes what killed ones left half-made.
touch "$WORK/k/.ranktop-report.999999999.abcdef" 2> /dev/null || true
mkdir -p "$WORK/k/.ranktop-report.999999998.abcdef"
# shellcheck disable=SC2086
timeout 60 "$RANKTOP_BIN" watch -p "$P0" --out "$WORK/k" $NOSMI 2> "$WORK/k.err" &
K=$!
gone() { ! ls -a "$WORK/k" | grep -q '^\.ranktop-report\.99999999[8]'; }
wait_for gone || fail "a stale temp directory was left: $(ls -a "$WORK/k")"
kill -TERM $K
wait $K || true
echo ok
