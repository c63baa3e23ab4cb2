#!/bin/sh
# The second memory reader: where process_vm_readv is unavailable to ranktop (qemu-user
# answers ENOSYS; a seccomp filter, as some container runtimes' default profiles have, answers
# EPERM) but /proc/PID/mem is readable, every read goes through /proc/PID/mem with the same
# bounds. On every interpreter, `dump --json` of tests/py/known_state.py run through
# tests/support/deny_vm_readv (the filter) and, where qemu-user is installed, under
# qemu-ARCH-static must equal the target's own truth (threads, names, frames, lines) and name
# the reader and why; a plain run names process_vm_readv. ls, the text dump's header and
# record's summary say the reader once; a real refusal (another user's process) under the
# filter stays a permission error.
. "$(dirname "$0")/lib.sh"

DENY=${RANKTOP_DENY_VM_READV:?set by meson}
QEMU=$(command -v "qemu-$(uname -m)-static" || true)
[ -n "$QEMU" ] || echo "qemu-$(uname -m)-static is not installed: the emulator half is skipped" >&2
if [ -n "$QEMU" ] && grep -q __asan_init "$RANKTOP_BIN"; then
    echo "a sanitizer build (its shadow memory does not fit qemu-user): the emulator half is skipped" >&2
    QEMU=""
fi
SECCOMP_WHY="process_vm_readv: EPERM from a seccomp filter"
QEMU_WHY="process_vm_readv: ENOSYS"

# check_dump DUMP TRUTH READER WHY: the dump equals the truth and names READER and WHY ("" for
# null).
check_dump() {
    python3 - "$@" << 'PYEOF'
import json, sys
dump = json.load(open(sys.argv[1], encoding="utf-8"))
truth = json.load(open(sys.argv[2], encoding="utf-8"))
reader, why = sys.argv[3], sys.argv[4] or None
(p,) = dump["processes"]
assert p["error"] is None, p["error"]
assert (p["reader"], p["reader_why"]) == (reader, why), (p["reader"], p["reader_why"])
assert p["python"] == truth["python"], (p["python"], truth["python"])
by_tid = {t["tid"]: t for t in p["threads"]}
key = lambda f: (f["function"], f["file"], f["line"])
for want in truth["threads"]:
    got = by_tid.get(want["native_id"])
    assert got is not None, ("thread missing", want["name"], sorted(by_tid))
    assert got["name"] == want["name"] and got["error"] is None, (got["name"], got["error"])
    if want["role"] == "spinner":  # it runs: its innermost line moves
        assert [k[:2] for k in map(key, got["frames"])] == [k[:2] for k in map(key, want["frames"])]
    else:
        assert list(map(key, got["frames"])) == list(map(key, want["frames"])), (
            want["name"], list(map(key, got["frames"]))[:4], list(map(key, want["frames"]))[:4])
print("ok", truth["python"], reader, why, len(truth["threads"]), "threads")
PYEOF
}

n=0
for py in $ALL_PYTHONS; do
    [ -x "$py" ] || continue
    out="$WORK/ks$n"
    mkdir -p "$out"
    "$py" -S "$RANKTOP_SRCDIR/tests/py/known_state.py" "$out" &
    T=$!
    PIDS="$PIDS $T"
    wait_for test -s "$out/ready" || fail "$py: known_state.py did not start: $(cat "$out/error" 2> /dev/null)"
    "$RANKTOP_BIN" dump --json -p "$T" > "$out/vm.json" 2> "$out/vm.err" ||
        fail "$py: dump: $(cat "$out/vm.err")"
    check_dump "$out/vm.json" "$out/truth.json" process_vm_readv "" || fail "$py: plain dump"
    "$DENY" "$RANKTOP_BIN" dump --json -p "$T" > "$out/deny.json" 2> "$out/deny.err" ||
        fail "$py: dump under the seccomp filter: $(cat "$out/deny.err")"
    check_dump "$out/deny.json" "$out/truth.json" /proc/PID/mem "$SECCOMP_WHY" ||
        fail "$py: dump under the seccomp filter"
    if [ -n "$QEMU" ]; then
        "$QEMU" "$RANKTOP_BIN" dump --json -p "$T" > "$out/qemu.json" 2> "$out/qemu.err" ||
            fail "$py: dump under $QEMU: $(cat "$out/qemu.err")"
        check_dump "$out/qemu.json" "$out/truth.json" /proc/PID/mem "$QEMU_WHY" ||
            fail "$py: dump under $QEMU"
    fi
    # Each target spins a thread: keep only the last two running.
    [ -z "${PREV:-}" ] || kill_tree "$PREV"
    PREV=$T
    n=$((n + 1))
done
[ "$n" -ge 3 ] || fail "fewer than three interpreters: $ALL_PYTHONS"

# Said once: the text dump of two processes has one reader line, in the first header.
python3 -S -c 'import sys, time
open(sys.argv[1], "w").write("ok")
time.sleep(600)' "$WORK/second.ready" &
LAST=$!
PIDS="$PIDS $LAST"
wait_for test -s "$WORK/second.ready" || fail "the second target did not start"
"$DENY" "$RANKTOP_BIN" dump -p "$T,$LAST" > "$WORK/two.txt" 2> "$WORK/two.err" ||
    fail "text dump under the filter: $(cat "$WORK/two.err")"
[ "$(grep -c "^Memory reader: /proc/PID/mem ($SECCOMP_WHY)\$" "$WORK/two.txt")" = 1 ] ||
    fail "the reader is not said once: $(head -c 600 "$WORK/two.txt")"
sed -n 3p "$WORK/two.txt" | grep -q '^Memory reader: ' || fail "not in the first header: $(head -n 4 "$WORK/two.txt")"
"$RANKTOP_BIN" dump -p "$T,$LAST" > "$WORK/plain.txt" 2>&1 || fail "plain text dump"
! grep -q 'Memory reader' "$WORK/plain.txt" || fail "process_vm_readv is said in a plain dump"

# ls says it before any read: a text line and the JSON fields.
"$DENY" "$RANKTOP_BIN" ls -p "$T" --nvidia-smi /nonexistent --npu-smi /nonexistent \
    > "$WORK/ls.txt" 2> /dev/null || fail "ls under the filter"
sed -n 2p "$WORK/ls.txt" | grep -qx "memory reader: /proc/PID/mem ($SECCOMP_WHY)" ||
    fail "ls does not say the reader: $(head -n 3 "$WORK/ls.txt")"
"$RANKTOP_BIN" ls --json -p "$T" --nvidia-smi /nonexistent --npu-smi /nonexistent \
    > "$WORK/ls.json" 2> /dev/null || fail "ls --json"
json_check "$WORK/ls.json" 'd["reader"] == "process_vm_readv" and d["reader_why"] is None' ||
    fail "plain ls --json"
if [ -n "$QEMU" ]; then
    "$QEMU" "$RANKTOP_BIN" ls --json -p "$T" --nvidia-smi /nonexistent --npu-smi /nonexistent \
        > "$WORK/lsq.json" 2> /dev/null ||
        fail "ls --json under $QEMU"
    json_check "$WORK/lsq.json" "d['reader'] == '/proc/PID/mem' and d['reader_why'] == '$QEMU_WHY'" ||
        fail "ls --json under $QEMU"
fi

# record's summary, and what it recorded through /proc/PID/mem: the deep thread's 1000 frames.
"$DENY" "$RANKTOP_BIN" record -p "$T" -d 1 --all-threads -f collapsed -o "$WORK/r.folded" \
    --nvidia-smi /nonexistent --npu-smi /nonexistent 2> "$WORK/rec.err" ||
    fail "record under the filter: $(cat "$WORK/rec.err")"
grep -qx "ranktop: memory reader: /proc/PID/mem ($SECCOMP_WHY)" "$WORK/rec.err" ||
    fail "record's summary does not say the reader: $(cat "$WORK/rec.err")"
python3 -c 'import sys
sys.exit(not any("deep_root" in l and l.count(";recurse (") == 1000 for l in open(sys.argv[1], encoding="utf-8")))' \
    "$WORK/r.folded" || fail "record under the filter has no 1000-deep stack: $(cut -c1-300 "$WORK/r.folded")"

# A real refusal stays one: nobody cannot read root's target, filter or not.
if [ "$(id -u)" = 0 ] && command -v setpriv > /dev/null; then
    if setpriv --reuid=65534 --regid=65534 --clear-groups "$DENY" "$RANKTOP_BIN" dump -p "$T" \
        > /dev/null 2> "$WORK/perm.err"; then
        fail "nobody read root's process under the filter"
    fi
    grep -q "cannot read memory of process $T: permission denied" "$WORK/perm.err" ||
        fail "not a permission error: $(cat "$WORK/perm.err")"
fi
echo "ok ($n interpreters${QEMU:+, with $QEMU})"
