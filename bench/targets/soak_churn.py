"""Soak target (bench/soak.sh): a rank whose threads and functions come and go, gently.

Usage: soak_churn.py READY_FILE
Every 50 ms the main thread compiles a function with a new name (exec), and starts a
short-lived thread that calls it a few levels deep and sleeps briefly; two long-lived helper
threads move between a few functions. The CPU stays mostly free (a few % of a core), so eight
of these run beside the recorder on a small machine."""
import sys
import threading
import time


def helper(k):
    def a():
        time.sleep(0.02)

    def b():
        a()
        time.sleep(0.02)

    while True:
        (a if k % 2 else b)()
        k += 1


def short_lived(fn, depth):
    if depth:
        return short_lived(fn, depth - 1)
    fn()
    time.sleep(0.01)


for i in range(2):
    threading.Thread(target=helper, args=(i,), name="helper-%d" % i, daemon=True).start()
with open(sys.argv[1], "w") as f:
    f.write("ready\n")
n = 0
while True:
    ns = {}
    exec("def step_%d():\n    return sum(range(100))\n" % n, ns)
    threading.Thread(target=short_lived, args=(ns["step_%d" % n], n % 7), name="churn-%d" % n,
                     daemon=True).start()
    n += 1
    time.sleep(0.05)
