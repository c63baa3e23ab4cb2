#!/bin/sh
# record --async keeps task lanes bounded (--task-lanes N: at most N live lanes and N ended
# ones per rank) and says what it left out, in the summary and in the Chrome trace's otherData.
# 1. tests/py/async_churn.py (batches of 50 short tasks created and finished as fast as the
#    loop runs, beside the steady task) and tests/py/async_server.py (2 000 tasks a second,
#    each alive 50 ms), --task-lanes 8: never more than 16 task lanes, however many tasks came
#    and went; the ended lanes beyond 8 folded away are counted, the same count in the summary
#    line and in otherData.task_lanes; the "asyncio tasks" counter has the live task count of
#    each read. How many of async_churn's tasks a read catches varies from run to run; every
#    read of async_server's sees about 100 tasks, most of them new, so its lanes are folded
#    from the third read on. On the first and the last interpreter found.
# 2. async_churn.py with 30 tasks parked for good and no churn (32 live tasks at every read:
#    the parked ones, steady and the main task), --task-lanes 8: exactly 8 task lanes, 24 live
#    tasks without a lane at every read (live_unlaned_max 24, and in the summary), nothing
#    folded (no task ended), and the counter says 32. On every interpreter.
. "$(dirname "$0")/lib.sh"
NONE="--nvidia-smi /nonexistent --npu-smi /nonexistent --tool-timeout 1"
PY="$RANKTOP_SRCDIR/tests/py/async_churn.py"

check() { # TRACE.json SUMMARY PID CASE
    python3 - "$1" "$2" "$3" "$4" <<'PYEOF'
import json, re, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
summary = open(sys.argv[2], encoding="utf-8").read()
pid, case = int(sys.argv[3]), sys.argv[4]
ev = d["traceEvents"]
lanes = [e["args"]["name"] for e in ev
         if e.get("ph") == "M" and e.get("name") == "thread_name" and e["pid"] == pid]
tasks = [n for n in lanes if n.startswith("task ")]
counts = [e["args"]["count"] for e in ev
          if e.get("ph") == "C" and e.get("name") == "asyncio tasks" and e["pid"] == pid]
if "task_lanes" not in d["otherData"] and case in ("churn", "server"):
    sys.exit(3)  # no task read came back whole (torn under churn on a busy machine): again
tl = d["otherData"]["task_lanes"]
m = re.search(r"ranktop: task lanes: (\d+) ended ones folded away \(8 kept per rank\), at most "
              r"(\d+) live tasks of a read without a lane \(8 per rank\)", summary)
assert m, summary
assert tl["cap_per_rank"] == 8, tl
assert (int(m.group(1)), int(m.group(2))) == (tl["ended_folded"], tl["live_unlaned_max"]), (m.groups(), tl)
assert counts, "no asyncio tasks counter"
if case == "churn":
    assert 1 <= len(tasks) <= 16, tasks
elif case == "server":
    assert 9 <= len(tasks) <= 16, tasks
    assert tl["ended_folded"] > 0 and tl["live_unlaned_max"] > 0, tl
    assert max(counts) > 8, counts
else:
    assert len(tasks) == 8, tasks
    assert tl == {"cap_per_rank": 8, "ended_folded": 0, "live_unlaned_max": 24}, tl
    assert set(counts) == {32}, counts
print(case, len(tasks), "task lanes", tl)
PYEOF
}

first="" last=""
for py in $ALL_PYTHONS; do
    [ -x "$py" ] || continue
    first=${first:-$py}
    last=$py
    start_ready "$py" "$PY" 30
    # shellcheck disable=SC2086
    "$RANKTOP_BIN" record -p "$T" --async --task-lanes 8 -d 1 -f chrome -o "$WORK/p.json" $NONE \
        2> "$WORK/p.err" || fail "$py: record --async (parked): $(cat "$WORK/p.err")"
    check "$WORK/p.json" "$WORK/p.err" "$T" parked || fail "$py: the live-lane cap"
    kill "$T"
done
[ -n "$first" ] || fail "no interpreter found: $ALL_PYTHONS"

# Under churn every task read of a record may come back torn on a busy machine (then the trace
# has no task lanes to judge): such a record is taken again, at most 5 times. async_churn gets a
# 1 ms pause after each batch of 50 tasks: under CI load every read of five records in a row
# once came back torn without it (a preempted read spans many batches).
for py in $first $last; do
    for case in churn server; do
        if [ $case = churn ]; then
            start_ready "$py" "$RANKTOP_SRCDIR/tests/py/async_churn.py" 0 1
        else
            start_ready "$py" "$RANKTOP_SRCDIR/tests/py/async_server.py"
        fi
        try=0
        while :; do
            try=$((try + 1))
            # shellcheck disable=SC2086
            "$RANKTOP_BIN" record -p "$T" --async --task-lanes 8 -d 3 -f chrome \
                -o "$WORK/c.json" $NONE 2> "$WORK/c.err" ||
                fail "$py: record --async ($case): $(cat "$WORK/c.err")"
            rc=0
            check "$WORK/c.json" "$WORK/c.err" "$T" $case || rc=$?
            [ $rc = 0 ] && break
            [ $rc = 3 ] && [ $try -lt 5 ] && continue
            [ $rc = 3 ] && fail "$py: task lanes ($case): no task read came back whole in 5 records: $(cat "$WORK/c.err")"
            fail "$py: task lanes ($case)"
        done
        kill "$T"
    done
done
# --task-lanes wants a whole number of at least 1.
"$RANKTOP_BIN" record -p 1 --async --task-lanes 0 -o "$WORK/x.json" 2> "$WORK/x.err" &&
    fail "--task-lanes 0 accepted"
grep -q -- "--task-lanes" "$WORK/x.err" || fail "--task-lanes 0: $(cat "$WORK/x.err")"
echo ok
