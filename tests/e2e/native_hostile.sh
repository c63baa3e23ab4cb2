#!/bin/sh
# Files a target controls, made hostile, never hang or bloat dump --native, and SIGTERM ends
# ranktop whatever a collector is blocked in:
# - a FIFO planted as the build-id debug file of libc (which every target maps), and a FIFO put
#   in place of a library the target has mapped: dump completes, names the FIFO as skipped,
#   and still shows the native frames (old code blocked in open() for good);
# - a debug file whose .symtab claims 1 GiB (sparse): the table is skipped with one line that
#   names the object, and dump's peak RSS stays small (old code read it all: ~1 GB);
# - an open() that never returns (a fanotify permission mark nobody answers, as a file system
#   that never answers): SIGTERM ends dump, record and agent all the same (old code: dump kept
#   SIGTERM pending, every signal being blocked in libunwind's callbacks; record joined the
#   stuck collector for good). The seconds from SIGTERM to exit are printed for the record;
#   the bound asserted is generous.
. "$(dirname "$0")/lib.sh"

for t in cc readelf python3; do
    command -v $t > /dev/null || { echo "skipped: $t is not installed"; exit 77; }
done
cd "$WORK" || fail "no work directory"
LIBC_PATH=$(awk '$6 ~ /\/libc\.so/ { print $6; exit }' /proc/self/maps)
LIBC_ID=$(readelf -n "$LIBC_PATH" | awk '/Build ID/ { print $3 }')
[ -n "$LIBC_ID" ] || fail "no libc build id"
bid_path() { # DIR ID: where a build-id debug file of ID goes under DIR
    echo "$1/.build-id/$(echo "$2" | cut -c1-2)/$(echo "$2" | cut -c3-).debug"
}

# dump_timed OUT ERR ARGS...: dump --native under a generous bound (a hang fails, not stalls).
dump_timed() {
    o=$1 e=$2
    shift 2
    timeout -s KILL 120 "$RANKTOP_BIN" dump --native "$@" > "$o" 2> "$e"
}

cc -shared -fPIC -O1 -g -o libgone.so "$RANKTOP_SRCDIR/tests/native/hidden.c" ||
    fail "cannot build the library"

# 1a. A FIFO as libc's build-id debug file.
mkdir -p "$(dirname "$(bid_path fifo "$LIBC_ID")")"
mkfifo "$(bid_path fifo "$LIBC_ID")"
start_ready python3 "$RANKTOP_SRCDIR/tests/py/pause_native.py"
RANKTOP_DEBUG_DIR="$WORK/fifo" dump_timed f.txt f.err -p "$T" || fail "FIFO: dump failed or hung: $(cat f.err)"
grep -q "native symbols of $LIBC_PATH: skipped .*fifo/.build-id/.*: not a regular file" f.err ||
    fail "FIFO debug file: no line naming it: $(cat f.err)"
grep -q 'pause (libc.so.6) \[native\]' f.txt || fail "FIFO: no native frame left: $(cat f.txt)"
untraced "$T" || fail "FIFO: the target was left stopped or traced"
kill "$T"

# 1b. A FIFO over a library the target has mapped, in the target's own mount namespace (what
# a container's root can do): the maps still name the library's path.
mkfifo gone.fifo
if ! unshare -m true 2> unshare.err; then
    echo 0 > gone.pid # no mount namespace here: skipped below
else unshare -m sh -c 'python3 "$2" "$1/gone.ready" "$1/libgone.so" & P=$!
    while [ ! -s "$1/gone.ready" ]; do sleep 0.1; done
    if mount --bind "$1/gone.fifo" "$1/libgone.so"; then echo $P > "$1/gone.pid"; else echo 0 > "$1/gone.pid"; fi
    wait' sh "$WORK" "$RANKTOP_SRCDIR/tests/py/hidden_lib.py" 2> unshare.err &
    PIDS="$PIDS $!"
fi
if wait_for test -s gone.pid && [ "$(cat gone.pid)" != 0 ]; then
    G=$(cat gone.pid)
    PIDS="$PIDS $G"
    dump_timed g.txt g.err -p "$G" || fail "FIFO library: dump failed or hung: $(cat g.err g.txt)"
    # The FIFO is never opened: the file at the maps' path in the target's root is not the
    # one mapped (device and inode differ), so the library is read where it is the very file
    # mapped (here, our root) and its symbols are the real ones.
    grep -q "hidden_wait_here (libgone.so) \[native\]" g.txt ||
        fail "FIFO library: libgone.so's frames not named from the mapped file: $(cat g.txt g.err)"
    grep -q 'pause (libc.so.6) \[native\]' g.txt || fail "FIFO library: no native frame: $(cat g.txt)"
    untraced "$G" || fail "FIFO library: the target was left stopped or traced"
    kill "$G"
else
    echo "skipped: the FIFO-over-a-library part (no mount namespace here): $(cat unshare.err)"
fi

# 2. A symbol table that claims 1 GiB: skipped, said once, and dump stays small.
mkdir -p "$(dirname "$(bid_path huge "$LIBC_ID")")"
python3 "$RANKTOP_SRCDIR/tests/py/huge_symtab.py" "$(bid_path huge "$LIBC_ID")" 1024 "$LIBC_ID" ||
    fail "cannot write the debug file"
start_ready python3 "$RANKTOP_SRCDIR/tests/py/pause_native.py"
RSS_KB=$(RANKTOP_DEBUG_DIR="$WORK/huge" python3 -c '
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=open("h.txt", "w"), stderr=open("h.err", "w"), timeout=120)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if r.returncode == 0 else -1)' \
    "$RANKTOP_BIN" dump --native -p "$T") || fail "huge .symtab: dump hung"
echo "huge .symtab: dump peak RSS ${RSS_KB} KiB"
[ "$RSS_KB" -ge 0 ] || fail "huge .symtab: dump failed: $(cat h.err)"
[ "$(grep -c "native symbols of $LIBC_PATH: skipped the full symbol table of .*huge/.build-id/.*claims 1073741824 bytes" h.err)" = 1 ] ||
    fail "huge .symtab: not said once: $(cat h.err)"
# Generous: ASan builds start near 100 MB; reading the table costs a GiB.
[ "$RSS_KB" -lt 400000 ] || fail "huge .symtab: peak RSS $RSS_KB KiB"
grep -q 'pause (libc.so.6) \[native\]' h.txt || fail "huge .symtab: the exported names are gone: $(cat h.txt)"
kill "$T"

# 3. SIGTERM while a collector waits in open() for good.
mkdir -p "$(dirname "$(bid_path stuck "$LIBC_ID")")"
cp libgone.so "$(bid_path stuck "$LIBC_ID")"
# term_after_open PID-FILE ARGS...: runs ranktop ARGS, sends SIGTERM once the blocker sees it
# wait in open(), prints the seconds it took to exit then (or fails after 60 s).
term_after_open() {
    rm -f blk blk.opened
    python3 "$RANKTOP_SRCDIR/tests/py/open_blocker.py" "$WORK/blk" "$(bid_path stuck "$LIBC_ID")" 2> blk.err &
    B=$!
    PIDS="$PIDS $B"
    st=0
    wait_for sh -c "test -s blk || ! kill -0 $B 2> /dev/null" || st=1
    if [ ! -s blk ]; then
        kill "$B" 2> /dev/null || true
        wait "$B" || st=$?
        [ "$st" = 77 ] && return 77
        echo "the blocker failed: $(cat blk.err)"
        return 1
    fi
    rc=0
    RANKTOP_DEBUG_DIR="$WORK/stuck" python3 -c '
import os, signal, subprocess, sys, time
# stdin stays open: an agent ends when it closes.
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=open("t.out", "w"),
                     stderr=open("t.err", "w"))
for _ in range(600):
    if os.path.exists("blk.opened") or p.poll() is not None:
        break
    time.sleep(0.1)
if p.poll() is not None or not os.path.exists("blk.opened"):
    sys.exit("ranktop did not wait in open() (exit %s)" % p.poll())
time.sleep(0.5)  # well inside the wait
t0 = time.monotonic()
p.send_signal(signal.SIGTERM)
try:
    p.wait(timeout=60)
except subprocess.TimeoutExpired:
    p.kill()
    sys.exit("still running 60 s after SIGTERM")
print("%.3f" % (time.monotonic() - t0))' "$RANKTOP_BIN" "$@" || rc=$?
    kill "$B" 2> /dev/null || true
    return $rc
}
start_ready python3 "$RANKTOP_SRCDIR/tests/py/pause_native.py"
rc=0
SECS=$(term_after_open dump --native -p "$T") || rc=$?
if [ "$rc" = 0 ]; then
    echo "dump: exited ${SECS} s after SIGTERM (stuck in open())"
    untraced "$T" || fail "SIGTERM: the target was left stopped or traced"
    SECS=$(term_after_open record --native -p "$T" -o "$WORK/r.json") ||
        fail "record: SIGTERM during a stuck open(): $SECS $(cat t.err)"
    echo "record: exited ${SECS} s after SIGTERM (stuck in open())"
    grep -q "did not stop in time" t.err || fail "record: the stuck collector was not named: $(cat t.err)"
    untraced "$T" || fail "SIGTERM record: the target was left stopped or traced"
    SECS=$(term_after_open agent --native -p "$T") ||
        fail "agent: SIGTERM during a stuck open(): $SECS $(cat t.err)"
    echo "agent: exited ${SECS} s after SIGTERM (stuck in open())"
elif [ "$rc" = 77 ]; then
    echo "skipped: the SIGTERM part (fanotify permission events need CAP_SYS_ADMIN): $(cat blk.err)"
else
    fail "dump: SIGTERM during a stuck open(): $SECS $(cat t.err)"
fi
kill "$T"
echo ok
