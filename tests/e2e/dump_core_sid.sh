#!/bin/sh
# dump --core on Debian sid's python3.14 and python3.15, run in their chroot (tests/sid_chroot.sh):
# a gcore of tests/py/core_target.py gives every thread's stack as the target wrote it itself,
# the threads other than the main one included. Their entry frames (3.12+ keep one on the C
# stack under every Python call from C: Thread.run through Context.run, the thread's start)
# are not in such a core: sid's glibc puts a thread stack's guard page inside its mapping, gdb
# cannot read that mapping whole and writes it as zeros. The reader steps over such a frame
# through the thread's data stack; before, every thread but the main one read as torn. Then
# --native (a native frame first, the Python frames below it) and the text output. The
# program and libc are the chroot's: named with --exe and --lib-search, as for a core written
# on another machine. Skipped (77) where there is no sid chroot (sid_pythons.sh says why).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/core_lib.sh"

if [ -z "$SID_PYTHONS" ]; then
    echo "skipped: no sid chroot at $SID_CHROOT: $(cat "$SID_CHROOT.skip" 2> /dev/null ||
        echo "build it with: sh tests/sid_chroot.sh")"
    exit 77
fi
LIBS="$SID_CHROOT/usr/lib/x86_64-linux-gnu"
[ "$(uname -m)" = x86_64 ] || LIBS="$SID_CHROOT/usr/lib/$(uname -m)-linux-gnu"
n=0
for py in $SID_PYTHONS; do
    v=${py##*/python}
    n=$((n + 1))
    D="$WORK/sid$n"
    take_core "$py" "$D"
    zeros=$(grep -c "Memory read failed" "$D/gcore.log" || true)
    echo "python$v: gcore wrote $zeros mappings it could not read as zeros (thread stacks among them)"
    set -- --exe "$SID_CHROOT/usr/bin/python$v" --lib-search "$LIBS"
    run_rc 0 "$RANKTOP_BIN" dump --core "$C" --json "$@"
    cp "$WORK/out" "$D/dump.json"
    json_check "$D/truth.json" "len(d['threads']) == 3" || fail "python$v: the target's truth"
    same_stacks "$D/dump.json" "$D/truth.json" || fail "python$v: the core's stacks are not the target's"
    run_rc 0 "$RANKTOP_BIN" dump --core "$C" --json --native "$@"
    same_stacks "$WORK/out" "$D/truth.json" native || fail "python$v: --native: the core's stacks are not the target's"
    run_rc 0 "$RANKTOP_BIN" dump --core "$C" "$@"
    grep -q "^Python $v\." "$WORK/out" || fail "python$v: text: no Python line"
    for name in MainThread waiter deep; do
        grep -q "^Thread [0-9]* \"$name\"" "$WORK/out" || fail "python$v: text: no thread $name"
    done
    ! grep -q "stack unreadable" "$WORK/out" || fail "python$v: text: $(grep -B1 "stack unreadable" "$WORK/out")"
    rm -f "$C"
done
echo "ok: dump --core on $n sid interpreters"
