/* The recorder: applies a source's record events (ranktop/model/record.h) to the history, as every
 * collector's findings reach it. A rank of source s is keyed (s->slot, pid); frames, stacks
 * and threads are defined by the source with ids that this file maps to the history's own;
 * times are the source's clock plus its estimated offset (its hello, refined by pings).
 *
 * Invariants: events are validated by whoever built them (the agent stream's parser);
 * what refers to something undefined, or an id beyond RECORD_ID_MAX or far past a table's end,
 * is dropped and becomes the source's error line, never a crash. Every table of a source is
 * charged to its budget (rsource.c), an incomplete stack holds only the frame ids received,
 * and ranks and device series per source are capped, so that what the recorder holds for a
 * source is bounded by what its bytes can justify and by a fixed amount. Every source time is
 * checked against the source's clock and saturated. A second hello cuts the source off. Runs
 * on the history's writer: today whichever engine thread holds the engine lock (the remote
 * collector for other hosts; the sampler, memory, GIL and exit threads for this node). */
#include "recorder_priv.h"

#include "ranktop/base/hash.h"
#include "ranktop/base/util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How far an id may run past what the source defined: frame and stack ids are its history's
 * indexes (dense but for what it never sent), thread ids count up from 0. So a table grows
 * with the definitions received, not with what one line claims. */
#define ID_SLACK 65536
#define THREAD_SLACK 1024
#define TICK_MIN_NS 5000000

/* The history's key of the source's pid: the source's slot above the pid's bits (the engine's
 * engine_key; slot 0 is this node, whose ranks are keyed by their pid). */
static int source_key(const struct rsource *s, int pid)
{
    return (int)(((unsigned)s->slot << HISTORY_KEY_PID_BITS) | (unsigned)pid);
}

/* A source time on the history's clock, within [the history's start, now + slack]: the
 * source's clock cannot run ahead of its hello by more than the history's has since (plus
 * RSOURCE_FUTURE_NS for the offset's error), so a later time is a broken or hostile agent's,
 * said once and held at that bound. No sum can overflow. */
static uint64_t head_time(const struct history *h, struct rsource *s, int64_t agent_ns)
{
    int64_t since = s->now > s->up_since ? (int64_t)(s->now - s->up_since) : 0;
    int64_t agent_max = s->hello_mono > INT64_MAX - since - RSOURCE_FUTURE_NS
                            ? INT64_MAX
                            : s->hello_mono + since + RSOURCE_FUTURE_NS;
    int64_t t;

    if (agent_ns > agent_max) {
        if (!s->error[0])
            rsource_set_error(s,
                              "agent stream: a time %.3g s past the agent's clock (held at the "
                              "head's now)",
                              ((double)agent_ns - (double)agent_max) / 1e9);
        agent_ns = agent_max;
    }
    if (__builtin_add_overflow(agent_ns, s->offset_ns, &t))
        t = s->offset_ns > 0 ? INT64_MAX : INT64_MIN;
    if (t < (int64_t)h->t0)
        return h->t0;
    return (uint64_t)t > s->now + (uint64_t)RSOURCE_FUTURE_NS ? s->now + (uint64_t)RSOURCE_FUTURE_NS
                                                              : (uint64_t)t;
}

/* Grows a table so that id is an index into it, doubling, within the host's budget; false
 * when id is at or past limit (the host's error line) or the budget is spent (the host is
 * cut off). */
static bool fit(struct rsource *s, void **v, size_t *n, size_t size, uint32_t id, size_t limit,
                const char *what)
{
    size_t m;

    if (id < *n)
        return true;
    if (id >= RECORD_ID_MAX || id >= limit) {
        rsource_set_error(s, "agent stream: %s id %u out of range", what, id);
        return false;
    }
    m = id + 1 > *n * 2 ? id + 1 : *n * 2;
    m = m < 64 ? 64 : m > limit ? limit : m;
    if (!rsource_budget(s, (m - *n) * size, what))
        return false;
    *v = x_reallocarray(*v, m, size);
    memset((char *)*v + *n * size, 0, (m - *n) * size);
    *n = m;
    return true;
}

static void on_frame(struct rsource *s, const struct record_frame *f)
{
    struct rsource_frame *r;

    if (!fit(s, (void **)&s->frames, &s->nframes, sizeof(*s->frames), f->id,
             2 * s->def_frames + ID_SLACK, "frame"))
        return;
    r = &s->frames[f->id];
    if (r->fn)
        s->mem -= strlen(r->fn) + strlen(r->file) + 2;
    else
        s->def_frames++;
    free(r->fn);
    free(r->file);
    r->fn = r->file = NULL;
    if (!rsource_budget(s, strlen(f->function) + strlen(f->file) + 2, "frame texts"))
        return;
    r->fn = x_strdup(f->function);
    r->file = x_strdup(f->file);
    r->line = f->line;
    r->native = f->native;
}

/* Interns a complete stack; its frames were defined before (else the stack is dropped). */
static void stack_done(struct history *h, struct rsource *s, struct rsource_stack *st, uint32_t id)
{
    struct hframe *fr = x_calloc(st->n ? st->n : 1, sizeof(*fr));

    for (uint32_t i = 0; i < st->n; i++) {
        uint32_t f = st->ids[i];

        if (f >= s->nframes || !s->frames[f].fn) {
            rsource_set_error(s, "agent stream: stack %u names undefined frame %u", id, f);
            free(fr);
            return;
        }
        /* The wire has them outermost first; the history interns innermost first. */
        fr[st->n - 1 - i] = (struct hframe){s->frames[f].fn, s->frames[f].file, s->frames[f].line,
                                            s->frames[f].native};
    }
    st->head = history_intern_stack(h, fr, st->n);
    free(fr);
}

/* Room for `want` frame ids in an incomplete stack: a stack announced with 65536 frames holds
 * only what its chunks brought (doubling up to n), so that its size is paid for in bytes. */
static bool stack_room(struct rsource *s, struct rsource_stack *st, uint32_t want)
{
    uint32_t cap = st->cap ? st->cap : 16;

    if (want <= st->cap && st->ids)
        return true;
    while (cap < want)
        cap *= 2;
    cap = cap > st->n && st->n ? st->n : cap;
    cap = cap < want ? want : cap;
    if (!rsource_budget(s, (size_t)(cap - st->cap) * sizeof(*st->ids), "stacks"))
        return false;
    st->ids = x_reallocarray(st->ids, cap ? cap : 1, sizeof(*st->ids));
    st->cap = cap;
    return true;
}

static void on_stack(struct history *h, struct rsource *s, const struct record_stack *m)
{
    struct rsource_stack *st;

    if (!fit(s, (void **)&s->stacks, &s->nstacks, sizeof(*s->stacks), m->id,
             2 * s->def_stacks + ID_SLACK, "stack"))
        return;
    st = &s->stacks[m->id];
    if (m->at == 0) {
        s->def_stacks += !st->ids;
        s->mem -= st->cap * sizeof(*st->ids);
        free(st->ids);
        *st = (struct rsource_stack){.head = HSTACK_NONE, .n = m->n};
    } else if (m->at != st->got || m->n != st->n || st->head != HSTACK_NONE) {
        rsource_set_error(s, "agent stream: stack %u chunk out of order", m->id);
        return;
    }
    if (!stack_room(s, st, st->got + m->nchunk))
        return;
    if (m->nchunk)
        memcpy(st->ids + st->got, m->frames, m->nchunk * sizeof(*st->ids));
    st->got += m->nchunk;
    if (st->got == st->n)
        stack_done(h, s, st, m->id);
}

/* A rank number another live process already has: said as this host's error. */
static void check_claim(struct history *h, struct rsource *s, int key, int rank)
{
    size_t i = rclaims_find(s->claims, h, rank, key);
    const struct hrank *o = i == SIZE_MAX ? NULL : &h->ranks[i];

    if (o)
        rsource_set_error(s, "rank %d is claimed twice: %s pid %d and %s pid %d", rank, o->host,
                          history_key_pid(o->pid), s->host, history_key_pid(key));
}

/* The history's index of the rank with this key (live or the newest exited one), through the
 * host's key set; SIZE_MAX when the history holds none. */
static size_t rank_index(const struct history *h, struct rsource_key *k)
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
static struct hrank *host_rank(struct history *h, struct rsource *s, int key,
                               const struct record_rank *m)
{
    struct rsource_key *k = rsource_key_find(s, key);
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
    if ((!k || !k->live) && s->nlive >= RSOURCE_MAX_RANKS) {
        if (!s->ranks_said)
            rsource_set_error(s,
                              "more than %d live ranks on this host: pid %d and later ones are "
                              "not shown",
                              RSOURCE_MAX_RANKS, m->pid);
        s->ranks_said = true;
        return NULL;
    }
    if (!k && !(k = rsource_key_add(s, key)))
        return NULL;
    if (!k->live)
        s->nlive++;
    k->live = true;
    r = history_rank(h, key, m->rank, m->device);
    k->ri = (size_t)(r - h->ranks);
    return r;
}

static void on_rank(struct history *h, struct rsource *s, const struct record_rank *m)
{
    int key = source_key(s, m->pid);
    struct hrank *r = host_rank(h, s, key, m);
    bool renumbered;

    if (!r)
        return;
    renumbered = r->rank != m->rank || !r->start;
    if (renumbered)
        check_claim(h, s, key, m->rank);
    snprintf(r->host, sizeof(r->host), "%s", s->host);
    r->rank = m->rank;
    if (renumbered)
        rclaims_note(s->claims, h, (size_t)(r - h->ranks));
    snprintf(r->device, sizeof(r->device), "%s", m->device);
    snprintf(r->python, sizeof(r->python), "%s", m->python);
    if (!r->start)
        r->start = head_time(h, s, m->ts);
    if (m->exited && !r->exited) {
        struct rsource_key *k = rsource_key_find(s, key);

        history_rank_exit(r, head_time(h, s, m->ts));
        /* An unknown status (this node's sampler, which sees only that reads fail) keeps the
         * one an exit event may already have brought: the two come in either order. */
        if (m->exit_code != -1 || m->exit_signal != 0) {
            r->exit_code = m->exit_code;
            r->exit_signal = m->exit_signal;
        }
        if (k && k->live) {
            k->live = false;
            s->nlive--;
        }
    }
}

static struct hthread *hist_thread(struct history *h, struct rsource *s, struct rsource_thread *t);

static void on_thread(struct history *h, struct rsource *s, const struct record_thread *m)
{
    struct rsource_thread *t;
    struct hthread *ht;

    if (!fit(s, (void **)&s->threads, &s->nthreads, sizeof(*s->threads), m->id,
             s->def_threads + THREAD_SLACK, "thread"))
        return;
    t = &s->threads[m->id];
    /* An id given to another thread: the one it named has ended (else it would stay live in
     * the history for good, beyond the reach of the window and the memory cap). Only a thread
     * that was ever shown has a record (ri found) to end. */
    if (t->defined && !t->gone && t->ri != SIZE_MAX &&
        (t->key != source_key(s, m->pid) || t->worker != m->worker || t->task != m->task ||
         t->ident != (m->task ? history_task_ident(m->task_addr, m->name) : m->ident)) &&
        (ht = hist_thread(h, s, t))) {
        history_thread_gone(ht, ht->last);
        t->gone = true;
        s->nlive_threads--;
    }
    if (!t->defined) {
        if (s->nlive_threads >= RSOURCE_MAX_THREADS) {
            if (!s->threads_said)
                rsource_set_error(s,
                                  "more than %d live threads on this host: thread %u and later "
                                  "ones are not shown",
                                  RSOURCE_MAX_THREADS, m->id);
            s->threads_said = true;
            return;
        }
        *t = (struct rsource_thread){
            .cur = HSTACK_NONE, .cur_wire = -1, .ri = SIZE_MAX, .ti = SIZE_MAX};
        s->nlive_threads++;
        s->def_threads++;
    }
    t->defined = true;
    t->key = source_key(s, m->pid);
    t->worker = m->worker;
    t->tid = m->tid;
    t->main = m->main;
    snprintf(t->name, sizeof(t->name), "%s", m->name);
    t->task = m->task && !m->worker;
    t->task_addr = m->task_addr;
    t->task_thread = m->ident;
    t->ident = t->task ? history_task_ident(m->task_addr, t->name) : m->ident;
    t->ti = SIZE_MAX; /* the name may have changed: look it up again */
}

/* The history's record of a remote thread, through cached indexes checked on every use
 * (records are only appended, so an index stays right once found). */
static struct hthread *hist_thread(struct history *h, struct rsource *s, struct rsource_thread *t)
{
    struct hrank *r;
    struct hthread *ht;

    if (t->ri >= h->nranks || h->ranks[t->ri].pid != t->key) {
        struct rsource_key *k = rsource_key_find(s, t->key);

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
    if (t->task)
        ht = history_task(r, t->task_addr, t->name, t->task_thread);
    else
        ht = t->worker ? history_worker_thread(r, t->worker, t->ident, t->tid, t->name)
                       : history_thread(r, t->ident, t->tid, t->name, t->main);
    t->ti = (size_t)(ht - r->threads);
    return ht;
}

static struct rsource_thread *thread_of(struct rsource *s, uint32_t id)
{
    if (id >= s->nthreads || !s->threads[id].defined) {
        rsource_set_error(s, "agent stream: undefined thread %u", id);
        return NULL;
    }
    return &s->threads[id];
}

/* The head's stack for the agent's stack id: interned again when a compaction of the head's
 * history dropped it (its frames are still known); HSTACK_NONE while it is incomplete. */
static uint32_t wire_stack(struct history *h, struct rsource *s, uint32_t id)
{
    struct rsource_stack *st = &s->stacks[id];

    if (st->head == HSTACK_NONE && st->n == st->got && st->ids)
        stack_done(h, s, st, id);
    return st->head;
}

/* The head's history compacted: its stack ids moved (one compaction: follow the map; more:
 * intern again on use), and each thread's current stack follows. */
static void follow_compaction(struct history *h, struct rsource *s)
{
    bool one = s->hist_gen + 1 == h->gen;

    for (size_t i = 0; i < s->nstacks; i++)
        if (s->stacks[i].head != HSTACK_NONE)
            s->stacks[i].head = one ? history_remap_stack(h, s->stacks[i].head) : HSTACK_NONE;
    for (size_t i = 0; i < s->nthreads; i++) {
        struct rsource_thread *t = &s->threads[i];

        t->cur = t->cur_wire >= 0 && (size_t)t->cur_wire < s->nstacks
                     ? wire_stack(h, s, (uint32_t)t->cur_wire)
                     : HSTACK_NONE;
    }
    s->hist_gen = h->gen;
}

static void on_run(struct history *h, struct rsource *s, const struct record_run *m)
{
    struct rsource_thread *t = thread_of(s, m->thread);
    struct hthread *ht;
    uint32_t stack = HSTACK_NONE;

    if (!t)
        return;
    if (m->stack >= 0) {
        stack = (size_t)m->stack < s->nstacks ? wire_stack(h, s, (uint32_t)m->stack) : HSTACK_NONE;
        if (stack == HSTACK_NONE) {
            rsource_set_error(s, "agent stream: undefined stack %lld", (long long)m->stack);
            return;
        }
    }
    if (!(ht = hist_thread(h, s, t)))
        return;
    t->cur = stack;
    t->cur_wire = m->stack;
    s->nlive_threads += t->gone;
    t->gone = false;
    history_observe(ht, stack, head_time(h, s, m->ts));
}

static void on_gone(struct history *h, struct rsource *s, const struct record_run *m)
{
    struct rsource_thread *t = thread_of(s, m->thread);
    struct hthread *ht;

    if (!t || t->gone || !(ht = hist_thread(h, s, t)))
        return;
    history_thread_gone(ht, head_time(h, s, m->ts));
    t->gone = true;
    s->nlive_threads--;
}

/* Every live thread of the host still showed its stack at ts: its run extends to ts. A tick
 * visits every thread, so ticks closer than TICK_MIN_NS on the agent's clock (agents tick every
 * 10 ms at the most) are skipped: a stream of ticks cannot cost threads x lines. */
static void on_tick(struct history *h, struct rsource *s, int64_t ts)
{
    uint64_t t;

    if (s->last_tick >= 0 && ts - s->last_tick < TICK_MIN_NS) /* both >= 0: no overflow */
        return;
    s->last_tick = ts;
    t = head_time(h, s, ts);

    for (size_t i = 0; i < s->nthreads; i++) {
        struct rsource_thread *rt = &s->threads[i];
        struct hthread *ht;

        if (rt->defined && !rt->gone && (ht = hist_thread(h, s, rt)) && ht->nruns)
            history_observe(ht, rt->cur, t);
    }
}

/* A rank's task read: what the views need to judge it by its tasks, and the lane cap, to
 * which its ended lanes are folded. Only this node's sampler reads tasks. */
static void on_tasks(struct history *h, struct rsource *s, const struct record_tasks *m)
{
    int key = source_key(s, m->pid);
    struct hrank *r = NULL;

    if (s->slot != 0)
        return;
    for (size_t i = h->nranks; i-- > 0 && !r;)
        if (h->ranks[i].pid == key && !h->ranks[i].exited)
            r = &h->ranks[i];
    if (!r)
        return;
    r->tasks_unlaned = m->unlaned;
    if (m->live < 0) /* the reads were turned off: the lanes ended */
        return;
    if (m->unlaned > h->tasks_unlaned_max)
        h->tasks_unlaned_max = m->unlaned;
    h->task_lane_cap = m->cap;
    history_tasks_fold(h, r, m->cap);
    history_counter(h, SERIES_TASKS, NULL, key, head_time(h, s, m->ts), (double)m->live);
}

static bool live_key(const struct rsource *s, int key)
{
    const struct rsource_key *k = rsource_key_find(s, key);

    return k && k->live;
}

/* A device series (id, name) of this host: at most RSOURCE_MAX_SERIES, beyond which points are
 * dropped and said. */
static bool device_series(struct rsource *s, enum series_id id, const char *name)
{
    uint64_t h = hash_mix(hash_str(name), (uint64_t)id);

    for (size_t i = 0; i < s->nseries; i++)
        if (s->series[i] == h)
            return true;
    if (s->nseries >= RSOURCE_MAX_SERIES) {
        rsource_set_error(s, "more than %d device series on this host: '%s' and later ones dropped",
                          RSOURCE_MAX_SERIES, name);
        return false;
    }
    if (!s->series) {
        if (!rsource_budget(s, RSOURCE_MAX_SERIES * sizeof(*s->series), "device series"))
            return false;
        s->series = x_calloc(RSOURCE_MAX_SERIES, sizeof(*s->series));
    }
    s->series[s->nseries++] = h;
    return true;
}

static void on_counter(struct history *h, struct rsource *s, const struct record_counter *m)
{
    char name[48];
    enum series_id id = (enum series_id)m->id;

    if (m->id <= SERIES_NONE || m->id >= SERIES_COUNT)
        return;             /* a counter a newer agent knows: ignored */
    if (!series_name(id)) { /* a device's: named after it, and the host tells devices apart */
        if (!device_series(s, id, m->name))
            return;
        if (s->slot == 0) /* this node's devices go by their own names */
            snprintf(name, sizeof(name), "%.47s", m->name);
        else
            snprintf(name, sizeof(name), "%.20s %.26s", s->host, m->name);
        history_counter(h, id, name, 0, head_time(h, s, m->ts), m->v);
        return;
    }
    /* A rank's series only for a rank the source defined, so that pids cannot make series at
     * will; this node's collectors (slot 0) are trusted, and their ranks are still made by the
     * sampler, not by rank events. */
    if (m->pid && (s->slot == 0 || live_key(s, source_key(s, m->pid))))
        history_counter(h, id, NULL, source_key(s, m->pid), head_time(h, s, m->ts), m->v);
}

/* How a process ended, kept in the latest record of its rank key (pids are reused, and a
 * restarted rank gets a new record); a process the history does not know is ignored, and
 * another host's only counts for a rank it defined. The rank is not marked exited here. */
static void on_status(struct history *h, struct rsource *s, const struct record_exit *m)
{
    int key = source_key(s, m->pid);
    struct hrank *r = NULL;

    if (s->slot != 0 && !rsource_key_find(s, key))
        return;
    for (size_t i = 0; i < h->nranks; i++)
        if (h->ranks[i].pid == key)
            r = &h->ranks[i];
    if (!r)
        return;
    r->exit_code = m->code;
    r->exit_signal = m->signal;
    snprintf(r->core, sizeof(r->core), "%s", m->core);
}

static void on_live(struct rsource *s, const struct record_live *m,
                    const struct recorder_sink *sink)
{
    /* Another host's figures only for a rank it defined; this node's collectors come in no
     * order with the sampler's rank definitions (discovery sees a process first). */
    if (s->slot != 0 && !live_key(s, source_key(s, m->pid)))
        return;
    if (sink && sink->live)
        sink->live(sink->ctx, source_key(s, m->pid), m);
}

/* The source's clock: the hello's line took no time to come (a first guess that pings
 * refine); later source times are checked against this clock (head_time). The caller checked
 * the protocol's version. */
static void on_hello(struct rsource *s, const struct record_hello *m, uint64_t now)
{
    if (s->hello) { /* its clock and identity were settled by the first */
        rsource_set_error(s, "agent stream: a second hello (protocol error): host cut off");
        rsource_cut(s);
        return;
    }
    s->hello = true;
    s->offset_ns = (int64_t)now - m->mono_ns;
    s->hello_mono = m->mono_ns;
    s->error[0] = '\0';
    s->up_since = now;
}

/* Cristian's method: the ping with the shortest round trip bounds the offset best. An answer
 * whose clock strays from the hello's by more than RSOURCE_FUTURE_NS is not believed. */
static void on_pong(struct rsource *s, int64_t head_ns, int64_t agent_ns, uint64_t now)
{
    int64_t rtt = (int64_t)now - head_ns, expect;

    if (rtt < 0 || head_ns <= 0 || (uint64_t)head_ns < s->up_since || rtt >= s->rtt_ns)
        return;
    expect = s->hello_mono > INT64_MAX / 2 ? INT64_MAX / 2
                                           : s->hello_mono + (head_ns - (int64_t)s->up_since);
    if (agent_ns > expect + RSOURCE_FUTURE_NS || agent_ns < expect - RSOURCE_FUTURE_NS) {
        rsource_set_error(s, "agent stream: a ping answered with a clock %.3g s off the hello's",
                          ((double)agent_ns - (double)expect) / 1e9);
        return;
    }
    s->rtt_ns = rtt;
    s->offset_ns = (head_ns + rtt / 2) - agent_ns;
}

/* Applies one event; true for a tick. */
static bool apply_one(struct history *h, struct rsource *s, const struct record_event *m,
                      uint64_t now, const struct recorder_sink *sink)
{
    if (!s->hello && m->type != RECORD_HELLO) {
        rsource_set_error(s, "agent stream: a message before the hello");
        return false;
    }
    if (s->hist_gen != h->gen)
        follow_compaction(h, s);
    switch (m->type) {
    case RECORD_HELLO:
        on_hello(s, &m->u.hello, now);
        break;
    case RECORD_FRAME:
        on_frame(s, &m->u.frame);
        break;
    case RECORD_STACK:
        on_stack(h, s, &m->u.stack);
        break;
    case RECORD_RANK:
        on_rank(h, s, &m->u.rank);
        break;
    case RECORD_THREAD:
        on_thread(h, s, &m->u.thread);
        break;
    case RECORD_RUN:
        on_run(h, s, &m->u.run);
        break;
    case RECORD_GONE:
        on_gone(h, s, &m->u.run);
        break;
    case RECORD_TICK:
        on_tick(h, s, m->u.tick.ts);
        return true;
    case RECORD_COUNTER:
        on_counter(h, s, &m->u.counter);
        break;
    case RECORD_LIVE:
        on_live(s, &m->u.live, sink);
        break;
    case RECORD_DEVICE:
        if (sink && sink->device)
            sink->device(sink->ctx, &m->u.device);
        break;
    case RECORD_PONG:
        on_pong(s, m->u.pong.head_ns, m->u.pong.agent_ns, now);
        break;
    case RECORD_ERROR:
        if (m->u.text[0])
            rsource_set_error(s, "agent: %s", m->u.text);
        break;
    case RECORD_BYE:
        rsource_set_error(s, "agent left: %s", m->u.text);
        break;
    case RECORD_EXIT:
        on_status(h, s, &m->u.exit);
        break;
    case RECORD_FORGET:
        rsource_forget_defs(s);
        break;
    case RECORD_TASKS:
        on_tasks(h, s, &m->u.tasks);
        break;
    case RECORD_UNKNOWN:
        break;
    }
    return false;
}

size_t recorder_apply(struct history *h, struct rsource *s, const struct record_event *ev, size_t n,
                      uint64_t now, const struct recorder_sink *sink)
{
    size_t ticks = 0;

    s->now = now;
    for (size_t i = 0; i < n && !s->cut; i++)
        ticks += apply_one(h, s, &ev[i], now, sink);
    return ticks;
}
