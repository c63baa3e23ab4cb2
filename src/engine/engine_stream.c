/* The agent's differ: turns what the engine recorded since the last call into record events
 * (ranktop/record.h), sending each frame, stack, rank and thread definition once and then only
 * changes: new runs, gone threads, counter points, and figures once a second. Each event goes
 * out as its agent stream line through agentproto_write (ranktop/agentproto.h), the one
 * formatter of the wire, beside its parser.
 *
 * Invariants: every line is shorter than AGENTPROTO_LINE_MAX with its newline (the writer cuts
 * texts, deep stacks go in chunks of AGENTPROTO_CHUNK); an id is always defined on a line before
 * the first line that refers to it. Ids are the history's own frame and stack indexes, which
 * change only when the history compacts: then every id is defined again before its next use. Runs
 * on the agent's main thread; it takes the engine lock for the walk and formats into memory, and
 * the caller writes after it returns. */
#include "engine_priv.h"

#include "ranktop/agentproto.h"
#include "ranktop/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIGURES_EVERY_NS 1000000000ull

struct sent_thread {
    int pid, worker, tid;
    uint64_t ident;
    uint32_t id;
    char name[64];
    bool gone;
    bool any;         /* a run was sent */
    uint64_t last_t0; /* start of the last run sent */
};

struct sent_rank {
    int pid, rank;
    char device[32], python[24];
    bool exited;
};

struct engine_stream {
    uint8_t *frames, *stacks; /* sent flags by id */
    size_t nframes, nstacks;
    struct sent_thread *th;
    size_t nth, thcap;
    struct sent_rank *rk;
    size_t nrk, rkcap;
    uint64_t *series_t; /* time of the last point sent, by series index */
    size_t nseries;
    uint64_t seq, figures_at, last_ts;
    uint64_t gen; /* the history's compaction generation the sent flags are for */
    char errors[1024];
};

struct engine_stream *engine_stream_new(void)
{
    return x_calloc(1, sizeof(struct engine_stream));
}

void engine_stream_free(struct engine_stream *s)
{
    if (!s)
        return;
    free(s->frames);
    free(s->stacks);
    free(s->th);
    free(s->rk);
    free(s->series_t);
    free(s);
}

void engine_out_fini(struct engine_out *o)
{
    free(o->buf);
    memset(o, 0, sizeof(*o));
}

/* Appends the line of event m (none for a figure the wire cannot carry). */
static void emit(struct engine_out *o, const struct record_event *m)
{
    if (o->cap - o->len < AGENTPROTO_LINE_MAX) {
        o->cap = (o->len + AGENTPROTO_LINE_MAX) * 2;
        o->buf = x_reallocarray(o->buf, o->cap, 1);
    }
    o->len += agentproto_write(o->buf + o->len, o->cap - o->len, m);
}

/* Marks id in a sent-flag array, growing it; returns whether it was already marked. */
static bool mark(uint8_t **v, size_t *n, size_t id)
{
    if (id >= *n) {
        size_t m = id + 1 > *n * 2 ? id + 1 : *n * 2;

        *v = x_reallocarray(*v, m, 1);
        memset(*v + *n, 0, m - *n);
        *n = m;
    }
    if ((*v)[id])
        return true;
    (*v)[id] = 1;
    return false;
}

static void send_frame(struct engine_stream *s, const struct history *h, uint32_t id,
                       struct engine_out *o)
{
    const struct hframe *f = &h->frames[id];
    struct record_event m = {.type = RECORD_FRAME};

    if (mark(&s->frames, &s->nframes, id))
        return;
    m.u.frame.id = id;
    agentproto_copy_text(m.u.frame.function, sizeof(m.u.frame.function),
                         f->function ? f->function : "?");
    agentproto_copy_text(m.u.frame.file, sizeof(m.u.frame.file), f->file ? f->file : "");
    m.u.frame.line = f->line;
    m.u.frame.native = f->native;
    emit(o, &m);
}

/* Defines a stack (its frames first), in chunks of AGENTPROTO_CHUNK frame ids. */
static void send_stack(struct engine_stream *s, const struct history *h, uint32_t id,
                       struct engine_out *o)
{
    const uint32_t *fr = history_stack_frames(h, id);
    uint32_t n = h->stacks[id].nframes;

    if (id < s->nstacks && s->stacks[id])
        return;
    for (uint32_t i = 0; i < n; i++)
        send_frame(s, h, fr[i], o);
    mark(&s->stacks, &s->nstacks, id);
    for (uint32_t at = 0; at == 0 || at < n; at += AGENTPROTO_CHUNK) {
        struct record_event m = {.type = RECORD_STACK};

        m.u.stack.id = id;
        m.u.stack.n = n;
        m.u.stack.at = at;
        m.u.stack.nchunk = n - at < AGENTPROTO_CHUNK ? n - at : AGENTPROTO_CHUNK;
        if (m.u.stack.nchunk)
            memcpy(m.u.stack.frames, fr + at, m.u.stack.nchunk * sizeof(*fr));
        emit(o, &m);
    }
}

static struct sent_thread *thread_state(struct engine_stream *s, const struct hrank *r,
                                        const struct hthread *t)
{
    for (size_t i = 0; i < s->nth; i++)
        if (s->th[i].pid == r->pid && s->th[i].worker == t->worker && s->th[i].ident == t->ident &&
            (s->th[i].tid == t->tid || !s->th[i].tid) && (!s->th[i].gone || t->gone))
            return &s->th[i];
    if (s->nth == s->thcap) {
        s->thcap = s->thcap ? s->thcap * 2 : 64;
        s->th = x_reallocarray(s->th, s->thcap, sizeof(*s->th));
    }
    s->th[s->nth] = (struct sent_thread){.pid = r->pid,
                                         .worker = t->worker,
                                         .tid = t->tid,
                                         .ident = t->ident,
                                         .id = (uint32_t)s->nth};
    s->th[s->nth].name[0] = '\1'; /* never equal to a real name: the definition goes out */
    return &s->th[s->nth++];
}

static void send_rank(struct engine_stream *s, const struct hrank *r, struct engine_out *o)
{
    struct sent_rank *k = NULL;
    struct record_event m = {.type = RECORD_RANK};

    for (size_t i = 0; i < s->nrk && !k; i++)
        if (s->rk[i].pid == r->pid)
            k = &s->rk[i];
    if (k && k->rank == r->rank && k->exited == r->exited && !strcmp(k->device, r->device) &&
        !strcmp(k->python, r->python))
        return;
    if (!k) {
        if (s->nrk == s->rkcap) {
            s->rkcap = s->rkcap ? s->rkcap * 2 : 16;
            s->rk = x_reallocarray(s->rk, s->rkcap, sizeof(*s->rk));
        }
        k = &s->rk[s->nrk++];
        k->pid = r->pid;
    }
    k->rank = r->rank;
    k->exited = r->exited;
    snprintf(k->device, sizeof(k->device), "%s", r->device);
    snprintf(k->python, sizeof(k->python), "%s", r->python);
    m.u.rank = (struct record_rank){.pid = r->pid,
                                    .rank = r->rank,
                                    .local_rank = -1,
                                    .world_size = -1,
                                    .exited = r->exited,
                                    .exit_code = r->exited ? r->exit_code : -1,
                                    .exit_signal = r->exited ? r->exit_signal : 0,
                                    .ts = (int64_t)(r->exited ? r->end : r->start)};
    agentproto_copy_text(m.u.rank.device, sizeof(m.u.rank.device), r->device);
    agentproto_copy_text(m.u.rank.python, sizeof(m.u.rank.python), r->python);
    emit(o, &m);
}

/* A thread's definition (again when its name changes), its new runs and its end. */
static void send_thread(struct engine_stream *s, const struct history *h, const struct hrank *r,
                        const struct hthread *t, struct engine_out *o)
{
    struct sent_thread *st = thread_state(s, r, t);
    size_t first = t->nruns;

    if (strcmp(st->name, t->name) || st->tid != t->tid) {
        struct record_event m = {.type = RECORD_THREAD};

        snprintf(st->name, sizeof(st->name), "%s", t->name);
        st->tid = t->tid;
        m.u.thread = (struct record_thread){.id = st->id,
                                            .pid = r->pid,
                                            .worker = t->worker,
                                            .ident = t->ident,
                                            .tid = t->tid,
                                            .main = t->main};
        agentproto_copy_text(m.u.thread.name, sizeof(m.u.thread.name), t->name);
        emit(o, &m);
    }
    while (first > 0 && (!st->any || t->runs[first - 1].t0 > st->last_t0))
        first--;
    for (size_t i = first; i < t->nruns; i++) {
        const struct hrun *run = &t->runs[i];
        struct record_event m = {.type = RECORD_RUN};

        if (run->stack != HSTACK_NONE)
            send_stack(s, h, run->stack, o);
        m.u.run = (struct record_run){st->id, run->stack == HSTACK_NONE ? -1 : (int64_t)run->stack,
                                      (int64_t)run->t0};
        emit(o, &m);
        st->any = true;
        st->last_t0 = run->t0;
    }
    if (t->nruns && t->runs[t->nruns - 1].t1 > s->last_ts)
        s->last_ts = t->runs[t->nruns - 1].t1;
    if (t->gone && !st->gone) {
        struct record_event m = {.type = RECORD_GONE};

        st->gone = true;
        m.u.run = (struct record_run){st->id, -1, (int64_t)t->last};
        emit(o, &m);
    }
}

/* Counter points newer than the last one sent of each series. */
static void send_counters(struct engine_stream *s, const struct history *h, struct engine_out *o)
{
    if (h->nseries > s->nseries) {
        s->series_t = x_reallocarray(s->series_t, h->nseries, sizeof(*s->series_t));
        memset(s->series_t + s->nseries, 0, (h->nseries - s->nseries) * sizeof(*s->series_t));
        s->nseries = h->nseries;
    }
    for (size_t i = 0; i < h->nseries; i++) {
        const struct hseries *c = &h->series[i];
        size_t k = c->n;

        if (c->id == SERIES_NONE)
            continue;
        while (k > 0 && c->pts[k - 1].t > s->series_t[i])
            k--;
        for (; k < c->n; k++) {
            struct record_event m =
                record_counter_event((int)c->id, c->pid, (int64_t)c->pts[k].t, c->pts[k].v);

            if (!series_name(c->id)) /* a device's series: the head needs its name */
                agentproto_copy_text(m.u.counter.name, sizeof(m.u.counter.name), c->name);
            emit(o, &m);
        }
        if (c->n)
            s->series_t[i] = c->pts[c->n - 1].t;
    }
}

static void send_live(const struct engine *e, struct engine_out *o)
{
    for (size_t i = 0; i < e->nlive; i++) {
        const struct engine_rank_live *l = &e->live[i];
        struct record_event m = {.type = RECORD_LIVE};

        m.u.live = (struct record_live){.pid = l->pid,
                                        .dev_mem_mb = l->dev_mem_mb,
                                        .gil_busy_pct = l->gil_busy_pct,
                                        .gil_switches = l->gil_switches,
                                        .gil_waiters = l->gil_waiters,
                                        .gc_pct = l->gc_pct};
        for (size_t j = 0; j < l->nshares && j < AGENTPROTO_SHARES; j++) {
            m.u.live.shares[j].ident = l->shares[j].ident;
            m.u.live.shares[j].pct = l->shares[j].pct;
            m.u.live.nshares++;
        }
        emit(o, &m);
    }
}

static int64_t dev_field(const struct smi_device *d, uint32_t bit, int64_t v)
{
    return (d->valid & bit) ? v : -1;
}

static void send_devices(const struct engine *e, struct engine_out *o)
{
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

static void send_errors(struct engine_stream *s, const struct engine *e, struct engine_out *o)
{
    char all[sizeof(s->errors)];
    struct record_event m = {.type = RECORD_ERROR};

    snprintf(all, sizeof(all), "%.400s%s%.600s", e->attach_err,
             e->attach_err[0] && e->errors[0] ? "; " : "", e->errors);
    if (!strcmp(all, s->errors))
        return;
    memcpy(s->errors, all, sizeof(all));
    agentproto_copy_text(m.u.text, sizeof(m.u.text), all);
    emit(o, &m);
}

void engine_stream_tick(struct engine *e, struct engine_stream *s, struct engine_out *o)
{
    uint64_t now = clock_mono_ns();
    const struct history *h = &e->hist;
    struct record_event tick = {.type = RECORD_TICK};

    pthread_mutex_lock(&e->lock);
    /* The history renumbered its frames and stacks: every id is defined again before use
     * (the head takes a new definition of an id over the old one). */
    if (s->gen != h->gen) {
        memset(s->frames, 0, s->nframes);
        memset(s->stacks, 0, s->nstacks);
        s->gen = h->gen;
    }
    for (size_t i = 0; i < h->nranks; i++) {
        send_rank(s, &h->ranks[i], o);
        for (size_t k = 0; k < h->ranks[i].nthreads; k++)
            send_thread(s, h, &h->ranks[i], &h->ranks[i].threads[k], o);
    }
    send_counters(s, h, o);
    if (now >= s->figures_at) {
        send_live(e, o);
        send_devices(e, o);
        s->figures_at = now + FIGURES_EVERY_NS;
    }
    send_errors(s, e, o);
    /* Every live thread showed its stack at the newest sample: the head extends its runs. */
    tick.u.tick = (struct record_tick){.seq = ++s->seq,
                                       .ts = (int64_t)(s->last_ts ? s->last_ts : now),
                                       .passes = e->samples,
                                       .stacks = e->stacks,
                                       .errors = e->errs,
                                       .lost = e->lost};
    emit(o, &tick);
    pthread_mutex_unlock(&e->lock);
}
