/* The head's side of one agent stream: turns each message of a host's agent into history
 * records, as the local collectors do for this node. A rank there is keyed engine_key(slot,
 * pid); frames, stacks and threads are defined by the agent with ids that this file maps to
 * the history's own; times are the agent's clock plus the estimated offset.
 *
 * Invariants: messages are validated by the parser already; what refers to something
 * undefined, or an id beyond AGENTPROTO_ID_MAX or far past a table's end, is dropped and
 * becomes the host's error line, never a crash. Every table of a host is charged to its budget
 * (engine_rkeys.c), an incomplete stack holds only the frame ids received, and ranks and
 * device series per host are capped, so that what the head holds for a host is bounded by
 * what its bytes can justify and by a fixed amount. A host is named by the head (its --hosts
 * entry), never by its agent; a second hello is a protocol error. Every agent time is
 * checked against the agent's clock and saturated. Runs on the remote collector's thread with
 * the engine lock held (rlink_apply). */
#include "engine_remote_priv.h"

#include "ranktop/hash.h"
#include "ranktop/util.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How far an id may run past what the agent defined: frame and stack ids are its history's
 * indexes (dense but for what it never sent), thread ids count up from 0. So a table grows
 * with the definitions received, not with what one line claims. */
#define ID_SLACK 65536
#define THREAD_SLACK 1024
#define TICK_MIN_NS 5000000

void rlink_set_error(struct rlink *l, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(l->error, sizeof(l->error), fmt, ap);
    va_end(ap);
}

void rlink_reset_ids(struct rlink *l)
{
    for (size_t i = 0; i < l->nframes; i++) {
        free(l->frames[i].fn);
        free(l->frames[i].file);
    }
    for (size_t i = 0; i < l->nstacks; i++)
        free(l->stacks[i].ids);
    free(l->frames);
    free(l->stacks);
    free(l->threads);
    l->frames = NULL;
    l->stacks = NULL;
    l->threads = NULL;
    l->nframes = l->nstacks = l->nthreads = l->nlive_threads = 0;
    l->def_frames = l->def_stacks = l->def_threads = 0;
    l->ranks_said = l->threads_said = false;
    l->hello = false;
    l->rtt_ns = INT64_MAX;
    l->last_tick = -1;
    l->mem = l->kcap * sizeof(*l->keys) + (l->series ? RLINK_MAX_SERIES * sizeof(*l->series) : 0);
}

void rlink_keep_totals(struct rlink *l)
{
    l->base[0] += l->passes;
    l->base[1] += l->nstack;
    l->base[2] += l->errors;
    l->base[3] += l->lost;
    l->passes = l->nstack = l->errors = l->lost = 0;
}

/* ---- applying messages (engine lock held) ---- */

/* An agent time on the head's clock, within [the history's start, the head's now + slack]:
 * the agent's clock cannot run ahead of its hello by more than the head's has since (plus
 * RLINK_FUTURE_NS for the offset's error), so a later time is a broken or hostile agent's,
 * said once and held at that bound. No sum can overflow. */
static uint64_t head_time(const struct engine *e, struct rlink *l, int64_t agent_ns)
{
    int64_t since = l->now > l->up_since ? (int64_t)(l->now - l->up_since) : 0;
    int64_t agent_max = l->hello_mono > INT64_MAX - since - RLINK_FUTURE_NS
                            ? INT64_MAX
                            : l->hello_mono + since + RLINK_FUTURE_NS;
    int64_t t;

    if (agent_ns > agent_max) {
        if (!l->error[0])
            rlink_set_error(l,
                            "agent stream: a time %.3g s past the agent's clock (held at the "
                            "head's now)",
                            ((double)agent_ns - (double)agent_max) / 1e9);
        agent_ns = agent_max;
    }
    if (__builtin_add_overflow(agent_ns, l->offset_ns, &t))
        t = l->offset_ns > 0 ? INT64_MAX : INT64_MIN;
    if (t < (int64_t)e->hist.t0)
        return e->hist.t0;
    return (uint64_t)t > l->now + (uint64_t)RLINK_FUTURE_NS ? l->now + (uint64_t)RLINK_FUTURE_NS
                                                            : (uint64_t)t;
}

/* Grows a table so that id is an index into it, doubling, within the host's budget; false
 * when id is at or past limit (the host's error line) or the budget is spent (the host is
 * cut off). */
static bool fit(struct rlink *l, void **v, size_t *n, size_t size, uint32_t id, size_t limit,
                const char *what)
{
    size_t m;

    if (id < *n)
        return true;
    if (id >= AGENTPROTO_ID_MAX || id >= limit) {
        rlink_set_error(l, "agent stream: %s id %u out of range", what, id);
        return false;
    }
    m = id + 1 > *n * 2 ? id + 1 : *n * 2;
    m = m < 64 ? 64 : m > limit ? limit : m;
    if (!rlink_budget(l, (m - *n) * size, what))
        return false;
    *v = x_reallocarray(*v, m, size);
    memset((char *)*v + *n * size, 0, (m - *n) * size);
    *n = m;
    return true;
}

static void on_frame(struct rlink *l, const struct record_frame *f)
{
    struct rframe *r;

    if (!fit(l, (void **)&l->frames, &l->nframes, sizeof(*l->frames), f->id,
             2 * l->def_frames + ID_SLACK, "frame"))
        return;
    r = &l->frames[f->id];
    if (r->fn)
        l->mem -= strlen(r->fn) + strlen(r->file) + 2;
    else
        l->def_frames++;
    free(r->fn);
    free(r->file);
    r->fn = r->file = NULL;
    if (!rlink_budget(l, strlen(f->function) + strlen(f->file) + 2, "frame texts"))
        return;
    r->fn = x_strdup(f->function);
    r->file = x_strdup(f->file);
    r->line = f->line;
    r->native = f->native;
}

/* Interns a complete stack; its frames were defined before (else the stack is dropped). */
static void stack_done(struct engine *e, struct rlink *l, struct rstack *s, uint32_t id)
{
    struct hframe *fr = x_calloc(s->n ? s->n : 1, sizeof(*fr));

    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t f = s->ids[i];

        if (f >= l->nframes || !l->frames[f].fn) {
            rlink_set_error(l, "agent stream: stack %u names undefined frame %u", id, f);
            free(fr);
            return;
        }
        /* The wire has them outermost first; the history interns innermost first. */
        fr[s->n - 1 - i] = (struct hframe){l->frames[f].fn, l->frames[f].file, l->frames[f].line,
                                           l->frames[f].native};
    }
    s->head = history_intern_stack(&e->hist, fr, s->n);
    free(fr);
}

/* Room for `want` frame ids in an incomplete stack: a stack announced with 65536 frames holds
 * only what its chunks brought (doubling up to n), so that its size is paid for in bytes. */
static bool stack_room(struct rlink *l, struct rstack *s, uint32_t want)
{
    uint32_t cap = s->cap ? s->cap : 16;

    if (want <= s->cap && s->ids)
        return true;
    while (cap < want)
        cap *= 2;
    cap = cap > s->n && s->n ? s->n : cap;
    cap = cap < want ? want : cap;
    if (!rlink_budget(l, (size_t)(cap - s->cap) * sizeof(*s->ids), "stacks"))
        return false;
    s->ids = x_reallocarray(s->ids, cap ? cap : 1, sizeof(*s->ids));
    s->cap = cap;
    return true;
}

static void on_stack(struct engine *e, struct rlink *l, const struct record_stack *m)
{
    struct rstack *s;

    if (!fit(l, (void **)&l->stacks, &l->nstacks, sizeof(*l->stacks), m->id,
             2 * l->def_stacks + ID_SLACK, "stack"))
        return;
    s = &l->stacks[m->id];
    if (m->at == 0) {
        l->def_stacks += !s->ids;
        l->mem -= s->cap * sizeof(*s->ids);
        free(s->ids);
        *s = (struct rstack){.head = HSTACK_NONE, .n = m->n};
    } else if (m->at != s->got || m->n != s->n || s->head != HSTACK_NONE) {
        rlink_set_error(l, "agent stream: stack %u chunk out of order", m->id);
        return;
    }
    if (!stack_room(l, s, s->got + m->nchunk))
        return;
    if (m->nchunk)
        memcpy(s->ids + s->got, m->frames, m->nchunk * sizeof(*s->ids));
    s->got += m->nchunk;
    if (s->got == s->n)
        stack_done(e, l, s, m->id);
}

/* A rank number another live process already has: said as this host's error. */
static void check_claim(struct engine *e, struct rlink *l, int key, int rank)
{
    size_t i = rclaims_find(l->claims, &e->hist, rank, key);
    const struct hrank *o = i == SIZE_MAX ? NULL : &e->hist.ranks[i];

    if (o)
        rlink_set_error(l, "rank %d is claimed twice: %s pid %d and %s pid %d", rank, o->host,
                        history_key_pid(o->pid), l->agent_host, history_key_pid(key));
}

/* The history's index of the rank with this key (live or the newest exited one), through the
 * host's key set; SIZE_MAX when the history holds none. */
static size_t rank_index(const struct history *h, struct rkey *k)
{
    if (k->ri < h->nranks && h->ranks[k->ri].pid == k->key)
        return k->ri;
    k->ri = SIZE_MAX;
    for (size_t i = h->nranks; i-- > 0 && k->ri == SIZE_MAX;)
        if (h->ranks[i].pid == k->key)
            k->ri = i;
    return k->ri;
}

/* The history's live rank for key, made when new; NULL past the host's cap on live ranks (or
 * its budget). What history_rank would find is found through the key set, not a scan. */
static struct hrank *host_rank(struct engine *e, struct rlink *l, int key,
                               const struct record_rank *m)
{
    struct history *h = &e->hist;
    struct rkey *k = rlink_key_find(l, key);
    size_t ri = k ? rank_index(h, k) : SIZE_MAX;
    struct hrank *r;

    if (ri != SIZE_MAX && !h->ranks[ri].exited) {
        r = &h->ranks[ri];
        if (r->rank < 0 && m->rank >= 0)
            r->rank = m->rank;
        if (!r->device[0] && m->device[0])
            snprintf(r->device, sizeof(r->device), "%s", m->device);
        return r;
    }
    if ((!k || !k->live) && l->nlive >= RLINK_MAX_RANKS) {
        if (!l->ranks_said)
            rlink_set_error(l,
                            "more than %d live ranks on this host: pid %d and later ones are "
                            "not shown",
                            RLINK_MAX_RANKS, m->pid);
        l->ranks_said = true;
        return NULL;
    }
    if (!k && !(k = rlink_key_add(l, key)))
        return NULL;
    if (!k->live)
        l->nlive++;
    k->live = true;
    r = history_rank(h, key, m->rank, m->device);
    k->ri = (size_t)(r - h->ranks);
    return r;
}

static void on_rank(struct engine *e, struct rlink *l, const struct record_rank *m)
{
    int key = engine_key(l->slot, m->pid);
    struct hrank *r = host_rank(e, l, key, m);
    bool renumbered;

    if (!r)
        return;
    renumbered = r->rank != m->rank || !r->start;
    if (renumbered)
        check_claim(e, l, key, m->rank);
    snprintf(r->host, sizeof(r->host), "%s", l->agent_host);
    r->rank = m->rank;
    if (renumbered)
        rclaims_note(l->claims, &e->hist, (size_t)(r - e->hist.ranks));
    snprintf(r->device, sizeof(r->device), "%s", m->device);
    snprintf(r->python, sizeof(r->python), "%s", m->python);
    if (!r->start)
        r->start = head_time(e, l, m->ts);
    if (m->exited && !r->exited) {
        struct rkey *k = rlink_key_find(l, key);

        history_rank_exit(r, head_time(e, l, m->ts));
        r->exit_code = m->exit_code;
        r->exit_signal = m->exit_signal;
        if (k && k->live) {
            k->live = false;
            l->nlive--;
        }
    }
}

static struct hthread *hist_thread(struct engine *e, struct rlink *l, struct rthread *t);

static void on_thread(struct engine *e, struct rlink *l, const struct record_thread *m)
{
    struct rthread *t;
    struct hthread *ht;

    if (!fit(l, (void **)&l->threads, &l->nthreads, sizeof(*l->threads), m->id,
             l->def_threads + THREAD_SLACK, "thread"))
        return;
    t = &l->threads[m->id];
    /* An id given to another thread: the one it named has ended (else it would stay live in
     * the history for good, beyond the reach of the window and the memory cap). Only a thread
     * that was ever shown has a record (ri found) to end. */
    if (t->defined && !t->gone && t->ri != SIZE_MAX &&
        (t->key != engine_key(l->slot, m->pid) || t->worker != m->worker || t->ident != m->ident) &&
        (ht = hist_thread(e, l, t))) {
        history_thread_gone(ht, ht->last);
        t->gone = true;
        l->nlive_threads--;
    }
    if (!t->defined) {
        if (l->nlive_threads >= RLINK_MAX_THREADS) {
            if (!l->threads_said)
                rlink_set_error(l,
                                "more than %d live threads on this host: thread %u and later "
                                "ones are not shown",
                                RLINK_MAX_THREADS, m->id);
            l->threads_said = true;
            return;
        }
        *t = (struct rthread){.cur = HSTACK_NONE, .cur_wire = -1, .ri = SIZE_MAX, .ti = SIZE_MAX};
        l->nlive_threads++;
        l->def_threads++;
    }
    t->defined = true;
    t->key = engine_key(l->slot, m->pid);
    t->worker = m->worker;
    t->ident = m->ident;
    t->tid = m->tid;
    t->main = m->main;
    snprintf(t->name, sizeof(t->name), "%s", m->name);
    t->ti = SIZE_MAX; /* the name may have changed: look it up again */
}

/* The history's record of a remote thread, through cached indexes checked on every use
 * (records are only appended, so an index stays right once found). */
static struct hthread *hist_thread(struct engine *e, struct rlink *l, struct rthread *t)
{
    struct history *h = &e->hist;
    struct hrank *r;
    struct hthread *ht;

    if (t->ri >= h->nranks || h->ranks[t->ri].pid != t->key) {
        struct rkey *k = rlink_key_find(l, t->key);

        /* A thread of a rank the agent never defined (or one past the cap on ranks). */
        if (!k || (t->ri = rank_index(h, k)) == SIZE_MAX)
            return NULL;
        t->ti = SIZE_MAX;
    }
    r = &h->ranks[t->ri];
    if (t->ti < r->nthreads) {
        ht = &r->threads[t->ti];
        if (ht->ident == t->ident && ht->worker == t->worker && !ht->gone)
            return ht;
    }
    ht = t->worker ? history_worker_thread(r, t->worker, t->ident, t->tid, t->name)
                   : history_thread(r, t->ident, t->tid, t->name, t->main);
    t->ti = (size_t)(ht - r->threads);
    return ht;
}

static struct rthread *thread_of(struct rlink *l, uint32_t id)
{
    if (id >= l->nthreads || !l->threads[id].defined) {
        rlink_set_error(l, "agent stream: undefined thread %u", id);
        return NULL;
    }
    return &l->threads[id];
}

/* The head's stack for the agent's stack id: interned again when a compaction of the head's
 * history dropped it (its frames are still known); HSTACK_NONE while it is incomplete. */
static uint32_t wire_stack(struct engine *e, struct rlink *l, uint32_t id)
{
    struct rstack *s = &l->stacks[id];

    if (s->head == HSTACK_NONE && s->n == s->got && s->ids)
        stack_done(e, l, s, id);
    return s->head;
}

/* The head's history compacted: its stack ids moved (one compaction: follow the map; more:
 * intern again on use), and each thread's current stack follows. */
static void follow_compaction(struct engine *e, struct rlink *l)
{
    bool one = l->hist_gen + 1 == e->hist.gen;

    for (size_t i = 0; i < l->nstacks; i++)
        if (l->stacks[i].head != HSTACK_NONE)
            l->stacks[i].head =
                one ? history_remap_stack(&e->hist, l->stacks[i].head) : HSTACK_NONE;
    for (size_t i = 0; i < l->nthreads; i++) {
        struct rthread *t = &l->threads[i];

        t->cur = t->cur_wire >= 0 && (size_t)t->cur_wire < l->nstacks
                     ? wire_stack(e, l, (uint32_t)t->cur_wire)
                     : HSTACK_NONE;
    }
    l->hist_gen = e->hist.gen;
}

static void on_run(struct engine *e, struct rlink *l, const struct record_run *m)
{
    struct rthread *t = thread_of(l, m->thread);
    struct hthread *ht;
    uint32_t s = HSTACK_NONE;

    if (!t)
        return;
    if (m->stack >= 0) {
        s = (size_t)m->stack < l->nstacks ? wire_stack(e, l, (uint32_t)m->stack) : HSTACK_NONE;
        if (s == HSTACK_NONE) {
            rlink_set_error(l, "agent stream: undefined stack %lld", (long long)m->stack);
            return;
        }
    }
    if (!(ht = hist_thread(e, l, t)))
        return;
    t->cur = s;
    t->cur_wire = m->stack;
    l->nlive_threads += t->gone;
    t->gone = false;
    history_observe(ht, s, head_time(e, l, m->ts));
}

static void on_gone(struct engine *e, struct rlink *l, const struct record_run *m)
{
    struct rthread *t = thread_of(l, m->thread);
    struct hthread *ht;

    if (!t || t->gone || !(ht = hist_thread(e, l, t)))
        return;
    history_thread_gone(ht, head_time(e, l, m->ts));
    t->gone = true;
    l->nlive_threads--;
}

/* Every live thread of the host still showed its stack at ts: its run extends to ts. A tick
 * visits every thread, so ticks closer than TICK_MIN_NS on the agent's clock (agents tick every
 * 10 ms at the most) are skipped: a stream of ticks cannot cost threads x lines. */
static void on_tick(struct engine *e, struct rlink *l, int64_t ts)
{
    uint64_t t;

    if (l->last_tick >= 0 && ts - l->last_tick < TICK_MIN_NS) /* both >= 0: no overflow */
        return;
    l->last_tick = ts;
    t = head_time(e, l, ts);

    for (size_t i = 0; i < l->nthreads; i++) {
        struct rthread *rt = &l->threads[i];
        struct hthread *ht;

        if (rt->defined && !rt->gone && (ht = hist_thread(e, l, rt)) && ht->nruns)
            history_observe(ht, rt->cur, t);
    }
}

static bool live_key(const struct rlink *l, int key)
{
    const struct rkey *k = rlink_key_find(l, key);

    return k && k->live;
}

/* A device series (id, name) of this host: at most RLINK_MAX_SERIES, beyond which points are
 * dropped and said. */
static bool device_series(struct rlink *l, enum series_id id, const char *name)
{
    uint64_t h = hash_mix(hash_str(name), (uint64_t)id);

    for (size_t i = 0; i < l->nseries; i++)
        if (l->series[i] == h)
            return true;
    if (l->nseries >= RLINK_MAX_SERIES) {
        rlink_set_error(l, "more than %d device series on this host: '%s' and later ones dropped",
                        RLINK_MAX_SERIES, name);
        return false;
    }
    if (!l->series) {
        if (!rlink_budget(l, RLINK_MAX_SERIES * sizeof(*l->series), "device series"))
            return false;
        l->series = x_calloc(RLINK_MAX_SERIES, sizeof(*l->series));
    }
    l->series[l->nseries++] = h;
    return true;
}

static void on_counter(struct engine *e, struct rlink *l, const struct record_counter *m)
{
    char name[48];
    enum series_id id = (enum series_id)m->id;

    if (m->id <= SERIES_NONE || m->id >= SERIES_COUNT)
        return;             /* a counter a newer agent knows: ignored */
    if (!series_name(id)) { /* a device's: named after it, and the host tells devices apart */
        if (!device_series(l, id, m->name))
            return;
        snprintf(name, sizeof(name), "%.20s %.26s", l->agent_host, m->name);
        history_counter(&e->hist, id, name, 0, head_time(e, l, m->ts), m->v);
        return;
    }
    /* A rank's series only for a rank the host defined: pids cannot make series at will. */
    if (m->pid && live_key(l, engine_key(l->slot, m->pid)))
        history_counter(&e->hist, id, NULL, engine_key(l->slot, m->pid), head_time(e, l, m->ts),
                        m->v);
}

static void on_live(struct engine *e, struct rlink *l, const struct record_live *m)
{
    struct engine_rank_live *v;

    if (!live_key(l, engine_key(l->slot, m->pid)))
        return; /* figures of a rank the host never defined */
    v = engine_live_locked(e, engine_key(l->slot, m->pid));

    v->dev_mem_mb = m->dev_mem_mb;
    v->gil_busy_pct = m->gil_busy_pct;
    v->gil_switches = m->gil_switches;
    v->gil_waiters = m->gil_waiters;
    v->nshares = m->nshares < 16 ? m->nshares : 16;
    for (size_t i = 0; i < v->nshares; i++) {
        v->shares[i].ident = m->shares[i].ident;
        v->shares[i].pct = m->shares[i].pct;
    }
}

static void on_device(struct rlink *l, const struct record_device *m)
{
    struct smi_device *d = NULL;

    for (size_t i = 0; i < l->ndevs && !d; i++)
        if ((l->devs[i].kind == SMI_KIND_NPU) == m->npu && l->devs[i].index == m->index &&
            l->devs[i].chip == m->chip)
            d = &l->devs[i];
    if (!d) {
        if (l->ndevs >= 256)
            return;
        /* The capacity is the next power of two (at least 4): grown by doubling. */
        if (l->ndevs >= 4 && !(l->ndevs & (l->ndevs - 1)))
            l->devs = x_reallocarray(l->devs, l->ndevs * 2, sizeof(*l->devs));
        else if (!l->devs)
            l->devs = x_reallocarray(NULL, 4, sizeof(*l->devs));
        d = &l->devs[l->ndevs++];
    }
    memset(d, 0, sizeof(*d));
    d->kind = m->npu ? SMI_KIND_NPU : SMI_KIND_GPU;
    d->index = m->index;
    d->chip = m->chip;
    d->valid = SMI_DEV_INDEX | SMI_DEV_NAME | (m->npu ? SMI_DEV_CHIP : 0);
    snprintf(d->name, sizeof(d->name), "%s", m->name);
    snprintf(d->host, sizeof(d->host), "%s", l->agent_host);
#define DEV_FIELD(bit, field, v)                                                                   \
    if ((v) >= 0) {                                                                                \
        d->valid |= (bit);                                                                         \
        d->field = (v);                                                                            \
    }
    DEV_FIELD(SMI_DEV_UTIL, util_pct, m->util_pct)
    DEV_FIELD(SMI_DEV_MEM_USED, mem_used_mb, m->mem_used_mb)
    DEV_FIELD(SMI_DEV_MEM_TOTAL, mem_total_mb, m->mem_total_mb)
    DEV_FIELD(SMI_DEV_TEMP, temp_c, m->temp_c)
    DEV_FIELD(SMI_DEV_POWER, power_w, m->power_w)
#undef DEV_FIELD
}

static void on_hello(struct engine *e, struct rlink *l, const struct record_hello *m, uint64_t now)
{
    (void)e;
    if (l->hello) { /* its clock and identity were settled by the first */
        rlink_set_error(l, "agent stream: a second hello (protocol error): host cut off");
        rlink_cut(l);
        return;
    }
    if (m->major != AGENTPROTO_MAJOR) {
        rlink_set_error(
            l,
            "agent speaks protocol %d.%d (ranktop %s); this head speaks %d: install the "
            "same ranktop on every node",
            m->major, m->minor, m->version, AGENTPROTO_MAJOR);
        l->refused = true;
        return;
    }
    l->hello = true;
    snprintf(l->version, sizeof(l->version), "%.31s", m->version);
    /* First guess: the line took no time to come; pings refine it. Later agent times are
     * checked against this clock (head_time). */
    l->offset_ns = (int64_t)now - m->mono_ns;
    l->hello_mono = m->mono_ns;
    l->state = ENGINE_HOST_UP;
    l->error[0] = '\0';
    l->up_since = now;
}

/* Cristian's method: the ping with the shortest round trip bounds the offset best. An answer
 * whose clock strays from the hello's by more than RLINK_FUTURE_NS is not believed. */
static void on_pong(struct rlink *l, int64_t head_ns, int64_t agent_ns, uint64_t now)
{
    int64_t rtt = (int64_t)now - head_ns, expect;

    if (rtt < 0 || head_ns <= 0 || (uint64_t)head_ns < l->up_since || rtt >= l->rtt_ns)
        return;
    expect = l->hello_mono > INT64_MAX / 2 ? INT64_MAX / 2
                                           : l->hello_mono + (head_ns - (int64_t)l->up_since);
    if (agent_ns > expect + RLINK_FUTURE_NS || agent_ns < expect - RLINK_FUTURE_NS) {
        rlink_set_error(l, "agent stream: a ping answered with a clock %.3g s off the hello's",
                        ((double)agent_ns - (double)expect) / 1e9);
        return;
    }
    l->rtt_ns = rtt;
    l->offset_ns = (head_ns + rtt / 2) - agent_ns;
}

bool rlink_apply(struct engine *e, struct rlink *l, const struct record_event *m, uint64_t now)
{
    l->now = now;
    if (!l->hello && m->type != RECORD_HELLO) {
        rlink_set_error(l, "agent stream: a message before the hello");
        return false;
    }
    if (l->hist_gen != e->hist.gen)
        follow_compaction(e, l);
    switch (m->type) {
    case RECORD_HELLO:
        on_hello(e, l, &m->u.hello, now);
        break;
    case RECORD_FRAME:
        on_frame(l, &m->u.frame);
        break;
    case RECORD_STACK:
        on_stack(e, l, &m->u.stack);
        break;
    case RECORD_RANK:
        on_rank(e, l, &m->u.rank);
        break;
    case RECORD_THREAD:
        on_thread(e, l, &m->u.thread);
        break;
    case RECORD_RUN:
        on_run(e, l, &m->u.run);
        break;
    case RECORD_GONE:
        on_gone(e, l, &m->u.run);
        break;
    case RECORD_TICK:
        on_tick(e, l, m->u.tick.ts);
        l->passes = m->u.tick.passes;
        l->nstack = m->u.tick.stacks;
        l->errors = m->u.tick.errors;
        l->lost = m->u.tick.lost;
        return true;
    case RECORD_COUNTER:
        on_counter(e, l, &m->u.counter);
        break;
    case RECORD_LIVE:
        on_live(e, l, &m->u.live);
        break;
    case RECORD_DEVICE:
        on_device(l, &m->u.device);
        break;
    case RECORD_PONG:
        on_pong(l, m->u.pong.head_ns, m->u.pong.agent_ns, now);
        break;
    case RECORD_ERROR:
        if (m->u.text[0])
            rlink_set_error(l, "agent: %s", m->u.text);
        break;
    case RECORD_BYE:
        rlink_set_error(l, "agent left: %s", m->u.text);
        break;
    case RECORD_UNKNOWN:
        break;
    }
    return false;
}
