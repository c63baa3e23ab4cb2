# -*- coding: utf-8 -*-
"""Target for tests/sampler/check_pystack.c: threads that sit still, blocked with the GIL
released, while one of them at a time moves, so that a reader which reuses the last walk of
threads the GIL shows have not run (issue 12) is held against the truth at every step.

Usage: python3 -E -S gil_quiet.py STEPS OUTDIR   (CPython 3.8 .. 3.13)

Four workers each block in os.read on a pipe of their own, in park_a() or park_b(). Step k
(0 <= k < STEPS) wakes worker k % 4, which moves to its other park (three moves in four
go a level deeper first, through hop()), acknowledges and blocks again; then the main thread
writes OUTDIR/truth.k (JSON: {ident: [[function, line], ...]} for every thread, innermost
first, function as the reader names it: co_qualname from 3.11, co_name before; written with
tmp + rename) and blocks reading a byte from the FIFO OUTDIR/go, which the test writes once
it is done with step k: then the whole process is still, no thread using any CPU. OUTDIR/ready
is written once every worker is parked. Waits use only C calls, so no extra Python frame ever
shows."""
import json
import os
import sys
import threading

STEPS = int(sys.argv[1])
OUT = sys.argv[2]
NW = 4
wake = [os.pipe() for _ in range(NW)]
ack_r, ack_w = os.pipe()


def write_atomic(name, text):
    path = os.path.join(OUT, name)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def name_of(code):
    return getattr(code, "co_qualname", code.co_name)


def stack_of(f):
    frames = []
    while f is not None:
        frames.append([name_of(f.f_code), f.f_lineno])
        f = f.f_back
    return frames


def park_a(w):
    os.write(ack_w, b"a"); os.read(wake[w][0], 1)  # noqa: E702


def park_b(w):
    os.write(ack_w, b"b"); os.read(wake[w][0], 1)  # noqa: E702


def hop(w, park):
    park(w)


def worker(w):
    moves = 0
    while True:
        park = park_a if moves % 2 == 0 else park_b
        if moves % 4 == 3:
            park(w)
        else:
            hop(w, park)
        moves += 1


def main():
    threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(NW)]
    for t in threads:
        t.start()
    for _ in range(NW):
        os.read(ack_r, 1)
    os.mkfifo(os.path.join(OUT, "go"))
    go = os.open(os.path.join(OUT, "go"), os.O_RDWR)
    write_atomic("ready", "")
    for k in range(STEPS):
        os.write(wake[k % NW][1], b"x")
        os.read(ack_r, 1)
        here = sys._getframe()
        frames = sys._current_frames()
        truth = {str(t.ident): stack_of(frames[t.ident]) for t in threads}
        main_stack = stack_of(here)
        main_stack[0][1] = here.f_lineno + 3  # where it waits below
        truth[str(threading.get_ident())] = main_stack
        write_atomic("truth.%d" % k, json.dumps(truth))
        os.read(go, 1)


main()
