"""A rank for the UI tests of issue 9: the main thread spins in one function whose line
changes every few microseconds (spin), and a thread named "tokenizer" holds the GIL most of
the time. Run with RANK set; it runs until killed."""
import threading
import time


def tokenize():
    x = 0
    while True:
        x += 1
        x ^= 3
        x -= 1


def spin():
    a = 0
    while True:
        a += 1
        a *= 1
        a -= 1
        time.sleep(0)


threading.Thread(target=tokenize, name="tokenizer", daemon=True).start()
spin()
