"""Record-test target: the main thread runs phase_a, phase_b, phase_c for PHASE_SECS each
(default 0.6), in that order, then phase_a... (cycling) until killed or for CYCLES cycles.
Each phase spins in Python so every sample sees it. Writes READY_FILE when started."""
import os
import sys
import time

PHASE = float(os.environ.get("PHASE_SECS", "0.6"))
CYCLES = int(os.environ.get("CYCLES", "0"))


def spin(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        x += 1
    return x


def phase_a():
    spin(PHASE)


def phase_b():
    spin(PHASE)


def phase_c():
    spin(PHASE)


def main():
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write("ready\n")
    n = 0
    while CYCLES == 0 or n < CYCLES:
        phase_a()
        phase_b()
        phase_c()
        n += 1


main()
