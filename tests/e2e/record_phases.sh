#!/bin/sh
# `ranktop record` on a target whose phases change on a known schedule: the trace passes the
# checker and shows phase_a, phase_b, phase_c in order; a rank exiting mid-recording closes
# its slices and leaves an exit instant; SIGINT writes the file and the summary line.
. "$(dirname "$0")/lib.sh"
CHECK="python3 $RANKTOP_SRCDIR/tests/tools/trace_check.py"

RANK=0 python3 -S "$RANKTOP_SRCDIR/tests/py/phases.py" "$WORK/ready" &
T=$!
PIDS="$PIDS $T"
wait_for test -f "$WORK/ready" || fail "target did not start"

# 1. Fixed duration, Chrome trace.
"$RANKTOP_BIN" record -p "$T" -r 50 -d 3 -o "$WORK/a.json" --tool-timeout 1 \
    --nvidia-smi /nonexistent --npu-smi /nonexistent 2> "$WORK/a.err" || fail "record: $(cat "$WORK/a.err")"
grep -Eq '^ranktop: [0-9]+ samples, [0-9]+ thread stacks, [0-9]+ errors \([0-9.]+%\), [0-9.]+ Hz achieved, [0-9.]+ s CPU$' "$WORK/a.err" ||
    fail "no summary line: $(cat "$WORK/a.err")"
$CHECK --lanes 1 --order phase_a,phase_b,phase_c "$WORK/a.json" || fail "trace check (order)"
json_check "$WORK/a.json" "any(e.get('ph') == 'M' and e.get('name') == 'process_name' and e['args']['name'].startswith('rank 0 (pid $T') for e in d['traceEvents'])"

# 2. speedscope and collapsed formats.
"$RANKTOP_BIN" record -p "$T" -r 50 -d 1.5 --format speedscope -o "$WORK/b.speedscope.json" \
    --nvidia-smi /nonexistent --npu-smi /nonexistent 2>/dev/null || fail "record speedscope"
$CHECK --speedscope "$WORK/b.speedscope.json" || fail "speedscope check"
"$RANKTOP_BIN" record -p "$T" -r 50 -d 1.5 --format collapsed -o "$WORK/c.folded" \
    --nvidia-smi /nonexistent --npu-smi /nonexistent 2>/dev/null || fail "record collapsed"
grep -Eq '^rank 0;[^ ]*;<module> \(.*phases.py:[0-9]+\);main \(.*\);phase_[abc] .* [0-9]+$' "$WORK/c.folded" ||
    fail "collapsed lines: $(head -3 "$WORK/c.folded")"

# 3. SIGINT ends the recording and writes the file.
"$RANKTOP_BIN" record -p "$T" -r 20 -o "$WORK/d.json" --nvidia-smi /nonexistent \
    --npu-smi /nonexistent 2> "$WORK/d.err" &
R=$!
sleep 1.5
kill -INT $R
wait $R || fail "record after SIGINT exited $?"
$CHECK "$WORK/d.json" || fail "trace after SIGINT"

# 4. A rank that exits mid-recording.
CYCLES=1 PHASE_SECS=0.4 RANK=1 python3 -S "$RANKTOP_SRCDIR/tests/py/phases.py" &
X=$!
PIDS="$PIDS $X"
"$RANKTOP_BIN" record -p "$T,$X" -r 50 -d 3 -o "$WORK/e.json" --nvidia-smi /nonexistent \
    --npu-smi /nonexistent 2>/dev/null || fail "record with an exiting rank"
$CHECK --lanes 2 "$WORK/e.json" || fail "trace with an exiting rank"
json_check "$WORK/e.json" "any(e.get('ph') == 'i' and 'rank 1 exited' in e['name'] for e in d['traceEvents'])"

# 5. --trigger-file: only the window while the file exists is written, to a tagged file.
"$RANKTOP_BIN" record -p "$T" -r 50 --trigger-file "$WORK/trig" -o "$WORK/w.json" \
    --nvidia-smi /nonexistent --npu-smi /nonexistent 2> "$WORK/w.err" &
R=$!
sleep 1
[ -z "$(ls "$WORK" | grep '^w-')" ] || fail "a trigger window was written before the trigger"
touch "$WORK/trig"
sleep 1.5
rm "$WORK/trig"
wait_for sh -c "ls '$WORK' | grep -q '^w-[0-9]\{8\}-[0-9]\{6\}\.json$'" || fail "no trigger window file"
kill -INT $R
wait $R || true
W=$(ls "$WORK"/w-*.json | head -1)
$CHECK --lanes 1 "$W" || fail "trigger window trace"
json_check "$W" "1.0e6 <= max(e['ts'] for e in d['traceEvents'] if e.get('ph') in ('B', 'E')) - min(e['ts'] for e in d['traceEvents'] if e.get('ph') in ('B', 'E')) <= 3.0e6"
[ ! -e "$WORK/w.json" ] || fail "trigger mode wrote the main file too"

# 6. Nothing to record: non-zero exit, no file.
if "$RANKTOP_BIN" record -p 999999999 -d 1 -o "$WORK/f.json" --nvidia-smi /nonexistent \
    --npu-smi /nonexistent 2> "$WORK/f.err"; then fail "record of nothing exited 0"; fi
[ ! -e "$WORK/f.json" ] || fail "a file was written although nothing was recorded"

# 7. An unwritable output path: clear error before sampling.
if "$RANKTOP_BIN" record -p "$T" -d 1 -o /nonexistent-dir/x.json 2> "$WORK/g.err"; then
    fail "unwritable path accepted"
fi
grep -q "cannot write /nonexistent-dir/x.json" "$WORK/g.err" || fail "message: $(cat "$WORK/g.err")"
echo ok
