#!/bin/sh
# The Chrome trace as viewers read it, from `ranktop record` of real CPython targets:
#  1. ids: the lane's pid is the target's real pid, the main thread's tid is that pid, the
#     worker thread's tid is its native id (from the target), thread names carry them;
#  2. names: slices are "function (file:line)" with no args at all (speedscope keys frames by
#     name plus args), one slice per (function, line) run: hot_loop's two lines are two slices
#     that meet, and the trace passes tests/tools/trace_check.py. The target alternates the two
#     lines, 0.1 s each (10 sample periods), and counts its descents; a record that caught
#     only one line (its reader starved for whole phases on a busy machine) is taken again, at
#     most 5 times, and a failure says which line was missing and how often the target had
#     been through both meanwhile;
#  3. counters that cannot be had: --gpu-usage with no GPU tool says so in one stderr line and
#     in otherData.counters_unavailable; --npu-usage, not asked for, is not mentioned;
#  4. why a named pid cannot be read: a non-Python process and a pid that does not exist each
#     get one line, as dump says it, and the Python target is still recorded;
#  5. torn stacks: on every CPython (3.8-3.13 and Debian's), a thread that keeps entering and
#     leaving a generator expression 13 calls deep, read at 1 kHz: every recorded stack starts
#     at the thread's entry (<module>, or Thread._bootstrap for the worker), never at a frame
#     whose callers are missing (they are retried or dropped and counted as lost).
. "$(dirname "$0")/lib.sh"
NONE="--nvidia-smi /nonexistent/nvidia-smi --npu-smi /nonexistent/npu-smi --no-device-libs --tool-timeout 1"
TARGET="$RANKTOP_SRCDIR/tests/py/genexpr_deep.py"

PHASE=0.1 RANK=0 start_ready python3 "$TARGET"
W=$(awk '{ print $2 }' "$WORK/ready")
wait_for test -s "$WORK/ready.descents" || fail "the target counted no descent"
# hot_loop's lines as the target's source has them: level(...), time.sleep(...), and its extent
HOT=$(python3 - "$TARGET" <<'PY'
import ast, sys
f = next(n for n in ast.walk(ast.parse(open(sys.argv[1]).read()))
         if isinstance(n, ast.FunctionDef) and n.name == "hot_loop")
calls = {getattr(c.func, "id", getattr(c.func, "attr", None)): c.lineno
         for c in ast.walk(f) if isinstance(c, ast.Call)}
print(calls["level"], calls["sleep"], f.lineno, f.end_lineno)
PY
) || fail "hot_loop's lines not found in $TARGET"
try=1
while :; do
    d0=$(cat "$WORK/ready.descents")
    # shellcheck disable=SC2086
    "$RANKTOP_BIN" record -p "$T" --all-threads -r 100 -d 2 --gpu-usage -o "$WORK/a.json" $NONE \
        2> "$WORK/a.err" || fail "record: $(cat "$WORK/a.err")"
    d1=$(cat "$WORK/ready.descents")
    # shellcheck disable=SC2086
    missing=$(python3 - "$WORK/a.json" "$T" $HOT <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
pid, lv, sl = (int(a) for a in sys.argv[2:5])
seen = {e["name"].rsplit(":", 1)[-1].rstrip(")") for e in d["traceEvents"]
        if e["ph"] == "B" and e.get("tid") == pid and e["name"].split(" (")[0].endswith("hot_loop")}
print(" ".join("%s(...) (line %d)" % (w, n) for w, n in (("level", lv), ("time.sleep", sl))
               if str(n) not in seen))
PY
    ) || fail "$WORK/a.json: not read"
    [ -z "$missing" ] && break
    [ $try -lt 5 ] || fail "in $try records of 2 s at 100 Hz the main thread's hot_loop was never" \
        "seen at $missing; the target began $((d1 - d0)) descents during the last one"
    echo "record $try: hot_loop not seen at $missing while the target began $((d1 - d0))" \
        "descents (each a level(...) and a time.sleep(...) phase); recording again"
    try=$((try + 1))
done
python3 "$RANKTOP_SRCDIR/tests/tools/trace_check.py" "$WORK/a.json" --lanes 1 --threads 2 \
    --slice hot_loop --slice reduce_all || fail "trace_check"

# shellcheck disable=SC2086
python3 - "$WORK/a.json" "$T" "$W" $HOT <<'PY' || fail "trace shape"
import json, re, sys
d = json.load(open(sys.argv[1]))
pid, wtid, lv, sl, first, last = (int(a) for a in sys.argv[2:8])
ev = d["traceEvents"]
meta = {(e["name"], e.get("tid")): e["args"] for e in ev if e["ph"] == "M"}
# 1. real ids
assert meta[("process_name", None)]["name"].startswith("rank 0 (pid %d" % pid), meta
assert {e["pid"] for e in ev} == {pid}, {e["pid"] for e in ev}
assert meta[("thread_name", pid)]["name"] == "MainThread (tid %d)" % pid, meta
assert meta[("thread_name", wtid)]["name"] == "reducer (tid %d)" % wtid, meta
assert {e.get("tid") for e in ev if e["ph"] in "BE"} == {pid, wtid}
# 2. names without args, one slice per (function, line) run
label = re.compile(r"^(\S.*) \((.+?)(?::(\d+))?\)$")
lines = {}
for e in ev:
    if e["ph"] in "BE":
        assert "args" not in e, e
    if e["ph"] == "B":
        m = label.match(e["name"])
        assert m and e["cat"] == "sampled", e
        if m.group(1).endswith("hot_loop") and e["tid"] == pid:
            lines.setdefault(int(m.group(3)), []).append(e["ts"])
# level(...) and time.sleep(...), as the target's source has them; any other line hot_loop was
# caught at in passing (its while, its if) is one of its own
assert {lv, sl} <= set(lines) and all(first <= n <= last for n in lines), (lv, sl, lines)
# a slice at one line ends where the same function's slice at its next line begins
stack, prev, meets = [], None, 0
fn = lambda name: name.split(" (")[0]
for e in ev:
    if e.get("tid") != pid or e["ph"] not in "BE":
        continue
    if e["ph"] == "B":
        if prev and prev[1:] == (e["ts"], len(stack)) and prev[0] != e["name"] and \
                fn(prev[0]) == fn(e["name"]):
            meets += 1
        stack.append(e["name"])
        prev = None
    else:
        prev = (stack.pop(), e["ts"], len(stack))
assert meets > 0, "no line change of a frame seen as one slice ending where the next begins"
# 3. the unavailable counters, in the metadata
assert d["otherData"]["counters_unavailable"] == {"gpu": "/nonexistent/nvidia-smi: no such file"}, \
    d["otherData"]
PY
n=$(grep -c -- '--gpu-usage: no GPU counters' "$WORK/a.err" || true)
[ "$n" = 1 ] || fail "--gpu-usage said $n times: $(cat "$WORK/a.err")"
grep -q 'npu' "$WORK/a.err" && fail "npu mentioned though not asked for: $(cat "$WORK/a.err")"
[ "$(grep -c 'nvidia-smi' "$WORK/a.err")" = 1 ] || fail "the GPU tool told twice: $(cat "$WORK/a.err")"

# 4. why named pids cannot be read
sleep 60 &
S=$!
PIDS="$PIDS $S"
G=999999
while kill -0 "$G" 2> /dev/null; do G=$((G - 1)); done
# A pid of no process stops the run before it starts (nothing written); one that is not
# Python is said once, and the others are recorded.
# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$S,$T,$G" -r 20 -d 1 -o "$WORK/b.json" $NONE 2> "$WORK/b.err" &&
    fail "record with a pid of no process ran: $(cat "$WORK/b.err")"
[ "$(cat "$WORK/b.err")" = "ranktop record: no process $G" ] || fail "missing pid: $(cat "$WORK/b.err")"
[ ! -e "$WORK/b.json" ] || fail "record with a pid of no process wrote its output"
# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$S,$T" -r 20 -d 1 -o "$WORK/b.json" $NONE 2> "$WORK/b.err" ||
    fail "record with an unreadable pid beside a Python one: $(cat "$WORK/b.err")"
[ "$(grep -c "process $S is not a Python process" "$WORK/b.err")" = 1 ] ||
    fail "non-Python pid: $(cat "$WORK/b.err")"
json_check "$WORK/b.json" "{e['pid'] for e in d['traceEvents']} == {$T}"
kill_tree "$T"

# 5. torn stacks, on every interpreter
for py in $ALL_PYTHONS; do
    [ -x "$py" ] || continue
    PAUSE=0 start_ready "$py" "$TARGET"
    # shellcheck disable=SC2086
    "$RANKTOP_BIN" record -p "$T" --all-threads -r 1000 -d 3 --format collapsed \
        -o "$WORK/t.folded" $NONE 2> "$WORK/t.err" || fail "$py: record: $(cat "$WORK/t.err")"
    kill_tree "$T"
    python3 - "$WORK/t.folded" <<'PY' || fail "$py: stacks not whole: $(grep 'lost' "$WORK/t.err")"
import sys
total = gen = 0
bad = {}
for ln in open(sys.argv[1]):
    stack, _, w = ln.rstrip("\n").rpartition(" ")
    parts = stack.split(";")
    thread, frames = parts[1], parts[2:]
    total += int(w)
    gen += int(w) * any(f.startswith("<genexpr> (") or ".<genexpr> (" in f for f in frames)
    want = ("<module> (",) if thread == "MainThread" else ("_bootstrap (", "Thread._bootstrap (")
    if not frames[0].startswith(want):
        bad[(thread, frames[0])] = bad.get((thread, frames[0]), 0) + int(w)
assert total > 1000 and gen > total // 10, (total, gen)
assert not bad, bad
PY
    echo "$py: $(grep 'lost as torn' "$WORK/t.err")"
done
echo ok
