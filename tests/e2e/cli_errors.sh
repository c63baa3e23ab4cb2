#!/bin/sh
# What a new user is told when a run cannot give what was asked: each failure names its real
# reason and exits 1, at once where it can be known at once. record --gil on a rank that never
# holds the GIL; an output whose directory is removed mid-run or whose disk is full (the old
# file intact); a pid that does not exist (record, the monitor, ls --children-of); a --match
# that matches nothing; and dump's per-process errors on stderr, named after the command,
# never on stdout (text, JSON and another host's); a --rsh template that cannot be split, or
# %h with srun, is a usage error of every command. Real binary, real CPython targets.
# shellcheck disable=SC2086 # $NONE is a word list on purpose
. "$(dirname "$0")/lib.sh"
NONE="--nvidia-smi /nonexistent --npu-smi /nonexistent --no-device-libs"

# err_has TEXT / err_lacks TEXT: stderr holds (does not hold) the fixed string TEXT.
err_has() { grep -qF -- "$1" "$WORK/err" || fail "stderr lacks '$1':
$(cat "$WORK/err")"; }
err_lacks() { ! grep -qF -- "$1" "$WORK/err" || fail "stderr has '$1':
$(cat "$WORK/err")"; }

# A Python target whose main thread waits on an Event: it never holds the GIL while sampled.
cat > "$WORK/waits.py" << 'EOF'
import sys, threading
def waits_forever():
    threading.Event().wait()
open(sys.argv[1], "w").write("ready")
waits_forever()
EOF
start_ready python3 "$WORK/waits.py"
true &
GONE=$!
wait "$GONE"

# 1. record --gil with no sample of a thread holding the GIL: nothing kept, so no file, exit 1,
# and the reason (without --gil the same run records the waiting thread).
run_rc 0 "$RANKTOP_BIN" record -p "$T" -d 1 -f raw -o "$WORK/all.folded" $NONE
grep -q 'waits_forever' "$WORK/all.folded" || fail "without --gil the waiting thread is missing"
run_rc 1 "$RANKTOP_BIN" record -p "$T" -d 1 --gil -o "$WORK/gil.json" $NONE
[ ! -e "$WORK/gil.json" ] || fail "--gil wrote a trace of nothing: $(head -c 300 "$WORK/gil.json")"
grep -Eq '^ranktop record: --gil: none of the [0-9]+ samples found a thread holding the GIL' \
    "$WORK/err" || fail "--gil: no reason: $(cat "$WORK/err")"
err_lacks "too short a run"

# 2. The output's directory removed mid-run: the write error with its path and errno text is
# the reason, not "no Python stack was read". The run is under way once the engine's threads
# exist (the output was checked before they start).
mkdir "$WORK/gone"
rc=0
"$RANKTOP_BIN" record -p "$T" -d 4 -o "$WORK/gone/t.json" $NONE > /dev/null 2> "$WORK/err" &
R=$!
wait_for sh -c "[ \$(ls /proc/$R/task 2> /dev/null | wc -l) -gt 1 ]" || fail "record did not start"
rm -rf "$WORK/gone"
wait "$R" || rc=$?
[ "$rc" -eq 1 ] || fail "removed directory: exit $rc: $(cat "$WORK/err")"
err_has "ranktop record: cannot write $WORK/gone/t.json: No such file or directory"
err_lacks "no Python stack"

# 3. A full disk (a tmpfs filled up after a first trace): the same, and the old file intact.
if [ "$(id -u)" -eq 0 ] && mkdir -p "$WORK/full" && mount -t tmpfs -o size=64k tmpfs "$WORK/full"; then
    full_fail() {
        umount "$WORK/full"
        fail "$@"
    }
    "$RANKTOP_BIN" record -p "$T" -d 1 -o "$WORK/full/t.json" $NONE 2> "$WORK/err" ||
        full_fail "full disk: the first trace: $(cat "$WORK/err")"
    cp "$WORK/full/t.json" "$WORK/old.json"
    dd if=/dev/zero of="$WORK/full/fill" bs=4k 2> /dev/null || true
    rc=0
    "$RANKTOP_BIN" record -p "$T" -d 1 -o "$WORK/full/t.json" $NONE 2> "$WORK/err" || rc=$?
    cmp -s "$WORK/old.json" "$WORK/full/t.json" || full_fail "full disk: the old file changed"
    ! ls "$WORK/full" | grep -q '\.tmp\.' || full_fail "full disk: a temp file was left"
    umount "$WORK/full"
    [ "$rc" -eq 1 ] || fail "full disk: exit $rc: $(cat "$WORK/err")"
    err_has "ranktop record: cannot write $WORK/full/t.json: No space left on device"
    err_lacks "no Python stack"
else
    echo "full-disk case skipped: needs root to mount a tmpfs" >&2
fi

# 4. A pid that does not exist fails at once (not at Ctrl-C): record with -p or --children-of
# (no output written), the monitor before it takes the screen. The timeout only stops the old
# behaviour (waiting for a signal); the check is the exit status and the line.
run_rc 1 timeout 120 "$RANKTOP_BIN" record -o "$WORK/x.json" -p "$GONE" $NONE
[ "$(cat "$WORK/err")" = "ranktop record: no process $GONE" ] || fail "record -p gone: $(cat "$WORK/err")"
[ ! -e "$WORK/x.json" ] || fail "record -p gone wrote its output"
run_rc 1 timeout 120 "$RANKTOP_BIN" record -o "$WORK/x.json" -p "$T" --children-of "$GONE" $NONE
[ "$(cat "$WORK/err")" = "ranktop record: no process $GONE" ] || fail "record --children-of gone: $(cat "$WORK/err")"
run_rc 1 timeout 120 "$RANKTOP_BIN" -p "$GONE" $NONE < /dev/null
[ "$(cat "$WORK/err")" = "ranktop: no process $GONE" ] || fail "monitor -p gone: $(cat "$WORK/err")"

# 5. Nothing matched: say so, naming the pattern ("no[m]atch" matches no command line, not even
# its own); a launcher that does not exist, or has no descendants, is named as such.
run_rc 1 "$RANKTOP_BIN" record -o "$WORK/x.json" --match 'no[m]atch-cli-errors' -d 1 $NONE
err_has "ranktop record: no Python process matched --match 'no[m]atch-cli-errors' while it ran"
err_lacks "too short a run"
run_rc 1 "$RANKTOP_BIN" record -o "$WORK/x.json" --children-of "$T" -d 1 $NONE
err_has "ranktop record: process $T had no Python descendants while it ran"
err_lacks "too short a run"
run_rc 1 "$RANKTOP_BIN" ls --children-of "$GONE" $NONE
err_has "ranktop ls: no process $GONE"
err_lacks "descendants"
run_rc 1 "$RANKTOP_BIN" ls --children-of "$T" $NONE
err_has "ranktop ls: no ranks found: process $T has no descendants"
err_lacks "none of the given processes exist"
# ls -p: a named process that is gone makes the exit status 1, also beside one that is listed.
run_rc 1 "$RANKTOP_BIN" ls -p "$T,$GONE" $NONE
grep -q " $T  *yes " "$WORK/out" || fail "ls -p: $T not listed: $(cat "$WORK/out")"

# 6. dump: a process that cannot be read is said on stderr, named after the command, and the
# exit status is 1; standard output holds only the stacks read.
sleep 600 &
S=$!
PIDS="$PIDS $S"
run_rc 1 "$RANKTOP_BIN" dump -p "$S"
[ ! -s "$WORK/out" ] || fail "dump -p non-Python wrote on stdout: $(cat "$WORK/out")"
grep -q "^ranktop dump: process $S is not a Python process" "$WORK/err" || fail "dump -p non-Python: $(cat "$WORK/err")"
run_rc 1 "$RANKTOP_BIN" dump -p "$T,$S,$GONE"
grep -q '^    waits_forever ' "$WORK/out" || fail "dump: the readable process is missing: $(cat "$WORK/out")"
! grep -q "error\|Process $S\|Process $GONE" "$WORK/out" || fail "dump: an error on stdout: $(cat "$WORK/out")"
[ "$(head -c 1 "$WORK/out")" = P ] || fail "dump: stdout does not start with its process"
grep -q "^ranktop dump: no such process $GONE" "$WORK/err" || fail "dump: gone pid: $(cat "$WORK/err")"
[ "$(grep -vc '^ranktop dump: ' "$WORK/err")" = 0 ] || fail "dump: a stderr line not named 'ranktop dump:': $(cat "$WORK/err")"
# --json keeps the reason in the process's error field, and says it on stderr as well.
run_rc 1 "$RANKTOP_BIN" dump --json -p "$T,$S"
json_check "$WORK/out" "[p['error'] is None for p in d['processes']] == [True, False] and 'not a Python process' in d['processes'][1]['error']"
grep -q "^ranktop dump: process $S is not a Python process" "$WORK/err" || fail "dump --json: $(cat "$WORK/err")"
# Another host's errors (its ranktop's stderr) reach this stderr under the host's name, as
# its stacks reach stdout; the remote shell's own chatter does not.
cat > "$WORK/rsh" << 'EOF'
#!/bin/sh
shift
exec "$@"
EOF
cat > "$WORK/remote-ranktop" << 'EOF'
#!/bin/sh
printf 'Process 7: python3 job.py\nPython 3.11.7\n\nThread 7 "MainThread" (idle)\n    remote_step (job.py:3)\n'
echo "Warning: Permanently added 'node' to the list of known hosts." >&2
echo "ranktop dump: process 8 is not a Python process (/usr/bin/sleep has no _PyRuntime)" >&2
exit 1
EOF
chmod +x "$WORK/rsh" "$WORK/remote-ranktop"
run_rc 1 "$RANKTOP_BIN" dump --hosts nodex --rsh "$WORK/rsh" --remote-ranktop "$WORK/remote-ranktop"
grep -q '^    remote_step (job.py:3)$' "$WORK/out" || fail "dump --hosts: no remote stack: $(cat "$WORK/out")"
[ "$(cat "$WORK/err")" = "ranktop dump: nodex: process 8 is not a Python process (/usr/bin/sleep has no _PyRuntime)" ] ||
    fail "dump --hosts: remote errors: $(cat "$WORK/err")"
# A host that cannot be reached is an error line of dump's as well.
run_rc 1 "$RANKTOP_BIN" dump --hosts nodey --rsh "$WORK/no-such-rsh"
grep -q "^ranktop dump: nodey: " "$WORK/err" || fail "dump --hosts unreachable: $(cat "$WORK/err")"

# A --rsh template no shell would take is a usage error of every command (exit 2, before any
# remote shell starts), with or without other hosts to use it on; so is %h with srun, which
# names the hosts itself.
bad_rsh() { # WANT TEMPLATE [ARG...]: each command refuses the template, saying WANT
    want=$1 tmpl=$2
    shift 2
    for cmd in ls dump record monitor; do
        case $cmd in
        record) words="record -o $WORK/rsh.json -d 1" ;;
        monitor) words="" ;;
        *) words=$cmd ;;
        esac
        rc=0
        $RANKTOP_BIN $words --rsh "$tmpl" "$@" > "$WORK/out" 2> "$WORK/err" < /dev/null || rc=$?
        [ $rc -eq 2 ] || fail "$cmd --rsh '$tmpl' $*: exit $rc, not 2: $(cat "$WORK/err")"
        err_has "$want"
        [ "$(wc -l < "$WORK/err")" -eq 1 ] || fail "$cmd --rsh '$tmpl': more than one line: $(cat "$WORK/err")"
    done
}
bad_rsh "--rsh: unbalanced single quote" "ssh -o 'ProxyCommand=ssh -W %%h:%%p bastion" --hosts nodex
bad_rsh "--rsh: unbalanced double quote" 'ssh -l "me' --hosts nodex
bad_rsh "--rsh: '%' at the end (write %% for a '%')" "ssh -p 22%" --hosts nodex
bad_rsh "--rsh: '%' must be followed by h (the host) or % (a '%')" "ssh %p" --hosts nodex
bad_rsh "--rsh: a backslash at the end" 'ssh \' --hosts nodex
bad_rsh "--rsh is empty" "" --hosts nodex
bad_rsh "--rsh is empty" "  " --hosts nodex
bad_rsh "--rsh: unbalanced single quote" "ssh 'x"
SLURM_JOB_ID=1 bad_rsh "--rsh: %h has no place with srun" "srun -w %h" --hosts nodex --launcher srun
echo ok
