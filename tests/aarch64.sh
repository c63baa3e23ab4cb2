#!/bin/sh
# The aarch64 build, checked on an x86-64 Debian 12 machine: cross-compiles with Debian's
# multiarch set-up and tests/cross/aarch64-linux-gnu.ini (warnings as errors, tests enabled)
# and runs the unit suite under qemu-user (the cross file's exe_wrapper):
#   tests/aarch64.sh [BUILDDIR]     default BUILDDIR: build-aarch64
# The first run adds the arm64 architecture to dpkg and installs the cross compiler, qemu and
# the :arm64 libraries the build and Check need (about a minute from a Debian mirror); later
# runs find them installed and install nothing. Needs root only for that first install.
#
# Every unit test runs; none is skipped as a whole. What qemu-user cannot do is skipped inside
# the test that meets it, saying why: check_tfile's links-under-a-root part (qemu-user 7.2
# answers openat2 with ENOSYS, so tfile opens the joined path as on Linux < 5.6). check_rmem
# runs its /proc/PID/mem path here on its own: qemu-user answers process_vm_readv with ENOSYS.
# Native frames need ptrace, which qemu-user does not emulate: they are compiled and linked
# (arch_aarch64.c against libunwind-aarch64) but not run here.
#
# Time on the 2-core CI machine: about 1 minute for the cross build (ccache cold), about
# 70 seconds for the unit suite under qemu. Exit status: 0 passed, 1 failed.
set -eu
cd "$(dirname "$0")/.."
DIR=${1:-build-aarch64}
ARM64_PACKAGES="crossbuild-essential-arm64 qemu-user-static libc6-dev:arm64 libjson-c-dev:arm64
zlib1g-dev:arm64 libncurses-dev:arm64 libunwind-dev:arm64 libproc2-dev:arm64 check:arm64"

install_arm64() {
    missing=""
    # shellcheck disable=SC2086 # a word list
    for p in $ARM64_PACKAGES; do
        dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "aarch64: missing packages:$missing; run as root or with sudo" >&2
        exit 1
    fi
    dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
    echo "aarch64: installing$missing"
    apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
}

install_arm64
set --
[ ! -f "$DIR/build.ninja" ] || set -- --reconfigure
meson setup "$@" "$DIR" --cross-file tests/cross/aarch64-linux-gnu.ini --werror \
    -Dtests=enabled >/dev/null
ninja -C "$DIR" >/dev/null
# e_machine (bytes 18-19 of the ELF header): 183, EM_AARCH64.
[ "$(od -An -tx1 -j18 -N2 "$DIR/src/cli/ranktop" | tr -d ' ')" = b700 ] ||
    { echo "aarch64: $DIR/src/cli/ranktop is not an aarch64 executable" >&2; exit 1; }
meson test -C "$DIR" --print-errorlogs --num-processes 2 --suite unit
