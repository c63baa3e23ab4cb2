/* The kernel's view of each rank's main thread (its state letter and the syscall it sleeps
 * in), read once a second by the memory thread and handed to the recorder as the wait part of
 * the rank's live figures (RECORD_LIVE_WAIT), for the monitor's kind of wait. The read is I/O;
 * no lock is taken. A rank's main thread is its pid (tid == pid). */
#include "engine_priv.h"

#include "ranktop/proc/procwait.h"

void engine_procwait_read(int pid, struct engine_evbuf *out)
{
    struct procwait pw;
    struct record_event *m;

    if (procwait_read(pid, pid, &pw, NULL) < 0)
        pw = (struct procwait){.syscall = -1};
    m = engine_evbuf_add(out, RECORD_LIVE);
    m->u.live = (struct record_live){.pid = pid,
                                     .set = RECORD_LIVE_WAIT,
                                     .state = pw.state,
                                     .syscall = pw.syscall,
                                     .no_fds = pw.no_fds};
}
