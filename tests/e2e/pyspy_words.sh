#!/bin/sh
# py-spy's words: hex pids (-p 0x1a2b), dump -s (a shell's Python children), short,
# package-relative file names in dump's text (site-packages and the standard library stripped;
# --full-filenames and JSON keep the paths; record's collapsed stacks and flame graphs too, its
# traces keep the paths), record -F / --nolineno (one frame per function, no line numbers) and
# record -s -g -t.
. "$(dirname "$0")/lib.sh"

SITE="$WORK/venv/lib/python3.11/site-packages"
mkdir -p "$SITE/mypkg"
cat > "$SITE/mypkg/mod.py" <<'PY'
import time
def pkg_wait(ready):
    open(ready, "w").write("1")
    while True:
        time.sleep(0.05)
PY
cat > "$WORK/t.py" <<'PY'
import sys, threading
sys.path.insert(0, sys.argv[2])
import mypkg.mod
threading.Thread(target=mypkg.mod.pkg_wait, args=(sys.argv[1],)).start()
PY
start_ready /usr/bin/python3 "$WORK/t.py" "$SITE"
HEX=$(printf '0x%x' "$T")

run_rc 0 "$RANKTOP_BIN" dump -p "$HEX"
grep -q "^    pkg_wait (mypkg/mod.py:[0-9]*)$" "$WORK/out" || fail "no short package name: $(cat "$WORK/out")"
grep -q "^    Thread.run (threading.py:[0-9]*)$" "$WORK/out" || fail "no short stdlib name: $(cat "$WORK/out")"
grep '^    ' "$WORK/out" | grep -q "site-packages\|/usr/lib/python3" && fail "a full path in the text: $(cat "$WORK/out")"
run_rc 0 "$RANKTOP_BIN" dump -p "$HEX" --full-filenames
grep -q "^    pkg_wait ($SITE/mypkg/mod.py:[0-9]*)$" "$WORK/out" || fail "--full-filenames: $(cat "$WORK/out")"
run_rc 0 "$RANKTOP_BIN" dump -p "$HEX" --json
json_check "$WORK/out" "any(f['file'] == '$SITE/mypkg/mod.py' for t in d['processes'][0]['threads'] for f in t['frames'])"
run_rc 2 "$RANKTOP_BIN" dump -p 0xzz

# record: collapsed stacks and the flame graph name files as dump's text does, full paths with
# --full-filenames; the Chrome trace always keeps the paths.
NONE="--nvidia-smi /nonexistent --npu-smi /nonexistent"
# shellcheck disable=SC2086
rec() { run_rc 0 "$RANKTOP_BIN" record -p "$T" --all-threads -r 50 -d 1 $NONE "$@"; }
rec -o "$WORK/p.folded"
grep -q ';pkg_wait (mypkg/mod.py:[0-9]*) [0-9]*$' "$WORK/p.folded" || fail "record: no short package name: $(cat "$WORK/p.folded")"
grep -q ';Thread.run (threading.py:[0-9]*);' "$WORK/p.folded" || fail "record: no short stdlib name: $(cat "$WORK/p.folded")"
grep -q 'site-packages\|/usr/lib/python3' "$WORK/p.folded" && fail "record: a full path: $(cat "$WORK/p.folded")"
rec --full-filenames -o "$WORK/pf.folded"
grep -q ";pkg_wait ($SITE/mypkg/mod.py:[0-9]*) [0-9]*$" "$WORK/pf.folded" || fail "record --full-filenames: $(cat "$WORK/pf.folded")"
rec -o "$WORK/p.svg"
grep -q '^mypkg/mod.py:[0-9]*$' "$WORK/p.svg" || fail "flame graph: no short name in a tooltip"
grep -q 'site-packages' "$WORK/p.svg" && fail "flame graph: a full path"
rec -o "$WORK/p.json"
grep -q "pkg_wait ($SITE/mypkg/mod.py:" "$WORK/p.json" || fail "Chrome trace: not the full path"

# dump -s: a shell (not Python) and its two Python children.
cat > "$WORK/child.py" <<'PY'
import sys, time
open(sys.argv[1], "w").write("1")
def child_wait():
    while True:
        time.sleep(0.05)
child_wait()
PY
sh -c "python3 '$WORK/child.py' '$WORK/c1' & python3 '$WORK/child.py' '$WORK/c2' & wait" &
SH=$!
PIDS="$PIDS $SH"
wait_for test -s "$WORK/c2" && wait_for test -s "$WORK/c1" || fail "the children did not start"
run_rc 0 "$RANKTOP_BIN" dump -s -p "$SH" --nvidia-smi /nonexistent --npu-smi /nonexistent
[ "$(grep -c '^    child_wait (' "$WORK/out")" = 2 ] || fail "dump -s: $(cat "$WORK/out")"

# record -F / --nolineno: the lines of one function are one frame, named without a line.
cat > "$WORK/lines.py" <<'PY'
import time
def two_lines(seconds):
    end = time.time() + seconds
    while time.time() < end:
        sum(range(300))
        sum(range(300))
two_lines(3)
PY
for flag in -F --nolineno; do
    run_rc 0 "$RANKTOP_BIN" record -r 50 $flag -o "$WORK/f$flag.folded" -- python3 "$WORK/lines.py"
    grep -q ';two_lines (.*/lines.py) [0-9]*$' "$WORK/f$flag.folded" || fail "$flag: $(cat "$WORK/f$flag.folded")"
    grep -q ':[0-9]' "$WORK/f$flag.folded" && fail "$flag: a line number: $(cat "$WORK/f$flag.folded")"
    [ "$(grep -c ';two_lines ' "$WORK/f$flag.folded")" = 1 ] || fail "$flag: not one stack: $(cat "$WORK/f$flag.folded")"
done
run_rc 0 "$RANKTOP_BIN" record -r 50 -o "$WORK/l.folded" -- python3 "$WORK/lines.py"
grep -q ';two_lines (.*/lines.py:[0-9]*) [0-9]*$' "$WORK/l.folded" || fail "no line numbers by default"

# record -s -g -t (py-spy's short flags): the shell's children are recorded.
run_rc 0 "$RANKTOP_BIN" record -s -t -p "$SH" -d 2 -o "$WORK/s.folded" \
    --nvidia-smi /nonexistent --npu-smi /nonexistent
[ "$(grep -c ';child_wait (' "$WORK/s.folded")" -ge 2 ] || fail "record -s: $(cat "$WORK/s.folded")"
run_rc 0 "$RANKTOP_BIN" record -g -o "$WORK/g.folded" -- python3 "$WORK/lines.py"
grep -q ';two_lines (' "$WORK/g.folded" || fail "record -g: $(cat "$WORK/g.folded")"
echo ok
