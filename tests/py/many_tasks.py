# -*- coding: utf-8 -*-
"""Target for tests/e2e/memory_cap.sh: one event loop with N (argv[2], default 100000) pending
asyncio tasks, each awaiting an event three coroutines deep. Writes READY_FILE (argv[1]) with
the count once all are pending; exits when its parent goes away."""
import asyncio
import os
import sys


async def leaf(ev):
    await ev.wait()


async def middle(ev):
    await leaf(ev)


async def worker(ev):
    await middle(ev)


async def main(path, n):
    ppid = os.getppid()
    ev = asyncio.Event()
    tasks = [asyncio.create_task(worker(ev), name="worker-%d" % i) for i in range(n)]
    await asyncio.sleep(0.1)  # every task has started and waits
    with open(path + ".tmp", "w") as f:
        f.write("%d\n" % len(tasks))
    os.rename(path + ".tmp", path)
    while os.getppid() == ppid:
        await asyncio.sleep(0.5)


asyncio.run(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 100000))
