"""Target of tests/ui/tree_cursor.sh: one rank of a job (RANK from the environment). It waits in
train_step(step, shape) -> sync() until the file CUE appears; then ranks 0 and 2 go on to
barrier() and wait there, while rank 1 stays in sync(). `step` is 42, 41 on rank 1 (the odd
rank out). Each rank writes "RANK STEP" to TRUTH before it announces itself in READY.

argv: READY CUE TRUTH"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readyfile import write_ready  # noqa: E402

RANK = int(os.environ.get("RANK", "0"))


def sync(cue):
    while RANK == 1 or not os.path.exists(cue):
        time.sleep(0.05)


def barrier():
    while True:
        time.sleep(0.05)


def train_step(step, shape):
    with open(sys.argv[3] + ".tmp", "w") as f:
        f.write("%d %d\n" % (RANK, step))
    os.rename(sys.argv[3] + ".tmp", sys.argv[3])
    write_ready(sys.argv[1])
    sync(sys.argv[2])
    barrier()


train_step(41 if RANK == 1 else 42, (8, 16))
