"""A rank whose main thread spends most of its time in full collections: 200000 tracked
objects stay alive, and collect_loop calls gc.collect() again and again (each call walks all
of them). Writes its pid to argv[1] once the objects exist."""
import gc
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readyfile import write_ready  # noqa: E402

keep = [[i] for i in range(200000)]


def collect_loop():
    write_ready(sys.argv[1])
    while True:
        gc.collect()


collect_loop()
