#!/bin/sh
# The newest CPythons live: tests/sid_chroot.sh (run by bootstrap.sh test) keeps a Debian sid
# chroot with python3.14 and python3.15, and every reader test that iterates over ALL_PYTHONS
# (lib.sh) or ts_pythons_discover (the sampler suites) runs them too. This test says when they
# are missing: skipped (77) with the reason only where debootstrap could not reach a mirror,
# else a failure. Then one quick look that each is read from outside: its version, and a
# frame of its own.
. "$(dirname "$0")/lib.sh"

if [ ! -x "$SID_CHROOT.bin/python3.14" ] || [ ! -x "$SID_CHROOT.bin/python3.15" ]; then
    if [ -s "$SID_CHROOT.skip" ]; then
        echo "skipped: no sid chroot: $(cat "$SID_CHROOT.skip")"
        exit 77
    fi
    fail "no sid chroot at $SID_CHROOT (build it with: sh tests/sid_chroot.sh)"
fi
for py in $SID_PYTHONS; do
    v=$("$py" -c 'import sys; print(sys.version.split()[0])') || fail "$py does not start"
    rm -f "$WORK/ready"
    "$py" -S -c 'import sys, threading
sys.path.insert(0, sys.argv[2])
from readyfile import write_ready
def sid_waits():
    write_ready(sys.argv[1])
    threading.Event().wait()
sid_waits()' "$WORK/ready" "$RANKTOP_SRCDIR/tests/py" &
    T=$!
    PIDS="$PIDS $T"
    wait_for test -s "$WORK/ready" || fail "$py did not start"
    $RANKTOP_BIN dump --json -p "$T" > "$WORK/d.json" 2> "$WORK/d.err" ||
        fail "$py: dump failed: $(cat "$WORK/d.err")"
    json_check "$WORK/d.json" "d['processes'][0]['python'] == '$v' and any(f['function'] == 'sid_waits' for t in d['processes'][0]['threads'] for f in t['frames'])" ||
        fail "$py: not read"
    echo "$py: Python $v read"
    kill "$T"
done
echo ok
