#!/bin/sh
# Builds (once) and checks a Debian 11 (bullseye) chroot with ranktop's build dependencies,
# including libprocps (procps 3.3, the library of Debian 11, Ubuntu 22.04 and RHEL 9), so CI
# can build and unit-test the libprocps variant and the old-glibc (2.31) build. Cached in a
# fixed place between CI runs:
#   tests/bullseye_chroot.sh [DIR]             build or check; default DIR: $RANKTOP_BULLSEYE_CHROOT
#                                              or /var/cache/ranktop/bullseye-chroot
#   tests/bullseye_chroot.sh run DIR CMD...    run CMD (sh -c) inside DIR with the current
#                                              directory bound at its own path (see run_in)
# A ready chroot carries DIR/.ranktop-ready (the package list, then the tool versions); with it
# the script only checks that the compiler and meson start, and builds anew when the list
# changed. It builds into DIR.tmp and renames that when complete, so an interrupted build never
# leaves a half chroot under DIR. /proc is mounted inside only while apt runs and unmounted on
# every exit: a recursive copy or removal of a chroot with /proc mounted walks the host's /proc.
# Exit status: 0 ready, 77 skipped (no root, no debootstrap, mirror unreachable: the reason goes
# to stderr and DIR.skip), 1 failed.
#
# Bullseye's meson is 0.56.2; the project's meson_version floor is 0.56 so that this chroot
# configures it with its own meson (the bullseye build in CI keeps that floor honest).
#
# RANKTOP_BULLSEYE_CROSS=arm64 makes the aarch64 cross variant instead (default DIR
# /var/cache/ranktop/bullseye-cross-chroot): the same packages plus Debian 11's arm64 cross
# compiler and the :arm64 build libraries, for the aarch64 portable binary (its meson cross
# file: tests/cross/aarch64-bullseye.ini).
set -eu
MIRROR=${RANKTOP_BULLSEYE_MIRROR:-http://deb.debian.org/debian}
CROSS=${RANKTOP_BULLSEYE_CROSS:-}
# The build's, then what the unit suite calls (check_export: xmllint; check_pb: protoc).
PACKAGES="gcc libc6-dev meson ninja-build pkg-config libncurses-dev libunwind-dev libprocps-dev"
PACKAGES="$PACKAGES libjson-c-dev zlib1g-dev check python3 libxml2-utils protobuf-compiler"
case $CROSS in
'') ;;
arm64)
    # Debian 11's libjson-c-dev is not Multi-Arch: same, so the arm64 one replaces it.
    PACKAGES="$(echo "$PACKAGES" | sed 's/libjson-c-dev/libjson-c-dev:arm64/')"
    PACKAGES="$PACKAGES crossbuild-essential-arm64 libncurses-dev:arm64 libunwind-dev:arm64"
    PACKAGES="$PACKAGES libprocps-dev:arm64 zlib1g-dev:arm64 liblzma-dev:arm64"
    ;;
*)
    echo "bullseye_chroot: RANKTOP_BULLSEYE_CROSS=$CROSS: only arm64 is known" >&2
    exit 2
    ;;
esac

# run_in DIR CMD: CMD runs under sh inside the chroot, in a private mount namespace where the
# current directory and /proc are mounted at their host paths; those mounts vanish with the
# process and are never visible on the host (so the cached tree never holds a mounted /proc).
run_in() {
    exec unshare -m --propagation private sh -c '
r=$1 cmd=$2
mkdir -p "$r$PWD" && mount --bind "$PWD" "$r$PWD" || exit 126
mount -t proc proc "$r/proc" || exit 126
exec chroot "$r" sh -c "cd \"\$0\" && $cmd" "$PWD"' sh "$1" "$2"
}

if [ "${1:-}" = run ]; then
    [ $# -eq 3 ] || { echo "usage: tests/bullseye_chroot.sh run DIR CMD" >&2; exit 2; }
    run_in "$2" "$3"
fi

if [ -n "$CROSS" ]; then
    DIR=${1:-${RANKTOP_BULLSEYE_CROSS_CHROOT:-/var/cache/ranktop/bullseye-cross-chroot}}
else
    DIR=${1:-${RANKTOP_BULLSEYE_CHROOT:-/var/cache/ranktop/bullseye-chroot}}
fi
TMP=$DIR.tmp

# skip: the reason also goes to DIR.skip, for the caller to quote.
skip() {
    echo "bullseye_chroot: skipped: $*" >&2
    mkdir -p "$(dirname "$DIR")" && echo "$*" >"$DIR.skip" || true
    exit 77
}

ready() {
    [ -f "$DIR/.ranktop-ready" ] &&
        [ "$(head -n 1 "$DIR/.ranktop-ready")" = "packages: $PACKAGES" ] || return 1
    chroot "$DIR" gcc --version >/dev/null 2>&1 && chroot "$DIR" meson --version >/dev/null 2>&1
}

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
        echo "bullseye_chroot: $TMP still has mounts; not removing it" >&2
        return 1
    fi
    rm -rf --one-file-system "$TMP"
}

build() {
    [ "$(id -u)" -eq 0 ] || skip "building the bullseye chroot needs root"
    command -v debootstrap >/dev/null 2>&1 || skip "debootstrap is not installed"
    remove_tmp
    mkdir -p "$(dirname "$DIR")"
    trap 'unmount_proc' EXIT
    trap 'exit 1' INT TERM
    # debootstrap fails early (a few seconds) when the mirror is unreachable; the timeout bounds
    # a mirror that answers but crawls.
    if ! timeout 1200 debootstrap --variant=minbase bullseye "$TMP" "$MIRROR" >"$TMP.log" 2>&1; then
        if grep -qiE 'Failed getting release file|Could not resolve|unable to connect|Connection (refused|timed out)|Temporary failure in name resolution' "$TMP.log"; then
            why=$(tail -n 1 "$TMP.log")
            remove_tmp
            rm -f "$TMP.log"
            skip "debootstrap cannot reach $MIRROR ($why)"
        fi
        echo "bullseye_chroot: debootstrap failed; its log is $TMP.log" >&2
        exit 1
    fi
    mount -t proc proc "$TMP/proc"
    [ -z "$CROSS" ] || chroot "$TMP" dpkg --add-architecture "$CROSS"
    chroot "$TMP" apt-get -qq -o Acquire::Check-Valid-Until=false update >>"$TMP.log" 2>&1
    # shellcheck disable=SC2086 # a word list
    DEBIAN_FRONTEND=noninteractive timeout 1200 chroot "$TMP" apt-get install -y -qq \
        --no-install-recommends $PACKAGES >>"$TMP.log" 2>&1
    chroot "$TMP" apt-get clean >>"$TMP.log" 2>&1
    unmount_proc
    {
        echo "packages: $PACKAGES"
        chroot "$TMP" sh -c 'gcc -dumpfullversion; meson --version; ldd --version | head -n 1'
        chroot "$TMP" sh -c 'dpkg-query -W -f "\${Package} \${Version}\n" libprocps-dev libunwind-dev'
    } >"$TMP/.ranktop-ready"
    if [ -d "$DIR" ]; then
        grep -q " $DIR/" /proc/self/mounts && { echo "bullseye_chroot: $DIR has mounts" >&2; exit 1; }
        rm -rf --one-file-system "$DIR"
    fi
    mv "$TMP" "$DIR"
    rm -f "$TMP.log"
}

if ! ready; then
    start=$(date +%s)
    build
    echo "bullseye_chroot: built $DIR in $(($(date +%s) - start)) s" >&2
fi
ready || { echo "bullseye_chroot: $DIR is not usable" >&2; exit 1; }
rm -f "$DIR.skip"
echo "bullseye_chroot: $DIR: gcc, meson, glibc, procps: $(tail -n +2 "$DIR/.ranktop-ready" | tr '\n' ' ')" >&2
