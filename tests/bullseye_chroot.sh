#!/bin/sh
# Builds (once) and checks a Debian 11 (bullseye) chroot with ranktop's build dependencies,
# including libprocps (procps 3.3, the library of Debian 11, Ubuntu 22.04 and RHEL 9), so CI
# can build and unit-test the libprocps variant and the old-glibc (2.31) build. Cached in a
# fixed place between CI runs:
#   tests/bullseye_chroot.sh [DIR]             build or check; default DIR: $RANKTOP_BULLSEYE_CHROOT
#                                              or /var/cache/ranktop/bullseye-chroot
#   tests/bullseye_chroot.sh run DIR CMD...    run CMD (sh -c) inside DIR with the current
#                                              directory bound at its own path
#                                              (see chroot_run_in in tests/chroot_lib.sh)
# It is built and cached as tests/chroot_lib.sh says (stamp DIR/.ranktop-ready with the tool
# versions, atomic build, /proc mounted only while apt runs); with the stamp the script only
# checks that the compiler and meson start. Exit status: 0 ready, 77 skipped (no root, no
# debootstrap, mirror unreachable: the reason goes to stderr and DIR.skip), 1 failed.
#
# Bullseye's meson is 0.56.2; the project's meson_version floor is 0.56 so that this chroot
# configures it with its own meson (the bullseye build in CI keeps that floor honest).
#
# RANKTOP_BULLSEYE_CROSS=arm64 makes the aarch64 cross variant instead (default DIR
# /var/cache/ranktop/bullseye-cross-chroot): the same packages plus Debian 11's arm64 cross
# compiler and the :arm64 build libraries, for the aarch64 portable binary (its meson cross
# file: tests/cross/aarch64-bullseye.ini).
set -eu
. "$(dirname "$0")/chroot_lib.sh"
CHROOT_NAME=bullseye_chroot
CHROOT_LABEL="the bullseye chroot"
SUITE=bullseye
MIRROR=${RANKTOP_BULLSEYE_MIRROR:-http://deb.debian.org/debian}
CROSS=${RANKTOP_BULLSEYE_CROSS:-}
CHROOT_ARCH=$CROSS # dpkg adds it before apt runs
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

if [ "${1:-}" = run ]; then
    [ $# -eq 3 ] || { echo "usage: tests/bullseye_chroot.sh run DIR CMD" >&2; exit 2; }
    chroot_run_in "$2" "$3"
fi

if [ -n "$CROSS" ]; then
    DIR=${1:-${RANKTOP_BULLSEYE_CROSS_CHROOT:-/var/cache/ranktop/bullseye-cross-chroot}}
else
    DIR=${1:-${RANKTOP_BULLSEYE_CHROOT:-/var/cache/ranktop/bullseye-chroot}}
fi

chroot_works() {
    chroot "$1" gcc --version >/dev/null 2>&1 && chroot "$1" meson --version >/dev/null 2>&1
}

chroot_versions() {
    chroot "$1" sh -c 'gcc -dumpfullversion; meson --version; ldd --version | head -n 1'
    chroot "$1" sh -c 'dpkg-query -W -f "\${Package} \${Version}\n" libprocps-dev libunwind-dev'
}

chroot_ensure
echo "bullseye_chroot: $DIR: gcc, meson, glibc, procps: $(tail -n +2 "$DIR/.ranktop-ready" | tr '\n' ' ')" >&2
