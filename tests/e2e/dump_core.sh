#!/bin/sh
# dump --core on every interpreter (pyenv's 3.8-3.13 and Debian's static python3.11): a core
# taken with gcore of a target whose threads are blocked where it wrote their stacks itself
# (tests/py/core_target.py) gives those stacks exactly, by TID and thread name, after the
# target is gone, and with --native the same Python frames merged below native ones (gcore
# writes no segment for unchanged library text: unwind tables come from the files); the text
# output has the same threads. Then the core's mapped files found
# elsewhere: libpython (or the program, with --exe) copied into a folder given with
# --lib-search while the recorded path holds another build, which is refused by name. Then
# cores cut short at a few places, and files that are not cores: one clear line, exit 1.
# (Cores from real crashes: dump_core_crash.sh; corrupted headers and notes: check_corefile;
# Debian sid's 3.14 and 3.15 in their chroot: dump_core_sid.sh.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/core_lib.sh"

n=0
for py in $ALL_PYTHONS; do
    case $py in "$SID_CHROOT"*) continue ;; esac # a chroot's paths: not this test's
    [ -x "$py" ] || continue
    n=$((n + 1))
    D="$WORK/p$n"
    take_core "$py" "$D"
    run_rc 0 "$RANKTOP_BIN" dump --core "$C" --json
    cp "$WORK/out" "$D/dump.json"
    same_stacks "$D/dump.json" "$D/truth.json" || fail "$py: the core's stacks are not the target's"
    run_rc 0 "$RANKTOP_BIN" dump --core "$C" --json --native
    same_stacks "$WORK/out" "$D/truth.json" native || fail "$py: --native: the core's stacks are not the target's"
    run_rc 0 "$RANKTOP_BIN" dump --core "$C"
    for name in MainThread waiter deep; do
        grep -q "^Thread [0-9]* \"$name\"" "$WORK/out" || fail "$py: text: no thread $name"
    done
    grep -q "^Python 3\." "$WORK/out" || fail "$py: text: no Python line"
    rm -f "$C"
done
[ "$n" -ge 2 ] || fail "fewer than two interpreters found: $ALL_PYTHONS"

# The mapped files elsewhere: a shared-libpython interpreter's libpython copied into a folder
# given with --lib-search is used, and the file at the recorded path is not looked at first.
for py in $ALL_PYTHONS; do
    lib=$(ldd "$py" 2> /dev/null | awk '/libpython/ { print $3 }')
    [ -n "$lib" ] && break
done
if [ -n "$lib" ]; then
    take_core "$py" "$WORK/lib"
    mkdir -p "$WORK/libs"
    cp "$lib" "$WORK/libs/"
    run_rc 0 "$RANKTOP_BIN" dump --core "$C" --json --lib-search "$WORK/libs"
    same_stacks "$WORK/out" "$WORK/lib/truth.json" || fail "--lib-search: stacks differ"
    # Another build in the folder (the static python's bytes under libpython's name): refused
    # as not the file the core mapped, and the recorded path still serves.
    cp /usr/bin/python3.11 "$WORK/libs/$(basename "$lib")"
    run_rc 0 "$RANKTOP_BIN" dump --core "$C" --lib-search "$WORK/libs"
    grep -q "is not the file the core mapped" "$WORK/out" || fail "--lib-search: another build not said"
    rm -f "$C"
fi

# --exe: the static interpreter copied elsewhere and named with --exe, for a core whose
# recorded program is gone from its place (here: a copy of it, removed after the core).
if [ -x /usr/bin/python3.11 ] && ! ldd /usr/bin/python3.11 | grep -q libpython; then
    cp /usr/bin/python3.11 "$WORK/py311"
    take_core "$WORK/py311" "$WORK/exe"
    mv "$WORK/py311" "$WORK/py311.moved"
    run_rc 1 "$RANKTOP_BIN" dump --core "$C"
    grep -q "py311, mapped by the process of the core, was not found.*--exe" "$WORK/err" ||
        fail "a missing program: $(cat "$WORK/err")"
    run_rc 0 "$RANKTOP_BIN" dump --core "$C" --json --exe "$WORK/py311.moved"
    same_stacks "$WORK/out" "$WORK/exe/truth.json" || fail "--exe: stacks differ"
    # Truncated cores: the headers cut, the notes cut, the last segment cut. One line, exit 1.
    size=$(stat -c %s "$C")
    for cut in 10 100 3000 $((size / 2)) $((size / 4 * 3)); do
        head -c "$cut" "$C" > "$WORK/cut"
        run_rc 1 "$RANKTOP_BIN" dump --core "$WORK/cut" --exe "$WORK/py311.moved"
        [ "$(wc -l < "$WORK/err")" -eq 1 ] && grep -Eq "^ranktop dump: core .*: (not an ELF file|truncated core|malformed core)" "$WORK/err" ||
            fail "cut at $cut: $(cat "$WORK/err")"
    done
    run_rc 1 "$RANKTOP_BIN" dump --core "$WORK/cut" --exe "$WORK/py311.moved" --json
    json_check "$WORK/out" "d['processes'][0]['error'].startswith('truncated core') and d['processes'][0]['threads'] == []" ||
        fail "truncated core: JSON"
fi
run_rc 1 "$RANKTOP_BIN" dump --core /usr/bin/python3
grep -q "an ELF file but not a core" "$WORK/err" || fail "a program as a core: $(cat "$WORK/err")"
run_rc 1 "$RANKTOP_BIN" dump --core /dev/null
[ "$(wc -l < "$WORK/err")" -eq 1 ] || fail "/dev/null as a core: $(cat "$WORK/err")"
run_rc 1 "$RANKTOP_BIN" dump --core "$WORK/nothing-here"
run_rc 2 "$RANKTOP_BIN" dump --core "$WORK/cut" -p 1
run_rc 2 "$RANKTOP_BIN" dump --exe /usr/bin/python3 -p 1
echo "ok: dump --core on $n interpreters"
