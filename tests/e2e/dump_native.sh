#!/bin/sh
# dump --native on every interpreter (pyenv's 3.8-3.13 and Debian's static python3.11): a
# thread blocked in libc pause() through ctypes shows the native frame inside its Python
# frames (pause, then wait_in_pause, then outer), every frame has a kind, native frames have an
# address; without --native the JSON has no kind at all. The target runs on afterwards (never
# left in tracing stop), including when ranktop is killed with SIGKILL in the middle of an
# unwind, again and again; a target already traced by another tracer gets one clear line and
# keeps its Python frames; a thread state that names another process's thread never gets that
# process stopped. (Threads that come and go and processes that exit while read:
# native_churn.sh.)
. "$(dirname "$0")/lib.sh"

PY="$RANKTOP_SRCDIR/tests/py/pause_native.py"
PYTHONS=$ALL_PYTHONS

n=0
for py in $PYTHONS; do
    [ -x "$py" ] || continue
    n=$((n + 1))
    start_ready "$py" "$PY"
    wait_for sh -c "$RANKTOP_BIN dump --native --json -p $T > $WORK/n.json 2> $WORK/n.err &&
        grep -q '\"function\": *\"pause\"' $WORK/n.json" || fail "$py: no pause frame: $(cat "$WORK/n.err")"
    json_check "$WORK/n.json" "(
[f['function'] for f in d['processes'][0]['threads'][0]['frames'] if f['function'] in ('pause', 'wait_in_pause', 'outer')] == ['pause', 'wait_in_pause', 'outer']
and all(f['kind'] in ('python', 'native') for f in d['processes'][0]['threads'][0]['frames'])
and all(f['address'].startswith('0x') and f['line'] is None for f in d['processes'][0]['threads'][0]['frames'] if f['kind'] == 'native')
and d['processes'][0]['threads'][0]['frames'][0]['kind'] == 'native'
and d['processes'][0]['native_error'] is None)" || fail "$py: merged stack"
    untraced "$T" || fail "$py: the target was left stopped or traced"
    $RANKTOP_BIN dump --json -p "$T" > "$WORK/p.json" || fail "$py: dump without --native"
    json_check "$WORK/p.json" "'native_error' not in d['processes'][0] and not any('kind' in f for f in d['processes'][0]['threads'][0]['frames'])" ||
        fail "$py: dump without --native changed"
    kill "$T"
    # Through C twice (qsort calls back into Python): each evaluation call takes its own
    # Python frames, so qsort sits between the callback and outer.
    start_ready "$py" "$PY" qsort
    wait_for sh -c "$RANKTOP_BIN dump --native --json -p $T > $WORK/q.json 2> /dev/null &&
        grep -q '\"function\": *\"pause\"' $WORK/q.json" || fail "$py: qsort: no pause frame"
    # (glibc's qsort is qsort_r inside; either name counts once.)
    json_check "$WORK/q.json" "[n for i, n in enumerate(names) if n in ('pause', 'wait_in_pause', 'cmp', 'qsort', 'outer', '<module>') and (i == 0 or names[i - 1] != n)] == ['pause', 'wait_in_pause', 'cmp', 'qsort', 'outer', '<module>'] if (names := ['qsort' if (f['function'] or '').startswith('qsort') else f['function'] for f in d['processes'][0]['threads'][0]['frames']]) else False" ||
        fail "$py: qsort: the evaluation calls did not take their own frames"
    kill "$T"
done
[ "$n" -ge 2 ] || fail "fewer than two interpreters found: $PYTHONS"

# A thread state that names a thread of another process (3.11+ keep the kernel id in the
# state; a thread that exits or a torn read can leave any number there): that process is
# never stopped, the thread keeps its Python frames, and the error says which thread.
m=0
for py in $PYTHONS; do
    [ -x "$py" ] && "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || continue
    m=$((m + 1))
    start_ready "$py" "$RANKTOP_SRCDIR/tests/py/foreign_tid.py"
    C=$(cat "$WORK/ready.child")
    PIDS="$PIDS $C"
    $RANKTOP_BIN dump --native --json -p "$T" > "$WORK/f.json" 2> "$WORK/f.err" ||
        fail "$py: foreign tid: dump failed: $(cat "$WORK/f.err")"
    json_check "$WORK/f.json" "([t for t in d['processes'][0]['threads'] if t['name'] == 'planted' and t['tid'] == $C and t['frames'][0]['function'] == 'planted_sleep' and all(f['kind'] == 'python' for f in t['frames'])]
and 'thread $C is not a thread of process $T' in d['processes'][0]['native_error']
and any(f['kind'] == 'native' for t in d['processes'][0]['threads'] if t['name'] == 'MainThread' for f in t['frames']))" ||
        fail "$py: foreign tid: the other process was read as the target's thread"
    untraced "$C" || fail "$py: foreign tid: the other process was left stopped or traced"
    kill "$T"
done
[ "$m" -ge 2 ] || fail "fewer than two 3.11+ interpreters found: $PYTHONS"

# SIGKILL in the middle of unwinds: the target is never left stopped.
start_ready python3 "$PY"
i=0
while [ $i -lt 60 ]; do
    i=$((i + 1))
    $RANKTOP_BIN dump --native -p "$T" > /dev/null 2>&1 &
    K=$!
    # A spread of moments: before, during and after the seize.
    sleep "0.00$((i % 10))"
    kill -KILL "$K" 2> /dev/null || true
    wait "$K" 2> /dev/null || true
    untraced "$T" || { sleep 0.2; untraced "$T"; } || fail "kill $i left the target stopped or traced"
done
grep -q '^State:.*S' "/proc/$T/status" || fail "the target is not sleeping in pause()"

# Already traced (strace): one clear line, Python frames still there.
if command -v strace > /dev/null; then
    rm -f "$WORK/ready"
    strace -f -o /dev/null python3 "$PY" "$WORK/ready" &
    PIDS="$PIDS $!"
    wait_for test -s "$WORK/ready" || fail "the traced target did not start"
    T2=$(cat "$WORK/ready")
    $RANKTOP_BIN dump --native --json -p "$T2" > "$WORK/s.json" 2> "$WORK/s.err" || true
    json_check "$WORK/s.json" "'already traced by process' in d['processes'][0]['native_error'] and [f['function'] for f in d['processes'][0]['threads'][0]['frames']][:2] == ['wait_in_pause', 'outer']" ||
        fail "traced target"
    grep -q 'already traced' "$WORK/s.err" || fail "no line on stderr: $(cat "$WORK/s.err")"
else
    echo "skipped: the already-traced part (strace is not installed)"
fi
echo ok
