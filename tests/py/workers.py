"""A rank with two DataLoader-style workers: forked children that carry the rank's environment,
each waiting in fetch_batch() while the rank waits in train_step(). Writes the workers' pids,
one per line, to argv[1] once both exist."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readyfile import write_ready  # noqa: E402


def fetch_batch():
    while True:
        time.sleep(0.05)


def train_step():
    while True:
        time.sleep(0.05)


def main():
    pids = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            fetch_batch()
        pids.append(pid)
    with open(sys.argv[1] + ".workers.tmp", "w") as f:
        f.write("".join("%d\n" % p for p in pids))
    os.rename(sys.argv[1] + ".workers.tmp", sys.argv[1] + ".workers")
    write_ready(sys.argv[1])
    train_step()


main()
