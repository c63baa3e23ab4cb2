"""asyncio tasks for `ranktop dump --async` to read (tests/e2e/dump_async.sh).

Usage: async_tasks.py READYFILE [c|pytask|pure]. The main thread's loop runs nested tasks (outer-ü awaits the
task inner, whose coroutine sits two coroutines deep in an Event.wait), a gather() of two
tasks, a task awaiting a Queue forever, a task awaiting a to_thread call (run_in_executor on
3.8), a task with a non-ASCII name; a second thread runs its own loop, whose task side-blocker
blocks that thread synchronously (it stays the loop's current task: running) while awaited by
side-main; a loop that never runs holds the task idle-task (its thread unknown); two finished
tasks, one done and one cancelled, are kept alive; on 3.12+ a third thread's loop creates the
eager task eager-blocker, which blocks that thread in its first step (so it is only in the
eager-task set); a subinterpreter exists where the build offers one. When every task sits at its final await, a loop callback (no task is running then)
writes the ground truth to READYFILE.json: per loop its thread, and per task (asyncio.all_tasks)
the name, state, awaiting tasks (via _fut_waiter, and a gather's _children) and the coroutine
chain followed through cr_await from get_coro(), innermost first. Then the ready file, and the
process waits forever.

The mode says which Task class makes every task: c (the default: _asyncio.Task), pytask (each
loop's task factory makes asyncio.tasks._PyTask, the pure-Python Task, beside C futures), pure
(the _asyncio module blocked before asyncio is imported: Task, Future and every registry are
pure Python, as on a build without _asyncio). The ground truth says per task whether it is a
_PyTask.
"""
import sys

MODE = sys.argv[2] if len(sys.argv) > 2 else "c"
if MODE == "pure":
    sys.modules["_asyncio"] = None  # asyncio falls back to its pure-Python classes

import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import threading  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readyfile import write_ready  # noqa: E402

READY = sys.argv[1]
NEVER = threading.Event()  # never set: threads block on it for good


def function_name(code):
    return getattr(code, "co_qualname", code.co_name)


def chain(coro):
    """The await chain from coro, innermost first, as CPython's cr_await exposes it."""
    frames = []
    c = coro
    while c is not None and type(c).__name__ in ("coroutine", "generator"):
        f = c.cr_frame if type(c).__name__ == "coroutine" else c.gi_frame
        if f is None:
            break
        frames.append({"function": function_name(f.f_code), "file": f.f_code.co_filename,
                       "line": f.f_lineno})
        c = c.cr_await if type(c).__name__ == "coroutine" else c.gi_yieldfrom
    return frames[::-1]


# A pure-Python future is awaited through its __await__, a generator that yields the future.
FUT_AWAIT = asyncio.futures._PyFuture.__await__.__code__


def innermost(coro):
    """What the innermost coroutine of the chain awaits (None while it runs)."""
    c = coro
    while type(c).__name__ in ("coroutine", "generator"):
        nxt = c.cr_await if type(c).__name__ == "coroutine" else c.gi_yieldfrom
        if nxt is None:
            if (type(c).__name__ == "generator" and c.gi_code is FUT_AWAIT
                    and c.gi_frame is not None and c.gi_frame.f_lasti >= 0):
                return c.gi_frame.f_locals["self"]
            return None
        c = nxt
    return c


def settled(tasks):
    """Every task is suspended awaiting a future (its final place)."""
    return all(innermost(t.get_coro()) is not None for t in tasks)


def awaited_by(tasks):
    by = {t: [] for t in tasks}
    for t in tasks:
        w = t._fut_waiter
        for child in [w] + list(getattr(w, "_children", None) or []):
            if child in by:
                by[child].append(t.get_name())
    return by


def loop_truth(loop, ident, native):
    tasks = list(asyncio.all_tasks(loop))
    # 3.14+ keeps the current task in the thread state (asyncio.tasks._current_tasks is the
    # pure-Python registry, unused by the C loop); current_task(loop) finds it in any thread.
    cur = (asyncio.current_task(loop) if sys.version_info >= (3, 14)
           else asyncio.tasks._current_tasks.get(loop))
    by = awaited_by(tasks)
    out = []
    for t in tasks:
        state = ("cancelled" if t.cancelled() else "done" if t.done()
                 else "running" if t is cur else "pending")
        out.append({"name": t.get_name(), "state": state, "awaited_by": sorted(by[t]),
                    "frames": chain(t.get_coro()),
                    "py": isinstance(t, asyncio.tasks._PyTask)})
    return {"ident": ident, "tid": native, "tasks": out}


def py_task_factory(loop, coro, **kw):
    return asyncio.tasks._PyTask(coro, loop=loop, **kw)


def new_loop():
    loop = asyncio.new_event_loop()
    if MODE == "pytask":
        loop.set_task_factory(py_task_factory)
    return loop


def run(coro):
    """asyncio.run, on a loop of new_loop()."""
    loop = new_loop()
    asyncio.set_event_loop(loop)
    return loop.run_until_complete(coro)


# --- the second thread's loop ---------------------------------------------------------------
SIDE = {}
SIDE_READY = threading.Event()


async def side_wait(ev):
    await ev.wait()


def block_here():
    SIDE_READY.set()
    NEVER.wait()


async def side_blocker():
    me = asyncio.current_task()
    while not settled([t for t in asyncio.all_tasks() if t is not me]):
        await asyncio.sleep(0)
    block_here()


async def side_main():
    asyncio.current_task().set_name("side-main")
    ev = asyncio.Event()
    asyncio.ensure_future(side_wait(ev)).set_name("side-waiter")
    blocker = asyncio.ensure_future(side_blocker())
    blocker.set_name("side-blocker")
    SIDE["loop"] = asyncio.get_running_loop()
    SIDE["ident"] = threading.get_ident()
    SIDE["tid"] = threading.get_native_id()
    await blocker


# --- 3.12+: a loop with eager tasks, whose first step blocks its thread -----------------------
EAGER = {}
EAGER_READY = threading.Event()


async def eager_block():
    # create_task names a task only after the factory returned, i.e. after this eager step
    asyncio.current_task().set_name("eager-blocker")
    EAGER_READY.set()
    NEVER.wait()  # still in its eager first step: only in asyncio's eager-task set


async def eager_main():
    asyncio.current_task().set_name("eager-main")
    loop = asyncio.get_running_loop()
    EAGER.update(loop=loop, ident=threading.get_ident(), tid=threading.get_native_id())
    loop.set_task_factory(asyncio.create_eager_task_factory(asyncio.tasks._PyTask)
                          if MODE == "pytask" else asyncio.eager_task_factory)
    loop.create_task(eager_block())


# --- the main thread's loop -----------------------------------------------------------------
async def level2(ev):
    await ev.wait()


async def level1(ev):
    await level2(ev)


async def outer(t):
    await t


async def queue_wait(q):
    await q.get()


async def ждать_ü(ev):
    await ev.wait()


def blocking():
    NEVER.wait()


async def in_thread():
    if sys.version_info >= (3, 9):
        await asyncio.to_thread(blocking)
    else:
        await asyncio.get_running_loop().run_in_executor(None, blocking)


async def gathered(ev):
    # Named here: 3.13.0's create_task names a factory's task str(None) when given no name.
    child = asyncio.ensure_future(level2(ev))
    child.set_name("g-2-child")
    await asyncio.gather(child, return_exceptions=True)


def write_truth(loop):
    truth = {"loops": [loop_truth(loop, threading.get_ident(), threading.get_native_id()),
                       loop_truth(SIDE["loop"], SIDE["ident"], SIDE["tid"]),
                       loop_truth(IDLE, None, None)]
             + ([loop_truth(EAGER["loop"], EAGER["ident"], EAGER["tid"])] if EAGER else []),
             "held": [{"name": t.get_name(), "state": "cancelled" if t.cancelled() else "done"}
                      for t in HELD]}
    with open(READY + ".json.tmp", "w", encoding="utf-8") as f:
        json.dump(truth, f, ensure_ascii=False)
    os.rename(READY + ".json.tmp", READY + ".json")
    write_ready(READY)


def subinterpreter():
    """A second interpreter where the module exists (3.10+): the reader must read the tasks of
    the main one, which new interpreters push behind themselves in the runtime's list."""
    for name in ("_interpreters", "_xxsubinterpreters"):
        try:
            return __import__(name).create()
        except Exception:  # noqa: BLE001 (absent, or refused by this build)
            pass
    return None


SUB = subinterpreter()


async def never_started():
    await asyncio.sleep(0)


async def quick():
    return 1


IDLE = new_loop()  # never run: its task's thread is unknown
HELD = []  # finished tasks kept alive: still in the registry, done or cancelled
HELD_QUEUE = []


async def main():
    asyncio.current_task().set_name("main")
    loop = asyncio.get_running_loop()
    ev = asyncio.Event()
    IDLE.create_task(never_started()).set_name("idle-task")
    HELD.append(asyncio.ensure_future(quick()))
    HELD[0].set_name("finished")
    HELD.append(asyncio.ensure_future(level2(ev)))
    HELD[1].set_name("cancelled-one")
    await asyncio.sleep(0)
    HELD[1].cancel()
    await asyncio.wait(HELD)
    threading.Thread(target=lambda: run(side_main()), name="side-loop",
                     daemon=True).start()
    await loop.run_in_executor(None, SIDE_READY.wait)
    if hasattr(asyncio, "eager_task_factory"):
        threading.Thread(target=lambda: run(eager_main()), name="eager-loop",
                         daemon=True).start()
        await loop.run_in_executor(None, EAGER_READY.wait)
    inner = asyncio.ensure_future(level1(ev))
    inner.set_name("inner")
    asyncio.ensure_future(outer(inner)).set_name("outer-ü")
    g1 = asyncio.ensure_future(level2(ev))
    g1.set_name("g-1")
    g2 = asyncio.ensure_future(gathered(ev))
    g2.set_name("g-2")
    gatherer = asyncio.ensure_future(gather_both(g1, g2))
    gatherer.set_name("gatherer")
    # Held: nothing else refers to this task's queue, and asyncio keeps tasks by weak reference.
    HELD_QUEUE.append(asyncio.ensure_future(queue_wait(asyncio.Queue())))
    HELD_QUEUE[0].set_name("queue-waiter")
    asyncio.ensure_future(in_thread()).set_name("threaded")
    asyncio.ensure_future(ждать_ü(ev)).set_name("задача-函数-😀")
    me = asyncio.current_task()
    while not settled([t for t in asyncio.all_tasks() if t is not me]):
        await asyncio.sleep(0)
    loop.call_soon(write_truth, loop)
    await loop.create_future()


async def gather_both(a, b):
    await asyncio.gather(a, b)


run(main())
