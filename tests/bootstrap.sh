#!/bin/sh
# One entry point for a fresh Debian 12 machine (run as root or through sudo):
#   tests/bootstrap.sh demo   install what building and the demo need, build, run ranktop on
#                             the bundled demo
#   tests/bootstrap.sh test   install that and what the tests need, build with warnings as
#                             errors, run every test suite, the source tarball's unit suite
#                             (tests/dist.sh), then the unit and sampler suites
#                             under ASan+UBSan, then the other procps variants (procps_variants)
#                             and the aarch64 cross build's unit suite under qemu (aarch64_cross)
#   tests/bootstrap.sh tsan   install what test installs, build with ThreadSanitizer and run the
#                             sampler and ui suites and the threaded e2e/multinode tests (tsan)
#   tests/bootstrap.sh release   the portable binaries in dist/ (see release below)
#   tests/bootstrap.sh packages demo|test   print the packages that demo or test installs
# It exits non-zero as soon as a step or a test fails.
set -eu
cd "$(dirname "$0")/.."

# What building ranktop and running its demo need (the demo's ranks are python3 -S scripts).
DEMO_PACKAGES="build-essential meson ninja-build pkg-config libncurses-dev libunwind-dev
libproc2-dev libjson-c-dev zlib1g-dev python3"
# What only the tests need: Check, the terminal, the launchers and clusters they start (MPI,
# ssh, Slurm, pdsh), the viewers they load traces into, and their tools; debhelper, lintian and
# debootstrap build, check and install the Debian package (tests/e2e/debian_package.sh).
TEST_PACKAGES="check tmux python3-torch procps clang openmpi-bin openssh-server openssh-client
util-linux slurm-wlm munge pdsh strace libxml2-utils binutils xz-utils libc6-dbg
protobuf-compiler chromium nodejs scdoc man-db git zsh debootstrap qemu-user-static
debhelper lintian"
# speedscope (npm) for the viewer test, kept where tests/viewer/speedscope.sh looks for it.
NPM_DIR=${RANKTOP_NPM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ranktop/npm}
SPEEDSCOPE_VERSION=1.25.0

install_missing() { # install_missing PACKAGE...
    missing=""
    for p in "$@"; do
        # dpkg-query, not dpkg -s: once the arm64 libraries are installed beside the amd64
        # ones, dpkg -s calls a bare name ambiguous and fails.
        dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' ||
            missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "bootstrap: missing packages:$missing; run as root or with sudo" >&2
        exit 1
    fi
    echo "bootstrap: installing$missing"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
}

# install_viewer: npm (Debian's, unless the installed nodejs brings its own) and speedscope's
# static build in $NPM_DIR. Without it the viewer test is skipped, saying why.
install_viewer() {
    if ! command -v npm >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
    fi
    [ -f "$NPM_DIR/node_modules/speedscope/dist/release/index.html" ] && return 0
    npm install --prefix "$NPM_DIR" --no-audit --no-fund --loglevel=error \
        "speedscope@$SPEEDSCOPE_VERSION" >/dev/null ||
        echo "bootstrap: npm could not install speedscope into $NPM_DIR: the viewer test will skip" >&2
}

build() { # build DIR [meson options...]
    dir=$1
    shift
    if [ ! -f "$dir/build.ninja" ]; then
        meson setup "$dir" "$@" >/dev/null
    else
        meson configure "$dir" "$@" >/dev/null
    fi
    ninja -C "$dir" >/dev/null
}

demo() {
    build build
    RANK=0 WORLD_SIZE=1 python3 -S data/demo_job.py &
    pid=$!
    trap 'kill $pid 2>/dev/null || true' EXIT INT TERM
    sleep 1
    ./build/src/cli/ranktop dump -p "$pid"
    echo
    echo "Now the live monitor on a 4-rank demo job (q quits):"
    sleep 2
    ./build/src/cli/ranktop demo
}

# sid_pythons: the Debian sid chroot with live python3.14 and python3.15 that the reader tests
# also run on (tests/sid_chroot.sh: built once, then cached; skipped, saying why, only where
# debootstrap cannot reach a mirror).
sid_pythons() {
    sh tests/sid_chroot.sh || [ $? -eq 77 ]
}

run_tests() {
    install_viewer
    sid_pythons
    # The portable binary, for the e2e test portable (which skips, saying why, without it).
    release || [ $? -eq 77 ]
    build build --werror -Dtests=enabled
    meson test -C build --print-errorlogs --num-processes 2
    # The source tarball: meson dist, then a clean build and the unit suite outside the checkout.
    sh tests/dist.sh build || [ $? -eq 77 ]
    build build-asan --werror -Dtests=enabled -Db_sanitize=address,undefined -Db_lundef=false
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        meson test -C build-asan --print-errorlogs --num-processes 2 --timeout-multiplier 10 \
            --suite unit --suite sampler
    # The parser fuzzers need clang's libFuzzer; each runs for a bounded time.
    CC=clang build build-fuzz --werror -Dtests=enabled
    meson test -C build-fuzz --print-errorlogs --num-processes 2 --suite fuzz
    procps_variants
    aarch64_cross
}

# tsan: the ThreadSanitizer build and the suites that run the engine's threads: sampler, ui,
# and the e2e and multinode tests named in TSAN_TESTS (record, agent stream, memory cap,
# history bound, CLI; multinode record, monitor, ssh and hostile agents). Not part of test: it
# takes longer than CI's budget allows (doc/testing.md gives the figures). halt_on_error makes
# a report fail the test; tests/meson.build adds tests/tsan.supp to TSAN_OPTIONS.
TSAN_TESTS="record_threads record_async record_phases record_robust record_torchrun cli
memory_cap history_bound agent_stream mn_record_nodes mn_monitor_nodes mn_ssh_nodes
mn_hostile_agents"
tsan() {
    build build-tsan --werror -Dtests=enabled -Db_sanitize=thread -Db_lundef=false
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
    # Named tests and --suite intersect in meson test: two runs.
    meson test -C build-tsan --print-errorlogs --num-processes 2 --timeout-multiplier 10 \
        --suite sampler --suite ui
    # shellcheck disable=SC2086 # TSAN_TESTS is a word list
    meson test -C build-tsan --print-errorlogs --num-processes 2 --timeout-multiplier 10 \
        $TSAN_TESTS
}

# aarch64_cross: the aarch64 build (cross-compiled through Debian multiarch; tests/aarch64.sh
# adds the arm64 architecture and its packages the first time) and its unit suite under
# qemu-user. About 2.5 minutes on the 2-core CI machine, plus a minute of installs once.
aarch64_cross() {
    sh tests/aarch64.sh build-aarch64
}

# procps_variants: the builds beside the normal one (libproc2, Debian 12's), each with the unit
# suite and -V's test: without a procps library (-Dprocps=none) here, and against libprocps
# (Debian 11, Ubuntu 22.04, RHEL 9) in a Debian 11 chroot, which also holds the build to
# bullseye's meson 0.56, gcc 10, glibc 2.31 and libunwind 1.3. tests/bullseye_chroot.sh builds
# the chroot once (about 5 minutes) and then reuses it; skipped, saying why, only where
# debootstrap cannot reach a mirror.
procps_variants() {
    # --fatal-meson-warnings: the host meson's warning that meson.build uses a feature newer
    # than its meson_version (0.56, Debian 11's) fails here, before the chroot build would.
    set --
    [ ! -f build-none/build.ninja ] || set -- --reconfigure
    meson setup "$@" --fatal-meson-warnings build-none --werror -Dtests=enabled \
        -Dbench=disabled -Dprocps=none >/dev/null
    ninja -C build-none >/dev/null
    meson test -C build-none --print-errorlogs --num-processes 2 --suite unit
    meson test -C build-none --print-errorlogs version
    rc=0
    sh tests/bullseye_chroot.sh || rc=$?
    [ $rc -eq 77 ] && return 0
    [ $rc -eq 0 ] || return $rc
    sh tests/bullseye_chroot.sh run "${RANKTOP_BULLSEYE_CHROOT:-/var/cache/ranktop/bullseye-chroot}" '
        set -e
        [ -f build-bullseye/build.ninja ] ||
            meson setup build-bullseye --werror -Dtests=enabled -Dbench=disabled -Dprocps=libprocps >/dev/null
        ninja -C build-bullseye >/dev/null
        meson test -C build-bullseye --print-errorlogs --num-processes 2 --suite unit
        meson test -C build-bullseye --print-errorlogs version'
}

# release: the portable binaries, dist/ranktop-VERSION-linux-ARCH. test runs it too, for the e2e
# test portable (about a minute in CI, and half a minute for that test). Each is built inside a
# Debian 11 chroot (tests/bullseye_chroot.sh: glibc 2.31, so it runs on Debian 11, Ubuntu
# 20.04+, RHEL 9 and newer) with -Dportable=true: every library but glibc linked statically
# (meson_options.txt). The libraries it needs (ELF NEEDED) must be glibc's own only. Debug info
# is stripped; the symbol table stays, for crash reports.
# aarch64 is cross-compiled in the same way in the arm64 cross chroot (RANKTOP_BULLSEYE_CROSS=arm64
# tests/bullseye_chroot.sh: built once, about 3 minutes, then cached) with
# tests/cross/aarch64-bullseye.ini; tests/aarch64.sh runs it under qemu on a live aarch64 python.
# RANKTOP_RELEASE_AARCH64=0 builds x86-64 only. Where the cross chroot cannot be built (no
# mirror), aarch64 is skipped, saying why.
BULLSEYE=${RANKTOP_BULLSEYE_CHROOT:-/var/cache/ranktop/bullseye-chroot}
BULLSEYE_CROSS=${RANKTOP_BULLSEYE_CROSS_CHROOT:-/var/cache/ranktop/bullseye-cross-chroot}
release() {
    rc=0
    sh tests/bullseye_chroot.sh || rc=$?
    if [ $rc -ne 0 ]; then
        echo "release: no Debian 11 chroot to build in (tests/bullseye_chroot.sh: $rc)" >&2
        return $rc
    fi
    release_arch x86_64 "$BULLSEYE" "" strip || return 1
    [ "${RANKTOP_RELEASE_AARCH64:-1}" != 0 ] || return 0
    RANKTOP_BULLSEYE_CROSS=arm64 sh tests/bullseye_chroot.sh || rc=$?
    if [ $rc -ne 0 ]; then
        echo "release: aarch64 not built: no Debian 11 cross chroot (tests/bullseye_chroot.sh: $rc)" >&2
        [ $rc -eq 77 ] && return 0
        return $rc
    fi
    release_arch aarch64 "$BULLSEYE_CROSS" "--cross-file tests/cross/aarch64-bullseye.ini" \
        aarch64-linux-gnu-strip
}

# release_arch ARCH CHROOT MESON_ARGS STRIP: builds build-release-ARCH in CHROOT and writes
# dist/ranktop-VERSION-linux-ARCH. The chroot has no git: -V's version and commit come from this
# checkout.
release_arch() {
    RANKTOP_SOURCE_VERSION=$(sh src/cli/version.sh . version '') \
    RANKTOP_SOURCE_COMMIT=$(sh src/cli/version.sh . commit) \
    ARCH=$1 MESON_ARGS=$3 STRIP=$4 \
        sh tests/bullseye_chroot.sh run "$2" '
        set -e
        b=build-release-$ARCH log=build-release-$ARCH.log
        { [ -f $b/build.ninja ] ||
            meson setup $b $MESON_ARGS --werror -Dportable=true -Dprocps=libprocps \
                -Dtests=disabled -Dbench=disabled -Dman=disabled
          ninja -C $b; } >$log 2>&1 || { tail -n 40 $log >&2; exit 1; }
        # Only glibc: the C library, the loader, libm, libdl, libpthread, librt.
        needed=$(readelf -d $b/src/cli/ranktop | sed -n "s/.*(NEEDED).*\[\(.*\)\]/\1/p")
        other=$(echo "$needed" | grep -vE "^(ld-linux[-a-z0-9_]*|libc|libm|libdl|libpthread|librt)\.so\." || true)
        if [ -n "$other" ]; then
            echo "release: the $ARCH binary needs more than glibc:" $other >&2
            exit 1
        fi
        v=$(sh src/cli/version.sh . version "$(meson introspect --projectinfo $b |
            python3 -c "import json, sys; print(json.load(sys.stdin)[\"version\"])")")
        out=dist/ranktop-$v-linux-$ARCH
        mkdir -p dist
        $STRIP --strip-debug -o $out.tmp $b/src/cli/ranktop
        mv $out.tmp $out
        echo "release: $out: $(wc -c <$out) bytes, glibc $(ldd --version | sed -n "1s/.* //p"), needs:" $needed
        [ $ARCH != "$(uname -m)" ] || ldd $out' || return 1
}

# shellcheck disable=SC2086 # the package lists are word lists
case "${1:-}" in
demo)
    install_missing $DEMO_PACKAGES
    demo
    ;;
test)
    install_missing $DEMO_PACKAGES $TEST_PACKAGES
    run_tests
    ;;
tsan)
    install_missing $DEMO_PACKAGES $TEST_PACKAGES
    tsan
    ;;
release)
    install_missing debootstrap
    release
    ;;
packages)
    case "${2:-}" in
    demo) printf '%s\n' $DEMO_PACKAGES ;;
    test) printf '%s\n' $DEMO_PACKAGES $TEST_PACKAGES ;;
    *)
        echo "usage: tests/bootstrap.sh packages demo|test" >&2
        exit 2
        ;;
    esac
    ;;
*)
    echo "usage: tests/bootstrap.sh demo|test|tsan|release|packages demo|test" >&2
    exit 2
    ;;
esac
