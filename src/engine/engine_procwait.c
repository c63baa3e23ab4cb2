/* The kernel's view of each rank's main thread (its state letter and the syscall it sleeps
 * in), read once a second by the memory thread and published in the rank's live figures, for
 * the monitor's kind of wait. The read is I/O without the lock; the lock is taken only to
 * store the three fields. A rank's main thread is its pid (tid == pid). */
#include "engine_priv.h"

#include "ranktop/procwait.h"

void engine_procwait_publish(struct engine *e, int pid)
{
    struct procwait pw;
    struct engine_rank_live *l;

    if (procwait_read(pid, pid, &pw, NULL) < 0)
        pw = (struct procwait){.syscall = -1};
    pthread_mutex_lock(&e->lock);
    l = engine_live_locked(e, pid);
    l->state = pw.state;
    l->syscall = pw.syscall;
    l->no_fds = pw.no_fds;
    pthread_mutex_unlock(&e->lock);
}
