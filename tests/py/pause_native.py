"""A rank blocked in libc's pause() through ctypes, two Python frames deep: the native frame
must come inside wait_in_pause, then outer. With argv[2] == "qsort" the way down crosses C
twice: outer calls libc's qsort, whose comparison callback (cmp, a new evaluation call) calls
wait_in_pause: merged, qsort must sit between cmp and outer. With argv[2] == "threads" two
more threads block in pause() too (each thread's outermost native frames are libc's thread
start). Writes its pid to argv[1] just before pause() (callers poll until the native frame
shows)."""
import ctypes
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readyfile import write_ready  # noqa: E402

libc = ctypes.CDLL(None)


def wait_in_pause():
    write_ready(sys.argv[1])
    libc.pause()


CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))


def cmp(a, b):
    wait_in_pause()
    return 0


def outer():
    if len(sys.argv) > 2 and sys.argv[2] == "threads":
        for _ in range(2):
            threading.Thread(target=libc.pause, daemon=True).start()
    if len(sys.argv) > 2 and sys.argv[2] == "qsort":
        arr = (ctypes.c_int * 2)(2, 1)
        libc.qsort(arr, 2, ctypes.sizeof(ctypes.c_int), CMP(cmp))
    else:
        wait_in_pause()


outer()
