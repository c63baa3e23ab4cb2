#!/bin/sh
# The monitor's header says the memory reader when it is not process_vm_readv: under a seccomp
# filter that refuses that call (tests/support/deny_vm_readv), the rank is read through
# /proc/PID/mem and the header says so, with why; a plain monitor's header does not.
. "$(dirname "$0")/lib.sh"

DENY=${RANKTOP_DENY_VM_READV:?set by meson}
start_rank 0 1
ui_start deny 250 30 -- "$DENY" "$RANKTOP_BIN" -p "$LAST" --nvidia-smi /nonexistent \
    --npu-smi /nonexistent
wait_screen "^ +0 +$LAST .*<module>" 30 || fail "the rank is not read under the filter"
wait_screen '^ranktop .*reader /proc/PID/mem \(process_vm_readv: EPERM from a seccomp filter\)' 10 ||
    fail "the header does not say the reader"
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
ui_start plain 250 30 -- "$RANKTOP_BIN" -p "$LAST" --nvidia-smi /nonexistent --npu-smi /nonexistent
wait_screen "^ +0 +$LAST .*<module>" 30 || fail "the rank is not read"
screen_lacks 'reader ' || { show_screen "plain"; fail "a plain header names a reader"; }
keys q
wait_screen '^EXITED 0' 20 || fail "q did not quit"
echo ok
