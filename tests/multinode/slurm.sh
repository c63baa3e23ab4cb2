# A private one-machine Slurm cluster for multi-node tests (shared reference multinode.md §1.6).
#
# Source this file from a POSIX sh test (set -eu safe). It needs $WORK, a private temporary
# directory made by the test without spaces in its path; everything lives in $WORK/slurm/: its
# own munge key and munged (own socket, pid and log; the Slurm plugins reach it through
# AuthInfo=socket=, which Debian's 22.05 auth/munge and cred/munge honour), its own slurm.conf,
# state, spool, logs and pid files, and ports picked at random. No system configuration is
# read or changed (/etc/slurm and /etc/munge are left alone). It sets no trap: call slurm_stop
# from the test's own cleanup. Needs root (slurmd starts jobs as their users).
#
#   slurm_start    configure and start munged, slurmctld and one slurmd for the node
#                  $SLURM_NODE (simnode01), a Slurm name that differs from the machine's host
#                  name (NodeHostname is the real one, NodeAddr 127.0.0.1), in partition
#                  "debug"; export SLURM_CONF; wait until sinfo says the node is idle and a
#                  trivial "srun true" runs. On failure prints "skipped: REASON" and returns
#                  77, so a test can do "slurm_start || exit $?"; the daemons' logs are then on
#                  stderr.
#   slurm_stop     cancel every job, kill what their steps left, stop the daemons and munged;
#                  idempotent.
# Needs Debian packages slurmctld, slurmd, slurm-client and munge, and procps (pgrep).

: "${WORK:?slurm.sh needs WORK, a private temporary directory made by the test}"
SLURM_DIR=$WORK/slurm
SLURM_NODE=simnode01
SLURM_MUNGED_PID=
SLURM_CTLD_PID=
SLURM_D_PID=

# _slurm_skip REASON: the message for a skipped test; the caller returns 77 (a failing command
# here would end a set -e caller that did not guard the call).
_slurm_skip() {
    echo "skipped: $*"
    for _sk_f in munged.log slurmctld.log slurmd.log; do
        [ ! -s "$SLURM_DIR/$_sk_f" ] || tail -n 30 "$SLURM_DIR/$_sk_f" | sed "s/^/$_sk_f: /" >&2
    done
}

# _slurm_wait SECONDS CMD...: retries CMD every 0.5 s for up to SECONDS; 1 when it never worked.
_slurm_wait() {
    _sw_n=$(($1 * 2))
    shift
    until "$@"; do
        _sw_n=$((_sw_n - 1))
        [ $_sw_n -gt 0 ] || return 1
        sleep 0.5
    done
}

_slurm_alive() {
    kill -0 "$SLURM_CTLD_PID" 2>/dev/null && kill -0 "$SLURM_D_PID" 2>/dev/null
}

# _slurm_idle: 0 once the node is idle or a daemon died (either ends the wait).
_slurm_idle() {
    _slurm_alive || return 0
    [ "$(timeout 20 sinfo -h -o %T -n "$SLURM_NODE" 2>/dev/null)" = idle ]
}

# _slurm_stepds: the slurmstepd processes started by our slurmd (they inherit its SLURM_CONF).
_slurm_stepds() {
    for _ss_p in $(pgrep -x slurmstepd 2>/dev/null || true); do
        tr '\0' '\n' 2>/dev/null <"/proc/$_ss_p/environ" |
            grep -qx "SLURM_CONF=$SLURM_DIR/slurm.conf" && echo "$_ss_p"
    done
    return 0
}

# _slurm_tree PID: PID and all its descendants, parents first.
_slurm_tree() {
    echo "$1"
    for _st_c in $(pgrep -P "$1" 2>/dev/null || true); do _slurm_tree "$_st_c"; done
}

# _slurm_kill PID: SIGTERM, up to 5 s to exit, then SIGKILL; reaps our child.
_slurm_kill() {
    [ -n "$1" ] || return 0
    kill "$1" 2>/dev/null || true
    _slurm_wait 5 sh -c "! kill -0 $1 2>/dev/null" || kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

slurm_start() {
    for _s_b in munged mungekey slurmctld slurmd slurmstepd sinfo srun sbatch scancel squeue; do
        command -v "$_s_b" >/dev/null 2>&1 || [ -x "/usr/sbin/$_s_b" ] ||
            { _slurm_skip "$_s_b is not installed (apt-get install slurm-wlm munge)"; return 77; }
    done
    [ "$(id -u)" = 0 ] || { _slurm_skip "a private slurmd needs root"; return 77; }
    case $SLURM_DIR in *[[:space:]]*) _slurm_skip "WORK has spaces: $WORK"; return 77 ;; esac
    PATH=$PATH:/usr/sbin
    if ! _s_host=$(hostname -s) || ! _s_fqdn=$(hostname); then
        _slurm_skip "no host name"
        return 77
    fi
    _s_cpus=$(nproc)
    rm -rf "$SLURM_DIR"
    mkdir -p "$SLURM_DIR/state" "$SLURM_DIR/spool" "$SLURM_DIR/munge" "$SLURM_DIR/sock"
    chmod 0700 "$SLURM_DIR/munge"
    chmod 0755 "$SLURM_DIR/sock"

    # munged refuses a socket whose directories are not executable by all; $WORK is 0700, and
    # --force turns that refusal into a warning (everything here runs as root anyway).
    mungekey --create --keyfile="$SLURM_DIR/munge/munge.key" >"$SLURM_DIR/munged.log" 2>&1 ||
        { _slurm_skip "mungekey failed"; return 77; }
    _s_sock=$SLURM_DIR/sock/munge.socket
    munged --foreground --force --socket="$_s_sock" --key-file="$SLURM_DIR/munge/munge.key" \
        --pid-file="$SLURM_DIR/munge/munged.pid" --log-file="$SLURM_DIR/munged.log" \
        --seed-file="$SLURM_DIR/munge/munged.seed" </dev/null >>"$SLURM_DIR/munged.log" 2>&1 &
    SLURM_MUNGED_PID=$!
    _slurm_wait 20 sh -c "munge -S '$_s_sock' -n </dev/null | unmunge -S '$_s_sock' >/dev/null 2>&1" 2>/dev/null ||
        { slurm_stop; _slurm_skip "munged did not answer on $_s_sock"; return 77; }

    : >"$SLURM_DIR/plugstack.conf"
    export SLURM_CONF="$SLURM_DIR/slurm.conf"
    # A random port may be taken: start the daemons on it and pick others when one dies with
    # "Address already in use".
    _s_try=0
    while [ $_s_try -lt 10 ]; do
        _s_try=$((_s_try + 1))
        _s_p1=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 40000))
        _s_p2=$((_s_p1 + 1))
        cat >"$SLURM_CONF" <<EOF
ClusterName=ranktoptest
SlurmctldHost=$_s_host(127.0.0.1)
SlurmctldPort=$_s_p1
SlurmdPort=$_s_p2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$_s_sock
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
PlugStackConfig=$SLURM_DIR/plugstack.conf
MailProg=/bin/true
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.pid
SlurmctldLogFile=$SLURM_DIR/slurmctld.log
SlurmdLogFile=$SLURM_DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ReturnToService=2
InactiveLimit=0
KillWait=2
WaitTime=0
KillOnBadExit=0
NodeName=$SLURM_NODE NodeHostname=$_s_fqdn NodeAddr=127.0.0.1 CPUs=$_s_cpus State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
        rm -rf "$SLURM_DIR/state" "$SLURM_DIR/spool"
        mkdir -p "$SLURM_DIR/state" "$SLURM_DIR/spool"
        : >"$SLURM_DIR/slurmctld.log"
        : >"$SLURM_DIR/slurmd.log"
        # -D keeps them our children; their stderr goes to a file, never the test's pipe.
        slurmctld -D -c -f "$SLURM_CONF" </dev/null >"$SLURM_DIR/slurmctld.out" 2>&1 &
        SLURM_CTLD_PID=$!
        slurmd -D -N "$SLURM_NODE" -f "$SLURM_CONF" </dev/null >"$SLURM_DIR/slurmd.out" 2>&1 &
        SLURM_D_PID=$!
        # Up to 60 s for the node to register (a busy 2-core machine is slow to start them).
        _slurm_wait 60 _slurm_idle || true
        if _slurm_alive; then
            [ "$(timeout 20 sinfo -h -o %T -n "$SLURM_NODE" 2>/dev/null)" = idle ] && break
            _s_state=$(timeout 20 sinfo -h -o '%T %E' -n "$SLURM_NODE" 2>&1 || true)
            slurm_stop
            _slurm_skip "node $SLURM_NODE not idle after 60 s (sinfo: $_s_state)"
            return 77
        fi
        _s_inuse=0
        grep -qi 'address already in use' "$SLURM_DIR/slurmctld.log" "$SLURM_DIR/slurmd.log" \
            "$SLURM_DIR/slurmctld.out" "$SLURM_DIR/slurmd.out" 2>/dev/null && _s_inuse=1
        _slurm_kill "$SLURM_CTLD_PID"
        _slurm_kill "$SLURM_D_PID"
        SLURM_CTLD_PID='' SLURM_D_PID=''
        [ $_s_inuse = 1 ] && continue
        cat "$SLURM_DIR/slurmctld.out" "$SLURM_DIR/slurmd.out" >&2 2>/dev/null || true
        slurm_stop
        _slurm_skip "slurmctld or slurmd died at start"
        return 77
    done
    if [ $_s_try -ge 10 ] && [ -z "$SLURM_CTLD_PID" ]; then
        slurm_stop
        _slurm_skip "no free ports found in 10 tries"
        return 77
    fi
    # The launch path itself (slurmstepd, I/O back to srun) must work before a test relies on it.
    if ! timeout 60 srun -N1 -n1 -w "$SLURM_NODE" true </dev/null >"$SLURM_DIR/srun.out" 2>&1; then
        sed 's/^/srun: /' "$SLURM_DIR/srun.out" >&2
        slurm_stop
        _slurm_skip "srun -N1 true failed on the private cluster"
        return 77
    fi
    return 0
}

slurm_stop() {
    if [ -n "$SLURM_CTLD_PID" ] && kill -0 "$SLURM_CTLD_PID" 2>/dev/null; then
        _sp_jobs=$(timeout 20 squeue -h -o %i 2>/dev/null || true)
        [ -z "$_sp_jobs" ] || timeout 20 scancel $_sp_jobs 2>/dev/null || true
        # Up to 10 s for slurmd to end the steps; what is left is killed below.
        [ -z "$_sp_jobs" ] || _slurm_wait 10 sh -c '[ -z "$(timeout 20 squeue -h -o %i 2>/dev/null)" ]' ||
            true
    fi
    # Steps outlive a killed slurmd (slurmstepd daemonizes): kill ours with their tasks.
    _sp_left=
    for _sp_p in $(_slurm_stepds); do _sp_left="$_sp_left $(_slurm_tree "$_sp_p")"; done
    [ -z "$_sp_left" ] || kill -9 $_sp_left 2>/dev/null || true
    _slurm_kill "$SLURM_D_PID"
    _slurm_kill "$SLURM_CTLD_PID"
    _slurm_kill "$SLURM_MUNGED_PID"
    SLURM_D_PID='' SLURM_CTLD_PID='' SLURM_MUNGED_PID=''
}
