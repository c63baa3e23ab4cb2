#!/bin/sh
# The monitor over two simulated nodes (PID + UTS + mount namespaces reached through
# tests/multinode/fake-rsh) and one host name that does not resolve: every rank is listed with
# its host, the HANG banner names the stalled rank on the second node, the Hosts view and the
# header say the unknown host is down and why (the remote shell's exit status and words), q
# leaves no agent on any node, and a head killed with SIGKILL leaves none either (agents exit
# on stdin EOF).
. "$(dirname "$0")/../ui/lib.sh"
. "$RANKTOP_SRCDIR/tests/multinode/nodes.sh"
trap 'node_stop_all; ui_cleanup' EXIT
trap 'exit 1' INT TERM

RSH="$RANKTOP_SRCDIR/tests/multinode/fake-rsh"
PY="$RANKTOP_SRCDIR/tests/py/waits_in.py"
node_start node01 || exit $?
node_start node02 || exit $?
# Ranks 0, 1 on node01 and 2 wait in all_reduce; rank 3 on node02 is the odd one out.
for spec in "node01 0 all_reduce" "node01 1 all_reduce" "node02 2 all_reduce" \
    "node02 3 load_batch_slowly"; do
    set -- $spec
    node_spawn "$1" env RANK="$2" LOCAL_RANK="$2" WORLD_SIZE=4 python3 "$PY" "$3" < /dev/null
done

ui_start mn 170 45 -- "$RANKTOP_BIN" --hosts node01,node02,ghost --rsh "$RSH" \
    --remote-ranktop "$RANKTOP_BIN" --hang-after 3 --no-device-libs
for r in 0 1 2 3; do
    wait_screen "^ +$r +[0-9]+ +node0[12] " 60 || fail "rank $r not listed with its host"
done
screen_has "^ +3 +[0-9]+ +node02 " || fail "rank 3 is not shown on node02"
wait_screen 'HANG [0-9]+s: 3 ranks in all_reduce .*odd: rank 3 on node02 in load_batch_slowly' 60 ||
    fail "the HANG banner does not name rank 3 on node02"
screen_has 'hosts 2/3' || { show_screen "header"; fail "the header does not count hosts up"; }
# The header's last row says why ghost is down, in the remote shell's own words.
wait_screen '^ghost down: fake-rsh exited with status 255: fake-rsh: ghost: Name or service not known' 30 ||
    fail "the header does not say why ghost is down"
# + reaches the agents: at 40 Hz the achieved rate (their passes over the run) climbs past 20.
keys + +
wait_screen ' [2-9][0-9]\.[0-9]/40 Hz ' 60 || fail "the agents did not take the new rate"
keys 6
wait_screen '^ghost +down .*  fake-rsh exited with status 255: fake-rsh: ghost: Name or service not known' 30 ||
    fail "Hosts view: ghost not down, or not with the remote shell's words"
wait_screen '^node01 +up ' 10 || fail "Hosts view: node01 not up"
has_agent() {
    [ -n "$(node_agents "$1")" ]
}
until_deadline 10 has_agent node01 || fail "no agent runs on node01"
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
node_wait_no_agent 10 node01 node02 || fail "agents left after q"

# A head killed with SIGKILL: its agents see EOF on stdin and leave.
ui_start mn2 170 45 -- "$RANKTOP_BIN" --hosts node01,node02 --rsh "$RSH" \
    --remote-ranktop "$RANKTOP_BIN" --no-device-libs
wait_screen "^ +3 +[0-9]+ +node02 " 60 || fail "second head: rank 3 not listed"
until_deadline 10 has_agent node02 || fail "no agent runs on node02"
kill -KILL "$(app_pid)"
node_wait_no_agent 10 node01 node02 || fail "agents left after SIGKILL of the head"
echo ok
