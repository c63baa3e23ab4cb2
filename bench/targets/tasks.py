"""A target for bench_async: N asyncio tasks pending three coroutines deep (l1 > l2 > l3 >
Event.wait) on the main thread's loop. Usage: tasks.py N. Prints "ready" once every task sits
at its await, then waits until its stdin closes or it is killed."""
import asyncio
import sys


async def l3(ev):
    await ev.wait()


async def l2(ev):
    await l3(ev)


async def l1(ev):
    await l2(ev)


async def main():
    ev = asyncio.Event()
    tasks = [asyncio.ensure_future(l1(ev)) for _ in range(int(sys.argv[1]))]
    for _ in range(3):  # every task takes its first steps to the Event
        await asyncio.sleep(0)
    print("ready", flush=True)
    await ev.wait()
    return tasks


asyncio.run(main())
