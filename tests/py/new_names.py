# -*- coding: utf-8 -*-
"""Target for tests/e2e/history_bound.sh: a call chain that never repeats. The main thread
compiles and calls a function with a new 1000-character name about 500 times a second, so
every sample shows a stack no earlier sample showed. Writes READY_FILE (argv[1]) first.
argv[2], when given, is the seconds each function sleeps (default 0.002; 0.001 defines about
1000 functions a second)."""
import sys
import time

with open(sys.argv[1], "w") as f:
    f.write("ready\n")
nap = float(sys.argv[2]) if len(sys.argv) > 2 else 0.002
n = 0
while True:
    name = "fresh_%d_%s" % (n, "x" * 1000)
    ns = {"time": time}
    exec("def %s():\n    time.sleep(%r)\n" % (name, nap), ns)
    ns[name]()
    n += 1
