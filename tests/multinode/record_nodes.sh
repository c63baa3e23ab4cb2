#!/bin/sh
# record, ls and dump across two simulated nodes (namespaces reached through fake-rsh) whose
# ranks have the same pids: one trace with a lane per rank named with its host, ls and dump
# tagging every process with its host (dump's --async and --native-all reaching every host's
# ranktop), and a host that does not resolve as an error, not a
# failure of the others. No agent is left on any node afterwards.
. "$(dirname "$0")/../e2e/lib.sh"
. "$RANKTOP_SRCDIR/tests/multinode/nodes.sh"
trap 'node_stop_all; cleanup' EXIT
trap 'exit 1' INT TERM

RSH="$RANKTOP_SRCDIR/tests/multinode/fake-rsh"
PY="$RANKTOP_SRCDIR/tests/py/waits_in.py"
node_start node01 || exit $?
node_start node02 || exit $?
node_spawn node01 env RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 python3 "$PY" all_reduce < /dev/null
node_spawn node02 env RANK=1 LOCAL_RANK=0 WORLD_SIZE=2 python3 "$PY" load_batch_slowly < /dev/null
HOSTS="--hosts node[01-02],ghost --rsh $RSH --remote-ranktop $RANKTOP_BIN"

# ls: both ranks with their hosts (the same pid on both: each node's first Python process).
# (Waits until both ranks have started: on a loaded machine a node's Python may be slow to.)
both_listed() {
    # shellcheck disable=SC2086
    "$RANKTOP_BIN" ls --json $HOSTS --no-device-libs > "$WORK/ls.json" 2> /dev/null
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(sorted((p["host"], p["rank"]) for p in d["processes"]) != [("node01", 0), ("node02", 1)])' "$WORK/ls.json"
}
wait_for both_listed || true
json_check "$WORK/ls.json" "sorted((p['host'], p['rank']) for p in d['processes']) == [('node01', 0), ('node02', 1)]"
json_check "$WORK/ls.json" "[h['host'] for h in d['hosts'] if not h['ok']] == ['ghost'] and any('ghost' in e and 'not known' in e for e in d['errors'])"

# dump: every rank of every host, in its function.
$RANKTOP_BIN dump --json $HOSTS > "$WORK/dump.json" && fail "dump with an unknown host exited 0"
json_check "$WORK/dump.json" "{(p.get('host'), p['threads'][0]['frames'][0]['function']) for p in d['processes'] if p.get('threads')} == {('node01', 'all_reduce'), ('node02', 'load_batch_slowly')}"
json_check "$WORK/dump.json" "any(p.get('host') == 'ghost' and p['error'] for p in d['processes'])"
# dump --async reaches the other hosts' ranktop too: every thread read there has its (empty:
# no asyncio in these ranks) task list, every process a null async_error.
$RANKTOP_BIN dump --async --json $HOSTS > "$WORK/adump.json" && fail "dump --async with an unknown host exited 0"
json_check "$WORK/adump.json" "{p.get('host') for p in d['processes'] if p.get('threads') and p['async_error'] is None and all(t['tasks'] == [] for t in p['threads'])} == {'node01', 'node02'}"
# dump --native-all reaches them too: every thread read there says whether it has Python
# ("python", only with --native-all) and each host's rank has native frames merged in.
$RANKTOP_BIN dump --native-all --json $HOSTS > "$WORK/ndump.json" && fail "dump --native-all with an unknown host exited 0"
json_check "$WORK/ndump.json" "{p.get('host') for p in d['processes'] if p.get('threads') and p['native_error'] is None and all('python' in t for t in p['threads']) and any(f['kind'] == 'native' for t in p['threads'] for f in t['frames'])} == {'node01', 'node02'}"

# record: one trace, a lane per rank named with its host, both functions as slices.
$RANKTOP_BIN record -o "$WORK/t.json" -d 4 -r 20 $HOSTS > "$WORK/rec.out" 2>&1 ||
    fail "record --hosts exited $?: $(cat "$WORK/rec.out")"
python3 "$RANKTOP_SRCDIR/tests/tools/trace_check.py" "$WORK/t.json" --lanes 2 \
    --lane-name-regex '^rank 0 \(pid [0-9]+, node01' --lane-name-regex '^rank 1 \(pid [0-9]+, node02' \
    --slice all_reduce --slice load_batch_slowly || fail "trace over two nodes"
# The slices of both nodes overlap in time: clocks were aligned, not concatenated.
python3 - "$WORK/t.json" << 'PYEOF' || fail "the two nodes' slices do not overlap in time"
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
span = {}
for e in ev:
    fn = e.get("name", "").split(" (")[0]  # slices are named "function (file:line)"
    if e.get("ph") in ("B", "E", "X") and fn in ("all_reduce", "load_batch_slowly"):
        a, b = span.get(fn, (e["ts"], e["ts"]))
        span[fn] = (min(a, e["ts"]), max(b, e["ts"] + e.get("dur", 0)))
(a0, a1), (b0, b1) = span["all_reduce"], span["load_batch_slowly"]
sys.exit(0 if a0 < b1 and b0 < a1 else 1)
PYEOF

# The same through one pdsh for every host (its exec module runs fake-rsh per host).
if command -v pdsh > /dev/null; then
    $RANKTOP_BIN record -o "$WORK/p.json" -d 4 -r 20 --hosts node01,node02,ghost \
        --launcher pdsh --rsh "pdsh -R exec -- $RSH %h" --remote-ranktop "$RANKTOP_BIN" \
        > "$WORK/pdsh.out" 2>&1 || fail "record through pdsh exited $?: $(cat "$WORK/pdsh.out")"
    python3 "$RANKTOP_SRCDIR/tests/tools/trace_check.py" "$WORK/p.json" --lanes 2 \
        --lane-name-regex 'node01' --lane-name-regex 'node02' --slice load_batch_slowly ||
        fail "trace through pdsh"
    # ghost's error is its lines of pdsh's stderr: the remote shell's words, then pdsh's status.
    grep -q '^ranktop: host ghost: down, .*ghost: Name or service not known | .*exit code 255' \
        "$WORK/pdsh.out" || fail "pdsh: ghost not down, or not why: $(cat "$WORK/pdsh.out")"
else
    echo "skipped: the pdsh part (pdsh is not installed)"
fi

node_wait_no_agent 10 node01 node02 || fail "an agent is left after record"
echo ok
