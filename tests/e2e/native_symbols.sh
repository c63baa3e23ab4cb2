#!/bin/sh
# Names for native frames of stripped objects: a library whose blocking path runs through two
# static functions is built, then stripped three ways. Plain stripped: the static frames have
# no name (object+offset). With MiniDebugInfo (.gnu_debugdata, xz-compressed symbols, made
# with binutils as Fedora does): named. With a separate debug file under
# DEBUGDIR/.build-id/xx/rest.debug (RANKTOP_DEBUG_DIR, a colon-separated list): named. With Debian's libc6-dbg
# installed, libc's own static start-up frame is named (and dropped as start machinery).
. "$(dirname "$0")/lib.sh"

for t in cc objcopy strip nm xz readelf; do
    command -v $t > /dev/null || { echo "skipped: $t is not installed"; exit 77; }
done
cd "$WORK" || fail "no work directory"
cc -shared -fPIC -O1 -g -Wl,--build-id -o libhid.so "$RANKTOP_SRCDIR/tests/native/hidden.c" ||
    fail "cannot build the library"
ID=$(readelf -n libhid.so | awk '/Build ID/ { print $3 }')
[ -n "$ID" ] || fail "no build id"

cp libhid.so libplain.so && strip --strip-all libplain.so
# MiniDebugInfo: the function symbols .dynsym lacks, xz-compressed into .gnu_debugdata.
cp libhid.so libmini.so
nm -D libmini.so --format=posix --defined-only | awk '{ print $1 }' | sort > dyn
nm libmini.so --format=posix --defined-only | awk '$2 == "T" || $2 == "t" { print $1 }' | sort > funcs
comm -13 dyn funcs > keep
grep -q hidden_wait_here keep || fail "nm: no static symbol to keep"
objcopy --only-keep-debug libmini.so mini.dbg
objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols=keep mini.dbg
strip --strip-all -R .comment libmini.so
xz -k mini.dbg
objcopy --add-section .gnu_debugdata=mini.dbg.xz libmini.so
# A build-id debug file.
cp libhid.so libbid.so
mkdir -p "dbg/.build-id/$(echo "$ID" | cut -c1-2)"
objcopy --only-keep-debug libbid.so "dbg/.build-id/$(echo "$ID" | cut -c1-2)/$(echo "$ID" | cut -c3-).debug"
strip --strip-all libbid.so
# A stray debug file: libstray.so is the same code under another build id, and the debug file
# at its build-id path is libbid's. It must be refused (its build id is not the object's),
# not used to name frames.
SID=5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a
cc -shared -fPIC -O1 -g -Wl,--build-id=0x$SID -o libstray.so "$RANKTOP_SRCDIR/tests/native/hidden.c" ||
    fail "cannot build the stray library"
strip --strip-all libstray.so
mkdir -p "stray/.build-id/5a"
cp "dbg/.build-id/$(echo "$ID" | cut -c1-2)/$(echo "$ID" | cut -c3-).debug" "stray/.build-id/5a/$(echo $SID | cut -c3-).debug"

# frames LIB DEBUGDIR: the target's merged main-thread frames, innermost first, one per line.
frames() {
    rm -f ready
    python3 "$RANKTOP_SRCDIR/tests/py/hidden_lib.py" "$WORK/ready" "$WORK/$1" &
    T=$!
    PIDS="$PIDS $T"
    wait_for test -s ready || fail "$1: the target did not start"
    wait_for sh -c "RANKTOP_DEBUG_DIR='$2' $RANKTOP_BIN dump --native --json -p $T > f.json 2> f.err &&
        grep -q '\"function\": *\"block_here\"' f.json" || fail "$1: no block_here frame: $(cat f.err)"
    kill "$T"
    python3 -c "import json; d = json.load(open('f.json'))
for f in d['processes'][0]['threads'][0]['frames']: print(f['function'] or f['file'].rsplit('/', 1)[-1] + '+?')"
}

frames libplain.so /nonexistent > plain.txt
grep -q hidden plain.txt && fail "plain stripped: a static function was named: $(cat plain.txt)"
grep -q '^libplain.so+?$' plain.txt || fail "plain stripped: no unnamed frame: $(cat plain.txt)"
frames libmini.so /nonexistent > mini.txt
[ "$(grep -E '^(hidden_wait_here|hidden_caller|block_here|wait_in_lib)$' mini.txt | tr '\n' ' ')" = \
    "hidden_wait_here hidden_caller block_here wait_in_lib " ] || fail "MiniDebugInfo: $(cat mini.txt)"
frames libbid.so "/nonexistent:$WORK/dbg" > bid.txt
[ "$(grep -E '^(hidden_wait_here|hidden_caller|block_here|wait_in_lib)$' bid.txt | tr '\n' ' ')" = \
    "hidden_wait_here hidden_caller block_here wait_in_lib " ] || fail "build-id debug file: $(cat bid.txt)"
frames libstray.so "$WORK/stray" > stray.txt
grep -q hidden stray.txt && fail "a debug file of another build id named frames: $(cat stray.txt)"
grep -q '^libstray.so+?$' stray.txt || fail "stray debug file: no unnamed frame: $(cat stray.txt)"
grep -q "its build id is $ID, not the object's" f.json f.err ||
    fail "the stray debug file was not said: $(cat f.err; grep -o '"notes*"[^]]*' f.json)"

# Debian's own debug package, when installed: libc's start-up frame is named, so the merge
# drops it with the rest of the start machinery and no unnamed libc frame is left.
LIBC_ID=$(readelf -n /lib/x86_64-linux-gnu/libc.so.6 2> /dev/null | awk '/Build ID/ { print $3 }')
if [ -n "$LIBC_ID" ] && [ -f "/usr/lib/debug/.build-id/$(echo "$LIBC_ID" | cut -c1-2)/$(echo "$LIBC_ID" | cut -c3-).debug" ]; then
    frames libbid.so /usr/lib/debug > libc.txt
    grep -q '^libc.so.6+?$' libc.txt && fail "libc6-dbg: an unnamed libc frame: $(cat libc.txt)"
    frames libbid.so /nonexistent > nolibc.txt
    grep -q '^libc.so.6+?$' nolibc.txt || fail "without libc6-dbg names the control has no unnamed libc frame"
    # Thread start: libc6-dbg names clone3 by its hidden alias too (__GI___clone3); no
    # thread's outermost native frame may be clone/clone3 or start_thread under any alias.
    start_ready python3 "$RANKTOP_SRCDIR/tests/py/pause_native.py" threads
    wait_for sh -c "$RANKTOP_BIN dump --native --json -p $T > t.json 2> t.err &&
        [ \$(grep -o '\"function\": *\"pause\"' t.json | wc -l) -ge 3 ]" || fail "threads: no pause frames: $(cat t.err)"
    kill "$T"
    json_check t.json "len(d['processes'][0]['threads']) >= 3 and not [
(t['name'], nat[-1]['function']) for t in d['processes'][0]['threads']
if (nat := [f for f in t['frames'] if f['kind'] == 'native'])
and (nat[-1]['function'] or '').replace('__GI_', '', 1).lstrip('_') in ('clone', 'clone3', 'clone_internal', 'start_thread')]" ||
        fail "threads: a thread starts with clone/start_thread"
else
    echo "skipped: the libc6-dbg part (not installed)"
fi
echo ok
