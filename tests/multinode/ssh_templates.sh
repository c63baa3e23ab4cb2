#!/bin/sh
# --rsh templates and remote-shell errors over real OpenSSH (a private sshd on 127.0.0.1,
# sshd.sh; no simulated nodes: the remote ranktop looks at this machine, and only whether each
# host answered is checked). An ssh_config maps node01 and node02 to that sshd with the test's
# key, and nodebad with a key it does not accept.
# - %h anywhere: inside a quoted -o argument with spaces (SetEnv, which this sshd accepts)
#   and as ssh's host word; %%h and %%p reach ssh as its own %h and %p in a ProxyCommand that
#   really connects through the same sshd; a --remote-ranktop path with a space runs.
# - A --remote-ranktop with shell metacharacters runs nothing: the error names the path.
# - A missing binary and a refused key are said in the remote shell's own words, with its
#   exit status: in ls --json, ls's text, dump --json, and the monitor's Hosts view and header.
# The refused key comes last: OpenSSH 9.8+ makes a source wait after a failed login.
. "$(dirname "$0")/../ui/lib.sh"
. "$RANKTOP_SRCDIR/tests/multinode/sshd.sh"
trap 'sshd_stop; ui_cleanup' EXIT
trap 'exit 1' INT TERM

sshd_start "AcceptEnv RT_*" || exit 77
ssh-keygen -q -t ed25519 -N '' -f "$WORK/wrongkey" < /dev/null || fail "ssh-keygen"
CFG=$WORK/ssh_config
cat > "$CFG" << CFG
Host nodebad
    IdentityFile $WORK/wrongkey
Host node01 node02
    IdentityFile $SSH_KEY
Host *
    HostName 127.0.0.1
    Port $SSH_PORT
    IdentitiesOnly yes
    BatchMode yes
    ConnectTimeout 20
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
CFG
# The remote ranktop, in a directory whose name has a space: it notes what it was sent.
mkdir "$WORK/my tools"
cat > "$WORK/my tools/ranktop" << EOF
#!/bin/sh
printf '%s\n' "\$RT_X" > "$WORK/seen-\$RT_HOST"
exec "$RANKTOP_BIN" "\$@"
EOF
chmod +x "$WORK/my tools/ranktop"
LS="$RANKTOP_BIN ls --json --no-device-libs"

# %h inside a quoted -o word with spaces, and as the host word; the path with a space runs.
# shellcheck disable=SC2086 # LS is words
$LS --hosts node01,node02 --remote-ranktop "$WORK/my tools/ranktop" \
    --rsh "ssh -F $CFG -o 'SetEnv=RT_X=\"a b\" RT_HOST=%h' -l $(id -un) %h" > "$WORK/a.json" ||
    true
json_check "$WORK/a.json" '[(h["host"], h["ok"]) for h in d["hosts"]] == [("node01", True), ("node02", True)]'
[ "$(cat "$WORK/seen-node01")" = "a b" ] || fail "SetEnv with a space did not arrive as one word"
[ -f "$WORK/seen-node02" ] || fail "%h was not node02 in node02's -o argument"

# %%h and %%p are ssh's own: a ProxyCommand that reaches the sshd through itself.
# shellcheck disable=SC2086
$LS --hosts node02 --remote-ranktop "$RANKTOP_BIN" \
    --rsh "ssh -F $CFG -o 'ProxyCommand=ssh -F $CFG -W %%h:%%p node01'" > "$WORK/b.json" || true
json_check "$WORK/b.json" '[(h["host"], h["ok"]) for h in d["hosts"]] == [("node02", True)]'

# Metacharacters in the path are a file name, not a command; the shell says it has no such file.
# shellcheck disable=SC2086
$LS --hosts node01 --remote-ranktop "x;touch $WORK/pwned" --rsh "ssh -F $CFG" > "$WORK/c.json" ||
    true
[ ! -e "$WORK/pwned" ] || fail "the remote shell ran what --remote-ranktop held"
json_check "$WORK/c.json" "__import__('re').match(r'ssh exited with status 127: .*x;touch $WORK/pwned: (No such file|not found)', d['hosts'][0]['error'])"

# A missing binary: the login shell's own words and status, in JSON, text and dump.
# shellcheck disable=SC2086
$LS --hosts node01 --remote-ranktop /nonexistent/ranktop --rsh "ssh -F $CFG" > "$WORK/d.json" ||
    true
NOTFOUND='ssh exited with status 127: .*/nonexistent/ranktop: (No such file or directory|not found)'
json_check "$WORK/d.json" "__import__('re').match(r'$NOTFOUND', d['hosts'][0]['error'])"
run_rc 1 "$RANKTOP_BIN" ls --hosts node01 --remote-ranktop /nonexistent/ranktop --rsh "ssh -F $CFG"
grep -Eq "^ranktop: node01: $NOTFOUND" "$WORK/err" || fail "ls text: $(cat "$WORK/err")"

# The monitor: the Hosts view and the header say it too.
ui_start mon 220 30 -- "$RANKTOP_BIN" --hosts node01 --remote-ranktop /nonexistent/ranktop \
    --rsh "ssh -F $CFG" --no-device-libs
wait_screen "^node01 (down|connecting): $NOTFOUND" 60 || fail "the header does not say why node01 is down"
keys 6
wait_screen "^node01 +(down|connecting) .*  $NOTFOUND" 30 || fail "the Hosts view does not say why"
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"

# A refused key: ssh's own "Permission denied" and its status 255, in JSON, text and dump.
DENIED='ssh exited with status 255: (.*: )?Permission denied \(publickey'
# shellcheck disable=SC2086
$LS --hosts nodebad --rsh "ssh -F $CFG" > "$WORK/e.json" || true
json_check "$WORK/e.json" "__import__('re').match(r'$DENIED', d['hosts'][0]['error']) and not d['hosts'][0]['ok']"
run_rc 1 "$RANKTOP_BIN" ls --hosts nodebad --rsh "ssh -F $CFG"
grep -Eq "^ranktop: nodebad: $DENIED" "$WORK/err" || fail "ls text: $(cat "$WORK/err")"
run_rc 1 "$RANKTOP_BIN" dump --json --hosts nodebad --rsh "ssh -F $CFG"
json_check "$WORK/out" "[p['host'] for p in d['processes'] if __import__('re').match(r'$DENIED', p.get('error', ''))] == ['nodebad']"
echo ok
