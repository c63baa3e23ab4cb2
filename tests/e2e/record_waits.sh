#!/bin/sh
# record's kind-of-wait instants: a rank whose main thread alternates between load_data and
# all_reduce (tests/py/waits_target.py), which a user's --waits rules name data and collective,
# gets a "wait: data" and a "wait: collective" instant at the changes, in the Chrome trace
# (with the kind and the rule in args; the trace passes trace_check.py) and in the Perfetto
# one. A --waits file that does not parse stops record before it samples: exit 2, FILE:LINE.
. "$(dirname "$0")/lib.sh"
NONE="--nvidia-smi /nonexistent/nvidia-smi --npu-smi /nonexistent/npu-smi --no-device-libs"

start_ready python3 "$RANKTOP_SRCDIR/tests/py/waits_target.py" alternate
printf 'data func load_data\ncollective func all_reduce\nbuiltin\n' > "$WORK/my.rules"
# shellcheck disable=SC2086
run_rc 0 "$RANKTOP_BIN" record -p "$T" -d 3 --waits "$WORK/my.rules" -o "$WORK/w.json" $NONE
python3 "$RANKTOP_SRCDIR/tests/tools/trace_check.py" "$WORK/w.json" \
    --instant "pid $T wait: data" --instant "pid $T wait: collective" ||
    fail "no wait instants in the Chrome trace"
json_check "$WORK/w.json" '[e["args"] for e in d["traceEvents"] if e.get("ph") == "i" and
    e["name"] == "pid '"$T"' wait: data"][0] == {"kind": "data",
    "why": "'"$WORK"'/my.rules:1 func load_data: load_data"}'
# shellcheck disable=SC2086
run_rc 0 "$RANKTOP_BIN" record -p "$T" -d 3 --waits "$WORK/my.rules" -o "$WORK/w.pftrace" $NONE
python3 "$RANKTOP_SRCDIR/tests/tools/perfetto_check.py" "$WORK/w.pftrace" \
    --instant "wait: data" --instant "wait: collective" > /dev/null ||
    fail "no wait instants in the Perfetto trace"
printf 'data func load_data extra\n' > "$WORK/bad.rules"
run_rc 2 "$RANKTOP_BIN" record -p "$T" -d 1 --waits "$WORK/bad.rules" -o "$WORK/x.json"
grep -q "bad.rules:1: unknown condition 'extra'" "$WORK/err" || fail "bad rules: $(cat "$WORK/err")"
[ ! -e "$WORK/x.json" ] || fail "record wrote a trace despite the bad rules"
echo "PASS record_waits"
