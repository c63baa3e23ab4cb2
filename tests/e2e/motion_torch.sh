#!/bin/sh
# Exact under motion on a real CPU training loop (Debian's python3.11 with python3-torch):
# 200 `ranktop dump --json` in a row never show the main thread empty or partial (its bottom
# frame is always `<module>` of torch_loop.py), and `record -r 1000` loses under 0.5 % of the
# thread stacks as torn (the summary line and the trace's otherData.stacks_lost agree).
# Skipped (77) only when torch is missing.
. "$(dirname "$0")/lib.sh"
CHECK="python3 $RANKTOP_SRCDIR/tests/tools/trace_check.py"
PY=/usr/bin/python3.11
DUMPS=200

"$PY" -c "import torch" 2>/dev/null || { echo "SKIP: python3-torch is not installed"; exit 77; }
"$PY" "$RANKTOP_SRCDIR/tests/py/torch_loop.py" "$WORK/ready" > "$WORK/loop.log" 2>&1 &
T=$!
PIDS="$PIDS $T"
wait_for test -f "$WORK/ready" || fail "the training loop did not start: $(tail "$WORK/loop.log")"

# 1. Dumps in a row: each one's MainThread is whole.
i=0
while [ $i -lt $DUMPS ]; do
    "$RANKTOP_BIN" dump --json -p "$T" > "$WORK/dump.$i.json" 2> "$WORK/dump.err" ||
        fail "dump $i: $(cat "$WORK/dump.err")"
    i=$((i + 1))
done
python3 - "$WORK" "$DUMPS" <<'PYEOF' || fail "some dump showed a main thread that is not whole"
import json, sys
work, n = sys.argv[1], int(sys.argv[2])
bad = []
for i in range(n):
    d = json.load(open("%s/dump.%d.json" % (work, i)))
    p = d["processes"][0]
    main = [t for t in p["threads"] if t["name"] == "MainThread"]
    if p["error"] or len(main) != 1:
        bad.append((i, "process error %r, %d main threads" % (p["error"], len(main))))
        continue
    fr = main[0]["frames"]
    if not fr:
        bad.append((i, "empty main thread (error %r)" % main[0].get("error")))
    elif fr[-1]["function"] != "<module>" or not fr[-1]["file"].endswith("torch_loop.py"):
        bad.append((i, "partial main thread: %d frames, bottom %s" % (len(fr), fr[-1]["function"])))
for i, why in bad[:10]:
    print("dump %d: %s" % (i, why), file=sys.stderr)
print("%d dumps, %d not whole" % (n, len(bad)))
sys.exit(1 if bad else 0)
PYEOF

# 2. Recording at 1 kHz: what is still lost after the retries stays under 0.5 %.
"$RANKTOP_BIN" record -p "$T" -r 1000 -d 4 -o "$WORK/rec.json" --nvidia-smi /nonexistent \
    --npu-smi /nonexistent 2> "$WORK/rec.err" || fail "record: $(cat "$WORK/rec.err")"
cat "$WORK/rec.err"
$CHECK --lanes 1 "$WORK/rec.json" || fail "trace check"
python3 - "$WORK/rec.err" "$WORK/rec.json" <<'PYEOF' || fail "too many stacks lost at 1 kHz"
import json, re, sys
err = open(sys.argv[1]).read()
stacks = int(re.search(r"(\d+) thread stacks, ", err).group(1))
m = re.search(r"^ranktop: (\d+) thread stacks lost as torn \(([0-9.]+)%\), (\d+) torn reads retried$",
              err, re.M)
if not m:
    sys.exit("no loss line in the summary: %r" % err)
lost = int(m.group(1))
meta = json.load(open(sys.argv[2]))["otherData"]["stacks_lost"]
print("1 kHz: %d stacks recorded, %d lost (%.3f%%), %s torn reads retried; trace says %d lost"
      % (stacks, lost, 100.0 * lost / max(1, stacks + lost), m.group(3), meta))
if stacks < 1000:
    sys.exit("only %d stacks recorded in 4 s at 1 kHz" % stacks)
if meta != lost:
    sys.exit("trace otherData.stacks_lost %d != summary %d" % (meta, lost))
sys.exit(0 if lost * 1000 < 5 * (stacks + lost) else 1)
PYEOF
echo ok
