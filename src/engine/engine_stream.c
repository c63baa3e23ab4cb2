/* The agent's encoder: turns what the engine recorded since the last call into agent stream
 * lines (ranktop/agentproto.h), sending each frame, stack, rank and thread definition once
 * and then only changes: new runs, gone threads, counter points, and figures once a second.
 *
 * Invariants: every line is shorter than AGENTPROTO_LINE_MAX with its newline (texts are cut
 * by agentproto_json_str, deep stacks go in chunks); an id is always defined on a line before
 * the first line that refers to it. Ids are the history's own frame and stack indexes, which
 * change only when the history compacts: then every id is defined again before its next use. Runs
 * on the agent's main thread; it takes the engine lock for the walk and formats into memory, and
 * the caller writes after it returns. */
#include "engine_priv.h"

#include "ranktop/agentproto.h"
#include "ranktop/util.h"

#include <stdarg.h>
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

/* Appends one line; a line that would not fit the limit is a bug in a caller, cut to fit. */
__attribute__((format(printf, 2, 3))) static void line(struct engine_out *o, const char *fmt, ...)
{
    char b[AGENTPROTO_LINE_MAX];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(b, sizeof(b) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof(b) - 2)
        n = (int)sizeof(b) - 2;
    if (o->len + (size_t)n + 2 > o->cap) {
        o->cap = (o->len + (size_t)n + 2) * 2;
        o->buf = x_reallocarray(o->buf, o->cap, 1);
    }
    memcpy(o->buf + o->len, b, (size_t)n);
    o->len += (size_t)n;
    o->buf[o->len++] = '\n';
    o->buf[o->len] = '\0';
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
    char fn[AGENTPROTO_TEXT + 8], file[480];

    if (mark(&s->frames, &s->nframes, id))
        return;
    agentproto_json_str(fn, sizeof(fn), f->function ? f->function : "?");
    agentproto_json_str(file, sizeof(file), f->file ? f->file : "");
    line(o, "{\"t\":\"f\",\"id\":%u,\"fn\":%s,\"file\":%s,\"ln\":%d%s}", id, fn, file, f->line,
         f->native ? ",\"nat\":true" : "");
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
        char ids[AGENTPROTO_CHUNK * 9 + 8];
        size_t k = 0;

        for (uint32_t i = at; i < n && i < at + AGENTPROTO_CHUNK; i++)
            k += (size_t)snprintf(ids + k, sizeof(ids) - k, "%s%u", i > at ? "," : "", fr[i]);
        ids[k] = '\0';
        line(o, "{\"t\":\"s\",\"id\":%u,\"n\":%u,\"at\":%u,\"f\":[%s]}", id, n, at, ids);
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
    char dev[48], py[40];

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
    agentproto_json_str(dev, sizeof(dev), r->device);
    agentproto_json_str(py, sizeof(py), r->python);
    line(o,
         "{\"t\":\"r\",\"p\":%d,\"rank\":%d,\"dev\":%s,\"py\":%s,\"x\":%s,\"xc\":%d,\"xs\":%d,"
         "\"ts\":%llu}",
         r->pid, r->rank, dev, py, r->exited ? "true" : "false", r->exited ? r->exit_code : -1,
         r->exited ? r->exit_signal : 0, (unsigned long long)(r->exited ? r->end : r->start));
}

/* A thread's definition (again when its name changes), its new runs and its end. */
static void send_thread(struct engine_stream *s, const struct history *h, const struct hrank *r,
                        const struct hthread *t, struct engine_out *o)
{
    struct sent_thread *st = thread_state(s, r, t);
    size_t first = t->nruns;

    if (strcmp(st->name, t->name) || st->tid != t->tid) {
        char name[96];

        snprintf(st->name, sizeof(st->name), "%s", t->name);
        st->tid = t->tid;
        agentproto_json_str(name, sizeof(name), t->name);
        line(o,
             "{\"t\":\"th\",\"id\":%u,\"p\":%d,\"w\":%d,\"i\":%llu,\"tid\":%d,\"m\":%s,"
             "\"name\":%s}",
             st->id, r->pid, t->worker, (unsigned long long)t->ident, t->tid,
             t->main ? "true" : "false", name);
    }
    while (first > 0 && (!st->any || t->runs[first - 1].t0 > st->last_t0))
        first--;
    for (size_t i = first; i < t->nruns; i++) {
        const struct hrun *run = &t->runs[i];

        if (run->stack != HSTACK_NONE)
            send_stack(s, h, run->stack, o);
        line(o, "{\"t\":\"o\",\"th\":%u,\"s\":%lld,\"ts\":%llu}", st->id,
             run->stack == HSTACK_NONE ? -1LL : (long long)run->stack, (unsigned long long)run->t0);
        st->any = true;
        st->last_t0 = run->t0;
    }
    if (t->nruns && t->runs[t->nruns - 1].t1 > s->last_ts)
        s->last_ts = t->runs[t->nruns - 1].t1;
    if (t->gone && !st->gone) {
        st->gone = true;
        line(o, "{\"t\":\"g\",\"th\":%u,\"ts\":%llu}", st->id, (unsigned long long)t->last);
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
        char name[80] = "";

        if (c->id == SERIES_NONE)
            continue;
        if (!series_name(c->id)) { /* a device's series: the head needs its name */
            name[0] = ',';
            memcpy(name + 1, "\"n\":", 4);
            agentproto_json_str(name + 5, sizeof(name) - 5, c->name);
        }
        while (k > 0 && c->pts[k - 1].t > s->series_t[i])
            k--;
        for (; k < c->n; k++)
            line(o, "{\"t\":\"c\",\"p\":%d,\"id\":%d%s,\"v\":%.6g,\"ts\":%llu}", c->pid, (int)c->id,
                 name, c->pts[k].v, (unsigned long long)c->pts[k].t);
        if (c->n)
            s->series_t[i] = c->pts[c->n - 1].t;
    }
}

static void send_live(const struct engine *e, struct engine_out *o)
{
    for (size_t i = 0; i < e->nlive; i++) {
        const struct engine_rank_live *l = &e->live[i];
        char sh[AGENTPROTO_SHARES * 40 + 4];
        size_t k = 0;

        for (size_t j = 0; j < l->nshares && j < AGENTPROTO_SHARES; j++)
            k += (size_t)snprintf(sh + k, sizeof(sh) - k, "%s[%llu,%.2f]", j ? "," : "",
                                  (unsigned long long)l->shares[j].ident, l->shares[j].pct);
        sh[k] = '\0';
        line(
            o, "{\"t\":\"l\",\"p\":%d,\"dm\":%lld,\"gb\":%.2f,\"gs\":%.2f,\"gw\":%.2f,\"sh\":[%s]}",
            l->pid, (long long)l->dev_mem_mb, l->gil_busy_pct, l->gil_switches, l->gil_waiters, sh);
    }
}

static long long dev_field(const struct smi_device *d, uint32_t bit, int64_t v)
{
    return (d->valid & bit) ? (long long)v : -1;
}

static void send_devices(const struct engine *e, struct engine_out *o)
{
    for (size_t i = 0; i < e->ndevs; i++) {
        const struct smi_device *d = &e->devs[i];
        char name[128];

        if (!(d->valid & SMI_DEV_INDEX))
            continue;
        agentproto_json_str(name, sizeof(name), d->name);
        line(o,
             "{\"t\":\"d\",\"k\":\"%s\",\"i\":%d,\"c\":%d,\"name\":%s,\"u\":%lld,\"mu\":%lld,"
             "\"mt\":%lld,\"tc\":%lld,\"pw\":%.1f}",
             d->kind == SMI_KIND_NPU ? "npu" : "gpu", d->index, d->chip, name,
             dev_field(d, SMI_DEV_UTIL, d->util_pct),
             dev_field(d, SMI_DEV_MEM_USED, d->mem_used_mb),
             dev_field(d, SMI_DEV_MEM_TOTAL, d->mem_total_mb),
             dev_field(d, SMI_DEV_TEMP, d->temp_c), (d->valid & SMI_DEV_POWER) ? d->power_w : -1.0);
    }
}

static void send_errors(struct engine_stream *s, const struct engine *e, struct engine_out *o)
{
    char all[sizeof(s->errors)], msg[AGENTPROTO_TEXT + 64];

    snprintf(all, sizeof(all), "%.400s%s%.600s", e->attach_err,
             e->attach_err[0] && e->errors[0] ? "; " : "", e->errors);
    if (!strcmp(all, s->errors))
        return;
    memcpy(s->errors, all, sizeof(all));
    agentproto_json_str(msg, sizeof(msg), all);
    line(o, "{\"t\":\"err\",\"msg\":%s}", msg);
}

void engine_stream_tick(struct engine *e, struct engine_stream *s, struct engine_out *o)
{
    uint64_t now = clock_mono_ns();
    const struct history *h = &e->hist;

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
    line(o, "{\"t\":\"k\",\"seq\":%llu,\"ts\":%llu,\"n\":%llu,\"st\":%llu,\"er\":%llu,\"lo\":%llu}",
         (unsigned long long)++s->seq, (unsigned long long)(s->last_ts ? s->last_ts : now),
         (unsigned long long)e->samples, (unsigned long long)e->stacks, (unsigned long long)e->errs,
         (unsigned long long)e->lost);
    pthread_mutex_unlock(&e->lock);
}
