/* The engine's GIL thread: probes every target's GIL at GIL_HZ with its own readers and, once
 * a second, hands the recorder busy %, switches per second, waiting threads and GC % as
 * counters on the rank's lane and as the GIL and GC parts of its live figures (events of this
 * node, one batch a second). Probing is I/O; the lock is taken only to read the targets. */
#include "engine_priv.h"

#include "ranktop/python/gil.h"
#include "ranktop/python/pystack.h"
#include "ranktop/base/util.h"

#include <stdlib.h>
#include <string.h>

#define GIL_HZ 500
#define GIL_WINDOW_NS 1000000000ull
#define GIL_RETRY_NS 2000000000ull

struct gslot {
    int pid;
    struct pygil *g;
    struct gilstats st;
    uint64_t next_attach;
    bool dead;
};

struct gilthread {
    struct engine *e;
    struct gslot *s;
    size_t n;
    uint64_t gen;
    struct engine_evbuf ev; /* the second's events */
};

static void gil_sync(struct gilthread *gt)
{
    struct engine *e = gt->e;

    pthread_mutex_lock(&e->lock);
    if (gt->gen != e->targets_gen) {
        gt->gen = e->targets_gen;
        for (size_t i = 0; i < e->ntargets; i++) {
            bool known = e->targets[i].owner != 0; /* workers: sampled, not probed */

            for (size_t k = 0; k < gt->n && !known; k++)
                known = gt->s[k].pid == e->targets[i].pid;
            if (known)
                continue;
            gt->s = x_reallocarray(gt->s, gt->n + 1, sizeof(*gt->s));
            memset(&gt->s[gt->n], 0, sizeof(gt->s[0]));
            gt->s[gt->n].pid = e->targets[i].pid;
            gilstats_init(&gt->s[gt->n++].st);
        }
    }
    pthread_mutex_unlock(&e->lock);
}

static void gil_attach(struct gslot *s, uint64_t now)
{
    struct pyproc *p = NULL;
    struct app_err err;
    int rc;

    if (now < s->next_attach)
        return;
    rc = pyproc_open(s->pid, NULL, &p, &err);
    if (rc == 0)
        s->g = pygil_new(p);
    pyproc_free(p);
    if (rc == APP_E_GONE || rc == APP_E_NOTFOUND)
        s->dead = true;
    else if (!s->g)
        s->next_attach = now + GIL_RETRY_NS;
}

static void gil_probe(struct gslot *s)
{
    struct pygil_sample smp;
    struct app_err err;
    int rc;

    if (s->dead)
        return;
    if (!s->g)
        gil_attach(s, clock_mono_ns());
    if (!s->g)
        return;
    rc = pygil_sample(s->g, &smp, &err);
    if (rc == APP_E_GONE) {
        pygil_free(s->g);
        s->g = NULL;
        s->dead = true;
        return;
    }
    gilstats_add(&s->st, &smp);
}

/* The second's GIL and GC figures of pid as a part of its live figures. */
static void live_figures(struct engine_evbuf *b, int pid, const struct gilfigures *f)
{
    struct record_live *l = &engine_evbuf_add(b, RECORD_LIVE)->u.live;

    *l = (struct record_live){.pid = pid,
                              .set = RECORD_LIVE_GIL | RECORD_LIVE_GC,
                              .dev_mem_mb = -1,
                              .gil_busy_pct = f->busy_pct,
                              .gil_switches = f->switches_per_s,
                              .gil_waiters = f->waiters_avg,
                              .in_gc = f->gc_pct < 0 ? -1 : f->gc_pct >= 50.0,
                              .gc_pct = f->gc_pct,
                              .syscall = -1};
    l->nshares = f->nthreads < RECORD_SHARES ? f->nthreads : RECORD_SHARES;
    for (size_t i = 0; i < l->nshares; i++) {
        l->shares[i].ident = f->threads[i].ident;
        l->shares[i].pct = f->threads[i].holder_pct;
    }
}

/* The second's figures of pid as counter events of this node. */
static void record_figures(struct engine_evbuf *b, int pid, const struct gilfigures *f,
                           uint64_t now)
{
    int64_t t = (int64_t)now;

    *engine_evbuf_add(b, RECORD_COUNTER) =
        record_counter_event(SERIES_GIL_BUSY, pid, t, f->busy_pct);
    *engine_evbuf_add(b, RECORD_COUNTER) =
        record_counter_event(SERIES_GIL_SWITCHES, pid, t, f->switches_per_s);
    if (f->waiters_avg >= 0)
        *engine_evbuf_add(b, RECORD_COUNTER) =
            record_counter_event(SERIES_GIL_WAITERS, pid, t, f->waiters_avg);
    if (f->drop_pending_pct >= 0)
        *engine_evbuf_add(b, RECORD_COUNTER) =
            record_counter_event(SERIES_GIL_DROP, pid, t, f->drop_pending_pct);
    if (f->gc_pct >= 0)
        *engine_evbuf_add(b, RECORD_COUNTER) = record_counter_event(SERIES_GC, pid, t, f->gc_pct);
}

/* Every probed rank's second, handed over as one batch. */
static void gil_publish(struct gilthread *gt, uint64_t now)
{
    for (size_t i = 0; i < gt->n; i++) {
        struct gslot *s = &gt->s[i];
        struct gilfigures f;

        gilstats_figures(&s->st, 0, &f);
        gilstats_next(&s->st);
        if (!f.probes)
            continue;
        record_figures(&gt->ev, s->pid, &f, now);
        live_figures(&gt->ev, s->pid, &f);
    }
    engine_emit_buf(gt->e, ENGINE_Q_GIL, &gt->ev);
}

void *engine_gil_main(void *arg)
{
    struct gilthread gt = {.e = arg};
    uint64_t next = clock_mono_ns(), publish = next + GIL_WINDOW_NS;

    while (!engine_wait(gt.e, next)) {
        gil_sync(&gt);
        for (size_t i = 0; i < gt.n; i++)
            gil_probe(&gt.s[i]);
        next += 1000000000ull / GIL_HZ;
        if (next < clock_mono_ns())
            next = clock_mono_ns();
        if (clock_mono_ns() >= publish) {
            gil_publish(&gt, clock_mono_ns());
            publish += GIL_WINDOW_NS;
        }
    }
    for (size_t i = 0; i < gt.n; i++)
        pygil_free(gt.s[i].g);
    free(gt.s);
    engine_evbuf_free(&gt.ev);
    return NULL;
}
