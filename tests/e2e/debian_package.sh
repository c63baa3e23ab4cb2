#!/bin/sh
# The Debian package (debian/): a copy of the checkout is built with `dpkg-buildpackage -us -uc
# -b` (its products land beside the copy, never in the checkout), lintian must report no
# error (for the arm64 package too, cross-built where the arm64 set-up is installed), and the
# .deb is installed with apt (dependencies from the mirror) into a cached Debian 12 minbase
# chroot. Inside it the installed ranktop answers -V and --help, dumps a
# python3 of the chroot, and `ranktop demo` draws its ranks; the man page and both completions
# are where Debian's man and shells look. Purging it must leave no file of the package.
#
# The chroot is built once (debootstrap, a few minutes) into $RANKTOP_BOOKWORM_CHROOT
# (/var/cache/ranktop/bookworm-chroot) and reused: the package is purged at the end, so the
# cache keeps only what apt installed as its dependencies (which later runs then find there).
# /proc is mounted in it only for apt and the installed binary, in their own mount namespace
# (never visible on the host); the chroot is never copied or deleted with anything mounted.
# Needs root; skipped, saying why, without root, the Debian tools, or a reachable mirror.
. "$(dirname "$0")/../ui/lib.sh"
unset RANKTOP_DATADIR

skip() {
    echo "skipped: $*"
    exit 77
}
# skip_install REASON: the package built and lintian passed, but it cannot be installed here.
skip_install() {
    skip "the package built and lintian passed; installing it is skipped: $*"
}
[ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap, chroot, apt in the chroot)"
for t in dpkg-buildpackage dh lintian debootstrap flock unshare; do
    command -v $t > /dev/null || skip "$t is not installed (tests/bootstrap.sh installs it)"
done
MIRROR=${RANKTOP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
C=${RANKTOP_BOOKWORM_CHROOT:-/var/cache/ranktop/bookworm-chroot}
ARCH=$(dpkg --print-architecture)
[ "$ARCH" = amd64 ] || [ "$ARCH" = arm64 ] || skip "the package is for amd64 and arm64, not $ARCH"

# 1. Build from a copy: the checkout's tracked and new files (copy_checkout).
mkdir -p "$WORK/pkg/ranktop"
copy_checkout "$WORK/pkg/ranktop" || fail "cannot copy the checkout"
cd "$WORK/pkg/ranktop" || fail "no copy"
[ -x debian/rules ] || fail "the copy has no executable debian/rules"
dpkg-checkbuilddeps > "$WORK/deps.log" 2>&1 || fail "build dependencies: $(cat "$WORK/deps.log")"
dpkg-buildpackage -us -uc -b > "$WORK/build.log" 2>&1 ||
    fail "dpkg-buildpackage: $(tail -40 "$WORK/build.log")"
cd "$WORK/pkg" || fail "no $WORK/pkg"
VERSION=$(dpkg-parsechangelog -l ranktop/debian/changelog -S Version)
DEB="$WORK/pkg/ranktop_${VERSION}_$ARCH.deb"
[ -f "$DEB" ] || fail "no $DEB: $(ls "$WORK/pkg")"

# 2. lintian: no error (warnings are printed; debian/ranktop.lintian-overrides explains the
# overridden ones).
lintian --pedantic --display-info --fail-on error "ranktop_${VERSION}_$ARCH.changes" \
    > "$WORK/lintian.txt" 2>&1 || fail "lintian: $(cat "$WORK/lintian.txt")"
grep -q '^E:' "$WORK/lintian.txt" && fail "lintian errors: $(cat "$WORK/lintian.txt")"
echo "lintian: $(grep -c '^[EWIPX]:' "$WORK/lintian.txt") tags"
grep '^[EWIPX]:' "$WORK/lintian.txt" || true

# 3. The files, where Debian expects them.
dpkg-deb -c "$DEB" | awk '{print $6}' | sed 's|^\./|/|' > "$WORK/contents.txt"
for f in /usr/bin/ranktop /usr/share/man/man1/ranktop.1.gz \
    /usr/share/bash-completion/completions/ranktop /usr/share/zsh/vendor-completions/_ranktop \
    /usr/share/ranktop/demo_job.py /usr/share/doc/ranktop/copyright \
    /usr/share/doc/ranktop/changelog.Debian.gz; do
    grep -qx "$f" "$WORK/contents.txt" || fail "the package lacks $f: $(cat "$WORK/contents.txt")"
done
grep -q -e LICENSE -e site-functions "$WORK/contents.txt" &&
    fail "the package keeps meson's LICENSE copy or zsh site-functions: $(cat "$WORK/contents.txt")"
# Debian's zsh reads vendor-completions (its fpath has no /usr/share/zsh/site-functions).
if command -v zsh > /dev/null; then
    zsh -fc 'print -l $fpath' | grep -qx /usr/share/zsh/vendor-completions ||
        fail "zsh's fpath lacks /usr/share/zsh/vendor-completions"
fi

# 3b. The arm64 package, cross-built from the same copy (dpkg-buildpackage cleans it first) where
# the arm64 cross set-up is installed (tests/aarch64.sh installs it): lintian without error, and
# its ranktop an aarch64 executable. It is not installed here (no arm64 machine; the x86-64
# chroot below installs the amd64 one). About a minute on 2 cores.
if [ "$ARCH" = amd64 ] && (cd ranktop && dpkg-checkbuilddeps -aarm64) > "$WORK/deps64.log" 2>&1; then
    start=$(date +%s)
    (cd ranktop && dpkg-buildpackage -aarm64 -us -uc -b) > "$WORK/build64.log" 2>&1 ||
        fail "dpkg-buildpackage -aarm64: $(tail -40 "$WORK/build64.log")"
    DEB64="$WORK/pkg/ranktop_${VERSION}_arm64.deb"
    [ -f "$DEB64" ] || fail "no $DEB64: $(ls "$WORK/pkg")"
    lintian --pedantic --display-info --fail-on error "ranktop_${VERSION}_arm64.changes" \
        > "$WORK/lintian64.txt" 2>&1 || fail "lintian (arm64): $(cat "$WORK/lintian64.txt")"
    grep -q '^E:' "$WORK/lintian64.txt" && fail "lintian errors (arm64): $(cat "$WORK/lintian64.txt")"
    # e_machine (bytes 18-19 of the ELF header): 183, EM_AARCH64.
    [ "$(dpkg-deb --fsys-tarfile "$DEB64" | tar -xOf - ./usr/bin/ranktop | od -An -tx1 -j18 -N2 |
        tr -d ' ')" = b700 ] || fail "the arm64 package's /usr/bin/ranktop is not an aarch64 executable"
    echo "arm64 package: built and linted in $(($(date +%s) - start)) s," \
        "$(grep -c '^[EWIPX]:' "$WORK/lintian64.txt") lintian tags, $(wc -c < "$DEB64") bytes"
    grep '^[EWIPX]:' "$WORK/lintian64.txt" || true
else
    echo "arm64 package: not built: no arm64 cross set-up ($(tail -n 1 "$WORK/deps64.log");" \
        "tests/aarch64.sh installs it)"
fi

# 4. The cached chroot, built once. A lock keeps two runs off the same chroot; a run killed
# midway may have left /proc (or debootstrap's mounts) behind, so those go first.
mkdir -p "$(dirname "$C")"
exec 9> "$C.lock"
flock 9 || fail "cannot lock $C.lock"
# unmount_under DIR: unmounts everything mounted at or below DIR, deepest first; fails if any
# mount stays (then nothing below DIR may be deleted or copied).
unmount_under() {
    awk -v d="$1" '$2 == d || index($2, d "/") == 1 {print $2}' /proc/mounts | sort -r |
        while read -r m; do umount "$m" 2> /dev/null || umount -l "$m"; done
    ! awk -v d="$1" '$2 == d || index($2, d "/") == 1 {f = 1} END {exit !f}' /proc/mounts
}
unmount_under "$C" || fail "cannot unmount what is mounted under $C"
if [ ! -x "$C/usr/bin/apt-get" ]; then
    unmount_under "$C.new" || fail "cannot unmount what is mounted under $C.new"
    rm -rf "$C.new"
    start=$(date +%s)
    if ! debootstrap --variant=minbase bookworm "$C.new" "$MIRROR" > "$WORK/boot.log" 2>&1; then
        unmount_under "$C.new" && rm -rf "$C.new"
        skip_install "\"debootstrap bookworm from $MIRROR failed (no reachable mirror?):" \
            "$(tail -3 "$WORK/boot.log")\""
    fi
    unmount_under "$C.new" || fail "debootstrap left mounts under $C.new"
    rm -rf "$C"
    mv "$C.new" "$C"
    echo "debootstrap bookworm: $(($(date +%s) - start)) s"
fi

# in_chroot CMD...: runs CMD in the chroot with a clean environment, in a private mount
# namespace where /proc is mounted (apt and ranktop need it): that mount vanishes with the
# process and is never visible on the host, so the cached tree never holds a mounted /proc,
# even after a killed run. Every exec keeps the pid: a program started so is CMD's own pid.
cat > "$WORK/in_chroot.sh" << 'EOF'
root=$1
shift
exec unshare -m --propagation private sh -c 'mount -t proc proc "$0/proc" || exit 126
exec chroot "$0" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive TERM="${TERM:-dumb}" "$@"' "$root" "$@"
EOF
in_chroot() {
    sh "$WORK/in_chroot.sh" "$C" "$@"
}

# 5. Install with apt, which resolves the dependencies (and python3-minimal, for a target) from
# the mirror, or from the cache's earlier runs.
dpkg --root="$C" -s ranktop > /dev/null 2>&1 && { in_chroot dpkg --purge ranktop > /dev/null ||
    fail "cannot purge a ranktop left in $C by an earlier run"; }
mkdir -p "$C/tmp/ranktop-pkg"
cp "$DEB" "$C/tmp/ranktop-pkg/"
IN_DEB="/tmp/ranktop-pkg/$(basename "$DEB")"
start=$(date +%s)
if ! in_chroot apt-get install -y -q "$IN_DEB" python3-minimal > "$WORK/apt.log" 2>&1; then
    in_chroot apt-get update -q > "$WORK/update.log" 2>&1 ||
        skip_install "\"apt-get update in the bookworm chroot failed (no reachable mirror?):" \
            "$(tail -3 "$WORK/update.log")\""
    in_chroot apt-get install -y -q "$IN_DEB" python3-minimal > "$WORK/apt.log" 2>&1 ||
        fail "apt-get install ./$(basename "$DEB"): $(tail -20 "$WORK/apt.log")"
fi
echo "apt-get install in the chroot: $(($(date +%s) - start)) s"
rm -rf "$C/tmp/ranktop-pkg"
in_chroot dpkg -L ranktop > "$WORK/owned.txt" || fail "dpkg -L ranktop"

# 6. The installed package at work.
in_chroot ranktop -V > "$WORK/version.txt" 2>&1 || fail "ranktop -V: $(cat "$WORK/version.txt")"
head -n 1 "$WORK/version.txt" | grep -Eq '^ranktop [0-9]+\.[0-9]+\.[0-9]+' ||
    fail "ranktop -V: $(cat "$WORK/version.txt")"
in_chroot ranktop --help > "$WORK/help.txt" 2>&1 || fail "ranktop --help: $(cat "$WORK/help.txt")"
grep -q '^  dump ' "$WORK/help.txt" || fail "--help: $(cat "$WORK/help.txt")"
zcat "$C/usr/share/man/man1/ranktop.1.gz" | grep -Eq '^\.TH "?ranktop"? "?1"?' ||
    fail "ranktop.1.gz is not a roff page for ranktop"
[ -s "$C/usr/share/bash-completion/completions/ranktop" ] || fail "no bash completion"
head -n 1 "$C/usr/share/zsh/vendor-completions/_ranktop" | grep -qx '#compdef ranktop' ||
    fail "no zsh completion"
[ -f "$C/usr/share/ranktop/demo_job.py" ] || fail "no demo job"
grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' \
    "$C/usr/share/doc/ranktop/copyright" || fail "copyright is not DEP-5"

# dump of a python3 of the chroot: it says it is ready, then sleeps in a named function.
cat > "$C/tmp/ranktop_probe.py" << 'EOF'
import time
def probe_sleeping_in_chroot():
    open("/tmp/ranktop_probe.ready", "w").close()
    while True:
        time.sleep(0.2)
probe_sleeping_in_chroot()
EOF
rm -f "$C/tmp/ranktop_probe.ready"
chroot "$C" /usr/bin/python3 -S /tmp/ranktop_probe.py &
PROBE=$!
PIDS="$PIDS $PROBE"
wait_for test -e "$C/tmp/ranktop_probe.ready" || fail "the chroot's python3 did not start"
in_chroot ranktop dump -p "$PROBE" > "$WORK/dump.txt" 2>&1 || fail "dump: $(cat "$WORK/dump.txt")"
grep -q 'probe_sleeping_in_chroot.*/tmp/ranktop_probe.py' "$WORK/dump.txt" ||
    fail "dump lacks the probe's frame: $(cat "$WORK/dump.txt")"
kill_tree "$PROBE"
rm -f "$C/tmp/ranktop_probe.py" "$C/tmp/ranktop_probe.ready"

# ranktop demo from the package: four ranks of /usr/share/ranktop/demo_job.py on the screen.
ui_start demo 160 45 TERM=screen -- sh "$WORK/in_chroot.sh" "$C" ranktop demo
wait_screen '^ +RANK +PID ' 60 || fail "the packaged ranktop demo did not draw its rank table"
wait_screen 'demo_job\.py' 60 || fail "no demo_job.py frame on the screen"
APP=$(app_pid)
[ -n "$APP" ] || fail "the packaged ranktop is not running"
[ "$(pgrep -P "$APP" -f /usr/share/ranktop/demo_job.py | wc -l)" -eq 4 ] ||
    fail "expected 4 ranks of /usr/share/ranktop/demo_job.py: $(pgrep -a -P "$APP")"
keys q
wait_screen '^EXITED 0$' 20 || fail "q did not exit the packaged ranktop with status 0"

# 7. Purge: nothing of the package stays (a directory listed may stay only while another
# package owns it too), nor does dpkg remember it.
in_chroot apt-get purge -y -q ranktop > "$WORK/purge.log" 2>&1 ||
    fail "apt-get purge: $(tail -20 "$WORK/purge.log")"
# shellcheck disable=SC2016 # a dpkg-query format, not a shell expansion
in_chroot dpkg-query -W -f '${db:Status-Status}' ranktop 2> /dev/null | grep -qv not-installed &&
    fail "dpkg still knows ranktop after purge"
while read -r f; do
    [ "$f" = /. ] && continue
    [ -e "$C$f" ] || [ -L "$C$f" ] || continue
    [ -d "$C$f" ] && in_chroot dpkg -S "$f" > /dev/null 2>&1 && continue
    fail "$f stayed after purge"
done < "$WORK/owned.txt"
for f in "$C"/var/lib/dpkg/info/ranktop.*; do
    if [ -e "$f" ]; then fail "dpkg's $f stayed after purge"; fi
done
unmount_under "$C" || fail "something stayed mounted under $C"
echo ok
