/* The agent's writer: what this node's collectors hand over (their record events, taken from
 * their queues with engine_take) goes out as agent stream lines (ranktop/agentproto.h), each
 * through agentproto_write, the wire's one formatter beside its parser. An agent keeps no
 * history: events are written as they come, in each collector's order, and forgotten.
 *
 * What the writer keeps is small and bounded by what is live: per thread id, the stack its last
 * run line named, so that a sample showing a thread's stack again costs nothing on the wire
 * (the tick that ends every write says every live thread still shows its stack, and the head
 * extends its runs); and the pids of the ranks announced, so that only their exit statuses go
 * out (the exit collector hears of every process of the node). Live figures and devices are
 * the engine's current state, not events: they go out once a second (a rank's GC % only when
 * it changed); the error lines when they change.
 *
 * Invariants: ids are the collectors' own (source 0): a frame or stack is defined on a line
 * before any line that uses it, because the sampler appends a definition to the batch before
 * the event that uses it and the batches keep their order; after a forget ("fg") every id is
 * defined anew before its next use, and every thread's next run goes out. Every line is shorter
 * than AGENTPROTO_LINE_MAX. Runs on the agent's main thread; takes the engine lock only to read
 * the figures and totals. */
#include "engine_priv.h"

#include "ranktop/agentproto.h"
#include "ranktop/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIGURES_EVERY_NS 1000000000ull
#define NO_RUN (-2) /* a thread's last stack: no run sent since its definition */

struct engine_wire {
    struct engine_evbuf got;
    int64_t *last; /* by thread id: the stack of its last run line, or NO_RUN */
    size_t nlast;
    int *pids; /* ranks announced, for their exit statuses */
    size_t npids, cappids;
    struct sent_gc {
        int pid;
        double pct;
    } * gc; /* each rank's GC % as last sent: it goes out when it changes */
    size_t ngc, capgc;
    uint64_t seq, figures_at;
    int64_t last_ts; /* the newest sample time seen */
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
    free(w->got.ev);
    free(w->last);
    free(w->pids);
    free(w->gc);
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

/* One collector event onto the wire, or not: a run that repeats its thread's last stack, an
 * exit of a process that was no rank and the events with no wire form stay off it. */
static void put(struct engine_wire *w, const struct record_event *m, struct engine_out *o)
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
    default:
        break;
    }
    emit(o, m);
}

static int64_t dev_field(const struct smi_device *d, uint32_t bit, int64_t v)
{
    return (d->valid & bit) ? v : -1;
}

/* pct, or -1 (left out of the line) when pid's GC % went out as it is: a steady figure costs
 * no bytes, and the head keeps the last one it got. */
static double gc_changed(struct engine_wire *w, int pid, double pct)
{
    size_t i = 0;

    while (i < w->ngc && w->gc[i].pid != pid)
        i++;
    if (i == w->ngc) {
        if (w->ngc == w->capgc) {
            w->capgc = w->capgc ? w->capgc * 2 : 16;
            w->gc = x_reallocarray(w->gc, w->capgc, sizeof(*w->gc));
        }
        w->gc[w->ngc++] = (struct sent_gc){pid, -1};
    }
    if (pct < 0 || w->gc[i].pct == pct)
        return -1;
    w->gc[i].pct = pct;
    return pct;
}

/* The live figures and devices, as the engine holds them now; lock held. */
static void figures_locked(struct engine_wire *w, const struct engine *e, struct engine_out *o)
{
    for (size_t i = 0; i < e->nlive; i++) {
        const struct engine_rank_live *l = &e->live[i];
        struct record_event m = {.type = RECORD_LIVE};

        m.u.live = (struct record_live){.pid = l->pid,
                                        .dev_mem_mb = l->dev_mem_mb,
                                        .gil_busy_pct = l->gil_busy_pct,
                                        .gil_switches = l->gil_switches,
                                        .gil_waiters = l->gil_waiters,
                                        .gc_pct = gc_changed(w, l->pid, l->gc_pct)};
        for (size_t j = 0; j < l->nshares && j < AGENTPROTO_SHARES; j++) {
            m.u.live.shares[j].ident = l->shares[j].ident;
            m.u.live.shares[j].pct = l->shares[j].pct;
            m.u.live.nshares++;
        }
        emit(o, &m);
    }
    for (size_t i = 0; i < e->ndevs; i++) {
        const struct smi_device *d = &e->devs[i];
        struct record_event m = {.type = RECORD_DEVICE};

        if (!(d->valid & SMI_DEV_INDEX))
            continue;
        m.u.device =
            (struct record_device){.npu = d->kind == SMI_KIND_NPU,
                                   .index = d->index,
                                   .chip = d->chip,
                                   .util_pct = dev_field(d, SMI_DEV_UTIL, d->util_pct),
                                   .mem_used_mb = dev_field(d, SMI_DEV_MEM_USED, d->mem_used_mb),
                                   .mem_total_mb = dev_field(d, SMI_DEV_MEM_TOTAL, d->mem_total_mb),
                                   .temp_c = dev_field(d, SMI_DEV_TEMP, d->temp_c),
                                   .power_w = (d->valid & SMI_DEV_POWER) ? d->power_w : -1.0};
        agentproto_copy_text(m.u.device.name, sizeof(m.u.device.name), d->name);
        emit(o, &m);
    }
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

    engine_take(e, &w->got);
    for (size_t i = 0; i < w->got.n; i++)
        put(w, &w->got.ev[i], o);
    w->got.n = 0;
    pthread_mutex_lock(&e->lock);
    if (now >= w->figures_at) {
        figures_locked(w, e, o);
        w->figures_at = now + FIGURES_EVERY_NS;
    }
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
