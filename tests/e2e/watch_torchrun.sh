#!/bin/sh
# `ranktop watch` on a real 4-rank torchrun job (gloo) whose rank 2 stalls loading a batch
# while the others wait in the all-reduce. The watcher (--hang-after 5 --exit-on-hang) writes
# one report naming rank 2 and "data" (the others "collective"), with every rank's stacks and
# native frames, runs --on-hang with the report's path and exits 3. The job is not disturbed:
# once the stall ends it completes (exit 0). The report validates against its schema and its
# traces check. (SIGUSR1 and one report per hang: watch_reports.)
. "$(dirname "$0")/lib.sh"
CHECK="python3 $RANKTOP_SRCDIR/tests/tools/report_check.py"

/usr/bin/python3 -c "import torch.distributed" 2>/dev/null || fail "python3-torch is not installed"
cd "$WORK"
mkdir "$WORK/ready"
touch "$WORK/stall"
READY_DIR="$WORK/ready" STALL_RANK=2 STALL_FILE="$WORK/stall" setsid /usr/bin/python3 \
    -m torch.distributed.run --standalone --nproc_per_node 4 --redirects 1 --tee 1 \
    "$RANKTOP_SRCDIR/tests/py/watch_job.py" > "$WORK/job.log" 2>&1 &
LAUNCHER=$!
PIDS="$PIDS $LAUNCHER"
trap 'kill_tree $LAUNCHER; cleanup' EXIT INT TERM
NOSMI="--nvidia-smi /nonexistent --npu-smi /nonexistent"
export HOOK_OUT="$WORK/hook.out"
# The watchers start once every rank has done a step: importing torch on a busy machine can
# keep all four still in one import for longer than --hang-after, a hang by the verdict's rule.
four_ready() { [ "$(ls "$WORK/ready" | wc -l)" -ge 4 ]; }
wait_for four_ready || fail "the job did not start: $(tail "$WORK/job.log")"

# shellcheck disable=SC2086
timeout 300 "$RANKTOP_BIN" watch --children-of "$LAUNCHER" --out "$WORK/a" --hang-after 5 \
    --exit-on-hang --on-hang 'echo "$RANKTOP_REPORT" > "$HOOK_OUT"; echo hook ran' $NOSMI \
    2> "$WORK/a.err" &
A=$!
PIDS="$PIDS $A"

rc=0
wait $A || rc=$?
[ $rc -eq 3 ] || fail "watch --exit-on-hang exited $rc, not 3: $(cat "$WORK/a.err"); job: $(tail "$WORK/job.log")"
[ "$(ls "$WORK/a" | wc -l)" -eq 1 ] || fail "not one report: $(ls -a "$WORK/a")"
R=$(echo "$WORK"/a/ranktop-hang-*)
[ -d "$R" ] || fail "no ranktop-hang-* directory: $(ls -a "$WORK/a")"
grep -q "hang report $R: HANG" "$WORK/a.err" || fail "no stderr line names the report: $(cat "$WORK/a.err")"
[ "$(cat "$WORK/hook.out")" = "$R" ] || fail "--on-hang got RANKTOP_REPORT '$(cat "$WORK/hook.out")', not $R"
grep -q "hook ran" "$R/on-hang.log" || fail "--on-hang's output is not in on-hang.log"
$CHECK "$R" || fail "report check"
J="$R/report.json"
# Rank 2 alone is the odd one, loading data; the others are in the all-reduce.
json_check "$J" "[(o['rank'], o['where'].split()[0]) for o in d['verdict']['odd']] == [(2, 'read_sample')]"
json_check "$J" "d['verdict']['hang'] and d['verdict']['where'].startswith('all_reduce') and d['verdict']['majority_ranks'] == 3"
json_check "$J" "sorted(r['rank'] for r in d['ranks']) == [0, 1, 2, 3]"
# The kinds of wait: rank 2 data, the others collective.
json_check "$J" "sorted((r['rank'], r['wait']) for r in d['ranks']) == [(0, 'collective'), (1, 'collective'), (2, 'data'), (3, 'collective')]"
json_check "$J" "d['verdict']['odd'][0]['wait'] == 'data'"
# Every rank's stacks, read by dump, with native frames; rank 2's through the DataLoader.
json_check "$J" "sorted(p['rank'] for p in d['stacks'] if p['source'] == 'dump') == [0, 1, 2, 3]"
json_check "$J" "all(any(f.get('kind') == 'native' for t in p['threads'] for f in t['frames']) for p in d['stacks'])"
json_check "$J" "any((f['function'] or '').endswith('DataLoaderIter.__next__') for p in d['stacks'] if p['rank'] == 2 for t in p['threads'] for f in t['frames'])"
grep -q '^odd: rank 2 (pid [0-9]*) on .* in read_sample .*, waiting for data' "$R/report.txt" || fail "report.txt names no odd rank 2: $(head -5 "$R/report.txt")"
grep -q '\[native\]' "$R/report.txt" || fail "report.txt has no native frame"

# The stall ends: the job completes, undisturbed.
rm "$WORK/stall"
rc=0
wait $LAUNCHER || rc=$?
[ $rc -eq 0 ] || fail "the job exited $rc after the stall: $(tail -20 "$WORK/job.log")"
cp "$R/report.txt" "${WATCH_REPORT_COPY:-/dev/null}" 2>/dev/null || true
echo ok
