"""Target for tests/e2e/dump_core.sh: threads blocked in known places, whose stacks the process
writes itself before a core of it is taken (gcore) or made (a crash).

Usage: python3 -S core_target.py OUTDIR MODE   (runs unchanged on CPython 3.8 .. 3.13)

MODE block: the reporter thread writes OUTDIR/truth.json, then OUTDIR/ready, then blocks.
MODE segv / abort: the reporter writes the truth with its own stack, then crashes on that same
line (a read of kernel space through ctypes, or os.abort(): C calls, no Python frame above it).

truth.json: {"threads": [{"name", "tid", "frames": [{"function", "file", "line"}]}]}, frames
innermost first, function = co_qualname on 3.11+ and co_name before (what ranktop shows). The
threads: MainThread (main -> park -> Event.wait -> Condition.wait), "waiter" (waiter_outer ->
waiter_inner -> ...wait), "deep" (Deep.recurse x 50 -> ...wait). The reporter is in the truth
only in the crash modes. The process ends by itself after MAX_LIFETIME seconds.
"""
import json
import os
import sys
import threading
import time

MAX_LIFETIME = 600.0
PARK = threading.Event()  # never set
# A read here faults in every user process (it is kernel space); address 0 may be readable
# where something maps page 0.
BAD_ADDRESS = 0xFFFFFFFFFFFFF000


def frames_of(f):
    out = []
    while f is not None:
        code = f.f_code
        name = getattr(code, "co_qualname", code.co_name)
        out.append({"function": name, "file": code.co_filename, "line": f.f_lineno})
        f = f.f_back
    return out


def waiter_inner():
    PARK.wait()


def waiter_outer():
    waiter_inner()


class Deep:
    def recurse(self, n):
        if n == 0:
            PARK.wait()
            return
        self.recurse(n - 1)


def publish(outdir, name, data):
    with open(os.path.join(outdir, name + ".tmp"), "w") as f:
        f.write(data)
    os.rename(os.path.join(outdir, name + ".tmp"), os.path.join(outdir, name))


def parked(frames):
    """Whether a thread's stack ends in Condition.wait, the last Python frame of Event.wait."""
    return bool(frames) and frames[0]["function"] in ("wait", "Condition.wait")


def snapshot(skip):
    names = {t.ident: t for t in threading.enumerate()}
    out = {}
    for ident, f in sys._current_frames().items():
        if ident == skip or ident not in names:
            continue
        t = names[ident]
        out[ident] = {"name": t.name, "tid": t.native_id, "frames": frames_of(f)}
    return out


def crash(kind, outdir, truth):
    import ctypes

    me = threading.current_thread()
    if kind == "segv":
        truth.append({"name": me.name, "tid": me.native_id, "frames": frames_of(sys._getframe())}); publish(outdir, "truth.json", json.dumps({"threads": truth})); ctypes.c_char.from_address(BAD_ADDRESS).value  # noqa: E702
    else:
        truth.append({"name": me.name, "tid": me.native_id, "frames": frames_of(sys._getframe())}); publish(outdir, "truth.json", json.dumps({"threads": truth})); os.abort()  # noqa: E702


def report(outdir, mode):
    me = threading.get_ident()
    while True:  # until every other thread is parked, and two looks agree
        a = snapshot(me)
        time.sleep(0.2)
        b = snapshot(me)
        if a == b and len(a) == 3 and all(parked(t["frames"]) for t in a.values()):
            break
    truth = list(a.values())
    if mode != "block":
        crash(mode, outdir, truth)
    publish(outdir, "truth.json", json.dumps({"threads": truth}))
    publish(outdir, "ready", "%d\n" % os.getpid())
    PARK.wait()


def park():
    PARK.wait(MAX_LIFETIME)


def main():
    outdir, mode = sys.argv[1], sys.argv[2]
    threading.Thread(target=waiter_outer, name="waiter", daemon=True).start()
    threading.Thread(target=Deep().recurse, args=(50,), name="deep", daemon=True).start()
    threading.Thread(target=report, args=(outdir, mode), name="reporter", daemon=True).start()
    park()


main()
