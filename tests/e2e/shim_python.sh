#!/bin/sh
# Python started through a shim: the dynamic loader run as a program
# (/lib64/ld-linux-x86-64.so.2 /usr/bin/python3.11 x.py) and an emulator (qemu-user) make
# /proc/PID/exe the shim, not the interpreter. The interpreter is still found among the
# mapped objects: Debian's static python3.11 and a pyenv shared build (libpython) through the
# loader, python3.11 under qemu-x86_64-static where installed. Each target records its own
# stack (sys._current_frames) once it waits; dump shows those frames, and ls lists it as a
# Python rank.
. "$(dirname "$0")/lib.sh"

LOADER=/lib64/ld-linux-x86-64.so.2
[ -x "$LOADER" ] || fail "no $LOADER"
SHARED=$(ls -d "$(pyenv root 2> /dev/null || echo "$HOME/.pyenv")"/versions/3.12.*/bin/python3.12 2> /dev/null | head -n 1)
[ -n "$SHARED" ] || fail "no pyenv 3.12 (a shared build)"
cat > "$WORK/shim.py" <<'PYEOF'
import json, os, sys, threading, time
def shim_leaf():
    while True:
        time.sleep(0.05)
def shim_outer():
    threading.Timer(0.3, record).start()
    shim_leaf()
def record():
    f = sys._current_frames()[threading.main_thread().ident]
    names = []
    while f is not None:
        names.append(f.f_code.co_name)
        f = f.f_back
    with open(sys.argv[1] + ".tmp", "w") as out:
        json.dump(names, out)
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
shim_outer()
PYEOF

r=0
check() { # LABEL SHIM... : runs shim.py under the shim as rank i
    label=$1
    shift
    rm -f "$WORK/truth"
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=8 "$@" "$WORK/shim.py" "$WORK/truth" &
    T=$!
    PIDS="$PIDS $T"
    wait_for test -s "$WORK/truth" || fail "$label: did not start"
    $RANKTOP_BIN dump --json -p "$T" > "$WORK/d.json" 2> "$WORK/d.err" ||
        fail "$label: dump failed: $(cat "$WORK/d.err") $(head -c 400 "$WORK/d.json")"
    python3 - "$WORK/d.json" "$WORK/truth" "$T" <<'PYEOF' || fail "$label: dump differs from the target's own stack"
import json, sys
d = json.load(open(sys.argv[1]))
truth = json.load(open(sys.argv[2]))
p = d["processes"][0]
assert p["error"] is None, p["error"]
main = [t for t in p["threads"] if t["tid"] == int(sys.argv[3])]
assert main, [t["tid"] for t in p["threads"]]
got = [f["function"] for f in main[0]["frames"]]
assert got == truth, (got, truth)
PYEOF
    $RANKTOP_BIN ls --json --match "$WORK/shim.py" > "$WORK/ls.json" 2> "$WORK/ls.err" ||
        fail "$label: ls failed: $(cat "$WORK/ls.err")"
    json_check "$WORK/ls.json" "[(p['rank'], p['python']) for p in d['processes'] if p['pid'] == $T] == [($r, True)]" ||
        fail "$label: ls does not list it as a Python rank"
    echo "$label: ok"
    kill "$T"
    r=$((r + 1))
}

check "ld.so + static python3.11" "$LOADER" /usr/bin/python3.11
check "ld.so + shared $SHARED" "$LOADER" "$SHARED"
if command -v qemu-x86_64-static > /dev/null 2>&1; then
    check "qemu-x86_64-static + python3.11" qemu-x86_64-static /usr/bin/python3.11
else
    echo "qemu-x86_64-static not installed: the emulator case is not run"
fi
echo ok
