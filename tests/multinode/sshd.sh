# A private OpenSSH server on 127.0.0.1 for multi-node tests (shared reference multinode.md §3.4).
#
# Source this file from a POSIX sh test (set -eu safe). It needs $WORK, a private temporary
# directory made by the test without spaces in its path; everything lives in $WORK/ssh/ and no
# system configuration is read or changed (only /run/sshd, sshd's privilege-separation
# directory, is created when missing, as sshd requires it when run as root). It sets no trap:
# call sshd_stop from the test's own cleanup.
#
#   sshd_start [CONFIG-LINE...]  start sshd on a free port, extra sshd_config lines appended
#                  (e.g. "MaxStartups 8"); wait until "ssh ... true" works; set SSH_PORT,
#                  SSH_KEY (client private key) and SSH_RSH, a complete remote-shell command
#                  (words separated by single spaces) to use as: $SSH_RSH -- 127.0.0.1 CMD...
#                  On failure prints "skipped: REASON" and returns 77, so a test can do
#                  "sshd_start || exit 77"; sshd's own log is then on stderr.
#   sshd_stop      kill sshd, its sessions and whatever they started; idempotent.
# Needs Debian packages openssh-server (/usr/sbin/sshd and the "sshd" privsep user),
# openssh-client (ssh, ssh-keygen), procps (pgrep) and coreutils (od).

: "${WORK:?sshd.sh needs WORK, a private temporary directory made by the test}"
SSHD_DIR=$WORK/ssh
SSHD_PID=

# _sshd_skip REASON: the message for a skipped test; the caller returns 77 (a failing command
# here would end a set -e caller that did not guard the call).
_sshd_skip() {
    echo "skipped: $*"
    [ ! -s "$SSHD_DIR/sshd.log" ] || sed 's/^/sshd: /' "$SSHD_DIR/sshd.log" >&2
}

# _sshd_up: 0 once a login through the test key works, 1 not yet, 2 when sshd has died.
_sshd_up() {
    kill -0 "$SSHD_PID" 2>/dev/null || return 2
    $SSH_RSH -o ConnectTimeout=10 -- 127.0.0.1 true </dev/null 2>/dev/null || return 1
}

sshd_start() {
    [ -x /usr/sbin/sshd ] || { _sshd_skip "openssh-server is not installed (no /usr/sbin/sshd)"; return 77; }
    command -v ssh >/dev/null && command -v ssh-keygen >/dev/null ||
        { _sshd_skip "openssh-client is not installed"; return 77; }
    case $SSHD_DIR in *[[:space:]]*) _sshd_skip "WORK has spaces: $WORK"; return 77 ;; esac
    if [ "$(id -u)" = 0 ]; then
        id sshd >/dev/null 2>&1 || { _sshd_skip "no privilege-separation user sshd"; return 77; }
        mkdir -p -m 0755 /run/sshd || { _sshd_skip "cannot create /run/sshd"; return 77; }
    fi
    mkdir -p "$SSHD_DIR"
    rm -f "$SSHD_DIR/hostkey" "$SSHD_DIR/hostkey.pub" "$SSHD_DIR/id" "$SSHD_DIR/id.pub"
    ssh-keygen -q -t ed25519 -N '' -f "$SSHD_DIR/hostkey" </dev/null &&
        ssh-keygen -q -t ed25519 -N '' -f "$SSHD_DIR/id" </dev/null ||
        { _sshd_skip "ssh-keygen failed"; return 77; }
    cp "$SSHD_DIR/id.pub" "$SSHD_DIR/authorized_keys"
    SSH_KEY=$SSHD_DIR/id

    # A random port may be taken, and probing it first would race with other tests anyway:
    # start sshd on it and pick another when sshd dies ("Address already in use").
    _ss_try=0
    while [ $_ss_try -lt 10 ]; do
        _ss_try=$((_ss_try + 1))
        SSH_PORT=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 40000))
        {
            printf '%s\n' 'ListenAddress 127.0.0.1' "Port $SSH_PORT" \
                "HostKey $SSHD_DIR/hostkey" "AuthorizedKeysFile $SSHD_DIR/authorized_keys" \
                'PasswordAuthentication no' 'KbdInteractiveAuthentication no' 'UsePAM no' \
                'StrictModes no' 'PermitRootLogin prohibit-password' \
                "PidFile $SSHD_DIR/sshd.pid"
            [ $# -eq 0 ] || printf '%s\n' "$@"
        } >"$SSHD_DIR/sshd_config"
        SSH_RSH="ssh -F /dev/null -p $SSH_PORT -i $SSH_KEY -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -T"
        # sshd refuses to start unless called by absolute path; -D keeps it our child, -e logs
        # to stderr, which goes to a file so that it never holds the test's output pipe open.
        /usr/sbin/sshd -D -e -f "$SSHD_DIR/sshd_config" </dev/null >"$SSHD_DIR/sshd.log" 2>&1 &
        SSHD_PID=$!
        # Up to 60 s for the first login (a busy 2-core machine can be slow at key exchange).
        _ss_n=120
        _ss_rc=1
        while [ $_ss_n -gt 0 ]; do
            _ss_rc=0
            _sshd_up || _ss_rc=$?
            [ $_ss_rc -eq 1 ] || break
            _ss_n=$((_ss_n - 1))
            sleep 0.5
        done
        [ $_ss_rc -eq 0 ] && return 0
        if [ $_ss_rc -eq 2 ] && grep -q 'Address already in use' "$SSHD_DIR/sshd.log"; then
            continue
        fi
        sshd_stop
        _sshd_skip "sshd did not accept a login on 127.0.0.1:$SSH_PORT"
        return 77
    done
    _sshd_skip "no free port found in 10 tries"
    return 77
}

# _sshd_tree PID: PID and all its descendants, parents first.
_sshd_tree() {
    echo "$1"
    for _st_c in $(pgrep -P "$1" 2>/dev/null || true); do _sshd_tree "$_st_c"; done
}

sshd_stop() {
    [ -n "$SSHD_PID" ] || return 0
    # Sessions run in their own sessions (setsid) and outlive the listener, so the whole tree
    # is collected first and then killed; the listener is reaped as our child.
    kill -9 $(_sshd_tree "$SSHD_PID") 2>/dev/null || true
    wait "$SSHD_PID" 2>/dev/null || true
    SSHD_PID=
}
