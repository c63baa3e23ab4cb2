"""A process with a thread that has no Python thread state: created through ctypes with libc's
pthread_create, its start routine libc's own pause() (no Python callback, so CPython never
gives it a thread state), named "cpause" with pthread_setname_np. The main thread blocks in
time.sleep inside main_wait, so its Python frames stay put. Writes its pid to argv[1] once the
thread's name is set."""
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readyfile import write_ready  # noqa: E402

libc = ctypes.CDLL(None, use_errno=True)


def start_c_thread():
    tid = ctypes.c_ulong()
    pause = ctypes.cast(libc.pause, ctypes.c_void_p)
    if libc.pthread_create(ctypes.byref(tid), None, pause, None) != 0:
        sys.exit("pthread_create failed")
    libc.pthread_setname_np(tid, b"cpause")


def main_wait():
    write_ready(sys.argv[1])
    while True:
        time.sleep(1)


start_c_thread()
main_wait()
