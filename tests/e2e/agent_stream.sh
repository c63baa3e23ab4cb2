#!/bin/sh
# `ranktop agent` on a rank with a 300-frame stack, 241-character function names, a 390-byte
# file name and a thread named with quotes, a tab and non-ASCII text: every line it writes is
# one JSON object shorter than 1024 bytes (srun's message size), deep stacks come in chunks
# that add up, names survive escaping, and the agent leaves within a second of its stdin
# closing.
. "$(dirname "$0")/lib.sh"

RANK=7 WORLD_SIZE=8 python3 "$RANKTOP_SRCDIR/tests/py/deep_names.py" "$WORK/ready" &
PIDS="$PIDS $!"
wait_for test -s "$WORK/ready" || fail "the rank did not start"
mkfifo "$WORK/in"
exec 3<> "$WORK/in"
RANK= $RANKTOP_BIN agent --all-threads --no-device-libs --nvidia-smi /nonexistent \
    --npu-smi /nonexistent -p "$(cat "$WORK/ready")" < "$WORK/in" > "$WORK/out" 2> "$WORK/err" 3>&- &
AGENT=$!
PIDS="$PIDS $AGENT"
wait_for sh -c "grep -q '\"t\":\"o\"' '$WORK/out'" || fail "no run line: $(cat "$WORK/err")"
sleep 1
exec 3>&- # the head goes away: stdin closes
i=0
while kill -0 "$AGENT" 2> /dev/null; do
    i=$((i + 1))
    [ $i -lt 20 ] || fail "the agent outlived its stdin by 2 s"
    sleep 0.1
done
python3 - "$WORK/out" << 'PYEOF' || fail "agent stream"
import json, sys
stacks, frames, names = {}, {}, []
for raw in open(sys.argv[1], "rb"):
    assert len(raw) < 1024, "line of %d bytes" % len(raw)
    m = json.loads(raw)
    if m["t"] == "f":
        frames[m["id"]] = m["fn"]
    elif m["t"] == "s":
        assert len(m["f"]) <= 60 and m["at"] == len(stacks.get(m["id"], []))
        stacks.setdefault(m["id"], []).extend(m["f"])
    elif m["t"] == "th":
        names.append(m["name"])
deepest = max(stacks.values(), key=len)
assert len(deepest) > 300, len(deepest)
assert any(frames[f].startswith("f_very_long_name") and len(frames[f]) == 241 for f in deepest)
assert 'tok"en\tizer \u00e9\u20ac' in names, names
PYEOF
echo ok
