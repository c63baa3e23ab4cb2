"""A rank whose stack is deep (about 300 frames) and whose names are long and odd: functions of
250 characters, a file path of 400, a thread named with quotes, a tab and non-ASCII text. For
tests of line limits and escaping. Writes its pid to argv[1] once at depth."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readyfile import write_ready  # noqa: E402

LONG = "f" + "_very_long_name" * 16  # 241 characters

src = f"""
def {LONG}(n, leaf):
    if n == 0:
        leaf()
    else:
        {LONG}(n - 1, leaf)
"""
path = "/tmp/" + "d" * 390 + ".py"
exec(compile(src, path, "exec"))
deep = globals()[LONG]


def waiting():
    write_ready(sys.argv[1])
    while True:
        time.sleep(0.1)


t = threading.Thread(target=lambda: deep(20, lambda: time.sleep(1e6)),
                     name='tok"en\tizer \u00e9\u20ac', daemon=True)
t.start()
deep(300, waiting)
