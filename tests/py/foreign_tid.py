"""A rank whose second thread's state names a thread of another process.

Usage: python3 foreign_tid.py READY   (CPython 3.11+: native_thread_id is in the thread state)

From 3.11 on the reader takes a thread's kernel id from tstate->native_thread_id, in the
target's own memory; a thread that exits, or a state read while it is being freed, can leave
any number there. This target writes the pid of a process of its own (a child that sleeps)
into that field of its "planted" thread, then writes READY (its pid) and READY.child (the
child's). A native read must never stop the child; the planted thread keeps its Python frames.
Exits 3 when the field cannot be found exactly once.
"""
import ctypes
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readyfile import write_ready  # noqa: E402


def planted_sleep(child, done):
    get = ctypes.pythonapi.PyThreadState_Get
    get.restype = ctypes.c_void_p
    ts = get()
    me = threading.get_native_id()
    slots = [off for off in range(0, 512, 8) if ctypes.c_ulong.from_address(ts + off).value == me]
    if len(slots) != 1:
        print("native_thread_id found %d times" % len(slots), file=sys.stderr)
        os._exit(3)
    ctypes.c_ulong.from_address(ts + slots[0]).value = child
    done.set()
    while True:
        time.sleep(1)


def main():
    # The child leaves when this process does, however it ends.
    child = subprocess.Popen([sys.executable, "-S", "-c",
                              "import os, time\np = os.getppid()\nwhile os.getppid() == p: time.sleep(0.2)"])
    done = threading.Event()
    threading.Thread(target=planted_sleep, args=(child.pid, done), name="planted", daemon=True).start()
    done.wait()
    with open(sys.argv[1] + ".child.tmp", "w") as f:
        f.write("%d\n" % child.pid)
    os.rename(sys.argv[1] + ".child.tmp", sys.argv[1] + ".child")
    write_ready(sys.argv[1])
    while True:
        time.sleep(1)


main()
