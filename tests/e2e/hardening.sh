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
timeout 20 "$RANKTOP_BIN" ls --nvidia-smi-file "$WORK/fifo" --npu-smi /nonexistent \
    > "$WORK/1.out" 2> "$WORK/1.err" && fail "ls with a FIFO device file exited 0"
[ $? -ne 124 ] || fail "ls hung on a FIFO --nvidia-smi-file"
grep -q "nvidia-smi: cannot read $WORK/fifo: not a regular file" "$WORK/1.err" ||
    fail "ls FIFO message: $(cat "$WORK/1.err")"
rc=0
timeout 20 "$RANKTOP_BIN" record -p "$R" -d 1 -o "$WORK/1.json" --npu-smi-file "$WORK/fifo" \
    --nvidia-smi /nonexistent 2> "$WORK/1r.err" || rc=$?
[ $rc -ne 124 ] || fail "record hung on a FIFO --npu-smi-file"
grep -q "npu-smi: cannot read $WORK/fifo: not a regular file" "$WORK/1r.err" ||
    fail "record FIFO message: $(cat "$WORK/1r.err")"
timeout 20 "$RANKTOP_BIN" ls --hostfile "$WORK/fifo" 2> "$WORK/1h.err" && fail "FIFO hostfile accepted"
[ $? -ne 124 ] || fail "ls hung on a FIFO --hostfile"
grep -q "not a regular file" "$WORK/1h.err" || fail "hostfile FIFO message: $(cat "$WORK/1h.err")"

echo ok
