#!/bin/sh
# `ranktop -- CMD`: the monitor starts the job (a Python script in a process group of its own)
# and shows it as a rank; Ctrl-C asks whether to stop the job too, Esc keeps watching, y stops
# it (the script's SIGTERM handler writes that it got it) and quits. A second run: a job that
# ends by itself ends the monitor, which exits with the job's status.
. "$(dirname "$0")/lib.sh"

cat > "$WORK/job.py" <<'PY'
import os, signal, sys, time
def on_term(sig, frame):
    open(sys.argv[1] + ".term", "w").write(str(os.getpgrp() == os.getpid()))
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
open(sys.argv[1], "w").write(str(os.getpid()))
def launched_here():
    while True: time.sleep(0.05)
launched_here()
PY
cd "$WORK"
ui_start lj 160 40 UI_SHELL_IGNORES_INT=1 -- "$RANKTOP_BIN" --export-dir "$WORK" -- python3 "$WORK/job.py" "$WORK/pid"
wait_for test -s "$WORK/pid" || fail "the job did not start"
JOB=$(cat "$WORK/pid")
PIDS="$PIDS $JOB"
wait_screen "$JOB .*launched_here" 30 || fail "the job is not shown as a rank"
keys C-c
wait_screen "stop the job too" 10 || fail "Ctrl-C did not ask about the job"
keys Escape
wait_screen_gone "stop the job too" 10 || fail "Esc did not go back to watching"
kill -0 "$JOB" || fail "Esc stopped the job"
keys C-c
wait_screen "stop the job too" 10 || fail "the second Ctrl-C did not ask"
keys y
wait_screen '^EXITED 0' 20 || fail "y did not quit"
wait_for test -s "$WORK/pid.term" || fail "the job did not get SIGTERM"
[ "$(cat "$WORK/pid.term")" = True ] || fail "the job was not the leader of its own process group"
wait_for no_process_left "$JOB" || fail "the job is still running"
ls "$WORK"/python3-*.log > /dev/null || fail "no job output file in the export directory"

# A job that ends by itself: the monitor ends with it, with its exit status.
ui_start lj2 160 40 -- "$RANKTOP_BIN" --export-dir "$WORK" -- python3 -c \
    'import time, sys
def short_job():
    time.sleep(4)
short_job(); sys.exit(5)'
wait_screen '^EXITED 5' 60 || fail "the monitor did not end with the job's status"
echo ok
