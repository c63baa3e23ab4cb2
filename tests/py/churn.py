# -*- coding: utf-8 -*-
"""Target for tests/sampler/check_pystack.c: constant change for a sampler to trip over.

Usage: python3 -S churn.py OUTDIR   (CPython 3.8 .. 3.13)

Runs until killed:
  MainThread   starts short-lived threads 'churn-N' as fast as it can (at most LIVE at once);
               each recurses a few levels, maybe sleeps 1 ms, and exits, so thread states are
               created and freed and pthread_t values are recycled by glibc's stack cache.
  oscillator   recursion depth going 0 -> MAX_DEPTH -> 0 without pause (fast call/return).
  codegen      compiles and calls fresh functions through exec(), so code objects are freed
               and their addresses reused (file '<codegen>').
The GIL switch interval is 0.5 ms so the threads interleave often. OUTDIR/ready is written (tmp + rename) once all of it is running. SIGTERM and SIGINT keep
their default action; the process exits when its parent goes away or after MAX_LIFETIME.
"""
import os
import signal
import sys
import threading
import time

LIVE = 8  # churn threads alive at once
MAX_DEPTH = 300  # oscillator's deepest recursion
MAX_LIFETIME = 1800.0  # seconds


def descend(n):
    if n > 0:
        return descend(n - 1) + 1
    return 0


def oscillate():
    while True:
        for depth in range(0, MAX_DEPTH, 7):
            descend(depth)


def codegen():
    n = 0
    while True:
        n += 1
        src = ("def leaf_%d():\n    return %d\n"
               "def mid_%d():\n    return leaf_%d() + 1\n" % (n, n, n, n))
        scope = {}
        exec(compile(src, "<codegen>", "exec"), scope)
        for _ in range(20):
            scope["mid_%d" % n]()


def short_lived(depth, nap):
    descend(depth)
    if nap:
        time.sleep(0.001)


def spawn_forever(outdir):
    ppid = os.getppid()
    deadline = time.monotonic() + MAX_LIFETIME
    live = []
    n = 0
    while True:
        n += 1
        t = threading.Thread(target=short_lived, name="churn-%d" % n,
                             args=(n % 40, n % 3 == 0), daemon=True)
        t.start()
        live.append(t)
        if len(live) >= LIVE:
            live.pop(0).join()
        if n == 100:
            write_ready(outdir)
        if n % 64 == 0 and (os.getppid() != ppid or time.monotonic() > deadline):
            os._exit(0)


def write_ready(outdir):
    path = os.path.join(outdir, "ready")
    with open(path + ".tmp", "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(path + ".tmp", path)


def main():
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.setrecursionlimit(MAX_DEPTH + 1000)
    sys.setswitchinterval(0.0005)  # more GIL hand-offs: threads start and end faster
    for target, name in ((oscillate, "oscillator"), (codegen, "codegen")):
        threading.Thread(target=target, name=name, daemon=True).start()
    spawn_forever(sys.argv[1])


main()
