# -*- coding: utf-8 -*-
"""Target for tests/sampler/check_pystack.c: a process that exits while being sampled.

Usage: python3 -S exits_soon.py MS OUTDIR   (CPython 3.8 .. 3.13)

The main thread goes a few calls deep, writes OUTDIR/ready (tmp + rename), keeps busy in
nested calls for MS milliseconds while a daemon thread keeps spinning, then returns normally,
so the interpreter finalises with a live daemon thread and the process exits with status 0.
"""
import os
import sys
import threading
import time


def write_ready(outdir):
    path = os.path.join(outdir, "ready")
    with open(path + ".tmp", "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(path + ".tmp", path)


def leaf(deadline):
    n = 0
    while time.monotonic() < deadline:
        n += 1
    return n


def middle(deadline):
    return leaf(deadline)


def outer(ms, outdir):
    write_ready(outdir)
    return middle(time.monotonic() + ms / 1000.0)


def background():
    while True:
        sum(range(1000))


def main():
    ms = int(sys.argv[1])
    threading.Thread(target=background, name="background", daemon=True).start()
    outer(ms, sys.argv[2])


main()
