# -*- coding: utf-8 -*-
"""Target for tests/sampler/check_pystack.c: reach a known state, write its own ground truth.

Usage: python3 -S known_state.py OUTDIR   (must run unchanged on CPython 3.8 .. 3.13)

Threads, each in a state a remote reader must report exactly:
  MainThread           <module> -> main -> run_epoch -> Trainer.step -> sync (closure)
                       -> Event.wait -> Condition.wait                          (blocked)
  generator            consume -> delegating_gen -> blocking_gen (yield from) -> Event.wait
                                                                                (blocked)
  sleeper-ключ-🔥      函数 (UCS-2 name) -> 𠀀_深 (U+20000, UCS-4 name) -> time.sleep
                       (UCS-4 thread name)                                      (blocked)
  deep                 deep_root -> recurse x 1000 -> Event.wait                (blocked)
  spinner-ü            spin_ü (Latin-1 names), pure-Python busy loop, the GIL holder
                                                                                (spinning)
  reporter             writes the truth, then blocks; not part of the truth: tests must
                       ignore threads named 'reporter'.

Every blocking thread sets its own Event right before its blocking call. The reporter waits
for all of them, sleeps 0.3 s, then takes sys._current_frames() twice 0.2 s apart until the
blocked stacks are identical and each ends in its expected blocking function. It then writes
OUTDIR/truth.json (tmp + rename) and OUTDIR/ready, and the process runs until it is killed.
Frames are innermost first: function = co_qualname on 3.11+ and co_name before, file =
co_filename, line = frame.f_lineno. SIGTERM and SIGINT keep their default (fatal) action, and
the process exits by itself when its parent goes away or after MAX_LIFETIME seconds.
"""
import json
import os
import platform
import signal
import sys
import threading
import time

RECURSION_DEPTH = 1000  # frames of recurse() in the 'deep' thread
MAX_LIFETIME = 1800.0  # seconds; a forgotten target must not spin forever
SLEEPER_NAME = "sleeper-\u043a\u043b\u044e\u0447-\U0001F525"  # sleeper-ключ-🔥
SPINNER_NAME = "spinner-\u00fc"  # spinner-ü
BLOCKED_ROLES = ("main", "generator", "sleeper", "deep")

native_ids = {}  # ident -> threading.get_native_id(), recorded by each thread itself
role_of = {}  # ident -> role
arrived = {role: threading.Event() for role in BLOCKED_ROLES}


def register(role):
    ident = threading.get_ident()
    native_ids[ident] = threading.get_native_id()
    role_of[ident] = role


# --- the main thread: nested calls, a method and a closure ---------------------------------
class Trainer:
    def __init__(self):
        self.gate = threading.Event()

    def step(self):
        def sync():
            arrived["main"].set()
            self.gate.wait()

        sync()


def run_epoch(trainer):
    trainer.step()


# --- generator thread: the generator body blocks, reached through yield from --------------
def blocking_gen(gate):
    arrived["generator"].set()
    gate.wait()
    yield 1


def delegating_gen(gate):
    yield from blocking_gen(gate)


def consume():
    register("generator")
    for _ in delegating_gen(threading.Event()):
        pass


# --- sleeper thread: UCS-2 and UCS-4 (outside the BMP) function names ---------------------
def 𠀀_深():
    arrived["sleeper"].set()
    while True:
        time.sleep(3600)


def 函数():
    register("sleeper")
    𠀀_深()


# --- deep thread: exactly RECURSION_DEPTH frames of recurse() ------------------------------
def recurse(n, gate):
    if n == 0:
        arrived["deep"].set()
        gate.wait()
    else:
        recurse(n - 1, gate)


def deep_root():
    register("deep")
    recurse(RECURSION_DEPTH - 1, threading.Event())


# --- spinner thread: never blocks, holds the GIL nearly all the time -----------------------
def spin_ü():
    register("spinner")
    ppid = os.getppid()
    deadline = time.monotonic() + MAX_LIFETIME
    while True:
        x = 0
        for i in range(100000):
            x += i
        if os.getppid() != ppid or time.monotonic() > deadline:
            os._exit(0)


# --- reporter: stabilise and write the ground truth ----------------------------------------
def code_name(code):
    return getattr(code, "co_qualname", code.co_name)  # co_qualname exists from 3.11


def frames_of(frame):
    out = []
    while frame is not None:
        code = frame.f_code
        out.append({"function": code_name(code), "file": code.co_filename,
                    "line": frame.f_lineno})
        frame = frame.f_back
    return out


def capture():
    current = sys._current_frames()
    stacks = {ident: frames_of(current[ident]) for ident in list(role_of) if ident in current}
    del current
    return stacks


def at_blocking_call(role, frames):
    if not frames:
        return False
    top = frames[0]
    if role == "sleeper":
        return top["function"] == 𠀀_深.__code__.co_name
    # Event.wait -> Condition.wait; the innermost Python frame is Condition.wait.
    return top["file"] == threading.__file__ and top["function"].endswith("wait")


def stable(first, second):
    for ident, role in list(role_of.items()):
        if role == "spinner":
            continue
        if ident not in first or first.get(ident) != second.get(ident):
            return False
        if not at_blocking_call(role, second[ident]):
            return False
    return True


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def truth_of(stacks):
    names = {t.ident: t.name for t in threading.enumerate()}
    threads = []
    for ident, role in sorted(role_of.items(), key=lambda kv: kv[1]):
        threads.append({"ident": ident, "native_id": native_ids[ident], "name": names[ident],
                        "role": role, "state": "spinning" if role == "spinner" else "blocked",
                        "frames": stacks[ident]})
    return {"pid": os.getpid(), "python": platform.python_version(),
            "hexversion": sys.hexversion, "executable": sys.executable,
            "ignore_thread_names": ["reporter"], "recursion_depth": RECURSION_DEPTH,
            "threads": threads}


def fail(outdir, why):
    write_atomic(os.path.join(outdir, "error"), why + "\n")
    sys.stderr.write("known_state.py: " + why + "\n")
    os._exit(3)


def report(outdir):
    for role, ev in arrived.items():
        if not ev.wait(60):
            fail(outdir, "thread %r never reached its blocking call" % role)
    time.sleep(0.3)
    for _ in range(100):
        first = capture()
        time.sleep(0.2)
        second = capture()
        if len(role_of) == len(BLOCKED_ROLES) + 1 and stable(first, second):
            break
    else:
        fail(outdir, "blocked stacks never became stable")
    write_atomic(os.path.join(outdir, "truth.json"),
                 json.dumps(truth_of(second), ensure_ascii=False, indent=1))
    write_atomic(os.path.join(outdir, "ready"), "%d\n" % os.getpid())
    threading.Event().wait()


def start(target, name, args=()):
    t = threading.Thread(target=target, name=name, args=args, daemon=True)
    t.start()
    return t


def main():
    outdir = sys.argv[1]
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.setrecursionlimit(RECURSION_DEPTH + 4000)
    register("main")
    start(consume, "generator")
    start(函数, SLEEPER_NAME)
    threading.stack_size(64 << 20)  # 3.8-3.10 recurse on the C stack too
    start(deep_root, "deep")
    threading.stack_size(0)
    start(spin_ü, SPINNER_NAME)
    start(report, "reporter", (outdir,))
    run_epoch(Trainer())


main()
