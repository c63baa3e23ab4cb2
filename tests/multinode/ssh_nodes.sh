#!/bin/sh
# The head over real OpenSSH: a private sshd on 127.0.0.1 (sshd.sh) with a client key of the
# test's own; an ssh_config maps node01 and node02 to it, and sends the node's name (SetEnv,
# which this sshd accepts) so that the remote command runs ranktop inside that simulated node.
# record and ls reach both nodes through `--rsh 'ssh -F CONFIG ...'`; ranktop's words pass
# through ssh's remote shell intact; no agent or sshd session is left afterwards. --ship over
# the same ssh to "shipnode" (this machine, its TMPDIR sent): ls and record run the binary the
# head sent, and its temporary directory is gone afterwards.
. "$(dirname "$0")/../e2e/lib.sh"
. "$RANKTOP_SRCDIR/tests/multinode/nodes.sh"
. "$RANKTOP_SRCDIR/tests/multinode/sshd.sh"
trap 'sshd_stop; node_stop_all; cleanup' EXIT
trap 'exit 1' INT TERM

sshd_start "AcceptEnv RT_NODE TMPDIR" || exit 77
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
Host node01 node02 shipnode
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
Host shipnode
    SetEnv TMPDIR=$WORK/shiptmp
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

# --ship over real ssh: the script and its arguments through the login shell, the binary
# through the channel's stdin; the rank of node01 is seen (this machine holds every node).
mkdir -p "$WORK/shiptmp"
$RANKTOP_BIN ls --json --hosts shipnode --rsh "$RSH" --ship --no-device-libs > "$WORK/sls.json" \
    2> "$WORK/sls.err" || fail "ls --ship over ssh exited $?: $(cat "$WORK/sls.err" "$WORK/sls.json")"
json_check "$WORK/sls.json" "d['hosts'][0]['ok'] and any(p['host'] == 'shipnode' and p.get('rank') == 0 for p in d['processes'])"
grep -Eq "^ranktop --ship: shipnode: $(wc -c < "$RANKTOP_BIN") bytes in [0-9.]+ s$" "$WORK/sls.err" ||
    fail "ls --ship over ssh: no cost line: $(cat "$WORK/sls.err")"
grep '^ranktop --ship' "$WORK/sls.err" # the figures, for the log
$RANKTOP_BIN record -o "$WORK/st.json" -d 3 --hosts shipnode --rsh "$RSH" --ship > "$WORK/srec.out" 2>&1 ||
    fail "record --ship over ssh exited $?: $(cat "$WORK/srec.out")"
grep -Eq '^ranktop: host shipnode: up, .*shipped [0-9]+ bytes' "$WORK/srec.out" ||
    fail "record --ship over ssh: $(cat "$WORK/srec.out")"
grep '^ranktop: host shipnode' "$WORK/srec.out"
no_ship_left() { [ -z "$(ls -A "$WORK/shiptmp")" ]; }
wait_for no_ship_left || fail "--ship over ssh left $(ls -A "$WORK/shiptmp")"
echo ok
