#!/bin/sh
# dump --async on every interpreter (pyenv's 3.8-3.13, Debian's static python3.11 and, where
# tests/sid_chroot.sh built it, Debian sid's live python3.14 and python3.15): the
# tasks of tests/py/async_tasks.py (nested tasks, gather, a Queue, to_thread, non-ASCII names,
# a second loop in another thread whose current task blocks it, a loop never run, finished
# tasks kept alive, a subinterpreter) as the target itself saw them (asyncio.all_tasks,
# _fut_waiter, cr_await chains): under the thread running each loop (the main thread, marked
# unknown, for the loop never run), the same task names, states, awaiting tasks and whole
# await chains (function, file, line, innermost first); the finished ones done or cancelled. The text output shows the same tasks; under task churn every read is whole
# or says it was torn; a process without asyncio has none. The same target again with every
# task a pure-Python asyncio.tasks._PyTask, made by each loop's task factory beside C futures
# (pytask), and with the _asyncio module blocked, so that tasks, futures, gathers and the
# registries are all pure Python (pure): the same tasks, read from their instance dicts.
. "$(dirname "$0")/lib.sh"

PY="$RANKTOP_SRCDIR/tests/py/async_tasks.py"

compare() { # DUMP.json TRUTH.json MODE
    python3 - "$1" "$2" "$3" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
truth = json.load(open(sys.argv[2], encoding="utf-8"))
mode = sys.argv[3]
p = d["processes"][0]
assert p["error"] is None and p["async_error"] is None, (p["error"], p["async_error"])
threads = {t["tid"]: t for t in p["threads"]}
main_tid = truth["loops"][0]["tid"]
want_by = {}  # thread -> the live tasks of the loops it runs (unknown: the main thread)
for loop in truth["loops"]:
    for t in loop["tasks"]:
        want_by.setdefault(loop["tid"] or main_tid, {})[t["name"]] = (t, loop["tid"] is not None)
seen = 0
for tid, want in want_by.items():
    th = threads.get(tid)
    assert th is not None, "no thread %d in the dump" % tid
    got = {t["name"]: t for t in th["tasks"] if t["state"] in ("pending", "running")}
    assert sorted(got) == sorted(want), ("task names", sorted(got), sorted(want))
    for name, (w, known) in want.items():
        g = got[name]
        assert g["state"] == w["state"], (name, g["state"], w["state"])
        assert sorted(g["awaited_by"]) == w["awaited_by"], (name, g["awaited_by"], w["awaited_by"])
        gf = [(f["function"], f["file"], f["line"]) for f in g["frames"]]
        wf = [(f["function"], f["file"], f["line"]) for f in w["frames"]]
        assert gf == wf, (name, gf, wf)
        assert g["thread_known"] == known and not g["truncated"], name
        seen += 1
# Finished tasks still referenced: in the registry, under their loop's thread, no frames
# (3.14+ unlinks a task from its thread's list when it finishes: there, absent).
done = {t["name"]: t for t in threads[main_tid]["tasks"] if t["state"] in ("done", "cancelled")}
v314 = tuple(int(x) for x in p["python"].split(".")[:2]) >= (3, 14)
for h in truth["held"]:
    if v314:
        assert all(h["name"] != t["name"] for th in p["threads"] for t in th["tasks"]), h
        continue
    assert h["name"] in done and done[h["name"]]["state"] == h["state"], (h, sorted(done))
    assert done[h["name"]]["frames"] == [], h
# The shapes the target was built to have, so that a truth gone wrong cannot pass either.
names = {t["name"]: t for loop in truth["loops"] for t in loop["tasks"]}
# A pure-Python future is awaited through Future.__await__, a generator: one frame more.
fns = lambda t: [f["function"] for f in t["frames"] if not f["function"].endswith("__await__")]
assert all(t["py"] == (mode != "c") for t in names.values()), [(n, t["py"]) for n, t in names.items()]
assert (mode == "pure") == any(f["function"].endswith("__await__") for f in names["inner"]["frames"])
assert names["inner"]["awaited_by"] == ["outer-ü"]
assert fns(names["inner"])[1:] == ["level2", "level1"]
assert names["g-1"]["awaited_by"] == ["gatherer"] and names["g-2"]["awaited_by"] == ["gatherer"]
assert names["side-blocker"]["state"] == "running" and names["side-blocker"]["awaited_by"] == ["side-main"]
assert names["задача-函数-😀"]["frames"][-1]["function"] == "ждать_ü"
assert fns(names["queue-waiter"])[0].endswith("get")
assert names["idle-task"]["frames"][0]["function"] == "never_started"
if len(truth["loops"]) == 4:  # 3.12+: the eager loop
    assert names["eager-blocker"]["state"] == "running", names["eager-blocker"]
    assert names["eager-main"]["frames"][0]["function"] == "eager_main"
assert sorted(h["state"] for h in truth["held"]) == ["cancelled", "done"]
assert seen >= 14 + 2 * (len(truth["loops"]) == 4), seen
print("compared", seen, "tasks")
PYEOF
}

n=0
for py in $ALL_PYTHONS; do
    [ -x "$py" ] || continue
    n=$((n + 1))
    start_ready "$py" "$PY"
    $RANKTOP_BIN dump --async --json -p "$T" > "$WORK/a.json" 2> "$WORK/a.err" ||
        fail "$py: dump --async failed: $(cat "$WORK/a.err")"
    compare "$WORK/a.json" "$WORK/ready.json" c || fail "$py: tasks differ from the target's own view"
    $RANKTOP_BIN dump --async -p "$T" > "$WORK/a.txt" 2> "$WORK/a.err" || fail "$py: text dump"
    grep -q '^  Task "inner" (pending) awaited by "outer-ü"$' "$WORK/a.txt" || fail "$py: text: inner"
    grep -q '^  Task "side-blocker" (running) awaited by "side-main"$' "$WORK/a.txt" ||
        fail "$py: text: side-blocker"
    grep -q '^      ждать_ü (.*async_tasks.py:[0-9]*)$' "$WORK/a.txt" || fail "$py: text: frames"
    grep -q '^  Task "idle-task" (pending) \[loop thread unknown\]$' "$WORK/a.txt" ||
        fail "$py: text: idle-task"
    case $py in # 3.14+ lists no finished task (see compare)
    */python3.1[4-9]) ;;
    *) grep -q '^  Task "cancelled-one" (cancelled)$' "$WORK/a.txt" || fail "$py: text: cancelled" ;;
    esac
    # Without --async the JSON has no task keys at all.
    $RANKTOP_BIN dump --json -p "$T" > "$WORK/p.json" || fail "$py: dump without --async"
    json_check "$WORK/p.json" "'async_error' not in d['processes'][0] and not any('tasks' in t for t in d['processes'][0]['threads'])" ||
        fail "$py: dump without --async changed"
    # The target runs a subinterpreter (3.10+) that the main thread entered once: the main
    # thread is listed once, with its stack (not the subinterpreter's empty state as well),
    # and the main thread alone is that of the main interpreter, not of the list's newest.
    json_check "$WORK/p.json" "[t['name'] for t in d['processes'][0]['threads']].count('MainThread') == 1 and [t for t in d['processes'][0]['threads'] if t['name'] == 'MainThread'][0]['frames']" ||
        fail "$py: the main thread is not listed once with its frames: $(cat "$WORK/p.json")"
    $RANKTOP_BIN record -p "$T" -d 1 -f collapsed -o "$WORK/m.folded" > "$WORK/m.err" 2>&1 ||
        fail "$py: record of the main thread failed: $(cat "$WORK/m.err")"
    grep -q '<module> (.*async_tasks.py:[0-9]*)' "$WORK/m.folded" ||
        fail "$py: record of the main thread has no stack of the main interpreter: $(head -c 600 "$WORK/m.folded")"
    kill "$T"
done
[ "$n" -ge 2 ] || fail "fewer than two interpreters found: $ALL_PYTHONS"

# Pure-Python tasks (asyncio.tasks._PyTask), with C futures and with everything pure Python.
# On 3.14+ the reader reads the C module's task lists only: with every task pure Python it
# must say that it did not read them, never answer "no tasks" (pytask cannot run there:
# asyncio.current_task, from the C module, does not see a _PyTask run by the C loop).
for py in $ALL_PYTHONS; do
    [ -x "$py" ] || continue
    if "$py" -c 'import sys; sys.exit(sys.version_info < (3, 14))'; then
        start_ready "$py" "$PY" pure
        $RANKTOP_BIN dump --async --json -p "$T" > "$WORK/a.json" 2> "$WORK/a.err" ||
            fail "$py pure: dump --async failed: $(cat "$WORK/a.err")"
        json_check "$WORK/a.json" "'pure-Python task' in (d['processes'][0]['async_error'] or '') and d['processes'][0]['error'] is None" ||
            fail "$py pure: the pure-Python tasks were not reported as unread"
        kill "$T"
        continue
    fi
    for mode in pytask pure; do
        start_ready "$py" "$PY" "$mode"
        $RANKTOP_BIN dump --async --json -p "$T" > "$WORK/a.json" 2> "$WORK/a.err" ||
            fail "$py $mode: dump --async failed: $(cat "$WORK/a.err")"
        compare "$WORK/a.json" "$WORK/ready.json" "$mode" ||
            fail "$py $mode: tasks differ from the target's own view"
        $RANKTOP_BIN dump --async -p "$T" > "$WORK/a.txt" 2> "$WORK/a.err" || fail "$py: text dump"
        grep -q '^  Task "inner" (pending) awaited by "outer-ü"$' "$WORK/a.txt" ||
            fail "$py $mode: text: inner"
        kill "$T"
    done
done

# Tasks created and finished as fast as the loop runs: every dump exits 0 with valid JSON and
# either one line saying the read was torn, or tasks that include "steady" with its whole
# chain (a registry that changed under the read is never reported mixed or half-read).
for py in $ALL_PYTHONS; do
    [ -x "$py" ] || continue
    start_ready "$py" "$RANKTOP_SRCDIR/tests/py/async_churn.py"
    i=0
    while [ $i -lt 15 ]; do
        i=$((i + 1))
        $RANKTOP_BIN dump --async --json -p "$T" > "$WORK/c.json" 2> "$WORK/c.err" ||
            fail "$py: churn: dump failed (exit $?): $(head -c 600 "$WORK/c.err") $(head -c 600 "$WORK/c.json")"
        json_check "$WORK/c.json" "(p := d['processes'][0])['error'] is None and (
(p['async_error'] or '').startswith('asyncio tasks: ') or
[[f['function'].split('.')[-1] for f in t['frames']][1:] for th in p['threads'] for t in th['tasks'] if t['name'] == 'steady'] == [['steady_inner', 'steady_outer']])" ||
            fail "$py: churn: a wrong answer"
    done
    kill "$T"
done

# A process that never imported asyncio: no tasks, no error.
rm -f "$WORK/ready"
python3 -c 'import sys, threading
sys.path.insert(0, sys.argv[2])
from readyfile import write_ready
write_ready(sys.argv[1])
threading.Event().wait()' "$WORK/ready" "$RANKTOP_SRCDIR/tests/py" &
T=$!
PIDS="$PIDS $T"
wait_for test -s "$WORK/ready" || fail "the no-asyncio target did not start"
$RANKTOP_BIN dump --async --json -p "$T" > "$WORK/n.json" || fail "no asyncio: dump failed"
json_check "$WORK/n.json" "d['processes'][0]['async_error'] is None and all(t['tasks'] == [] for t in d['processes'][0]['threads'])" ||
    fail "no asyncio: tasks or an error"
echo ok
