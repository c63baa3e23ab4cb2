#!/bin/sh
# record --oncpu keeps only the samples of threads running at that moment (as austin -c): of
# tests/py/busy_idle.py's threads only "busy" (spinning) is in the output, while without it
# "sleeper" and MainThread (waiting on events) are there too. A rank collecting garbage shows
# a <gc> frame on top of the collecting thread's stack (tests/py/gc_loop.py calls gc.collect()
# over 200000 objects in a loop): on every interpreter here (gc.collecting sits in the runtime
# on 3.8, in the interpreter on 3.9-3.12, where _Py_DebugOffsets says from 3.13), also with
# --native, on top of the merged stack.
. "$(dirname "$0")/lib.sh"
NONE="--nvidia-smi /nonexistent --npu-smi /nonexistent --tool-timeout 1"

start_ready python3 "$RANKTOP_SRCDIR/tests/py/busy_idle.py"
# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$T" --all-threads --oncpu -r 50 -d 2 --format collapsed \
    -o "$WORK/on.folded" $NONE 2> "$WORK/on.err" || fail "record --oncpu: $(cat "$WORK/on.err")"
# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$T" --all-threads -r 50 -d 2 --format collapsed \
    -o "$WORK/all.folded" $NONE 2> "$WORK/all.err" || fail "record: $(cat "$WORK/all.err")"
threads() { cut -d';' -f2 "$1" | sort -u | tr '\n' ' '; }
[ "$(threads "$WORK/on.folded")" = "busy " ] || fail "--oncpu kept: $(threads "$WORK/on.folded")"
grep -q ';spin (' "$WORK/on.folded" || fail "--oncpu: no spin frame: $(cat "$WORK/on.folded")"
[ "$(threads "$WORK/all.folded")" = "MainThread busy sleeper " ] ||
    fail "without --oncpu: $(threads "$WORK/all.folded")"
kill "$T"

n=0
nat=0
for py in $ALL_PYTHONS; do
    [ -x "$py" ] || continue
    n=$((n + 1))
    start_ready "$py" "$RANKTOP_SRCDIR/tests/py/gc_loop.py"
    # shellcheck disable=SC2086
    "$RANKTOP_BIN" record -p "$T" -r 50 -d 1 --format collapsed -o "$WORK/gc.folded" $NONE \
        2> "$WORK/gc.err" || fail "$py: record: $(cat "$WORK/gc.err")"
    # <gc> only ever innermost, right inside collect_loop, and in some samples.
    grep -q ';collect_loop ([^;]*;<gc> [0-9]*$' "$WORK/gc.folded" ||
        fail "$py: no <gc> frame: $(cat "$WORK/gc.folded")"
    ! grep -q '<gc>;' "$WORK/gc.folded" || fail "$py: <gc> not innermost: $(cat "$WORK/gc.folded")"
    # --native: the merged stack keeps <gc> on top, above the collector's native frames
    # ("symbol (object)", no line) inside collect_loop. A static interpreter without symbols
    # (Debian's) shows none of them: there <gc> sits right on collect_loop.
    # shellcheck disable=SC2086
    "$RANKTOP_BIN" record --native -p "$T" -r 50 -d 1 --format collapsed -o "$WORK/gcn.folded" \
        $NONE 2> "$WORK/gcn.err" || fail "$py: record --native: $(cat "$WORK/gcn.err")"
    grep -Eq ';collect_loop \([^;]*\)(;[^;]* \([^:;]*\))*;<gc> [0-9]+$' "$WORK/gcn.folded" ||
        fail "$py: --native: no <gc> on top: $(cat "$WORK/gcn.folded")"
    if grep -Eq ';collect_loop \([^;]*\)(;[^;]* \([^:;]*\))+;<gc> [0-9]+$' "$WORK/gcn.folded"; then
        nat=$((nat + 1))
    fi
    ! grep -q '<gc>;' "$WORK/gcn.folded" ||
        fail "$py: --native: <gc> not innermost: $(cat "$WORK/gcn.folded")"
    untraced "$T" || fail "$py: the target was left stopped or traced"
    kill "$T"
done
[ "$n" -ge 2 ] || fail "fewer than two interpreters found: $ALL_PYTHONS"
[ "$nat" -ge 1 ] || fail "--native: no interpreter showed native frames under <gc>"
echo ok
