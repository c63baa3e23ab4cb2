# -*- coding: utf-8 -*-
"""Target for tests/sampler/check_pystack.c: stacks whose frames are freed and re-allocated at
the same addresses with the same code, so that only a frame further out tells two stacks
apart (a sampler that reused its last walk below the first unchanged-looking frame would
report the old one).

Usage: python3 -E -S frame_reuse.py STEPS OUTDIR   (CPython 3.8 .. 3.13)

Step k (0 <= k < STEPS) builds one of four stacks, writes OUTDIR/truth.k (JSON: the main
thread's frames, innermost first, as [function, line]; written with tmp + rename), then waits
in block() until OUTDIR/go.k exists, and moves on:
  k % 4 == 0: caller() calls block() from its first or second call site (k // 4 even / odd);
              block's frame object is recycled between the two (3.8-3.10: the code's zombie
              frame), with the same f_back and instruction.
  k % 4 == 1, 2: recursion to depth 40 whose frame at depth 4 calls on from one of two lines,
              the other one in the next step: the recursion unwinds and rewinds to the same
              depth at the same addresses, and the frame that differs lies under tens of equal
              ones (a reader comparing its last walk a block at a time from the outer end must
              still see it).
  k % 4 == 3: a generator that blocks, resumed from one of two callers.
OUTDIR/ready is written once at the start. Waits use only C calls (os.access, time.sleep),
so no extra Python frame ever shows."""
import json
import os
import sys
import time

STEPS = int(sys.argv[1])
OUT = sys.argv[2]


def write_atomic(name, text):
    path = os.path.join(OUT, name)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def truth(k, wait_line):
    """The caller's stack, innermost first; the innermost line is where it waits."""
    frames = []
    f = sys._getframe(1)
    while f is not None:
        frames.append([f.f_code.co_name, f.f_lineno])
        f = f.f_back
    frames[0][1] = wait_line
    write_atomic("truth.%d" % k, json.dumps(frames))


def block(k):
    go = os.path.join(OUT, "go.%d" % k)
    truth(k, sys._getframe().f_lineno + 1)
    while not os.access(go, os.F_OK): time.sleep(0.002)  # noqa: E701


def caller(k):
    if (k // 4) % 2 == 0:
        block(k)
    else:
        block(k)


def rec(depth, k):
    if depth == 40:
        block(k)
    elif depth == 4 and (k + k // 4) % 2 == 0:
        rec(depth + 1, k)
    elif depth == 4:
        rec(depth + 1, k)
    else:
        rec(depth + 1, k)


def gen(k):
    while True:
        block(k)
        k = yield


def resume_a(g, k):
    g.send(k)


def resume_b(g, k):
    g.send(k)


def main():
    g = None
    write_atomic("ready", "%d\n" % os.getpid())
    for k in range(STEPS):
        if k % 4 == 0:
            caller(k)
        elif k % 4 in (1, 2):
            rec(0, k)
        else:
            if g is None:
                g = gen(k)
                next(g)
            elif (k // 4) % 2 == 0:
                resume_a(g, k)
            else:
                resume_b(g, k)


main()
