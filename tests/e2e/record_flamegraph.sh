#!/bin/sh
# `ranktop record --format flamegraph` on real CPython targets: rank 0 of tests/py/phases.py
# (phase_a/b/c over spin), tests/py/known_state.py (threads named in UCS-2 and UCS-4, functions
# 函数 and 𠀀_深, a thread parked 1000 frames deep) and tests/py/hostile_names.py (a function
# and a thread named with terminal escapes and newlines). The SVG must be valid XML (xmllint),
# read back by tests/tools/flamegraph_dump.py: "all" at the bottom, ranks above it, threads
# above them, the known functions by name, widths that add up, every 1000 frames of the deep
# thread, hostile names made safe. When Chromium starts, the file is loaded headless with a
# few lines appended that zoom on rank 0 and search for phase_b: the page must show the
# zoomed layout and the matched share computed here; a screenshot stays in meson-logs.
. "$(dirname "$0")/lib.sh"
NONE="--nvidia-smi /nonexistent --npu-smi /nonexistent --tool-timeout 1"
PY=$(command -v python3)

RANK=0 "$PY" -S "$RANKTOP_SRCDIR/tests/py/phases.py" "$WORK/ph.ready" &
PIDS="$PIDS $!"
PH=$!
"$PY" -S "$RANKTOP_SRCDIR/tests/py/hostile_names.py" "$WORK/ho.ready" &
PIDS="$PIDS $!"
HO=$!
mkdir "$WORK/ks"
"$PY" -S "$RANKTOP_SRCDIR/tests/py/known_state.py" "$WORK/ks" &
PIDS="$PIDS $!"
KS=$!
wait_for test -f "$WORK/ph.ready" -a -f "$WORK/ho.ready" -a -f "$WORK/ks/ready" ||
    fail "targets did not start: $(cat "$WORK/ks/error" 2> /dev/null)"

# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$PH,$HO,$KS" --all-threads -r 50 -d 2 --format flamegraph \
    -o "$WORK/f.svg" $NONE 2> "$WORK/f.err" || fail "record: $(cat "$WORK/f.err")"
xmllint --noout "$WORK/f.svg" || fail "xmllint rejects the flame graph"
"$PY" "$RANKTOP_SRCDIR/tests/tools/flamegraph_dump.py" "$WORK/f.svg" > "$WORK/f.json" ||
    fail "flamegraph_dump.py cannot read it"
grep -q "$(printf '\033')" "$WORK/f.svg" && fail "an escape byte reached the SVG"

"$PY" - "$WORK/f.json" "$HO" "$KS" > "$WORK/expect" <<'PY' || fail "flame graph content"
import json, re, sys
d = json.load(open(sys.argv[1]))
fr = d["frames"]
assert d["script"] and not d["external"], (d["script"], d["external"])
assert fr[0]["label"] == "all" and fr[0]["depth"] == 0, fr[0]


def kids(p):
    return [f for f in fr if f["depth"] == p["depth"] + 1 and p["x"] <= f["x"] < p["x"] + p["w"]]


def subtree(p):
    return [f for f in fr if f["depth"] >= p["depth"] and p["x"] <= f["x"] < p["x"] + p["w"]]


# Every frame's callees fit on it; the ranks share out all the samples.
for f in fr:
    assert sum(k["w"] for k in kids(f)) <= f["w"], f["label"]
ranks = kids(fr[0])
assert sum(r["w"] for r in ranks) == fr[0]["w"]
names = {r["label"]: r for r in ranks}
assert set(names) == {"rank 0", "pid " + sys.argv[2], "pid " + sys.argv[3]}, sorted(names)

labels = lambda p: {f["label"] for f in subtree(p)}
r0 = labels(names["rank 0"])
for fn in ("phase_a", "phase_b", "phase_c", "spin"):
    assert any(re.match(fn + r" \(phases\.py:\d+\)$", l) for l in r0), (fn, sorted(r0))

ks = names["pid " + sys.argv[3]]
threads = {t["label"]: t for t in kids(ks)}
want = {"MainThread", "generator", "sleeper-ключ-🔥", "deep", "spinner-ü", "reporter"}
assert want <= set(threads), sorted(threads)
ksl = labels(ks)
for pat in (r"函数 \(known_state\.py:\d+\)", r"𠀀_深 \(known_state\.py:\d+\)",
            r"spin_ü \(known_state\.py:\d+\)", r"(.*\.)?sync \(known_state\.py:\d+\)"):
    assert any(re.match(pat + "$", l) for l in ksl), (pat, sorted(ksl))
deep = [f for f in subtree(threads["deep"]) if f["label"].startswith("recurse (")]
assert len(deep) == 1000, len(deep)
assert len({f["depth"] for f in deep}) == 1000

ho = names["pid " + sys.argv[2]]
hol = labels(ho)
assert any(l.startswith("evil\ufffd[2J\ufffd    forged_frame (/forged.py:1)\ufffd31m (")
           for l in hol), sorted(hol)
assert 'title\ufffd]0;pwned\ufffd\ufffd\ufffdThread 1 "fake"' in hol, sorted(hol)

# For the viewer check: the share of all samples under frames named phase_b.
hits = sorted((f["x"], f["x"] + f["w"]) for f in fr if f["label"].startswith("phase_b ("))
total, end = 0, -1
for a, b in hits:
    total += max(0, b - max(a, end))
    end = max(end, b)
print("Matched: %.2f%%" % (100.0 * total / fr[0]["w"]))
print(len(fr))
PY

CHROME=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROME" ]; then
    echo "viewer check skipped: no chromium on PATH (Debian package chromium)"
    echo ok
    exit 0
fi
chrome() {
    timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$WORK/chrome" --window-size=1220,700 "$@" 2>> "$WORK/chromium.log"
}
if ! chrome --dump-dom about:blank | grep -qi '<html'; then
    echo "viewer check skipped: Chromium cannot start: $(tail -n 3 "$WORK/chromium.log")"
    echo ok
    exit 0
fi
# The file's own script, then a zoom on rank 0 and a search, as a click and a prompt would.
sed 's|</svg>|<script><![CDATA[zoom(frames.filter(function (f) { return f.name === "rank 0"; })[0]);\
search("^phase_b ");]]></script></svg>|' "$WORK/f.svg" > "$WORK/z.svg"
chrome --dump-dom "file://$WORK/z.svg" > "$WORK/z.dom" || fail "chromium --dump-dom failed"
"$PY" - "$WORK/z.dom" "$WORK/expect" <<'PY' || fail "the flame graph's script in Chromium"
import re, sys
dom = open(sys.argv[1], encoding="utf-8").read()
matched, nframes = open(sys.argv[2]).read().split("\n")[:2]
ready = re.search(r'data-ready="(\d+)"', dom)
assert ready and ready.group(1) == nframes, (ready and ready.group(1), nframes)
got = re.search(r'<text id="matched"[^>]*>([^<]*)<', dom)
assert got and got.group(1).startswith(matched + " ("), (got and got.group(1), matched)
assert re.search(r'<text id="unzoom" class="btn"', dom), "Reset zoom not shown"
# rank 0 spans the whole width; the other ranks are hidden.
g = re.search(r'<g class="f( up)?"[^>]*><title>rank 0\n[^<]*</title><rect x="([\d.]+)" '
              r'y="[\d.]+" width="([\d.]+)"', dom)
assert g and float(g.group(2)) == 10 and float(g.group(3)) == 1180, g and g.groups()
assert len(re.findall(r'<g class="f hide"', dom)) > 0
PY
LOGS=$(cd "$(dirname "$RANKTOP_BIN")/../.." && pwd)/meson-logs
if [ -d "$LOGS" ]; then
    # The zoomed frames stand at the bottom of a tall image (the deep thread): show that part.
    sed 's|</svg>|<script><![CDATA[var s = document.documentElement, h = +s.getAttribute("height");\
s.setAttribute("viewBox", "0 " + (h - 700) + " 1200 700"); s.setAttribute("height", 700);\
]]></script></svg>|' "$WORK/z.svg" > "$LOGS/record_flamegraph.svg"
    chrome --screenshot="$LOGS/record_flamegraph.png" "file://$LOGS/record_flamegraph.svg" > /dev/null &&
        echo "screenshot: $LOGS/record_flamegraph.png"
fi
echo ok
