#!/bin/sh
# ranktop -V names what the binary is: the version (git describe of the newest vX.Y.Z tag at
# build time, else meson's project version), the commit, the architecture (as `uname -m` says
# it) and the procps library it was built with, which must be the one it links (ldd) and the
# one meson configured ($RANKTOP_PROCPS, set by tests/meson.build). Then version.sh, which
# the build runs through vcs_tag, in a scratch repository without and with tags, since the
# release tag does not exist yet when this is written.
. "$(dirname "$0")/lib.sh"
: "${RANKTOP_PROCPS:?set by meson}"
VERSION_SH="$RANKTOP_SRCDIR/src/cli/version.sh"

"$RANKTOP_BIN" -V >"$WORK/v" || fail "-V exited $?"
# field KEY: the value of -V's line "KEY: value".
field() { sed -n "s/^$1: //p" "$WORK/v"; }

# 1. The version and commit, against git's own answer for the source tree.
project=$(sed -n "s/^  version: '\([^']*\)',\$/\1/p" "$RANKTOP_SRCDIR/meson.build")
[ -n "$project" ] || fail "no version: in meson.build"
if desc=$(git -C "$RANKTOP_SRCDIR" describe --tags --abbrev=12 --match 'v[0-9]*.[0-9]*.[0-9]*' 2>/dev/null); then
    want="ranktop ${desc#v}"
else
    want="ranktop $project"
fi
first=$(head -n 1 "$WORK/v")
case $first in "$want" | "$want-dirty") ;; *) fail "-V says '$first', expected '$want'" ;; esac
if head=$(git -C "$RANKTOP_SRCDIR" rev-parse --short=12 HEAD 2>/dev/null); then
    case $(field commit) in "$head" | "$head-dirty") ;; *) fail "-V commit '$(field commit)', HEAD is $head" ;; esac
else
    [ "$(field commit)" = unknown ] || fail "-V commit '$(field commit)' outside git"
fi

# 2. The architecture, as uname -m names it.
[ "$(field architecture)" = "$(uname -m)" ] ||
    fail "-V architecture '$(field architecture)', uname -m says $(uname -m)"

# 3. The procps library: as configured, and the one the binary links.
[ "$(field procps)" = "$RANKTOP_PROCPS" ] ||
    fail "-V procps '$(field procps)', meson configured '$RANKTOP_PROCPS'"
ldd "$RANKTOP_BIN" >"$WORK/ldd" 2>&1 || true
case $(field procps) in
libproc2\ *) grep -q 'libproc2\.so' "$WORK/ldd" || fail "-V says libproc2, ldd: $(cat "$WORK/ldd")" ;;
libprocps\ *) grep -q 'libprocps\.so' "$WORK/ldd" || fail "-V says libprocps, ldd: $(cat "$WORK/ldd")" ;;
none) ! grep -Eq 'libproc(2|ps)\.so' "$WORK/ldd" || fail "-V says none, ldd: $(cat "$WORK/ldd")" ;;
*) fail "-V procps '$(field procps)' is no known variant" ;;
esac
grep -q '^loaded at run time when present: NVML' "$WORK/v" || fail "-V: $(cat "$WORK/v")"

# 4. version.sh without a tag, on a tag, past it, with another kind of tag, dirty, outside git
# (where git is installed: the Debian 11 build chroot has none, and part 1 checked that case).
if ! command -v git >/dev/null 2>&1; then
    echo "ok (no git here: version.sh's tag cases not run): $(tr '\n' ';' <"$WORK/v")"
    exit 0
fi
R="$WORK/repo"
git init -q "$R"
g() { git -C "$R" -c user.name=t -c user.email=t@t -c commit.gpgsign=false "$@"; }
v() { sh "$VERSION_SH" "$R" version 9.8.7; }
g commit -q --allow-empty -m one
[ "$(v)" = 9.8.7 ] || fail "untagged: version.sh says '$(v)'"
[ "$(sh "$VERSION_SH" "$R" commit)" = "$(g rev-parse --short=12 HEAD)" ] || fail "commit: $(sh "$VERSION_SH" "$R" commit)"
g tag v0.2.0
[ "$(v)" = 0.2.0 ] || fail "on v0.2.0: version.sh says '$(v)'"
g commit -q --allow-empty -m two
g tag nightly
[ "$(v)" = "0.2.0-1-g$(g rev-parse --short=12 HEAD)" ] || fail "past v0.2.0: version.sh says '$(v)'"
echo x >"$R/f" && g add f
[ "$(v)" = "0.2.0-1-g$(g rev-parse --short=12 HEAD)-dirty" ] || fail "dirty: version.sh says '$(v)'"
[ "$(sh "$VERSION_SH" "$WORK/none" version 9.8.7)" = 9.8.7 ] || fail "outside git: version.sh"
[ "$(sh "$VERSION_SH" "$WORK/none" commit)" = unknown ] || fail "outside git: commit"
echo "ok: $(tr '\n' ';' <"$WORK/v")"
