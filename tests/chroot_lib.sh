# Shared by tests/sid_chroot.sh and tests/bullseye_chroot.sh (sourced, not run): builds a Debian
# minbase chroot once with debootstrap and apt, and keeps it in a fixed cache place between runs.
# The caller sets, before calling chroot_ensure:
#   CHROOT_NAME   the prefix of its messages (sid_chroot)
#   CHROOT_LABEL  what is built, for the skip reasons (the sid chroot)
#   SUITE MIRROR  what debootstrap installs, and from where
#   PACKAGES      what apt installs on top (the first line of the stamp, see below)
#   DIR           the cache; the build goes into DIR.tmp (TMP)
#   CHROOT_ARCH   optional: a foreign architecture dpkg adds before apt runs (arm64)
# and defines chroot_works ROOT (true when the chroot's tools start) and chroot_versions ROOT
# (the version lines for the stamp).
#
# A ready chroot carries DIR/.ranktop-ready (the package list, then the versions); with it
# chroot_ensure only checks that the tools start, and builds anew when the list changed. It
# builds into DIR.tmp and renames that when complete, so an interrupted build never leaves a half
# chroot under DIR. /proc is mounted inside only while apt runs and unmounted on every exit: a
# recursive copy or removal of a chroot with /proc mounted walks the host's /proc. When it cannot
# build (no root, no debootstrap, mirror unreachable) it exits 77, the reason on stderr and in
# DIR.skip; a failed build exits 1.

# chroot_skip REASON: the reason also goes to DIR.skip, for the caller's tests to quote.
chroot_skip() {
    echo "$CHROOT_NAME: skipped: $*" >&2
    mkdir -p "$(dirname "$DIR")" && echo "$*" >"$DIR.skip" || true
    exit 77
}

chroot_ready() {
    [ -f "$DIR/.ranktop-ready" ] &&
        [ "$(head -n 1 "$DIR/.ranktop-ready")" = "packages: $PACKAGES" ] || return 1
    chroot_works "$DIR"
}

chroot_unmount_proc() {
    if mountpoint -q "$TMP/proc" 2>/dev/null; then
        umount "$TMP/proc" || umount -l "$TMP/proc"
    fi
}

# chroot_remove_tmp: a half-built tree goes, but never while something is mounted inside it.
chroot_remove_tmp() {
    [ -d "$TMP" ] || return 0
    chroot_unmount_proc
    if grep -q " $TMP/" /proc/self/mounts; then
        echo "$CHROOT_NAME: $TMP still has mounts; not removing it" >&2
        return 1
    fi
    rm -rf --one-file-system "$TMP"
}

chroot_build() {
    [ "$(id -u)" -eq 0 ] || chroot_skip "building $CHROOT_LABEL needs root"
    command -v debootstrap >/dev/null 2>&1 || chroot_skip "debootstrap is not installed"
    chroot_remove_tmp
    mkdir -p "$(dirname "$DIR")"
    trap 'chroot_unmount_proc' EXIT
    trap 'exit 1' INT TERM
    # debootstrap fails early (a few seconds) when the mirror is unreachable; the timeout bounds
    # a mirror that answers but crawls.
    if ! timeout 1200 debootstrap --variant=minbase "$SUITE" "$TMP" "$MIRROR" >"$TMP.log" 2>&1; then
        if grep -qiE 'Failed getting release file|Could not resolve|unable to connect|Connection (refused|timed out)|Temporary failure in name resolution' "$TMP.log"; then
            why=$(tail -n 1 "$TMP.log")
            chroot_remove_tmp
            rm -f "$TMP.log"
            chroot_skip "debootstrap cannot reach $MIRROR ($why)"
        fi
        echo "$CHROOT_NAME: debootstrap failed; its log is $TMP.log" >&2
        exit 1
    fi
    mount -t proc proc "$TMP/proc"
    [ -z "${CHROOT_ARCH:-}" ] || chroot "$TMP" dpkg --add-architecture "$CHROOT_ARCH"
    chroot "$TMP" apt-get -qq -o Acquire::Check-Valid-Until=false update >>"$TMP.log" 2>&1
    # shellcheck disable=SC2086 # a word list
    DEBIAN_FRONTEND=noninteractive timeout 1200 chroot "$TMP" apt-get install -y -qq \
        --no-install-recommends $PACKAGES >>"$TMP.log" 2>&1
    chroot "$TMP" apt-get clean >>"$TMP.log" 2>&1
    chroot_unmount_proc
    {
        echo "packages: $PACKAGES"
        chroot_versions "$TMP"
    } >"$TMP/.ranktop-ready"
    if [ -d "$DIR" ]; then
        grep -q " $DIR/" /proc/self/mounts && { echo "$CHROOT_NAME: $DIR has mounts" >&2; exit 1; }
        rm -rf --one-file-system "$DIR"
    fi
    mv "$TMP" "$DIR"
    rm -f "$TMP.log"
}

# chroot_ensure: DIR is ready when it returns (built first where needed), or the script exits.
chroot_ensure() {
    TMP=$DIR.tmp
    if ! chroot_ready; then
        start=$(date +%s)
        chroot_build
        echo "$CHROOT_NAME: built $DIR in $(($(date +%s) - start)) s" >&2
    fi
    chroot_ready || { echo "$CHROOT_NAME: $DIR is not usable" >&2; exit 1; }
    rm -f "$DIR.skip"
}

# chroot_run_in DIR CMD: CMD runs under sh inside the chroot, in a private mount namespace where
# the current directory and /proc are mounted at their host paths; those mounts vanish with the
# process and are never visible on the host (so the cached tree never holds a mounted /proc).
chroot_run_in() {
    exec unshare -m --propagation private sh -c '
r=$1 cmd=$2
mkdir -p "$r$PWD" && mount --bind "$PWD" "$r$PWD" || exit 126
mount -t proc proc "$r/proc" || exit 126
exec chroot "$r" sh -c "cd \"\$0\" && $cmd" "$PWD"' sh "$1" "$2"
}
