#!/bin/sh
# dump --locals against the target's own truth, on every interpreter here (3.8-3.13, Debian's
# static 3.11, sid's 3.14 and 3.15): tests/py/locals_truth.py writes each of its two frames'
# f_locals (repr, type, id, length, argument or cell) and blocks; every local it wrote must be
# in the JSON dump under its frame with the same kind and type and a rendering that is its
# repr, or, where the value is big, the repr's start and its true length (ints: digits or
# bits); objects by type name and address. Unbound locals stay out. Then the text form once,
# and a target whose locals change all the time: every dump of it exits 0 and every value of
# it is either a whole rendering or marked unreadable.
. "$(dirname "$0")/lib.sh"

cat > "$WORK/check.py" << 'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
truth = json.load(open(sys.argv[2]))
frames = [f for t in d["processes"][0]["threads"] for f in t["frames"]]
def fail(msg):
    sys.exit("FAIL: " + msg)
def matches(v, t):
    r, got = t["repr"], v["repr"]
    if got == r:
        return True
    if t["type"] not in ("int", "str", "bytes", "list", "tuple", "dict", "set"):
        return got == "<%s object at %#x>" % (t["type"], t["id"])
    m = re.fullmatch(r"<int of (\d+) bits>", got)
    if m:
        return t["bits"] <= int(m.group(1)) < t["bits"] + 30
    m = re.fullmatch(r"(.*?)(?:, )?\.\.\.([\]\)}]*)? \((\d+) (digits|chars|bytes|items)\)", got, re.S)
    if not m:
        return False
    head, n = m.group(1), int(m.group(3))
    if t["type"] == "str":
        head = head[:-1]  # the closing quote of the cut string
    want = len(r.lstrip("-")) if t["type"] == "int" else t["len"]
    return n == want and len(head) > 3 and r.startswith(head)
seen = 0
for ft in truth:
    f = [f for f in frames if f["function"].split(".")[-1] == ft["function"]]
    if len(f) != 1:
        fail("frame %s not found once" % ft["function"])
    got = {v["name"]: v for v in f[0]["locals"] or []}
    if set(got) != {t["name"] for t in ft["locals"]}:
        fail("%s: names %s, truth %s" % (ft["function"], sorted(got), sorted(t["name"] for t in ft["locals"])))
    for t in ft["locals"]:
        v = got[t["name"]]
        if t["name"] == "deep":
            continue  # cut by depth: checked below
        if v["kind"] != t["kind"] or v["type"] != t["type"] or not matches(v, t):
            fail("%s.%s: %s, truth %s" % (ft["function"], t["name"], v, t))
        seen += 1
deep = [v for f in frames for v in f["locals"] or [] if v["name"] == "deep"]
if not deep or not re.fullmatch(r"\[\[\[\[\.\.\.\] \(1 items\)\]\]\]", deep[0]["repr"]):
    fail("deep is not cut at depth 3: %s" % deep)
print(seen)
PY

n=0
for py in $ALL_PYTHONS; do
    [ -x "$py" ] || continue
    v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    start_ready "$py" "$RANKTOP_SRCDIR/tests/py/locals_truth.py" "$WORK/truth"
    run_rc 0 "$RANKTOP_BIN" dump --locals --json -p "$T"
    cp "$WORK/out" "$WORK/d.$n.json"
    k=$(python3 "$WORK/check.py" "$WORK/d.$n.json" "$WORK/truth") || fail "$py ($v): $k"
    [ "$k" -ge 30 ] || fail "$py ($v): only $k locals compared"
    if [ $n -eq 0 ]; then
        run_rc 0 "$RANKTOP_BIN" dump --locals -p "$T"
        grep -q '^        cell  shared = 41$' "$WORK/out" || fail "text: no cell line: $(cat "$WORK/out")"
        grep -q "^        arg   opts = {'extra': 3}$" "$WORK/out" || fail "text: no **kw line"
    fi
    echo "$py ($v): $k locals match"
    kill_tree "$T"
    n=$((n + 1))
done
[ "$n" -ge 3 ] || fail "fewer than three interpreters: $ALL_PYTHONS"

# torch tensors (Debian's CPU torch 1.13, where installed): dtype, shape and device as the
# target itself states them, for contiguous, 0-d, 7-d (sizes kept out of line), sliced and
# transposed tensors and a Parameter.
if /usr/bin/python3 -c 'import torch' 2> /dev/null; then
    rm -f "$WORK/ready3"
    /usr/bin/python3 -c 'import sys, threading, torch
def step(x, w, big, h, i8, b):
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write("\n".join("%s = %s(dtype=%s, shape=%s, device=%s)" % (n, type(t).__name__,
                t.dtype, tuple(t.shape), t.device)
                for n, t in zip("x w big h i8 b".split(), (x, w, big, h, i8, b))) + "\n")
    import os
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    threading.Event().wait()
step(torch.zeros(3, 4), torch.nn.Parameter(torch.ones(2)), torch.zeros(1, 2, 3, 4, 5, 6, 7),
     torch.zeros((), dtype=torch.float16), torch.zeros(5, dtype=torch.int8)[1:],
     torch.zeros(2, 2, dtype=torch.bool).t())' "$WORK/ready3" &
    T=$!
    PIDS="$PIDS $T"
    wait_for test -s "$WORK/ready3" || fail "torch target did not start"
    run_rc 0 "$RANKTOP_BIN" dump --locals -p "$T"
    sed -n 's/^        arg   //p' "$WORK/out" | grep -E '^(x|w|big|h|i8|b) = ' > "$WORK/tensors"
    diff "$WORK/ready3" "$WORK/tensors" > "$WORK/tdiff" || fail "torch tensors: $(cat "$WORK/tdiff")"
    echo "torch: $(wc -l < "$WORK/tensors") tensors match"
fi

# Any other torch version: the tensor is named and says why its dtype and shape are not read.
rm -f "$WORK/ready4"
python3 -c 'import sys, threading, types
sys.path.insert(0, sys.argv[2])
from readyfile import write_ready
torch = types.ModuleType("torch")
torch.__version__ = "2.1.0"
sys.modules["torch"] = torch
class Tensor:
    pass
def step(batch):
    write_ready(sys.argv[1])
    threading.Event().wait()
step(Tensor())' "$WORK/ready4" "$RANKTOP_SRCDIR/tests/py" &
T=$!
PIDS="$PIDS $T"
wait_for test -s "$WORK/ready4" || fail "fake torch target did not start"
run_rc 0 "$RANKTOP_BIN" dump --locals -p "$T"
grep -Eq '^        arg   batch = <Tensor at 0x[0-9a-f]+: dtype and shape not read \(torch 2\.1\.0: layout not verified\)>$' "$WORK/out" ||
    fail "other torch: $(grep batch "$WORK/out")"

cat > "$WORK/churn.py" << 'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
for t in d["processes"][0]["threads"]:
    for f in t["frames"]:
        for v in f["locals"] or []:
            r = v["repr"]
            if r.startswith("<unreadable"):
                continue
            m = re.fullmatch(r"\[((\d+)(, \d+)*)?(, \.\.\.\] \((\d+) items\)|\])", r)
            if v["name"] == "items" and (not m or len(set(re.findall(r"\d+", r.split("...")[0]))) > 1):
                sys.exit("mixed list: " + r)
            # a() and b() come and go in the same memory: never the one's names with the
            # other's values.
            want = {"x": "int", "y": "list", "s": "str", "t": "str"}.get(v["name"])
            if f["function"] in ("a", "b") and want and (v["type"] != want or r == "'q'" and v["name"] == "x"):
                sys.exit("mixed frame: %s %s" % (f["function"], v))
            if v["name"] == "word" and not re.fullmatch(r"'w*'(\.\.\. \(\d+ chars\))?", r):
                sys.exit("mixed str: " + r)
PY

# Locals that change under the reader: never a crash, never a mixed value.
python3 -c 'import sys, threading, os
sys.path.insert(0, sys.argv[2])
from readyfile import write_ready
def a(x):
    y = [x]
    return y
def b(s):
    t = s * 3
    return t
def churn():
    i = 0
    while True:
        i += 1
        items = [i] * (i % 50)
        word = "w" * (i % 300)
        table = {i: i, -i: [i]}
        a(i)
        b("q")
write_ready(sys.argv[1])
churn()' "$WORK/ready2" "$RANKTOP_SRCDIR/tests/py" &
T=$!
PIDS="$PIDS $T"
wait_for test -s "$WORK/ready2" || fail "churn target did not start"
i=0
while [ $i -lt 10 ]; do
    run_rc 0 "$RANKTOP_BIN" dump --locals --json -p "$T"
    python3 "$WORK/churn.py" "$WORK/out" ||
        fail "a churned local was rendered mixed"
    i=$((i + 1))
done
echo "ok ($n interpreters)"
