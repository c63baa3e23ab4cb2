"""Two threads besides the main one: "busy" spins in Python (always running or runnable),
"sleeper" waits on an event nobody sets, as the main thread does (never woken, so never
running). Writes its pid to argv[1] once both have started."""
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readyfile import write_ready  # noqa: E402


def spin():
    n = 0
    while True:
        n += 1


def nap():
    threading.Event().wait()


threading.Thread(target=spin, name="busy", daemon=True).start()
threading.Thread(target=nap, name="sleeper", daemon=True).start()
write_ready(sys.argv[1])
threading.Event().wait()
