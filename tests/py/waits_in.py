"""A rank that waits in the function named by argv[1] (all_reduce or load_batch_slowly), as a
stuck collective or a slow data loader would, until it is killed."""
import sys
import time


def all_reduce():
    while True:
        time.sleep(0.05)


def load_batch_slowly():
    while True:
        time.sleep(0.05)


def main():
    {"all_reduce": all_reduce, "load_batch_slowly": load_batch_slowly}[sys.argv[1]]()


main()
