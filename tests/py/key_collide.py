"""A thread that moves from a() to b() through one call site, each blocked in one call: a()
until SIGUSR1, then b() for good. The lines are chosen so that frame keys made by the old
hash of (code serial, line) were equal: a's code, the second the reader resolved (signal's
sigwait wrapper is the first), waits on line 273, and b's, the sixth, on line 12; with that
hash, hash(2, 273) == hash(6, 12), and the sampler went on showing a() after the thread had
moved on to b()."""
import signal
import sys


def b():
    signal.sigwait({signal.SIGUSR2})  # line 12: blocked for good (SIGUSR2 is never sent)


# Padding: it puts a()'s wait on line 273.
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#


def a(ready):
    from readyfile import write_ready

    write_ready(ready)
    signal.sigwait({signal.SIGUSR1})  # line 273: blocked until the test sends SIGUSR1


def run(f, *args):
    f(*args)


def main():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGUSR2})
    for f, args in ((a, (sys.argv[1],)), (b, ())):
        run(f, *args)


main()
