#!/bin/sh
# dump's kind of wait, on real CPythons (the oldest and newest of pyenv's): a main thread in
# time.sleep in host code is "host" and a thread blocked reading a pipe nobody writes is "io"
# with its syscall named (the tids come from the target itself, tests/py/waits_target.py); the
# same process SIGSTOPped is "stopped"; a main thread in a long gc.collect() over a million
# objects is "gc" (the target collects without pause; a dump between two collections is
# retried). dump --json carries the fields, per thread and per rank; --waits FILE rules come
# before the built-in ones they pull in, and a bad FILE exits 2 naming FILE:LINE.
. "$(dirname "$0")/lib.sh"

PY="$RANKTOP_SRCDIR/tests/py/waits_target.py"
PYS=$(ls -d "$(pyenv root)"/versions/3.*/bin/python3 | grep -E '/3\.(8|9|10|11|12|13)\.' |
    sort -V | sed -n '1p;$p')
[ -n "$PYS" ] || fail "no pyenv CPython"

for py in $PYS; do
    v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    # host and io, from the target's own tids.
    start_ready "$py" "$PY" host
    cp "$WORK/ready" "$WORK/tids.json"
    # The reader may not have reached its read(2) yet, nor the main thread its sleep: retry.
    ok() {
        "$RANKTOP_BIN" dump --json -p "$T" > "$WORK/d.json" 2> "$WORK/err" &&
            python3 - "$WORK/d.json" "$WORK/tids.json" << 'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
ids = json.load(open(sys.argv[2]))
p = d["processes"][0]
th = {t["tid"]: t for t in p["threads"]}
m, r = th[ids["main_tid"]]["wait"], th[ids["reader_tid"]]["wait"]
sys.exit(not (m["kind"] == "host" and p["wait"] == m and p["in_gc"] is False and
              r["kind"] == "io" and r["syscall_name"] == "read" and r["state"] == "S" and
              r["syscall"] is not None and "in read" in r["why"]))
PYEOF
    }
    wait_for ok || fail "$v: host/io: $(cat "$WORK/d.json" "$WORK/err")"
    run_rc 0 "$RANKTOP_BIN" dump -p "$T"
    grep -q '^Wait: host (no rule matched' "$WORK/out" || fail "$v: text: $(cat "$WORK/out")"
    grep -q '"reader" (idle)  wait: io (state S in read' "$WORK/out" ||
        fail "$v: text, reader: $(cat "$WORK/out")"

    # --waits: the user's rule first, then the built-in table it pulls in.
    printf '# mine\nhost func nothing_here\ndata func host_sleep\nbuiltin\n' > "$WORK/my.rules"
    run_rc 0 "$RANKTOP_BIN" dump --json --waits "$WORK/my.rules" -p "$T"
    json_check "$WORK/out" '(d["processes"][0]["wait"]["kind"] == "data" and
        d["processes"][0]["wait"]["why"].startswith("'"$WORK"'/my.rules:3 func host_sleep"))'

    # stopped.
    kill -STOP "$T"
    stopped() {
        "$RANKTOP_BIN" dump --json -p "$T" > "$WORK/d.json" 2> "$WORK/err" &&
            json_check "$WORK/d.json" '(d["processes"][0]["wait"]["kind"] == "stopped" and
                d["processes"][0]["wait"]["state"] == "T")' 2> /dev/null
    }
    wait_for stopped || fail "$v: stopped: $(cat "$WORK/d.json" "$WORK/err")"
    kill -CONT "$T"
    kill_tree "$T"

    # gc.
    start_ready "$py" "$PY" gc
    in_gc() {
        "$RANKTOP_BIN" dump --json -p "$T" > "$WORK/d.json" 2> "$WORK/err" &&
            json_check "$WORK/d.json" '(d["processes"][0]["wait"]["kind"] == "gc" and
                d["processes"][0]["in_gc"] is True)' 2> /dev/null
    }
    wait_for in_gc || fail "$v: gc: $(cat "$WORK/d.json" "$WORK/err")"
    kill_tree "$T"
done

# A bad rules file: exit 2, FILE:LINE: why; nothing is read.
printf 'data module torch.utils.data\n\ncollective modul torch\n' > "$WORK/bad.rules"
run_rc 2 "$RANKTOP_BIN" dump --waits "$WORK/bad.rules" -p 1
grep -q "^ranktop dump: $WORK/bad.rules:3: unknown condition 'modul'" "$WORK/err" ||
    fail "bad rules: $(cat "$WORK/err")"
run_rc 2 "$RANKTOP_BIN" dump --waits "$WORK/none.rules" -p 1
echo "PASS dump_waits"
