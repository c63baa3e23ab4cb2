#!/bin/sh
# A 32-bit target is refused with a message that says so: `dump` of a 32-bit x86 program (built
# here with -m32 -nostdlib, so no 32-bit libc or multilib is needed) named like an interpreter
# says what it is, on stderr and in --json's error, rather than failing somewhere inside.
# Skipped where the compiler cannot build a 32-bit x86 program (another architecture).
. "$(dirname "$0")/lib.sh"

cat > "$WORK/s32.c" << 'CEOF'
/* Sleeps forever through int 0x80 pause(2): no libc. */
void _start(void)
{
    for (;;)
        __asm__ volatile("int $0x80" : : "a"(29) : "memory");
}
CEOF
if ! ${CC:-cc} -m32 -static -nostdlib -O1 -o "$WORK/python3.11" "$WORK/s32.c" 2> "$WORK/cc.err"; then
    echo "no 32-bit x86 build here: skipped ($(head -n 1 "$WORK/cc.err"))" >&2
    exit 77
fi
"$WORK/python3.11" &
T=$!
PIDS="$PIDS $T"
wait_for grep -q "python3.11" "/proc/$T/cmdline" 2> /dev/null || fail "the 32-bit program did not start"
WANT="a 32-bit program for x86: ranktop reads 64-bit $(uname -m | sed 's/_/-/') processes only"
if "$RANKTOP_BIN" dump -p "$T" > "$WORK/d.out" 2> "$WORK/d.err"; then
    fail "dump read a 32-bit process: $(cat "$WORK/d.out")"
fi
grep -qxF "ranktop dump: process $T: $WANT" "$WORK/d.err" || fail "dump: $(cat "$WORK/d.err")"
"$RANKTOP_BIN" dump --json -p "$T" > "$WORK/d.json" 2> /dev/null || true
json_check "$WORK/d.json" "d['processes'][0]['error'] == '''$WANT'''" || fail "dump --json"
echo ok
