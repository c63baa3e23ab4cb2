#!/bin/sh
# bench/soak.sh [MINUTES] [PYTHON]: a long record run. Eight ranks of bench/targets/soak_churn.py
# (threads and freshly compiled functions coming and going; each rank process killed and
# restarted every 60-120 s) are recorded with `ranktop record --all-threads -r 100
# --history 120 --memory-cap 64`, found with --match (no RANK in their environment, so that a
# test suite running beside the soak does not find them as ranks). Every 30 s it prints the recorder's RSS
# and the trace file's size; at the end it stops the recorder with SIGINT and prints its
# summary and whether the trace passes tests/tools/trace_check.py. A benchmark: it prints
# figures and asserts nothing. Default 30 minutes, Debian's python3.
set -eu
MIN=${1:-30}
PY=${2:-python3}
SRC=$(cd "$(dirname "$0")/.." && pwd)
BIN=${RANKTOP_BIN:-$SRC/build/src/cli/ranktop}
W=$(mktemp -d)
PIDS=""
trap 'for p in $PIDS; do pkill -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done; rm -rf "$W"' EXIT INT TERM

rank_loop() { # RANK: restart the rank every 60-120 s, forever
    while :; do
        "$PY" -S "$SRC/bench/targets/soak_churn.py" "$W/ready.$1" &
        t=$!
        sleep $((60 + ($1 * 7 + $(date +%s)) % 61))
        kill "$t" 2>/dev/null || true
        wait "$t" 2>/dev/null || true
    done
}
for r in 0 1 2 3 4 5 6 7; do
    rank_loop "$r" 2>/dev/null &
    PIDS="$PIDS $!"
done
sleep 2
"$BIN" record --match 'soak_churn\.py' --all-threads -r 100 --history 120 --memory-cap 64 \
    -o "$W/soak.json" \
    --autosave-interval 60 --nvidia-smi /nonexistent --npu-smi /nonexistent 2> "$W/rec.err" &
REC=$!
echo "soak: $MIN min, 8 churning ranks restarted every 60-120 s, record -r 100 --history 120 --memory-cap 64"
printf '%6s %10s %10s %12s\n' "min" "RSS MiB" "HWM MiB" "trace MiB"
t=0
while [ $t -lt $((MIN * 60)) ]; do
    sleep 30
    t=$((t + 30))
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$REC/status")
    hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$REC/status")
    size=$(stat -c %s "$W/soak.json" 2>/dev/null || echo 0)
    printf '%6.1f %10.1f %10.1f %12.1f\n' "$(echo "$t / 60" | bc -l)" "$(echo "$rss / 1024" | bc -l)" \
        "$(echo "$hwm / 1024" | bc -l)" "$(echo "$size / 1048576" | bc -l)"
done
kill -INT "$REC"
wait "$REC" || echo "record exited $?"
cat "$W/rec.err"
if python3 "$SRC/tests/tools/trace_check.py" -q "$W/soak.json"; then
    echo "final trace: valid ($(stat -c %s "$W/soak.json") bytes)"
else
    echo "final trace: INVALID"
fi
