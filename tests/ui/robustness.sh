#!/bin/sh
# The monitor never blocks: keys are answered while a (fake) nvidia-smi hangs, while a rank is
# stopped with SIGSTOP and after a rank is killed; the killed rank's row says `exited`; `q`
# exits cleanly. "Promptly" is checked with a deadline (a key shows its effect within KEY_S
# seconds), never with a timed assertion on the exact latency.
. "$(dirname "$0")/lib.sh"
KEY_S=2

start_rank 0 3
R0=$LAST
start_rank 1 3
R1=$LAST
start_rank 2 3
R2=$LAST

ui_start rob 160 45 FAKE_SMI_SLEEP=30 \
    "FAKE_SMI_FIXTURE=$DATA/nvidia-smi/590.48.01_h100_3procs_100pct.txt" -- \
    "$RANKTOP_BIN" --nvidia-smi "$FAKE/nvidia-smi" --npu-smi /nonexistent --no-device-libs \
    -p "$R0,$R1,$R2"
wait_screen '^ +RANK +PID ' 30 || fail "the monitor did not draw its rank table"
APP=$(app_pid)
[ -n "$APP" ] || fail "ranktop is not running"

# The fake tool is running (and sleeping) as ranktop's child.
tool_hangs() {
    pgrep -P "$APP" -f tests/fake/nvidia-smi > /dev/null
}

# 1. Keys while the device tool hangs. Each key is pressed while the tool is running.
until_deadline 30 tool_hangs || fail "the fake nvidia-smi was never started"
key_effect $KEY_S 2 '^(rank [0-9?]+ +pid [0-9]+ |no rank selected)' ||
    fail "key 2 not answered within $KEY_S s while nvidia-smi hangs"
until_deadline 30 tool_hangs || fail "the fake nvidia-smi is not running any more"
key_effect $KEY_S '?' '^ranktop: a top for distributed PyTorch jobs' ||
    fail "key ? not answered within $KEY_S s while nvidia-smi hangs"
until_deadline 30 tool_hangs || fail "the fake nvidia-smi is not running any more"
key_effect $KEY_S '?' '^ +RANK +PID ' || fail "? did not close the help within $KEY_S s"
keys 1

# The ranks are listed although the tool never answers.
for r in 0 1 2; do
    eval "p=\$R$r"
    wait_screen "^ +$r +$p +.* (run|idle|stuck) " 30 || fail "rank $r (pid $p) not listed while nvidia-smi hangs"
done

# 2. SIGSTOP rank 1: still listed, keys still answered.
kill -STOP "$R1"
stopped() {
    grep -q '^State:.*T' "/proc/$R1/status"
}
wait_for stopped || fail "rank 1 did not stop"
key_effect $KEY_S 3 'OWN% +TOTAL% +FUNCTION ' || fail "key 3 not answered within $KEY_S s with a stopped rank"
key_effect $KEY_S 1 '^<module> ' || fail "key 1 not answered within $KEY_S s with a stopped rank"
# Several refreshes later the stopped rank is still there and not marked exited.
key_effect $KEY_S p '\[PAUSED\]' || fail "key p not answered within $KEY_S s with a stopped rank"
key_effect $KEY_S p 'display resumed' || fail "key p not answered within $KEY_S s with a stopped rank"
wait_screen "^ +1 +$R1 +.* stopped " 30 || fail "the stopped rank 1 is not listed as stopped"

# 3. kill -9 rank 2: its row says exited, the UI keeps running.
kill -9 "$R2"
wait_screen "^ +2 +$R2 +.* (exit(ed)?|SIGKILL) " 30 || fail "the killed rank 2 is not shown as exited"
wait_screen '^ranktop .* ranks 2/3 ' 30 || fail "the header does not count 2 of 3 ranks alive"
key_effect $KEY_S 4 '^RANK +PID +BUSY% ' || fail "key 4 not answered within $KEY_S s after a rank died"
key_effect $KEY_S 5 '^RANK +PID +RSS ' || fail "key 5 not answered within $KEY_S s after a rank died"
key_effect $KEY_S 1 '^<module> ' || fail "key 1 not answered within $KEY_S s after a rank died"
wait_screen "^ +1 +$R1 +.* stopped " 10 || fail "the stopped rank 1 vanished"
wait_screen "^ +0 +$R0 +.* (run|idle|stuck) " 10 || fail "rank 0 vanished"
kill -CONT "$R1"

# 4. q exits with status 0 (the tool may still be hanging) and restores the terminal.
t0=$(now_ms)
keys q
wait_screen '^EXITED 0$' 20 || fail "q did not exit ranktop with status 0"
echo "q to exit: $(($(now_ms) - t0)) ms (a hanging tool is killed at once)" >&2
[ "$(pane_fmt '#{alternate_on}')" = 0 ] || fail "the alternate screen is still on after exit"

# 5. q while a tool hangs with a 30 s deadline: exit at once, not at the deadline. "At once"
# is checked against the deadline itself (within 10 s), never a tight latency.
ui_start quit 120 40 FAKE_SMI_SLEEP=300 \
    "FAKE_SMI_FIXTURE=$DATA/nvidia-smi/590.48.01_h100_3procs_100pct.txt" -- \
    "$RANKTOP_BIN" --nvidia-smi "$FAKE/nvidia-smi" --npu-smi /nonexistent --no-device-libs \
    --tool-timeout 30 -p "$R0"
wait_screen '^ +RANK +PID ' 30 || fail "the second monitor did not draw its rank table"
APP=$(app_pid)
[ -n "$APP" ] || fail "the second ranktop is not running"
until_deadline 30 tool_hangs || fail "the fake nvidia-smi was never started by the second monitor"
TOOL=$(pgrep -P "$APP" -f tests/fake/nvidia-smi | head -n 1)
t0=$(now_ms)
keys q
wait_screen '^EXITED 0$' 10 || fail "q took over 10 s while a tool with a 30 s deadline hangs"
echo "q to exit with a hanging tool (deadline 30 s): $(($(now_ms) - t0)) ms" >&2
# The tool ran in its own process group (its pid); nothing of it may outlive ranktop.
tool_group_gone() {
    ! kill -0 -- "-$TOOL" 2> /dev/null
}
[ -n "$TOOL" ] && until_deadline 10 tool_group_gone || fail "the hung tool's group outlived ranktop"
echo ok
