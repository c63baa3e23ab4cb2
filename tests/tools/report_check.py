#!/usr/bin/env python3
"""Checks a `ranktop watch` report directory: every file is there (report.txt, report.json,
trace.pftrace.gz, trace.json.gz), report.json validates against data/watch-report.schema.json
(with jsonschema when installed, else the small validator below, which knows the keywords the
schema uses), the Chrome trace passes trace_check.py and the Perfetto one perfetto_check.py.
Usage: report_check.py DIR... Exits 1 with a reason on the first failed check."""
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = os.path.join(HERE, "..", "..", "data", "watch-report.schema.json")
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def is_type(v, t):
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return isinstance(v, TYPES[t])


def validate(v, s, root, path="$"):
    """The keywords data/watch-report.schema.json uses; raises ValueError on a mismatch."""
    ref = s.get("$ref")
    if ref:
        node = root
        for part in ref.lstrip("#/").split("/"):
            node = node[part]
        return validate(v, node, root, path)
    if "type" in s:
        ts = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(is_type(v, t) for t in ts):
            raise ValueError("%s: %r is not %s" % (path, v, ts))
    if "const" in s and v != s["const"]:
        raise ValueError("%s: %r is not %r" % (path, v, s["const"]))
    if "enum" in s and v not in s["enum"]:
        raise ValueError("%s: %r is not one of %r" % (path, v, s["enum"]))
    if "oneOf" in s:
        ok = 0
        for sub in s["oneOf"]:
            try:
                validate(v, sub, root, path)
                ok += 1
            except ValueError:
                pass
        if ok != 1:
            raise ValueError("%s: matches %d of oneOf" % (path, ok))
    if "pattern" in s and isinstance(v, str) and not re.search(s["pattern"], v):
        raise ValueError("%s: %r does not match %s" % (path, v, s["pattern"]))
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "minimum" in s and v < s["minimum"] or "maximum" in s and v > s["maximum"]:
            raise ValueError("%s: %r out of range" % (path, v))
    if isinstance(v, dict):
        for k in s.get("required", []):
            if k not in v:
                raise ValueError("%s: no %s" % (path, k))
        props = s.get("properties", {})
        for k, x in v.items():
            if k in props:
                validate(x, props[k], root, path + "." + k)
            elif isinstance(s.get("additionalProperties"), dict):
                validate(x, s["additionalProperties"], root, path + "." + k)
    if isinstance(v, list) and "items" in s:
        for i, x in enumerate(v):
            validate(x, s["items"], root, "%s[%d]" % (path, i))


def check(d):
    for f in ("report.txt", "report.json"):
        if not os.path.isfile(os.path.join(d, f)):
            sys.exit("report_check: %s has no %s" % (d, f))
    rep = json.load(open(os.path.join(d, "report.json")))
    # Traces are left out (null) only when nothing was sampled yet.
    for k, f in (("perfetto", "trace.pftrace.gz"), ("chrome", "trace.json.gz")):
        if rep.get("trace", {}).get(k) != (f if os.path.isfile(os.path.join(d, f)) else None):
            sys.exit("report_check: %s: trace.%s does not say what is there" % (d, k))
    schema = json.load(open(SCHEMA))
    try:
        import jsonschema  # noqa: F401 (optional)
        jsonschema.validate(rep, schema)
    except ImportError:
        try:
            validate(rep, schema, schema)
        except ValueError as e:
            sys.exit("report_check: report.json: %s" % e)
    if rep["trace"]["chrome"] is None:
        print("ok (no trace: nothing sampled yet)")
        return
    with tempfile.TemporaryDirectory() as t:
        path = os.path.join(t, "trace.json")
        with gzip.open(os.path.join(d, "trace.json.gz")) as g, open(path, "wb") as o:
            o.write(g.read())
        subprocess.run([sys.executable, os.path.join(HERE, "trace_check.py"), "-q", path],
                       check=True)
    subprocess.run([sys.executable, os.path.join(HERE, "perfetto_check.py"),
                    os.path.join(d, "trace.pftrace.gz")], check=True, stdout=subprocess.DEVNULL)
    print("ok")


def main():
    for d in sys.argv[1:]:
        check(d)


main()
