# Helpers of the dump --core tests (dump_core.sh, dump_core_sid.sh), sourced after lib.sh: a
# target whose threads are blocked where it wrote their stacks itself
# (tests/py/core_target.py), a core of it taken with gcore, and the comparison of a dump of
# that core with the target's own truth.

TGT="$RANKTOP_SRCDIR/tests/py/core_target.py"
command -v gcore > /dev/null || fail "gcore (gdb) is not installed"

# same_stacks DUMP.json TRUTH.json: every thread of the truth, found by TID, has its name and
# frames (function, file, line), innermost first.
# With a third argument (native), the Python frames among the merged ones are those, and each
# thread's innermost frame is a native one (the lock wait in libc).
same_stacks() {
    python3 - "$1" "$2" "${3:-}" << 'PY'
import json, sys
d = json.load(open(sys.argv[1]))["processes"][0]
truth = json.load(open(sys.argv[2]))["threads"]
native = sys.argv[3] == "native"
got = {t["tid"]: t for t in d["threads"]}
bad = d["error"] is not None or d["reader"] != "core"
for t in truth:
    g = got.get(t["tid"])
    want = [(f["function"], f["file"], f["line"]) for f in t["frames"]]
    have = g and [(f["function"], f["file"], f["line"]) for f in g["frames"] if f.get("kind", "python") == "python"]
    if native and g and (not g["frames"] or g["frames"][0]["kind"] != "native" or not g["frames"][0]["address"].startswith("0x")):
        bad = True
        print("thread", t["tid"], "no native frame first:", g["frames"][:2], file=sys.stderr)
    if not g or g["name"] != t["name"] or have != want:
        bad = True
        print("thread", t["tid"], t["name"], "want", want[:4], "got", g and g["name"], (have or [])[:4], file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

# take_core PYTHON DIR: starts the target, waits for its truth, writes DIR/core with gcore and
# kills the target; C is the core's path.
take_core() {
    mkdir -p "$2"
    "$1" -S "$TGT" "$2" block &
    tc_pid=$!
    PIDS="$PIDS $tc_pid"
    wait_for test -s "$2/ready" || fail "$1: the target did not start"
    gcore -o "$2/core" "$tc_pid" > "$2/gcore.log" 2>&1 || fail "$1: gcore failed: $(tail -3 "$2/gcore.log")"
    kill -9 "$tc_pid"
    wait "$tc_pid" 2> /dev/null || true
    C="$2/core.$tc_pid"
    [ -s "$C" ] || fail "$1: gcore wrote no core"
}
