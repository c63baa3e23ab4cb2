#!/bin/sh
# A real 4-rank torchrun job (gloo) recorded: four rank lanes, named and sorted by rank, each
# with the ranks' stacks (train_step / all_reduce), and the GIL and memory counters.
. "$(dirname "$0")/lib.sh"
CHECK="python3 $RANKTOP_SRCDIR/tests/tools/trace_check.py"

/usr/bin/python3 -c "import torch.distributed" 2>/dev/null || fail "python3-torch is not installed"
cd "$WORK"
mkdir "$WORK/ready"
READY_DIR="$WORK/ready" setsid /usr/bin/python3 -m torch.distributed.run --standalone \
    --nproc_per_node 4 --redirects 1 --tee 1 "$RANKTOP_SRCDIR/tests/py/ddp_job.py" \
    > "$WORK/job.log" 2>&1 &
LAUNCHER=$!
PIDS="$PIDS $LAUNCHER"
trap 'kill_tree $LAUNCHER; cleanup' EXIT INT TERM

four_ready() { # every rank has done its first step
    [ "$(ls "$WORK/ready" | wc -l)" -ge 4 ]
}
wait_for four_ready || fail "the job did not start: $(tail "$WORK/job.log")"

"$RANKTOP_BIN" record --children-of "$LAUNCHER" -r 20 -d 5 --gil-stats --cpu-mem-usage \
    -o "$WORK/job.json" --nvidia-smi /nonexistent --npu-smi /nonexistent 2> "$WORK/rec.err" ||
    fail "record: $(cat "$WORK/rec.err")"
$CHECK --lanes 4 --lane-name-regex '^rank [0-3] \(pid [0-9]+, ' "$WORK/job.json" || fail "trace check"
json_check "$WORK/job.json" "sorted(e['args']['name'].split()[1] for e in d['traceEvents'] if e.get('name') == 'process_name' and e['args']['name'].startswith('rank')) == ['0', '1', '2', '3']"
json_check "$WORK/job.json" "len({e['pid'] for e in d['traceEvents'] if e.get('ph') == 'B' and e['name'].split(' (')[0] == 'train_step'}) == 4"
json_check "$WORK/job.json" "any(e.get('ph') == 'C' and e['name'].startswith('GIL') for e in d['traceEvents'])"
json_check "$WORK/job.json" "any(e.get('ph') == 'C' and e['name'] == 'rss' for e in d['traceEvents'])"
echo ok
