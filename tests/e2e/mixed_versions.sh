#!/bin/sh
# One job, several interpreters (issue 15: no same-version rule): ranks running pyenv's
# 3.8-3.13 and Debian's static python3.11 at once are each listed by `ls --json` with their
# rank, read by one `dump --json` with their own version, and recorded by one `record`, every
# rank's stack in its own lane with the function that only that rank's interpreter runs.
. "$(dirname "$0")/lib.sh"

i=0
for py in $ALL_PYTHONS; do
    [ -x "$py" ] || continue
    v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    f=$(echo "loop_$v" | tr . _)
    RANK=$i LOCAL_RANK=$i WORLD_SIZE=16 "$py" -S -c "import sys, time
def $f():
    open(sys.argv[1], 'w').write('ok')
    while True:
        time.sleep(0.05)
$f()  # mixed_versions_marker" "$WORK/ready.$i" &
    PIDS="$PIDS $!"
    echo "$i $v $f" >> "$WORK/ranks"
    i=$((i + 1))
done
[ "$i" -ge 3 ] || fail "fewer than three interpreters: $ALL_PYTHONS"
j=0
while [ $j -lt $i ]; do
    wait_for test -s "$WORK/ready.$j" || fail "rank $j did not start"
    j=$((j + 1))
done

$RANKTOP_BIN ls --json --match mixed_versions_marker > "$WORK/ls.json" 2> "$WORK/ls.err" ||
    fail "ls failed: $(cat "$WORK/ls.err")"
PIDLIST=$(python3 -c 'import json,sys; print(",".join(str(p["pid"]) for p in json.load(open(sys.argv[1]))["processes"]))' "$WORK/ls.json")
$RANKTOP_BIN dump --json -p "$PIDLIST" > "$WORK/dump.json" 2> "$WORK/dump.err" ||
    fail "dump failed: $(cat "$WORK/dump.err")"
$RANKTOP_BIN record --match mixed_versions_marker -d 2 -f collapsed -o "$WORK/t.folded" \
    > "$WORK/rec.err" 2>&1 || fail "record failed: $(cat "$WORK/rec.err")"
python3 - "$WORK/ranks" "$WORK/ls.json" "$WORK/t.folded" "$WORK/dump.json" <<'PYEOF' || fail "a rank or its interpreter is missing"
import json, sys
ranks = [l.split() for l in open(sys.argv[1])]
by_rank = {p["rank"]: p for p in json.load(open(sys.argv[2]))["processes"]}
version = {p["pid"]: p["python"] for p in json.load(open(sys.argv[4]))["processes"]}
folded = open(sys.argv[3], encoding="utf-8").read().splitlines()
assert len(by_rank) == len(ranks), ("ls lists", sorted(by_rank), "of", len(ranks), "ranks")
for r, v, f in ranks:
    p = by_rank.get(int(r))
    assert p is not None and p["python"] is True, ("ls: rank", r, p)
    got = version.get(p["pid"]) or ""
    assert got == v or got.startswith(v + "."), ("dump: rank", r, "python", got, "want", v)
    lines = [l for l in folded if l.startswith("rank %s;" % r) or l.startswith("rank %s " % r)]
    assert any(f in l for l in lines), ("rank", r, "has no stack in", f, lines[:3])
    others = [l for l in lines if "loop_" in l and f not in l]
    assert not others, ("rank", r, "shows another interpreter's function", others[:2])
print("ok", len(ranks), "ranks")
PYEOF
echo ok
