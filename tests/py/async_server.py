"""An asyncio server's task churn, for measuring record --async's task lanes (doc/performance.md).

Usage: async_server.py READYFILE. Like a request handler under load: 20 new tasks every 10 ms
(2 000 a second), each two coroutines deep (handle -> work) in a 50 ms asyncio.sleep, so
about 100 tasks are live at any moment and every task read (10 a second) sees mostly new
ones. The ready file is written once the loop runs; the process runs until killed.
"""
import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readyfile import write_ready  # noqa: E402


async def work():
    await asyncio.sleep(0.05)


async def handle():
    await work()


async def main():
    write_ready(sys.argv[1])
    while True:
        for _ in range(20):
            asyncio.ensure_future(handle())
        await asyncio.sleep(0.01)


asyncio.run(main())
