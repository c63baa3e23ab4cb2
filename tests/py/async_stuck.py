"""An asyncio job stuck in an await, for the hang verdict (tests/ui/async_tasks.sh).

Usage: async_stuck.py READYFILE. The main thread's loop runs a task "handler" awaiting
a Queue that never gets an item, three coroutines deep (serve > fetch > Queue.get), and a task
"waiter" awaiting handler (a shallower chain); another thread runs its own loop whose task
is deeper still (four coroutines), which must not count for the main thread. Once every task
sits at its await, writes the ready file; then nothing moves.
"""
import asyncio
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readyfile import write_ready  # noqa: E402

READY = sys.argv[1]
SIDE_READY = threading.Event()


async def fetch(q):
    return await q.get()


async def serve(q):
    await fetch(q)


async def d1(ev):
    await ev.wait()


async def d2(ev):
    await d1(ev)


async def d3(ev):
    await d2(ev)


async def side():
    ev = asyncio.Event()
    t = asyncio.ensure_future(d3(ev))
    t.set_name("side-deep")
    asyncio.get_running_loop().call_later(0.2, SIDE_READY.set)
    await t


async def main():
    loop = asyncio.get_running_loop()
    threading.Thread(target=lambda: asyncio.run(side()), name="side-loop", daemon=True).start()
    await loop.run_in_executor(None, SIDE_READY.wait)
    handler = asyncio.ensure_future(serve(asyncio.Queue()))
    handler.set_name("handler")
    waiter = asyncio.ensure_future(asyncio.wait([handler]))
    waiter.set_name("waiter")
    await asyncio.sleep(0.2)
    loop.call_soon(write_ready, READY)
    await loop.create_future()


asyncio.run(main())
