/* The engine's stack sampler thread.
 *
 * Owns one pyproc per target, ranks and their DataLoader-style workers (attached on first
 * sight, re-tried every few seconds when the attach fails) and samples every target once per
 * period; a worker's threads are recorded under the rank it serves. A pass reads every target
 * first, with the lock released, split over up to ENGINE_POOL_MAX threads while one cannot keep
 * the rate (engine_pool.c); then this thread turns what was read into record events of source
 * 0 (frame and stack definitions with ids of engine_sintern.c, rank, thread, run, gone,
 * counters, asyncio tasks), exactly as an agent's, and hands the pass's batch to its queue
 * (engine_emit_buf) for the recorder thread, the history's one writer; it never takes the
 * engine lock to write the history. A
 * target that exits, restarts or is stopped costs only its own read: a stopped process is
 * read like a running one, and an exited one returns at once. */
#include "engine_priv.h"

#include "ranktop/proc/procscan.h"
#include "ranktop/python/pyasync.h"
#include "ranktop/python/pystack.h"
#include "ranktop/base/hash.h"
#include "ranktop/base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ATTACH_RETRY_NS (2000000000ull)

struct slot {
    struct target t;
    struct pyproc *py;
    uint64_t next_attach;
    uint64_t first_try; /* first attach attempt */
    bool dead;          /* exited (GONE) */
    bool started;       /* a rank-start instant was recorded */
    uint64_t lost;      /* thread stacks of this rank lost so far */
    bool nat_want;      /* native frames wanted for its rank (synced each pass) */
    /* The program image attached to: an exec (same pid, new image) is re-attached to. */
    struct proc_image image;
    uint64_t image_at; /* when to look at the image again */
    bool execd;        /* this pass found a new image: the record step resets the slot */
    unsigned execs;
    bool stopped; /* still, and stopped (SIGSTOP, a debugger) when last looked */
    /* stopped went to the recorder (a live event at the first sample, then on each change),
     * and as what */
    bool stopped_said, said_stopped;
    uint64_t state_at; /* when to look at a still process's state again */
    struct engine_native nat;
    uint64_t async_at; /* next asyncio task read (engine_opts.async), UINT64_MAX: refused */
    bool tasks_live;   /* its rank has task pseudo-threads not ended */
    /* Its rank's task lanes as source-0 threads: a live task keeps its lane (and id) from
     * read to read; found by the task's address and name. */
    struct lane {
        uint64_t addr, name_hash;
        uint32_t id;
        bool seen;
    } * lanes;
    size_t nlanes, caplanes;
    /* Whether its interpreter collects (engine_gc.c). */
    struct engine_gcprobe gc;
    /* What this pass's read left for the record step (read_slot, then record_slot). */
    int rc;             /* SLOT_IDLE, 0 with `sample`, or the read's negative status */
    bool attach_failed; /* rc came from attaching; err says why */
    char err[512];
    const struct pysample *sample;
    uint64_t now;
    /* The sample's threads as source-0 threads (their ids, names) and, per thread, the last
     * stack interned with the reader's key of its frames: a thread whose frames are unchanged
     * reuses the stack without interning it again. */
    struct sthread *th;
    size_t nth, capth;
    uint64_t si_gen; /* the interner generation the cached stack ids are of */
    /* The rank as last announced (RECORD_RANK) by this slot or a worker of it. */
    struct announced {
        bool live;
        int rank;
        char device[32];
        char python[24];
    } ann;
};

/* One thread of a slot as source 0 knows it. */
struct sthread {
    uint64_t ident;
    uint32_t id; /* its source-0 thread id */
    int tid;
    char name[64];
    /* The reader's pointer to the name last defined, and its names generation
     * (pysample.names_gen): while both hold, the name is known without reading it. */
    const char *name_src;
    uint64_t name_gen;
    bool main, defined, seen;
    bool cached;    /* key, stack and frames below are valid */
    uint64_t key;   /* the reader's key of its frame chain */
    uint32_t stack; /* source-0 stack id */
    /* its frames as the reader named them (key and line: pystack.h), and their source-0 frame
     * ids, outermost first */
    struct last_frame {
        uint64_t key;
        int line;
    } * fkeys;
    uint32_t *fids;
    uint32_t nf, capf;
};

#define SLOT_IDLE 1                  /* slot.rc: nothing read this pass */
#define IMAGE_EVERY_NS 1000000000ull /* how often a still-readable target's image is checked */

/* Sampling threads: a pass whose reads would take more than POOL_BUSY of the period on one
 * thread is split over more (at most ENGINE_POOL_MAX, and no more than the CPUs online);
 * back to fewer only after POOL_CALM passes in a row that would fit. */
#define POOL_BUSY 0.5
#define POOL_CALM 50

struct sampler {
    struct engine *e;
    struct slot *s;
    size_t n, cap;
    uint64_t gen;
    struct hframe *scratch;
    size_t scratch_cap;
    struct engine_tview *tv; /* the sample's threads, kept apart from the reader's */
    uint32_t *ids;           /* their stacks (source-0 ids) */
    size_t *tix;             /* their index in the slot's thread table */
    size_t tv_cap;
    /* This node's sampler as record source 0: its ids, the pass's events (applied at its end
     * under the lock), thread ids free for reuse, and the engine totals of the pass. */
    struct engine_sintern si;
    struct engine_evbuf ev;
    uint32_t *free_ids;
    size_t nfree, cap_free;
    uint32_t next_tid;
    uint64_t p_stacks, p_errs, p_torn, p_lost;
    struct engine_pool *pool;
    int parts, parts_max; /* sampling threads used per pass, and the most allowed */
    int calm;             /* consecutive passes that fewer threads would have kept */
    int used;             /* threads the last pass ran on (no more than targets) */
    double load;          /* smoothed single-thread read time over the period */
    bool async;           /* engine_opts.async as of this pass */
    bool oncpu;           /* engine_opts.oncpu as of this pass */
    uint32_t *gc_ids;     /* engine_gc_stack's buffer */
    uint32_t gc_cap;
};

/* Adds slots for targets not seen before (the target list comes from discovery). */
static void sync_targets(struct sampler *sp)
{
    struct engine *e = sp->e;

    pthread_mutex_lock(&e->lock);
    if (e->targets_gen != sp->gen) {
        sp->gen = e->targets_gen;
        for (size_t i = 0; i < e->ntargets; i++) {
            bool known = false;

            for (size_t k = 0; k < sp->n && !known; k++)
                if (sp->s[k].t.pid == e->targets[i].pid && !sp->s[k].dead) {
                    /* A first look may have caught a launcher mid-exec, without RANK. */
                    sp->s[k].t = e->targets[i];
                    known = true;
                }
            if (known)
                continue;
            if (sp->n == sp->cap) {
                sp->cap = sp->cap ? sp->cap * 2 : 16;
                sp->s = x_reallocarray(sp->s, sp->cap, sizeof(*sp->s));
            }
            memset(&sp->s[sp->n], 0, sizeof(sp->s[0]));
            sp->s[sp->n++].t = e->targets[i];
        }
    }
    for (size_t k = 0; k < sp->n; k++) /* a worker follows the rank it serves */
        sp->s[k].nat_want =
            engine_native_wanted_locked(e, sp->s[k].t.owner ? sp->s[k].t.owner : sp->s[k].t.pid);
    sp->async = e->o.async;
    sp->oncpu = e->o.oncpu;
    pthread_mutex_unlock(&e->lock);
}

/* Counts the stacks of one rank sample that could not be read whole. A rank's first loss
 * starts its SERIES_STACKS_LOST counter, which steps at every later one. */
static void count_loss(struct sampler *sp, struct slot *sl, unsigned torn, unsigned lost,
                       uint64_t now)
{
    sp->p_torn += torn;
    if (!lost)
        return;
    sp->p_lost += lost;
    sl->lost += lost;
    if (sl->t.owner) /* the series is the rank's own process */
        return;
    *engine_evbuf_add(&sp->ev, RECORD_COUNTER) =
        record_counter_event(SERIES_STACKS_LOST, sl->t.pid, (int64_t)now, (double)sl->lost);
}

/* A source-0 thread id: one a thread that ended left, or a new one. */
static uint32_t thread_id_new(struct sampler *sp)
{
    return sp->nfree ? sp->free_ids[--sp->nfree] : sp->next_tid++;
}

static void thread_id_free(struct sampler *sp, uint32_t id)
{
    if (sp->nfree == sp->cap_free) {
        sp->cap_free = sp->cap_free ? sp->cap_free * 2 : 64;
        sp->free_ids = x_reallocarray(sp->free_ids, sp->cap_free, sizeof(*sp->free_ids));
    }
    sp->free_ids[sp->nfree++] = id;
}

/* Interns one thread's frames whole. A stack cut at the frame cap gets an outermost frame
 * saying so, which every view and export then shows. */
static uint32_t intern_thread(struct sampler *sp, const struct pythread *pt)
{
    uint32_t n = pt->nframes + (pt->truncated ? 1 : 0);

    if (n > sp->scratch_cap) {
        sp->scratch_cap = n;
        sp->scratch = x_reallocarray(sp->scratch, sp->scratch_cap, sizeof(struct hframe));
    }
    for (uint32_t k = 0; k < pt->nframes; k++)
        sp->scratch[k] =
            (struct hframe){pt->frames[k].function, pt->frames[k].file, pt->frames[k].line, false};
    if (pt->truncated)
        sp->scratch[pt->nframes] =
            (struct hframe){"[outer frames not read: frame cap]", "", 0, false};
    return engine_sintern_stack(&sp->si, &sp->ev, sp->scratch, n);
}

/* Interns pt's stack into l: the outer frames the reader's keys say are unchanged keep their
 * frame ids, only the others are interned (a deep stack whose leaf moves costs a few frames,
 * not all of them). */
static uint32_t intern_changed(struct sampler *sp, struct sthread *l, const struct pythread *pt)
{
    uint32_t n = pt->nframes, same = 0;

    if (n > l->capf) {
        l->capf = n;
        l->fkeys = x_reallocarray(l->fkeys, n, sizeof(*l->fkeys));
        l->fids = x_reallocarray(l->fids, n, sizeof(*l->fids));
    }
    /* Key and line together name the frame exactly (pystack.h): no hash to collide. */
    while (same < n && same < l->nf && l->fkeys[same].key == pt->frames[n - 1 - same].key &&
           l->fkeys[same].line == pt->frames[n - 1 - same].line)
        same++;
    for (uint32_t i = same; i < n; i++) {
        const struct pyframe *f = &pt->frames[n - 1 - i];

        l->fkeys[i] = (struct last_frame){f->key, f->line};
        l->fids[i] = engine_sintern_frame(&sp->si, &sp->ev, f->function, f->file, f->line, false);
    }
    l->nf = n;
    return engine_sintern_ids(&sp->si, &sp->ev, l->fids, n);
}

/* The stack of pt: the last one of its thread when the reader's key says its frames did not
 * change, else interned from what changed. */
static uint32_t thread_stack(struct sampler *sp, struct sthread *l, const struct pythread *pt)
{
    if (pt->truncated) { /* rare (thousands of frames deep): interned whole, with its marker */
        l->cached = false;
        l->nf = 0;
        return intern_thread(sp, pt);
    }
    if (l->cached && l->key == pt->chain_key)
        return l->stack;
    if (!l->cached)
        l->nf = 0;
    l->key = pt->chain_key;
    l->stack = intern_changed(sp, l, pt);
    l->cached = true;
    return l->stack;
}

/* The slot's entry of the thread with ident, made when new (defined by observe). */
static size_t slot_thread(struct sampler *sp, struct slot *sl, uint64_t ident)
{
    for (size_t i = 0; i < sl->nth; i++)
        if (sl->th[i].ident == ident)
            return i;
    if (sl->nth == sl->capth) {
        sl->capth = sl->capth ? sl->capth * 2 : 16;
        sl->th = x_reallocarray(sl->th, sl->capth, sizeof(*sl->th));
    }
    sl->th[sl->nth] = (struct sthread){.ident = ident, .id = thread_id_new(sp)};
    return sl->nth++;
}

static void sthread_release(struct sampler *sp, struct sthread *l)
{
    thread_id_free(sp, l->id);
    free(l->fkeys);
    free(l->fids);
}

/* Forgets the last stacks of a slot's threads (their ids, or its reader's keys, went stale). */
static void drop_last(struct slot *sl)
{
    for (size_t i = 0; i < sl->nth; i++)
        sl->th[i].cached = false;
}

/* Ends every thread of the slot at time now: a gone event each, their ids freed. */
static void slot_threads_end(struct sampler *sp, struct slot *sl, uint64_t now)
{
    for (size_t i = 0; i < sl->nth; i++) {
        struct record_event *ev = engine_evbuf_add(&sp->ev, RECORD_GONE);

        ev->u.run = (struct record_run){sl->th[i].id, -1, (int64_t)now};
        sthread_release(sp, &sl->th[i]);
    }
    sl->nth = 0;
}

/* Releases what a slot holds: its reader, its native context, its threads. */
static void slot_fini(struct sampler *sp, struct slot *sl)
{
    pyproc_free(sl->py);
    sl->py = NULL;
    engine_native_fini(&sl->nat);
    engine_gc_fini(&sl->gc);
    for (size_t i = 0; i < sl->nth; i++)
        sthread_release(sp, &sl->th[i]);
    free(sl->th);
    sl->th = NULL;
    sl->nth = sl->capth = 0;
    for (size_t i = 0; i < sl->nlanes; i++)
        thread_id_free(sp, sl->lanes[i].id);
    free(sl->lanes);
    sl->lanes = NULL;
    sl->nlanes = sl->caplanes = 0;
}

/* snprintf(dst, cap, "%s", src) without the format machinery: this runs for every thread of
 * every sample. src NULL is "". */
static void name_copy(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strnlen(src, cap - 1) : 0;

    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
}

/* The sample's threads as the history records them, their Python stacks interned. */
static void view_sample(struct sampler *sp, struct slot *sl, const struct pysample *s)
{
    if (sl->si_gen != sp->si.gen) { /* the interner renumbered: the ids kept are stale */
        drop_last(sl);
        sl->si_gen = sp->si.gen;
    }
    if (s->nthreads > sp->tv_cap) {
        sp->tv_cap = s->nthreads;
        sp->tv = x_reallocarray(sp->tv, sp->tv_cap, sizeof(*sp->tv));
        sp->ids = x_reallocarray(sp->ids, sp->tv_cap, sizeof(*sp->ids));
        sp->tix = x_reallocarray(sp->tix, sp->tv_cap, sizeof(*sp->tix));
    }
    for (uint32_t i = 0; i < s->nthreads; i++) {
        const struct pythread *pt = &s->threads[i];
        struct sthread *l;

        sp->tix[i] = slot_thread(sp, sl, pt->ident);
        l = &sl->th[sp->tix[i]];
        l->seen = true;
        sp->tv[i] = (struct engine_tview){.ident = pt->ident, .tid = pt->tid, .status = pt->status};
        /* A name defined from the same pointer of the same generation is left unread (""):
         * reading each thread's name every pass costs a cache miss each. */
        if (!l->defined || !s->names_gen || pt->name != l->name_src ||
            s->names_gen != l->name_gen) {
            name_copy(sp->tv[i].name, sizeof(sp->tv[i].name), pt->name);
            sp->tv[i].src = pt->name;
            sp->tv[i].src_gen = s->names_gen;
        }
        if (sp->e->o.gil_only && pt->status == 0 && !pt->gil) /* a gap, as py-spy --gil */
            sp->tv[i].status = ENGINE_TV_SKIPPED;
        if (sp->oncpu && pt->status == 0 && pt->state != PYTHREAD_RUNNING) /* as austin -c */
            sp->tv[i].status = ENGINE_TV_SKIPPED;
        sp->ids[i] = sp->tv[i].status == 0 ? thread_stack(sp, l, pt) : HSTACK_NONE;
        sp->tv[i].gc = sl->gc.last == 1 && pt->gil && sp->ids[i] != HSTACK_NONE && l->cached;
        if (sp->tv[i].gc)
            sp->ids[i] =
                engine_gc_stack(&sp->si, &sp->ev, l->fids, l->nf, &sp->gc_ids, &sp->gc_cap);
    }
}

/* The slot's rank as it is now announced; a worker shares the announcement of its rank's
 * slot (or keeps its own when the rank has none). */
static struct announced *slot_ann(struct sampler *sp, struct slot *sl)
{
    if (sl->t.owner)
        for (size_t i = 0; i < sp->n; i++)
            if (!sp->s[i].dead && !sp->s[i].t.owner && sp->s[i].t.pid == sl->t.owner)
                return &sp->s[i].ann;
    return &sl->ann;
}

static void rank_event(struct sampler *sp, int pid, const struct announced *a, bool exited,
                       uint64_t t)
{
    struct record_rank *m = &engine_evbuf_add(&sp->ev, RECORD_RANK)->u.rank;

    *m = (struct record_rank){.pid = pid,
                              .rank = a->rank,
                              .local_rank = -1,
                              .world_size = -1,
                              .exited = exited,
                              .exit_code = -1,
                              .ts = (int64_t)t};
    memcpy(m->device, a->device, sizeof(m->device));
    memcpy(m->python, a->python, sizeof(m->python));
}

/* Announces the slot's rank (RECORD_RANK) when new or changed: its number (a first look may
 * have caught a launcher mid-exec, without RANK), device and Python version (python NULL: a
 * worker's sample, which says none). */
static void announce(struct sampler *sp, struct slot *sl, uint64_t t, const char *python)
{
    struct announced *a = slot_ann(sp, sl);
    bool change = !a->live;

    if (!a->live) {
        memset(a, 0, sizeof(*a));
        a->live = true;
        a->rank = sl->t.rank;
        name_copy(a->device, sizeof(a->device), sl->t.device);
    } else if (sl->t.rank >= 0 && a->rank != sl->t.rank) {
        a->rank = sl->t.rank;
        change = true;
    }
    if (!sl->t.owner && sl->t.device[0] &&
        strncmp(a->device, sl->t.device, sizeof(a->device) - 1)) {
        name_copy(a->device, sizeof(a->device), sl->t.device);
        change = true;
    }
    if (python && strncmp(a->python, python, sizeof(a->python) - 1)) {
        name_copy(a->python, sizeof(a->python), python);
        change = true;
    }
    if (change)
        rank_event(sp, sl->t.owner ? sl->t.owner : sl->t.pid, a, false, t);
}

/* Defines the thread (RECORD_THREAD) when new, renamed, given its tid or found to be main. */
static void thread_define(struct sampler *sp, struct slot *sl, struct sthread *l,
                          const struct engine_tview *v, bool main)
{
    struct record_thread *m;
    bool same = l->defined && (!v->name[0] || !strcmp(v->name, l->name)) &&
                (!v->tid || v->tid == l->tid) && (!main || l->main);

    if (v->src && v->name[0]) { /* l->name is, or is about to be, v->name */
        l->name_src = v->src;
        l->name_gen = v->src_gen;
    }
    if (same)
        return;
    if (v->name[0])
        name_copy(l->name, sizeof(l->name), v->name);
    if (v->tid)
        l->tid = v->tid;
    l->main |= main;
    l->defined = true;
    m = &engine_evbuf_add(&sp->ev, RECORD_THREAD)->u.thread;
    *m = (struct record_thread){.id = l->id,
                                .pid = sl->t.owner ? sl->t.owner : sl->t.pid,
                                .worker = sl->t.owner ? sl->t.pid : 0,
                                .ident = l->ident,
                                .tid = l->tid,
                                .main = l->main};
    memcpy(m->name, l->name, sizeof(m->name));
}

/* What one sample of n threads (in sp->tv, sp->ids, sp->tix) showed at time t: a run of each
 * thread, and the end of those the sample no longer shows. */
static void observe(struct sampler *sp, struct slot *sl, uint32_t n, uint64_t t, const char *python)
{
    size_t kept = 0;

    announce(sp, sl, t, sl->t.owner ? NULL : python ? python : "");
    for (uint32_t i = 0; i < n; i++) {
        const struct engine_tview *v = &sp->tv[i];
        struct sthread *l = &sl->th[sp->tix[i]];
        struct record_event *ev;

        if (sp->ids[i] != HSTACK_NONE)
            sp->p_stacks++;
        else if (v->status != ENGINE_TV_SKIPPED)
            sp->p_errs++;
        thread_define(sp, sl, l, v, !sl->t.owner && i + 1 == n);
        ev = engine_evbuf_add(&sp->ev, RECORD_RUN);
        ev->u.run = (struct record_run){l->id, sp->ids[i] == HSTACK_NONE ? -1 : (int64_t)sp->ids[i],
                                        (int64_t)t};
    }
    for (size_t i = 0; i < sl->nth; i++) { /* threads gone since: ended and forgotten */
        if (sl->th[i].seen) {
            sl->th[i].seen = false;
            sl->th[kept++] = sl->th[i];
            continue;
        }
        if (sl->th[i].defined)
            engine_evbuf_add(&sp->ev, RECORD_GONE)->u.run =
                (struct record_run){sl->th[i].id, -1, (int64_t)t};
        sthread_release(sp, &sl->th[i]);
    }
    sl->nth = kept;
}

/* A rank whose native frames the monitor toggled: its threads without Python too
 * (engine_natall.c), put before the sample's own threads so that the main thread stays last,
 * where observe looks for it. Returns the new count. */
static uint32_t add_natall(struct sampler *sp, struct slot *sl, uint32_t n)
{
    struct engine_tview o[ENGINE_NATALL_MAX];
    uint32_t oid[ENGINE_NATALL_MAX];
    size_t k;

    if (sp->e->o.native || !sl->nat.ctx)
        return n;
    k = engine_natall_sample(sl->nat.ctx, sl->t.pid, sp->tv, n, o, oid, ENGINE_NATALL_MAX, &sp->si,
                             &sp->ev);
    if (n + k > sp->tv_cap) {
        sp->tv_cap = n + k;
        sp->tv = x_reallocarray(sp->tv, sp->tv_cap, sizeof(*sp->tv));
        sp->ids = x_reallocarray(sp->ids, sp->tv_cap, sizeof(*sp->ids));
        sp->tix = x_reallocarray(sp->tix, sp->tv_cap, sizeof(*sp->tix));
    }
    memmove(sp->tv + k, sp->tv, n * sizeof(*sp->tv));
    memmove(sp->ids + k, sp->ids, n * sizeof(*sp->ids));
    memmove(sp->tix + k, sp->tix, n * sizeof(*sp->tix));
    for (size_t i = 0; i < k; i++) {
        sp->tv[i] = o[i];
        sp->ids[i] = oid[i];
        sp->tix[i] = slot_thread(sp, sl, o[i].ident);
        sl->th[sp->tix[i]].seen = true;
    }
    return n + (uint32_t)k;
}

/* Records a sample as events; with native frames wanted, each thread is read again natively
 * first. */
static void record_sample(struct sampler *sp, struct slot *sl, const struct pysample *s,
                          uint64_t now)
{
    uint32_t n = s->nthreads;
    uint64_t t = s->t_mono_ns;
    unsigned torn = s->torn, dropped = s->dropped;

    view_sample(sp, sl, s);
    if (sl->nat_want) { /* s is reused by the reads below: keep nothing of it */
        sl->nat.next_at = now + 1000000000ull / ENGINE_NATIVE_HZ;
        engine_native_sample(sp->e, &sl->nat, sl->t.owner ? sl->t.owner : sl->t.pid, sl->t.pid,
                             sl->py, sp->tv, sp->ids, n, now, &sp->si, &sp->ev);
        n = add_natall(sp, sl, n);
    }
    observe(sp, sl, n, t, pyproc_version(sl->py));
    count_loss(sp, sl, torn, dropped, t);
}

static bool task_live(const struct pyasync_task *pt)
{
    return pt->state != PYASYNC_DONE && pt->state != PYASYNC_CANCELLED;
}

static const char *task_name(const struct pyasync_task *pt)
{
    return pt->name ? pt->name : "";
}

/* The stack of a task's await chain (innermost first, as the interner takes it): a
 * source-0 stack id, or -1 for an empty chain. */
static int64_t task_stack(struct sampler *sp, const struct pyasync_task *pt)
{
    uint32_t n = (uint32_t)pt->nframes;

    if (n + 1 > sp->scratch_cap) {
        sp->scratch_cap = n + 1;
        sp->scratch = x_reallocarray(sp->scratch, sp->scratch_cap, sizeof(struct hframe));
    }
    for (uint32_t k = 0; k < n; k++)
        sp->scratch[k] =
            (struct hframe){pt->frames[k].function, pt->frames[k].file, pt->frames[k].line, false};
    if (pt->chain_truncated)
        sp->scratch[n++] = (struct hframe){"[outer coroutines not read: chain cap]", "", 0, false};
    return n ? (int64_t)engine_sintern_stack(&sp->si, &sp->ev, sp->scratch, n) : -1;
}

/* Ends lane i of the slot (a gone event; its id freed). */
static void lane_end(struct sampler *sp, struct slot *sl, size_t i, uint64_t now)
{
    engine_evbuf_add(&sp->ev, RECORD_GONE)->u.run =
        (struct record_run){sl->lanes[i].id, -1, (int64_t)now};
    thread_id_free(sp, sl->lanes[i].id);
    sl->lanes[i] = sl->lanes[--sl->nlanes];
}

/* A new lane for task pt, defined as a task pseudo-thread of the slot's rank. */
static struct lane *lane_new(struct sampler *sp, struct slot *sl, const struct pyasync_task *pt)
{
    struct record_thread *m;
    struct lane *l;

    if (sl->nlanes == sl->caplanes) {
        sl->caplanes = sl->caplanes ? sl->caplanes * 2 : 16;
        sl->lanes = x_reallocarray(sl->lanes, sl->caplanes, sizeof(*sl->lanes));
    }
    l = &sl->lanes[sl->nlanes++];
    *l = (struct lane){pt->addr, hash_str(task_name(pt)), thread_id_new(sp), true};
    m = &engine_evbuf_add(&sp->ev, RECORD_THREAD)->u.thread;
    *m = (struct record_thread){
        .id = l->id, .pid = sl->t.pid, .ident = pt->thread, .task = true, .task_addr = pt->addr};
    name_copy(m->name, sizeof(m->name), task_name(pt));
    return l;
}

static struct lane *lane_find(struct slot *sl, const struct pyasync_task *pt, uint64_t name_hash)
{
    for (size_t i = 0; i < sl->nlanes; i++)
        if (!sl->lanes[i].seen && sl->lanes[i].addr == pt->addr &&
            sl->lanes[i].name_hash == name_hash)
            return &sl->lanes[i];
    return NULL;
}

static void tasks_event(struct sampler *sp, struct slot *sl, int64_t live, uint32_t unlaned,
                        uint32_t cap, uint64_t now)
{
    engine_evbuf_add(&sp->ev, RECORD_TASKS)->u.tasks =
        (struct record_tasks){sl->t.pid, live, unlaned, cap, (int64_t)now};
}

/* The tasks of one read as task lanes of the slot's rank, each its await chain. Lanes are
 * bounded per rank (engine_opts.task_lanes): a task that has a lane keeps it, the lanes of
 * tasks finished or gone since the last read end, and a new task gets one while fewer than the
 * cap are live (the others of the read are counted as unlaned, and the views then do not judge
 * the rank by its tasks); the recorder folds ended lanes beyond the cap away, oldest-ended
 * first. Every live task, laned or not, counts in the rank's SERIES_TASKS point. */
static void observe_tasks(struct sampler *sp, struct slot *sl, const struct pyasync_list *l,
                          uint64_t now)
{
    size_t cap = sp->e->o.task_lanes ? sp->e->o.task_lanes : ENGINE_TASK_LANES, laned = 0;
    uint64_t *hashes = x_calloc(l->n + 1, sizeof(*hashes));
    int64_t *lid = x_calloc(l->n + 1, sizeof(*lid)); /* the task's lane id, -1: none yet */
    int64_t live = 0;
    uint32_t unlaned = 0;

    for (size_t i = 0; i < sl->nlanes; i++)
        sl->lanes[i].seen = false;
    for (size_t i = 0; i < l->n; i++) { /* the lanes that go on */
        struct lane *found;

        lid[i] = -1;
        if (!task_live(&l->tasks[i]))
            continue;
        live++;
        hashes[i] = hash_str(task_name(&l->tasks[i]));
        if ((found = lane_find(sl, &l->tasks[i], hashes[i]))) {
            found->seen = true;
            lid[i] = found->id;
            laned++;
        }
    }
    for (size_t i = 0; i < sl->nlanes;) /* ended: finished, cancelled or gone */
        if (!sl->lanes[i].seen)
            lane_end(sp, sl, i, now);
        else
            i++;
    for (size_t i = 0; i < l->n; i++) {
        const struct pyasync_task *pt = &l->tasks[i];
        uint32_t id;
        int64_t stack;

        if (!task_live(pt))
            continue;
        if (lid[i] >= 0) {
            id = (uint32_t)lid[i];
        } else if (laned >= cap) {
            unlaned++;
            continue;
        } else {
            id = lane_new(sp, sl, pt)->id;
            laned++;
        }
        stack = task_stack(sp, pt); /* its definitions go before the run that uses it */
        engine_evbuf_add(&sp->ev, RECORD_RUN)->u.run = (struct record_run){id, stack, (int64_t)now};
    }
    free(hashes);
    free(lid);
    /* The tasks the read left out (its caps, pyasync.h) have no lane either: said, not lost. */
    unlaned += l->not_read > UINT32_MAX - unlaned ? UINT32_MAX - unlaned : (uint32_t)l->not_read;
    tasks_event(sp, sl, live, unlaned, (uint32_t)cap, now);
}

/* Ends every task lane of the slot's rank (the reads were turned off, or the rank ended). */
static void end_tasks(struct sampler *sp, struct slot *sl, uint64_t now)
{
    while (sl->nlanes)
        lane_end(sp, sl, sl->nlanes - 1, now);
    if (sl->tasks_live)
        tasks_event(sp, sl, -1, 0, 0, now);
    sl->tasks_live = false;
}

/* A rank's asyncio tasks, read at most ENGINE_ASYNC_HZ times a second while engine_opts.async
 * is on. On the sampler thread, after the rank's sample was recorded: the task read shares the
 * reader's code cache, whose strings the sample's frames borrow. The read takes no lock. A
 * read torn under every retry leaves the lanes as they were until the next; a version without
 * a known task layout is not asked again. */
static void record_tasks(struct sampler *sp, struct slot *sl)
{
    struct engine *e = sp->e;
    struct pyasync_list l;
    struct app_err err = {0};
    uint64_t now = clock_mono_ns();
    int rc;

    if (!sp->async && sl->tasks_live) /* turned off: no lane is left looking current */
        end_tasks(sp, sl, now);
    if (!sp->async || sl->t.owner || !sl->py || now < sl->async_at)
        return;
    sl->async_at = now + 1000000000ull / ENGINE_ASYNC_HZ;
    rc = pyasync_read(sl->py, &l, &err);
    if (rc == 0) {
        observe_tasks(sp, sl, &l, now);
        sl->tasks_live = true;
        pyasync_free(&l);
    } else if (rc != APP_E_STALE && rc != APP_E_STARTING) {
        sp->p_errs++;
    }
    if (rc == APP_E_VERSION) {
        sl->async_at = UINT64_MAX;
        pthread_mutex_lock(&e->lock);
        snprintf(e->attach_err, sizeof(e->attach_err), "%s", err.msg);
        pthread_mutex_unlock(&e->lock);
    }
}

/* A rank that exits is marked exited; a worker that exits takes only its threads along. */
static void slot_exit(struct sampler *sp, struct slot *sl, uint64_t now)
{
    slot_threads_end(sp, sl, now);
    end_tasks(sp, sl, now);
    if (!sl->t.owner && sl->ann.live) {
        rank_event(sp, sl->t.pid, &sl->ann, true, now);
        sl->ann.live = false;
    }
    slot_fini(sp, sl);
    sl->dead = true;
}

static void count_error(struct engine *e)
{
    pthread_mutex_lock(&e->lock);
    e->errs++;
    pthread_mutex_unlock(&e->lock);
}

/* Notes how a reader just attached reads memory: the first one decided, and /proc/PID/mem
 * (with why) over process_vm_readv, so that a fallback any rank needs is said. */
static void note_reader(struct engine *e, const struct pyproc *p)
{
    struct pyproc_stats st;

    pyproc_get_stats(p, &st);
    if (!st.reader)
        return;
    pthread_mutex_lock(&e->lock);
    if (!e->reader || (st.reader_why && !e->reader_why)) {
        e->reader = st.reader;
        e->reader_why = st.reader_why;
    }
    pthread_mutex_unlock(&e->lock);
}

/* Attaches when due; false (with sl->rc set) when there is no reader to sample this pass. */
static bool slot_attach(struct sampler *sp, struct slot *sl, uint64_t now)
{
    /* The history keeps no running/idle state: skip its /proc read (a fifth of the cost). */
    struct pyproc_opts po = {.main_only = !sp->e->o.all_threads, .no_state = true};
    struct app_err err = {0};
    int rc;

    if (sl->py)
        return true;
    if (now < sl->next_attach)
        return false;
    rc = pyproc_open(sl->t.pid, &po, &sl->py, &err);
    if (rc == 0) {
        note_reader(sp->e, sl->py);
        procscan_image(sl->t.pid, &sl->image);
        sl->image_at = now + IMAGE_EVERY_NS;
        return true;
    }
    if (rc == APP_E_GONE || rc == APP_E_NOTFOUND) {
        /* Recorded as an exit (record_slot): a reader dropped after a failed read ends
         * here, and its rank must still be marked exited. */
        sl->rc = APP_E_GONE;
        return false;
    }
    if (!sl->first_try)
        sl->first_try = now;
    if (rc == APP_E_STARTING || (rc == APP_E_NOTPY && now - sl->first_try < ATTACH_RETRY_NS)) {
        /* Just started, or still exec'ing the interpreter: readable in a moment. */
        sl->next_attach = now + ATTACH_RETRY_NS / 40;
        return false;
    }
    sl->next_attach = now + ATTACH_RETRY_NS;
    if (!sl->t.owner) { /* a worker that cannot be read is no error: the rank still can be */
        sl->rc = rc;
        sl->attach_failed = true;
        snprintf(sl->err, sizeof(sl->err), "%s", err.msg);
    }
    return false;
}

/* A target that exec'd (same pid, another program image: any Python version to any other)
 * is read through a new reader; what the old one read this pass is dropped. Checked once a
 * second, and at once when a sample fails. */
static void check_image(struct slot *sl, uint64_t now)
{
    struct proc_image im;
    int rc;

    sl->image_at = now + IMAGE_EVERY_NS;
    rc = procscan_image(sl->t.pid, &im);
    if (rc == APP_E_GONE)
        sl->rc = APP_E_GONE;
    if (rc < 0 || proc_image_same(&im, &sl->image))
        return;
    pyproc_free(sl->py);
    sl->py = NULL;
    engine_gc_fini(&sl->gc);
    sl->next_attach = 0;
    sl->first_try = 0;
    sl->execd = true;
    sl->rc = SLOT_IDLE;
}

/* The read step of one slot, on any sampling thread: touches only the slot and its reader. */
static void read_slot(struct sampler *sp, struct slot *sl)
{
    uint64_t now = clock_mono_ns();

    sl->rc = SLOT_IDLE;
    sl->attach_failed = false;
    if (sl->dead)
        return;
    /* A rank the monitor toggled is sampled at the native rate only, every sample merged. */
    if (sl->nat_want && !sp->e->o.native && now < sl->nat.next_at)
        return;
    if (!slot_attach(sp, sl, now))
        return;
    sl->now = now;
    pyproc_set_state(sl->py, sp->oncpu);
    sl->rc = pyproc_sample(sl->py, &sl->sample, NULL);
    if (sl->rc != 0)
        sl->gc.last = 0;
    else if (sl->sample->reads) /* an unchanged sample (no read) keeps its mark */
        engine_gc_probe(&sl->gc, sl->py, sl->sample);
    if (sl->rc != APP_E_GONE && (sl->rc < 0 || now >= sl->image_at))
        check_image(sl, now);
    /* A stopped process is a still one: its state is looked at only then, once a second. */
    if (sl->rc != 0 || sl->sample->reads || sl->sample->reused < sl->sample->nthreads) {
        sl->stopped = false;
    } else if (now >= sl->state_at) {
        char st = procscan_state(sl->t.pid);

        sl->stopped = st == 'T' || st == 't';
        sl->state_at = now + IMAGE_EVERY_NS;
    }
}

/* After an exec: the last stacks were keyed by the old reader's code cache, so they go; the
 * rank's "exec" counter steps, which marks the moment in the trace. */
static void slot_execd(struct sampler *sp, struct slot *sl)
{
    uint64_t now = clock_mono_ns();

    sl->execd = false;
    drop_last(sl);
    if (sl->t.owner)
        return;
    if (!sl->execs)
        *engine_evbuf_add(&sp->ev, RECORD_COUNTER) =
            record_counter_event(SERIES_EXECS, sl->t.pid, (int64_t)now - 1, 0);
    *engine_evbuf_add(&sp->ev, RECORD_COUNTER) =
        record_counter_event(SERIES_EXECS, sl->t.pid, (int64_t)now, (double)++sl->execs);
}

/* Whether the rank is stopped, as a part of its live figures: at its first sample, then on
 * each change. */
static void say_stopped(struct sampler *sp, struct slot *sl)
{
    struct record_live *l;

    if (sl->stopped_said && sl->stopped == sl->said_stopped)
        return;
    l = &engine_evbuf_add(&sp->ev, RECORD_LIVE)->u.live;
    *l = (struct record_live){
        .pid = sl->t.pid, .set = RECORD_LIVE_STOPPED, .stopped = sl->stopped, .syscall = -1};
    sl->stopped_said = true;
    sl->said_stopped = sl->stopped;
}

/* The record step of one slot, on the sampler thread: what the read found goes into the
 * history, so that the history has one writer. */
static void record_slot(struct sampler *sp, struct slot *sl)
{
    struct engine *e = sp->e;
    int rc = sl->rc;

    if (sl->execd)
        slot_execd(sp, sl);
    if (rc == SLOT_IDLE)
        return;
    if (sl->attach_failed) {
        count_error(e);
        pthread_mutex_lock(&e->lock);
        snprintf(e->attach_err, sizeof(e->attach_err), "%s", sl->err);
        engine_unread_locked(e, sl->t.pid, sl->err);
        pthread_mutex_unlock(&e->lock);
    } else if (rc == APP_E_GONE) {
        slot_exit(sp, sl, clock_mono_ns());
    } else if (rc == APP_E_STALE) { /* the thread list itself was torn, twice */
        sp->p_errs++;
        count_loss(sp, sl, 0, 1, clock_mono_ns());
    } else if (rc < 0) {
        if (rc != APP_E_STARTING)
            count_error(e);
    } else {
        record_sample(sp, sl, sl->sample, sl->now);
        record_tasks(sp, sl);
        if (!sl->t.owner) {
            say_stopped(sp, sl);
            pthread_mutex_lock(&e->lock);
            engine_unread_locked(e, sl->t.pid, NULL);
            pthread_mutex_unlock(&e->lock);
        }
    }
}

/* engine_pool_fn: the slots of one part (every nparts-th). */
static void read_part(void *ctx, int part, int nparts)
{
    struct sampler *sp = ctx;

    for (size_t i = (size_t)part; i < sp->n; i += (size_t)nparts)
        read_slot(sp, &sp->s[i]);
}

/* Picks the number of sampling threads for the next pass from this pass's read time. */
static void pool_adapt(struct sampler *sp, uint64_t read_ns, uint64_t period)
{
    double load = (double)read_ns * sp->used / (double)(period ? period : 1);
    int want;

    sp->load = sp->load * 0.8 + load * 0.2;
    want = sp->load > POOL_BUSY ? (int)(sp->load / POOL_BUSY) + 1 : 1;
    if (want > sp->parts_max)
        want = sp->parts_max;
    if (want > (int)sp->n) /* one target is read by one thread */
        want = sp->n ? (int)sp->n : 1;
    if (want > sp->parts) {
        sp->parts = want;
        sp->calm = 0;
    } else if (want < sp->parts && ++sp->calm >= POOL_CALM) {
        sp->parts--;
        sp->calm = 0;
    } else if (want >= sp->parts) {
        sp->calm = 0;
    }
}

/* Hands the pass's events to the recorder and adds its totals; the ids may then be trimmed,
 * before the next pass's events. */
static void flush(struct sampler *sp)
{
    struct engine *e = sp->e;

    engine_emit_buf(e, ENGINE_Q_SAMPLER, &sp->ev);
    pthread_mutex_lock(&e->lock);
    e->stacks += sp->p_stacks;
    e->errs += sp->p_errs;
    e->torn += sp->p_torn;
    e->lost += sp->p_lost;
    pthread_mutex_unlock(&e->lock);
    sp->p_stacks = sp->p_errs = sp->p_torn = sp->p_lost = 0;
    engine_sintern_trim(&sp->si, &sp->ev, clock_mono_ns());
}

/* One pass over every target: the reads (split over the sampling threads), then the records
 * in target order; returns how many ranks were sampled. */
static int sample_pass(struct sampler *sp, uint64_t period)
{
    uint64_t t0;
    int live = 0;

    sync_targets(sp);
    for (size_t i = 0; i < sp->n; i++) /* toggled off: no thread stays seized */
        if (!sp->s[i].nat_want && sp->s[i].nat.ctx)
            engine_native_close(&sp->s[i].nat);
    t0 = clock_mono_ns();
    sp->used = sp->parts < (int)sp->n ? sp->parts : (int)(sp->n ? sp->n : 1);
    engine_pool_run(sp->pool, sp->used, read_part, sp);
    if (!sp->e->o.sampler_threads)
        pool_adapt(sp, clock_mono_ns() - t0, period);
    for (size_t i = 0; i < sp->n; i++) {
        record_slot(sp, &sp->s[i]);
        live += sp->s[i].py != NULL && !sp->s[i].t.owner; /* ranks, not workers */
    }
    flush(sp);
    return live;
}

/* The pass's statistics; returns the period for the next one (the rate may have been set). */
static uint64_t pass_done(struct engine *e, int live, uint64_t lag, int parts)
{
    uint64_t period;

    pthread_mutex_lock(&e->lock);
    e->samples++;
    e->sampler_threads = parts;
    e->lag_sum_ns += lag;
    if (lag > e->lag_max_ns)
        e->lag_max_ns = lag;
    e->ranks_now = live;
    period = e->period_ns;
    pthread_mutex_unlock(&e->lock);
    return period;
}

void *engine_sampler_main(void *arg)
{
    struct sampler sp = {.e = arg, .parts = 1};
    struct engine *e = sp.e;
    uint64_t next = clock_mono_ns(), period;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    sp.parts_max = cpus < 1 ? 1 : cpus < ENGINE_POOL_MAX ? (int)cpus : ENGINE_POOL_MAX;
    if (e->o.sampler_threads > 0) /* fixed: no adapting */
        sp.parts = sp.parts_max =
            e->o.sampler_threads < ENGINE_POOL_MAX ? e->o.sampler_threads : ENGINE_POOL_MAX;
    sp.pool = engine_pool_new();
    engine_wait_discovered(e); /* a short run's one pass must not see an empty list */
    pthread_mutex_lock(&e->lock);
    period = e->period_ns;
    pthread_mutex_unlock(&e->lock);
    next = clock_mono_ns();
    while (!engine_sleep(e, next)) {
        uint64_t start = clock_mono_ns();
        int live;

        /* Whoever takes the events (the recorder, or an agent's writer blocked by a slow head)
         * is a queue's worth behind: no pass until it catches up, so memory stays bounded. */
        if (engine_queue_full(e, ENGINE_Q_SAMPLER)) {
            next += period;
            continue;
        }
        live = sample_pass(&sp, period);

        period = pass_done(e, live, start > next ? start - next : 0, sp.used);
        next += period;
        /* Behind by more than a period: skip the missed ticks instead of bursting. */
        if (next + period < clock_mono_ns())
            next = clock_mono_ns();
    }
    engine_pool_free(sp.pool);
    for (size_t i = 0; i < sp.n; i++)
        slot_fini(&sp, &sp.s[i]);
    free(sp.s);
    free(sp.scratch);
    free(sp.tv);
    free(sp.ids);
    free(sp.tix);
    free(sp.gc_ids);
    free(sp.free_ids);
    engine_evbuf_free(&sp.ev);
    engine_sintern_fini(&sp.si);
    return NULL;
}
