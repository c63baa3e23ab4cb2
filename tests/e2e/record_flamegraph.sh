#!/bin/sh
# `ranktop record --format flamegraph` on real CPython targets: rank 0 of tests/py/phases.py
# (phase_a/b/c over spin), tests/py/known_state.py (threads named in UCS-2 and UCS-4, functions
# 函数 and 𠀀_深, a thread parked 1000 frames deep) and tests/py/hostile_names.py (a function
# and a thread named with terminal escapes and newlines). The SVG must be valid XML (xmllint),
# read back by tests/tools/flamegraph_dump.py: "all" at the bottom, ranks above it, threads
# above them, the known functions by name, widths that add up, every 1000 frames of the deep
# thread, hostile names made safe. When Chromium starts, the file is loaded headless with a
# few lines appended that zoom on rank 0 and search for phase_b, as a click and the search
# prompt would: rank 0 must span the width, other ranks hide, the matched share must be the
# one computed here; resetting both must put every frame back as the file drew it. A
# screenshot of the zoomed search stays in meson-logs (skipped, saying why, without Chromium).
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

# Without -f, an output named .svg is a flame graph too.
# shellcheck disable=SC2086
"$RANKTOP_BIN" record -p "$PH" -r 50 -d 1 -o "$WORK/g.svg" $NONE 2> "$WORK/g.err" ||
    fail "record -o g.svg: $(cat "$WORK/g.err")"
xmllint --noout "$WORK/g.svg" || fail "xmllint rejects g.svg"
grep -q '<title>phase_[abc] (phases.py:' "$WORK/g.svg" || fail "g.svg is not phases.py's flame graph"

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
# The file's own script, then what a click on rank 0 and a search for phase_b do (z.svg, also
# the screenshot); r.svg notes that state in attributes, then undoes both as Esc does.
ACT='var r0 = frames.filter(function (f) { return f.name === "rank 0"; })[0];
zoom(r0);
search("^phase_b ");'
NOTE='var s = document.documentElement;
s.setAttribute("data-matched", byId("matched").textContent);
s.setAttribute("data-hidden", document.querySelectorAll("g.f.hide").length);
s.setAttribute("data-r0", r0.r.getAttribute("x") + " " + r0.r.getAttribute("width"));
s.setAttribute("data-unzoom", byId("unzoom").getAttribute("class"));
unzoom();
clearSearch();'
# append FILE JS...: FILE with one more script at its end.
append() {
    f=$1
    shift
    head -n -1 "$f"
    printf '<script><![CDATA[\n%s\n]]></script>\n</svg>\n' "$*"
}
tail -n 1 "$WORK/f.svg" | grep -qx '</svg>' || fail "the SVG does not end with </svg>"
append "$WORK/f.svg" "$ACT" > "$WORK/z.svg"
append "$WORK/f.svg" "$ACT" "$NOTE" > "$WORK/r.svg"
xmllint --noout "$WORK/z.svg" "$WORK/r.svg" || fail "test copies are not XML"
chrome --dump-dom "file://$WORK/r.svg" > "$WORK/r.dom" || fail "chromium --dump-dom failed"
"$PY" - "$WORK/r.dom" "$WORK/expect" "$WORK/f.svg" <<'PY' || fail "the flame graph's script in Chromium"
import re, sys
dom = open(sys.argv[1], encoding="utf-8").read()
matched, nframes = open(sys.argv[2]).read().split("\n")[:2]
orig = open(sys.argv[3], encoding="utf-8").read()
attr = lambda name: (re.search(r'<svg [^>]*\b%s="([^"]*)"' % name, dom) or [None, None])[1]
assert attr("data-ready") == nframes, (attr("data-ready"), nframes)
# Zoomed on rank 0, phase_b searched:
assert attr("data-matched").startswith(matched + " ("), (attr("data-matched"), matched)
assert int(attr("data-hidden")) > 0, attr("data-hidden")
assert attr("data-r0") == "10.00 1180.00", attr("data-r0")
assert attr("data-unzoom") == "btn", attr("data-unzoom")
# Then reset: every frame back where the file put it, colours too, no match shown.
rects = lambda s: re.findall(r'<rect x="([^"]*)" y="([^"]*)" width="([^"]*)" height="([^"]*)" '
                             r'fill="([^"]*)"', s)
now, was = rects(dom), rects(orig)
assert len(now) == len(was) == int(nframes), (len(now), len(was), nframes)
for a, b in zip(now, was):  # the script rounds as toFixed does, the file as printf does
    assert a[1:] == b[1:] and abs(float(a[0]) - float(b[0])) < 0.011, (a, b)
    assert abs(float(a[2]) - float(b[2])) < 0.011, (a, b)
assert 'class="f hide"' not in dom and 'class="f up"' not in dom
assert re.search(r'<text id="matched"[^>]*(/>|></text>)', dom), "matched share still shown"
assert re.search(r'<text id="unzoom" class="btn hide"', dom), "Reset zoom still shown"
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
