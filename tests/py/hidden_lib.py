"""Calls block_here() of the shared library argv[2] (tests/native/hidden.c) from a Python
function; writes its pid to argv[1] just before the call."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readyfile import write_ready  # noqa: E402

lib = ctypes.CDLL(sys.argv[2])


def wait_in_lib():
    write_ready(sys.argv[1])
    lib.block_here()


wait_in_lib()
