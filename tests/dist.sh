#!/bin/sh
# The source tarball builds on its own: `meson dist` (git archive of HEAD, so only tracked files)
# from a configured build directory, then, in an empty directory outside the checkout, the
# unpacked tarball is set up with tests enabled and warnings as errors, built, and its unit suite
# run. -V must give the version and commit the tarball was made from (src/cli/version.sh reads
# the .ranktop-source that meson dist wrote into it), since there is no git there.
#   tests/dist.sh [BUILDDIR]      default BUILDDIR: build (configured here if it is not)
# meson dist refuses a tree with uncommitted changes: commit first. Skipped (77), saying why,
# outside a git checkout. gzip, not xz: gzip is always there. About 1 to 1.5 minutes on the
# 2-core CI machine with ccache warm (the build is the cost).
# Exit status: 0 passed, 1 failed, 77 skipped.
set -eu
cd "$(dirname "$0")/.."
DIR=${1:-build}
if ! git rev-parse --git-dir >/dev/null 2>&1; then
    echo "dist: skipped: not a git checkout (meson dist archives git's HEAD)" >&2
    exit 77
fi
[ -f "$DIR/build.ninja" ] || meson setup "$DIR" >/dev/null
rm -rf "$DIR/meson-dist"
# What -V must say, taken before meson dist archives HEAD.
want="$(sh src/cli/version.sh . version "$(sed -n "s/^ *version: '\(.*\)',/\1/p" meson.build)")"
want_commit="$(sh src/cli/version.sh . commit)"
meson dist -C "$DIR" --no-tests --formats gztar >/dev/null
tarball=$(ls "$DIR"/meson-dist/*.tar.gz)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xzf "$tarball"
src=$(ls -d "$work"/*/)
echo "dist: $(basename "$tarball"): $(wc -c <"$tarball") bytes, $(tar -tzf "$tarball" | grep -vc '/$') files"
meson setup "$work/build" "$src" --werror -Dtests=enabled -Dbench=disabled >"$work/setup.log" 2>&1 ||
    { tail -n 30 "$work/setup.log" >&2; exit 1; }
ninja -C "$work/build" >"$work/build.log" 2>&1 || { tail -n 30 "$work/build.log" >&2; exit 1; }
meson test -C "$work/build" --print-errorlogs --num-processes 2 --suite unit
v=$("$work/build/src/cli/ranktop" -V)
echo "$v" | grep -qx "ranktop $want.*" && echo "$v" | grep -qx "commit: $want_commit" ||
    { echo "dist: the tarball's -V is not the checkout's ($want, $want_commit):" >&2; echo "$v" >&2; exit 1; }
echo "dist: the tarball built, passed the unit suite, and says: $(echo "$v" | head -n 1), commit $want_commit"
