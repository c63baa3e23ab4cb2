#!/bin/sh
# What `ranktop -V` says about its source, for meson's vcs_tag (src/cli/meson.build); it runs
# at every build, and never fails (outside git, or where git refuses the tree, it falls back):
#   version.sh SRCDIR version FALLBACK   `git describe` of the newest vMAJOR.MINOR.PATCH tag,
#                                        without the v: "0.2.0" on the tag, "0.2.0-3-gHASH"
#                                        three commits later, "-dirty" added for a changed tree;
#                                        FALLBACK (meson's project version) when there is none
#   version.sh SRCDIR commit             the commit (12 hex digits, "-dirty" for a changed
#                                        tree), or "unknown" outside git
#   version.sh SRCDIR dist FALLBACK      meson dist's script: writes both into
#                                        $MESON_DIST_ROOT/.ranktop-source, which the
#                                        tarball's builds read
# RANKTOP_SOURCE_VERSION and RANKTOP_SOURCE_COMMIT, when set, are the answers: a build inside a
# chroot without git (tests/bootstrap.sh release) gets them from the checkout outside. Next
# comes SRCDIR/.ranktop-source (lines "version V", "commit C"; never tracked, only in a `meson
# dist` tarball), read before git: a tarball unpacked inside some other git checkout must not
# take that checkout's describe.
from_stamp() {
    [ -f "$1/.ranktop-source" ] && sed -n "s/^$2 //p" "$1/.ranktop-source" | grep .
}
case $2 in
dist)
    {
        echo "version $(sh "$0" "$1" version "$3")"
        echo "commit $(sh "$0" "$1" commit)"
    } >"${MESON_DIST_ROOT:?meson dist sets it}/.ranktop-source"
    ;;
version)
    [ -z "${RANKTOP_SOURCE_VERSION:-}" ] || { echo "$RANKTOP_SOURCE_VERSION"; exit 0; }
    from_stamp "$1" version && exit 0
    v=$(git -C "$1" describe --tags --abbrev=12 --match 'v[0-9]*.[0-9]*.[0-9]*' --dirty 2>/dev/null) &&
        [ -n "$v" ] && echo "${v#v}" || echo "$3"
    ;;
commit)
    [ -z "${RANKTOP_SOURCE_COMMIT:-}" ] || { echo "$RANKTOP_SOURCE_COMMIT"; exit 0; }
    from_stamp "$1" commit && exit 0
    c=$(git -C "$1" describe --always --abbrev=12 --exclude '*' --dirty 2>/dev/null) &&
        [ -n "$c" ] && echo "$c" || echo unknown
    ;;
esac
