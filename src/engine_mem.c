/* The engine's memory thread: once a second, RSS and swap of every target from
 * /proc/PID/status (cheap), and every FULL_EVERY seconds PSS and USS from smaps_rollup, whose
 * cost grows with the resident size (the kernel walks the page tables: ~30 ms per GiB).
 * Recorded as counters on the rank's lane. Reads /proc with the lock released; takes it only
 * to append the points. */
#include "engine_priv.h"

#include "memstat.h"
#include "ranktop/util.h"

#include <stdlib.h>
#include <string.h>

#define MEM_PERIOD_NS 1000000000ull
#define FULL_EVERY 10

static int *copy_pids(struct engine *e, size_t *n)
{
    int *pids;

    pthread_mutex_lock(&e->lock);
    *n = e->ntargets;
    pids = x_calloc(*n ? *n : 1, sizeof(int));
    for (size_t i = 0; i < *n; i++)
        pids[i] = e->targets[i].pid;
    pthread_mutex_unlock(&e->lock);
    return pids;
}

static void record_mem(struct engine *e, int pid, const struct memstat *m, uint64_t now)
{
    pthread_mutex_lock(&e->lock);
    if (m->valid & MEMSTAT_RSS)
        history_counter(&e->hist, "rss", "MiB", pid, now, (double)m->rss_kb / 1024.0);
    if (m->valid & MEMSTAT_PSS)
        history_counter(&e->hist, "pss", "MiB", pid, now, (double)m->pss_kb / 1024.0);
    if (m->valid & MEMSTAT_USS)
        history_counter(&e->hist, "uss", "MiB", pid, now, (double)m->uss_kb / 1024.0);
    if (m->valid & MEMSTAT_SWAP)
        history_counter(&e->hist, "swap", "MiB", pid, now, (double)m->swap_kb / 1024.0);
    pthread_mutex_unlock(&e->lock);
}

void *engine_mem_main(void *arg)
{
    struct engine *e = arg;
    uint64_t next = clock_mono_ns();
    unsigned round = 0;

    do {
        size_t n;
        int *pids = copy_pids(e, &n);
        bool full = round++ % FULL_EVERY == 0;

        for (size_t i = 0; i < n; i++) {
            struct memstat m;
            struct app_err err;
            int rc =
                full ? memstat_read(pids[i], &m, &err) : memstat_read_status(pids[i], &m, &err);

            if (rc == 0)
                record_mem(e, pids[i], &m, clock_mono_ns());
        }
        free(pids);
        next += MEM_PERIOD_NS;
    } while (!engine_wait(e, next));
    return NULL;
}
