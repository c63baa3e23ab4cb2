# -*- coding: utf-8 -*-
"""Target for tests/e2e/hardening.sh: names a terminal would act on. A function whose name
clears the screen and forges a frame line, a thread named with an OSC title sequence and a
bell, both parked in os.read. Writes READY_FILE (argv[1]) once both block."""
import os
import sys
import threading

r, w = os.pipe()
EVIL = "evil\x1b[2J\n    forged_frame (/forged.py:1)\x9b31m"
ns = {"os": os, "r": r}
exec("def %s():\n    os.read(r, 1)\n" % "placeholder", ns)
park = ns["placeholder"]
park.__code__ = park.__code__.replace(co_name=EVIL, co_qualname=EVIL) if hasattr(
    park.__code__, "co_qualname") else park.__code__.replace(co_name=EVIL)
t = threading.Thread(target=park, name="title\x1b]0;pwned\x07\r\nThread 1 \"fake\"")
t.start()
with open(sys.argv[1], "w") as f:
    f.write("ready\n")
park()
