#!/bin/sh
# `ranktop -- CMD`: the monitor starts the job (a Python script in a process group of its own)
# and shows it as a rank; Ctrl-C asks whether to stop the job too, Esc keeps watching, y stops
# it (the script's SIGTERM handler writes that it got it) and quits. A second run: a job that
# ends by itself ends the monitor, which exits with the job's status.
. "$(dirname "$0")/lib.sh"

# The job's function lives in a package (site-packages/jobpkg): the panes name its file
# package-relative, and with --full-filenames by its path.
SITE="$WORK/venv/lib/python3.11/site-packages"
mkdir -p "$SITE/jobpkg"
cat > "$SITE/jobpkg/work.py" <<'PY'
import time
def launched_here(seconds):
    end = time.time() + seconds
    while time.time() < end:
        time.sleep(0.05)
PY
cat > "$WORK/job.py" <<'PY'
import os, signal, sys
def on_term(sig, frame):
    open(sys.argv[1] + ".term", "w").write(str(os.getpgrp() == os.getpid()))
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
sys.path.insert(0, sys.argv[2])
import jobpkg.work
open(sys.argv[1], "w").write(str(os.getpid()))
jobpkg.work.launched_here(float(sys.argv[3]))
sys.exit(int(sys.argv[4]))
PY
cd "$WORK"
ui_start lj 160 40 UI_SHELL_IGNORES_INT=1 -- "$RANKTOP_BIN" --export-dir "$WORK" -- python3 \
    "$WORK/job.py" "$WORK/pid" "$SITE" 3600 0
wait_for test -s "$WORK/pid" || fail "the job did not start"
JOB=$(cat "$WORK/pid")
PIDS="$PIDS $JOB"
wait_screen "$JOB .*launched_here" 30 || fail "the job is not shown as a rank"
wait_screen "launched_here \(jobpkg/work.py:[0-9]+\)" 30 || fail "no short file name in the tree"
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

# A job that ends by itself: the monitor ends with it, with its exit status. Full file names.
ui_start lj2 200 40 -- "$RANKTOP_BIN" --full-filenames --export-dir "$WORK" -- python3 \
    "$WORK/job.py" "$WORK/pid2" "$SITE" 6 5
wait_for test -s "$WORK/pid2" || fail "the second job did not start"
PIDS="$PIDS $(cat "$WORK/pid2")"
wait_screen "launched_here \($SITE/jobpkg/work.py:[0-9]+\)" 30 || fail "--full-filenames: no path"
wait_screen '^EXITED 5' 60 || fail "the monitor did not end with the job's status"
echo ok
