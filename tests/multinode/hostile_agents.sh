#!/bin/sh
# Agent output is untrusted input: next to a healthy node, one agent writes garbage, a 200 KB
# line, control bytes and ids out of range; one speaks protocol 9; one dies after its hello;
# one claims huge stacks and then floods definitions (hog); one defines 3 000 ranks; one sends
# a time of 2^63 - 1; one says hello twice; one never says anything (tests/multinode/
# hostile-ranktop). The head records the healthy node whole, says what went wrong on each
# other host, never crashes, retries the one that died, and stays within its memory cap plus
# a fixed amount per host.
. "$(dirname "$0")/../e2e/lib.sh"
. "$RANKTOP_SRCDIR/tests/multinode/nodes.sh"
trap 'node_stop_all; cleanup' EXIT
trap 'exit 1' INT TERM

HOSTS="node01 evil future crashy hog ranks clock hello2 silent"
for n in $HOSTS; do node_start $n || exit $?; done
node_spawn node01 env RANK=0 WORLD_SIZE=1 python3 "$RANKTOP_SRCDIR/tests/py/waits_in.py" \
    all_reduce < /dev/null
export REAL_RANKTOP="$RANKTOP_BIN"
# 12 s: a host silent for 10 s is said to have never answered. The peak RSS of the head
# (ru_maxrss of its process) goes to $WORK/rss_kb.
python3 -c 'import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
open(sys.argv[1], "w").write("%d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc)' "$WORK/rss_kb" \
    $RANKTOP_BIN record -o "$WORK/t.json" -d 12 --memory-cap 64 --hosts "$(echo $HOSTS | tr ' ' ,)" \
    --rsh "$RANKTOP_SRCDIR/tests/multinode/fake-rsh" \
    --remote-ranktop "$RANKTOP_SRCDIR/tests/multinode/hostile-ranktop" > "$WORK/out" 2>&1 ||
    fail "record exited $?: $(cat "$WORK/out")"
cat "$WORK/out"
python3 "$RANKTOP_SRCDIR/tests/tools/trace_check.py" "$WORK/t.json" \
    --lane-name-regex '^rank 0 \(pid [0-9]+, node01' --slice all_reduce || fail "node01's lane"
grep -q '^ranktop: host node01: up, 1 ranks' "$WORK/out" || fail "node01 not up"
# A host is shown under the head's name for it, never the agent's (evil calls itself
# "evil\033[2J", hello2's second hello "impostor").
grep -q '^ranktop: host evil: .*last error: agent stream: ' "$WORK/out" ||
    fail "evil: no stream error, or not under the head's name for it"
grep -q '^ranktop: host future: .*protocol 9\.0' "$WORK/out" || fail "future: no version error"
grep -Eq '^ranktop: host crashy: .*, [2-9] connects' "$WORK/out" || fail "crashy not retried"
# Bounds: hog's 50 000 huge stacks cost what their bytes bring; its flood is cut off.
grep -q '^ranktop: host hog: down, .*, 1 connects; .*frame texts would take .* past 32 MiB: host cut off' \
    "$WORK/out" ||
    fail "hog not cut off (for good)"
grep -q '^ranktop: host ranks: .*, 1024 ranks, .*more than 1024 live ranks on this host' \
    "$WORK/out" || fail "ranks: no cap on ranks per host"
grep -q '^ranktop: host clock: .*a time .* past the agent.s clock' "$WORK/out" ||
    fail "clock: a time far past the agent's clock was taken"
grep -q '^ranktop: host hello2: down, .*, 1 connects; .*a second hello (protocol error)' "$WORK/out" ||
    fail "hello2: a second hello was accepted"
grep -q impostor "$WORK/out" && fail "hello2: shown under the name its agent gave"
grep -q '^ranktop: host silent: connecting, .*never answered: no hello from its agent in 10 s' \
    "$WORK/out" || fail "silent: no error line for a host that never answered"
# The head's peak RSS: the cap (64 MiB) + its base (~15 MiB here) + at most one host's
# budget of 32 MiB (only hog fills it) + the line buffers and history churn. The old head took
# ~480 MB for hog's stacks alone.
rss=$(cat "$WORK/rss_kb")
echo "head peak RSS: $rss KiB"
if ldd "$RANKTOP_BIN" 2> /dev/null | grep -q libasan; then
    echo "RSS bound not checked: AddressSanitizer's shadow and quarantine are not the head's"
elif ldd "$RANKTOP_BIN" 2> /dev/null | grep -q libtsan; then
    echo "RSS bound not checked: ThreadSanitizer's shadow memory is not the head's"
else
    [ "$rss" -lt 196608 ] || fail "the head's peak RSS was $rss KiB (bound 192 MiB)"
fi
echo ok
