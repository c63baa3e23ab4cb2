#!/bin/sh
# Traces that stay openable when long: `ranktop record --format perfetto` and gzip output,
# recorded from real CPython processes (tests/py/phases.py: the main thread spins in
# phase_a/b/c -> spin).
#  1. --format perfetto -o x.perfetto-trace, on Debian's python3 and on each pyenv Python:
#     tests/tools/perfetto_check.py decodes it with protoc against
#     tests/data/perfetto/perfetto_subset.proto and checks the packet sequence, interning,
#     the process track (the target's real pid, its name), the thread track (tid == pid,
#     MainThread), known functions among the interned names, balanced slices per track and
#     the memory counters' values.
#  2. No -f: the name chooses. y.perfetto-trace.gz is Perfetto, gzipped (gzip -t, decoded the
#     same way; --gpu-usage without a GPU shows as an instant); z.json.gz is a Chrome trace,
#     gzipped: gzip -t passes, zcat gives JSON that python3 -m json.tool reads and
#     tests/tools/trace_check.py accepts.
#  3. Autosave with .gz: while a record with --autosave-interval runs, the file it has
#     rewritten is already a whole gzip stream of a whole trace (atomic rename); so is the
#     final one.
. "$(dirname "$0")/lib.sh"
NONE="--nvidia-smi /nonexistent --npu-smi /nonexistent --tool-timeout 1"
CHECK="python3 $RANKTOP_SRCDIR/tests/tools/perfetto_check.py"
PHASES="$RANKTOP_SRCDIR/tests/py/phases.py"

command -v protoc > /dev/null || fail "protoc not found (Debian protobuf-compiler)"

# 1. Perfetto from each interpreter.
n=0
for py in /usr/bin/python3 $(echo "$ALL_PYTHONS" | tr ' ' '\n' | grep pyenv || true); do
    [ -x "$py" ] || continue
    n=$((n + 1))
    start_ready "$py" "$PHASES"
    # shellcheck disable=SC2086
    "$RANKTOP_BIN" record -p "$T" -r 20 -d 2 --cpu-mem-usage --format perfetto \
        -o "$WORK/x$n.perfetto-trace" $NONE 2> "$WORK/x$n.err" ||
        fail "$py: record: $(cat "$WORK/x$n.err")"
    $CHECK "$WORK/x$n.perfetto-trace" --pid "$T" --thread MainThread --fn spin --fn '<module>' \
        --counter 'rss MiB' --min-slices 2 > "$WORK/x$n.sum" ||
        fail "$py: perfetto trace did not check"
    grep -q "\"pids\": \[$T\]" "$WORK/x$n.sum" || fail "$py: pids: $(cat "$WORK/x$n.sum")"
    # The main thread's track has the target's own tid (== pid), not a small number.
    protoc -I "$RANKTOP_SRCDIR/tests/data/perfetto" --decode=perfetto.protos.Trace \
        perfetto_subset.proto < "$WORK/x$n.perfetto-trace" > "$WORK/x$n.txt"
    grep -q "tid: $T\$" "$WORK/x$n.txt" || fail "$py: no thread track with tid $T"
    grep -q 'process_name: "pid '"$T" "$WORK/x$n.txt" || fail "$py: process name"
    kill_tree "$T"
done
[ "$n" -ge 1 ] || fail "no Python interpreter found"

# 2. The format from the name, gzipped.
# --gpu-usage on a host without GPUs: the trace says so (an instant on the "ranktop" track).
start_ready python3 "$PHASES"
# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$T" -r 20 -d 1.5 --gpu-usage -o "$WORK/y.perfetto-trace.gz" $NONE \
    2> "$WORK/y.err" || fail "record y: $(cat "$WORK/y.err")"
gzip -t "$WORK/y.perfetto-trace.gz" || fail "y.perfetto-trace.gz is not gzip"
NOGPU="gpu counters unavailable"
[ -e /dev/nvidia0 ] && NOGPU="started" # a GPU host: only the rank's start instant is sure
$CHECK "$WORK/y.perfetto-trace.gz" --pid "$T" --fn spin --instant "$NOGPU" > /dev/null ||
    fail "gzipped perfetto"
# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$T" -r 20 -d 1.5 -o "$WORK/z.json.gz" $NONE 2> "$WORK/z.err" ||
    fail "record z: $(cat "$WORK/z.err")"
gzip -t "$WORK/z.json.gz" || fail "z.json.gz is not gzip"
zcat "$WORK/z.json.gz" | python3 -m json.tool > /dev/null || fail "z.json.gz: not JSON"
zcat "$WORK/z.json.gz" > "$WORK/z.json"
python3 "$RANKTOP_SRCDIR/tests/tools/trace_check.py" "$WORK/z.json" --lanes 1 --slice spin \
    > /dev/null || fail "z.json.gz: Chrome trace did not check"

# 3. Autosave rewrites a .gz file while recording.
# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$T" -r 20 -d 30 --autosave-interval 0.3 -o "$WORK/a.json.gz" $NONE \
    2> "$WORK/a.err" &
R=$!
PIDS="$PIDS $R"
wait_for test -s "$WORK/a.json.gz" || fail "no autosave: $(cat "$WORK/a.err")"
cp "$WORK/a.json.gz" "$WORK/a-mid.json.gz"
gzip -t "$WORK/a-mid.json.gz" || fail "autosaved file is not a whole gzip stream"
zcat "$WORK/a-mid.json.gz" | python3 -m json.tool > /dev/null || fail "autosaved: not JSON"
kill -INT "$R"
wait "$R" || fail "record with autosave: exit $? $(cat "$WORK/a.err")"
gzip -t "$WORK/a.json.gz" || fail "final autosaved file is not gzip"
zcat "$WORK/a.json.gz" > "$WORK/a.json"
python3 "$RANKTOP_SRCDIR/tests/tools/trace_check.py" "$WORK/a.json" --slice spin > /dev/null ||
    fail "final .gz trace did not check"
ls "$WORK" | grep -q '\.tmp\.' && fail "temp files left: $(ls "$WORK")"
echo ok
