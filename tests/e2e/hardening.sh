#!/bin/sh
# Issue 13's defects, each driven through the real binary: inputs that are not regular files,
# outputs that are not regular files or cannot be written, hostile names in text output,
# invalid UTF-8 in JSON output, and the reasons given when something cannot be read; and
# the report a crash of ranktop itself leaves.
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

# 6, 7. Names a target or a device file controls never reach the terminal raw, and every JSON
# string is UTF-8.
start_ready python3 "$RANKTOP_SRCDIR/tests/py/hostile_names.py"
H=$T
wait_for sh -c "'$RANKTOP_BIN' dump -p $H > '$WORK/6.txt' 2>&1 && grep -q 'forged_frame' '$WORK/6.txt'" ||
    fail "dump of the hostile target: $(cat "$WORK/6.txt")"
python3 - "$WORK/6.txt" <<'PY' || fail "dump text: $(cat -v "$WORK/6.txt")"
import sys
b = open(sys.argv[1], "rb").read()
assert not any(c < 0x20 and c not in (0x0a,) for c in b), "a control byte in the output"
assert b"\xc2\x9b" not in b, "a C1 control in the output"
t = b.decode("utf-8")
assert not any(l.lstrip().startswith("forged_frame") for l in t.splitlines()), "a forged line"
assert "\\x1b[2J" in t and "\\u009b" in t, "the escapes are not shown"
assert not any(l.startswith('Thread 1 "fake"') for l in t.splitlines()), "a forged thread line"
PY
"$RANKTOP_BIN" dump --json -p "$H" > "$WORK/6.json" || fail "dump --json"
python3 -c 'import json,sys; d=json.loads(open(sys.argv[1],"rb").read().decode("utf-8")); assert any("forged_frame" in f["function"] for p in d["processes"] for t in p["threads"] for f in t["frames"]), d' "$WORK/6.json" ||
    fail "dump --json lost the name"
python3 - "$DATA/nvidia-smi/565.57.01_8xH100_idle_no_timestamp_line.txt" "$WORK/evil.smi" <<'PY'
import sys
b = open(sys.argv[1], "rb").read().replace(b"NVIDIA H100 80GB HBM3 ", b"H\x1b]0;x\x07\xff\xfe\x1b[2J ", 1)
open(sys.argv[2], "wb").write(b)
PY
printf 'garbage \377\376 \033[2J\n' > "$WORK/bad.smi"
"$RANKTOP_BIN" ls --nvidia-smi-file "$WORK/evil.smi" --npu-smi /nonexistent > "$WORK/7.txt" 2>&1 || true
"$RANKTOP_BIN" ls --nvidia-smi-file "$WORK/bad.smi" --npu-smi /nonexistent >> "$WORK/7.txt" 2>&1 || true
python3 -c 'import sys; b=open(sys.argv[1],"rb").read(); b.decode("utf-8"); assert not any(c < 0x20 and c != 10 for c in b), b' "$WORK/7.txt" ||
    fail "ls text: $(cat -v "$WORK/7.txt")"
grep -qF '\xff' "$WORK/7.txt" || fail "ls text does not show the bad bytes: $(cat -v "$WORK/7.txt")"
for f in evil bad; do
    "$RANKTOP_BIN" ls --json --nvidia-smi-file "$WORK/$f.smi" --npu-smi /nonexistent > "$WORK/7$f.json" 2>/dev/null || true
    python3 -c 'import json,sys; json.loads(open(sys.argv[1],"rb").read().decode("utf-8"))' "$WORK/7$f.json" ||
        fail "ls --json with $f.smi is not UTF-8 JSON"
done

# 5. The first pass waits for the first discovery, so a run shorter than one period still
# samples; when nothing could be recorded from named processes, the reason is about them.
# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$R" -r 1 -d 0.9 -o "$WORK/5.json" $NONE 2> "$WORK/5.err" ||
    fail "record -r 1 -d 0.9 recorded nothing: $(cat "$WORK/5.err")"
json_check "$WORK/5.json" "any(e.get('ph') == 'B' for e in d['traceEvents'])"
sleep 60 &
S=$!
PIDS="$PIDS $S"
rc=0
# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$S" -d 1 -o "$WORK/5b.json" $NONE 2> "$WORK/5b.err" || rc=$?
[ $rc -eq 1 ] || fail "record of a non-Python process: exit $rc"
grep -q "process $S is not a Python process" "$WORK/5b.err" || fail "reason: $(cat "$WORK/5b.err")"
! grep -q "nvidia-smi" "$WORK/5b.err" || fail "blames the device tools: $(cat "$WORK/5b.err")"

# 9, 13. As another user: a root-owned rank named with -p is said to be unreadable, and why,
# with exit status 1; plain ls says that ranks of other users could not be checked. A
# non-Python process named with -p is said to be one, with exit status 1.
PUB=$(mktemp -d)
chmod 755 "$PUB"
cp "$RANKTOP_BIN" "$PUB/ranktop"
AS_NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"
rc=0
$AS_NOBODY "$PUB/ranktop" ls -p "$R" $NONE > "$WORK/9.out" 2> "$WORK/9.err" || rc=$?
[ $rc -eq 1 ] || fail "ls -p of a root rank as nobody: exit $rc"
grep -q "process $R: cannot read its environment and memory map: permission denied (it belongs to uid 0" "$WORK/9.err" ||
    fail "no reason for the unreadable rank: $(cat "$WORK/9.err")"
grep -Eq "^- +- +- +- +$R +\? " "$WORK/9.out" || fail "the unreadable rank is not shown as unknown: $(cat "$WORK/9.out")"
rc=0
$AS_NOBODY "$PUB/ranktop" ls $NONE > "$WORK/9b.out" 2> "$WORK/9b.err" || rc=$?
grep -q "Python process.* of other users could not be checked for a rank: permission denied" "$WORK/9b.err" ||
    fail "plain ls as nobody: $(cat "$WORK/9b.err")"
rm -rf "$PUB"
rc=0
# shellcheck disable=SC2086
"$RANKTOP_BIN" ls -p "$S" $NONE > /dev/null 2> "$WORK/13.err" || rc=$?
[ $rc -eq 1 ] || fail "ls -p of a non-Python process: exit $rc"
grep -q "process $S (.*sleep) is not a Python process" "$WORK/13.err" || fail "ls -p non-Python: $(cat "$WORK/13.err")"

# 4. A rank that exec()s in place, here from one CPython version to another, is read again
# after the exec, and the trace marks the moment.
PY_A=python3
PY_B=$(ls -d "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.12*/bin/python3 2>/dev/null | head -1)
[ -x "${PY_B:-}" ] || PY_B=python3
rm -f "$WORK/ready"
RANK=0 $PY_A -S "$RANKTOP_SRCDIR/tests/py/exec_self.py" "$WORK/ready" "$PY_B" &
X=$!
PIDS="$PIDS $X"
wait_for test -s "$WORK/ready" || fail "exec_self.py did not start"
# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$X" -r 20 -d 5 -o "$WORK/4.json" $NONE 2> "$WORK/4.err" ||
    fail "record of an exec'ing rank: $(cat "$WORK/4.err")"
json_check "$WORK/4.json" "{'before_exec', 'after_exec'} <= {e['name'].split(' (')[0] for e in d['traceEvents'] if e.get('ph') == 'B'}"
json_check "$WORK/4.json" "any(e.get('ph') == 'C' and e['name'] == 'exec' and e['args'].get('count') == 1 for e in d['traceEvents'])"
grep -Eq 'errors \((0|[0-9])\.[0-9]+%\)' "$WORK/4.err" || fail "errors after the exec: $(cat "$WORK/4.err")"

# 13. A stopped thread is said to be stopped; a zombie is not alive; Python 2 is named as such.
kill -STOP "$R"
"$RANKTOP_BIN" dump -p "$R" > "$WORK/13s.txt" 2>&1 || fail "dump of a stopped rank: $(cat "$WORK/13s.txt")"
kill -CONT "$R"
grep -q '^Thread .*(stopped' "$WORK/13s.txt" || fail "dump: the stopped thread: $(cat "$WORK/13s.txt")"
python3 -S -c 'import os, sys, time
pid = os.fork()
if pid == 0:
    os._exit(0)
print(pid, flush=True)
time.sleep(60)' > "$WORK/zombie" &
PIDS="$PIDS $!"
wait_for test -s "$WORK/zombie" || fail "no zombie"
Z=$(cat "$WORK/zombie")
rc=0
# shellcheck disable=SC2086
"$RANKTOP_BIN" ls --json -p "$Z" $NONE > "$WORK/13z.json" 2> "$WORK/13z.err" || rc=$?
[ $rc -eq 1 ] || fail "ls -p of a zombie: exit $rc"
json_check "$WORK/13z.json" "all(p['alive'] is False for p in d['processes'] if p['pid'] == $Z)"
json_check "$WORK/13z.json" "any('process $Z has exited (a zombie' in e for e in d['errors'])"
mkdir "$WORK/p2"
cp "$(command -v sleep)" "$WORK/p2/python2.7"
"$WORK/p2/python2.7" 60 &
P2=$!
PIDS="$PIDS $P2"
rc=0
"$RANKTOP_BIN" dump -p "$P2" > "$WORK/13p.txt" 2>&1 || rc=$?
grep -q "process $P2 runs Python 2.7; supported 3.8 to" "$WORK/13p.txt" || fail "Python 2.7: $(cat "$WORK/13p.txt")"

# 13. JSON says when the frame cap cut a stack.
python3 -S -c 'import sys, time
sys.setrecursionlimit(10000)
def deep(n):
    if n:
        return deep(n - 1)
    open(sys.argv[1], "w").write("ready")
    time.sleep(60)
deep(5000)' "$WORK/deep.ready" &
D=$!
PIDS="$PIDS $D"
wait_for test -s "$WORK/deep.ready" || fail "deep target did not start"
"$RANKTOP_BIN" dump --json -p "$D" > "$WORK/13d.json" || fail "dump --json of a deep stack"
json_check "$WORK/13d.json" "[(len(t['frames']), t['truncated']) for t in d['processes'][0]['threads']] == [(4096, True)]"
"$RANKTOP_BIN" dump --json --max-frames 100000 -p "$D" > "$WORK/13e.json" || fail "dump --json --max-frames"
json_check "$WORK/13e.json" "[(len(t['frames']) > 5000, t['truncated']) for t in d['processes'][0]['threads']] == [(True, False)]"
# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$D" -d 1 -o "$WORK/13d.trace.json" $NONE 2> /dev/null || fail "record of a deep stack"
json_check "$WORK/13d.trace.json" "any(e.get('ph') == 'B' and e['name'] == '[outer frames not read: frame cap]' for e in d['traceEvents'])"

# 14. A crash of ranktop itself ends with a report on stderr (version, signal, thread,
# backtrace) and the signal's own exit status. A SIGSEGV sent once the engine's threads run
# (the report is installed before any) goes the same way as a fault.
# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$R" -d 600 -o "$WORK/14.json" $NONE 2> "$WORK/14.err" &
K=$!
PIDS="$PIDS $K"
wait_for sh -c "[ \$(ls /proc/$K/task | wc -l) -gt 1 ]" || fail "record did not start its threads"
kill -SEGV "$K"
rc=0
wait "$K" || rc=$?
if grep -q AddressSanitizer "$WORK/14.err"; then
    echo "14: a sanitizer build reports crashes itself"
else
    [ "$rc" = 139 ] || fail "crash: exit $rc, not 139 (SIGSEGV): $(cat "$WORK/14.err")"
    grep -Eq "^ranktop [0-9][^ ]*: crashed: SIGSEGV sent by process [0-9]+ in thread [0-9]+; backtrace:\$" \
        "$WORK/14.err" || fail "crash: no report line: $(cat "$WORK/14.err")"
    grep -q "ranktop(+0x[0-9a-f]*)\[0x" "$WORK/14.err" || fail "crash: no frame of ranktop: $(cat "$WORK/14.err")"
    grep -q "addr2line" "$WORK/14.err" || fail "crash: no closing line: $(cat "$WORK/14.err")"
fi

echo ok
