"""ranktop's demo job: one "rank" of a pretend data-parallel training run, pure Python.

Run one process per rank with RANK, LOCAL_RANK and WORLD_SIZE set (``ranktop demo`` does).
Every rank loops over load -> forward -> backward -> all_reduce (a file-based barrier that
makes the ranks wait for each other, like NCCL/gloo would). The misbehaviours the monitor
should reveal:
  * rank STALL_RANK (default 2) stalls for STALL_SECS in ``load_batch_slowly`` every
    STALL_EVERY steps, so the other ranks wait in ``all_reduce``;
  * a ``metrics`` thread in every rank burns CPU in Python in bursts, contending for the GIL
    with the training loop;
  * rank LEAK_RANK (default 3) leaks about 256 KiB per step in ``cache_activations``.
"""
import os
import sys
import tempfile
import threading
import time

RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
STALL_RANK = int(os.environ.get("STALL_RANK", "2"))
STALL_EVERY = int(os.environ.get("STALL_EVERY", "40"))
STALL_SECS = float(os.environ.get("STALL_SECS", "8"))
LEAK_RANK = int(os.environ.get("LEAK_RANK", "3"))
SYNC_DIR = os.environ.get("DEMO_SYNC_DIR", os.path.join(tempfile.gettempdir(), "ranktop-demo"))

_leak = []


def load_batch(step):
    time.sleep(0.02)
    return [float(step % 7)] * 512


def load_batch_slowly(step):
    time.sleep(STALL_SECS)
    return load_batch(step)


class Model:
    def __init__(self):
        self.weights = [0.001] * 512

    def forward(self, batch):
        return sum(x * w for x, w in zip(batch, self.weights))

    def backward(self, loss):
        for i in range(0, len(self.weights), 8):
            self.weights[i] -= 1e-9 * loss


def cache_activations(step):
    if RANK == LEAK_RANK:
        _leak.append(bytearray(256 << 10))


def all_reduce(step):
    """Waits until every rank has written its file for this step (a file barrier)."""
    path = os.path.join(SYNC_DIR, "step-%d-rank-%d" % (step, RANK))
    with open(path, "w"):
        pass
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline:
        done = sum(os.path.exists(os.path.join(SYNC_DIR, "step-%d-rank-%d" % (step, r)))
                   for r in range(WORLD))
        if done == WORLD:
            break
        time.sleep(0.005)
    if RANK == 0 and step >= 2:
        for r in range(WORLD):
            try:
                os.unlink(os.path.join(SYNC_DIR, "step-%d-rank-%d" % (step - 2, r)))
            except OSError:
                pass


def train_step(model, step):
    if RANK == STALL_RANK and step % STALL_EVERY == STALL_EVERY - 1:
        batch = load_batch_slowly(step)
    else:
        batch = load_batch(step)
    loss = model.forward(batch)
    model.backward(loss)
    cache_activations(step)
    all_reduce(step)


def metrics_loop():
    while True:
        end = time.monotonic() + 0.3
        x = 0
        while time.monotonic() < end:
            x += 1
        time.sleep(0.7)


def main():
    os.makedirs(SYNC_DIR, exist_ok=True)
    threading.Thread(target=metrics_loop, name="metrics", daemon=True).start()
    model = Model()
    step = 0
    while True:
        train_step(model, step)
        step += 1


if __name__ == "__main__":
    sys.exit(main())
