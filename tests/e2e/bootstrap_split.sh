#!/bin/sh
# A new user's first build: `tests/bootstrap.sh demo` installs only what building and the demo
# need (never the tests' clusters, browsers, torch or Check; `test` installs those), and a
# plain `meson setup` succeeds without Check, saying in a line that the tests are not built,
# while -Dtests=enabled (what bootstrap's test asks for) still fails without it.
. "$(dirname "$0")/lib.sh"
BOOT="$RANKTOP_SRCDIR/tests/bootstrap.sh"

# 1. The package lists (bootstrap.sh packages demo|test prints them, installs nothing).
sh "$BOOT" packages demo > "$WORK/demo" || fail "bootstrap.sh packages demo exited $?"
sh "$BOOT" packages test > "$WORK/test" || fail "bootstrap.sh packages test exited $?"
for p in check tmux python3-torch openssh-server slurm-wlm munge pdsh openmpi-bin chromium \
    nodejs clang strace zsh man-db; do
    ! grep -qx "$p" "$WORK/demo" || fail "the demo installs $p, which only the tests need"
    grep -qx "$p" "$WORK/test" || fail "bootstrap.sh test does not install $p"
done
for p in build-essential meson ninja-build pkg-config libncurses-dev libunwind-dev \
    libproc2-dev libjson-c-dev zlib1g-dev python3; do
    grep -qx "$p" "$WORK/demo" || fail "the demo does not install $p, which the build needs"
done
while read -r p; do # test installs everything demo does
    grep -qx "$p" "$WORK/test" || fail "bootstrap.sh test lacks the demo's $p"
done < "$WORK/demo"
# What the build's dependency() calls name is in the demo's list (by pkg-config module).
for m in json-c zlib ncursesw libunwind-ptrace libproc2; do
    pc=$(pkg-config --path "$m" 2> /dev/null) || fail "pkg-config does not know $m"
    pkg=$(dpkg -S "$(readlink -f "$pc")" 2> /dev/null | sed 's/:.*//' | head -n 1)
    [ -z "$pkg" ] || grep -qx "$pkg" "$WORK/demo" || fail "the demo lacks $pkg (for $m)"
done

# 2. meson setup without Check: pkg-config sees every module but check.
mkdir "$WORK/pc"
for d in $(pkg-config --variable pc_path pkg-config | tr ':' ' '); do
    for f in "$d"/*.pc; do
        [ -f "$f" ] && [ "$(basename "$f")" != check.pc ] && ln -sf "$f" "$WORK/pc/"
    done
done
! PKG_CONFIG_LIBDIR="$WORK/pc" pkg-config --exists check || fail "check.pc is not hidden"
PKG_CONFIG_LIBDIR="$WORK/pc" meson setup "$WORK/plain" "$RANKTOP_SRCDIR" > "$WORK/plain.log" 2>&1 ||
    fail "a plain meson setup without Check failed: $(tail -n 5 "$WORK/plain.log")"
grep -q 'tests: not built: Check' "$WORK/plain.log" ||
    fail "meson setup did not say why the tests are not built: $(cat "$WORK/plain.log")"
! grep -q 'check_export' "$WORK/plain/build.ninja" || fail "tests configured without Check"
grep -q 'src/cli/ranktop' "$WORK/plain/build.ninja" || fail "ranktop is not configured"
rc=0
PKG_CONFIG_LIBDIR="$WORK/pc" meson setup "$WORK/enabled" "$RANKTOP_SRCDIR" -Dtests=enabled \
    > "$WORK/enabled.log" 2>&1 || rc=$?
[ $rc -ne 0 ] || fail "-Dtests=enabled without Check configured"
grep -q 'Dependency "check" not found' "$WORK/enabled.log" ||
    fail "-Dtests=enabled: $(tail -n 5 "$WORK/enabled.log")"
echo ok
