#!/bin/sh
# The portable binary (tests/bootstrap.sh release: dist/ranktop-VERSION-linux-ARCH, or
# $RANKTOP_PORTABLE) on live targets of other distributions, the binary itself run inside
# each distribution's root: Debian 12 (this host, python3.11), Debian 11 (the bullseye chroot,
# python3.9, glibc 2.31 as built) and Debian sid (python3.14, python3.15). On each: -V, ls
# --json finds the target as a Python rank, dump --json equals the stacks the target recorded
# itself (tests/py/known_state.py: every thread, frame by frame: function, file, line), record
# writes a trace with the target's frames, and the monitor runs in tmux (here and in each
# chroot). Prints the binary's size and ldd. Skipped (77), saying why, when no portable binary
# was built; a chroot that is missing is skipped with a line (its own script says why).
. "$(dirname "$0")/../ui/lib.sh"

ARCH=$(uname -m)
BIN=${RANKTOP_PORTABLE:-$(ls -t "$RANKTOP_SRCDIR"/dist/ranktop-*-linux-"$ARCH" 2> /dev/null | head -n 1)}
if [ -z "$BIN" ] || [ ! -x "$BIN" ]; then
    echo "skipped: no portable binary in $RANKTOP_SRCDIR/dist (sh tests/bootstrap.sh release builds it)"
    exit 77
fi
# The binary must be this tree's: the same version and commit in -V as the build under test.
for l in '^ranktop ' '^commit:'; do
    [ "$("$BIN" -V | grep "$l")" = "$("$RANKTOP_BIN" -V | grep "$l")" ] ||
        fail "$BIN is not this tree's build ($("$BIN" -V | grep "$l")); run sh tests/bootstrap.sh release"
done
echo "$BIN: $(wc -c < "$BIN") bytes"
ldd "$BIN"
# Copied as $WORK/bin/ranktop: the chroots see $WORK, and the UI helpers find the monitor by
# its name.
mkdir -p "$WORK/bin"
cp "$BIN" "$WORK/bin/ranktop"
RT=$WORK/bin/ranktop

# The chroots get an empty directory at $WORK's path for the bind mount; it goes at the end.
ROOTS=""
portable_cleanup() {
    ui_cleanup
    for r in $ROOTS; do rmdir "$r$WORK" 2> /dev/null || true; done
}
trap portable_cleanup EXIT

# in_root ROOT CMD...: CMD inside ROOT ("/": here) with $WORK and the source tree bound at their
# own paths and a /proc of this pid namespace, all in a private mount namespace.
in_root() {
    root=$1
    shift
    [ "$root" = / ] && exec "$@"
    exec unshare -m --propagation private sh -c '
r=$1 w=$2 s=$3
shift 3
for d in "$w" "$s"; do
    mkdir -p "$r$d" && mount --bind "$d" "$r$d" || exit 126
done
mount -t proc proc "$r/proc" || exit 126
exec chroot "$r" "$@"' sh "$root" "$WORK" "$RANKTOP_SRCDIR" "$@"
}

# check_on LABEL ROOT PYTHON: the whole round on one distribution.
n=0
check_on() {
    label=$1 root=$2 py=$3 out="$WORK/ks$n"
    [ "$root" = / ] || ROOTS="$ROOTS $root"
    n=$((n + 1))
    mkdir -p "$out"
    (in_root "$root" "$RT" -V) > "$out/V" 2>&1 || fail "$label: -V: $(cat "$out/V")"
    grep -q "^architecture: $ARCH" "$out/V" || fail "$label: -V: $(cat "$out/V")"
    RANK=$n LOCAL_RANK=$n WORLD_SIZE=8 in_root "$root" "$py" -S \
        "$RANKTOP_SRCDIR/tests/py/known_state.py" "$out" &
    PIDS="$PIDS $!"
    wait_for test -e "$out/ready" -o -e "$out/error" || fail "$label: $py did not start"
    [ ! -e "$out/error" ] || fail "$label: $py: $(cat "$out/error")"
    T=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["pid"])' "$out/truth.json")
    (in_root "$root" "$RT" dump --json -p "$T") > "$out/d.json" 2> "$out/d.err" ||
        fail "$label: dump failed: $(cat "$out/d.err")"
    python3 - "$out/d.json" "$out/truth.json" <<'PYEOF' || fail "$label: dump differs from the target's own stacks"
import json, sys
d = json.load(open(sys.argv[1]))
truth = json.load(open(sys.argv[2]))
p = d["processes"][0]
assert p["error"] is None, p["error"]
assert p["python"] == truth["python"], (p["python"], truth["python"])
got = {t["tid"]: t for t in p["threads"]}
for th in truth["threads"]:
    g = got.get(th["native_id"])
    assert g is not None, ("thread missing", th["name"], sorted(got))
    assert g["name"] == th["name"], (g["name"], th["name"])
    want = [(f["function"], f["file"], f["line"]) for f in th["frames"]]
    have = [(f["function"], f["file"], f["line"]) for f in g["frames"]]
    if th["state"] == "spinning":  # the spinner's own line moves; the callers do not
        want, have = want[1:], have[1:]
    assert have == want, (th["name"], have[:4], want[:4], len(have), len(want))
PYEOF
    (in_root "$root" "$RT" ls --json --match known_state.py) > "$out/ls.json" 2> "$out/ls.err" ||
        fail "$label: ls failed: $(cat "$out/ls.err")"
    json_check "$out/ls.json" "[(p['rank'], p['python']) for p in d['processes'] if p['pid'] == $T] == [($n, True)]" ||
        fail "$label: ls does not list the target as rank $n"
    (in_root "$root" "$RT" record -p "$T" --all-threads -d 1 --format collapsed -o "$out/r.folded") \
        > "$out/r.err" 2>&1 || fail "$label: record failed: $(cat "$out/r.err")"
    for f in deep_root spin_ü consume; do
        grep -q "$f" "$out/r.folded" || fail "$label: the recorded trace has no $f"
    done
    # The monitor in tmux, inside the same root.
    ui_start "mon$n" 150 30 TERM=xterm-256color -- sh -c '. "$0"; in_root "$1" "$2" -p "$3"' \
        "$WORK/in_root.sh" "$root" "$RT" "$T"
    wait_screen "^ +$n +$T " 30 || fail "$label: the monitor does not list the target"
    keys q
    wait_screen '^EXITED 0$' 20 || fail "$label: the monitor did not quit with status 0"
    echo "$label: $py (Python $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["python"])' "$out/truth.json")): -V, ls, dump (exact), record, monitor: ok"
    kill_tree "$T"
}
# The monitor's session runs in_root from a file of its own (ui_start runs a command line).
{
    echo "WORK=$(sh_quote "$WORK") RANKTOP_SRCDIR=$(sh_quote "$RANKTOP_SRCDIR")"
    sed -n '/^in_root() {$/,/^}$/p' "$0"
} > "$WORK/in_root.sh"

check_on "Debian 12 (host)" / /usr/bin/python3.11
BULLSEYE=${RANKTOP_BULLSEYE_CHROOT:-/var/cache/ranktop/bullseye-chroot}
if [ "$(id -u)" -ne 0 ]; then
    echo "not root: the chroots (Debian 11, sid) are not run"
else
    if [ -x "$BULLSEYE/usr/bin/python3.9" ]; then
        check_on "Debian 11 (chroot)" "$BULLSEYE" /usr/bin/python3.9
    else
        echo "no Debian 11 chroot at $BULLSEYE (sh tests/bullseye_chroot.sh builds it): not run"
    fi
    for v in 3.14 3.15; do
        if [ -x "$SID_CHROOT/usr/bin/python$v" ]; then
            check_on "Debian sid (chroot)" "$SID_CHROOT" "/usr/bin/python$v"
        else
            echo "no python$v in $SID_CHROOT (sh tests/sid_chroot.sh builds it): not run"
        fi
    done
fi
echo ok
