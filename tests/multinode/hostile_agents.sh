#!/bin/sh
# Agent output is untrusted input: next to a healthy node, one agent writes garbage, a 200 KB
# line, control bytes and ids out of range; one speaks protocol 9; one dies after its hello.
# The head records the healthy node whole, says what went wrong on each other host, never
# crashes, and retries the one that died.
. "$(dirname "$0")/../e2e/lib.sh"
. "$RANKTOP_SRCDIR/tests/multinode/nodes.sh"
trap 'node_stop_all; cleanup' EXIT
trap 'exit 1' INT TERM

for n in node01 evil future crashy; do node_start $n || exit $?; done
node_spawn node01 env RANK=0 WORLD_SIZE=1 python3 "$RANKTOP_SRCDIR/tests/py/waits_in.py" \
    all_reduce < /dev/null
export REAL_RANKTOP="$RANKTOP_BIN"
$RANKTOP_BIN record -o "$WORK/t.json" -d 6 --hosts node01,evil,future,crashy \
    --rsh "$RANKTOP_SRCDIR/tests/multinode/fake-rsh" \
    --remote-ranktop "$RANKTOP_SRCDIR/tests/multinode/hostile-ranktop" > "$WORK/out" 2>&1 ||
    fail "record exited $?: $(cat "$WORK/out")"
cat "$WORK/out"
python3 "$RANKTOP_SRCDIR/tests/tools/trace_check.py" "$WORK/t.json" --lanes 1 \
    --lane-name-regex '^rank 0 \(pid [0-9]+, node01' --slice all_reduce || fail "node01's lane"
grep -q '^ranktop: host node01: up, 1 ranks' "$WORK/out" || fail "node01 not up"
grep -q '^ranktop: host evil?\[2J: .*last error: agent stream: ' "$WORK/out" ||
    fail "evil: no stream error (or its control bytes reached the output)"
grep -q '^ranktop: host future: .*protocol 9\.0' "$WORK/out" || fail "future: no version error"
grep -Eq '^ranktop: host crashy: .*, [2-9] connects' "$WORK/out" || fail "crashy not retried"
echo ok
