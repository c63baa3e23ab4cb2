#!/bin/sh
# dump --core on every interpreter (pyenv's 3.8-3.13 and Debian's static python3.11): a core
# taken with gcore of a target whose threads are blocked where it wrote their stacks itself
# (tests/py/core_target.py) gives those stacks exactly, by TID and thread name, after the
# target is gone, and with --native the same Python frames merged below native ones (gcore
# writes no segment for unchanged library text: unwind tables come from the files); the text
# output has the same threads. Then the core's mapped files found
# elsewhere: libpython (or the program, with --exe) copied into a folder given with
# --lib-search while the recorded path holds another build, which is refused by name. Then
# cores cut short at a few places, and files that are not cores: one clear line, exit 1.
# (Cores from real crashes: dump_core_crash.sh; corrupted headers and notes: check_corefile.)
. "$(dirname "$0")/lib.sh"

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

n=0
for py in $ALL_PYTHONS; do
    case $py in "$SID_CHROOT"*) continue ;; esac # a chroot's paths: not this test's
    [ -x "$py" ] || continue
    n=$((n + 1))
    D="$WORK/p$n"
    take_core "$py" "$D"
    run_rc 0 "$RANKTOP_BIN" dump --core "$C" --json
    cp "$WORK/out" "$D/dump.json"
    same_stacks "$D/dump.json" "$D/truth.json" || fail "$py: the core's stacks are not the target's"
    run_rc 0 "$RANKTOP_BIN" dump --core "$C" --json --native
    same_stacks "$WORK/out" "$D/truth.json" native || fail "$py: --native: the core's stacks are not the target's"
    run_rc 0 "$RANKTOP_BIN" dump --core "$C"
    for name in MainThread waiter deep; do
        grep -q "^Thread [0-9]* \"$name\"" "$WORK/out" || fail "$py: text: no thread $name"
    done
    grep -q "^Python 3\." "$WORK/out" || fail "$py: text: no Python line"
    rm -f "$C"
done
[ "$n" -ge 2 ] || fail "fewer than two interpreters found: $ALL_PYTHONS"

# The mapped files elsewhere: a shared-libpython interpreter's libpython copied into a folder
# given with --lib-search is used, and the file at the recorded path is not looked at first.
for py in $ALL_PYTHONS; do
    lib=$(ldd "$py" 2> /dev/null | awk '/libpython/ { print $3 }')
    [ -n "$lib" ] && break
done
if [ -n "$lib" ]; then
    take_core "$py" "$WORK/lib"
    mkdir -p "$WORK/libs"
    cp "$lib" "$WORK/libs/"
    run_rc 0 "$RANKTOP_BIN" dump --core "$C" --json --lib-search "$WORK/libs"
    same_stacks "$WORK/out" "$WORK/lib/truth.json" || fail "--lib-search: stacks differ"
    # Another build in the folder (the static python's bytes under libpython's name): refused
    # as not the file the core mapped, and the recorded path still serves.
    cp /usr/bin/python3.11 "$WORK/libs/$(basename "$lib")"
    run_rc 0 "$RANKTOP_BIN" dump --core "$C" --lib-search "$WORK/libs"
    grep -q "is not the file the core mapped" "$WORK/out" || fail "--lib-search: another build not said"
    rm -f "$C"
fi

# --exe: the static interpreter copied elsewhere and named with --exe, for a core whose
# recorded program is gone from its place (here: a copy of it, removed after the core).
if [ -x /usr/bin/python3.11 ] && ! ldd /usr/bin/python3.11 | grep -q libpython; then
    cp /usr/bin/python3.11 "$WORK/py311"
    take_core "$WORK/py311" "$WORK/exe"
    mv "$WORK/py311" "$WORK/py311.moved"
    run_rc 1 "$RANKTOP_BIN" dump --core "$C"
    grep -q "py311, mapped by the process of the core, was not found.*--exe" "$WORK/err" ||
        fail "a missing program: $(cat "$WORK/err")"
    run_rc 0 "$RANKTOP_BIN" dump --core "$C" --json --exe "$WORK/py311.moved"
    same_stacks "$WORK/out" "$WORK/exe/truth.json" || fail "--exe: stacks differ"
    # Truncated cores: the headers cut, the notes cut, the last segment cut. One line, exit 1.
    size=$(stat -c %s "$C")
    for cut in 10 100 3000 $((size / 2)) $((size / 4 * 3)); do
        head -c "$cut" "$C" > "$WORK/cut"
        run_rc 1 "$RANKTOP_BIN" dump --core "$WORK/cut" --exe "$WORK/py311.moved"
        [ "$(wc -l < "$WORK/err")" -eq 1 ] && grep -Eq "^ranktop dump: core .*: (not an ELF file|truncated core|malformed core)" "$WORK/err" ||
            fail "cut at $cut: $(cat "$WORK/err")"
    done
    run_rc 1 "$RANKTOP_BIN" dump --core "$WORK/cut" --exe "$WORK/py311.moved" --json
    json_check "$WORK/out" "d['processes'][0]['error'].startswith('truncated core') and d['processes'][0]['threads'] == []" ||
        fail "truncated core: JSON"
fi
run_rc 1 "$RANKTOP_BIN" dump --core /usr/bin/python3
grep -q "an ELF file but not a core" "$WORK/err" || fail "a program as a core: $(cat "$WORK/err")"
run_rc 1 "$RANKTOP_BIN" dump --core /dev/null
[ "$(wc -l < "$WORK/err")" -eq 1 ] || fail "/dev/null as a core: $(cat "$WORK/err")"
run_rc 1 "$RANKTOP_BIN" dump --core "$WORK/nothing-here"
run_rc 2 "$RANKTOP_BIN" dump --core "$WORK/cut" -p 1
run_rc 2 "$RANKTOP_BIN" dump --exe /usr/bin/python3 -p 1
echo "ok: dump --core on $n interpreters"
