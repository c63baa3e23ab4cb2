#!/bin/sh
# `ranktop watch` across two simulated nodes (fake-rsh): ranks 0 and 2 on node01 wait in
# all_reduce, rank 1 on node02 loads data; the hang report names rank 1 and its host, in
# report.json and report.txt, and carries every rank with its host. No agent is left after.
. "$(dirname "$0")/../e2e/lib.sh"
. "$RANKTOP_SRCDIR/tests/multinode/nodes.sh"
trap 'node_stop_all; cleanup' EXIT
trap 'exit 1' INT TERM

RSH="$RANKTOP_SRCDIR/tests/multinode/fake-rsh"
PY="$RANKTOP_SRCDIR/tests/py/waits_in.py"
node_start node01 || exit $?
node_start node02 || exit $?
node_spawn node01 env RANK=0 LOCAL_RANK=0 WORLD_SIZE=3 python3 "$PY" all_reduce < /dev/null
node_spawn node01 env RANK=2 LOCAL_RANK=1 WORLD_SIZE=3 python3 "$PY" all_reduce < /dev/null
node_spawn node02 env RANK=1 LOCAL_RANK=0 WORLD_SIZE=3 python3 "$PY" load_batch_slowly < /dev/null

rc=0
timeout 300 "$RANKTOP_BIN" watch --hosts node01,node02 --rsh "$RSH" --remote-ranktop "$RANKTOP_BIN" \
    --out "$WORK/r" --hang-after 3 --exit-on-hang --no-device-libs 2> "$WORK/err" || rc=$?
[ $rc -eq 3 ] || fail "watch --hosts exited $rc, not 3: $(cat "$WORK/err")"
R=$(echo "$WORK"/r/ranktop-hang-*)
python3 "$RANKTOP_SRCDIR/tests/tools/report_check.py" "$R" > /dev/null || fail "report check"
json_check "$R/report.json" "[(o['rank'], o['host']) for o in d['verdict']['odd']] == [(1, 'node02')]"
json_check "$R/report.json" "sorted((r['rank'], r['host']) for r in d['ranks']) == [(0, 'node01'), (1, 'node02'), (2, 'node01')]"
json_check "$R/report.json" "sorted((p['rank'], p['host']) for p in d['stacks']) == [(0, 'node01'), (1, 'node02'), (2, 'node01')]"
grep -q '^odd: rank 1 (pid [0-9]*) on node02 in load_batch_slowly' "$R/report.txt" ||
    fail "report.txt does not name rank 1 on node02: $(head -5 "$R/report.txt")"
node_wait_no_agent 10 node01 node02 || fail "an agent is left after watch"
echo ok
