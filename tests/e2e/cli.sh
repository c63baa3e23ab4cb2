#!/bin/sh
# The command line as a user meets it (issue 14): --help and -V, one-line errors named after
# the command with a pointer to --help, the exit-status table (0 done, 1 runtime failure,
# 2 usage) as every --help states it, and py-spy's words in record: -f/--format with py-spy's
# format names, --subprocesses, --idle, --nonblocking, --gil (only GIL-holding samples) and
# --gil-stats, next to the seed recorder's flags. Real binary, real CPython targets.
# shellcheck disable=SC2086 # $NONE and $cmd are word lists on purpose
. "$(dirname "$0")/lib.sh"
NONE="--nvidia-smi /nonexistent --npu-smi /nonexistent --no-device-libs"

# err_is LINE...: stderr is exactly these lines.
err_is() {
    printf '%s\n' "$@" > "$WORK/want"
    cmp -s "$WORK/want" "$WORK/err" || fail "stderr is
$(cat "$WORK/err")
expected
$(cat "$WORK/want")"
}

# 1. --help: the commands, -V, the exit statuses; -V the version.
run_rc 0 "$RANKTOP_BIN" --help
for w in '^  demo ' '^  ls ' '^  dump ' '^  record ' '^  agent ' '^  -V, --version ' \
    '^  -h, --help ' '0 done, 1 a runtime failure' '2 a usage error'; do
    grep -Eq -- "$w" "$WORK/out" || fail "--help lacks /$w/"
done
[ ! -s "$WORK/err" ] || fail "--help wrote to stderr"
run_rc 0 "$RANKTOP_BIN" -V
grep -Eqx 'ranktop [0-9]+\.[0-9]+\.[0-9]+(-[0-9]+-g[0-9a-f]+)?(-dirty)?' "$WORK/out" || fail "-V: $(cat "$WORK/out")"
for cmd in demo ls dump record watch agent; do
    run_rc 0 "$RANKTOP_BIN" $cmd --help
    grep -Eq "^(usage:)? +ranktop $cmd " "$WORK/out" || fail "$cmd --help: $(head -n 2 "$WORK/out")"
done
for cmd in ls dump record watch; do # the commands that state their statuses say the same table
    "$RANKTOP_BIN" $cmd --help | tr '\n' ' ' | grep -q 'Exit status: 0 .* 1 .* 2 on bad usage' ||
        fail "$cmd --help does not state the exit statuses"
done

# 2. A mistyped option or command: getopt's line named after the command, then one line.
run_rc 2 "$RANKTOP_BIN" --bogus
err_is "ranktop: unrecognized option '--bogus'" "try 'ranktop --help'"
[ ! -s "$WORK/out" ] || fail "a bad option printed on stdout"
run_rc 2 "$RANKTOP_BIN" -x
err_is "ranktop: invalid option -- 'x'" "try 'ranktop --help'"
for cmd in demo ls dump record watch agent; do
    run_rc 2 "$RANKTOP_BIN" $cmd --bogus
    err_is "ranktop $cmd: unrecognized option '--bogus'" "try 'ranktop $cmd --help'"
    [ ! -s "$WORK/out" ] || fail "$cmd --bogus printed on stdout"
done
run_rc 2 "$RANKTOP_BIN" record -o
err_is "ranktop record: option requires an argument -- 'o'" "try 'ranktop record --help'"
run_rc 2 "$RANKTOP_BIN" ls --jsn
err_is "ranktop ls: unrecognized option '--jsn'" "try 'ranktop ls --help'"
run_rc 2 "$RANKTOP_BIN" recrod -o x
err_is "ranktop: unknown command 'recrod' (commands: demo, ls, dump, record, watch, agent)" \
    "try 'ranktop --help'"
run_rc 2 "$RANKTOP_BIN" dump
err_is "ranktop dump: no process given: use -p PID or --ranks" "try 'ranktop dump --help'"
run_rc 2 "$RANKTOP_BIN" record -o "$WORK/x.json" --format svgz
err_is "ranktop record: unknown --format 'svgz' (chrome, chrometrace, speedscope, collapsed, raw, flamegraph, perfetto)"
run_rc 2 "$RANKTOP_BIN" --rate 0
err_is "ranktop: --rate wants a number in [0.1, 1000], got '0'"
run_rc 2 "$RANKTOP_BIN" ls --match '('
grep -q "^ranktop ls: bad --match expression '('" "$WORK/err" || fail "bad regex: $(cat "$WORK/err")"

# 3. Runtime failures exit 1, as the help says: an output in a missing directory, a process
# that is gone, a --match that matches nothing (said on stderr).
start_rank 0 1
TARGET=$LAST
run_rc 1 "$RANKTOP_BIN" record -p "$TARGET" -d 1 -o /nonexistent/x.json $NONE
err_is "ranktop record: cannot write /nonexistent/x.json: No such file or directory"
true &
GONE=$!
wait "$GONE"
run_rc 1 "$RANKTOP_BIN" dump -p "$GONE"
grep -q "no such process $GONE" "$WORK/err" "$WORK/out" || fail "dump of a gone pid: $(cat "$WORK/err")"
# The pattern matches no command line, not even its own: "no[m]atch" is not "nomatch".
run_rc 1 "$RANKTOP_BIN" ls --match 'no[m]atch-h1-cli' $NONE
grep -qx "ranktop ls: no ranks found: no process matched --match 'no\[m\]atch-h1-cli'" "$WORK/err" ||
    fail "ls --match nomatch: $(cat "$WORK/err")"
# Every line a command writes on stderr names ranktop.
! grep -v '^ranktop' "$WORK/err" || fail "a stderr line without 'ranktop'"

# 4. The seed recorder's flags, together.
run_rc 0 "$RANKTOP_BIN" record -p "$TARGET" -i 0.05 -d 1 -o "$WORK/seed.json" --npu-usage \
    --gpu-usage --cpu-mem-usage --all-threads --autosave-interval 1 \
    --autosave-snapshot-interval 0 $NONE
json_check "$WORK/seed.json" "any(e.get('ph') == 'C' and e['name'] == 'rss' for e in d['traceEvents'])"

# 5. -f/--format with py-spy's names: each writes its kind of file.
run_rc 0 "$RANKTOP_BIN" record -p "$TARGET" -d 1 -f chrometrace -o "$WORK/t.json" $NONE
json_check "$WORK/t.json" "any(e.get('ph') == 'B' for e in d['traceEvents'])"
run_rc 0 "$RANKTOP_BIN" record -p "$TARGET" -d 1 --format speedscope -o "$WORK/t.speedscope" $NONE
json_check "$WORK/t.speedscope" "d['\$schema'].startswith('https://www.speedscope.app/') and d['profiles']"
run_rc 0 "$RANKTOP_BIN" record -p "$TARGET" -d 1 --format=raw -o "$WORK/t.folded" $NONE
grep -Eq '^[^ ].*;.* [0-9]+$' "$WORK/t.folded" || fail "raw is not collapsed stacks: $(head -c 300 "$WORK/t.folded")"
! grep -q '^[{[]' "$WORK/t.folded" || fail "raw wrote JSON"
run_rc 0 "$RANKTOP_BIN" record -p "$TARGET" -d 1 -f flamegraph -o "$WORK/t.svg" $NONE
grep -q '^<svg ' "$WORK/t.svg" || fail "flamegraph is not an SVG: $(head -c 300 "$WORK/t.svg")"

# 6. --idle and --nonblocking are accepted (and change nothing); --nonblocking refuses --native.
run_rc 0 "$RANKTOP_BIN" record -p "$TARGET" -d 1 --idle --nonblocking -o "$WORK/idle.json" $NONE
json_check "$WORK/idle.json" "any(e.get('ph') == 'B' for e in d['traceEvents'])"
run_rc 2 "$RANKTOP_BIN" record -p "$TARGET" -d 1 --nonblocking --native -o "$WORK/nb.json" $NONE
err_is "ranktop record: --native stops each thread briefly at every sample, which --nonblocking forbids: drop one of them"
[ ! -e "$WORK/nb.json" ] || fail "a refused record wrote its output"

# 7. --gil: only samples of the thread holding the GIL. The main thread waits on an Event
# forever (never holds the GIL), a second thread spins (holds it whenever it runs).
cat > "$WORK/gil.py" << 'EOF'
import sys, threading
def spin_holder():
    x = 0
    while True:
        x += 1
def main_waiter():
    threading.Event().wait()
threading.Thread(target=spin_holder, name="spinner", daemon=True).start()
open(sys.argv[1], "w").write("ready")
main_waiter()
EOF
start_ready python3 "$WORK/gil.py"
GILP=$T
run_rc 0 "$RANKTOP_BIN" record -p "$GILP" --all-threads -d 1 -f raw -o "$WORK/all.folded" $NONE
grep -q 'main_waiter' "$WORK/all.folded" || fail "without --gil the waiting main thread is missing"
grep -q 'spin_holder' "$WORK/all.folded" || fail "without --gil the spinning thread is missing"
for py in $ALL_PYTHONS; do # the GIL holder as every supported CPython keeps it
    start_ready "$py" "$WORK/gil.py"
    run_rc 0 "$RANKTOP_BIN" record -p "$T" --all-threads -d 1 --gil -f raw -o "$WORK/gil.folded" $NONE
    grep -q 'spin_holder' "$WORK/gil.folded" || fail "$py: --gil lost the GIL holder"
    ! grep -q 'main_waiter' "$WORK/gil.folded" || fail "$py: --gil kept a thread without the GIL"
    grep -q ' 0 errors ' "$WORK/err" || fail "$py: --gil counted left-out samples as errors: $(cat "$WORK/err")"
    kill_tree "$T"
done
# --gil-stats: the GIL counters (what --gil was before), published once a second.
run_rc 0 "$RANKTOP_BIN" record -p "$GILP" -d 4 --gil-stats -o "$WORK/gs.json" $NONE
json_check "$WORK/gs.json" "any(e.get('ph') == 'C' and e['name'].startswith('GIL') for e in d['traceEvents'])"
run_rc 0 "$RANKTOP_BIN" record -p "$GILP" -d 1 -o "$WORK/nogs.json" $NONE
json_check "$WORK/nogs.json" "not any(e.get('ph') == 'C' and e['name'].startswith('GIL') for e in d['traceEvents'])"

# 8. --subprocesses: -p LAUNCHER records its descendants, and the launcher itself when it is
# Python (py-spy's meaning); a shell launcher is not a rank. Without -p it is a usage error.
cat > "$WORK/launch.py" << 'EOF'
import subprocess, sys, time
child = "import time\ndef child_work():\n    while True: time.sleep(0.2)\nchild_work()"
kids = [subprocess.Popen([sys.executable, "-S", "-c", child]) for _ in range(2)]
open(sys.argv[1], "w").write(" ".join(str(k.pid) for k in kids))
while True:
    time.sleep(0.2)
EOF
start_ready python3 "$WORK/launch.py"
LAUNCHER=$T
KIDS=$(cat "$WORK/ready")
PIDS="$PIDS $KIDS"
# lanes FILE: the pids of a Chrome trace's process lanes, sorted, on one line.
lanes() {
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(" ".join(sorted({str(e["pid"]) for e in d["traceEvents"] if e.get("ph") == "B"}, key=int)))' "$1"
}
run_rc 0 "$RANKTOP_BIN" record -p "$LAUNCHER" --subprocesses -d 2 -o "$WORK/sub.json" $NONE
lanes_want=$(echo "$LAUNCHER $KIDS" | tr ' ' '\n' | sort -n | tr '\n' ' ' | sed 's/ $//')
[ "$(lanes "$WORK/sub.json")" = "$lanes_want" ] ||
    fail "--subprocesses of a Python launcher: lanes $(lanes "$WORK/sub.json"), expected $lanes_want"
json_check "$WORK/sub.json" "sum(e.get('ph') == 'B' and e['name'].startswith('child_work') for e in d['traceEvents']) >= 2"
sh -c 'python3 -S -c "import time
while True: time.sleep(0.2)" & python3 -S -c "import time
while True: time.sleep(0.2)" & echo "$!" > "$1.tmp"; mv "$1.tmp" "$1"; wait' sh "$WORK/shready" &
SHL=$!
PIDS="$PIDS $SHL"
wait_for test -s "$WORK/shready" || fail "the shell launcher did not start"
shkids() { # two children, each already python (not a pyenv shim on its way there)
    [ "$(pgrep -P "$SHL" | wc -l)" -eq 2 ] || return 1
    for k in $(pgrep -P "$SHL"); do readlink "/proc/$k/exe" | grep -q python || return 1; done
}
wait_for shkids || fail "the shell launcher has no two Python children"
lanes_want=$(pgrep -P "$SHL" | sort -n | tr '\n' ' ' | sed 's/ $//')
run_rc 0 "$RANKTOP_BIN" record -p "$SHL" --subprocesses -d 2 -o "$WORK/shsub.json" $NONE
[ "$(lanes "$WORK/shsub.json")" = "$lanes_want" ] ||
    fail "--subprocesses of a shell: lanes $(lanes "$WORK/shsub.json"), expected $lanes_want"
run_rc 2 "$RANKTOP_BIN" record --subprocesses -d 1 -o "$WORK/none.json" $NONE
err_is "ranktop record: --subprocesses wants -p PID, the process whose descendants to record" \
    "try 'ranktop record --help'"
echo ok
