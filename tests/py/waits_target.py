"""A target for the kind-of-wait tests (tests/e2e/dump_waits.sh). Mode "host": the main thread
sleeps in host code (time.sleep in host_sleep) while a second thread blocks reading a pipe
nobody writes (read_pipe). Mode "gc": the main thread collects garbage over a million objects
again and again (collect_forever). Writes {"pid", "main_tid", "reader_tid"} to READY once in
place, so the test compares against what the target says about itself."""
import gc
import json
import os
import sys
import threading
import time


def read_pipe(fd, tids):
    tids["reader_tid"] = threading.get_native_id()
    os.read(fd, 1)  # nobody writes: blocked here for good


def host_sleep():
    while True:
        time.sleep(1)


def collect_forever():
    while True:
        gc.collect()


def main(ready, mode):
    tids = {"pid": os.getpid(), "main_tid": threading.get_native_id()}
    if mode == "gc":
        gc.disable()  # only the explicit collections: each one long, over every object
        keep = [[i] for i in range(1000000)]
    else:
        r, _w = os.pipe()
        t = threading.Thread(target=read_pipe, args=(r, tids), name="reader", daemon=True)
        t.start()
        while "reader_tid" not in tids:
            time.sleep(0.01)
    with open(ready + ".tmp", "w") as f:
        json.dump(tids, f)
    os.rename(ready + ".tmp", ready)
    if mode == "gc":
        collect_forever()
        del keep
    host_sleep()


main(sys.argv[1], sys.argv[2])
