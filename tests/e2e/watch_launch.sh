#!/bin/sh
# `ranktop watch --out D -- python3 script.py`: watch starts the script, writes a hang report
# naming the function it stalls in, ends when the script ends and exits with its status (4).
# With --exit-on-hang it exits 3 and leaves the job running. -- CMD with -p is a usage error.
. "$(dirname "$0")/lib.sh"

cat > "$WORK/job.py" <<'PY'
import os, sys, time
def stalled_here(seconds):
    time.sleep(seconds)
open(sys.argv[1], "w").write("%d\n" % os.getpid())
stalled_here(float(sys.argv[2]))
sys.exit(4)
PY
cd "$WORK"
W="$RANKTOP_BIN watch --nvidia-smi /nonexistent --npu-smi /nonexistent --hang-after 3"

run_rc 4 $W --out "$WORK/d" -- python3 "$WORK/job.py" "$WORK/pid" 7
set -- "$WORK"/d/ranktop-hang-*/report.txt
[ $# = 1 ] && [ -f "$1" ] || fail "not one hang report: $(ls "$WORK/d"); $(cat "$WORK/err")"
grep -q '^HANG .*stalled_here' "$1" || fail "the report names no stalled_here: $(head -3 "$1")"
grep -q "exited with status 4" "$WORK/err" || fail "watch did not say how the job ended: $(cat "$WORK/err")"

# --exit-on-hang wins over the job's status: 3, and the job still runs.
run_rc 3 $W --exit-on-hang --out "$WORK/e" -- python3 "$WORK/job.py" "$WORK/pide" 60
read -r P < "$WORK/pide"
PIDS="$PIDS $P"
kill -0 "$P" 2> /dev/null || fail "--exit-on-hang stopped the job"
grep -q "left running" "$WORK/err" || fail "watch did not say it left the job: $(cat "$WORK/err")"
kill "$P"

run_rc 2 $W --out "$WORK/u" -p $$ -- python3 "$WORK/job.py" "$WORK/pidu" 1
grep -q 'drop -p' "$WORK/err" || fail "-- with -p: $(cat "$WORK/err")"
run_rc 2 $W --out "$WORK/u" --
echo ok
