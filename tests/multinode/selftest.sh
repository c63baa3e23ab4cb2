#!/bin/sh
# Self-test of the multi-node test helpers (nodes.sh, fake-rsh, sshd.sh), without ranktop.
# Needs root. Prints "ok" and exits 0; exits 77 when namespaces or sshd are unavailable here.
set -eu
unset FAKE_RSH_SSH_SEMANTICS # the byte-exact checks below need the default mode
HERE=$(cd "$(dirname "$0")" && pwd)
RSH=$HERE/fake-rsh
WORK=$(mktemp -d)
. "$HERE/nodes.sh"
. "$HERE/sshd.sh"

cleanup() {
    sshd_stop || true
    node_stop_all || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# wait_for CMD...: up to 60 s, so that a slow machine delays the test instead of failing it.
wait_for() {
    _node_wait 600 "$@"
}
busy() { [ -n "$(node_user_pids "$1")" ]; }
idle() { [ -z "$(node_user_pids "$1")" ]; }

node_start node01
node_start node02

# Hostnames and PID namespaces.
[ "$("$RSH" node01 hostname)" = node01 ] || fail "hostname on node01"
out=$("$RSH" -o X -- node02 sh -c 'echo $$ $(hostname)')
case $out in [0-9]*' 'node02) [ "${out%% *}" -lt 100 ] ;; *) false ;; esac ||
    fail "node02 pid/hostname: '$out'"
[ "$("$RSH" -T -oBatchMode=yes -p 22 -l root root@node01 hostname)" = node01 ] ||
    fail "ssh option parsing"

# Unknown host: ssh's message and status.
rc=0
"$RSH" -o X -- nosuchnode true 2>"$WORK/err" || rc=$?
[ $rc -eq 255 ] || fail "unknown host gave $rc"
[ "$(cat "$WORK/err")" = "fake-rsh: nosuchnode: Name or service not known" ] ||
    fail "unknown host message: $(cat "$WORK/err")"

# argv byte-exact: nothing is re-parsed by a shell.
nl='
'
set -- '%s\n' 'a b' '$(x)' 'c;d' "it's" '"q"' '' '-x' "l1${nl}l2" '*' '`id`'
"$RSH" node01 printf "$@" >"$WORK/got"
printf "$@" >"$WORK/want"
cmp "$WORK/got" "$WORK/want" || fail "arguments changed on the way"
node_run node02 printf "$@" >"$WORK/got"
cmp "$WORK/got" "$WORK/want" || fail "node_run changed arguments"

# ssh-like mode: words are joined and re-parsed by sh inside the node.
[ "$(FAKE_RSH_SSH_SEMANTICS=1 "$RSH" node01 'echo "$(hostname)"' "'a  b'")" = "node01 a  b" ] ||
    fail "FAKE_RSH_SSH_SEMANTICS"

# stdin EOF through fake-rsh: the remote reads a line, then sees EOF when the pipe closes.
mkfifo "$WORK/in1"
"$RSH" node01 sh -c 'while read -r l; do echo "got $l"; done; echo EOF' \
    <"$WORK/in1" >"$WORK/out1" &
rsh_pid=$!
exec 3>"$WORK/in1"
echo hello >&3
wait_for grep -q 'got hello' "$WORK/out1" || fail "no line through fake-rsh"
[ -n "$(node_user_pids node01)" ] || fail "node_user_pids does not see the reader"
exec 3>&-
wait "$rsh_pid" || fail "fake-rsh exit status $?"
[ "$(tail -n 1 "$WORK/out1")" = EOF ] || fail "no EOF: $(cat "$WORK/out1")"

# node_spawn keeps stdin, and its PID is waitable with the command's status. The redirection
# of a function call is opened by this shell, and opening a FIFO for reading blocks until it
# has a writer: the writer is opened first, read-write so that this does not block either.
mkfifo "$WORK/in2"
exec 3<>"$WORK/in2"
node_spawn node02 sh -c 'cat >/dev/null; hostname; exit 3' <"$WORK/in2" >"$WORK/out2"
spawn_pid=$NODE_SPAWN_PID
wait_for sh -c '[ -n "$(pgrep -P "$1")" ]' sh "$spawn_pid" || fail "spawned command did not start"
[ -n "$(node_user_pids node02)" ] || fail "node_user_pids does not see the spawned process"
exec 3>&-
rc=0
wait "$spawn_pid" || rc=$?
[ $rc -eq 3 ] && [ "$(cat "$WORK/out2")" = node02 ] || fail "node_spawn: rc=$rc $(cat "$WORK/out2")"

# Orphans are adopted and reaped by the node's init: none lingers as a zombie.
"$RSH" node01 sh -c 'sh -c "sleep 0.2; exit 0" & exit 0'
wait_for idle node01 || fail "left in node01: $(node_user_pids node01)"
[ -z "$(node_user_pids node02)" ] || fail "left in node02: $(node_user_pids node02)"

# Stopping: every process goes, including one the test left running, and a stopped node is down.
"$RSH" node02 sleep 1000 </dev/null >/dev/null 2>&1 &
wait_for busy node02 || fail "sleep did not start in node02"
node_stop_all
for n in node01 node02; do
    [ -z "$(node_pids $n)" ] || fail "processes left in $n"
    rc=0
    "$RSH" $n true 2>/dev/null || rc=$?
    [ $rc -eq 255 ] || fail "stopped $n gave $rc"
done

# A node can be started again, then reached through a real sshd + nsenter.
node_start node01
rc=0
sshd_start || rc=$?
[ $rc -eq 0 ] || exit "$rc"
[ "$($SSH_RSH -- 127.0.0.1 hostname)" = "$(hostname)" ] || fail "hostname over ssh"
p1=$(cat "$RANKTOP_FAKE_NODES/node01.pid")
[ "$($SSH_RSH -- 127.0.0.1 nsenter -t "$p1" -p -u -m -- hostname)" = node01 ] ||
    fail "nsenter over ssh"
# The same remote command line through ssh and through fake-rsh in ssh mode.
a=$($SSH_RSH -- 127.0.0.1 nsenter -t "$p1" -p -u -m -- sh -c "'echo \"\$(hostname) x  y\"'")
b=$(FAKE_RSH_SSH_SEMANTICS=1 "$RSH" node01 sh -c "'echo \"\$(hostname) x  y\"'")
[ "$a" = "node01 x  y" ] && [ "$a" = "$b" ] || fail "ssh vs fake-rsh: '$a' '$b'"
sshd_stop
[ -z "$(pgrep -f "$WORK/ssh/sshd_config" || true)" ] || fail "sshd left running"
node_stop_all
echo ok
