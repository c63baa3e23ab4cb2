"""Target of tests/ui/locals_keys.sh: one rank of a job, blocked in train_step whose `step`
argument is 42, except on rank 1, which holds 41 (the odd rank out the locals pane must mark).

argv: READY"""
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readyfile import write_ready  # noqa: E402


def train_step(step, shape):
    write_ready(sys.argv[1])
    threading.Event().wait()


train_step(41 if os.environ.get("RANK") == "1" else 42, (8, 16))
