#!/bin/sh
# dump --native on a C extension built here against each interpreter's own headers
# (tests/native/blockext.c): threads blocked in nanosleep and in pthread_cond_wait with the GIL
# released, two Python frames deep, show the C frames inside them; the main thread spinning in
# C while holding the GIL shows its C frame inside its Python frame and holds the GIL; a forked
# DataLoader-style child is read the same way. On every interpreter with headers, the sid
# chroot's python3.14 and python3.15 (tests/sid_chroot.sh installs their -dev packages) too.
. "$(dirname "$0")/lib.sh"

SRC="$RANKTOP_SRCDIR/tests/native/blockext.c"
PY="$RANKTOP_SRCDIR/tests/py/native_ext.py"
PYTHONS=$ALL_PYTHONS
CC=${CC:-cc}

# order_ok FILE THREAD NAMES...: the thread's frames hold NAMES in this order (a name matches a
# frame whose function starts with it; frames in between are allowed).
order_ok() {
    python3 - "$@" << 'PYEOF'
import json, sys
path, thread, want = sys.argv[1], sys.argv[2], sys.argv[3:]
d = json.load(open(path))
ths = [t for p in d["processes"] for t in p["threads"] if t["name"] == thread or
       (thread == "main" and t["name"] in ("MainThread", None) and t is p["threads"][-1])]
if not ths:
    sys.exit("no thread %s" % thread)
fns = [f["function"] or "" for f in ths[0]["frames"]]
i = 0
for f in fns:
    if i < len(want) and any(f.startswith(w) for w in want[i].split("|")):
        i += 1
if i < len(want):
    sys.exit("thread %s: %s not in order in %s" % (thread, want[i:], fns))
PYEOF
}

n=0
for py in $PYTHONS; do
    [ -x "$py" ] || continue
    inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    suffix=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
    root=""
    case $py in # the sid chroot's interpreters: their headers are inside it
    "$SID_CHROOT.bin/"*) root=$SID_CHROOT ;;
    esac
    [ -f "$root$inc/Python.h" ] || { echo "skipped: $py has no headers ($inc)"; continue; }
    n=$((n + 1))
    mkdir -p "$WORK/ext$n"
    # Debian's Python.h includes <x86_64-linux-gnu/python3.X/pyconfig.h>: the chroot's
    # /usr/include is searched after ours, so only what ours lacks comes from there.
    $CC -shared -fPIC -O1 -g -I"$root$inc" ${root:+-idirafter "$root/usr/include"} "$SRC" \
        -o "$WORK/ext$n/blockext$suffix" -lpthread ||
        fail "$py: the extension did not build"
    rm -f "$WORK/ready"
    "$py" "$PY" "$WORK/ready" "$WORK/ext$n" &
    PIDS="$PIDS $!"
    wait_for test -s "$WORK/ready" || fail "$py: the target did not start"
    set -- $(cat "$WORK/ready")
    T=$1 CHILD=$2
    PIDS="$PIDS $CHILD"
    wait_for sh -c "$RANKTOP_BIN dump --native --json -p $T > $WORK/x.json 2> $WORK/x.err &&
        grep -q 'blockext_wait_cond' $WORK/x.json" || fail "$py: $(cat "$WORK/x.err")"
    order_ok "$WORK/x.json" sleeper "nanosleep|clock_nanosleep|__GI___clock_nanosleep" \
        blockext_sleep_forever inner_sleep outer_sleep || fail "$py: sleeper"
    order_ok "$WORK/x.json" waiter "pthread_cond_wait|__pthread_cond_wait|___pthread_cond_wait" \
        blockext_wait_cond inner_cond outer_cond || fail "$py: waiter"
    order_ok "$WORK/x.json" main blockext_spin spinning "<module>" || fail "$py: main thread"
    json_check "$WORK/x.json" "sorted(t['gil'] for t in d['processes'][0]['threads'] if t['name'] in ('sleeper', 'waiter')) == [False, False] and d['processes'][0]['threads'][-1]['gil']" ||
        fail "$py: the GIL is not where it is (the spinning main thread holds it)"
    $RANKTOP_BIN dump --native --json -p "$CHILD" > "$WORK/c.json" 2> "$WORK/c.err" ||
        fail "$py: child: $(cat "$WORK/c.err")"
    json_check "$WORK/c.json" "any(f['function'] == 'blockext_sleep_forever' for f in d['processes'][0]['threads'][0]['frames']) and any(f['function'] == 'outer_sleep' for f in d['processes'][0]['threads'][0]['frames'])" ||
        fail "$py: the forked child"
    kill -9 "$T" "$CHILD"
    echo "$py: ok"
done
[ "$n" -ge 2 ] || fail "fewer than two interpreters with headers: $PYTHONS"
echo ok
