# -*- coding: utf-8 -*-
"""Target for tests/sampler/check_gil.c: threads with a known GIL behaviour.

Usage: python3 -S gil_threads.py MODE N OUTDIR   (must run unchanged on CPython 3.8 .. 3.14)

MODE:
  cpu  N pure-Python CPU-bound threads (no allocation, so no garbage collection)
  io   N CPU-bound threads plus one I/O-bound thread: time.sleep(0.001) in a loop
  gc   N threads calling gc.collect() in a loop over a large cyclic object graph
  sub  N CPU-bound threads plus one thread spinning inside a subinterpreter with its own GIL
       (3.12+), which must not show up in the main interpreter's GIL
  hog  one thread holding the GIL in long C calls (big-int powers, ~40 ms each, with no
       eval-breaker check inside) plus N CPU-bound threads whose drop requests stay pending

The main thread starts the workers, waits until each of them has run, writes OUTDIR/idents
(one "ROLE IDENT TID" line per worker, IDENT = threading.get_ident(), TID its kernel thread
id, whose CPU time the test reads as the truth of how long a CPU-bound worker ran Python) and then OUTDIR/ready (tmp
+ rename), and blocks in Event.wait() without holding or asking for the GIL. The process is
killed by its parent; it exits by itself after MAX_LIFETIME seconds.
"""
import gc
import os
import sys
import threading
import time

MAX_LIFETIME = 600.0  # seconds; a forgotten target must not spin forever
GC_OBJECTS = 200000  # container objects the gc threads keep alive
HOG_EXPONENT = 300000  # 7 ** this holds the GIL for tens of milliseconds

started = []  # (role, ident), appended by each worker once it runs
started_lock = threading.Lock()


def arrive(role):
    with started_lock:
        started.append((role, threading.get_ident(), threading.get_native_id()))


def cpu_worker():
    arrive("cpu")
    n = 0
    while True:
        n += 1


def io_worker():
    arrive("io")
    while True:
        time.sleep(0.001)


def hog_worker():
    arrive("hog")
    while True:
        7 ** HOG_EXPONENT


def sub_worker():
    try:
        import _interpreters as interpreters  # 3.13+: own GIL by default
        iid = interpreters.create()
    except ImportError:
        import _xxsubinterpreters as interpreters  # 3.12
        iid = interpreters.create(isolated=True)
    arrive("sub")
    interpreters.run_string(iid, "n = 0\nwhile True:\n    n += 1\n")


def gc_worker():
    keep = []
    for i in range(GC_OBJECTS // 2):
        a = [i]
        b = [a]
        a.append(b)  # a reference cycle: gc.collect() must traverse it
        keep.append(a)
    arrive("gc")
    while True:
        gc.collect()


def write_file(outdir, name, text):
    path = os.path.join(outdir, name)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def main():
    mode, count, outdir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    targets = {"cpu": [cpu_worker], "io": [cpu_worker, io_worker], "gc": [gc_worker],
               "hog": [hog_worker, cpu_worker], "sub": [cpu_worker, sub_worker]}[mode]
    workers = []
    for target in targets:
        n = 1 if target in (io_worker, hog_worker, sub_worker) else count
        workers += [threading.Thread(target=target, daemon=True) for _ in range(n)]
    for t in workers:
        t.start()
    deadline = time.monotonic() + 60.0
    while len(started) < len(workers) and time.monotonic() < deadline:
        time.sleep(0.01)
    if len(started) < len(workers):
        write_file(outdir, "error", "workers did not start\n")
        sys.exit(1)
    write_file(outdir, "idents", "".join("%s %d %d\n" % w for w in started))
    write_file(outdir, "ready", "%d\n" % os.getpid())
    threading.Event().wait(MAX_LIFETIME)
    os._exit(0)


main()
