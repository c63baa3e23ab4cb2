#!/bin/sh
# A real 4-rank torchrun job (gloo) in which rank 2 sleeps in load_batch_slowly while the
# others block in the all-reduce: the monitor, attached with --children-of the launcher, names
# rank 2 and the function in the merged view, raises the HANG banner, and `e` writes a Chrome
# trace that passes the trace checker.
. "$(dirname "$0")/lib.sh"

/usr/bin/python3 -c "import torch.distributed" 2> /dev/null || fail "python3-torch is not installed"
cd "$WORK"
STALL_RANK=2 STALL_SECS=3600 setsid /usr/bin/python3 -m torch.distributed.run --standalone \
    --nproc_per_node 4 --redirects 1 --tee 1 "$RANKTOP_SRCDIR/tests/py/ddp_job.py" \
    > "$WORK/job.log" 2>&1 &
LAUNCHER=$!
PIDS="$PIDS $LAUNCHER"
mkdir -p "$WORK/export"

ui_start hang 160 45 -- "$RANKTOP_BIN" --children-of "$LAUNCHER" --hang-after 5 \
    --export-dir "$WORK/export" --nvidia-smi /nonexistent --npu-smi /nonexistent
wait_screen '^ +RANK +PID ' 30 || fail "the monitor did not draw its rank table"

# Four ranks (0-3) listed; importing torch takes a while on a small machine.
for r in 0 1 2 3; do
    wait_screen "^ +$r +[0-9]+ " 180 || fail "rank $r not listed: $(tail -n 5 "$WORK/job.log")"
done

# The merged view: the three all-reduce ranks share a branch, rank 2 is alone in the stall.
wait_screen 'load_batch_slowly \(.*ddp_job\.py:[0-9]+\) +\[2\] x1' 120 ||
    fail "the merged view does not name rank 2 in load_batch_slowly"
wait_screen 'all_reduce \(.*\) +\[0-1,3\] x3' 30 || fail "the merged view lacks ranks 0,1,3 in all_reduce"

# The banner: HANG, the frame where most ranks wait, the odd rank and its frame.
wait_screen '^HANG .*all_reduce.*rank 2 .*load_batch_slowly' 60 ||
    fail "no HANG banner naming all_reduce and rank 2 in load_batch_slowly"

# e exports the history window as a Chrome trace in the background.
keys e
wait_screen "exported $WORK/export/ranktop-[0-9]{8}-[0-9]{6}\\.json" 30 ||
    fail "the status line does not report the export"
TRACE=$(ls "$WORK"/export/ranktop-*.json 2> /dev/null | head -n 1)
[ -n "$TRACE" ] || fail "no ranktop-*.json in the export directory: $(ls -la "$WORK/export")"
ls "$WORK/export" | grep -q '\.tmp' && fail "a temporary file was left: $(ls "$WORK/export")"
python3 "$RANKTOP_SRCDIR/tests/tools/trace_check.py" --lanes 4 --slice load_batch_slowly \
    --slice all_reduce "$TRACE" > "$WORK/check.log" 2>&1 ||
    fail "the exported trace does not pass the checker: $(head -n 20 "$WORK/check.log")"

# E asks for the format: g writes a flame graph, p a Perfetto trace.
keys E
wait_screen 'export format: .*g\)flamegraph p\)erfetto' 10 || fail "E shows no format prompt"
keys g
wait_screen "exported $WORK/export/ranktop-[0-9]{8}-[0-9]{6}\\.svg" 30 ||
    fail "the status line does not report the flame graph"
SVG=$(ls "$WORK"/export/ranktop-*.svg | head -n 1)
python3 -c 'import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); t = d.documentElement.toxml(); sys.exit(0 if "all_reduce" in t and "load_batch_slowly" in t else 1)' \
    "$SVG" || fail "the flame graph $SVG is not XML naming all_reduce and load_batch_slowly"
keys E
wait_screen 'export format:' 10 || fail "E shows no format prompt the second time"
keys p
wait_screen "exported $WORK/export/ranktop-[0-9]{8}-[0-9]{6}\\.perfetto-trace" 30 ||
    fail "the status line does not report the Perfetto trace"
PFT=$(ls "$WORK"/export/ranktop-*.perfetto-trace | head -n 1)
python3 "$RANKTOP_SRCDIR/tests/tools/perfetto_check.py" --fn all_reduce "$PFT" > "$WORK/pf.log" 2>&1 ||
    fail "the exported Perfetto trace does not decode: $(head -n 20 "$WORK/pf.log")"

keys q
wait_screen '^EXITED 0$' 20 || fail "q did not exit ranktop with status 0"
echo ok
