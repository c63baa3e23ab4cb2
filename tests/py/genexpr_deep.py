"""Torn-stack target: the main thread and a worker thread each call down DEPTH levels (default
12) and there run sum() over a generator expression that stats files (as the demo job's
all_reduce does), then sleep a moment, in a loop. Every call makes and ends a generator (its
frame lives outside the data stack and is entered from C, through sum), so a reader that
catches a generator as it starts or finishes sees a chain that may end at the generator.
A whole stack starts at <module> (main thread) or Thread._bootstrap (worker). Writes
"ready TID" to READY_FILE (argv[1]) once both threads run, TID the worker's native thread
id; runs until killed. PAUSE (seconds, default 0.001) is slept after each descent; 0 makes
the loop hot. With PHASE (seconds, default 0: off) each descent stays at the bottom PHASE
seconds (reduce_all again every millisecond) and the pause after it is PHASE too, so hot_loop
alternates between its two lines, level(...) and time.sleep(...), each for many sample periods
of a 100 Hz reader. The main thread then records its own truth: READY_FILE.descents holds the
number of descents it has begun, replaced atomically at each; between any two of them lie a
whole level(...) phase and a whole time.sleep(...) phase.
With CGEN=1 a third thread, started by _thread.start_new_thread(next, ...),
runs a generator resumed from C with nothing under it (its whole stack starts at spin_gen),
calling spin() now and then."""
import _thread
import os
import sys
import threading
import time

DEPTH = int(os.environ.get("DEPTH", "12"))
PHASE = float(os.environ.get("PHASE", "0"))
PAUSE = PHASE or float(os.environ.get("PAUSE", "0.001"))
DESCENTS = sys.argv[1] + ".descents" if PHASE and len(sys.argv) > 1 else None
started = threading.Event()
descents = 0


def reduce_all(values, until=0.0):
    # until 0 (no PHASE): once, as the torn-stack reads want; else again every millisecond
    # until then, the callers' lines unchanged meanwhile
    while True:
        n = sum(os.path.exists(os.path.join("/nonexistent", str(v))) for v in values)
        if not until or time.monotonic() >= until:
            return n
        time.sleep(0.001)


def note_descent():
    global descents
    descents += 1
    with open(DESCENTS + ".tmp", "w") as f:
        f.write("%d\n" % descents)
    os.rename(DESCENTS + ".tmp", DESCENTS)


def level(k, values):
    if k == 0:
        if DESCENTS and threading.current_thread() is threading.main_thread():
            note_descent()
        return reduce_all(values, time.monotonic() + PHASE if PHASE else 0.0)
    return level(k - 1, values)


def hot_loop():
    values = list(range(8))
    if threading.current_thread().name == "reducer":
        started.set()
    while True:
        level(DEPTH, values)
        if PAUSE:
            time.sleep(PAUSE)


def spin():
    x = 0
    for i in range(200):
        x += i
    return x


def spin_gen():
    n = 0
    while True:
        n += 1
        if n % 2:
            spin()
        if n < 0:
            yield n


def main():
    if os.environ.get("CGEN") == "1":
        _thread.start_new_thread(next, (spin_gen(),))
    worker = threading.Thread(target=hot_loop, name="reducer", daemon=True)
    worker.start()
    started.wait()
    if len(sys.argv) > 1:
        with open(sys.argv[1] + ".tmp", "w") as f:
            f.write("ready %d\n" % worker.native_id)
        os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    hot_loop()


if __name__ == "__main__":
    main()
