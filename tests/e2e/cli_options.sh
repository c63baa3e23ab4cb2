#!/bin/sh
# Options as one source: every long option getopt accepts is in its command's --help (read
# from the real binary: tools/help_check.py), each description starts in one column, record
# --help names every format name and suffix the exporter accepts. Flags that name processes
# (-p, --children-of, --match) and other hosts: refused when --hosts names another node (the
# agents there find their ranks themselves), this node only inside a Slurm allocation; dump
# narrows --ranks with ls's discovery flags.
# shellcheck disable=SC2086 # $NONE is a word list on purpose
. "$(dirname "$0")/lib.sh"
NONE="--nvidia-smi /nonexistent --npu-smi /nonexistent --no-device-libs"
# Nothing here reads stdin: the commands get /dev/null, whatever the test runner gives.
exec < /dev/null

# 1. --help against getopt, alignment, the exporter's formats.
python3 "$RANKTOP_SRCDIR/tests/tools/help_check.py" "$RANKTOP_BIN" check "$RANKTOP_SRCDIR" ||
    fail "the --help texts and the options getopt accepts disagree (above)"

# A Python target with a word of its own on its command line, and one under a shell launcher.
MARK="cli-options-$$"
python3 -S -c 'import sys, time
while True: time.sleep(0.5)' "$MARK" &
T=$!
PIDS="$PIDS $T"
sh -c 'python3 -S -c "import time
while True: time.sleep(0.5)" & wait' &
L=$!
PIDS="$PIDS $L"
child() { C=$(pgrep -P "$L" python3 | head -n 1) && [ -n "$C" ]; }
wait_for child || fail "the launcher's child did not start"

# 2. -p (or --children-of, --match) with a host that is not this node: refused before any
# remote shell starts, one line naming both, exit 2.
cat > "$WORK/rsh" << EOF
#!/bin/sh
touch "$WORK/rsh-ran"
exec sleep 30
EOF
chmod +x "$WORK/rsh"
HOSTS="--hosts other-node-$$ --rsh $WORK/rsh"
for args in "record -o $WORK/t.json -d 2 -p $T" "record -o $WORK/t.json -d 2 --match $MARK" \
    "ls -p $T" "dump --children-of $L" "dump -p $T" "-p $T" "--children-of $L"; do
    run_rc 2 "$RANKTOP_BIN" $args $HOSTS $NONE
    { grep -q -- '-p\|--children-of\|--match' "$WORK/err" && grep -q -- '--hosts' "$WORK/err"; } ||
        fail "$args --hosts: $(cat "$WORK/err")"
    [ "$(wc -l < "$WORK/err")" -eq 1 ] || fail "$args --hosts: more than one line: $(cat "$WORK/err")"
done
[ ! -e "$WORK/rsh-ran" ] || fail "a remote shell was started for a refused command line"
# The local node named as a host is no other host: -p applies.
run_rc 0 "$RANKTOP_BIN" ls -p $T --hosts localhost --json $NONE
json_check "$WORK/out" "[p['pid'] for p in d['processes']] == [$T]"

# 3. Inside a Slurm allocation, -p means this node's process: no srun step for the others.
mkdir "$WORK/bin"
cat > "$WORK/bin/srun" << EOF
#!/bin/sh
touch "$WORK/srun-ran"
exec sleep 30
EOF
chmod +x "$WORK/bin/srun"
run_rc 0 env PATH="$WORK/bin:$PATH" SLURM_JOB_ID=4242 SLURM_JOB_NODELIST="other-node-$$" \
    "$RANKTOP_BIN" record -o "$WORK/slurm.json" -d 2 -p $T $NONE
[ ! -e "$WORK/srun-ran" ] || fail "record -p in a Slurm allocation started srun for other nodes"
json_check "$WORK/slurm.json" "any(e.get('pid') == $T for e in d['traceEvents'])"
run_rc 0 env PATH="$WORK/bin:$PATH" SLURM_JOB_ID=4242 SLURM_JOB_NODELIST="other-node-$$" \
    "$RANKTOP_BIN" dump -p $T --json $NONE
json_check "$WORK/out" "[p['pid'] for p in d['processes']] == [$T]"
[ ! -e "$WORK/srun-ran" ] || fail "dump -p in a Slurm allocation started srun for other nodes"

# 4. dump narrows --ranks with ls's flags (and they imply --ranks).
run_rc 0 "$RANKTOP_BIN" dump --ranks --match "$MARK" --json $NONE
json_check "$WORK/out" "[p['pid'] for p in d['processes']] == [$T]"
run_rc 0 "$RANKTOP_BIN" dump --match "$MARK" $NONE
grep -q "^Process $T: " "$WORK/out" || fail "dump --match: $(cat "$WORK/out")"
run_rc 0 "$RANKTOP_BIN" dump --children-of $L --json $NONE
json_check "$WORK/out" "[p['pid'] for p in d['processes']] == [$C]"
# -p and --match: both, each process once.
run_rc 0 "$RANKTOP_BIN" dump -p $T,$C --match "$MARK" --json $NONE
json_check "$WORK/out" "sorted(p['pid'] for p in d['processes']) == sorted([$T, $C])"
run_rc 1 "$RANKTOP_BIN" dump --match "no-such-process-$$" $NONE
grep -q "no-such-process-$$" "$WORK/err" || fail "dump --match nothing: $(cat "$WORK/err")"
run_rc 2 "$RANKTOP_BIN" dump --match '(' $NONE
echo ok
