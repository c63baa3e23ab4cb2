#!/bin/sh
# A thread's stack is told anew when only one frame's function changed: on every interpreter,
# `record` follows tests/py/key_collide.py from a() to b() (one call site, the target moves
# on when it gets SIGUSR1). The sampler reuses what it interned for the unchanged outer frames
# by their keys; keys that a hash of (code serial, line) made equal for a() and b() kept a()
# on show for good (issue 12's reuse, seen in the multinode monitor as a rank that stayed in
# `_find_and_load` after start-up). The autosaved file is the ground truth of what was
# sampled: a() must be there before the signal, and b() after it.
. "$(dirname "$0")/lib.sh"

n=0
for py in $ALL_PYTHONS; do
    [ -x "$py" ] || continue
    v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    out="$WORK/k.$n.folded"
    start_ready "$py" "$RANKTOP_SRCDIR/tests/py/key_collide.py"
    "$RANKTOP_BIN" record -p "$T" -r 20 -d 120 --autosave-interval 0.2 -f collapsed -o "$out" \
        --nvidia-smi /nonexistent --npu-smi /nonexistent 2> "$WORK/k.$n.err" &
    R=$!
    PIDS="$PIDS $R"
    wait_for grep -q ';a (.*key_collide\.py:273);' "$out" ||
        fail "$py ($v): a() (line 273) never recorded: $(cat "$WORK/k.$n.err")"
    kill -USR1 "$T"
    if ! wait_for grep -q ';b (.*key_collide\.py:12);' "$out"; then
        kill -INT "$R"
        fail "$py ($v): b() (line 12) never recorded after the target moved there: $(cut -c1-300 "$out"); record said: $(cat "$WORK/k.$n.err"); target's state: $(grep -E '^(State|SigBlk|SigPnd|ShdPnd)' "/proc/$T/status" 2>&1 | tr '\n' ' ')"
    fi
    kill -INT "$R"
    wait "$R" || fail "$py ($v): record exited $?: $(cat "$WORK/k.$n.err")"
    # Every b() sample sits under the same outer frames as a()'s did.
    grep -Eq ';<module> \(.*key_collide\.py:[0-9]+\);main \(.*\);run \(.*\);b \(.*key_collide\.py:12\);' "$out" ||
        fail "$py ($v): b() is not under <module>, main, run: $(cut -c1-300 "$out")"
    kill_tree "$T"
    n=$((n + 1))
done
[ "$n" -ge 3 ] || fail "fewer than three interpreters: $ALL_PYTHONS"
echo "ok ($n interpreters)"
