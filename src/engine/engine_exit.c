/* The exit thread: how each watched rank ended (exit code or killing signal).
 *
 * A rank is not our child, so the status comes from the kernel's process-event connector
 * (procexit.h). The thread subscribes once; where that is refused (no CAP_NET_ADMIN, not in
 * the initial namespaces, no connector) it records why in e->exit_err and returns, and every
 * status stays unknown. Otherwise it waits in poll() on the socket and on e->stop_fd, so
 * stopping never waits on it. Each exit becomes a record event of this node, which the
 * recorder keeps as exit_code / exit_signal in that pid's latest rank record (under e->lock);
 * it never marks the rank exited (the sampler does, when a read fails), so a status may arrive
 * before or after the rank is seen gone. Event pids are in the initial PID namespace, which is ours
 * whenever the subscription is accepted. */
#include "engine_priv.h"

#include "ranktop/proc/corepath.h"
#include "ranktop/proc/procexit.h"
#include "ranktop/base/util.h"

#include <poll.h>
#include <stdio.h>
#include <sys/wait.h>

#define EXIT_ACK_MS 1000 /* how long the kernel may take to accept the subscription */
#define EXIT_BATCH 64

/* One exit as this node's record event (the recorder keeps it in the latest rank record of
 * its pid); false for a status that is neither an exit nor a kill. */
static bool exit_event(const struct procexit_event *ev, struct record_event *m)
{
    *m = (struct record_event){.type = RECORD_EXIT};
    m->u.exit.pid = ev->pid;
    if (WIFEXITED(ev->status)) {
        m->u.exit.code = WEXITSTATUS(ev->status);
        m->u.exit.signal = 0;
    } else if (WIFSIGNALED(ev->status)) {
        m->u.exit.code = -1;
        m->u.exit.signal = WTERMSIG(ev->status);
        if (WCOREDUMP(ev->status)) /* the core is written before the exit is reported */
            corepath_locate(ev->pid, m->u.exit.signal, m->u.exit.core, sizeof(m->u.exit.core));
    } else {
        return false;
    }
    return true;
}

/* Reads what the socket holds and applies it, one batch of events per read. Returns false
 * when the socket failed. */
static bool exit_drain(struct engine *e, int fd)
{
    struct procexit_event ev[EXIT_BATCH];
    struct record_event rec[EXIT_BATCH];
    int n;

    while ((n = procexit_read(fd, ev, EXIT_BATCH)) > 0) {
        size_t k = 0;

        for (int i = 0; i < n; i++)
            k += exit_event(&ev[i], &rec[k]);
        engine_emit(e, ENGINE_Q_EXIT, rec, k);
    }
    return n == 0;
}

void *engine_exit_main(void *arg)
{
    struct engine *e = arg;
    struct app_err err = {0};
    int fd = procexit_open(EXIT_ACK_MS, &err);

    pthread_mutex_lock(&e->lock);
    snprintf(e->exit_err, sizeof(e->exit_err), "%.159s", fd < 0 ? err.msg : "");
    e->exit_started = true;
    e->exit_listening = fd >= 0;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    if (fd < 0)
        return NULL;
    for (;;) {
        struct pollfd pf[2] = {{fd, POLLIN, 0}, {e->stop_fd, POLLIN, 0}};

        if (poll(pf, 2, -1) < 0)
            continue;
        if (pf[1].revents & POLLIN)
            break;
        if ((pf[0].revents & POLLIN) && !exit_drain(e, fd))
            break;
    }
    procexit_close(fd);
    return NULL;
}
