#!/bin/sh
# `ranktop record -o F -- python3 script.py`: record starts the script, records its stacks
# (the function it names as its own truth), stops when it ends and exits with its status: 0, a
# nonzero code, 128 + the signal that killed it. Without -o the trace gets py-spy's name
# (python3-TIME.json in the current directory). A command that cannot run fails at once (1).
. "$(dirname "$0")/lib.sh"

cat > "$WORK/job.py" <<'PY'
import os, signal, sys, time
def launched_work(seconds):
    end = time.time() + seconds
    while time.time() < end:
        sum(range(1000))
open(sys.argv[1], "w").write("%d %d\n" % (os.getpid(), os.getpgrp()))
launched_work(3)
if sys.argv[3] != "0":
    os.kill(os.getpid(), int(sys.argv[3]))
sys.exit(int(sys.argv[2]))
PY
cd "$WORK"
REC="$RANKTOP_BIN record --nvidia-smi /nonexistent --npu-smi /nonexistent"

run_rc 0 $REC -o "$WORK/ok.json" -- python3 "$WORK/job.py" "$WORK/pid0" 0 0
read -r P G < "$WORK/pid0"
[ "$P" = "$G" ] || fail "the job is not the leader of its own process group ($P in $G)"
json_check "$WORK/ok.json" "any(e.get('ph') == 'B' and e['name'].startswith('launched_work') for e in d['traceEvents'])"
json_check "$WORK/ok.json" "any(e.get('name') == 'process_name' and e['args']['name'].startswith('pid $P ') for e in d['traceEvents'])"
grep -q "exited with status 0" "$WORK/err" || fail "record did not say how the job ended: $(cat "$WORK/err")"

run_rc 3 $REC -o "$WORK/three.json" -- python3 "$WORK/job.py" "$WORK/pid3" 3 0
[ -s "$WORK/three.json" ] || fail "no trace of the job that exited 3"
run_rc 137 $REC -o "$WORK/kill.json" -- python3 "$WORK/job.py" "$WORK/pid9" 0 9
grep -q "killed by signal 9" "$WORK/err" || fail "record did not name the signal: $(cat "$WORK/err")"

# Without -o: NAME-TIME.EXT as py-spy names it, NAME the command's basename.
mkdir "$WORK/d" && cd "$WORK/d"
run_rc 0 $REC -- "$(command -v python3)" "$WORK/job.py" "$WORK/pidd" 0 0
set -- "$WORK"/d/python3-*.json
[ $# = 1 ] && [ -s "$1" ] || fail "no default-named trace: $(ls "$WORK/d")"
echo "$1" | grep -Eq '/python3-[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}[+-][0-9]{2}:[0-9]{2}\.json$' ||
    fail "default name not py-spy's pattern: $1"
json_check "$1" "any(e.get('ph') == 'B' and e['name'].startswith('launched_work') for e in d['traceEvents'])"

run_rc 1 $REC -o "$WORK/none.json" -- /nonexistent/cmd
grep -q "cannot run '/nonexistent/cmd'" "$WORK/err" || fail "no reason for a command that cannot run"
run_rc 2 $REC -o "$WORK/x.json" -p 1 -- python3 -c pass
run_rc 2 $REC -o "$WORK/x.json" --
echo ok
