"""Benchmark target for bench_slowdown: a CPU-bound main thread that records its own progress.

Usage: spin_rate.py OUT [DEPTH [UNIT]]
The main thread runs, DEPTH frames deep (default 20), fixed units of pure-Python work
(workload.work(UNIT), default 2 000 loop turns, about half a millisecond) without pause, and
after each unit notes the time (time.monotonic, CLOCK_MONOTONIC) and its own CPU time
(time.thread_time: steal and time spent waiting for a CPU are not in it) in memory. Seven
helper threads stay parked at the same depth, as in a training job: six in Event.wait, one
blocked reading stdin. At stdin's EOF the main thread writes the notes to OUT as native
doubles, every unit's end time, then every unit's CPU time, prints "done" and exits. Prints
"ready" on stdout once every thread is at depth.
"""
import sys
import threading
import time
from array import array

from workload import work

NHELPERS = 7
OUT = sys.argv[1]
DEPTH = int(sys.argv[2]) if len(sys.argv) > 2 else 20
UNIT = int(sys.argv[3]) if len(sys.argv) > 3 else 2_000
ev = threading.Event()
at_depth = threading.Barrier(NHELPERS + 1)
stop = False


def level(n, leaf):
    # The leaf adds one frame (two for Event.wait, which calls Condition.wait).
    if n <= 3:
        leaf()
    else:
        level(n - 1, leaf)


def helper():
    level(DEPTH, lambda: (at_depth.wait(), ev.wait()))


def reader():
    global stop
    at_depth.wait()
    sys.stdin.read()
    stop = True


def measure():
    ends, cpus = array("d"), array("d")
    mono, cpu = time.monotonic, time.thread_time
    at_depth.wait()
    print("ready", flush=True)
    while not stop:
        work(UNIT)
        ends.append(mono())
        cpus.append(cpu())
    with open(OUT, "wb") as f:
        ends.tofile(f)
        cpus.tofile(f)
    print("done", flush=True)


for i in range(NHELPERS):
    target = helper if i else lambda: level(DEPTH, reader)
    threading.Thread(target=target, daemon=True).start()
level(DEPTH, measure)
