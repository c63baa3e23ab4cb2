#!/bin/sh
# The head over real OpenSSH: a private sshd on 127.0.0.1 (sshd.sh) with a client key of the
# test's own; an ssh_config maps node01 and node02 to it, and sends the node's name (SetEnv,
# which this sshd accepts) so that the remote command runs ranktop inside that simulated node.
# record and ls reach both nodes through `--rsh 'ssh -F CONFIG ...'`; ranktop's words pass
# through ssh's remote shell intact; no agent or sshd session is left afterwards.
. "$(dirname "$0")/../e2e/lib.sh"
. "$RANKTOP_SRCDIR/tests/multinode/nodes.sh"
. "$RANKTOP_SRCDIR/tests/multinode/sshd.sh"
trap 'sshd_stop; node_stop_all; cleanup' EXIT
trap 'exit 1' INT TERM

sshd_start "AcceptEnv RT_NODE" || exit 77
node_start node01 || exit $?
node_start node02 || exit $?
PY="$RANKTOP_SRCDIR/tests/py/waits_in.py"
node_spawn node01 env RANK=0 WORLD_SIZE=2 python3 "$PY" all_reduce < /dev/null
node_spawn node02 env RANK=1 WORLD_SIZE=2 python3 "$PY" load_batch_slowly < /dev/null

# sshd starts the command with a clean environment: the wrapper has every path written in.
cat > "$WORK/ranktop-on-node" << WRAP
#!/bin/sh
exec nsenter -t "\$(cat "$RANKTOP_FAKE_NODES/\$RT_NODE.pid")" -p -u -m -- "$RANKTOP_BIN" "\$@"
WRAP
chmod +x "$WORK/ranktop-on-node"
cat > "$WORK/ssh_config" << CFG
Host node01 node02
    HostName 127.0.0.1
    Port $SSH_PORT
    IdentityFile $SSH_KEY
    IdentitiesOnly yes
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
Host node01
    SetEnv RT_NODE=node01
Host node02
    SetEnv RT_NODE=node02
CFG
HOSTS="--hosts node01,node02 --remote-ranktop $WORK/ranktop-on-node"
RSH="ssh -F $WORK/ssh_config -o BatchMode=yes -o ConnectTimeout=10 -T"

# (Waits until both ranks have started: on a loaded machine a node's Python may be slow to.)
both_listed() {
    # shellcheck disable=SC2086
    $RANKTOP_BIN ls --json $HOSTS --rsh "$RSH" --no-device-libs > "$WORK/ls.json" || return 1
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(sorted((p["host"], p["rank"]) for p in d["processes"]) != [("node01", 0), ("node02", 1)])' "$WORK/ls.json"
}
wait_for both_listed || true
json_check "$WORK/ls.json" "sorted((p['host'], p['rank']) for p in d['processes']) == [('node01', 0), ('node02', 1)]"

$RANKTOP_BIN record -o "$WORK/t.json" -d 5 -r 20 $HOSTS --rsh "$RSH" > "$WORK/rec.out" 2>&1 ||
    fail "record over ssh exited $?: $(cat "$WORK/rec.out")"
python3 "$RANKTOP_SRCDIR/tests/tools/trace_check.py" "$WORK/t.json" --lanes 2 \
    --lane-name-regex '^rank 0 \(pid [0-9]+, node01' --lane-name-regex '^rank 1 \(pid [0-9]+, node02' \
    --slice all_reduce --slice load_batch_slowly || fail "trace over ssh"

node_wait_no_agent 10 node01 node02 || fail "an agent is left after record"
echo ok
