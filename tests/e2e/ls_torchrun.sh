#!/bin/sh
# A real 4-rank torchrun job (gloo, Debian's python3-torch) is found through /proc with the
# right ranks, and through --children-of the launcher.
. "$(dirname "$0")/lib.sh"

/usr/bin/python3 -c "import torch.distributed" 2>/dev/null || fail "python3-torch is not installed"
cd "$WORK"
setsid /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node 4 --redirects 1 --tee 1 \
    "$RANKTOP_SRCDIR/tests/py/ddp_job.py" > "$WORK/job.log" 2>&1 &
LAUNCHER=$!
PIDS="$PIDS $LAUNCHER"
trap 'kill_tree $LAUNCHER; cleanup' EXIT INT TERM

four_ranks() {
    "$RANKTOP_BIN" ls --json --no-device-libs --nvidia-smi /nonexistent/nvidia-smi \
        --npu-smi /nonexistent/npu-smi "$@" > "$WORK/ls.json" 2>/dev/null || return 1
    python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
ranks = sorted(p["rank"] for p in d["processes"] if p["world_size"] == 4)
sys.exit(0 if ranks == [0, 1, 2, 3] else 1)' "$WORK/ls.json"
}

wait_for four_ranks || fail "4 ranks not found through /proc: $(cat "$WORK/ls.json"; tail "$WORK/job.log")"
json_check "$WORK/ls.json" "all(p['python'] and p['alive'] and p['local_rank'] == p['rank'] for p in d['processes'] if p['world_size'] == 4)"
json_check "$WORK/ls.json" "$LAUNCHER not in [p['pid'] for p in d['processes']]"

wait_for four_ranks --children-of "$LAUNCHER" || fail "4 ranks not found through --children-of"
json_check "$WORK/ls.json" "len(d['processes']) == 4"
echo "ok"
