# -*- coding: utf-8 -*-
"""Target for tests/sampler/check_motion.c: a main thread whose stack never stands still.

Usage: python3 -S motion.py [THREADS [DEPTH]] OUTDIR   (CPython 3.8 .. 3.13)

With THREADS > 1, THREADS - 1 more threads (each under worker_loop) run the same loop, so
every thread moves between samples; DEPTH (default 24) bounds the recursion, deep enough at
a few hundred to spread one thread's frames over several 3.11+ data-stack chunks.

The module-level loop recurses to a varying depth and returns, without pause, and every level
re-enters the interpreter from C in one of three ways: a ctypes callback called by libc's
qsort, map() with a Python function, sorted() with a key. Each re-entry is a new native eval
loop (3.11: a new _PyCFrame on the C stack; 3.12+: a new entry shim), so the top-frame pointer
and the chain move every few microseconds.

Ground truth, written before OUTDIR/ready (tmp + rename):
  OUTDIR/names   the function names that can appear in this file's frames, one a line
  OUTDIR/version the interpreter's "MAJOR.MINOR"
Every stack of the main thread has `<module>` of this file at the bottom: the loop runs at
module level and never returns; every other thread's has worker_loop over threading's
_bootstrap. The process exits when its parent goes away or after
MAX_LIFETIME; SIGTERM and SIGINT keep their default action.
"""
import ctypes
import os
import signal
import sys
import threading
import time

from readyfile import write_ready

MAX_DEPTH = 24
MAX_LIFETIME = 1800.0  # seconds

CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
libc = ctypes.CDLL(None)
qsort = libc.qsort
qsort.restype = None
PAIR = ctypes.c_int * 2


def leaf(n):
    return n + 1


def via_map(n):
    return sum(map(descend, [n - 1]))


def sort_key(n):
    return descend(n)


def via_sorted(n):
    return sorted([n - 1], key=sort_key)[0]


def on_compare(a, b):
    descend(a[0])
    return 0


COMPARE = CMP(on_compare)


def via_ctypes(n):
    pair = PAIR(n - 1, n - 1)
    qsort(pair, 2, ctypes.sizeof(ctypes.c_int), COMPARE)
    return n


def descend(n):
    if n <= 0:
        return leaf(n)
    k = n % 3
    if k == 0:
        return via_map(n)
    if k == 1:
        return via_sorted(n)
    return via_ctypes(n)


NAMES = ("leaf", "via_map", "sort_key", "via_sorted", "on_compare", "via_ctypes", "descend",
         "write_truth", "worker_loop", "<module>")


def write_truth(outdir):
    with open(os.path.join(outdir, "names"), "w") as f:
        f.write("\n".join(NAMES) + "\n")
    with open(os.path.join(outdir, "version"), "w") as f:
        f.write("%d.%d\n" % sys.version_info[:2])
    write_ready(os.path.join(outdir, "ready"))


def worker_loop(depth):
    while True:
        for d in range(1, depth):
            descend(d)


signal.signal(signal.SIGTERM, signal.SIG_DFL)
signal.signal(signal.SIGINT, signal.SIG_DFL)
sys.setrecursionlimit(10000)
OUTDIR = sys.argv[-1]
THREADS = int(sys.argv[1]) if len(sys.argv) > 2 else 1
DEPTH = int(sys.argv[2]) if len(sys.argv) > 3 else MAX_DEPTH
for _ in range(THREADS - 1):
    threading.Thread(target=worker_loop, args=(DEPTH,), daemon=True).start()
PPID = os.getppid()
DEADLINE = time.monotonic() + MAX_LIFETIME
ROUND = 0
while True:
    ROUND += 1
    for depth in range(1, DEPTH):
        descend(depth)
    if ROUND == 20:
        write_truth(OUTDIR)
    if ROUND % 64 == 0 and (os.getppid() != PPID or time.monotonic() > DEADLINE):
        os._exit(0)
