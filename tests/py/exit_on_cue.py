# -*- coding: utf-8 -*-
"""Target for tests/sampler/check_exit.c: a rank that ends the way it is told to.

Usage: python3 -S exit_on_cue.py OUTDIR   (CPython 3.8 .. 3.13)

Starts a worker thread, creates OUTDIR/ready (only its existence counts), then waits a few calls deep for
OUTDIR/cue and acts on its first word: "exit N" calls sys.exit(N) (the worker thread exits
too, before the process: its exit event is a thread's, not the process's); "segv" reads
address 0 through ctypes, a real segmentation fault. Without a cue it sleeps until killed.
"""
import ctypes
import os
import sys
import threading
import time


def worker(stop):
    while not stop.is_set():
        time.sleep(0.01)


def wait_cue(outdir):
    path = os.path.join(outdir, "cue")
    while not os.path.exists(path):
        time.sleep(0.02)
    with open(path) as f:
        return f.read().split()


def act(outdir, stop):
    cue = wait_cue(outdir)
    if cue[0] == "segv":
        ctypes.string_at(0)
    stop.set()
    sys.exit(int(cue[1]))


def main():
    stop = threading.Event()
    t = threading.Thread(target=worker, args=(stop,), name="worker")
    t.start()
    open(os.path.join(sys.argv[1], "ready"), "w").close()
    try:
        act(sys.argv[1], stop)
    finally:
        stop.set()
        t.join()


main()
