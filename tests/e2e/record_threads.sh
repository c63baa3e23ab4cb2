#!/bin/sh
# `ranktop record --sampler-threads N`: the ranks' stacks are read on N threads at once and
# still land, whole, in the right rank. Three ranks of bench/targets/threads8.py (8 threads
# each, parked 20 levels deep, so every thread's stack is known to the frame) and one rank of
# tests/py/phases.py, read on 3 threads; then bad values are refused.
. "$(dirname "$0")/lib.sh"
NONE="--nvidia-smi /nonexistent --npu-smi /nonexistent --tool-timeout 1"

ALL=
for r in 1 2 3; do
    RANK=$r python3 -S "$RANKTOP_SRCDIR/bench/targets/threads8.py" idle > "$WORK/t$r.out" &
    PIDS="$PIDS $!"
    ALL="$ALL,$!"
    wait_for grep -qs ready "$WORK/t$r.out" || fail "threads8.py rank $r did not start"
done
RANK=0 python3 -S "$RANKTOP_SRCDIR/tests/py/phases.py" "$WORK/ready" &
PIDS="$PIDS $!"
ALL="$!$ALL"
wait_for test -f "$WORK/ready" || fail "phases.py did not start"

# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$ALL" --all-threads -r 50 -d 3 --sampler-threads 3 --format collapsed \
    -o "$WORK/a.folded" $NONE 2> "$WORK/a.err" || fail "record: $(cat "$WORK/a.err")"
grep -q '^ranktop: stacks read on 3 threads$' "$WORK/a.err" || fail "summary: $(cat "$WORK/a.err")"
python3 - "$WORK/a.folded" <<'PY' || fail "collapsed stacks"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
ranks = {}
for ln in lines:
    stack, _, count = ln.rpartition(" ")
    parts = stack.split(";")
    ranks.setdefault(parts[0], []).append((parts[1], parts[2:]))
assert set(ranks) == {"rank 0", "rank 1", "rank 2", "rank 3"}, sorted(ranks)
for r in ("rank 1", "rank 2", "rank 3"):
    threads = {t for t, _ in ranks[r]}
    assert len(threads) == 8, (r, threads)
    for t, frames in ranks[r]:
        # level(20) recurses down to 3: 18 frames of it on every thread, all of threads8.py
        n = sum(1 for f in frames if re.match(r"level \(.*threads8\.py:\d+\)$", f))
        assert n == 18, (r, t, n, frames)
        assert not any("phases.py" in f for f in frames), (r, t, frames)
seen = {f.split(" ")[0] for _, frames in ranks["rank 0"] for f in frames}
assert {"phase_a", "phase_b", "phase_c"} <= seen, seen
assert not any("threads8.py" in f for _, fr in ranks["rank 0"] for f in fr)
PY

for bad in 0 5 1.5 x; do
    # shellcheck disable=SC2086
    "$RANKTOP_BIN" record -p "$ALL" -d 1 --sampler-threads "$bad" -o "$WORK/b.json" $NONE \
        2> "$WORK/b.err" && fail "--sampler-threads $bad accepted"
    grep -q -- '--sampler-threads' "$WORK/b.err" || fail "--sampler-threads $bad: $(cat "$WORK/b.err")"
done
echo ok
