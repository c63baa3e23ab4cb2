#!/bin/sh
# Builds (once) and checks a Debian sid chroot holding python3.14 and python3.15, so the e2e
# reader tests can run live targets of the newest CPythons (chroot DIR /usr/bin/python3.15 ...)
# and read them from outside. The chroot is cached in a fixed place between CI runs:
#   tests/sid_chroot.sh [DIR]     default DIR: $RANKTOP_SID_CHROOT or /var/cache/ranktop/sid-chroot
# A ready chroot carries DIR/.ranktop-ready (the package list, then the versions); with it the
# script only checks that both interpreters start, and builds anew when the list changed. Each
# run (re)writes the test interpreters DIR.bin/python3.14 and DIR.bin/python3.15 (see
# write_wrappers). The headers (-dev) are there for tests that build a C extension against
# each interpreter. It builds into DIR.tmp and renames that when complete, so an interrupted
# build never leaves a half chroot under DIR. /proc is mounted inside only while
# apt runs and unmounted on every exit: a recursive copy or removal of a chroot with /proc mounted
# walks the host's /proc. Exit status: 0 ready, 77 skipped (no root, no debootstrap, mirror
# unreachable: the reason goes to stderr), 1 failed.
set -eu
DIR=${1:-${RANKTOP_SID_CHROOT:-/var/cache/ranktop/sid-chroot}}
MIRROR=${RANKTOP_SID_MIRROR:-http://deb.debian.org/debian}
TMP=$DIR.tmp
PYTHONS="python3.14 python3.15"
PACKAGES="$PYTHONS python3.14-dev python3.15-dev"

# skip: the reason also goes to DIR.skip, which the e2e test sid_pythons quotes.
skip() {
    echo "sid_chroot: skipped: $*" >&2
    mkdir -p "$(dirname "$DIR")" && echo "$*" >"$DIR.skip" || true
    exit 77
}

ready() {
    [ -f "$DIR/.ranktop-ready" ] && [ "$(head -n 1 "$DIR/.ranktop-ready")" = "packages: $PACKAGES" ] ||
        return 1
    for py in $PYTHONS; do
        chroot "$DIR" /usr/bin/$py -c 'pass' 2>/dev/null || return 1
    done
}

# unmount_proc: every mount under the tree being built, deepest first.
unmount_proc() {
    if mountpoint -q "$TMP/proc" 2>/dev/null; then
        umount "$TMP/proc" || umount -l "$TMP/proc"
    fi
}

# remove_tmp: a half-built tree goes, but never while something is mounted inside it.
remove_tmp() {
    [ -d "$TMP" ] || return 0
    unmount_proc
    if grep -q " $TMP/" /proc/self/mounts; then
        echo "sid_chroot: $TMP still has mounts; not removing it" >&2
        return 1
    fi
    rm -rf --one-file-system "$TMP"
}

build() {
    [ "$(id -u)" -eq 0 ] || skip "building the sid chroot needs root"
    command -v debootstrap >/dev/null 2>&1 || skip "debootstrap is not installed"
    remove_tmp
    mkdir -p "$(dirname "$DIR")"
    trap 'unmount_proc' EXIT
    trap 'exit 1' INT TERM
    # debootstrap fails early (a few seconds) when the mirror is unreachable; the timeout bounds
    # a mirror that answers but crawls.
    if ! timeout 1200 debootstrap --variant=minbase sid "$TMP" "$MIRROR" >"$TMP.log" 2>&1; then
        if grep -qiE 'Failed getting release file|Could not resolve|unable to connect|Connection (refused|timed out)|Temporary failure in name resolution' "$TMP.log"; then
            remove_tmp
            skip "debootstrap cannot reach $MIRROR ($(tail -n 1 "$TMP.log"))"
        fi
        echo "sid_chroot: debootstrap failed; its log is $TMP.log" >&2
        exit 1
    fi
    mount -t proc proc "$TMP/proc"
    chroot "$TMP" apt-get -qq -o Acquire::Check-Valid-Until=false update >>"$TMP.log" 2>&1
    DEBIAN_FRONTEND=noninteractive timeout 1200 chroot "$TMP" apt-get install -y -qq \
        --no-install-recommends $PACKAGES >>"$TMP.log" 2>&1
    chroot "$TMP" apt-get clean >>"$TMP.log" 2>&1
    unmount_proc
    {
        echo "packages: $PACKAGES"
        for py in $PYTHONS; do
            chroot "$TMP" /usr/bin/$py -c 'import sys; print(sys.version.split()[0])'
        done
    } >"$TMP/.ranktop-ready"
    if [ -d "$DIR" ]; then
        grep -q " $DIR/" /proc/self/mounts && { echo "sid_chroot: $DIR has mounts" >&2; exit 1; }
        rm -rf --one-file-system "$DIR"
    fi
    mv "$TMP" "$DIR"
    rm -f "$TMP.log"
}

# write_wrappers: DIR.bin/python3.X runs the chroot's interpreter as the same process (unshare,
# sh and chroot each exec the next, so the pid a test starts is the target's). It runs in a
# private mount namespace where /tmp, the source tree ($RANKTOP_SRCDIR), the current directory
# and /proc are mounted at their host paths inside the chroot, so a test passes its scripts and
# output directories unchanged; those mounts vanish with the process and are never visible on
# the host. The target's binary and libraries exist only inside the chroot: ranktop must find
# them through /proc/PID/root.
write_wrappers() {
    mkdir -p "$DIR.bin"
    for py in $PYTHONS; do
        cat >"$DIR.bin/$py.tmp" <<EOF
#!/bin/sh
# Written by tests/sid_chroot.sh: Debian sid's $py in $DIR, run in place (see there).
exec unshare -m --propagation private sh -c '
r=\$1
shift
for d in /tmp "\${RANKTOP_SRCDIR:-}" "\$PWD"; do
    case \$d in /?*) mkdir -p "\$r\$d" && mount --bind "\$d" "\$r\$d" || exit 126 ;; esac
done
mount -t proc proc "\$r/proc" || exit 126
exec chroot "\$r" sh -c "cd \"\\\$0\" 2>/dev/null || cd /; exec /usr/bin/$py \"\\\$@\"" "\$PWD" "\$@"' sh "$DIR" "\$@"
EOF
        chmod 755 "$DIR.bin/$py.tmp"
        mv "$DIR.bin/$py.tmp" "$DIR.bin/$py"
    done
}

if ! ready; then
    start=$(date +%s)
    build
    echo "sid_chroot: built $DIR in $(($(date +%s) - start)) s" >&2
fi
ready || { echo "sid_chroot: $DIR is not usable" >&2; exit 1; }
rm -f "$DIR.skip"
write_wrappers
echo "sid_chroot: $DIR: python $(tail -n +2 "$DIR/.ranktop-ready" | tr '\n' ' ')" >&2
