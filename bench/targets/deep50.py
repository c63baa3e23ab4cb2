"""Benchmark target: the main thread blocks 50 Python frames deep; prints "ready"."""
import sys
import threading

ev = threading.Event()


def level(n):
    if n <= 3:  # Event.wait and Condition.wait add the last frames
        print("ready", flush=True)
        ev.wait()
    else:
        level(n - 1)


level(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
