"""Benchmark target for bench_native: the main thread about 30 native frames deep (Python
calls through C builtins: list(map(...)) at every level, so each level adds C frames), then
either blocked (idle) or, in work mode, running a fixed pure-Python workload on request like
threads8.py: a line on stdin starts it, its wall and CPU seconds are printed back.
Usage: native30.py idle|work [ITERS]. Prints "ready" at depth."""
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "idle"
ITERS = int(sys.argv[2]) if len(sys.argv) > 2 else 15_000_000


def work():
    acc, seen = 0, {}
    for i in range(ITERS):
        acc = (acc * 31 + i) % 1_000_003
        seen[acc & 1023] = i
    return acc + len(seen)


def serve():
    for _ in sys.stdin:
        t0, c0 = time.perf_counter(), time.thread_time()
        work()
        print(f"{time.perf_counter() - t0:.6f} {time.thread_time() - c0:.6f}", flush=True)


def leaf():
    print("ready", flush=True)
    if MODE == "work":
        serve()
    else:
        while True:
            time.sleep(1)


def level(n):
    if n == 0:
        leaf()
        return 0
    return list(map(level, [n - 1]))


level(6)
