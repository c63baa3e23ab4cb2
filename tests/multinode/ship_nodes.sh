#!/bin/sh
# --ship across two simulated nodes that have no ranktop (fake-rsh with ssh's semantics: the
# words are joined and run by sh inside the node, as sshd's login shell would): ls --json and
# record work, the binary's bytes and seconds are printed, and no ranktop.* directory or
# process is left on a node afterwards, also when the head is SIGKILLed mid-run. A transfer
# with one byte flipped is refused by the SHA-256 check; a node of another architecture gets
# the binary from --ship-dir, or a message naming where the head looked; without --ship the
# missing ranktop says "--ship"; pdsh (no stdin) is a usage error.
. "$(dirname "$0")/../ui/lib.sh"
. "$RANKTOP_SRCDIR/tests/multinode/nodes.sh"
trap 'node_stop_all; ui_cleanup' EXIT
trap 'exit 1' INT TERM

RSH="$RANKTOP_SRCDIR/tests/multinode/fake-rsh"
PY="$RANKTOP_SRCDIR/tests/py/waits_in.py"
FAKE_RSH_SSH_SEMANTICS=1
export FAKE_RSH_SSH_SEMANTICS
# The nodes share this filesystem: their temporary directories go to one folder we watch, and
# their PATH has no ranktop (the head is run by its path).
mkdir -p "$WORK/tmp" "$WORK/bin"
TMPDIR=$WORK/tmp
export TMPDIR
PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
export PATH
command -v ranktop > /dev/null && echo "skipped: ranktop is installed on PATH" && exit 77

node_start node01 || exit $?
node_start node02 || exit $?
node_spawn node01 env RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 python3 "$PY" all_reduce < /dev/null
node_spawn node02 env RANK=1 LOCAL_RANK=0 WORLD_SIZE=2 python3 "$PY" load_batch_slowly < /dev/null
HOSTS="--hosts node[01-02] --rsh $RSH"

# Nothing of a shipped binary is left in the nodes' temporary folder, nor a script running.
no_leftovers() {
    [ -z "$(ls -A "$WORK/tmp")" ] || return 1
    for n in node01 node02; do
        for p in $(node_user_pids $n); do
            grep -q ranktop-ship "/proc/$p/cmdline" 2> /dev/null && return 1
        done
    done
    return 0
}

# Without --ship: ranktop is not there, and the error says what sends it.
run_rc 1 "$RANKTOP_BIN" ls --json $HOSTS
json_check "$WORK/out" "all(not h['ok'] and '--ship' in h['error'] for h in d['hosts'])"
$RANKTOP_BIN record -o "$WORK/n.json" -d 2 $HOSTS > "$WORK/n.out" 2>&1 && fail "record without ranktop there exited 0"
grep -q '^ranktop: host node01: down, .*not found.*--ship sends ranktop there' "$WORK/n.out" ||
    fail "record without ranktop there: $(cat "$WORK/n.out")"

# ls --json --ship: both ranks, each with its host; the cost per host on stderr.
both_listed() {
    # shellcheck disable=SC2086
    "$RANKTOP_BIN" ls --json $HOSTS --ship --no-device-libs > "$WORK/ls.json" 2> "$WORK/ls.err"
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(sorted((p["host"], p["rank"]) for p in d["processes"]) != [("node01", 0), ("node02", 1)])' "$WORK/ls.json"
}
wait_for both_listed || fail "ls --ship: $(cat "$WORK/ls.json" "$WORK/ls.err")"
size=$(wc -c < "$RANKTOP_BIN")
for n in node01 node02; do
    grep -Eq "^ranktop --ship: $n: $size bytes in [0-9.]+ s$" "$WORK/ls.err" ||
        fail "ls --ship: no cost line for $n: $(cat "$WORK/ls.err")"
done
grep '^ranktop --ship' "$WORK/ls.err" # the figures, for the log
wait_for no_leftovers || fail "ls --ship left $(ls -A "$WORK/tmp")"
# dump --ship: the ranks' functions.
$RANKTOP_BIN dump --json $HOSTS --ship > "$WORK/dump.json" 2> "$WORK/dump.err" ||
    fail "dump --ship: $(cat "$WORK/dump.err")"
json_check "$WORK/dump.json" "{(p.get('host'), p['threads'][0]['frames'][0]['function']) for p in d['processes'] if p.get('threads')} == {('node01', 'all_reduce'), ('node02', 'load_batch_slowly')}"

# record --ship: a lane per rank, the cost in each host's line, nothing left.
$RANKTOP_BIN record -o "$WORK/t.json" -d 4 -r 20 $HOSTS --ship > "$WORK/rec.out" 2>&1 ||
    fail "record --ship exited $?: $(cat "$WORK/rec.out")"
python3 "$RANKTOP_SRCDIR/tests/tools/trace_check.py" "$WORK/t.json" --lanes 2 \
    --lane-name-regex 'node01' --lane-name-regex 'node02' --slice all_reduce \
    --slice load_batch_slowly || fail "trace over two shipped nodes"
for n in node01 node02; do
    grep -Eq "^ranktop: host $n: up, .*shipped $size bytes in [0-9.]+ s" "$WORK/rec.out" ||
        fail "record --ship: $n: $(cat "$WORK/rec.out")"
done
node_wait_no_agent 30 node01 node02 || fail "an agent is left after record --ship"
wait_for no_leftovers || fail "record --ship left $(ls -A "$WORK/tmp")"

# The monitor: the ranks on their hosts, + reaches the shipped agents (the head's lines follow
# the binary on their stdin), the Hosts view shows what shipping cost; q leaves nothing.
ui_start sh 170 45 -- "$RANKTOP_BIN" $HOSTS --ship --no-device-libs
wait_screen "^ +1 +[0-9]+ +node02 " 60 || fail "monitor --ship: rank 1 not on node02"
keys + +
wait_screen ' [2-9][0-9]\.[0-9]/40 Hz ' 60 || fail "monitor --ship: the agents did not take the new rate"
keys 6
wait_screen '^node01 +up .* [0-9.]+MB [0-9.]+s ' 30 || fail "Hosts view: no shipping cost for node01"
keys q
wait_screen '^EXITED 0' 20 || fail "monitor --ship: q did not quit"
node_wait_no_agent 30 node01 node02 || fail "agents left after the monitor's q"
wait_for no_leftovers || fail "the monitor left $(ls -A "$WORK/tmp")"

# The head SIGKILLed while its shipped agents run: each agent sees its stdin end and leaves;
# nothing is left on the nodes.
$RANKTOP_BIN record -o "$WORK/k.json" -d 120 -r 5 $HOSTS --ship > "$WORK/k.out" 2>&1 &
head_pid=$!
agents_up() { [ -n "$(node_agents node01)" ] && [ -n "$(node_agents node02)" ]; }
wait_for agents_up || fail "no shipped agents started: $(cat "$WORK/k.out")"
# The running agents have already deleted their binaries and directories.
tmp_empty() { [ -z "$(ls -A "$WORK/tmp")" ]; }
wait_for tmp_empty || fail "running shipped agents left $(ls -A "$WORK/tmp")"
agents_up || fail "the shipped agents ended early: $(cat "$WORK/k.out")"
kill -9 $head_pid
wait $head_pid 2> /dev/null || true
node_wait_no_agent 60 node01 node02 || fail "a shipped agent outlived its killed head"
wait_for no_leftovers || fail "a killed head left $(ls -A "$WORK/tmp")"

# One byte flipped on the way (after the header line): the node refuses to run it.
cat > "$WORK/flip" << 'PYEOF'
import os, sys
seen, flipped = 0, False
while True:
    b = bytearray(os.read(0, 65536))
    if not b:
        break
    at = 5000 - seen
    if not flipped and 0 <= at < len(b):
        b[at] ^= 0x20
        flipped = True
    seen += len(b)
    os.write(1, bytes(b))
PYEOF
printf '#!/bin/sh\npython3 -u "%s" | "%s" "$@"\n' "$WORK/flip" "$RSH" > "$WORK/flip-rsh"
chmod +x "$WORK/flip-rsh"
run_rc 1 "$RANKTOP_BIN" ls --json --hosts node01 --rsh "$WORK/flip-rsh" --ship
json_check "$WORK/out" "not d['hosts'][0]['ok'] and 'SHA-256 mismatch' in d['hosts'][0]['error'] and 'not run' in d['hosts'][0]['error']"
wait_for no_leftovers || fail "a refused binary left $(ls -A "$WORK/tmp")"

# A node of another architecture (uname -m says so): the binary comes from --ship-dir, named
# as release names it; without one there, the error says where the head looked.
printf '#!/bin/sh\necho riscv64\n' > "$WORK/bin/uname"
chmod +x "$WORK/bin/uname"
mkdir -p "$WORK/dist"
run_rc 1 env PATH="$WORK/bin:$PATH" "$RANKTOP_BIN" ls --json $HOSTS --ship --ship-dir "$WORK/dist"
json_check "$WORK/out" "all('no ranktop for riscv64' in h['error'] and '$WORK/dist' in h['error'] for h in d['hosts'])"
cp "$RANKTOP_BIN" "$WORK/dist/ranktop-0.0.1-linux-riscv64"
run_rc 0 env PATH="$WORK/bin:$PATH" "$RANKTOP_BIN" ls --json $HOSTS --ship --ship-dir "$WORK/dist"
json_check "$WORK/out" "sorted(p['host'] for p in d['processes']) == ['node01', 'node02']"
wait_for no_leftovers || fail "--ship-dir left $(ls -A "$WORK/tmp")"

# pdsh passes no stdin: --ship with it is refused before anything starts.
run_rc 2 "$RANKTOP_BIN" ls --json --hosts node01 --launcher pdsh --ship
grep -q 'pdsh passes none' "$WORK/err" || fail "pdsh --ship: $(cat "$WORK/err")"
echo ok
