"""A real (tiny) data-parallel job for end-to-end tests: run under torch.distributed.run with
the gloo backend. Each rank loops over an all-reduce; rank STALL_RANK (env, default none) sleeps
in `load_batch_slowly` every STALL_EVERY steps, so the others wait in the all-reduce. With
READY_DIR set, each rank creates READY_DIR/rank.N once its first step is done (tests wait for
that rather than for a time: importing torch on a loaded machine takes long)."""
import os
import time

import torch
import torch.distributed as dist


def load_batch_slowly(seconds):
    time.sleep(seconds)


def train_step(t):
    dist.all_reduce(t)
    return t


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    stall_rank = int(os.environ.get("STALL_RANK", "-1"))
    stall_secs = float(os.environ.get("STALL_SECS", "3600"))
    t = torch.ones(1024)
    step = 0
    while True:
        if rank == stall_rank and step >= 3:
            load_batch_slowly(stall_secs)
        train_step(t)
        t.fill_(1.0)
        if step == 0 and os.environ.get("READY_DIR"):
            open(os.path.join(os.environ["READY_DIR"], "rank.%d" % rank), "w").close()
        time.sleep(0.01)
        step += 1


if __name__ == "__main__":
    main()
