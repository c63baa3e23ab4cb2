#!/usr/bin/env python3
"""Reads a flame graph SVG written by `ranktop record --format flamegraph` with a strict XML
parser (expat, through ElementTree) and prints what the tests assert on, as JSON:

  {"width": .., "height": .., "script": bool, "external": [hrefs], "frames": [
     {"label": .., "where": .., "count": .., "x": samples, "w": samples, "depth": 0 = "all",
      "rx": px, "rw": px, "text": shown text, "fill": "#rrggbb"}, ...]}

frames are in document order. A file that is not well-formed XML, or a frame missing a part,
exits 1 with the reason. Usage: flamegraph_dump.py FILE.svg
"""
import json
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
ROW = 16  # px per level, as in export_flamegraph.c


def frame_of(g):
    title, rect, text = g.find(SVG + "title"), g.find(SVG + "rect"), g.find(SVG + "text")
    if title is None or rect is None or text is None:
        raise ValueError("frame without title, rect or text: %r" % ET.tostring(g)[:200])
    lines = title.text.split("\n")
    return {"label": lines[0], "where": lines[1] if len(lines) > 2 else "",
            "count": lines[-1], "x": int(g.get("data-x")), "w": int(g.get("data-w")),
            "y": float(rect.get("y")), "rx": float(rect.get("x")),
            "rw": float(rect.get("width")), "text": text.text or "", "fill": rect.get("fill")}


def main():
    try:
        root = ET.parse(sys.argv[1]).getroot()
        if root.tag != SVG + "svg":
            raise ValueError("root element is %s, not svg" % root.tag)
        frames = [frame_of(g) for g in root.iter(SVG + "g") if g.get("class") == "f"]
    except (ET.ParseError, ValueError, AttributeError, TypeError) as e:
        print("%s: %s" % (sys.argv[1], e), file=sys.stderr)
        sys.exit(1)
    bottom = max((f["y"] for f in frames), default=0)
    for f in frames:
        f["depth"] = int(round((bottom - f.pop("y")) / ROW))
    external = [v for e in root.iter() for k, v in e.attrib.items()
                if k.endswith("href") or (k == "src")]
    print(json.dumps({"width": float(root.get("width")), "height": float(root.get("height")),
                      "script": root.find(SVG + "script") is not None, "external": external,
                      "frames": frames}, ensure_ascii=False))


main()
