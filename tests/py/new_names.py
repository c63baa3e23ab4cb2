# -*- coding: utf-8 -*-
"""Target for tests/e2e/history_bound.sh: a call chain that never repeats. The main thread
compiles and calls a function with a new 1000-character name about 500 times a second, so
every sample shows a stack no earlier sample showed. Writes READY_FILE (argv[1]) first."""
import sys
import time

with open(sys.argv[1], "w") as f:
    f.write("ready\n")
n = 0
while True:
    name = "fresh_%d_%s" % (n, "x" * 1000)
    ns = {"time": time}
    exec("def %s():\n    time.sleep(0.002)\n" % name, ns)
    ns[name]()
    n += 1
