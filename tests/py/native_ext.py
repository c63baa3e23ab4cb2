"""Threads blocked in a C extension (tests/native/blockext.c, built by the test into argv[2]):
one in nanosleep and one in pthread_cond_wait with the GIL released, each two Python frames
deep (outer_x -> inner_x), and the main thread spinning in C while holding the GIL; a forked
child (DataLoader-style) blocked in block_nogil too. Writes "PID CHILD" to argv[1] when all
are started."""
import os
import sys
import threading
import time

sys.path.insert(0, sys.argv[2])
import blockext  # noqa: E402


def inner_sleep():
    blockext.block_nogil()


def outer_sleep():
    inner_sleep()


def inner_cond():
    blockext.block_cond()


def outer_cond():
    inner_cond()


def spinning():
    blockext.spin_with_gil()


child = os.fork()
if child == 0:
    outer_sleep()
threading.Thread(target=outer_sleep, name="sleeper", daemon=True).start()
threading.Thread(target=outer_cond, name="waiter", daemon=True).start()
time.sleep(0.5)  # both threads in their C calls
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d %d\n" % (os.getpid(), child))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
spinning()
