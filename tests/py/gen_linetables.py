"""Generate line-table fixtures for tests/unit/check_linetable.c.

Compiles a fixed corpus of Python source with the running interpreter and, for every code
object (recursing into co_consts), writes its raw line table and the line CPython itself
reports for each bytecode offset. Run it once per interpreter (3.8 .. 3.13+):

    python3.X tests/py/gen_linetables.py            # -> tests/data/linetables/py3X.txt
    python3.X tests/py/gen_linetables.py -o FILE    # somewhere else (e.g. to diff builds)

File format (line oriented, '#' lines are comments):

    python <major> <minor> <micro>
    code <name> <firstlineno> <code_len> <table_len> <table hex, or '-' when empty>
    <byte offset> <expected line, 0 = no line>
    ...
    end

Offsets are even bytes in [0, code_len). The table is co_lnotab for 3.8/3.9 and co_linetable
for 3.10+; code_len is len(co_code), which includes the inline CACHE units from 3.11 on.
Expected lines come from co_lines() on 3.10+ (None -> 0) and from dis.findlinestarts() on
3.8/3.9 (line of the last line start at or before the offset). Today every offset of every
code object is recorded (about 50 KB per file); a code object with more than SMALL_KEEP_ALL
offsets would keep its first SMALL_KEEP_ALL, every offset near a line change and a sample of
the rest, so that the files stay small.

Only standard library, no syntax newer than 3.8, deterministic output.
"""

import argparse
import dis
import os
import sys
import types

SMALL_KEEP_ALL = 5000  # code objects up to this many offsets keep every offset
SAMPLE_EVERY = 16  # otherwise keep every 16th offset plus neighbours of line changes
NEAR_CHANGE = 2  # offsets kept on each side of a line change


def _padding(n):
    """n comment lines: moves the next statement n lines further down."""
    return "".join("# pad %d\n" % i for i in range(n))


def _long_function():
    """Straight-line code with a loop body > 127 lines, forward gaps over 127 and 255 lines
    (multi-pair lnotab entries, multi-group varints) and a backward jump over them."""
    body = ["def long_function(n):", "    total = 0", "    i = 0", "    while i < n:"]
    for k in range(140):
        body.append("        total += i * %d" % k)
    body.append("        i += 1")
    body.append("    for j in range(n):")
    body.append("        if j % 3 == 0:")
    body.append("            total -= j")
    body.append("        elif j % 3 == 1:")
    body.append("            continue")
    body.append("        else:")
    body.append("            break")
    text = "\n".join(body) + "\n"
    text += _padding(200)
    text += "    total += 7\n"
    text += _padding(300)
    text += "    total += 8\n"
    text += _padding(5000)
    text += "    total += 9\n"
    return text + "    return total\n\n"


def _huge_gap():
    """Line deltas that need 4 varint groups (> 2**18) and hundreds of lnotab pairs."""
    return (
        "def huge_gap(a):\n"
        "    b = a + 1\n" + _padding(300000) + "    c = b + 2\n"
        "    return [x for x in (a, b, c)]\n\n"
    )


def _backward_call():
    """A call whose arguments span > 200 lines: the CALL sits on the first line in 3.11+,
    so the table has a line delta below -128 after the arguments."""
    args = "".join("        a%d,\n" % k for k in range(220))
    params = ", ".join("a%d" % k for k in range(220))
    return "def backward_call(f, %s):\n    r = f(\n%s    )\n    return r\n\n" % (params, args)


def _wide_line():
    """One line with more than 255 bytes of bytecode followed by another line: the address
    delta needs several lnotab / linetable pairs and several 8-unit location entries."""
    terms = " + ".join("x * %d" % k for k in range(150))
    return "def wide_line(x):\n    y = %s\n    return y\n\n" % terms


def _fixed_source():
    return '''\
"""Corpus for line-table fixtures."""
import contextlib
import functools


def simple(a, b):
    return a + b


def implicit_return(flag):
    if flag:
        x = 1
    else:
        x = 2
    print(x)


def multi_line_expression(a, b, c):
    value = (
        a
        + b
        * c
    )
    other = dict(
        first=a,
        second=b,
        third=[c,
               a],
    )
    return value, other


def lambdas_and_comprehensions(items):
    key = lambda item: (item % 7,
                        -item)
    squares = [i * i for i in items if i % 2]
    table = {i: [j for j in range(i)] for i in items}
    unique = {i % 3 for i in items}
    gen = (i + 1
           for i in items)
    return sorted(items, key=key), squares, table, unique, list(gen)


def exceptions(a):
    try:
        r = 1 / a
    except ZeroDivisionError as exc:
        r = str(exc)
    except (TypeError, ValueError):
        r = None
    else:
        r = r * 2
    finally:
        print("done")
    try:
        try:
            raise KeyError(a)
        finally:
            a = 0
    except KeyError:
        pass
    return r


def generator(n):
    i = 0
    while i < n:
        received = yield i
        if received:
            i = received
        i += 1
    yield from range(3)


def with_statements(path):
    with contextlib.suppress(OSError):
        with open(path) as fh, open(path) as fh2:
            data = fh.read() + fh2.read()
    with contextlib.ExitStack() as stack:
        stack.callback(print,
                       "bye")
    return data


def decorator(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@decorator
@functools.lru_cache(maxsize=None)
def decorated(x,
              y=2):
    return x ** y


class Klass(object):
    attr = [n for n in range(3)]

    def method(self):
        return self.attr

    @property
    def prop(self):
        return len(self.attr)

    @staticmethod
    def static(a):
        for k in a:
            if k:
                return k


async def coroutine(other):
    await other()
    async with other() as ctx:
        async for item in ctx:
            print(item)
    return [x async for x in other()]


def nested_loops(grid):
    out = 0
    for row in grid:
        for cell in row:
            if cell < 0:
                continue
            while cell > 10:
                cell //= 2
            out += cell
        else:
            out -= 1
    return out


def assert_and_del(a):
    assert a, "need a"
    del a
    global GLOBAL
    GLOBAL = 1


def closure(a):
    def inner(b):
        def innermost(c):
            return a + b + c
        return innermost
    return inner


x = simple(1, 2)
if x:
    y = [i for i in range(x)]
'''


def corpus_source():
    parts = [
        _fixed_source(),
        _padding(150),
        _long_function(),
        _backward_call(),
        _wide_line(),
        _huge_gap(),
        "def late_function(z):\n    return z\n",
    ]
    return "\n".join(parts)


def walk_code(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            for sub in walk_code(const):
                yield sub


def expected_lines(code):
    """Line for every even byte offset of co_code, 0 for no line."""
    n = len(code.co_code)
    lines = [0] * (n // 2)
    if sys.version_info >= (3, 10):
        for start, end, line in code.co_lines():
            for off in range(start, min(end, n), 2):
                lines[off // 2] = line if line is not None else 0
        return lines
    starts = list(dis.findlinestarts(code))
    cur, k = code.co_firstlineno, 0
    for off in range(0, n, 2):
        while k < len(starts) and starts[k][0] <= off:
            cur = starts[k][1]
            k += 1
        lines[off // 2] = cur
    return lines


def keep_offsets(lines):
    """Indices (offset // 2) to record."""
    n = len(lines)
    if n <= SMALL_KEEP_ALL:
        return range(n)
    keep = set(range(SMALL_KEEP_ALL))
    keep.update(range(0, n, SAMPLE_EVERY))
    keep.add(n - 1)
    for i in range(1, n):
        if lines[i] != lines[i - 1]:
            keep.update(range(max(0, i - NEAR_CHANGE), min(n, i + NEAR_CHANGE)))
    return sorted(keep)


def raw_table(code):
    if sys.version_info >= (3, 10):
        return code.co_linetable
    return code.co_lnotab


def write_fixture(out):
    code = compile(corpus_source(), "<linetable-corpus>", "exec")
    v = sys.version_info
    out.write("# generated by tests/py/gen_linetables.py; do not edit\n")
    out.write("python %d %d %d\n" % (v[0], v[1], v[2]))
    n_code = n_off = 0
    for co in walk_code(code):
        table = bytes(raw_table(co))
        lines = expected_lines(co)
        for line in lines:
            if line < 0:
                raise SystemExit("negative line in %s" % co.co_name)
        out.write(
            "code %s %d %d %d %s\n"
            % (co.co_name, co.co_firstlineno, len(co.co_code), len(table), table.hex() or "-")
        )
        for i in keep_offsets(lines):
            out.write("%d %d\n" % (2 * i, lines[i]))
            n_off += 1
        out.write("end\n")
        n_code += 1
    return n_code, n_off


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default = os.path.join(
        here, "..", "data", "linetables", "py%d%d.txt" % sys.version_info[:2]
    )
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", default=default)
    args = parser.parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as out:
        n_code, n_off = write_fixture(out)
    print("%s: %d code objects, %d offsets" % (os.path.normpath(args.output), n_code, n_off))


if __name__ == "__main__":
    main()
