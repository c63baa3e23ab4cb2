#!/bin/sh
# `ranktop record -- python3 -m torch.distributed.run ...`: a real 2-rank torchrun job (gloo)
# started by record. Both workers are recorded as ranks 0 and 1 (their own pids, written by
# the workers), the launcher is not a rank, and record ends with the job and its status.
. "$(dirname "$0")/lib.sh"

/usr/bin/python3 -c "import torch.distributed" 2>/dev/null || fail "python3-torch is not installed"
cat > "$WORK/job.py" <<'PY'
import os, sys, time
import torch
import torch.distributed as dist
def launched_step(t):
    dist.all_reduce(t)
dist.init_process_group("gloo")
t = torch.ones(64)
launched_step(t)
open(os.path.join(sys.argv[1], "rank.%d" % dist.get_rank()), "w").write(str(os.getpid()))
# A fixed count, not a wall-clock end: ranks that left the loop at different iterations
# would leave one waiting in an all_reduce the other never makes (gloo: connection reset).
for _ in range(200):
    launched_step(t)
    time.sleep(0.01)
dist.destroy_process_group()
PY
mkdir "$WORK/pids"
cd "$WORK"
run_rc 0 "$RANKTOP_BIN" record -o "$WORK/job.json" --nvidia-smi /nonexistent --npu-smi /nonexistent \
    -- /usr/bin/python3 -m torch.distributed.run --standalone --redirects 1 --tee 1 \
    --nproc_per_node 2 "$WORK/job.py" "$WORK/pids"
P0=$(cat "$WORK/pids/rank.0") P1=$(cat "$WORK/pids/rank.1")
json_check "$WORK/job.json" "sorted(e['args']['name'].split(' (pid ')[0] + ' ' + e['args']['name'].split(' (pid ')[1].split(',')[0].split(')')[0] for e in d['traceEvents'] if e.get('name') == 'process_name' and e['args']['name'].startswith('rank')) == ['rank 0 $P0', 'rank 1 $P1']"
json_check "$WORK/job.json" "not any(e.get('name') == 'process_name' and not e['args']['name'].startswith('rank') and 'pid' in e['args']['name'] for e in d['traceEvents'])"
json_check "$WORK/job.json" "len({e['pid'] for e in d['traceEvents'] if e.get('ph') == 'B' and e['name'].startswith('launched_step')}) == 2"
echo ok
