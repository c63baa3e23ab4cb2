/* The engine's memory thread: once a second, RSS and swap of every target from
 * /proc/PID/status (cheap), and every FULL_EVERY seconds PSS and USS from smaps_rollup, whose
 * cost grows with the resident size (the kernel walks the page tables: ~30 ms per GiB); CPU %
 * from the tick counters; and the mapping growth of the one rank the UI focuses on. Recorded
 * as counter series by id (series.h) on the rank's lane, through the recorder as this node's
 * counter events handed to the recorder (engine_emit), beside each rank's main-thread wait
 * (engine_procwait.c) as a part of its live figures. Reads /proc with no lock held; takes the
 * engine lock only to publish the growth rows. */
#include "engine_priv.h"

#include "ranktop/proc/memstat.h"
#include "ranktop/proc/procscan.h"
#include "ranktop/base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MEM_PERIOD_NS 1000000000ull
#define FULL_EVERY 10

static int *copy_pids(struct engine *e, size_t *n)
{
    int *pids;

    pthread_mutex_lock(&e->lock);
    pids = x_calloc(e->ntargets ? e->ntargets : 1, sizeof(int));
    *n = 0;
    for (size_t i = 0; i < e->ntargets; i++)
        if (!e->targets[i].owner) /* memory figures are per rank */
            pids[(*n)++] = e->targets[i].pid;
    pthread_mutex_unlock(&e->lock);
    return pids;
}

/* The figures of one rank as counter events, applied as one batch. */
static void record_mem(struct engine *e, int pid, const struct memstat *m, uint64_t now)
{
    struct record_event ev[4];
    size_t n = 0;
    int64_t t = (int64_t)now;

    if (m->valid & MEMSTAT_RSS)
        ev[n++] = record_counter_event(SERIES_RSS, pid, t, (double)m->rss_kb / 1024.0);
    if (m->valid & MEMSTAT_PSS)
        ev[n++] = record_counter_event(SERIES_PSS, pid, t, (double)m->pss_kb / 1024.0);
    if (m->valid & MEMSTAT_USS)
        ev[n++] = record_counter_event(SERIES_USS, pid, t, (double)m->uss_kb / 1024.0);
    if (m->valid & MEMSTAT_SWAP)
        ev[n++] = record_counter_event(SERIES_SWAP, pid, t, (double)m->swap_kb / 1024.0);
    engine_emit(e, ENGINE_Q_MEM, ev, n);
}

/* CPU % of one core since the previous round, from utime + stime. */
struct cpuprev {
    int pid;
    uint64_t ticks, t;
};

static void record_cpu(struct engine *e, struct cpuprev **prev, size_t *nprev, int pid,
                       uint64_t now)
{
    uint64_t ticks;
    struct cpuprev *p = NULL;

    if (procscan_cpu_ticks(pid, &ticks) < 0)
        return;
    for (size_t i = 0; i < *nprev && !p; i++)
        if ((*prev)[i].pid == pid)
            p = &(*prev)[i];
    if (!p) {
        *prev = x_reallocarray(*prev, *nprev + 1, sizeof(**prev));
        p = &(*prev)[(*nprev)++];
        *p = (struct cpuprev){pid, ticks, now};
        return;
    }
    if (now > p->t && ticks >= p->ticks) {
        double pct = (double)(ticks - p->ticks) / (double)sysconf(_SC_CLK_TCK) /
                     ((double)(now - p->t) / 1e9) * 100.0;

        struct record_event ev = record_counter_event(SERIES_CPU, pid, (int64_t)now, pct);

        engine_emit(e, ENGINE_Q_MEM, &ev, 1);
    }
    p->ticks = ticks;
    p->t = now;
}

/* Mapping growth for the pid the UI focuses on: a baseline of its mappings, compared with a
 * fresh reading every round. smaps is expensive for big processes, so only one pid. */
struct focus {
    int pid;
    struct memmap *base;
    size_t nbase;
};

static void focus_round(struct engine *e, struct focus *f)
{
    struct memgrowth g[16];
    struct memmap *now_maps = NULL;
    size_t n = 0, k;
    struct app_err err;
    bool reset;
    int pid;

    pthread_mutex_lock(&e->lock);
    pid = e->focus_pid;
    reset = e->focus_reset || pid != f->pid;
    e->focus_reset = false;
    pthread_mutex_unlock(&e->lock);
    if (reset) {
        free(f->base);
        f->base = NULL;
        f->nbase = 0;
        f->pid = pid;
        if (pid > 0)
            memstat_read_maps(pid, &f->base, &f->nbase, &err);
        return;
    }
    if (pid <= 0 || memstat_read_maps(pid, &now_maps, &n, &err) < 0)
        return;
    k = memstat_top_growth(f->base, f->nbase, now_maps, n, g, 16);
    free(now_maps);
    pthread_mutex_lock(&e->lock);
    e->growth_pid = pid;
    e->ngrowth = k;
    for (size_t i = 0; i < k; i++) {
        snprintf(e->growth[i].label, sizeof(e->growth[i].label), "%.95s", g[i].label);
        e->growth[i].before_kb = g[i].before_kb;
        e->growth[i].after_kb = g[i].after_kb;
        e->growth[i].delta_kb = g[i].delta_kb;
    }
    pthread_mutex_unlock(&e->lock);
}

void *engine_mem_main(void *arg)
{
    struct engine *e = arg;
    uint64_t next;
    unsigned round = 0;
    struct cpuprev *prev = NULL;
    size_t nprev = 0;
    struct focus f = {0};
    struct engine_evbuf waits = {0}; /* the round's wait figures (engine_procwait.c) */

    engine_wait_discovered(e); /* a short record must still get its memory figures */
    next = clock_mono_ns();
    do {
        size_t n;
        int *pids = copy_pids(e, &n);
        bool full = round++ % FULL_EVERY == 0 && !e->o.mem_rss_only;

        for (size_t i = 0; i < n; i++) {
            struct memstat m;
            struct app_err err;
            int rc =
                full ? memstat_read(pids[i], &m, &err) : memstat_read_status(pids[i], &m, &err);

            if (rc == 0)
                record_mem(e, pids[i], &m, clock_mono_ns());
            record_cpu(e, &prev, &nprev, pids[i], clock_mono_ns());
            if (e->o.wait_states)
                engine_procwait_read(pids[i], &waits);
        }
        engine_emit_buf(e, ENGINE_Q_MEM, &waits);
        focus_round(e, &f);
        free(pids);
        next += e->o.mem_period_ms > 0 ? (uint64_t)e->o.mem_period_ms * 1000000u : MEM_PERIOD_NS;
    } while (!engine_wait(e, next));
    free(prev);
    free(f.base);
    engine_evbuf_free(&waits);
    return NULL;
}
