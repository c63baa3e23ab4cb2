#!/bin/sh
# Issue 13's defects, each driven through the real binary: inputs that are not regular files,
# outputs that are not regular files or cannot be written, hostile names in text output,
# invalid UTF-8 in JSON output, and the reasons given when something cannot be read.
. "$(dirname "$0")/lib.sh"
NONE="--nvidia-smi /nonexistent --npu-smi /nonexistent --tool-timeout 1"

start_rank 0 1
R=$LAST

# 1. A FIFO as a recorded tool output is refused at once, never waited on.
mkfifo "$WORK/fifo"
rc=0
timeout 20 "$RANKTOP_BIN" ls --nvidia-smi-file "$WORK/fifo" --npu-smi /nonexistent \
    > "$WORK/1.out" 2> "$WORK/1.err" || rc=$?
[ $rc -ne 124 ] || fail "ls hung on a FIFO --nvidia-smi-file"
grep -q "nvidia-smi: cannot read $WORK/fifo: not a regular file" "$WORK/1.err" ||
    fail "ls FIFO message: $(cat "$WORK/1.err")"
rc=0
timeout 20 "$RANKTOP_BIN" record -p "$R" -d 1 -o "$WORK/1.json" --npu-smi-file "$WORK/fifo" \
    --nvidia-smi /nonexistent 2> "$WORK/1r.err" || rc=$?
[ $rc -ne 124 ] || fail "record hung on a FIFO --npu-smi-file"
grep -q "npu-smi: cannot read $WORK/fifo: not a regular file" "$WORK/1r.err" ||
    fail "record FIFO message: $(cat "$WORK/1r.err")"
rc=0
timeout 20 "$RANKTOP_BIN" ls --hostfile "$WORK/fifo" 2> "$WORK/1h.err" || rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "ls --hostfile FIFO: exit $rc"
grep -q "not a regular file" "$WORK/1h.err" || fail "hostfile FIFO message: $(cat "$WORK/1h.err")"

# 2, 3. Outputs that are not regular files, or not files at all, are refused before any
# sampling (-d 60 under a 20 s timeout) and left as they were.
mknod "$WORK/null" c 1 3
ln -s "$WORK/target.json" "$WORK/link.json"
mkdir "$WORK/dir"
for o in "$WORK/fifo" "$WORK/null" "$WORK/link.json" "$WORK/dir" "$WORK/dir/" "" -; do
    rc=0
    # shellcheck disable=SC2086
    timeout 20 "$RANKTOP_BIN" record -p "$R" -d 60 -o "$o" $NONE 2> "$WORK/2.err" || rc=$?
    [ $rc -eq 2 ] || fail "-o '$o': exit $rc, not refused up front: $(cat "$WORK/2.err")"
    grep -q "ranktop record: " "$WORK/2.err" || fail "-o '$o': no message"
done
[ -p "$WORK/fifo" ] && [ -c "$WORK/null" ] && [ -L "$WORK/link.json" ] && [ -d "$WORK/dir" ] ||
    fail "a refused output node was replaced"
[ ! -e "$WORK/target.json" ] || fail "written through a symbolic link"
# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$R" -d 1 -o "$WORK/null" $NONE 2>&1 | grep -q "$WORK/null is a character device" ||
    fail "device message"

# 11. Temps of our own naming whose process is gone are removed at start; a live one is not;
# a valid long output name still gets a temp name within NAME_MAX.
sh -c 'exit 0' &
DEAD=$!
wait $DEAD
touch "$WORK/out.json.tmp.$DEAD" "$WORK/out.json.tmp.$$" "$WORK/out.json.tmp.x"
# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$R" -d 1 -o "$WORK/out.json" $NONE 2> "$WORK/11.err" ||
    fail "record: $(cat "$WORK/11.err")"
[ ! -e "$WORK/out.json.tmp.$DEAD" ] || fail "stale temp of a dead run kept"
[ -e "$WORK/out.json.tmp.$$" ] && [ -e "$WORK/out.json.tmp.x" ] || fail "a temp that is not stale was removed"
grep -q "removed 1 temp file" "$WORK/11.err" || fail "no line about the removed temp: $(cat "$WORK/11.err")"
LONG=$(python3 -c 'print("L" * 250 + ".json")')
# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$R" -d 1 -o "$WORK/$LONG" $NONE 2> "$WORK/11l.err" ||
    fail "a 255-byte output name: $(cat "$WORK/11l.err")"
[ -s "$WORK/$LONG" ] || fail "the 255-byte output was not written"
[ -z "$(ls "$WORK" | grep '\.tmp\.[0-9]*$' | grep -v "out.json.tmp.$$")" ] || fail "temps left: $(ls "$WORK")"

echo ok
