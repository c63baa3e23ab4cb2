/* The agent's writer: what this node's collectors hand over (their record events, taken from
 * their queues with engine_take) goes out as agent stream lines (ranktop/remote/agentproto.h), each
 * through agentproto_write, the wire's one formatter beside its parser. An agent keeps no
 * history: events are written as they come, in each collector's order, and forgotten.
 *
 * What the writer keeps is small and bounded by what is live: per thread id, the stack its last
 * run line named, so that a sample showing a thread's stack again costs nothing on the wire
 * (the tick that ends every write says every live thread still shows its stack, and the head
 * extends its runs); and the pids of the ranks announced, so that only their exit statuses go
 * out (the exit collector hears of every process of the node). Devices go out as discovery
 * hands them over, at most one pass's list a second. A rank's live figures come in parts
 * (record_live.set) from several collectors, and a wire line ("l") is the whole of what the wire
 * carries of them (a 1.1 head sets every field of it): the writer folds the parts into one record
 * per rank and writes the ranks told since their last line once a second (GC % only when it
 * changed); the parts the wire has no field for (wait, stopped) stay off it. A rank not told for
 * LIVE_STALE_NS is forgotten. The error lines go out when they change.
 *
 * Invariants: ids are the collectors' own (source 0): a frame or stack is defined on a line
 * before any line that uses it, because the sampler appends a definition to the batch before
 * the event that uses it and the batches keep their order; after a forget ("fg") every id is
 * defined anew before its next use, and every thread's next run goes out. Every line is shorter
 * than AGENTPROTO_LINE_MAX. Runs on the agent's main thread; takes the engine lock only to read
 * the error lines and totals. */
#include "engine_priv.h"

#include "ranktop/remote/agentproto.h"
#include "ranktop/base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIGURES_EVERY_NS 1000000000ull
#define LIVE_STALE_NS 10000000000ull
#define WIRE_PARTS (RECORD_LIVE_DEVMEM | RECORD_LIVE_GIL | RECORD_LIVE_GC)
#define NO_RUN (-2) /* a thread's last stack: no run sent since its definition */

struct engine_wire {
    struct engine_evbuf got;
    int64_t *last; /* by thread id: the stack of its last run line, or NO_RUN */
    size_t nlast;
    int *pids; /* ranks announced, for their exit statuses */
    size_t npids, cappids;
    struct wire_live {
        struct engine_rank_live f; /* the wire's parts of the rank's figures, folded */
        double gc_sent;            /* its GC % as last sent (-1 none): out when it changes */
        uint64_t told;             /* when a collector last told a part */
        bool dirty;                /* told since its last line */
    } * live;
    size_t nlive, caplive;
    uint64_t seq, figures_at;
    uint64_t devs_at; /* the next discovery pass whose devices go out */
    bool devs_out;    /* the current pass's do */
    int64_t last_ts;  /* the newest sample time seen */
    char errors[1024];
};

struct engine_wire *engine_wire_new(void)
{
    return x_calloc(1, sizeof(struct engine_wire));
}

void engine_wire_free(struct engine_wire *w)
{
    if (!w)
        return;
    engine_evbuf_free(&w->got);
    free(w->last);
    free(w->pids);
    free(w->live);
    free(w);
}

void engine_out_fini(struct engine_out *o)
{
    free(o->buf);
    memset(o, 0, sizeof(*o));
}

/* Appends the line of event m (none for an event the wire cannot carry). */
static void emit(struct engine_out *o, const struct record_event *m)
{
    if (o->cap - o->len < AGENTPROTO_LINE_MAX) {
        o->cap = (o->len + AGENTPROTO_LINE_MAX) * 2;
        o->buf = x_reallocarray(o->buf, o->cap, 1);
    }
    o->len += agentproto_write(o->buf + o->len, o->cap - o->len, m);
}

/* The last-stack slot of thread id (the sampler's ids are dense from 0, below RECORD_ID_MAX). */
static int64_t *last_of(struct engine_wire *w, uint32_t id)
{
    if (id >= RECORD_ID_MAX)
        return NULL;
    if (id >= w->nlast) {
        size_t n = id + 1 > w->nlast * 2 ? id + 1 : w->nlast * 2;

        w->last = x_reallocarray(w->last, n, sizeof(*w->last));
        for (size_t i = w->nlast; i < n; i++)
            w->last[i] = NO_RUN;
        w->nlast = n;
    }
    return &w->last[id];
}

static void note_pid(struct engine_wire *w, int pid)
{
    for (size_t i = 0; i < w->npids; i++)
        if (w->pids[i] == pid)
            return;
    if (w->npids == w->cappids) {
        w->cappids = w->cappids ? w->cappids * 2 : 16;
        w->pids = x_reallocarray(w->pids, w->cappids, sizeof(*w->pids));
    }
    w->pids[w->npids++] = pid;
}

/* An exited rank's pid is dropped once its status went out; true when it was announced. */
static bool take_pid(struct engine_wire *w, int pid)
{
    for (size_t i = 0; i < w->npids; i++)
        if (w->pids[i] == pid) {
            w->pids[i] = w->pids[--w->npids];
            return true;
        }
    return false;
}

/* The wire's parts of a rank's live figures, folded into its record (created on first use). */
static void fold_live(struct engine_wire *w, const struct record_live *m, uint64_t now)
{
    struct record_live part = *m;
    struct wire_live *l = NULL;

    part.set &= WIRE_PARTS;
    if (!part.set)
        return;
    for (size_t i = 0; i < w->nlive && !l; i++)
        if (w->live[i].f.pid == m->pid)
            l = &w->live[i];
    if (!l) {
        if (w->nlive == w->caplive) {
            w->caplive = w->caplive ? w->caplive * 2 : 16;
            w->live = x_reallocarray(w->live, w->caplive, sizeof(*w->live));
        }
        l = &w->live[w->nlive++];
        engine_live_init(&l->f, m->pid);
        l->gc_sent = -1;
    }
    engine_live_merge(&l->f, &part);
    l->told = now;
    l->dirty = true;
}

/* One collector event onto the wire, or not: a run that repeats its thread's last stack, an
 * exit of a process that was no rank and the events with no wire form stay off it; live
 * figures are folded (live_lines). */
static void put(struct engine_wire *w, const struct record_event *m, struct engine_out *o,
                uint64_t now)
{
    int64_t *last;

    switch (m->type) {
    case RECORD_RANK:
        note_pid(w, m->u.rank.pid);
        break;
    case RECORD_THREAD: /* (re)defined: its next run goes out whatever it shows */
    case RECORD_GONE:
        if ((last = last_of(w, m->type == RECORD_THREAD ? m->u.thread.id : m->u.run.thread)))
            *last = NO_RUN;
        if (m->type == RECORD_THREAD && m->u.thread.task)
            return; /* a task lane: agents read no tasks, and the wire has no lanes */
        break;
    case RECORD_RUN:
        if (m->u.run.ts > w->last_ts)
            w->last_ts = m->u.run.ts;
        if (!(last = last_of(w, m->u.run.thread)) || *last == m->u.run.stack)
            return;
        *last = m->u.run.stack;
        break;
    case RECORD_FORGET: /* the stack ids of the last runs mean nothing now */
        for (size_t i = 0; i < w->nlast; i++)
            w->last[i] = NO_RUN;
        break;
    case RECORD_EXIT:
        if (!take_pid(w, m->u.exit.pid))
            return;
        break;
    case RECORD_LIVE: /* folded, written once a second */
        fold_live(w, &m->u.live, now);
        return;
    case RECORD_DEVICE:
        if (m->u.device.first) { /* a discovery pass's list: at most one a second goes out */
            w->devs_out = now >= w->devs_at;
            if (w->devs_out)
                w->devs_at = now + FIGURES_EVERY_NS;
        }
        /* a pass that found none, or a device without an index: no wire form */
        if (!w->devs_out || m->u.device.none || m->u.device.index < 0)
            return;
        break;
    default:
        break;
    }
    emit(o, m);
}

/* The line of a rank told since its last one: what the wire carries of its figures, its GC %
 * only when it changed (a steady figure costs no bytes; the head keeps the last one it got). */
static void live_line(struct wire_live *l, struct engine_out *o)
{
    struct record_event m = {.type = RECORD_LIVE};
    double gc = l->f.gc_pct >= 0 && l->f.gc_pct != l->gc_sent ? l->f.gc_pct : -1;

    m.u.live = (struct record_live){.pid = l->f.pid,
                                    .dev_mem_mb = l->f.dev_mem_mb,
                                    .gil_busy_pct = l->f.gil_busy_pct,
                                    .gil_switches = l->f.gil_switches,
                                    .gil_waiters = l->f.gil_waiters,
                                    .gc_pct = gc};
    for (size_t j = 0; j < l->f.nshares && j < AGENTPROTO_SHARES; j++) {
        m.u.live.shares[j].ident = l->f.shares[j].ident;
        m.u.live.shares[j].pct = l->f.shares[j].pct;
        m.u.live.nshares++;
    }
    if (gc >= 0)
        l->gc_sent = gc;
    l->dirty = false;
    emit(o, &m);
}

/* Once a second: a line for each rank told since its last; ranks not told for a while (gone)
 * are forgotten. */
static void live_lines(struct engine_wire *w, struct engine_out *o, uint64_t now)
{
    size_t k = 0;

    for (size_t i = 0; i < w->nlive; i++) {
        if (w->live[i].dirty)
            live_line(&w->live[i], o);
        else if (now - w->live[i].told > LIVE_STALE_NS)
            continue;
        w->live[k++] = w->live[i];
    }
    w->nlive = k;
}

/* The error lines when they changed; lock held. */
static void errors_locked(struct engine_wire *w, const struct engine *e, struct engine_out *o)
{
    char all[sizeof(w->errors)];
    struct record_event m = {.type = RECORD_ERROR};

    snprintf(all, sizeof(all), "%.400s%s%.600s", e->attach_err,
             e->attach_err[0] && e->errors[0] ? "; " : "", e->errors);
    if (!strcmp(all, w->errors))
        return;
    memcpy(w->errors, all, sizeof(all));
    agentproto_copy_text(m.u.text, sizeof(m.u.text), all);
    emit(o, &m);
}

void engine_wire_tick(struct engine *e, struct engine_wire *w, struct engine_out *o)
{
    uint64_t now = clock_mono_ns();
    struct record_event tick = {.type = RECORD_TICK};
    const struct record_event *ev;
    size_t off = 0;

    engine_take(e, &w->got);
    while ((ev = engine_evbuf_next(&w->got, &off)))
        put(w, ev, o, now);
    engine_evbuf_clear(&w->got);
    if (now >= w->figures_at) {
        live_lines(w, o, now);
        w->figures_at = now + FIGURES_EVERY_NS;
    }
    pthread_mutex_lock(&e->lock);
    errors_locked(w, e, o);
    /* Every live thread showed its stack at the newest sample: the head extends its runs. */
    tick.u.tick = (struct record_tick){.seq = ++w->seq,
                                       .ts = w->last_ts ? w->last_ts : (int64_t)now,
                                       .passes = e->samples,
                                       .stacks = e->stacks,
                                       .errors = e->errs,
                                       .lost = e->lost};
    pthread_mutex_unlock(&e->lock);
    emit(o, &tick);
}
