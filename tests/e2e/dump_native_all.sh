#!/bin/sh
# dump --native-all: a thread with no Python thread state (started by libc's pthread_create
# through ctypes, its start routine libc's pause) is listed by its comm, "cpause", with native
# frames only (pause among them: sid's libc adds unnamed syscall wrappers inside it) and "python": false; the Python main thread keeps its Python
# frames merged with native ones. dump --native alone lists the Python threads only, as before.
# On every interpreter here.
. "$(dirname "$0")/lib.sh"

PY="$RANKTOP_SRCDIR/tests/py/c_thread.py"
n=0
for py in $ALL_PYTHONS; do
    [ -x "$py" ] || continue
    n=$((n + 1))
    start_ready "$py" "$PY"
    wait_for sh -c "$RANKTOP_BIN dump --native-all --json -p $T > $WORK/a.json 2> $WORK/a.err &&
        grep -q '\"function\": *\"pause\"' $WORK/a.json &&
        grep -q '\"function\": *\"main_wait\"' $WORK/a.json" ||
        fail "$py: no pause or main_wait frame: $(cat "$WORK/a.err")"
    json_check "$WORK/a.json" "(
[(t['name'], t['python'], t['no_python'], 'pause' in [f['function'] for f in t['frames']], all(f['kind'] == 'native' for f in t['frames'])) for t in d['processes'][0]['threads'] if t['name'] == 'cpause'] == [('cpause', False, True, True, True)]
and [t['tid'] for t in d['processes'][0]['threads'] if t['name'] == 'cpause'] == [int(x) for x in __import__('os').listdir('/proc/$T/task') if x != '$T']
and [[f['function'] for f in t['frames'] if f['kind'] == 'python'] for t in d['processes'][0]['threads'] if t['python']] == [['main_wait', '<module>']]
and d['processes'][0]['native_error'] is None)" || fail "$py: --native-all JSON"
    $RANKTOP_BIN dump --native-all -p "$T" > "$WORK/a.txt" 2> "$WORK/a.err" || fail "$py: text dump failed"
    grep -q '^Thread [0-9]* "cpause" (idle, no Python)$' "$WORK/a.txt" || fail "$py: text: $(cat "$WORK/a.txt")"
    sed -n '/"cpause"/,$p' "$WORK/a.txt" | grep -q '^    pause (libc' || fail "$py: text: no pause frame under cpause"
    $RANKTOP_BIN dump --native --json -p "$T" > "$WORK/n.json" 2> /dev/null || fail "$py: --native failed"
    json_check "$WORK/n.json" "len(d['processes'][0]['threads']) == 1 and 'python' not in d['processes'][0]['threads'][0]" ||
        fail "$py: --native alone changed"
    untraced "$T" || fail "$py: the target was left stopped or traced"
    kill "$T"
done
[ "$n" -ge 2 ] || fail "fewer than two interpreters found: $ALL_PYTHONS"
echo ok
