"""Tasks that come and go as fast as the loop can run them, beside one steady task, for
`ranktop dump --async` under churn (tests/e2e/dump_async.sh).

Usage: async_churn.py READYFILE [PARKED [PAUSE_MS]]. The task "steady" waits two coroutines deep (steady_outer ->
steady_inner -> Event.wait) for good; the main task creates, runs and finishes batches of
short tasks (each a two-coroutine chain that yields a few times) forever, so the task
registries change under every read. The ready file is written once steady is suspended.
With PARKED, PARKED more tasks ("parked-N") wait for good instead and nothing churns: every read
then sees the same PARKED + 2 live tasks (with steady and the main task), for
tests/e2e/record_async_churn.sh to check the live-lane cap of record --async. With PAUSE_MS the
main task sleeps that long after each batch: tasks still come and go between any two reads of
a record, but a read on a busy machine, which a preemption can stretch over many batches, has
still moments to land in.
"""
import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readyfile import write_ready  # noqa: E402


async def steady_inner(ev):
    await ev.wait()


async def steady_outer(ev):
    await steady_inner(ev)


async def hop(n):
    for _ in range(n):
        await asyncio.sleep(0)


async def short(i):
    await hop(i % 4 + 1)


async def main():
    parked = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    pause = float(sys.argv[3]) / 1000 if len(sys.argv) > 3 else 0.0
    ev = asyncio.Event()
    steady = asyncio.ensure_future(steady_outer(ev))
    steady.set_name("steady")
    held = [asyncio.ensure_future(steady_inner(ev)) for _ in range(parked)]
    for k, t in enumerate(held):
        t.set_name("parked-%d" % k)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    write_ready(sys.argv[1])
    if parked:
        await ev.wait()
    i = 0
    while True:
        batch = [asyncio.ensure_future(short(i + k)) for k in range(50)]
        i += 50
        await asyncio.gather(*batch)
        if pause:
            await asyncio.sleep(pause)


asyncio.run(main())
