/* The head's side of one agent stream: turns each message of a host's agent into history
 * records, as the local collectors do for this node. A rank there is keyed engine_key(slot,
 * pid); frames, stacks and threads are defined by the agent with ids that this file maps to
 * the history's own; times are the agent's clock plus the estimated offset.
 *
 * Invariants: messages are validated by the parser already; what refers to something
 * undefined, or an id beyond AGENTPROTO_ID_MAX or far past a table's end, is dropped and
 * becomes the host's error line, never a crash or an unbounded allocation. Runs on the remote
 * collector's thread with the engine lock held (rlink_apply). */
#include "engine_remote_priv.h"

#include "ranktop/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FRAME_GROWTH 65536 /* an id may run at most this far past the table */

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
    l->nframes = l->nstacks = l->nthreads = 0;
    l->hello = false;
    l->rtt_ns = INT64_MAX;
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

static uint64_t head_time(const struct engine *e, const struct rlink *l, int64_t agent_ns)
{
    int64_t t = agent_ns + l->offset_ns;

    return t < (int64_t)e->hist.t0 ? e->hist.t0 : (uint64_t)t;
}

/* Grows a table so that id is an index into it; false when id runs too far past its end
 * (a hostile id must not make the head allocate gigabytes). */
static bool fit(void **v, size_t *n, size_t size, uint32_t id)
{
    size_t m;

    if (id < *n)
        return true;
    if (id >= AGENTPROTO_ID_MAX || id > *n + FRAME_GROWTH)
        return false;
    m = id + 1 > *n * 2 ? id + 1 : *n * 2;
    *v = x_reallocarray(*v, m, size);
    memset((char *)*v + *n * size, 0, (m - *n) * size);
    *n = m;
    return true;
}

static void on_frame(struct rlink *l, const struct agentproto_frame *f)
{
    struct rframe *r;

    if (!fit((void **)&l->frames, &l->nframes, sizeof(*l->frames), f->id)) {
        rlink_set_error(l, "agent stream: frame id %u out of range", f->id);
        return;
    }
    r = &l->frames[f->id];
    free(r->fn);
    free(r->file);
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

static void on_stack(struct engine *e, struct rlink *l, const struct agentproto_stack *m)
{
    struct rstack *s;

    if (!fit((void **)&l->stacks, &l->nstacks, sizeof(*l->stacks), m->id)) {
        rlink_set_error(l, "agent stream: stack id %u out of range", m->id);
        return;
    }
    s = &l->stacks[m->id];
    if (m->at == 0) {
        free(s->ids);
        *s = (struct rstack){.head = HSTACK_NONE, .n = m->n};
        s->ids = x_calloc(m->n ? m->n : 1, sizeof(*s->ids));
    } else if (m->at != s->got || m->n != s->n || s->head != HSTACK_NONE) {
        rlink_set_error(l, "agent stream: stack %u chunk out of order", m->id);
        return;
    }
    memcpy(s->ids + s->got, m->frames, m->nchunk * sizeof(*s->ids));
    s->got += m->nchunk;
    if (s->got == s->n)
        stack_done(e, l, s, m->id);
}

static void remember_key(struct rlink *l, int key)
{
    for (size_t i = 0; i < l->nkeys; i++)
        if (l->keys[i] == key)
            return;
    l->keys = x_reallocarray(l->keys, l->nkeys + 1, sizeof(*l->keys));
    l->keys[l->nkeys++] = key;
}

/* A rank number another live process already has: said as this host's error. */
static void check_claim(const struct engine *e, struct rlink *l, int key, int rank)
{
    for (size_t i = 0; rank >= 0 && i < e->hist.nranks; i++) {
        const struct hrank *o = &e->hist.ranks[i];

        if (o->pid != key && o->rank == rank && !o->exited) {
            rlink_set_error(l, "rank %d is claimed twice: %s pid %d and %s pid %d", rank, o->host,
                            history_key_pid(o->pid), l->agent_host, history_key_pid(key));
            return;
        }
    }
}

static void on_rank(struct engine *e, struct rlink *l, const struct agentproto_rank *m)
{
    int key = engine_key(l->slot, m->pid);
    struct hrank *r = history_rank(&e->hist, key, m->rank, m->device);

    if (r->rank != m->rank || !r->start)
        check_claim(e, l, key, m->rank);
    remember_key(l, key);
    snprintf(r->host, sizeof(r->host), "%s", l->agent_host);
    r->rank = m->rank;
    snprintf(r->device, sizeof(r->device), "%s", m->device);
    snprintf(r->python, sizeof(r->python), "%s", m->python);
    if (!r->start)
        r->start = head_time(e, l, m->ts);
    if (m->exited && !r->exited) {
        history_rank_exit(r, head_time(e, l, m->ts));
        r->exit_code = m->exit_code;
        r->exit_signal = m->exit_signal;
    }
}

static struct hthread *hist_thread(struct engine *e, struct rthread *t);

static void on_thread(struct engine *e, struct rlink *l, const struct agentproto_thread *m)
{
    struct rthread *t;
    struct hthread *ht;

    if (!fit((void **)&l->threads, &l->nthreads, sizeof(*l->threads), m->id)) {
        rlink_set_error(l, "agent stream: thread id %u out of range", m->id);
        return;
    }
    t = &l->threads[m->id];
    /* An id given to another thread: the one it named has ended (else it would stay live in
     * the history for good, beyond the reach of the window and the memory cap). Only a thread
     * that was ever shown has a record (ri found) to end. */
    if (t->defined && !t->gone && t->ri != SIZE_MAX &&
        (t->key != engine_key(l->slot, m->pid) || t->worker != m->worker || t->ident != m->ident) &&
        (ht = hist_thread(e, t))) {
        history_thread_gone(ht, ht->last);
        t->gone = true;
    }
    if (!t->defined)
        *t = (struct rthread){.cur = HSTACK_NONE, .cur_wire = -1, .ri = SIZE_MAX, .ti = SIZE_MAX};
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
static struct hthread *hist_thread(struct engine *e, struct rthread *t)
{
    struct history *h = &e->hist;
    struct hrank *r;
    struct hthread *ht;

    if (t->ri >= h->nranks || h->ranks[t->ri].pid != t->key) {
        t->ri = SIZE_MAX;
        for (size_t i = h->nranks; i-- > 0 && t->ri == SIZE_MAX;)
            if (h->ranks[i].pid == t->key)
                t->ri = i;
        if (t->ri == SIZE_MAX)
            return NULL; /* a thread of a rank the agent never defined */
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

static void on_run(struct engine *e, struct rlink *l, const struct agentproto_run *m)
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
    if (!(ht = hist_thread(e, t)))
        return;
    t->cur = s;
    t->cur_wire = m->stack;
    t->gone = false;
    history_observe(ht, s, head_time(e, l, m->ts));
}

static void on_gone(struct engine *e, struct rlink *l, const struct agentproto_run *m)
{
    struct rthread *t = thread_of(l, m->thread);
    struct hthread *ht;

    if (!t || t->gone || !(ht = hist_thread(e, t)))
        return;
    history_thread_gone(ht, head_time(e, l, m->ts));
    t->gone = true;
}

/* Every live thread of the host still showed its stack at ts: its run extends to ts. */
static void on_tick(struct engine *e, struct rlink *l, int64_t ts)
{
    uint64_t t = head_time(e, l, ts);

    for (size_t i = 0; i < l->nthreads; i++) {
        struct rthread *rt = &l->threads[i];
        struct hthread *ht;

        if (rt->defined && !rt->gone && (ht = hist_thread(e, rt)) && ht->nruns)
            history_observe(ht, rt->cur, t);
    }
}

static void on_counter(struct engine *e, struct rlink *l, const struct agentproto_counter *m)
{
    char name[48];
    enum series_id id = (enum series_id)m->id;

    if (m->id <= SERIES_NONE || m->id >= SERIES_COUNT)
        return;             /* a counter a newer agent knows: ignored */
    if (!series_name(id)) { /* a device's: named after it, and the host tells devices apart */
        snprintf(name, sizeof(name), "%.20s %.26s", l->agent_host, m->name);
        history_counter(&e->hist, id, name, 0, head_time(e, l, m->ts), m->v);
        return;
    }
    if (m->pid)
        history_counter(&e->hist, id, NULL, engine_key(l->slot, m->pid), head_time(e, l, m->ts),
                        m->v);
}

static void on_live(struct engine *e, struct rlink *l, const struct agentproto_live *m)
{
    struct engine_rank_live *v = engine_live_locked(e, engine_key(l->slot, m->pid));

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

static void on_device(struct rlink *l, const struct agentproto_device *m)
{
    struct smi_device *d = NULL;

    for (size_t i = 0; i < l->ndevs && !d; i++)
        if ((l->devs[i].kind == SMI_KIND_NPU) == m->npu && l->devs[i].index == m->index &&
            l->devs[i].chip == m->chip)
            d = &l->devs[i];
    if (!d) {
        if (l->ndevs >= 256)
            return;
        l->devs = x_reallocarray(l->devs, l->ndevs + 1, sizeof(*l->devs));
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

static void on_hello(struct engine *e, struct rlink *l, const struct agentproto_hello *m,
                     uint64_t now)
{
    (void)e;
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
    /* Ranks are shown on the scheduler's name for the node when there is one (what squeue
     * and srun -w take), else on the node's own host name. */
    snprintf(l->agent_host, sizeof(l->agent_host), "%s",
             m->node[0]   ? m->node
             : m->host[0] ? m->host
                          : l->name);
    /* First guess: the line took no time to come; pings refine it. */
    l->offset_ns = (int64_t)now - m->mono_ns;
    l->state = ENGINE_HOST_UP;
    l->error[0] = '\0';
    l->up_since = now;
}

/* Cristian's method: the ping with the shortest round trip bounds the offset best. */
static void on_pong(struct rlink *l, int64_t head_ns, int64_t agent_ns, uint64_t now)
{
    int64_t rtt = (int64_t)now - head_ns;

    if (rtt < 0 || head_ns <= 0 || rtt >= l->rtt_ns)
        return;
    l->rtt_ns = rtt;
    l->offset_ns = (head_ns + rtt / 2) - agent_ns;
}

bool rlink_apply(struct engine *e, struct rlink *l, const struct agentproto_msg *m, uint64_t now)
{
    if (!l->hello && m->type != AGENTPROTO_HELLO) {
        rlink_set_error(l, "agent stream: a message before the hello");
        return false;
    }
    if (l->hist_gen != e->hist.gen)
        follow_compaction(e, l);
    switch (m->type) {
    case AGENTPROTO_HELLO:
        on_hello(e, l, &m->u.hello, now);
        break;
    case AGENTPROTO_FRAME:
        on_frame(l, &m->u.frame);
        break;
    case AGENTPROTO_STACK:
        on_stack(e, l, &m->u.stack);
        break;
    case AGENTPROTO_RANK:
        on_rank(e, l, &m->u.rank);
        break;
    case AGENTPROTO_THREAD:
        on_thread(e, l, &m->u.thread);
        break;
    case AGENTPROTO_RUN:
        on_run(e, l, &m->u.run);
        break;
    case AGENTPROTO_GONE:
        on_gone(e, l, &m->u.run);
        break;
    case AGENTPROTO_TICK:
        on_tick(e, l, m->u.tick.ts);
        l->passes = m->u.tick.passes;
        l->nstack = m->u.tick.stacks;
        l->errors = m->u.tick.errors;
        l->lost = m->u.tick.lost;
        return true;
    case AGENTPROTO_COUNTER:
        on_counter(e, l, &m->u.counter);
        break;
    case AGENTPROTO_LIVE:
        on_live(e, l, &m->u.live);
        break;
    case AGENTPROTO_DEVICE:
        on_device(l, &m->u.device);
        break;
    case AGENTPROTO_PONG:
        on_pong(l, m->u.pong.head_ns, m->u.pong.agent_ns, now);
        break;
    case AGENTPROTO_ERROR:
        if (m->u.text[0])
            rlink_set_error(l, "agent: %s", m->u.text);
        break;
    case AGENTPROTO_BYE:
        rlink_set_error(l, "agent left: %s", m->u.text);
        break;
    case AGENTPROTO_UNKNOWN:
        break;
    }
    return false;
}
