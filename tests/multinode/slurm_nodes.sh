#!/bin/sh
# ls, dump, record and the monitor inside a real Slurm allocation (a private one-machine cluster, slurm.sh)
# whose one node, simnode01, is not this host's name: with SLURM_JOB_ID and SLURM_JOB_NODELIST
# set and no --hosts, ranktop reaches the node through "srun --overlap" steps, although the
# rank's own step holds every CPU of the node. ls and dump tag the rank with its host, record
# writes a lane named with it, and no agent nor agent step is left afterwards.
. "$(dirname "$0")/../ui/lib.sh"
. "$RANKTOP_SRCDIR/tests/multinode/slurm.sh"
trap 'slurm_stop; ui_cleanup' EXIT

slurm_start || exit $?
NODE=$SLURM_NODE
PY=$RANKTOP_SRCDIR/tests/py/waits_in.py
CPUS=$(nproc)

# The rank: one task holding all the node's CPUs, so that only an overlapping step fits beside.
JOB=$(sbatch --parsable -N1 -n1 -c "$CPUS" -w "$NODE" -o "$WORK/job.out" \
    --wrap "exec srun -N1 -n1 -c $CPUS env RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 python3 $PY all_reduce") ||
    fail "sbatch failed"
JOB=${JOB%%;*}

# rank_pid: the rank's pid once it runs in the job's step (its environment names the job).
rank_pid() {
    for p in $(pgrep -f "waits_in.py all_reduce" || true); do
        tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "SLURM_JOB_ID=$JOB" &&
            tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "SLURM_STEP_ID=0" &&
            { echo "$p"; return 0; }
    done
    return 1
}
wait_for rank_pid >/dev/null ||
    fail "the rank of job $JOB did not start: $(squeue -h -j "$JOB" -o '%T %R' 2>&1) $(cat "$WORK/job.out" 2>/dev/null)"
RANK_PID=$(rank_pid)

# The head runs with the job's environment, as in a shell of the allocation (SLURM_CONF is
# exported by slurm_start).
export SLURM_JOB_ID="$JOB" SLURM_JOB_NODELIST="$NODE"

# Each check below says what failed and the test goes on, so that one run shows every problem.
FAILED=
bad() {
    echo "FAIL: $*" >&2
    FAILED=1
}

# ls: one srun step running "ranktop ls --json" on simnode01, the rank tagged with that host.
# (timeout: a remote ls that itself turned head again would otherwise nest srun steps.)
n=0
until timeout 60 $RANKTOP_BIN ls --json --remote-ranktop "$RANKTOP_BIN" --no-device-libs \
    >"$WORK/ls.json" 2>"$WORK/ls.err" &&
    json_check "$WORK/ls.json" "any(p.get('host') == '$NODE' and p.get('rank') == 0 and p.get('pid') == $RANK_PID for p in d['processes'])" \
        2>"$WORK/ls.check"; do
    n=$((n + 1))
    if [ $n -ge 3 ]; then
        bad "ls inside job $JOB: $(cat "$WORK/ls.err" "$WORK/ls.json" "$WORK/ls.check" 2>/dev/null)"
        break
    fi
    sleep 1
done

# dump: the rank's stack, from the node, tagged with the host.
timeout 60 $RANKTOP_BIN dump --json --remote-ranktop "$RANKTOP_BIN" >"$WORK/dump.json" 2>"$WORK/dump.err" ||
    bad "dump inside job $JOB exited $?: $(cat "$WORK/dump.err" "$WORK/dump.json")"
json_check "$WORK/dump.json" "any(p.get('host') == '$NODE' and p.get('pid') == $RANK_PID and p['threads'][0]['frames'][0]['function'] == 'all_reduce' for p in d['processes'] if p.get('threads'))" ||
    bad "dump inside job $JOB: no rank on $NODE waiting in all_reduce"

# record: an agent on simnode01 through srun --overlap; a lane named with the host.
if timeout 60 $RANKTOP_BIN record -o "$WORK/t.json" -d 5 --remote-ranktop "$RANKTOP_BIN" >"$WORK/rec.out" 2>&1; then
    python3 "$RANKTOP_SRCDIR/tests/tools/trace_check.py" "$WORK/t.json" \
        --lane-name-regex "^rank 0 \\(pid $RANK_PID, $NODE" --slice all_reduce ||
        bad "trace of job $JOB: $(cat "$WORK/rec.out")"
else
    bad "record inside job $JOB exited $?: $(cat "$WORK/rec.out")"
fi

# The monitor, as typed in a shell of the allocation: the rank listed on simnode01.
# watch through srun (the job's nodes by default): the report names the rank and its node
# (other tests' ranks may share the simulated node: their deaths are reports too).
rc=0
timeout 120 $RANKTOP_BIN watch --out "$WORK/w" --hang-after 3 --exit-on-hang --remote-ranktop "$RANKTOP_BIN" \
    --no-device-libs >"$WORK/w.out" 2>&1 || rc=$?
if [ $rc -eq 3 ]; then
    json_check "$(echo "$WORK"/w/ranktop-hang-*/report.json)" \
        "(0, '$NODE', $RANK_PID) in [(r['rank'], r['host'], r['pid']) for r in d['ranks']]" ||
        bad "watch inside job $JOB: the report does not name rank 0 on $NODE"
else
    bad "watch inside job $JOB exited $rc, not 3: $(cat "$WORK/w.out")"
fi

ui_start sl 160 40 -- "$RANKTOP_BIN" --remote-ranktop "$RANKTOP_BIN" --no-device-libs
wait_screen "^ +0 +$RANK_PID +$NODE " 60 || bad "the monitor inside job $JOB: rank 0 not on $NODE"
keys q
wait_screen '^EXITED 0' 20 || bad "the monitor inside job $JOB did not quit"

# --ship through srun: one step, every task reads the same binary from the broadcast stdin
# (ls, record); the tasks' temporary directories (srun exports TMPDIR) are empty afterwards.
mkdir -p "$WORK/shiptmp"
if TMPDIR=$WORK/shiptmp timeout 60 $RANKTOP_BIN ls --json --ship --no-device-libs >"$WORK/sls.json" 2>"$WORK/sls.err"; then
    json_check "$WORK/sls.json" "any(p.get('host') == '$NODE' and p.get('pid') == $RANK_PID for p in d['processes'])" ||
        bad "ls --ship inside job $JOB: $(cat "$WORK/sls.err")"
    grep -Eq "^ranktop --ship: $NODE: [0-9]+ bytes in" "$WORK/sls.err" || bad "ls --ship: no cost: $(cat "$WORK/sls.err")"
else
    bad "ls --ship inside job $JOB exited $?: $(cat "$WORK/sls.err" "$WORK/sls.json")"
fi
if TMPDIR=$WORK/shiptmp timeout 60 $RANKTOP_BIN record -o "$WORK/st.json" -d 5 --ship >"$WORK/srec.out" 2>&1; then
    python3 "$RANKTOP_SRCDIR/tests/tools/trace_check.py" "$WORK/st.json" \
        --lane-name-regex "^rank 0 \\(pid $RANK_PID, $NODE" --slice all_reduce ||
        bad "record --ship, trace of job $JOB: $(cat "$WORK/srec.out")"
    grep -Eq "^ranktop: host $NODE: up, .*shipped [0-9]+ bytes" "$WORK/srec.out" ||
        bad "record --ship: no cost: $(cat "$WORK/srec.out")"
else
    bad "record --ship inside job $JOB exited $?: $(cat "$WORK/srec.out")"
fi
i=0
while [ -n "$(ls -A "$WORK/shiptmp")" ]; do
    i=$((i + 1))
    if [ $i -ge 300 ]; then
        bad "--ship through srun left $(ls -A "$WORK/shiptmp")"
        break
    fi
    sleep 0.1
done

# No agent is left: neither an agent process started by this job's steps nor a ranktop step.
agents_left() {
    for p in $(pgrep -f "ranktop agent" || true); do
        tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "SLURM_JOB_ID=$JOB" && return 0
    done
    squeue -h -s -j "$JOB" -o '%i %j' 2>/dev/null | grep -q ' ranktop$' && return 0
    return 1
}
i=0
while agents_left; do
    i=$((i + 1))
    if [ $i -ge 100 ]; then
        bad "an agent is left after record: $(squeue -h -s -j "$JOB" -o '%i %j' 2>&1)"
        break
    fi
    sleep 0.1
done
# The rank's own step was not disturbed.
kill -0 "$RANK_PID" 2>/dev/null || bad "the rank died while ranktop watched it"
[ -z "$FAILED" ] || exit 1
echo ok
