#!/bin/sh
# The exports open right in a real viewer. Two ranks of a real CPython job in a known state
# (tests/py/known_state.py: MainThread in run_epoch, a thread named spinner-ü, one named
# sleeper-ключ-🔥) are recorded with `ranktop record` as a Chrome trace, a speedscope file and
# collapsed stacks; each is loaded into speedscope (npm package, its static build served on
# 127.0.0.1 by python3 -m http.server, the profile named by #profileURL=) in headless
# Chromium, and the page must show what was recorded: a profile per rank and thread named
# with the rank, the real pid and the thread name, and run_epoch among the functions of the
# Sandwich view, named as in the source (no argument noise). The page is read from
# `chromium --dump-dom`; speedscope keeps its profile list and the Sandwich table in the DOM
# (the flame chart itself is a canvas). A screenshot of each stays in the build directory.
#
# Usage: speedscope.sh OUTDIR. Skips (77) when Chromium cannot start or speedscope is not in
# $RANKTOP_NPM_DIR (default ~/.cache/ranktop/npm, where tests/bootstrap.sh installs it).
. "$(dirname "$0")/../e2e/lib.sh"

OUT=${1:-$WORK}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
NPM_DIR=${RANKTOP_NPM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ranktop/npm}
skip() {
    echo "skipped: $*"
    exit 77
}

SS=$(ls -d "$NPM_DIR"/node_modules/speedscope/dist/release 2> /dev/null) && [ -f "$SS/index.html" ] ||
    skip "speedscope is not installed in $NPM_DIR (tests/bootstrap.sh: npm install --prefix $NPM_DIR speedscope)"
CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome) ||
    skip "no chromium on PATH (Debian package chromium)"
# chrome ARGS...: headless Chromium with a private profile, bounded in time.
chrome() {
    timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$WORK/chrome" --window-size=1400,1000 "$@" 2>> "$OUT/chromium.log"
}
chrome --dump-dom about:blank > "$WORK/blank.html" && grep -qi '<html' "$WORK/blank.html" ||
    skip "Chromium cannot start: $(tail -n 3 "$OUT/chromium.log" 2> /dev/null)"

# The job: two ranks, each in the state known_state.py describes once it has written ready.
PY=$(command -v python3)
for r in 0 1; do
    mkdir -p "$WORK/rank$r"
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 "$PY" -S "$RANKTOP_SRCDIR/tests/py/known_state.py" "$WORK/rank$r" &
    PIDS="$PIDS $!"
    eval "P$r=$!"
done
wait_for test -e "$WORK/rank0/ready" -a -e "$WORK/rank1/ready" || fail "known_state.py did not get ready"

# The server: the viewer and the profiles from one directory on a port it picks.
SITE=$WORK/site
mkdir -p "$SITE/p"
ln -s "$SS" "$SITE/speedscope"
for f in chrome speedscope collapsed; do
    case $f in
    chrome) name=trace.json ;;
    speedscope) name=profile.speedscope.json ;;
    collapsed) name=stacks.txt ;;
    esac
    "$RANKTOP_BIN" record -p "$P0,$P1" --all-threads -d 2 --format $f -o "$SITE/p/$name" \
        > "$OUT/record-$f.log" 2>&1 || fail "record --format $f failed: $(cat "$OUT/record-$f.log")"
    cp "$SITE/p/$name" "$OUT/"
done
(cd "$SITE" && exec "$PY" -u -m http.server --bind 127.0.0.1 0) > "$WORK/http.log" 2>&1 &
PIDS="$PIDS $!"
port() {
    PORT=$(sed -n 's/^Serving HTTP on 127\.0\.0\.1 port \([0-9]*\).*/\1/p' "$WORK/http.log")
    [ -n "$PORT" ]
}
wait_for port || fail "the HTTP server did not start: $(cat "$WORK/http.log")"
BASE=http://127.0.0.1:$PORT

# load FORMAT FILE VIEW: the page speedscope shows for FILE in VIEW (time-ordered, sandwich),
# as cells in $OUT/FORMAT-VIEW.txt (dom_cells.py). Loading is asynchronous: a page dumped
# before the profile arrived still has the bare title; it is dumped again with more virtual
# time, a few times.
load() {
    url="$BASE/speedscope/index.html#profileURL=$BASE/p/$2&view=$3"
    cells=$OUT/$1-$3.txt
    echo "$url" > "$WORK/$1-$3.url"
    for budget in 10000 30000 60000; do
        chrome --virtual-time-budget=$budget --dump-dom "$url" > "$OUT/$1-$3.html" || true
        "$PY" "$HERE/dom_cells.py" "$OUT/$1-$3.html" > "$cells"
        grep -q '^TITLE .* - speedscope$' "$cells" && return 0
    done
    fail "speedscope did not load $2 ($3 view): $(head -n 5 "$cells" | tr '\n' '|')"
}
# has FORMAT-VIEW ERE WHAT: a cell of that page matches ERE. The title can come before the
# rows do (a busy machine renders late): a page without the cell is dumped again with more
# virtual time before the test fails.
has() {
    grep -Eq -- "$2" "$OUT/$1.txt" && return 0
    for budget in 30000 60000; do
        chrome --virtual-time-budget=$budget --dump-dom "$(cat "$WORK/$1.url")" > "$OUT/$1.html" || true
        "$PY" "$HERE/dom_cells.py" "$OUT/$1.html" > "$OUT/$1.txt"
        grep -Eq -- "$2" "$OUT/$1.txt" && return 0
    done
    fail "$1: no $3 (/$2/) on the page; cells in $OUT/$1.txt"
}
lacks() {
    ! grep -Eq -- "$2" "$OUT/$1.txt" || fail "$1: $3 on the page: $(grep -E -- "$2" "$OUT/$1.txt" | head -n 3)"
}
shot() {
    chrome --virtual-time-budget=10000 --screenshot="$OUT/speedscope-$1.png" \
        "$BASE/speedscope/index.html#profileURL=$BASE/p/$2" > /dev/null || true
    [ -s "$OUT/speedscope-$1.png" ] || fail "no screenshot of $2"
    echo "screenshot: $OUT/speedscope-$1.png"
}
# run_epoch as a Sandwich row: speedscope's own format keeps the file apart from the name.
RUN_EPOCH='^run_epoch( \(.*/known_state\.py:[0-9]+\))?$'

# speedscope's own format: one profile per rank and thread, named "rank R (pid P, host) T".
load speedscope profile.speedscope.json time-ordered
load speedscope profile.speedscope.json sandwich
for r in 0 1; do
    eval "p=\$P$r"
    for t in MainThread spinner-ü 'sleeper-ключ-🔥' generator deep; do
        has speedscope-time-ordered "^rank $r \\(pid $p, [^)]*\\) $t\$" "profile of rank $r's $t"
    done
done
has speedscope-sandwich "$RUN_EPOCH" "run_epoch in the Sandwich view"
shot speedscope profile.speedscope.json

# The Chrome trace: speedscope makes a profile per (pid, tid) lane, named from the trace's
# process and thread names and ids. The lanes carry the real pid and tid (the main thread's
# tid is its pid, never 0), and frames are named without their args (speedscope keys a frame
# by name and args: args would show in every name).
load chrome trace.json time-ordered
load chrome trace.json sandwich
for r in 0 1; do
    eval "p=\$P$r"
    has chrome-time-ordered "^rank $r .*$p.*MainThread.*\\(tid $p\\)" "lane of rank $r's MainThread (tid $p)"
    has chrome-time-ordered "^rank $r .*$p.*spinner-ü" "lane of rank $r's spinner-ü"
done
lacks chrome-time-ordered '\(tid 0\)' "a lane with tid 0"
has chrome-sandwich "$RUN_EPOCH" "run_epoch in the Sandwich view"
lacks chrome-sandwich '\{"' "a frame name with args"
shot chrome trace.json

# Collapsed stacks: one profile; rank and thread are the root frames.
load collapsed stacks.txt sandwich
has collapsed-sandwich '^TITLE stacks\.txt - speedscope$' "title naming the file"
for root in 'rank 0' 'rank 1' MainThread 'spinner-ü' 'sleeper-ключ-🔥'; do
    has collapsed-sandwich "^$root\$" "root frame '$root'"
done
has collapsed-sandwich "$RUN_EPOCH" "run_epoch in the Sandwich view"
shot collapsed stacks.txt
echo ok
