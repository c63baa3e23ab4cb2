# -*- coding: utf-8 -*-
"""Target for the memstat tests: a process that grows by a known amount when told to.

Usage: python3 -S alloc_growth.py BYTES   (any CPython 3)

Prints "ready PID" on stdout once warmed up, then reads commands from stdin, one per line:
  grow   allocate one bytearray of BYTES bytes, write one byte in every 4 KiB page of it (so all
         of it is resident, whatever the allocator did), print "grown 0xADDR" where ADDR is the
         address of its buffer
  exit   (or end of input) leave
Every reply is flushed at once so the parent can read it from a pipe.
"""
import ctypes
import os
import sys

PAGE = 4096


def grow(size, keep):
    buf = bytearray(size)
    buf[::PAGE] = b"\x01" * len(range(0, size, PAGE))
    view = (ctypes.c_char * size).from_buffer(buf)
    keep.append((buf, view))
    return ctypes.addressof(view)


def main():
    size = int(sys.argv[1])
    keep = []
    print("ready %d" % os.getpid(), flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "grow":
            print("grown 0x%x" % grow(size, keep), flush=True)
        elif cmd == "exit":
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
