#!/bin/sh
# The recorder never leaves a corrupt file: SIGKILL at random moments while it autosaves
# every 0.2 s leaves the last complete file loadable; a full disk (a tiny tmpfs) gives a clear
# error and keeps the previous file.
. "$(dirname "$0")/lib.sh"
CHECK="python3 $RANKTOP_SRCDIR/tests/tools/trace_check.py"
NOTOOLS="--nvidia-smi /nonexistent --npu-smi /nonexistent"

RANK=0 python3 -S "$RANKTOP_SRCDIR/tests/py/phases.py" "$WORK/ready" &
T=$!
PIDS="$PIDS $T"
wait_for test -f "$WORK/ready" || fail "target did not start"

# 1. SIGKILL during autosave, repeated.
i=0
while [ $i -lt 12 ]; do
    "$RANKTOP_BIN" record -p "$T" -r 100 --all-threads --autosave-interval 0.2 \
        -o "$WORK/k.json" $NOTOOLS 2>/dev/null &
    R=$!
    # 0.6 to 1.7 s: lands in a different phase of the autosave cycle each time.
    sleep "0.$((6 + i % 10))"
    [ $i -ge 10 ] && sleep 0.5
    kill -9 $R
    wait $R 2>/dev/null || true
    if [ -e "$WORK/k.json" ]; then
        $CHECK "$WORK/k.json" > "$WORK/k.log" 2>&1 || fail "kill $i left a bad file: $(head "$WORK/k.log")"
    fi
    ls "$WORK" | grep -q '\.tmp\.' && rm -f "$WORK"/*.tmp.*
    i=$((i + 1))
done
[ -e "$WORK/k.json" ] || fail "no autosaved file after 12 runs"

# 2. A full disk: the first autosave fits, later ones do not.
mkdir -p "$WORK/churn"
python3 -S "$RANKTOP_SRCDIR/tests/py/churn.py" "$WORK/churn" &
C=$!
PIDS="$PIDS $C"
wait_for test -f "$WORK/churn/ready" || fail "churn target did not start"
if [ "$(id -u)" -eq 0 ] && mkdir -p "$WORK/small" && mount -t tmpfs -o size=64k tmpfs "$WORK/small"; then
    "$RANKTOP_BIN" record -p "$C" -r 200 --all-threads --autosave-interval 0.3 -d 6 \
        -o "$WORK/small/t.json" $NOTOOLS 2> "$WORK/full.err" && rc=0 || rc=$?
    if [ -e "$WORK/small/t.json" ]; then
        $CHECK "$WORK/small/t.json" > /dev/null 2>&1 || { umount "$WORK/small"; fail "full disk left a bad file"; }
    fi
    ls "$WORK/small" | grep -q '\.tmp\.' && { umount "$WORK/small"; fail "temp file left on a full disk"; }
    umount "$WORK/small"
    grep -q "No space left on device" "$WORK/full.err" || fail "no clear error: $(cat "$WORK/full.err")"
    [ "$rc" -ne 0 ] || fail "record exited 0 although the final write failed"
else
    echo "full-disk case skipped: needs root to mount a tmpfs" >&2
fi
echo ok
