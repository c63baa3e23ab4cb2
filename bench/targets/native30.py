"""Benchmark target for bench_native: the main thread about 30 native frames deep (Python
calls through C builtins: list(map(...)) at every level, so each level adds C frames), then
either blocked (idle) or, in work mode, running a fixed pure-Python workload on request like
threads8.py: a line on stdin starts it, its wall and CPU seconds are printed back.
Usage: native30.py idle|work [ITERS]. Prints "ready" at depth."""
import sys
import time

from workload import serve

MODE = sys.argv[1] if len(sys.argv) > 1 else "idle"
ITERS = int(sys.argv[2]) if len(sys.argv) > 2 else 15_000_000


def leaf():
    print("ready", flush=True)
    if MODE == "work":
        serve(ITERS)
    else:
        while True:
            time.sleep(1)


def level(n):
    if n == 0:
        leaf()
        return 0
    return list(map(level, [n - 1]))


level(6)
