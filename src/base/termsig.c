/* Ending ranktop on SIGINT, SIGTERM, SIGHUP and SIGQUIT whatever its threads are doing, for
 * the commands that leave those signals at their default action (dump, ls, agent).
 *
 * Why a thread of its own: a process-directed signal is delivered only to a thread that does
 * not block it, and a pending one waits for good otherwise. libunwind blocks every signal
 * around its locks, and the unwinder's callbacks run there: they open and read the target's
 * objects and debug files, so a read that hangs (a FIFO, a file system that never answers)
 * would leave SIGTERM pending while ranktop hangs. The sink thread never blocks these four and
 * never does anything but wait, so the kernel always has a thread to deliver them to; their
 * action being the default one, the delivery ends the whole process at once, a thread stuck
 * in a killable wait included.
 *
 * Commands with their own handling (record takes them with sigtimedwait, the monitor's UI
 * thread with a handler) do not start it: there they are seen by a thread that does no such
 * I/O, and engine_stop does not wait on a stuck collector. Started once, by main. */
#include "ranktop/base/util.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

static void *sink_main(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

static void term_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGQUIT);
}

void app_term_sink_start(void)
{
    sigset_t all, term, old;
    pthread_attr_t at;
    pthread_t th;

    /* The thread takes these four only: every other signal stays with the threads that
     * expect it (SIGPIPE, SIGCHLD, a crash's own signal are thread-directed anyway). */
    sigfillset(&all);
    term_set(&term);
    for (int s = 1; s < NSIG; s++)
        if (sigismember(&term, s) == 1)
            sigdelset(&all, s);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &at, sink_main, NULL) != 0)
        app_fatal("cannot start the signal thread");
    pthread_attr_destroy(&at);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}
