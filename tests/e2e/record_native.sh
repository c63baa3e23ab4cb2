#!/bin/sh
# record --native and agent --native: on every interpreter, a thread blocked in libc pause()
# through ctypes is recorded with the native pause frame inside its Python frame
# wait_in_pause (Chrome trace: a "native" slice nested in the Python slices; collapsed: the
# same order), every sample merged; the target runs on, untraced. The agent's stream marks the
# frame native. A target already traced by another tracer gets one line on stderr and is
# recorded with its Python frames.
. "$(dirname "$0")/lib.sh"

PY="$RANKTOP_SRCDIR/tests/py/pause_native.py"
PYTHONS=$ALL_PYTHONS

n=0
for py in $PYTHONS; do
    [ -x "$py" ] || continue
    n=$((n + 1))
    start_ready "$py" "$PY"
    sleep 0.3 # in pause() by now: ready is written just before the call
    $RANKTOP_BIN record --native -p "$T" -d 1.5 -o "$WORK/t.json" 2> "$WORK/t.err" ||
        fail "$py: record --native: $(cat "$WORK/t.err")"
    grep -q 'native' "$WORK/t.err" && fail "$py: record --native complained: $(cat "$WORK/t.err")"
    # Every sample of the main thread nests pause (native) inside wait_in_pause (Python): the
    # open slices when pause begins, outermost first, end ... wait_in_pause, <native...>, pause.
    # Slices are named "function (file:line)", native ones "symbol (object)".
    json_check "$WORK/t.json" "(
(ev := [e for e in (d['traceEvents'] if isinstance(d, dict) else d) if e.get('ph') in ('B', 'E')]) and
(opened := []) == [] and
all((opened.append(e) if e['ph'] == 'B' else opened.pop()) or True for e in ev[:[i for i, e in enumerate(ev) if e['ph'] == 'B' and e['name'].startswith('pause (')][0] + 1]) and
[e['name'].split(' (')[0] for e in opened if e['cat'] != 'native'][-2:] == ['outer', 'wait_in_pause'] and
opened[-1]['name'].startswith('pause (') and opened[-1]['cat'] == 'native' and
opened[-1]['name'].endswith('.so.6)'))" || fail "$py: trace nesting"
    $RANKTOP_BIN record --native -p "$T" -d 1 --format collapsed -o "$WORK/c.txt" 2> /dev/null ||
        fail "$py: record --native collapsed"
    grep -q ';wait_in_pause (.*);pause (' "$WORK/c.txt" ||
        fail "$py: collapsed: $(head -c 600 "$WORK/c.txt")"
    grep -v -q ';pause (' "$WORK/c.txt" && fail "$py: a sample without the native frame: $(cat "$WORK/c.txt")"
    untraced "$T" || fail "$py: the target was left stopped or traced"
    kill "$T"
done
[ "$n" -ge 2 ] || fail "fewer than two interpreters found: $PYTHONS"

# agent --native: the frame definitions mark native frames.
start_ready python3 "$PY"
mkfifo "$WORK/in"
exec 3<> "$WORK/in"
$RANKTOP_BIN agent --native --no-device-libs --nvidia-smi /nonexistent --npu-smi /nonexistent \
    -p "$T" < "$WORK/in" > "$WORK/out" 2> "$WORK/err" 3>&- &
AGENT=$!
PIDS="$PIDS $AGENT"
wait_for sh -c "grep -q '\"fn\":\"pause\".*\"nat\":true' '$WORK/out'" || fail "agent: no native frame: $(cat "$WORK/err")"
grep -q '"fn":"wait_in_pause"[^}]*"nat"' "$WORK/out" && fail "agent: a Python frame marked native"
exec 3>&-
# The agent ends at the end of its input, maybe mid-sample (attached): what it must leave
# behind is judged once it has gone, not while it finishes its last sample.
wait_for sh -c "! kill -0 $AGENT 2> /dev/null || grep -q '^State:.*Z' /proc/$AGENT/status" ||
    fail "agent: still running 60 s after its input ended"
wait "$AGENT" 2> /dev/null
untraced "$T" || fail "agent: the target was left stopped or traced"

# Already traced (strace): one line on stderr, the Python frames recorded.
if command -v strace > /dev/null; then
    rm -f "$WORK/ready"
    strace -f -o /dev/null python3 "$PY" "$WORK/ready" &
    PIDS="$PIDS $!"
    wait_for test -s "$WORK/ready" || fail "the traced target did not start"
    T2=$(cat "$WORK/ready")
    $RANKTOP_BIN record --native -p "$T2" -d 1 --format collapsed -o "$WORK/s.txt" 2> "$WORK/s.err" ||
        fail "traced: record failed: $(cat "$WORK/s.err")"
    [ "$(grep -c 'already traced by process' "$WORK/s.err")" = 1 ] || fail "traced: $(cat "$WORK/s.err")"
    grep -q 'outer (.*);wait_in_pause (' "$WORK/s.txt" || fail "traced: no Python frames"
else
    echo "skipped: the already-traced part (strace is not installed)"
fi
echo ok
