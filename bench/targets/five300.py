"""Benchmark target (bench_austin): five threads, the main one 300 Python frames deep. Every
thread loops at its depth calling a short leaf and sleeping 1 ms, so stacks change a little
between samples and the CPU stays free for the samplers. Prints "ready" once all run.
With the argument "still" every thread blocks for good at its depth instead (the same stacks,
nothing moving): what a sampler costs when there is nothing new to read (bench_austin's
floor)."""
import sys
import threading
import time


def leaf(n):
    return sum(range(n))


STILL = len(sys.argv) > 1 and sys.argv[1] == "still"
forever = threading.Event()


def spin(depth, at):
    if depth < at:
        return spin(depth + 1, at)
    while STILL:
        forever.wait()
    while True:
        leaf(50)
        time.sleep(0.001)


for i in range(4):
    threading.Thread(target=spin, args=(0, 20 + 5 * i), name="worker-%d" % i, daemon=True).start()
time.sleep(0.2)
print("ready", flush=True)
sys.setrecursionlimit(1000)
spin(0, 297)  # the module frame, spin x 298 and leaf: 300 frames
