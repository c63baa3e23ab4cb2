# Shared helpers for the end-to-end tests: they drive the real ranktop binary against real
# processes. Sourced by each test; RANKTOP_BIN and RANKTOP_SRCDIR come from meson.
set -eu
: "${RANKTOP_BIN:?set by meson}"
: "${RANKTOP_SRCDIR:?set by meson}"
FAKE="$RANKTOP_SRCDIR/tests/fake"
DATA="$RANKTOP_SRCDIR/tests/data"
WORK=$(mktemp -d)
PIDS=""

# kill_tree PID: kills a process and all its descendants (launchers start ranks in their own
# sessions, so killing a process group is not enough).
kill_tree() {
    for c in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$c"; done
    kill -9 "$1" 2>/dev/null || true
}

cleanup() {
    for p in $PIDS; do kill_tree "$p"; done
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# start_rank RANK [WORLD]: a sleeping Python process with the launcher's environment.
start_rank() {
    RANK=$1 LOCAL_RANK=$1 WORLD_SIZE=${2:-4} MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \
        python3 -S -c 'import time
while True: time.sleep(1)' &
    PIDS="$PIDS $!"
    LAST=$!
}

# wait_for CMD...: retries a command for up to 60 s (no bare sleeps in assertions). Its
# counter has a name of its own: callers count with i (mixed_versions waited for fewer ranks
# than it started once wait_for had reset their i).
wait_for() {
    wf_n=0
    until "$@"; do
        wf_n=$((wf_n + 1))
        [ $wf_n -ge 300 ] && return 1
        sleep 0.2
    done
}

# run_rc WANT CMD...: runs CMD with stdout to $WORK/out and stderr to $WORK/err (and its exit
# status in rc); fails unless it exits WANT.
run_rc() {
    rr_want=$1
    shift
    rc=0
    "$@" > "$WORK/out" 2> "$WORK/err" || rc=$?
    [ "$rc" -eq "$rr_want" ] || fail "$*: exit $rc, expected $rr_want; stderr: $(cat "$WORK/err")"
}

# copy_checkout DEST: copies the checkout's files as they are now into the existing folder DEST:
# tracked and new, not ignored (no build directories); without git (or where git refuses a
# checkout of another user), everything but .git and build*.
copy_checkout() {
    (
        cd "$RANKTOP_SRCDIR" || exit 1
        list=$WORK/files
        if git -c safe.directory='*' ls-files -z -co --exclude-standard > "$list" 2> /dev/null &&
            [ -s "$list" ]; then
            tar --null -T "$list" --ignore-failed-read -cf - 2> /dev/null
        else
            tar --exclude=./.git --exclude='./build*' -cf - .
        fi | tar -C "$1" -xf -
    )
}

# json_check FILE PYTHON-EXPR: evaluates an assertion with `d` bound to the parsed JSON.
json_check() {
    python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
try:
    ok = eval(sys.argv[2])
except Exception as e:
    print("assertion raised", repr(e), file=sys.stderr)
    ok = False
if not ok:
    print("assertion failed:", sys.argv[2], file=sys.stderr)
    print(json.dumps(d, indent=1)[:4000], file=sys.stderr)
    sys.exit(1)' "$1" "$2"
}

# SID_PYTHONS: Debian sid's python3.14 and python3.15, live in the chroot tests/sid_chroot.sh
# builds (bootstrap.sh test does), run through its in-place wrappers; empty without it.
SID_CHROOT=${RANKTOP_SID_CHROOT:-/var/cache/ranktop/sid-chroot}
SID_PYTHONS=""
for v in 3.14 3.15; do
    [ -x "$SID_CHROOT.bin/python$v" ] && SID_PYTHONS="$SID_PYTHONS $SID_CHROOT.bin/python$v"
done
# ALL_PYTHONS: every interpreter the reader tests run on: pyenv's 3.8-3.13, Debian's static,
# stripped python3.11, and SID_PYTHONS.
ALL_PYTHONS="$(ls -d "$(pyenv root 2> /dev/null || echo "$HOME/.pyenv")"/versions/3.*/bin/python3 2> /dev/null |
    grep -E '/3\.(8|9|10|11|12|13)\.' || true) /usr/bin/python3.11$SID_PYTHONS"

# untraced PID: the process runs or sleeps (not in tracing stop) and has no tracer.
untraced() {
    st=$(awk '/^State:/ { print $2 }' "/proc/$1/status")
    tr=$(awk '/^TracerPid:/ { print $2 }' "/proc/$1/status")
    [ "$st" != t ] && [ "$st" != T ] && [ "$tr" = 0 ]
}

# start_ready PYTHON SCRIPT [ARG...]: runs SCRIPT with $WORK/ready as its first argument and
# waits until it has written that file; T is its pid.
start_ready() {
    sr_py=$1 sr_script=$2
    shift 2
    rm -f "$WORK/ready"
    "$sr_py" "$sr_script" "$WORK/ready" "$@" &
    T=$!
    PIDS="$PIDS $T"
    wait_for test -s "$WORK/ready" || fail "$sr_py $(basename "$sr_script") $*: did not start"
}
