/* The recorded timeline: interning of strings, frames and stacks; per-thread runs; counter
 * series; trimming to the time window and to the history's share of the memory cap.
 *
 * Invariants: frames, stacks and interned strings are append-only between compactions: ids
 * and string pointers stay valid until history_trim compacts (which bumps gen and leaves a
 * stack id map for the holders of stack ids; the strings kept move to the new tables, so a
 * pointer to a kept string stays valid); a clone shares the tables, and the strings through
 * their generation, and outlives the original; runs of a thread are in time order and only the
 * last run (open_run, in the thread record) is ever extended, the sealed ones and the series'
 * points being shared with clones too (history_share.c: a clone costs the records, not the
 * runs); the
 * indexes of a rank's threads and task lanes hold positions in its threads array and go
 * whenever threads are dropped. The engine serialises writers with its lock; this file has no
 * locking of its own. */
#include "ranktop/model/history.h"
#include "history_share.h"

#include "ranktop/base/hash.h"
#include "ranktop/base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUNS_FIRST 4 /* room for runs a new thread starts with (history_share.c) */

/* Open-addressed hash set of ids; the caller compares candidates. */
struct idset {
    uint32_t *slot; /* id + 1, 0 = empty */
    uint64_t *hash;
    size_t cap, used;
};

struct intern {
    struct idset strs, frames, stacks;
    char **str; /* interned strings by id */
    size_t nstr, strcap;
    size_t str_bytes;
    uint32_t *frame_str;  /* per frame id: string ids of its function and file */
    size_t frame_str_cap; /* in frames */
    /* The buffers behind h->frames, h->stacks and h->stack_frames, and the generation that
     * keeps the strings alive: a clone's intern holds references to them and nothing else. */
    struct hbuf *frames_buf, *stacks_buf, *sframes_buf;
    struct hgen *gen;
};

static void idset_grow(struct idset *s)
{
    struct idset n = {0};

    n.cap = s->cap ? s->cap * 2 : 1024;
    n.slot = x_calloc(n.cap, sizeof(*n.slot));
    n.hash = x_calloc(n.cap, sizeof(*n.hash));
    for (size_t i = 0; i < s->cap; i++) {
        size_t j;

        if (!s->slot[i])
            continue;
        for (j = s->hash[i] & (n.cap - 1); n.slot[j]; j = (j + 1) & (n.cap - 1))
            ;
        n.slot[j] = s->slot[i];
        n.hash[j] = s->hash[i];
    }
    n.used = s->used;
    free(s->slot);
    free(s->hash);
    *s = n;
}

/* Finds an id with hash h for which eq(ctx, id) holds; else inserts make(ctx) and returns it. */
static uint32_t idset_get(struct idset *s, uint64_t h, bool (*eq)(void *, uint32_t),
                          uint32_t (*make)(void *), void *ctx)
{
    size_t j;

    if ((s->used + 1) * 2 > s->cap)
        idset_grow(s);
    for (j = h & (s->cap - 1); s->slot[j]; j = (j + 1) & (s->cap - 1))
        if (s->hash[j] == h && eq(ctx, s->slot[j] - 1))
            return s->slot[j] - 1;
    s->slot[j] = make(ctx) + 1;
    s->hash[j] = h;
    s->used++;
    return s->slot[j] - 1;
}

static void idset_free(struct idset *s)
{
    free(s->slot);
    free(s->hash);
}

static struct intern *intern_new(void)
{
    struct intern *in = x_calloc(1, sizeof(*in));

    in->gen = hgen_new();
    return in;
}

/* The strings left in the tables (a compaction moved the kept ones out) go with the
 * generation, which frees them once no clone holds it; the tables go with their last holder. */
static void intern_free(struct intern *in)
{
    if (!in)
        return;
    idset_free(&in->strs);
    idset_free(&in->frames);
    idset_free(&in->stacks);
    hgen_bury(in->gen, in->str, in->nstr);
    hgen_release(in->gen);
    free(in->str);
    free(in->frame_str);
    hbuf_release(in->frames_buf);
    hbuf_release(in->stacks_buf);
    hbuf_release(in->sframes_buf);
    free(in);
}

#define GROW(arr, n, cap)                                                                          \
    do {                                                                                           \
        if ((n) == (cap)) {                                                                        \
            (cap) = (cap) ? (cap)*2 : 64;                                                          \
            (arr) = x_reallocarray((arr), (cap), sizeof(*(arr)));                                  \
        }                                                                                          \
    } while (0)

struct str_ctx {
    struct intern *in;
    const char *s;
};

static bool str_eq(void *c, uint32_t id)
{
    struct str_ctx *x = c;

    return strcmp(x->in->str[id], x->s) == 0;
}

static uint32_t str_make(void *c)
{
    struct str_ctx *x = c;

    GROW(x->in->str, x->in->nstr, x->in->strcap);
    x->in->str[x->in->nstr] = x_strdup(x->s);
    x->in->str_bytes += strlen(x->s) + 1;
    return (uint32_t)x->in->nstr++;
}

static uint32_t intern_str(struct intern *in, const char *s)
{
    struct str_ctx c = {in, s ? s : ""};

    return idset_get(&in->strs, hash_str(c.s), str_eq, str_make, &c);
}

/* Compaction moves a string from the old tables to the new ones instead of copying it, so
 * that compacting costs the tables, not a second copy of every string kept. */
static uint32_t str_take(void *c)
{
    struct str_ctx *x = c;

    GROW(x->in->str, x->in->nstr, x->in->strcap);
    x->in->str[x->in->nstr] = (char *)x->s;
    x->in->str_bytes += strlen(x->s) + 1;
    return (uint32_t)x->in->nstr++;
}

/* The id in `to` of string id of `from`, moving the string over on first use (smap: from's
 * ids -> to's, HSTACK_NONE when not yet moved). Strings are unique in `from`, so a moved one
 * never meets its equal in `to`. */
static uint32_t move_str(struct intern *to, struct intern *from, uint32_t id, uint32_t *smap)
{
    struct str_ctx c = {to, from->str[id]};

    if (smap[id] != HSTACK_NONE)
        return smap[id];
    smap[id] = idset_get(&to->strs, hash_str(c.s), str_eq, str_take, &c);
    from->str[id] = NULL; /* owned by `to` now */
    return smap[id];
}

struct frame_ctx {
    struct history *h;
    struct hframe f;   /* with interned strings */
    uint32_t fn, file; /* their string ids */
};

static bool frame_eq(void *c, uint32_t id)
{
    struct frame_ctx *x = c;
    const struct hframe *f = &x->h->frames[id];

    return f->function == x->f.function && f->file == x->f.file && f->line == x->f.line &&
           f->native == x->f.native;
}

static uint32_t frame_make(void *c)
{
    struct frame_ctx *x = c;

    struct intern *in = x->h->intern;

    table_room(&in->frames_buf, (void **)&x->h->frames, x->h->nframes, &x->h->frames_cap,
               x->h->nframes + 1, sizeof(struct hframe), 64);
    x->h->frames[x->h->nframes] = x->f;
    if (x->h->nframes == in->frame_str_cap) {
        in->frame_str_cap = in->frame_str_cap ? in->frame_str_cap * 2 : 64;
        in->frame_str = x_reallocarray(in->frame_str, in->frame_str_cap, 2 * sizeof(uint32_t));
    }
    in->frame_str[2 * x->h->nframes] = x->fn;
    in->frame_str[2 * x->h->nframes + 1] = x->file;
    return (uint32_t)x->h->nframes++;
}

/* Interns frame f whose strings are interned already as fn and file. */
static uint32_t intern_frame_ids(struct history *h, const struct hframe *f, uint32_t fn,
                                 uint32_t file)
{
    struct intern *in = h->intern;
    struct frame_ctx c = {h, {in->str[fn], in->str[file], f->line, f->native}, fn, file};
    uint64_t k =
        hash_mix(hash_mix((uint64_t)(uintptr_t)c.f.function, (uint64_t)(uintptr_t)c.f.file),
                 (uint64_t)f->line * 2 + f->native);

    return idset_get(&in->frames, k, frame_eq, frame_make, &c);
}

static uint32_t intern_frame(struct history *h, const struct hframe *f)
{
    struct intern *in = h->intern;
    uint32_t fn = intern_str(in, f->function), file = intern_str(in, f->file);

    /* in->str is indexed only after both calls: str_make may move the array. */
    return intern_frame_ids(h, f, fn, file);
}

struct stack_ctx {
    struct history *h;
    const uint32_t *ids; /* outermost first */
    uint32_t n;
    uint64_t hash;
};

static bool stack_eq(void *c, uint32_t id)
{
    struct stack_ctx *x = c;
    const struct hstack *s = &x->h->stacks[id];

    return s->nframes == x->n &&
           (!x->n || !memcmp(x->h->stack_frames + s->first, x->ids, x->n * sizeof(uint32_t)));
}

static uint32_t stack_make(void *c)
{
    struct stack_ctx *x = c;
    struct history *h = x->h;
    struct intern *in = h->intern;

    /* Clones share the tables: they grow into new buffers while a clone holds the old. */
    table_room(&in->sframes_buf, (void **)&h->stack_frames, h->nstack_frames, &h->stack_frames_cap,
               h->nstack_frames + x->n, sizeof(uint32_t), 4096);
    if (x->n) /* an empty stack (a thread with no Python frame) may come with no array */
        memcpy(h->stack_frames + h->nstack_frames, x->ids, x->n * sizeof(uint32_t));
    table_room(&in->stacks_buf, (void **)&h->stacks, h->nstacks, &h->stacks_cap, h->nstacks + 1,
               sizeof(struct hstack), 64);
    h->stacks[h->nstacks] = (struct hstack){x->n, (uint32_t)h->nstack_frames, x->hash};
    h->nstack_frames += x->n;
    return (uint32_t)h->nstacks++;
}

uint32_t history_intern_frame(struct history *h, const struct hframe *f)
{
    return intern_frame(h, f);
}

uint32_t history_intern_stack_ids(struct history *h, const uint32_t *outer_first, uint32_t n)
{
    struct stack_ctx c = {h, outer_first, n, 0x51ed27};

    for (uint32_t i = 0; i < n; i++)
        c.hash = hash_mix(c.hash, outer_first[i]);
    return idset_get(&((struct intern *)h->intern)->stacks, c.hash, stack_eq, stack_make, &c);
}

uint32_t history_intern_stack(struct history *h, const struct hframe *inner_first, uint32_t n)
{
    uint32_t *ids = x_malloc((n ? n : 1) * sizeof(uint32_t));
    uint32_t id;

    for (uint32_t i = 0; i < n; i++)
        ids[i] = intern_frame(h, &inner_first[n - 1 - i]);
    id = history_intern_stack_ids(h, ids, n);
    free(ids);
    return id;
}

void history_init(struct history *h, uint64_t t0, int64_t wall_t0_us, const char *host)
{
    memset(h, 0, sizeof(*h));
    h->t0 = t0;
    h->wall_t0_us = wall_t0_us;
    snprintf(h->host, sizeof(h->host), "%s", host ? host : "");
    h->intern = intern_new();
}

/* Open-addressed set of a rank's live task lanes: thread index + 1, keyed by ident. Entries
 * of lanes that ended since are skipped by lookups and left out of the next rebuild; any
 * change of the threads' order (history_tasks_fold, drop_gone) frees it, and the next lookup
 * rebuilds it. */
struct taskix {
    uint32_t *slot;
    size_t cap, used;
};

static void taskix_free(struct hrank *r)
{
    struct taskix *x = r->task_index;

    if (x)
        free(x->slot);
    free(x);
    r->task_index = NULL;
}

static size_t taskix_home(uint64_t ident, size_t cap)
{
    return (size_t)((ident ^ (ident >> 29)) * 0x9e3779b97f4a7c15ull >> 20) & (cap - 1);
}

static void taskix_put(struct taskix *x, uint64_t ident, size_t i)
{
    size_t j = taskix_home(ident, x->cap);

    while (x->slot[j])
        j = (j + 1) & (x->cap - 1);
    x->slot[j] = (uint32_t)i + 1;
    x->used++;
}

/* A new index of r's live task lanes, with room for `more` further ones. */
static struct taskix *taskix_build(struct hrank *r, size_t more)
{
    struct taskix *x = x_calloc(1, sizeof(*x));
    size_t n = more;

    for (size_t i = 0; i < r->nthreads; i++)
        n += r->threads[i].task && !r->threads[i].gone;
    for (x->cap = 64; x->cap < 2 * n + 2;)
        x->cap *= 2;
    x->slot = x_calloc(x->cap, sizeof(*x->slot));
    for (size_t i = 0; i < r->nthreads; i++)
        if (r->threads[i].task && !r->threads[i].gone)
            taskix_put(x, r->threads[i].ident, i);
    taskix_free(r);
    r->task_index = x;
    return x;
}

static struct hthread *taskix_find(struct hrank *r, uint64_t ident)
{
    struct taskix *x = r->task_index ? r->task_index : taskix_build(r, 0);

    for (size_t j = taskix_home(ident, x->cap); x->slot[j]; j = (j + 1) & (x->cap - 1)) {
        size_t i = x->slot[j] - 1;

        if (i < r->nthreads && r->threads[i].ident == ident && r->threads[i].task &&
            !r->threads[i].gone)
            return &r->threads[i];
    }
    return NULL;
}

/* Indexes the lane just appended as r->threads[i]. */
static void taskix_add(struct hrank *r, size_t i)
{
    struct taskix *x = r->task_index;

    if (!x || (x->used + 1) * 2 > x->cap)
        taskix_build(r, 0); /* counts the new lane, already in r->threads */
    else
        taskix_put(x, r->threads[i].ident, i);
}

/* An index of a rank's threads (not tasks) by (worker, ident): positions in r->threads + 1,
 * open-addressed, at most half full. A key may be at several positions (threads that ended
 * and one that took their ident again); the lookup takes the first position that matches, as
 * a scan of r->threads would. Dropped whenever threads are dropped (positions move); rebuilt
 * on the next lookup. */
struct thix {
    uint32_t *slot;
    size_t cap, used;
};

static size_t thix_home(int worker, uint64_t ident, size_t cap)
{
    uint64_t k = hash_mix(ident, (uint64_t)(unsigned)worker);

    return (size_t)(k >> 17) & (cap - 1);
}

static void thix_put(struct thix *x, const struct hthread *t, size_t i)
{
    size_t j = thix_home(t->worker, t->ident, x->cap);

    while (x->slot[j])
        j = (j + 1) & (x->cap - 1);
    x->slot[j] = (uint32_t)i + 1;
    x->used++;
}

static void thix_free(struct hrank *r)
{
    struct thix *x = r->thread_index;

    if (x)
        free(x->slot);
    free(x);
    r->thread_index = NULL;
}

static struct thix *thix_build(struct hrank *r)
{
    struct thix *x = x_calloc(1, sizeof(*x));

    for (x->cap = 64; x->cap < 2 * r->nthreads + 2;)
        x->cap *= 2;
    x->slot = x_calloc(x->cap, sizeof(*x->slot));
    for (size_t i = 0; i < r->nthreads; i++)
        if (!r->threads[i].task)
            thix_put(x, &r->threads[i], i);
    thix_free(r);
    r->thread_index = x;
    return x;
}

/* The first thread of r (in r->threads order) that is (worker, ident), live or, when tid is
 * known, of that tid; NULL when none. */
static struct hthread *thix_find(struct hrank *r, int worker, uint64_t ident, int tid)
{
    struct thix *x = r->thread_index ? r->thread_index : thix_build(r);
    size_t best = SIZE_MAX;

    for (size_t j = thix_home(worker, ident, x->cap); x->slot[j]; j = (j + 1) & (x->cap - 1)) {
        size_t i = x->slot[j] - 1;
        const struct hthread *t = &r->threads[i];

        if (i < best && t->worker == worker && t->ident == ident &&
            (!t->gone || (tid && t->tid == tid)))
            best = i;
    }
    return best == SIZE_MAX ? NULL : &r->threads[best];
}

/* Indexes the thread just appended as r->threads[i]. */
static void thix_add(struct hrank *r, size_t i)
{
    struct thix *x = r->thread_index;

    if (!x || (x->used + 1) * 2 > x->cap)
        thix_build(r);
    else
        thix_put(x, &r->threads[i], i);
}

/* Threads were dropped or moved: both indexes go (rebuilt on use). */
static void index_free(struct hrank *r)
{
    taskix_free(r);
    thix_free(r);
}

static void free_ranks(struct history *h)
{
    for (size_t i = 0; i < h->nranks; i++) {
        for (size_t k = 0; k < h->ranks[i].nthreads; k++)
            history_thread_free_runs(&h->ranks[i].threads[k]);
        free(h->ranks[i].threads);
        index_free(&h->ranks[i]);
    }
    free(h->ranks);
    for (size_t i = 0; i < h->nseries; i++)
        series_free(&h->series[i]);
    free(h->series);
}

void history_fini(struct history *h)
{
    free_ranks(h);
    if (h->intern) {
        intern_free(h->intern); /* the tables are its buffers' */
    } else {                    /* built by hand: plain arrays */
        free(h->frames);
        free(h->stacks);
        free(h->stack_frames);
    }
    free(h->stack_remap);
    memset(h, 0, sizeof(*h));
}

struct hrank *history_rank(struct history *h, int pid, int rank, const char *device)
{
    struct hrank *r;

    for (size_t i = 0; i < h->nranks; i++)
        if (h->ranks[i].pid == pid && !h->ranks[i].exited) {
            if (h->ranks[i].rank < 0 && rank >= 0)
                h->ranks[i].rank = rank;
            if (!h->ranks[i].device[0] && device && device[0])
                snprintf(h->ranks[i].device, sizeof(h->ranks[i].device), "%s", device);
            return &h->ranks[i];
        }
    GROW(h->ranks, h->nranks, h->ranks_cap);
    r = memset(&h->ranks[h->nranks++], 0, sizeof(*r));
    r->pid = pid;
    r->rank = rank;
    r->exit_code = -1;
    snprintf(r->host, sizeof(r->host), "%s", h->host);
    snprintf(r->device, sizeof(r->device), "%s", device ? device : "");
    return r;
}

int history_rank_label(const struct hrank *r, char *buf, size_t len)
{
    return r->rank >= 0 ? snprintf(buf, len, "rank %d", r->rank)
                        : snprintf(buf, len, "pid %d", history_key_pid(r->pid));
}

/* Threads are keyed by (worker, ident): a forked worker's main thread keeps the ident of the
 * parent's thread that forked it, so an ident alone would merge the two. */
static struct hthread *thread_of(struct hrank *r, int worker, uint64_t ident, int tid,
                                 const char *name, bool main)
{
    struct hthread *t = thix_find(r, worker, ident, tid);

    if (t) {
        if (name && name[0] && strcmp(t->name, name))
            snprintf(t->name, sizeof(t->name), "%s", name);
        if (tid)
            t->tid = tid;
        /* A first look may have caught the thread list while a thread was being added: the
         * interpreter's main thread is the one it says is main, whenever it says so. */
        t->main |= main;
        t->gone = false;
        return t;
    }
    GROW(r->threads, r->nthreads, r->cap);
    t = memset(&r->threads[r->nthreads++], 0, sizeof(*t));
    t->ident = ident;
    t->tid = tid;
    t->main = main;
    t->worker = worker;
    snprintf(t->name, sizeof(t->name), "%s", name ? name : "");
    thix_add(r, r->nthreads - 1);
    return t;
}

struct hthread *history_thread(struct hrank *r, uint64_t ident, int tid, const char *name,
                               bool main)
{
    return thread_of(r, 0, ident, tid, name, main);
}

struct hthread *history_worker_thread(struct hrank *r, int worker, uint64_t ident, int tid,
                                      const char *name)
{
    return thread_of(r, worker, ident, tid, name, false);
}

uint64_t history_task_ident(uint64_t addr, const char *name)
{
    uint64_t h = addr * 0x9e3779b97f4a7c15ull;

    for (const unsigned char *c = (const unsigned char *)name; c && *c; c++)
        h = (h ^ *c) * 0x100000001b3ull;
    return h | (1ull << 63);
}

/* Cuts s to at most max bytes without splitting a UTF-8 sequence. */
static void utf8_cut(char *s, size_t max)
{
    size_t n = strlen(s);

    if (n <= max)
        return;
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80) /* s[n] continues a sequence */
        n--;
    s[n] = '\0';
}

struct hthread *history_task_find(struct hrank *r, uint64_t addr, const char *name)
{
    return taskix_find(r, history_task_ident(addr, name));
}

struct hthread *history_task(struct hrank *r, uint64_t addr, const char *name, uint64_t thread)
{
    uint64_t ident = history_task_ident(addr, name);
    struct hthread *t = taskix_find(r, ident);

    if (!t) {
        GROW(r->threads, r->nthreads, r->cap);
        t = memset(&r->threads[r->nthreads++], 0, sizeof(*t));
        t->ident = ident;
        snprintf(t->name, sizeof(t->name), "%s", name ? name : "");
        /* Short enough for "task NAME" to fit a thread name, and still UTF-8. */
        utf8_cut(t->name, sizeof(t->name) - 6);
        t->task = true;
        taskix_add(r, r->nthreads - 1);
    }
    t->task_thread = thread;
    return t;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

    return a < b ? -1 : a > b;
}

/* Drops the thread records for which drop[k] is set, keeping the others in order. */
static void threads_drop(struct hrank *r, const bool *drop)
{
    size_t kept = 0;

    for (size_t k = 0; k < r->nthreads; k++) {
        if (drop[k])
            history_thread_free_runs(&r->threads[k]);
        else
            r->threads[kept++] = r->threads[k];
    }
    r->nthreads = kept;
    index_free(r);
}

size_t history_tasks_fold(struct history *h, struct hrank *r, size_t keep)
{
    uint64_t *last = x_calloc(r->nthreads + 1, sizeof(*last)), cut;
    bool *drop;
    size_t ended = 0, fold, less = 0;

    for (size_t k = 0; k < r->nthreads; k++)
        if (r->threads[k].task && r->threads[k].gone)
            last[ended++] = r->threads[k].last;
    if (ended <= keep) {
        free(last);
        return 0;
    }
    /* The fold oldest-ended go: every lane that ended before cut, then as many of those that
     * ended at cut as are still wanted. */
    fold = ended - keep;
    qsort(last, ended, sizeof(*last), cmp_u64);
    cut = last[fold - 1];
    for (size_t i = 0; i < fold; i++)
        less += last[i] < cut;
    drop = x_calloc(r->nthreads + 1, sizeof(*drop));
    for (size_t k = 0, ties = fold - less; k < r->nthreads; k++) {
        const struct hthread *t = &r->threads[k];

        if (!t->task || !t->gone || t->last > cut)
            continue;
        if (t->last == cut && !ties)
            continue;
        ties -= t->last == cut;
        drop[k] = true;
    }
    threads_drop(r, drop);
    free(drop);
    free(last);
    r->tasks_folded += fold;
    h->tasks_folded += fold;
    return fold;
}

void history_observe(struct hthread *t, uint32_t stack, uint64_t now)
{
    struct hrun *last = t->nruns ? &t->open_run : NULL;

    if (!t->first)
        t->first = now;
    t->last = now;
    if (last && last->stack == stack && now >= last->t1) {
        last->t1 = now; /* the open run is the thread record's own: no clone shares it */
        return;
    }
    history_run_append(t, stack, now, now);
}

void history_thread_gone(struct hthread *t, uint64_t now)
{
    (void)now;
    t->gone = true;
}

void history_rank_exit(struct hrank *r, uint64_t now)
{
    r->exited = true;
    r->end = now;
    for (size_t i = 0; i < r->nthreads; i++)
        r->threads[i].gone = true;
}

void history_counter(struct history *h, enum series_id id, const char *name, int pid, uint64_t t,
                     double v)
{
    struct hseries *s = NULL;

    if (!name)
        name = series_name(id) ? series_name(id) : "";
    for (size_t i = 0; i < h->nseries && !s; i++)
        if (h->series[i].id == id && h->series[i].pid == pid && !strcmp(h->series[i].name, name))
            s = &h->series[i];
    if (!s) {
        GROW(h->series, h->nseries, h->series_cap);
        s = memset(&h->series[h->nseries++], 0, sizeof(*s));
        s->id = id;
        snprintf(s->name, sizeof(s->name), "%s", name);
        snprintf(s->key, sizeof(s->key), "%s", series_key(id));
        s->pid = pid;
    }
    series_push(s, t, v);
}

/* What malloc adds to each interned string beyond its bytes (its header and rounding). */
#define STR_OVERHEAD 16

/* What the thread records would cost if each had its first runs only: constant time per rank,
 * for history_over_budget to see a burst of new threads. */
static size_t threads_estimate(const struct history *h)
{
    size_t b = 0;

    for (size_t i = 0; i < h->nranks; i++)
        b += h->ranks[i].cap * (sizeof(struct hthread) + RUNS_FIRST * sizeof(struct hrun));
    return b;
}

/* Bytes of the interning tables and the strings: what grows when samples bring new frames.
 * Constant time, so that it can be asked after every sample. */
static size_t tables_memory(const struct history *h)
{
    const struct intern *in = h->intern;
    size_t b = h->frames_cap * sizeof(struct hframe) + h->stacks_cap * sizeof(struct hstack) +
               h->stack_frames_cap * sizeof(uint32_t) + h->nstack_remap * sizeof(uint32_t);

    if (in)
        b += sizeof(*in) + in->str_bytes + in->nstr * STR_OVERHEAD + in->strcap * sizeof(char *) +
             (in->strs.cap + in->frames.cap + in->stacks.cap) * 12 +
             in->frame_str_cap * 2 * sizeof(uint32_t);
    return b;
}

size_t history_memory(const struct history *h)
{
    size_t b = sizeof(*h) + tables_memory(h) + h->ranks_cap * sizeof(struct hrank) +
               h->series_cap * sizeof(struct hseries);

    for (size_t i = 0; i < h->nranks; i++) {
        const struct hrank *r = &h->ranks[i];
        const struct taskix *x = r->task_index;

        const struct thix *y = r->thread_index;

        b += x ? sizeof(*x) + x->cap * sizeof(*x->slot) : 0;
        b += y ? sizeof(*y) + y->cap * sizeof(*y->slot) : 0;
        b += r->cap * sizeof(struct hthread);
        for (size_t k = 0; k < r->nthreads; k++)
            b += runs_bytes(&r->threads[k]);
    }
    for (size_t i = 0; i < h->nseries; i++)
        b += h->series[i].cap * sizeof(struct hpoint);
    return b;
}

size_t history_budget(const struct history *h)
{
    return h->mem_cap / HISTORY_CAP_SHARE;
}

bool history_over_budget(const struct history *h)
{
    /* The rest (runs, series) as the last trim left it; the thread estimate may exceed what
     * the threads then cost (threads without runs), hence the floor at 0. */
    size_t was = h->trim_tables + h->trim_threads;
    size_t rest = h->trim_bytes > was ? h->trim_bytes - was : 0;

    /* A history that the last trim could not bring within its budget (what it holds is live)
     * waits for the regular trims: compacting it at once again would gain nothing. */
    return h->mem_cap && !h->trim_failed &&
           rest + tables_memory(h) + threads_estimate(h) > history_budget(h);
}

/* What a compaction carries over: maps from the old ids to the new (HSTACK_NONE: not yet) of
 * stacks, frames and strings, and a scratch array of frame ids. */
struct carry {
    uint32_t *stack, *frame, *str;
    uint32_t *ids;
    size_t cap;
};

static uint32_t *carry_map(size_t n)
{
    uint32_t *m = x_reallocarray(NULL, n ? n : 1, sizeof(*m));

    memset(m, 0xff, (n ? n : 1) * sizeof(*m));
    return m;
}

/* The stack id in the compacted history nh of stack id of h, interning it there on first use;
 * its frames' strings move from h's tables to nh's. */
static uint32_t carry_stack(struct history *h, struct history *nh, uint32_t id, struct carry *c)
{
    const struct hstack *st = &h->stacks[id];
    struct intern *from = h->intern;

    if (c->stack[id] != HSTACK_NONE)
        return c->stack[id];
    if (st->nframes > c->cap) {
        c->cap = st->nframes;
        c->ids = x_reallocarray(c->ids, c->cap, sizeof(*c->ids));
    }
    for (uint32_t k = 0; k < st->nframes; k++) {
        uint32_t f = h->stack_frames[st->first + k];

        if (c->frame[f] == HSTACK_NONE) {
            uint32_t fn = move_str(nh->intern, from, from->frame_str[2 * f], c->str);
            uint32_t file = move_str(nh->intern, from, from->frame_str[2 * f + 1], c->str);

            c->frame[f] = intern_frame_ids(nh, &h->frames[f], fn, file);
        }
        c->ids[k] = c->frame[f];
    }
    c->stack[id] = history_intern_stack_ids(nh, c->ids, st->nframes);
    return c->stack[id];
}

/* Rebuilds the interning tables from what the runs refer to; every run's stack is renumbered
 * and h->stack_remap says how. The strings kept move to the new tables (no copy), so the
 * compaction's transient cost is the new tables only. */
static void compact(struct history *h)
{
    size_t old = h->nstacks;
    struct history nh;
    struct carry c = {carry_map(h->nstacks), carry_map(h->nframes),
                      carry_map(((struct intern *)h->intern)->nstr), NULL, 0};

    memset(&nh, 0, sizeof(nh));
    nh.intern = intern_new();
    /* The remap of the previous compaction is no longer wanted: it goes first. */
    free(h->stack_remap);
    h->stack_remap = NULL;
    h->nstack_remap = 0;
    for (size_t i = 0; i < h->nranks; i++)
        for (size_t k = 0; k < h->ranks[i].nthreads; k++) {
            struct hthread *t = &h->ranks[i].threads[k];
            struct hrun *runs = runs_own(t); /* clones keep the old stack ids */

            for (size_t r = 0; r < t->nruns; r++) {
                struct hrun *run = r + 1 < t->nruns ? &runs[r] : &t->open_run;

                if (run->stack != HSTACK_NONE && run->stack < h->nstacks)
                    run->stack = carry_stack(h, &nh, run->stack, &c);
            }
        }
    free(c.ids);
    free(c.frame);
    free(c.str);
    /* Clones of the old tables keep them, and through the old generation the strings their
     * frames point at, dropped now or later. */
    hgen_link(((struct intern *)h->intern)->gen, ((struct intern *)nh.intern)->gen);
    intern_free(h->intern);
    h->intern = nh.intern;
    h->frames = nh.frames, h->nframes = nh.nframes, h->frames_cap = nh.frames_cap;
    h->stacks = nh.stacks, h->nstacks = nh.nstacks, h->stacks_cap = nh.stacks_cap;
    h->stack_frames = nh.stack_frames, h->nstack_frames = nh.nstack_frames;
    h->stack_frames_cap = nh.stack_frames_cap;
    h->stack_remap = c.stack;
    h->nstack_remap = old;
    h->gen++;
    h->compact_at = h->nstacks + h->nframes;
}

/* Drops runs that ended before cut (keeping each thread's last run) and points before cut. */
static void trim_before(struct history *h, uint64_t cut)
{
    for (size_t i = 0; i < h->nranks; i++)
        for (size_t k = 0; k < h->ranks[i].nthreads; k++) {
            struct hthread *t = &h->ranks[i].threads[k];
            size_t d = 0;

            /* Sealed runs only: the open one is always kept. */
            while (d + 1 < t->nruns && t->sealed[d].t1 < cut)
                d++;
            runs_drop_front(t, d);
            h->dropped_runs += d;
        }
    for (size_t i = 0; i < h->nseries; i++) {
        struct hseries *s = &h->series[i];
        size_t d = 0;

        while (d + 1 < s->n && s->pts[d].t < cut)
            d++;
        series_drop_front(s, d);
    }
}

/* Threads that are gone and whose last run ended before cut: nothing of them is left to show.
 * Arrays that emptied shrink with them, and an exited rank with nothing left goes too, so that
 * a job whose threads and processes keep coming and going holds only its window. */
static void drop_gone(struct history *h, uint64_t cut)
{
    size_t nr = 0;

    for (size_t i = 0; i < h->nranks; i++) {
        struct hrank *r = &h->ranks[i];
        size_t kept = 0;

        for (size_t k = 0; k < r->nthreads; k++) {
            struct hthread *t = &r->threads[k];

            if (t->gone && (!t->nruns || t->open_run.t1 < cut)) {
                history_thread_free_runs(t);
                continue;
            }
            r->threads[kept++] = *t;
        }
        if (kept != r->nthreads) /* the index holds thread positions */
            index_free(r);
        r->nthreads = kept;
        if (r->cap > 16 && r->nthreads < r->cap / 4) {
            r->cap = r->nthreads * 2 > 16 ? r->nthreads * 2 : 16;
            r->threads = x_reallocarray(r->threads, r->cap, sizeof(*r->threads));
        }
        if (r->exited && !r->nthreads && r->end < cut) {
            free(r->threads);
            index_free(r);
            continue;
        }
        h->ranks[nr++] = *r;
    }
    h->nranks = nr;
}

/* Compacts once the tables have doubled since the last compaction (amortised: each entry is
 * carried over at most once per doubling), so that a job whose call chains keep changing
 * holds what its window refers to, not all it ever ran. */
static void maybe_compact(struct history *h)
{
    size_t n = h->nstacks + h->nframes;

    if (n >= 4096 && n >= 2 * h->compact_at)
        compact(h);
}

void history_trim(struct history *h, uint64_t now)
{
    uint64_t cut = h->window_ns && now > h->window_ns ? now - h->window_ns : 0;
    size_t budget = history_budget(h);

    if (cut)
        trim_before(h, cut);
    /* Over the budget: give up the oldest quarter of what is left, with the threads that ended
     * before it and what no kept run refers to, until a quarter of the budget is free again
     * (so that the next samples do not cross it at once); a few times at most. */
    if (h->mem_cap && history_memory(h) > budget) {
        /* From where the last such trim stopped: what came before is gone already. */
        cut = cut > h->cap_cut ? cut : h->cap_cut;
        for (int i = 0; i < 8 && history_memory(h) > budget - budget / 4; i++) {
            cut = cut ? cut : h->t0;
            cut += (now > cut ? now - cut : 0) / 4;
            trim_before(h, cut);
            drop_gone(h, cut);
            compact(h);
        }
        h->cap_cut = cut;
    }
    if (cut) {
        drop_gone(h, cut);
        maybe_compact(h);
    }
    h->trim_bytes = history_memory(h);
    h->trim_failed = h->mem_cap && h->trim_bytes > budget;
    h->trim_tables = tables_memory(h);
    h->trim_threads = threads_estimate(h);
}

uint32_t history_remap_stack(const struct history *h, uint32_t id)
{
    return id < h->nstack_remap ? h->stack_remap[id] : HSTACK_NONE;
}

static void *dup_array(const void *src, size_t n, size_t size)
{
    void *p = x_reallocarray(NULL, n ? n : 1, size);

    if (n)
        memcpy(p, src, n * size);
    return p;
}

/* A clone's intern: references to the tables' buffers and generation, no hash tables (a clone
 * is read-only). */
static struct intern *clone_intern(const struct intern *in)
{
    struct intern *c = x_calloc(1, sizeof(*c));

    c->frames_buf = hbuf_ref(in->frames_buf);
    c->stacks_buf = hbuf_ref(in->stacks_buf);
    c->sframes_buf = hbuf_ref(in->sframes_buf);
    c->gen = hgen_ref(in->gen);
    return c;
}

void history_clone(const struct history *h, struct history *out)
{
    *out = *h;
    out->stack_remap = NULL; /* for holders of the original's ids only */
    out->nstack_remap = 0;
    out->intern = clone_intern(h->intern); /* frames, stacks and stack_frames are shared */
    out->ranks = dup_array(h->ranks, h->nranks, sizeof(*h->ranks));
    out->ranks_cap = h->nranks;
    for (size_t i = 0; i < h->nranks; i++) {
        struct hrank *r = &out->ranks[i];

        r->threads = dup_array(h->ranks[i].threads, r->nthreads, sizeof(*r->threads));
        r->cap = r->nthreads;
        r->task_index = r->thread_index = NULL; /* the clone is read-only */
        for (size_t k = 0; k < r->nthreads; k++)
            runs_share(&r->threads[k]);
    }
    out->series = dup_array(h->series, h->nseries, sizeof(*h->series));
    out->series_cap = h->nseries;
    for (size_t i = 0; i < h->nseries; i++)
        series_share(&out->series[i]);
}

static bool pid_in(int pid, const int *pids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (pids[i] == pid)
            return true;
    return false;
}

void history_keep_ranks(struct history *h, const int *pids, size_t n)
{
    size_t k = 0;

    for (size_t i = 0; i < h->nranks; i++) {
        struct hrank *r = &h->ranks[i];

        if (pid_in(r->pid, pids, n)) {
            h->ranks[k++] = *r;
            continue;
        }
        for (size_t t = 0; t < r->nthreads; t++)
            history_thread_free_runs(&r->threads[t]);
        free(r->threads);
        index_free(r);
    }
    h->nranks = k;
    k = 0;
    for (size_t i = 0; i < h->nseries; i++) {
        if (!h->series[i].pid || pid_in(h->series[i].pid, pids, n))
            h->series[k++] = h->series[i];
        else
            series_free(&h->series[i]);
    }
    h->nseries = k;
}
