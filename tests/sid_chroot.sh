#!/bin/sh
# Builds (once) and checks a Debian sid chroot holding python3.14 and python3.15, so the e2e
# reader tests can run live targets of the newest CPythons (chroot DIR /usr/bin/python3.15 ...)
# and read them from outside. The chroot is cached in a fixed place between CI runs:
#   tests/sid_chroot.sh [DIR]     default DIR: $RANKTOP_SID_CHROOT or /var/cache/ranktop/sid-chroot
# It is built and cached as tests/chroot_lib.sh says (stamp DIR/.ranktop-ready, atomic build,
# /proc mounted only while apt runs); with the stamp the script only checks that both
# interpreters start. Each run (re)writes the test interpreters DIR.bin/python3.14 and
# DIR.bin/python3.15 (see write_wrappers). The headers (-dev) are there for tests that build a C
# extension against each interpreter. Exit status: 0 ready, 77 skipped (no root, no debootstrap,
# mirror unreachable: the reason goes to stderr and DIR.skip, which the e2e test sid_pythons
# quotes), 1 failed.
set -eu
. "$(dirname "$0")/chroot_lib.sh"
CHROOT_NAME=sid_chroot
CHROOT_LABEL="the sid chroot"
SUITE=sid
DIR=${1:-${RANKTOP_SID_CHROOT:-/var/cache/ranktop/sid-chroot}}
MIRROR=${RANKTOP_SID_MIRROR:-http://deb.debian.org/debian}
PYTHONS="python3.14 python3.15"
PACKAGES="$PYTHONS python3.14-dev python3.15-dev"

chroot_works() {
    for py in $PYTHONS; do
        chroot "$1" /usr/bin/$py -c 'pass' 2>/dev/null || return 1
    done
}

chroot_versions() {
    for py in $PYTHONS; do
        chroot "$1" /usr/bin/$py -c 'import sys; print(sys.version.split()[0])'
    done
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

chroot_ensure
write_wrappers
echo "sid_chroot: $DIR: python $(tail -n +2 "$DIR/.ranktop-ready" | tr '\n' ' ')" >&2
