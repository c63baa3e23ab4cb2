#!/bin/sh
# A watched rank killed by SIGSEGV leaves a core (kernel.core_pattern set to a file in the
# test's folder): the HANG banner and the rank table say where the core is, and c on the dead
# rank writes the text of `ranktop dump --core` on it next to the exports, with the rank's
# stack in it. Needs root: the exit collector's connector and core_pattern (restored on every
# exit); skipped (77) without.
. "$(dirname "$0")/lib.sh"

PAT=/proc/sys/kernel/core_pattern
[ "$(id -u)" = 0 ] && [ -w "$PAT" ] || { echo "skip: needs root and a writable $PAT"; exit 77; }
OLD_PATTERN=$(cat "$PAT")
restore() {
    printf '%s\n' "$OLD_PATTERN" > "$PAT"
    ui_cleanup
}
trap restore EXIT
printf '%s\n' "$WORK/core.%p" > "$PAT"
ulimit -c unlimited

RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 python3 -S -c 'import time
def wait_here():
    while True: time.sleep(0.05)
wait_here()' &
A=$!
RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 python3 -S -c 'import time
def crash_here():
    while True: time.sleep(0.05)
crash_here()' &
B=$!
PIDS="$PIDS $A $B"
mkdir -p "$WORK/exp"
ui_start cb 200 40 -- "$RANKTOP_BIN" -p "$A,$B" --hang-after 2 --export-dir "$WORK/exp"
wait_screen "^ +1 +$B .* (run|idle|stuck) .*crash_here" 30 || fail "rank 1 not listed"
kill -SEGV "$B"
wait "$B" 2> /dev/null || true
[ -s "$WORK/core.$B" ] || fail "no core written to $WORK/core.$B"
wait_screen "rank 1 exited \\(SIGSEGV core: $WORK/core.$B\\)" 60 || fail "the banner has no core path"
wait_screen "^ +1 +$B .* SIGSEGV .*core: $WORK/core.$B" 30 || fail "the table has no core path"
keys Down
keys c
wait_screen "wrote $WORK/exp/ranktop-core-$B.txt" 120 || fail "c wrote no core text"
grep -q crash_here "$WORK/exp/ranktop-core-$B.txt" ||
    { cat "$WORK/exp/ranktop-core-$B.txt" >&2; fail "the core text lacks the rank's stack"; }
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
