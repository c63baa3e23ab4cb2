"""A real (tiny) data-parallel job for `ranktop watch` tests, run under torch.distributed.run
with the gloo backend. Each rank takes STEPS batches from a DataLoader and all-reduces; rank
STALL_RANK's batch 3 is slow to load: its Dataset waits in `read_sample` for as long as the
file STALL_FILE exists, so the other ranks wait in the all-reduce. The test removes the file
and the job completes. With READY_DIR set, each rank creates READY_DIR/rank.N after its first
step (tests wait for that: importing torch on a loaded machine takes long)."""
import os
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset


def read_sample(flag):
    # Stands for a slow read from storage: over once the test removes flag.
    while os.path.exists(flag):
        time.sleep(0.1)


class Samples(Dataset):
    def __init__(self, stall):
        self.stall = stall

    def __len__(self):
        return 1000

    def __getitem__(self, i):
        if self.stall and i == 3:
            read_sample(self.stall)
        return torch.ones(64)


def train_step(t):
    dist.all_reduce(t)
    return t


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    stall = os.environ.get("STALL_FILE") if rank == int(os.environ.get("STALL_RANK", "-1")) else None
    loader = DataLoader(Samples(stall), batch_size=None, num_workers=0)
    steps = int(os.environ.get("STEPS", "8"))
    for step, batch in enumerate(loader):
        if step >= steps:
            break
        train_step(batch)
        if step == 0 and os.environ.get("READY_DIR"):
            open(os.path.join(os.environ["READY_DIR"], "rank.%d" % rank), "w").close()
        time.sleep(0.05)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
