#!/usr/bin/env python3
"""Checks a Chrome trace (or, with --speedscope, a speedscope file) against the rules that
Perfetto, catapult and speedscope enforce, as read from those viewers' importers.

Chrome trace rules (strict, in the manner of speedscope's importer):
  * valid JSON (no NaN/Infinity), object form with a "traceEvents" list or array form,
    not empty; displayTimeUnit, when present, "ms" or "ns"
  * every event an object with a string "ph"; pid/tid integers in [0, 2^32)
  * B/E/X/C/i have a numeric ts; M may omit it
  * ts non-decreasing per (pid, tid) in file order for B/E/X/C/i (events without tid, like
    process-scoped counters and instants, form their own (pid, -) lane); M and the async and
    flow phases are not ordered
  * B/E strictly nested per (pid, tid): E closes the innermost open slice, carries the same
    name and no args; no E without an open B; nothing left open at the end
  * X has dur >= 0 and nests with the B/E slices and other X of its thread (an enclosing X
    must come first in the file)
  * C has a name and non-empty args whose values are all numbers
  * M process_name/thread_name carry args.name strings (thread_name needs a tid);
    *_sort_index carries an integer args.sort_index
  * i/I have a name and scope s in {t, p, g}; thread scope needs a tid

Expectations for tests (all optional, repeatable where it makes sense):
  --lanes N              exactly N process_name lanes
  --lane-name-regex RE   some lane name matches RE (re.search)
  --threads N            exactly N thread_name entries
  --slice NAME           a B or X slice with this name exists; a slice named like a ranktop
                         frame, "function (file:line)", also counts as one named "function"
  --order A,B,C          on some thread the first B (or X) of A, B and C come in this order
                         (names as for --slice)
  --counter NAME         a C event with this name exists
  --instant NAME         an instant event with this name exists

Exit status 0 when clean, 1 with every violation printed (the first 50), 2 on usage errors.
Standard library only; any Python 3.
"""

import argparse
import json
import math
import re
import sys

MAX_PRINTED = 50
U32 = 1 << 32
KNOWN_PHASES = set("BEXiIRCMbensftPONDvVaSTFp") | {"(", ")"}
ORDERED_PHASES = set("BEXCiI")  # the phases readers order per thread; async/flow are not
SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"
SPEEDSCOPE_UNITS = {"none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"}


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def names_of(name):
    """A slice's name, and for ranktop's "function (file:line)" also the function alone."""
    if name.endswith(")") and " (" in name:
        return (name, name.rsplit(" (", 1)[0])
    return (name,)


def reject_constant(name):
    raise ValueError("non-JSON constant %s" % name)


def load_json(path):
    with open(path, "rb") as f:
        raw = f.read()
    text = raw.decode("utf-8")  # JSON text is UTF-8; a bad byte is a violation
    return json.loads(text, parse_constant=reject_constant)


class Report:
    def __init__(self):
        self.violations = []

    def add(self, where, msg):
        self.violations.append("%s: %s" % (where, msg))

    def dump(self, out):
        for v in self.violations[:MAX_PRINTED]:
            print(v, file=out)
        if len(self.violations) > MAX_PRINTED:
            print("... and %d more" % (len(self.violations) - MAX_PRINTED), file=out)


class ThreadState:
    """Open slices of one (pid, tid): entries are [name, end] with end None for B."""

    def __init__(self):
        self.stack = []

    def pop_finished(self, ts):
        while self.stack and self.stack[-1][1] is not None and self.stack[-1][1] <= ts:
            self.stack.pop()


class ChromeChecker:
    def __init__(self, rep):
        self.rep = rep
        self.last_ts = {}
        self.threads = {}
        self.lane_names = {}
        self.thread_names = {}
        self.slices = set()
        self.first_b = {}  # (pid, tid) -> {name: index of first B/X}
        self.counters = set()
        self.instants = set()
        self.nevents = 0

    def check_ids(self, where, ev):
        for key in ("pid", "tid"):
            if key in ev:
                v = ev[key]
                if not is_int(v) or not 0 <= v < U32:
                    self.rep.add(where, "%s %r is not an integer in [0, 2^32)" % (key, v))
                    return False
        return True

    def check_ts(self, where, ev, ph):
        if "ts" not in ev:
            if ph != "M":
                self.rep.add(where, "%s event without ts" % ph)
            return None
        if not is_num(ev["ts"]):
            self.rep.add(where, "ts %r is not a number" % (ev["ts"],))
            return None
        if ph not in ORDERED_PHASES:
            return ev["ts"]
        key = (ev.get("pid"), ev.get("tid", "-"))
        last = self.last_ts.get(key)
        if last is not None and ev["ts"] < last:
            self.rep.add(where, "ts %r goes backwards on pid %s tid %s (previous %r)"
                         % (ev["ts"], key[0], key[1], last))
        else:
            self.last_ts[key] = ev["ts"]
        return ev["ts"]

    def note_first(self, key, name, index):
        firsts = self.first_b.setdefault(key, {})
        for n in names_of(name):
            firsts.setdefault(n, index)
            self.slices.add(n)

    def check_begin(self, where, ev, ts, index):
        name = ev.get("name")
        if not isinstance(name, str):
            self.rep.add(where, "B without a string name")
            return
        if "tid" not in ev or "pid" not in ev:
            self.rep.add(where, "B without pid and tid")
        key = (ev.get("pid"), ev.get("tid"))
        st = self.threads.setdefault(key, ThreadState())
        st.pop_finished(ts)
        st.stack.append([name, None])
        self.note_first(key, name, index)

    def check_end(self, where, ev, ts):
        key = (ev.get("pid"), ev.get("tid"))
        st = self.threads.setdefault(key, ThreadState())
        st.pop_finished(ts)
        if "args" in ev and ev["args"] not in ({}, None):
            self.rep.add(where, "E carries args %s" % json.dumps(ev["args"])[:80])
        if not st.stack:
            self.rep.add(where, "E without an open B on pid %s tid %s" % key)
            return
        top = st.stack[-1]
        if top[1] is not None:
            self.rep.add(where, "E on pid %s tid %s while X %r (ending %r) is still open"
                         % (key[0], key[1], top[0], top[1]))
            while st.stack and st.stack[-1][1] is not None:
                st.stack.pop()
            if not st.stack:
                return
            top = st.stack[-1]
        if "name" in ev and ev["name"] != top[0]:
            self.rep.add(where, "E name %r does not match the open B %r" % (ev["name"], top[0]))
        st.stack.pop()

    def check_complete(self, where, ev, ts, index):
        name = ev.get("name")
        dur = ev.get("dur")
        if not isinstance(name, str):
            self.rep.add(where, "X without a string name")
        if not is_num(dur) or dur < 0:
            self.rep.add(where, "X dur %r is not a number >= 0" % (dur,))
            return
        key = (ev.get("pid"), ev.get("tid"))
        st = self.threads.setdefault(key, ThreadState())
        st.pop_finished(ts)
        end = ts + dur
        if st.stack and st.stack[-1][1] is not None and end > st.stack[-1][1]:
            self.rep.add(where, "X %r [%r, %r] overlaps X %r ending %r"
                         % (name, ts, end, st.stack[-1][0], st.stack[-1][1]))
        st.stack.append([name, end])
        if isinstance(name, str):
            self.note_first(key, name, index)

    def check_counter(self, where, ev):
        args = ev.get("args")
        if not isinstance(ev.get("name"), str):
            self.rep.add(where, "C without a string name")
        if "pid" not in ev:
            self.rep.add(where, "C without pid")
        if not isinstance(args, dict) or not args:
            self.rep.add(where, "C args must be a non-empty object")
            return
        for k, v in args.items():
            if not is_num(v):
                self.rep.add(where, "C arg %r = %r is not a number" % (k, v))
        if isinstance(ev.get("name"), str):
            self.counters.add(ev["name"])

    def check_meta(self, where, ev):
        name = ev.get("name")
        args = ev.get("args")
        if name in ("process_name", "thread_name"):
            if not isinstance(args, dict) or not isinstance(args.get("name"), str):
                self.rep.add(where, "%s without a string args.name" % name)
                return
            if "pid" not in ev:
                self.rep.add(where, "%s without pid" % name)
            if name == "thread_name":
                if "tid" not in ev:
                    self.rep.add(where, "thread_name without tid")
                self.thread_names[(ev.get("pid"), ev.get("tid"))] = args["name"]
            else:
                self.lane_names[ev.get("pid")] = args["name"]
        elif name in ("process_sort_index", "thread_sort_index"):
            if not isinstance(args, dict) or not is_int(args.get("sort_index")):
                self.rep.add(where, "%s without an integer args.sort_index" % name)
        elif not isinstance(name, str):
            self.rep.add(where, "M without a string name")

    def check_instant(self, where, ev):
        scope = ev.get("s", "t")
        if not isinstance(ev.get("name"), str):
            self.rep.add(where, "instant without a string name")
        else:
            self.instants.add(ev["name"])
        if scope not in ("t", "p", "g"):
            self.rep.add(where, "instant scope %r is not t, p or g" % (scope,))
        elif scope == "t" and "tid" not in ev:
            self.rep.add(where, "thread-scoped instant without tid")
        elif scope == "p" and "pid" not in ev:
            self.rep.add(where, "process-scoped instant without pid")

    def event(self, index, ev):
        where = "event %d" % index
        if not isinstance(ev, dict):
            self.rep.add(where, "not an object")
            return
        ph = ev.get("ph")
        if not isinstance(ph, str) or ph not in KNOWN_PHASES:
            self.rep.add(where, "unknown phase %r" % (ph,))
            return
        self.nevents += 1
        if not self.check_ids(where, ev):
            return
        ts = self.check_ts(where, ev, ph)
        if ts is None and ph in ORDERED_PHASES:
            return
        if ph == "B":
            self.check_begin(where, ev, ts, index)
        elif ph == "E":
            self.check_end(where, ev, ts)
        elif ph == "X":
            self.check_complete(where, ev, ts, index)
        elif ph == "C":
            self.check_counter(where, ev)
        elif ph == "M":
            self.check_meta(where, ev)
        elif ph in ("i", "I"):
            self.check_instant(where, ev)

    def finish(self, allow_open):
        for key, st in sorted(self.threads.items(), key=lambda kv: repr(kv[0])):
            still = [s[0] for s in st.stack if s[1] is None]
            if still and not allow_open:
                self.rep.add("end", "pid %s tid %s: %d slice(s) never closed, innermost %r"
                             % (key[0], key[1], len(still), still[-1]))


def check_chrome(doc, args, rep):
    if isinstance(doc, dict):
        events = doc.get("traceEvents")
        if not isinstance(events, list):
            rep.add("file", "object form without a traceEvents list")
            return None
        unit = doc.get("displayTimeUnit")
        if unit is not None and unit not in ("ms", "ns"):
            rep.add("file", "displayTimeUnit %r is not \"ms\" or \"ns\"" % (unit,))
    elif isinstance(doc, list):
        events = doc
    else:
        rep.add("file", "neither an object nor an array")
        return None
    if not events:
        rep.add("file", "empty event list (speedscope rejects it)")
    cc = ChromeChecker(rep)
    for i, ev in enumerate(events):
        cc.event(i, ev)
    cc.finish(args.allow_open)
    return cc


def check_order(cc, names):
    for firsts in cc.first_b.values():
        idx = [firsts.get(n) for n in names]
        if all(i is not None for i in idx) and all(a < b for a, b in zip(idx, idx[1:])):
            return True
    return False


def check_expectations(cc, args, rep):
    if args.lanes is not None and len(cc.lane_names) != args.lanes:
        rep.add("expect", "%d lanes, expected %d: %s"
                % (len(cc.lane_names), args.lanes, sorted(cc.lane_names.values())))
    for rx in args.lane_name_regex:
        if not any(re.search(rx, n) for n in cc.lane_names.values()):
            rep.add("expect", "no lane name matches %r: %s" % (rx, sorted(cc.lane_names.values())))
    if args.threads is not None and len(cc.thread_names) != args.threads:
        rep.add("expect", "%d thread names, expected %d" % (len(cc.thread_names), args.threads))
    for name in args.slice:
        if name not in cc.slices:
            rep.add("expect", "no slice named %r" % name)
    for spec in args.order:
        names = [n for n in spec.split(",") if n]
        if not check_order(cc, names):
            rep.add("expect", "no thread begins %s in this order" % " -> ".join(names))
    for name in args.counter:
        if name not in cc.counters:
            rep.add("expect", "no counter named %r" % name)
    for name in args.instant:
        if name not in cc.instants:
            rep.add("expect", "no instant named %r" % name)


def check_ss_frames(doc, rep):
    shared = doc.get("shared")
    frames = shared.get("frames") if isinstance(shared, dict) else None
    if not isinstance(frames, list):
        rep.add("file", "shared.frames is not a list")
        return 0
    for i, fr in enumerate(frames):
        where = "frame %d" % i
        if not isinstance(fr, dict) or not isinstance(fr.get("name"), str):
            rep.add(where, "frame without a string name")
            continue
        if "file" in fr and not isinstance(fr["file"], str):
            rep.add(where, "file is not a string")
        for k in ("line", "col"):
            if k in fr and not is_num(fr[k]):
                rep.add(where, "%s is not a number" % k)
    return len(frames)


def check_ss_sampled(where, p, nframes, rep, exact):
    samples, weights = p.get("samples"), p.get("weights")
    if not isinstance(samples, list) or not isinstance(weights, list):
        rep.add(where, "samples and weights must be lists")
        return
    if len(samples) != len(weights):
        rep.add(where, "%d samples but %d weights" % (len(samples), len(weights)))
    for i, s in enumerate(samples):
        if not isinstance(s, list) or not all(is_int(x) and 0 <= x < nframes for x in s):
            rep.add(where, "sample %d is not a list of frame indexes < %d" % (i, nframes))
    total = 0.0
    for i, w in enumerate(weights):
        if not is_num(w) or w < 0:
            rep.add(where, "weight %d = %r is not a number >= 0" % (i, w))
        else:
            total += w
    span = p["endValue"] - p["startValue"]
    if exact and abs(total - span) > 1e-6 * max(1.0, abs(span)):
        rep.add(where, "weights add up to %r, endValue - startValue is %r" % (total, span))


def check_ss_evented(where, p, nframes, rep):
    events = p.get("events")
    if not isinstance(events, list):
        rep.add(where, "events is not a list")
        return
    stack, last = [], p["startValue"]
    for i, ev in enumerate(events):
        w = "%s event %d" % (where, i)
        if not isinstance(ev, dict) or ev.get("type") not in ("O", "C"):
            rep.add(w, "type must be O or C")
            continue
        fr, at = ev.get("frame"), ev.get("at")
        if not is_int(fr) or not 0 <= fr < nframes or not is_num(at):
            rep.add(w, "frame must index shared.frames and at be a number")
            continue
        if at < last:
            rep.add(w, "at %r goes backwards (previous %r)" % (at, last))
        last = max(last, at)
        if ev["type"] == "O":
            stack.append(fr)
        elif not stack or stack[-1] != fr:
            rep.add(w, "close of frame %d does not match the open frame %r"
                    % (fr, stack[-1] if stack else None))
        else:
            stack.pop()
    if stack:
        rep.add(where, "%d frame(s) never closed" % len(stack))


def check_speedscope(doc, args, rep):
    if not isinstance(doc, dict):
        rep.add("file", "not an object")
        return
    if doc.get("$schema") != SPEEDSCOPE_SCHEMA:
        rep.add("file", "$schema is %r" % (doc.get("$schema"),))
    nframes = check_ss_frames(doc, rep)
    profiles = doc.get("profiles")
    if not isinstance(profiles, list) or not profiles:
        rep.add("file", "profiles must be a non-empty list")
        return
    for i, p in enumerate(profiles):
        where = "profile %d" % i
        if not isinstance(p, dict):
            rep.add(where, "not an object")
            continue
        if not isinstance(p.get("name"), str):
            rep.add(where, "name is not a string")
        if p.get("unit") not in SPEEDSCOPE_UNITS:
            rep.add(where, "unit %r is not one of %s" % (p.get("unit"), sorted(SPEEDSCOPE_UNITS)))
        if not is_num(p.get("startValue")) or not is_num(p.get("endValue")):
            rep.add(where, "startValue and endValue must be numbers")
            continue
        if p["endValue"] < p["startValue"]:
            rep.add(where, "endValue %r < startValue %r" % (p["endValue"], p["startValue"]))
        if p.get("type") == "sampled":
            check_ss_sampled(where, p, nframes, rep, args.exact_weights)
        elif p.get("type") == "evented":
            check_ss_evented(where, p, nframes, rep)
        else:
            rep.add(where, "type %r is not sampled or evented" % (p.get("type"),))
    if args.profiles is not None and len(profiles) != args.profiles:
        rep.add("expect", "%d profiles, expected %d" % (len(profiles), args.profiles))


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--speedscope", action="store_true",
                    help="check a speedscope file-format JSON instead of a Chrome trace")
    ap.add_argument("--allow-open", action="store_true",
                    help="accept B slices still open at the end (readers close them)")
    ap.add_argument("--lanes", type=int)
    ap.add_argument("--lane-name-regex", action="append", default=[])
    ap.add_argument("--threads", type=int)
    ap.add_argument("--slice", action="append", default=[])
    ap.add_argument("--order", action="append", default=[])
    ap.add_argument("--counter", action="append", default=[])
    ap.add_argument("--instant", action="append", default=[])
    ap.add_argument("--profiles", type=int, help="speedscope: exactly N profiles")
    ap.add_argument("--exact-weights", action="store_true",
                    help="speedscope: weights of a sampled profile add up to its span")
    ap.add_argument("-q", "--quiet", action="store_true")
    return ap.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    rep = Report()
    try:
        doc = load_json(args.file)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        print("%s: not valid JSON: %s" % (args.file, e))
        return 1
    if args.speedscope:
        check_speedscope(doc, args, rep)
        summary = "speedscope file"
    else:
        cc = check_chrome(doc, args, rep)
        if cc is not None:
            check_expectations(cc, args, rep)
        summary = "%d events, %d lanes" % (cc.nevents if cc else 0,
                                            len(cc.lane_names) if cc else 0)
    if rep.violations:
        print("%s: %d violation(s)" % (args.file, len(rep.violations)))
        rep.dump(sys.stdout)
        return 1
    if not args.quiet:
        print("%s: ok (%s)" % (args.file, summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
