"""The fixed pure-Python workload the benchmark targets run on request (bench_engine,
bench_native): a line on stdin starts it, its wall and CPU seconds are printed back."""
import sys
import time


def work(iters):
    """Interpreter work: integer arithmetic and a dict store per turn."""
    acc, seen = 0, {}
    for i in range(iters):
        acc = (acc * 31 + i) % 1_000_003
        seen[acc & 1023] = i
    return acc + len(seen)


def serve(iters):
    for _ in sys.stdin:
        t0, c0 = time.perf_counter(), time.thread_time()
        work(iters)
        print(f"{time.perf_counter() - t0:.6f} {time.thread_time() - c0:.6f}", flush=True)
