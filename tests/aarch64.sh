#!/bin/sh
# The aarch64 build, checked on an x86-64 Debian 12 machine: cross-compiles with Debian's
# multiarch set-up and tests/cross/aarch64-linux-gnu.ini (warnings as errors, tests enabled)
# and runs the unit suite under qemu-user (the cross file's exe_wrapper):
#   tests/aarch64.sh [BUILDDIR]     default BUILDDIR: build-aarch64
# then reads a live aarch64 CPython with the aarch64 ranktop, both under qemu-user (live, below),
# and the same with the portable aarch64 binary (dist/ranktop-VERSION-linux-aarch64, from
# tests/bootstrap.sh release) when there is one: -V (this tree's), only glibc in its ELF NEEDED.
# The first run adds the arm64 architecture to dpkg and installs the cross compiler, qemu and
# the :arm64 libraries the build and Check need (about a minute from a Debian mirror); later
# runs find them installed and install nothing. Needs root only for that first install.
#
# Every unit test runs; none is skipped as a whole. What qemu-user cannot do is skipped inside
# the test that meets it, saying why: check_tfile's links-under-a-root part (qemu-user 7.2
# answers openat2 with ENOSYS, so tfile opens the joined path as on Linux < 5.6). check_rmem
# runs its /proc/PID/mem path here on its own: qemu-user answers process_vm_readv with ENOSYS.
# Native frames need ptrace, which qemu-user does not emulate: they are not run live here;
# check_native_core unwinds the core qemu-user writes for an aarch64 program that aborts, with
# the same accessors and aarch64 register mapping (arch_aarch64.c, libunwind-aarch64).
#
# Time on the 2-core CI machine: about 1 minute for the cross build (ccache cold), about
# 70 seconds for the unit suite under qemu, about 30 seconds for the live part.
# Exit status: 0 passed, 1 failed.
set -eu
cd "$(dirname "$0")/.."
DIR=${1:-build-aarch64}
# Debian 12's arm64 python3.11, unpacked from its packages (no maintainer scripts run, so no
# binfmt_misc is needed: qemu is named on each command line, with -L ROOT for the loader and
# libraries). Cached between runs; rebuilt when the package list changes.
ROOT=${RANKTOP_ARM64_PYTHON:-/var/cache/ranktop/arm64-python}
PY_PACKAGES="python3.11-minimal:arm64 libpython3.11-minimal:arm64 libpython3.11-stdlib:arm64 libexpat1:arm64 zlib1g:arm64"
QEMU=qemu-aarch64-static
ARM64_PACKAGES="crossbuild-essential-arm64 qemu-user-static libc6-dev:arm64 libjson-c-dev:arm64
zlib1g-dev:arm64 libncurses-dev:arm64 libunwind-dev:arm64 libproc2-dev:arm64 check:arm64"

install_arm64() {
    missing=""
    # shellcheck disable=SC2086 # a word list
    for p in $ARM64_PACKAGES; do
        # dpkg-query, not dpkg -s: once the arm64 libraries are installed beside the amd64
        # ones, dpkg -s calls a bare name ambiguous and fails.
        dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' ||
            missing="$missing $p"
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

# python_root: ROOT with the arm64 interpreter, unpacked once (apt-get download needs the arm64
# package lists install_arm64 set up). 1 where the packages cannot be fetched (no mirror).
python_root() {
    [ "$(cat "$ROOT/.ranktop-ready" 2>/dev/null)" = "packages: $PY_PACKAGES" ] &&
        return 0
    rm -rf "$ROOT.tmp"
    mkdir -p "$ROOT.tmp/debs"
    # shellcheck disable=SC2086
    (cd "$ROOT.tmp/debs" && apt-get download -qq $PY_PACKAGES) >"$ROOT.log" 2>&1 || {
        rm -rf "$ROOT.tmp"
        echo "aarch64: live part skipped: apt-get download failed: $(tail -n 1 "$ROOT.log")" >&2
        return 1
    }
    for d in "$ROOT.tmp"/debs/*.deb; do dpkg-deb -x "$d" "$ROOT.tmp"; done
    rm -rf "$ROOT.tmp/debs" "$ROOT"
    echo "packages: $PY_PACKAGES" >"$ROOT.tmp/.ranktop-ready"
    mv "$ROOT.tmp" "$ROOT"
    rm -f "$ROOT.log"
}

# live: tests/py/known_state.py on the arm64 python3.11 under qemu, read by the aarch64 ranktop
# under qemu through /proc/PID/mem (qemu-user answers process_vm_readv with ENOSYS; a 64-bit
# guest's addresses are host addresses). dump --json equals the target's own truth (every
# thread, name, frame and line; the spinner's innermost line moves), the text dump says the
# reader and the GIL holder, record writes the 1000-deep stack, ls finds the torchrun-style rank
# by its environment, and native frames are refused with the reason (qemu-user emulates no
# ptrace). Native unwinding of aarch64 is not run live anywhere here (from a core only).
live() {
    python_root || return 0
    work=$(mktemp -d)
    RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 LOCAL_WORLD_SIZE=1 $QEMU -L "$ROOT" \
        "$ROOT/usr/bin/python3.11" -S tests/py/known_state.py "$work" &
    t=$!
    trap 'kill $t 2>/dev/null; rm -rf "$work"' EXIT
    i=0
    while [ ! -s "$work/ready" ] && [ $i -lt 600 ]; do
        kill -0 $t 2>/dev/null || break
        sleep 0.2
        i=$((i + 1))
    done
    [ -s "$work/ready" ] || { echo "aarch64: known_state.py did not start" >&2; exit 1; }
    check_binary "$DIR/src/cli/ranktop" "the cross build"
    portable=$(ls -t dist/ranktop-*-linux-aarch64 2>/dev/null | head -n 1)
    if [ -z "$portable" ]; then
        echo "aarch64: no portable binary in dist/ (sh tests/bootstrap.sh release builds it): not checked"
        return 0
    fi
    # The portable binary must be this tree's: the same version and commit as the cross build.
    for l in '^ranktop ' '^commit:' '^architecture:'; do
        [ "$($QEMU "$portable" -V | grep "$l")" = "$($QEMU "$DIR/src/cli/ranktop" -V | grep "$l")" ] || {
            echo "aarch64: $portable is not this tree's build ($($QEMU "$portable" -V | grep "$l"));" \
                "run sh tests/bootstrap.sh release" >&2
            exit 1
        }
    done
    needed=$(readelf -d "$portable" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    echo "$needed" | tr ' ' '\n' | grep -vE '^$|^(ld-linux[-a-z0-9_]*|libc|libm|libdl|libpthread|librt)\.so\.' &&
        { echo "aarch64: $portable needs more than glibc: $needed" >&2; exit 1; }
    echo "aarch64: $portable: $(wc -c <"$portable") bytes, needs: $needed"
    check_binary "$portable" "the portable binary"
}

# check_binary BIN LABEL: the live checks of one aarch64 ranktop against the running target.
check_binary() {
    bin=$1
    run() { $QEMU "$bin" "$@"; }
    run -V | grep -qx 'architecture: aarch64' || { echo "aarch64: $2: -V: $(run -V)" >&2; exit 1; }
    run dump --json -p $t >"$work/dump.json" || { echo "aarch64: dump --json failed" >&2; exit 1; }
    python3 - "$work/dump.json" "$work/truth.json" <<'PYEOF'
import json, sys
dump = json.load(open(sys.argv[1], encoding="utf-8"))
truth = json.load(open(sys.argv[2], encoding="utf-8"))
(p,) = dump["processes"]
assert p["error"] is None, p["error"]
assert (p["reader"], p["reader_why"]) == ("/proc/PID/mem", "process_vm_readv: ENOSYS"), p["reader"]
assert p["python"] == truth["python"], (p["python"], truth["python"])
by_tid = {t["tid"]: t for t in p["threads"]}
key = lambda f: (f["function"], f["file"], f["line"])
for want in truth["threads"]:
    got = by_tid.get(want["native_id"])
    assert got is not None, ("thread missing", want["name"], sorted(by_tid))
    assert got["name"] == want["name"] and got["error"] is None, (got["name"], got["error"])
    if want["role"] == "spinner":  # it runs: its innermost line moves
        assert [k[:2] for k in map(key, got["frames"])] == [k[:2] for k in map(key, want["frames"])]
    else:
        assert list(map(key, got["frames"])) == list(map(key, want["frames"])), want["name"]
print("aarch64: live dump --json of python", truth["python"], "equals its truth:",
      len(truth["threads"]), "threads")
PYEOF
    run dump -p $t >"$work/dump.txt"
    grep -qx 'Memory reader: /proc/PID/mem (process_vm_readv: ENOSYS)' "$work/dump.txt" &&
        grep -q '"spinner-ü" (running, holds GIL)' "$work/dump.txt" ||
        { echo "aarch64: text dump: $(head -c 800 "$work/dump.txt")" >&2; exit 1; }
    run dump --native -p $t >/dev/null 2>"$work/native.err"
    grep -q 'ptrace is not available to ranktop here (ENOSYS' "$work/native.err" ||
        { echo "aarch64: dump --native: $(cat "$work/native.err")" >&2; exit 1; }
    run record -p $t -d 1 --all-threads -f collapsed -o "$work/r.folded" \
        --nvidia-smi /nonexistent --npu-smi /nonexistent 2>"$work/rec.err" ||
        { echo "aarch64: record: $(cat "$work/rec.err")" >&2; exit 1; }
    python3 -c 'import sys
sys.exit(not any("deep_root" in l and l.count(";recurse (") == 1000 for l in open(sys.argv[1], encoding="utf-8")))' \
        "$work/r.folded" || { echo "aarch64: record has no 1000-deep stack" >&2; exit 1; }
    run ls --json -p $t --nvidia-smi /nonexistent --npu-smi /nonexistent >"$work/ls.json" 2>/dev/null
    python3 -c 'import json, sys
(p,) = json.load(open(sys.argv[1]))["processes"]
sys.exit(not (p["python"] and p["rank"] == 0 and p["world_size"] == 1))' "$work/ls.json" ||
        { echo "aarch64: ls --json: $(cat "$work/ls.json")" >&2; exit 1; }
    echo "aarch64: live, $2: -V, dump, dump --json, record and ls of an aarch64 python3.11 under qemu passed"
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
live
