"""Benchmark target for bench_engine: a main thread and 7 helper threads, each DEPTH frames deep.

Usage: threads8.py MODE [DEPTH [ITERS]]
  idle  every thread blocks in Event.wait
  busy  the helpers block; the main thread loops in Python at depth (one core busy)
  tick  the helpers block; the main thread wakes every 5 ms for a little Python at depth (the
        process moves between any two samples at 100 Hz, using ~2 % of a core)
  flip  the helpers block; the main thread sleeps 2 ms at a time on eight lines in turn, so
        that most pairs of consecutive samples see two stacks and the history keeps the time
        of both (bench_scale reads the sampler's period from them; ~3 % of a core)
  work  the helpers block; the main thread waits for a line on stdin, runs a fixed pure-Python
        workload of ITERS loop turns (default 15 million, about 2 s) at depth, prints its wall
        time and its CPU time in seconds, and repeats until EOF
Prints "ready" once every thread is at depth.
"""
import sys
import threading
import time

from workload import serve

NHELPERS = 7
MODE = sys.argv[1] if len(sys.argv) > 1 else "idle"
DEPTH = int(sys.argv[2]) if len(sys.argv) > 2 else 20
ITERS = int(sys.argv[3]) if len(sys.argv) > 3 else 15_000_000
ev = threading.Event()
at_depth = threading.Barrier(NHELPERS + 1)


def spin():
    while True:
        x = 0
        for i in range(10_000):
            x += i * i


def tick():
    while True:
        time.sleep(0.005)
        sum(range(200))


def flip():
    # Eight distinct lines: a sample's stack is the line the thread sleeps on.
    while True:
        time.sleep(0.002)
        time.sleep(0.002)
        time.sleep(0.002)
        time.sleep(0.002)
        time.sleep(0.002)
        time.sleep(0.002)
        time.sleep(0.002)
        time.sleep(0.002)


def level(n, leaf):
    # The leaf adds one frame (two for Event.wait, which calls Condition.wait).
    if n <= 3:
        leaf()
    else:
        level(n - 1, leaf)


def helper():
    level(DEPTH, lambda: (at_depth.wait(), ev.wait()))


def main_leaf():
    at_depth.wait()
    print("ready", flush=True)
    {"idle": ev.wait, "busy": spin, "tick": tick, "flip": flip, "work": lambda: serve(ITERS)}[MODE]()


for _ in range(NHELPERS):
    threading.Thread(target=helper, daemon=True).start()
level(DEPTH, main_leaf)
