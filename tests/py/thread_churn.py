# -*- coding: utf-8 -*-
"""Target for tests/e2e/memory_cap.sh: threads come and go as fast as they can, each a new
thread to a sampler (a new kernel tid, mostly a new ident), each with a freshly named
function on its stack so that every thread also brings new frames. At most LIVE run at once.
Writes READY_FILE (argv[1]) once the churn runs; exits when its parent goes away."""
import os
import sys
import threading
import time

LIVE = 8


def body(n):
    name = "thread_fn_%d_%s" % (n, "y" * 200)
    ns = {"time": time}
    exec("def %s():\n    time.sleep(0.002)\n" % name, ns)
    ns[name]()


def main():
    ppid = os.getppid()
    live = []
    n = 0
    while True:
        n += 1
        t = threading.Thread(target=body, args=(n,), name="churn-%d" % n, daemon=True)
        t.start()
        live.append(t)
        if len(live) >= LIVE:
            live.pop(0).join()
        if n == 50:
            with open(sys.argv[1] + ".tmp", "w") as f:
                f.write("ready\n")
            os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        if n % 64 == 0 and os.getppid() != ppid:
            os._exit(0)


main()
