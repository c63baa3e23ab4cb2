#!/bin/sh
# record --async on every interpreter (pyenv's 3.8-3.13 and Debian's static python3.11): the
# tasks of tests/py/async_tasks.py (nested tasks, gather, a Queue, to_thread, non-ASCII names,
# a second loop in another thread) each get one Chrome trace lane of their own, named
# "task NAME", in the rank's process, whose slices are exactly the task's await chain as the
# target itself saw it (cr_await from get_coro(): function, file, line), the innermost
# coroutine nested deepest; the threads keep their own lanes (--all-threads: on 3.13 a process
# with a subinterpreter shows no main-thread stack without it, a reader issue of its own). Without --async there is no
# task lane, and a process without asyncio records none.
. "$(dirname "$0")/lib.sh"
NONE="--nvidia-smi /nonexistent --npu-smi /nonexistent --tool-timeout 1"

check() { # TRACE.json TRUTH.json PID
    python3 - "$1" "$2" "$3" <<'PYEOF'
import json, re, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
truth = json.load(open(sys.argv[2], encoding="utf-8"))
pid = int(sys.argv[3])
ev = d["traceEvents"] if isinstance(d, dict) else d
lanes = {}
for e in ev:
    if e.get("ph") == "M" and e.get("name") == "thread_name" and e["pid"] == pid:
        lanes.setdefault(e["args"]["name"], []).append(e["tid"])
tasks = {n[5:]: tids for n, tids in lanes.items() if n.startswith("task ")}
# The threads keep their own lanes beside the tasks'.
assert any(n.startswith("MainThread") for n in lanes), sorted(lanes)
assert sum(not n.startswith("task ") for n in lanes) >= 3, sorted(lanes)  # + side-loop, to_thread
want = {t["name"]: t for loop in truth["loops"] for t in loop["tasks"]
        if t["state"] in ("pending", "running")}
assert len(want) >= 13, sorted(want)
assert sorted(tasks) == sorted(want), ("task lanes", sorted(tasks), sorted(want))
frame = re.compile(r"^(.*) \((.*):(\d+)\)$")
for name, w in want.items():
    assert len(tasks[name]) == 1, ("one lane per task", name, tasks[name])
    tid = tasks[name][0]
    # Slices of the lane: B/E pairs (or X); depth of each B is its nesting.
    depth, seen = 0, {}
    for e in ev:
        if e.get("pid") != pid or e.get("tid") != tid:
            continue
        if e.get("ph") in ("B", "X"):
            m = frame.match(e["name"])
            assert m, e["name"]
            seen.setdefault((m.group(1), m.group(2), int(m.group(3))), set()).add(depth)
            depth += e["ph"] == "B"
        elif e.get("ph") == "E":
            depth -= 1
    chain = [(f["function"], f["file"], f["line"]) for f in w["frames"]]
    assert set(seen) == set(chain), (name, sorted(seen), chain)
    # Outermost coroutine at depth 0, the innermost (awaiting) one deepest.
    for k, f in enumerate(reversed(chain)):
        assert seen[f] == {k}, (name, f, seen[f], k)
names = {t["name"]: t for t in want.values()}
assert names["inner"]["frames"][0]["function"].endswith("wait"), names["inner"]["frames"]
assert [f["function"] for f in names["inner"]["frames"]][1:] == ["level2", "level1"]
assert names["задача-函数-😀"]["frames"][-1]["function"] == "ждать_ü"
print("compared", len(want), "task lanes")
PYEOF
}

n=0
for py in $ALL_PYTHONS; do
    [ -x "$py" ] || continue
    n=$((n + 1))
    start_ready "$py" "$RANKTOP_SRCDIR/tests/py/async_tasks.py"
    # shellcheck disable=SC2086
    "$RANKTOP_BIN" record -p "$T" --async --all-threads -d 2 -f chrome -o "$WORK/a.json" $NONE \
        2> "$WORK/a.err" || fail "$py: record --async: $(cat "$WORK/a.err")"
    check "$WORK/a.json" "$WORK/ready.json" "$T" || fail "$py: task lanes differ from the target's own view"
    # shellcheck disable=SC2086
    "$RANKTOP_BIN" record -p "$T" --all-threads -d 1 -f chrome -o "$WORK/p.json" $NONE 2> "$WORK/p.err" ||
        fail "$py: record without --async: $(cat "$WORK/p.err")"
    json_check "$WORK/p.json" "not any(e.get('ph') == 'M' and e['args'].get('name', '').startswith('task ') for e in (d['traceEvents'] if isinstance(d, dict) else d))" ||
        fail "$py: a task lane without --async"
    kill "$T"
done
[ "$n" -ge 2 ] || fail "fewer than two interpreters found: $ALL_PYTHONS"

# A process that never imported asyncio: no task lane, no error.
python3 -S "$RANKTOP_SRCDIR/tests/py/phases.py" "$WORK/ready2" &
PIDS="$PIDS $!"
P=$!
wait_for test -f "$WORK/ready2" || fail "phases.py did not start"
# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$P" --async -d 1 -f chrome -o "$WORK/n.json" $NONE 2> "$WORK/n.err" ||
    fail "record --async without asyncio: $(cat "$WORK/n.err")"
grep -q ' 0 errors' "$WORK/n.err" || fail "errors without asyncio: $(cat "$WORK/n.err")"
json_check "$WORK/n.json" "not any(e.get('ph') == 'M' and e['args'].get('name', '').startswith('task ') for e in (d['traceEvents'] if isinstance(d, dict) else d))" ||
    fail "a task lane without asyncio"
echo ok
