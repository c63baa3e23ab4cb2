# -*- coding: utf-8 -*-
"""Target for tests/e2e/hardening.sh: a rank that exec()s in place (same pid, new image).

Usage: python3 exec_self.py READY_FILE OTHER_PYTHON
Writes READY_FILE, waits in before_exec() for 1.5 s, then execs OTHER_PYTHON on this same
script with the argument "after", which waits in after_exec() until killed."""
import os
import sys
import time


def before_exec():
    time.sleep(1.5)


def after_exec():
    while True:
        time.sleep(0.05)


if sys.argv[1] == "after":
    after_exec()
else:
    with open(sys.argv[1], "w") as f:
        f.write("ready\n")
    before_exec()
    os.execv(sys.argv[2], [sys.argv[2], "-S", os.path.abspath(__file__), "after"])
