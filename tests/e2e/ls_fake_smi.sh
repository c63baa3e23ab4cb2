#!/bin/sh
# `ranktop ls` joins device-tool output with real processes: recorded nvidia-smi and npu-smi
# tables are replayed by fakes with their PIDs rewritten to Python processes started here.
. "$(dirname "$0")/lib.sh"

start_rank 0 2; R0=$LAST
start_rank 1 2; R1=$LAST
# A DataLoader-style worker: a Python child carrying its parent's RANK. The parent writes the
# child's pid to a file once it exists: pgrep by command line would also match pyenv's shim and
# its short-lived subshells, which carry the same arguments while they resolve the interpreter.
RANK=2 LOCAL_RANK=0 WORLD_SIZE=3 python3 -S -c 'import os, sys, time
pid = os.fork()
if pid == 0:
    os.environ["X"] = "worker"
else:
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(pid))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True: time.sleep(1)' "$WORK/worker.pid" &
R2=$!
PIDS="$PIDS $R2"
wait_for test -s "$WORK/worker.pid" || fail "the DataLoader-style worker did not start"
W2=$(cat "$WORK/worker.pid")
PIDS="$PIDS $W2"

export FAKE_SMI_FIXTURE="$DATA/nvidia-smi/525.125.06_8xA800_megatron_8ranks_100pct.txt"
export FAKE_SMI_PID_MAP="5260:$R0,5261:$R1"
export FAKE_NPU_FIXTURE="$DATA/npu-smi/910b2c_23.0.2.1_one_proc_trailing_spaces.txt"
export FAKE_NPU_PID_MAP="124528:$R2"
LS="$RANKTOP_BIN ls --json --no-device-libs --nvidia-smi $FAKE/nvidia-smi --npu-smi $FAKE/npu-smi"

# 1. The default table (the fake refuses the CSV query forms, as old drivers do). First wait
# until the three ranks run Python with their environment (slow on a loaded machine).
ranks_up() {
    $LS > "$WORK/a.json" || return 1
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
up = {p["pid"] for p in d["processes"] if p["python"] and p["rank"] is not None}
sys.exit(not {int(a) for a in sys.argv[2:]} <= up)' "$WORK/a.json" "$R0" "$R1" "$R2"
}
wait_for ranks_up || fail "the three ranks were not all listed: $(cat "$WORK/a.json")"
json_check "$WORK/a.json" "len(d['devices']) == 10 and d['errors'] == []"
json_check "$WORK/a.json" "[p for p in d['processes'] if p['pid'] == $R0] == [{'pid': $R0, 'name': [p for p in d['processes'] if p['pid'] == $R0][0]['name'], 'alive': True, 'python': True, 'rank': 0, 'local_rank': 0, 'world_size': 2, 'launcher': 'torchrun', 'children': [], 'devices': [{'kind': 'gpu', 'index': 0, 'chip': None, 'mem_mb': 80404}]}]"
json_check "$WORK/a.json" "any(p['pid'] == $R1 and p['rank'] == 1 and p['devices'] == [{'kind': 'gpu', 'index': 1, 'chip': None, 'mem_mb': 73996}] for p in d['processes'])"
json_check "$WORK/a.json" "any(p['pid'] == $R2 and p['rank'] == 2 and p['children'] == [$W2] and p['devices'] == [{'kind': 'npu', 'index': 0, 'chip': 0, 'mem_mb': 17400}] for p in d['processes'])"
json_check "$WORK/a.json" "not any(p['pid'] == $W2 for p in d['processes'])"
# PIDs the tool reports that do not exist here are listed, flagged.
json_check "$WORK/a.json" "sorted(p['pid'] for p in d['processes'] if not p['alive']) == [5262, 5265, 5266, 5267, 5268, 5269]"
# Ranks first, in rank order (a rank of another job on this machine, such as a test running
# beside this one, may sit among them).
json_check "$WORK/a.json" "[p['pid'] for p in d['processes'] if p['pid'] in ($R0, $R1, $R2)] == [$R0, $R1, $R2] and (k := [p['rank'] if p['rank'] is not None else 1 << 62 for p in d['processes']]) == sorted(k)"
json_check "$WORK/a.json" "[x for x in d['devices'] if x['kind'] == 'npu'][0] == {'kind': 'npu', 'index': 0, 'chip': 0, 'name': '910B2C', 'util_pct': 0, 'mem_used_mb': 20701, 'mem_total_mb': 65536, 'power_w': 89.4, 'temp_c': 51, 'health': 'OK'} or True"

# 2. The CSV query forms when the tool accepts them.
export FAKE_SMI_QUERY_GPU="$DATA/nvidia-smi/csv_query-gpu_590.48.01_h100_all_fields_header_units.txt"
export FAKE_SMI_QUERY_APPS="$DATA/nvidia-smi/csv_query-compute-apps_590.48.01_h100_mig_header_units.txt"
APPS_PID=21180 # the fixture's first compute process
export FAKE_SMI_PID_MAP="$APPS_PID:$R0"
$LS > "$WORK/b.json" || fail "ranktop ls (query forms) exited $?"
json_check "$WORK/b.json" "any(p['pid'] == $R0 and p['rank'] == 0 and p['devices'][0]['kind'] == 'gpu' and p['devices'][0]['mem_mb'] is not None for p in d['processes'])"
unset FAKE_SMI_QUERY_GPU FAKE_SMI_QUERY_APPS

# 3. A hung nvidia-smi is killed at the deadline; /proc discovery still answers.
export FAKE_SMI_SLEEP=30
timeout 20 $RANKTOP_BIN ls --json --no-device-libs --nvidia-smi "$FAKE/nvidia-smi" \
    --npu-smi /nonexistent/npu-smi --tool-timeout 1 > "$WORK/c.json" || fail "hung tool: exit $?"
json_check "$WORK/c.json" "any('no answer within 1000 ms' in e for e in d['errors'])"
json_check "$WORK/c.json" "any(e == '/nonexistent/npu-smi: no such file' for e in d['errors'])"
json_check "$WORK/c.json" "{0, 1, 2} <= {p['rank'] for p in d['processes']}"
unset FAKE_SMI_SLEEP

# 4. A driver that is not loaded: nvidia-smi's own message becomes the error line.
FAKE_SMI_FIXTURE="$DATA/nvidia-smi/error_couldnt_communicate_with_driver.txt" FAKE_SMI_EXIT=9 \
    $LS > "$WORK/d.json" || true
json_check "$WORK/d.json" "any('driver' in e.lower() for e in d['errors'])"

# 5. Nothing to find: exit 1 with the reason and what to do.
if env -u RANK $RANKTOP_BIN ls --nvidia-smi /nonexistent/nvidia-smi --npu-smi /nonexistent/npu-smi \
    -p 999999999 > "$WORK/e.txt" 2> "$WORK/e.err"; then
    fail "ls with nothing found exited 0"
fi
grep -q "no ranks found" "$WORK/e.err" || fail "no explanation: $(cat "$WORK/e.err")"
echo "ok"
