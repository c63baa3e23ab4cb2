#!/bin/sh
# dump --core on cores the kernel wrote when a target crashed: SIGSEGV (a read of a kernel
# address through ctypes) and SIGABRT (os.abort()), on one shared-libpython interpreter and Debian's
# static python3.11. The crashing thread wrote its own stack (and the others') just before,
# on the line that crashes: dump --core gives those stacks, names the signal and says which
# thread it came to; with --native that thread's innermost frames are native (abort). Needs root: kernel.core_pattern is set to a file in the test's folder
# for the test and restored on every exit (skipped, status 77, without root).
. "$(dirname "$0")/lib.sh"

TGT="$RANKTOP_SRCDIR/tests/py/core_target.py"
PAT=/proc/sys/kernel/core_pattern
[ "$(id -u)" = 0 ] && [ -w "$PAT" ] || { echo "skip: needs root and a writable $PAT"; exit 77; }
OLD_PATTERN=$(cat "$PAT")
OLD_DUMPABLE=$(cat /proc/sys/fs/suid_dumpable)
restore() {
    printf '%s\n' "$OLD_PATTERN" > "$PAT"
    cleanup
}
trap restore EXIT INT TERM
printf '%s\n' "$WORK/core.%p" > "$PAT"
ulimit -c unlimited

pys=""
for py in $ALL_PYTHONS; do
    ldd "$py" 2> /dev/null | grep -q libpython && { pys="$py"; break; }
done
[ -x /usr/bin/python3.11 ] && pys="$pys /usr/bin/python3.11"
[ -n "$pys" ] || fail "no interpreter found"

n=0
for py in $pys; do
    for kind in segv abort; do
        n=$((n + 1))
        D="$WORK/c$n"
        mkdir -p "$D"
        rc=0
        timeout -s KILL 300 "$py" -S "$TGT" "$D" "$kind" > "$D/log" 2>&1 || rc=$?
        sig=$([ $kind = segv ] && echo 11 || echo 6)
        [ "$rc" -eq $((128 + sig)) ] || fail "$py $kind: exit $rc, expected $((128 + sig))"
        C=$(ls "$WORK"/core.* 2> /dev/null | head -1)
        [ -n "$C" ] && [ -s "$C" ] || fail "$py $kind: no core written to $WORK (pattern $(cat "$PAT"))"
        run_rc 0 "$RANKTOP_BIN" dump --core "$C" --json
        python3 - "$WORK/out" "$D/truth.json" "$sig" << 'PY' || fail "$py $kind: the core's stacks are not the target's"
import json, sys
d = json.load(open(sys.argv[1]))["processes"][0]
truth = json.load(open(sys.argv[2]))["threads"]
got = {t["tid"]: t for t in d["threads"]}
bad = d["error"] is not None or d["core"]["signal"] != int(sys.argv[3])
crasher = truth[-1]  # the reporter wrote its own stack last
bad |= d["core"]["signal_tid"] != crasher["tid"]
for t in truth:
    g = got.get(t["tid"])
    want = [(f["function"], f["file"], f["line"]) for f in t["frames"]]
    have = g and [(f["function"], f["file"], f["line"]) for f in g["frames"]]
    if not g or g["name"] != t["name"] or have != want:
        bad = True
        print("thread", t["tid"], t["name"], "want", want[:3], "got", g and g["name"], (have or [])[:3], file=sys.stderr)
if bad:
    print(json.dumps(d["core"]), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
        # --native: the crashing thread's innermost frames are native (abort's, or the
        # ctypes read's), its Python frames the same, after them.
        run_rc 0 "$RANKTOP_BIN" dump --core "$C" --json --native
        json_check "$WORK/out" "(t := [t for t in d['processes'][0]['threads'] if t['name'] == 'reporter'][0])['frames'][0]['kind'] == 'native' and $([ $kind = abort ] && echo "any((f['function'] or '') == 'abort' for f in t['frames'])" || echo True) and [f['function'] for f in t['frames'] if f['kind'] == 'python'][:1] == ['crash']" ||
            fail "$py $kind: --native: the crashing thread's frames"
        run_rc 0 "$RANKTOP_BIN" dump --core "$C"
        name=$([ $kind = segv ] && echo SIGSEGV || echo SIGABRT)
        grep -q "^Signal $sig $name, thread [0-9]" "$WORK/out" || fail "$py $kind: no signal line"
        grep -q "\"reporter\".*(the signal's thread)" "$WORK/out" || fail "$py $kind: the crashing thread is not marked"
        rm -f "$C"
    done
done
[ "$(cat /proc/sys/fs/suid_dumpable)" = "$OLD_DUMPABLE" ] || fail "suid_dumpable changed"
echo "ok: $n crash cores"
