#!/usr/bin/env python3
"""Checks a Perfetto protobuf trace written by ranktop (--format perfetto).

Decodes FILE (gzip or not) with `protoc --decode=perfetto.protos.Trace` against
tests/data/perfetto/perfetto_subset.proto, parses protoc's text output and checks:
- protoc decodes it without error, and no field falls outside the declared subset;
- the first packet clears the sequence's incremental state; every packet is on sequence 1, and
  every later packet that uses interned data or the defaults says it needs incremental state;
- every iid used (event name, category, source location) was interned earlier in the file;
- track uuids are unique; process tracks have pid > 0 and a name; thread tracks have pid > 0,
  tid > 0, a name, and a pid some process track has; every event names a known track;
- slices only on thread tracks; per track, in timestamp order (file order for equal times),
  BEGIN/END balance: no END without an open slice, nothing open at the end;
- counter events only on counter tracks, each with counter_value or double_counter_value.
Options add expectations: --fn NAME (an interned event name), --pid PID (a process track),
--thread NAME (a thread track's name), --counter TEXT (a counter track whose name contains TEXT
and has a value), --instant TEXT (an instant whose name contains TEXT), --min-slices N.
Prints a one-line JSON summary; exits 1 on a failed check.
"""
import argparse
import codecs
import gzip
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.join(HERE, "..", "data", "perfetto")


def fail(msg):
    print("perfetto_check: " + msg, file=sys.stderr)
    sys.exit(1)


def unquote(v):
    # protoc prints strings C-escaped, non-ASCII bytes as octal escapes.
    raw = codecs.escape_decode(v[1:-1].encode("latin-1"))[0]
    return raw.decode("utf-8")


def value(v):
    if v.startswith('"'):
        return unquote(v)
    try:
        return int(v)
    except ValueError:
        pass
    try:
        return float(v)
    except ValueError:
        return v  # an enum name


def parse(text):
    """protoc's text format -> nested dicts of lists."""
    root = {}
    stack = [root]
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if line == "}":
            stack.pop()
            continue
        if line.endswith("{"):
            key = line[:-1].strip()
            child = {}
            stack[-1].setdefault(key, []).append(child)
            stack.append(child)
            continue
        key, sep, v = line.partition(": ")
        if not sep:
            fail("line %d: cannot parse %r" % (n, line))
        if key[0].isdigit():
            fail("line %d: field %s is outside the declared subset" % (n, key))
        stack[-1].setdefault(key, []).append(value(v))
    if len(stack) != 1:
        fail("unbalanced braces in protoc output")
    return root


def one(msg, key, default=None):
    v = msg.get(key)
    return v[0] if v else default


def decode(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if not data:
        fail("empty trace")
    r = subprocess.run(
        ["protoc", "-I", PROTO_DIR, "--decode=perfetto.protos.Trace", "perfetto_subset.proto"],
        input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        fail("protoc --decode failed: " + r.stderr.decode(errors="replace"))
    return parse(r.stdout.decode("utf-8")), len(data)


class Checker:
    def __init__(self):
        self.names, self.cats, self.locs = {}, set(), {}
        self.tracks = {}  # uuid -> descriptor
        self.events = []  # (ts, file order, track, event)
        self.instants = []  # names

    def interned(self, pkt):
        for d in pkt.get("interned_data", []):
            for c in d.get("event_categories", []):
                self.cats.add(one(c, "iid"))
            for e in d.get("event_names", []):
                iid = one(e, "iid")
                if iid in self.names and self.names[iid] != one(e, "name"):
                    fail("event name iid %d redefined" % iid)
                self.names[iid] = one(e, "name")
            for s in d.get("source_locations", []):
                self.locs[one(s, "iid")] = s

    def descriptor(self, td):
        uuid = one(td, "uuid")
        if not uuid or uuid in self.tracks:
            fail("track uuid %r missing or repeated" % uuid)
        if "process" in td:
            p = td["process"][0]
            if one(p, "pid", 0) <= 0 or not one(p, "process_name"):
                fail("process track without pid or name: %r" % p)
        if "thread" in td:
            t = td["thread"][0]
            if one(t, "pid", 0) <= 0 or one(t, "tid", 0) <= 0 or not one(t, "thread_name"):
                fail("thread track without pid, tid or name: %r" % t)
        self.tracks[uuid] = td

    def event(self, i, pkt, te):
        if one(te, "name_iid") is not None and one(te, "name_iid") not in self.names:
            fail("packet %d: name_iid %r not interned before" % (i, one(te, "name_iid")))
        for c in te.get("category_iids", []):
            if c not in self.cats:
                fail("packet %d: category iid %r not interned before" % (i, c))
        loc = one(te, "source_location_iid")
        if loc is not None and loc not in self.locs:
            fail("packet %d: source location %r not interned before" % (i, loc))
        if one(pkt, "timestamp") is None:
            fail("packet %d: track event without timestamp" % i)
        self.events.append((one(pkt, "timestamp"), i, one(te, "track_uuid"), te))

    def packet(self, i, pkt):
        if one(pkt, "trusted_packet_sequence_id") != 1:
            fail("packet %d: not on sequence 1" % i)
        flags = one(pkt, "sequence_flags", 0)
        if i == 0 and not flags & 1:
            fail("the first packet does not clear the incremental state")
        if i > 0 and flags & 1:
            fail("packet %d clears the incremental state again" % i)
        uses = "track_event" in pkt or "interned_data" in pkt or "track_descriptor" in pkt
        if i > 0 and uses and not flags & 2:
            fail("packet %d uses incremental state without SEQ_NEEDS_INCREMENTAL_STATE" % i)
        self.interned(pkt)
        for td in pkt.get("track_descriptor", []):
            self.descriptor(td)
        for te in pkt.get("track_event", []):
            self.event(i, pkt, te)

    def check_tracks(self):
        pids = {one(t["process"][0], "pid") for t in self.tracks.values() if "process" in t}
        for t in self.tracks.values():
            if "thread" in t and one(t["thread"][0], "pid") not in pids:
                fail("thread track of pid %r without a process track" % one(t["thread"][0], "pid"))
            parent = one(t, "parent_uuid")
            if parent is not None and parent not in self.tracks:
                fail("track %r has an unknown parent %r" % (one(t, "uuid"), parent))
        return pids

    def check_events(self):
        depth, counters, slices = {}, {}, 0
        for ts, i, track, te in sorted(self.events, key=lambda e: (e[0], e[1])):
            td = self.tracks.get(track)
            if td is None:
                fail("packet %d: event on unknown track %r" % (i, track))
            kind = one(te, "type")
            if kind in ("TYPE_SLICE_BEGIN", "TYPE_SLICE_END") and "thread" not in td:
                fail("packet %d: slice on a track that is not a thread's" % i)
            if kind == "TYPE_SLICE_BEGIN":
                depth[track] = depth.get(track, 0) + 1
                slices += 1
            elif kind == "TYPE_SLICE_END":
                if depth.get(track, 0) <= 0:
                    fail("packet %d: END with no open slice on track %r" % (i, track))
                depth[track] -= 1
            elif kind == "TYPE_COUNTER":
                if "counter" not in td:
                    fail("packet %d: counter value on a track without CounterDescriptor" % i)
                v = one(te, "counter_value", one(te, "double_counter_value"))
                if v is None:
                    fail("packet %d: counter event without a value" % i)
                counters.setdefault(one(td, "name"), []).append(v)
            elif kind == "TYPE_INSTANT":
                self.instants.append(one(te, "name", ""))
            else:
                fail("packet %d: event of type %r" % (i, kind))
        open_ = {t: d for t, d in depth.items() if d}
        if open_:
            fail("slices left open: %r" % open_)
        return counters, slices


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--fn", action="append", default=[])
    ap.add_argument("--pid", action="append", type=int, default=[])
    ap.add_argument("--thread", action="append", default=[])
    ap.add_argument("--counter", action="append", default=[])
    ap.add_argument("--instant", action="append", default=[])
    ap.add_argument("--min-slices", type=int, default=1)
    a = ap.parse_args()
    trace, size = decode(a.file)
    packets = trace.get("packet", [])
    if not packets:
        fail("no packets")
    c = Checker()
    for i, pkt in enumerate(packets):
        c.packet(i, pkt)
    pids = c.check_tracks()
    counters, slices = c.check_events()
    names = set(c.names.values())
    threads = {one(t["thread"][0], "thread_name") for t in c.tracks.values() if "thread" in t}
    for fn in a.fn:
        if fn not in names:
            fail("function %r not among the interned event names %r" % (fn, sorted(names)[:40]))
    for pid in a.pid:
        if pid not in pids:
            fail("no process track with pid %d (have %r)" % (pid, sorted(pids)))
    for t in a.thread:
        if t not in threads:
            fail("no thread track named %r (have %r)" % (t, sorted(threads)))
    for text in a.counter:
        if not any(text in name and vals for name, vals in counters.items()):
            fail("no counter values for %r (have %r)" % (text, sorted(counters)))
    for text in a.instant:
        if not any(text in name for name in c.instants):
            fail("no instant named with %r (have %r)" % (text, c.instants))
    if slices < a.min_slices:
        fail("%d slices, wanted at least %d" % (slices, a.min_slices))
    print(json.dumps({"bytes": size, "packets": len(packets), "slices": slices,
                      "pids": sorted(pids), "threads": sorted(threads),
                      "counters": {k: len(v) for k, v in sorted(counters.items())},
                      "names": len(names)}))


if __name__ == "__main__":
    main()
