# Simulated cluster nodes for multi-node tests (see shared reference multinode.md §8.1).
#
# A "node" is a PID + UTS + mount namespace made by unshare: it has its own hostname, its own
# PID 1 and its own /proc, but shares the filesystem and the network with the test, so binaries
# keep their absolute paths and agents reach the head on 127.0.0.1.
#
# Source this file from a POSIX sh test (set -eu safe). It needs $WORK, a private temporary
# directory made by the test, and sets no trap: call node_stop_all from the test's own cleanup.
# State lives in $WORK/nodes/NAME.{pid,outer,ns,init,log}; fake-rsh reads the same directory.
#
# Functions (all return 0 on success):
#   node_start NAME       start a node; returns 77 after printing "skipped: ..." when this
#                         machine cannot create namespaces (not root, seccomp), 1 on timeout
#   node_run NAME CMD...  run CMD inside the node in the foreground, argv byte-exact; stdin,
#                         stdout, stderr, environment and working directory are the caller's;
#                         the exit status is CMD's
#   node_spawn NAME CMD...  the same in the background; sets NODE_SPAWN_PID to the waitable
#                         outside PID of the nsenter wrapper (exit status = CMD's; CMD itself
#                         is its only child). Unlike a plain "&", stdin is kept, not /dev/null
#   node_pids NAME        outside PIDs of every process in the node, its own init included
#   node_user_pids NAME   the same without the node's own init pair (PID 1 and its sleep):
#                         empty means "no agent left"
#   node_stop NAME        kill everything in the node and wait until it is gone
#   node_stop_all         node_stop for every node started; idempotent
# A stopped node keeps its files: fake-rsh then answers like ssh for a host that is down.

: "${WORK:?nodes.sh needs WORK, a private temporary directory made by the test}"
RANKTOP_FAKE_NODES=$WORK/nodes
export RANKTOP_FAKE_NODES
mkdir -p "$RANKTOP_FAKE_NODES"

# _node_wait TENTHS CMD...: polls CMD every 0.1 s, at most TENTHS times, so that a busy machine
# slows the tests down instead of failing them.
_node_wait() {
    _nw_n=$1
    shift
    until "$@"; do
        _nw_n=$((_nw_n - 1))
        [ "$_nw_n" -gt 0 ] || return 1
        sleep 0.1
    done
}

# _node_ns NAME: the node's PID-namespace inode, recorded at start; empty once stopped.
_node_ns() {
    cat "$RANKTOP_FAKE_NODES/$1.ns" 2>/dev/null || true
}

# _node_pid1 NAME: the node's PID 1 as seen from outside, but only while it still lives in the
# recorded namespace, so that a recycled PID is never entered or killed.
_node_pid1() {
    _np_ns=$(_node_ns "$1")
    _np_p=$(cat "$RANKTOP_FAKE_NODES/$1.pid" 2>/dev/null || true)
    [ -n "$_np_ns" ] && [ -n "$_np_p" ] || return 1
    [ "$(stat -L -c %i "/proc/$_np_p/ns/pid" 2>/dev/null || true)" = "$_np_ns" ] || return 1
    echo "$_np_p"
}

node_start() {
    _ns_name=$1
    _ns_dir=$RANKTOP_FAKE_NODES
    case $_ns_name in '' | *[!A-Za-z0-9._-]* | .*)
        echo "node_start: bad node name '$_ns_name'" >&2
        return 1
        ;;
    esac
    if _node_pid1 "$_ns_name" >/dev/null; then
        echo "node_start: $_ns_name is already running" >&2
        return 1
    fi
    rm -f "$_ns_dir/$_ns_name.ready" "$_ns_dir/$_ns_name.ns"
    # PID 1 is a shell waiting on its sleep rather than "exec sleep": as a namespace's init it
    # adopts orphaned processes, and only a shell in "wait" reaps them, so that an agent's
    # exited children do not linger as zombies and fail "no agent left" checks. The ready file
    # is written once the hostname is set and the sleep runs. The outer subshell detaches unshare
    # from the test's job table, so a bare "wait" in the test does not wait for the nodes.
    (
        unshare -p -f -u -m --mount-proc --kill-child \
            sh -c 'hostname "$1" || exit 1; sleep infinity & : >"$2"; wait' \
            sh "$_ns_name" "$_ns_dir/$_ns_name.ready" \
            </dev/null >"$_ns_dir/$_ns_name.log" 2>&1 &
        echo $! >"$_ns_dir/$_ns_name.outer"
    )
    _ns_outer=$(cat "$_ns_dir/$_ns_name.outer")
    # Up to 60 s: ready, or unshare already gone (it cannot make namespaces here).
    _node_wait 600 sh -c '[ -e "$1" ] || ! kill -0 "$2" 2>/dev/null' sh \
        "$_ns_dir/$_ns_name.ready" "$_ns_outer" || {
        echo "node_start: $_ns_name not ready after 60 s: $(cat "$_ns_dir/$_ns_name.log")" >&2
        kill -9 "$_ns_outer" 2>/dev/null || true # --kill-child takes the namespace with it
        return 1
    }
    if [ ! -e "$_ns_dir/$_ns_name.ready" ]; then
        echo "skipped: cannot create namespaces for $_ns_name: $(cat "$_ns_dir/$_ns_name.log")"
        return 77
    fi
    # unshare -f has exactly one child, the namespace's PID 1, and once the ready file exists
    # PID 1 has exactly one child, its sleep (hostname ran in the foreground and was reaped).
    _ns_p=$(pgrep -P "$_ns_outer")
    echo "$_ns_p" >"$_ns_dir/$_ns_name.pid"
    echo "$_ns_p $(pgrep -P "$_ns_p")" >"$_ns_dir/$_ns_name.init"
    stat -L -c %i "/proc/$_ns_p/ns/pid" >"$_ns_dir/$_ns_name.ns"
}

node_run() {
    _nr_p=$(_node_pid1 "$1") || {
        echo "node_run: node $1 is not running" >&2
        return 1
    }
    shift
    # --wd keeps the caller's directory: entering a mount namespace otherwise moves to /.
    nsenter -t "$_nr_p" -p -u -m --wd="$PWD" -- "$@"
}

node_spawn() {
    _nsp_p=$(_node_pid1 "$1") || {
        echo "node_spawn: node $1 is not running" >&2
        return 1
    }
    shift
    # nsenter itself goes to the background (not a subshell around it), so that $! is the
    # process that exits with CMD's status. fd 3 carries the caller's stdin past the /dev/null
    # that sh gives background commands.
    { nsenter -t "$_nsp_p" -p -u -m --wd="$PWD" -- "$@" <&3 3<&- & } 3<&0
    NODE_SPAWN_PID=$!
}

node_pids() {
    _npd_ns=$(_node_ns "$1")
    [ -n "$_npd_ns" ] || return 0
    # One stat for all processes (no fork per process); zombies still show, on purpose.
    stat -L -c '%i %n' /proc/[0-9]*/ns/pid 2>/dev/null |
        awk -v ns="$_npd_ns" '$1 == ns { split($2, f, "/"); print f[3] }'
}

node_user_pids() {
    _nu_init=" $(cat "$RANKTOP_FAKE_NODES/$1.init" 2>/dev/null || true) "
    for _nu_q in $(node_pids "$1"); do
        case $_nu_init in *" $_nu_q "*) ;; *) echo "$_nu_q" ;; esac
    done
}

_node_empty() {
    [ -z "$(node_pids "$1")" ]
}

node_stop() {
    # SIGKILL to a namespace's PID 1 makes the kernel kill every process in it; unshare then
    # exits by itself (--kill-child covers the opposite order).
    if _ns_p=$(_node_pid1 "$1"); then
        kill -9 "$_ns_p" 2>/dev/null || true
    fi
    _node_wait 300 _node_empty "$1" || {
        echo "node_stop: processes left in $1: $(node_pids "$1" | tr '\n' ' ')" >&2
        return 1
    }
    # Forget the namespace inode: the kernel may give it to a later node.
    : >"$RANKTOP_FAKE_NODES/$1.ns"
}

node_stop_all() {
    _nsa_rc=0
    for _nsa_f in "$RANKTOP_FAKE_NODES"/*.pid; do
        [ -e "$_nsa_f" ] || continue
        _nsa_n=${_nsa_f##*/}
        node_stop "${_nsa_n%.pid}" || _nsa_rc=1
    done
    return $_nsa_rc
}

# node_agents NODE...: the outside PIDs of the `ranktop agent` processes running in the nodes.
node_agents() {
    for _na_n in "$@"; do
        for _na_p in $(node_user_pids "$_na_n"); do
            tr '\0' ' ' <"/proc/$_na_p/cmdline" 2>/dev/null | grep -q "ranktop agent" &&
                echo "$_na_p"
        done
    done
    return 0
}

# node_wait_no_agent SECONDS NODE...: true once no ranktop agent runs in any of the nodes
# (polled every 0.1 s), false with the leftovers on stderr after SECONDS.
node_wait_no_agent() {
    _nw_left=$(($1 * 10))
    shift
    while [ -n "$(node_agents "$@")" ]; do
        _nw_left=$((_nw_left - 1))
        if [ "$_nw_left" -le 0 ]; then
            echo "agents left: $(node_agents "$@")" >&2
            return 1
        fi
        sleep 0.1
    done
}
