"""A tiny stand-in for one rank of a training job, for ranktop's quick start.

It runs a training-like loop on the main thread (forward, backward, optimizer step), a
data-loader thread that fetches batches, and a logger thread that sleeps. No torch needed.
Usage: python3 demo_job.py RANK
"""
import os
import sys
import threading
import time


def load_batch(i):
    time.sleep(0.02)
    return [i] * 64


def data_loader(queue, stop):
    i = 0
    while not stop.is_set():
        if len(queue) < 4:
            queue.append(load_batch(i))
            i += 1
        else:
            time.sleep(0.005)


class Trainer:
    def __init__(self, queue):
        self.queue = queue
        self.weights = [0.0] * 256

    def forward(self, batch):
        return sum(x * w for x, w in zip(batch * 4, self.weights))

    def backward(self, loss):
        for k in range(len(self.weights)):
            self.weights[k] += 1e-6 * loss

    def step(self):
        while not self.queue:
            time.sleep(0.001)
        batch = self.queue.pop(0)
        loss = self.forward(batch)
        self.backward(loss)


def log_metrics(stop):
    while not stop.is_set():
        time.sleep(0.5)


def main():
    queue, stop = [], threading.Event()
    threading.Thread(target=data_loader, args=(queue, stop), name="data-loader",
                     daemon=True).start()
    threading.Thread(target=log_metrics, args=(stop,), name="logger", daemon=True).start()
    trainer = Trainer(queue)
    while True:
        trainer.step()


if __name__ == "__main__":
    main()
