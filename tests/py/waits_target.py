"""A target for the kind-of-wait tests (tests/e2e/dump_waits.sh, record_waits.sh). Mode
"alternate": the main thread sleeps 0.3 s in load_data, then 0.3 s in all_reduce, again and
again (a user's rules name them data and collective). Mode "host": the main thread
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


def load_data():
    time.sleep(0.3)


def all_reduce():
    time.sleep(0.3)


def alternate():
    while True:
        load_data()
        all_reduce()


def collect_forever():
    while True:
        gc.collect()


def main(ready, mode):
    tids = {"pid": os.getpid(), "main_tid": threading.get_native_id()}
    if mode == "gc":
        gc.disable()  # only the explicit collections: each one long, over every object
        keep = [[i] for i in range(1000000)]
    elif mode == "host":
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
    if mode == "alternate":
        alternate()
    host_sleep()


main(sys.argv[1], sys.argv[2])
