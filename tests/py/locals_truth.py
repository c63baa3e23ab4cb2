"""Target of tests/e2e/dump_locals.sh: two frames whose arguments, locals and cell/free
variables cover every rendering `dump --locals` has. The target writes its own truth first
(each frame's locals as f_locals has them: repr, type name, id, length, and which are
arguments and cells, from the code object), then its ready file, then blocks for good.

argv: READY TRUTH"""
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readyfile import write_ready  # noqa: E402


class Foo:
    pass


def frame_truth(f):
    co = f.f_code
    nargs = co.co_argcount + co.co_kwonlyargcount
    nargs += bool(co.co_flags & 4) + bool(co.co_flags & 8)
    args = list(co.co_varnames[:nargs])
    cells = list(co.co_cellvars) + list(co.co_freevars)
    out = []
    for name, v in dict(f.f_locals).items():
        try:
            n = len(v)
        except TypeError:
            n = None
        kind = "arg" if name in args else "cell" if name in cells else "local"
        out.append({"name": name, "repr": repr(v), "type": type(v).__name__, "id": id(v),
                    "len": n, "kind": kind, "bits": v.bit_length() if type(v) is int else None})
    return {"function": co.co_name, "locals": out}


def write_truth(frames, path):
    with open(path + ".tmp", "w") as fh:
        json.dump([frame_truth(f) for f in frames], fh)
    os.rename(path + ".tmp", path)


def work(count, name="n", *rest, flag=True, **opts):
    big = 2 ** 200
    neg = -(10 ** 25)
    small = -7
    huge = 10 ** 150
    enormous = 1 << 3000
    text = "h\u00e9llo\n'q' \u4e2d\t\\"
    long_text = "y" * 5000
    raw = b"\x00ab'c\xff"
    ratio = 0.1
    tiny = 1e-07
    vast = 1e22
    whole = 100.0
    neg_zero = -0.0
    pair = (1, "two")
    one = (None,)
    nested = [1, [2, [3]], {"k": (5,)}]
    deep = [[[[[1]]]]]
    table = {"a": 1, 2: None, (1, 2): [True, False]}
    marks = {7}
    frozen = frozenset()
    many = list(range(1000))
    obj = Foo()
    shared = 41

    def waiter(note):
        got = shared + 1
        write_truth([sys._getframe(), sys._getframe(1)], sys.argv[2])
        write_ready(sys.argv[1])
        threading.Event().wait()
        return got

    waiter("w")
    late = 1  # unbound while the target waits: never shown
    return late


work(3, "n", "r", extra=3)
