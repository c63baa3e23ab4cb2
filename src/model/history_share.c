/* What a history shares with its clones instead of copying: each thread's sealed runs, each
 * series' points and the interning tables (frames, stacks, stack_frames) live in
 * reference-counted buffers (struct hbuf), and history_clone takes a reference to them, so that
 * a reader's view costs the history's records (ranks, threads, series), not its runs, points
 * and tables. Interned strings stay alive for the clones that point at them through their
 * tables' generation (struct hgen).
 *
 * Invariants: the history is a buffer's one writer, on its writer's thread (the recorder, or
 * whoever holds the engine lock when none runs). It appends past the end of every holder's
 * range only (a holder's range ends where the writer's did when it took its reference, and
 * the writer's end never moves back), so what a holder reads never changes. It moves elements
 * (a trim's relayout) or rewrites them (a compaction renumbers stacks) only in a buffer it
 * holds alone, and otherwise moves them to a new buffer, leaving the old one to its holders.
 * The last holder to let go frees a buffer, on whatever thread that is: the count is atomic,
 * with acquire/release order, so every read of a holder happens before the free. */
#include "history_share.h"

#include "ranktop/base/util.h"

#include <stdlib.h>
#include <string.h>

#define RUNS_FIRST 4 /* a thread's first sealed runs: most short-lived threads need no more */
#define PTS_FIRST 64

struct hbuf *hbuf_new(size_t cap, size_t size)
{
    struct hbuf *b = x_malloc(sizeof(*b) + (cap ? cap : 1) * size);

    atomic_init(&b->refs, 1);
    b->cap = cap;
    return b;
}

struct hbuf *hbuf_ref(struct hbuf *b)
{
    if (b)
        atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

void hbuf_release(struct hbuf *b)
{
    if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
        free(b);
}

static bool hbuf_alone(const struct hbuf *b)
{
    return atomic_load_explicit(&b->refs, memory_order_acquire) == 1;
}

/* Where *first lies in b, in elements. */
static size_t offset_of(const struct hbuf *b, const void *first, size_t size)
{
    return b ? (size_t)((const char *)first - (const char *)b->data) / size : 0;
}

/* Lays the n elements at *first (in b, or none) out at the start of a buffer of cap >= n
 * elements: b itself when this history holds it alone, else a new one (b's other holders keep
 * theirs). Returns the buffer; *first is its start. */
static struct hbuf *place(struct hbuf *b, void **first, size_t n, size_t cap, size_t size)
{
    if (b && hbuf_alone(b)) {
        if (n && *first != (void *)b->data)
            memmove(b->data, *first, n * size);
        if (cap != b->cap) {
            b = x_reallocarray(b, 1, sizeof(*b) + (cap ? cap : 1) * size);
            b->cap = cap;
        }
    } else {
        struct hbuf *nb = hbuf_new(cap, size);

        if (n)
            memcpy(nb->data, *first, n * size);
        hbuf_release(b);
        b = nb;
    }
    *first = b->data;
    return b;
}

/* Appends element e to the n at *first in *b, past every holder's end. */
static void arr_push(struct hbuf **b, void **first, size_t *n, const void *e, size_t size,
                     size_t min)
{
    if (!*b || offset_of(*b, *first, size) + *n == (*b)->cap)
        *b = place(*b, first, *n, *n < min ? min : 2 * *n, size);
    memcpy((char *)*first + *n * size, e, size);
    (*n)++;
}

/* Drops the first d of the n elements at *first: the start moves (nothing is moved in a buffer
 * others may read); a buffer left a quarter full is laid out anew at half its size, an empty
 * one goes. */
static void arr_drop_front(struct hbuf **b, void **first, size_t *n, size_t d, size_t size)
{
    *first = (char *)*first + d * size;
    *n -= d;
    if (*b && !*n) {
        hbuf_release(*b);
        *b = NULL;
        *first = NULL;
    } else if (*b && (*b)->cap > 64 && *n < (*b)->cap / 4) {
        *b = place(*b, first, *n, (*b)->cap / 2, size);
    }
}

void table_room(struct hbuf **b, void **data, size_t n, size_t *cap, size_t want, size_t size,
                size_t min)
{
    size_t c;

    if (*b && want <= *cap)
        return;
    for (c = *cap ? *cap : min; c < want;)
        c *= 2;
    *b = place(*b, data, n, c, size);
    *cap = c;
}

struct hgen {
    atomic_size_t refs;
    struct hgen *next;
    char **dead;
    size_t ndead;
};

struct hgen *hgen_new(void)
{
    struct hgen *g = x_calloc(1, sizeof(*g));

    atomic_init(&g->refs, 1);
    return g;
}

struct hgen *hgen_ref(struct hgen *g)
{
    if (g)
        atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
    return g;
}

void hgen_release(struct hgen *g)
{
    /* A loop, not recursion: a long-lived clone may hold a long chain. */
    while (g && atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) == 1) {
        struct hgen *next = g->next;

        for (size_t i = 0; i < g->ndead; i++)
            free(g->dead[i]);
        free(g->dead);
        free(g);
        g = next;
    }
}

void hgen_bury(struct hgen *g, char **strs, size_t n)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++)
        k += strs[i] != NULL;
    if (!k)
        return;
    g->dead = x_reallocarray(g->dead, g->ndead + k, sizeof(*g->dead));
    for (size_t i = 0; i < n; i++)
        if (strs[i])
            g->dead[g->ndead++] = strs[i];
}

void hgen_link(struct hgen *g, struct hgen *next)
{
    hgen_release(g->next);
    g->next = hgen_ref(next);
}

static size_t sealed_n(const struct hthread *t)
{
    return t->nruns ? t->nruns - 1 : 0;
}

void history_run_append(struct hthread *t, uint32_t stack, uint64_t t0, uint64_t t1)
{
    if (t->nruns) { /* the open run is sealed */
        struct hbuf *b = t->runbuf;
        void *first = (void *)t->sealed;
        size_t n = sealed_n(t);

        arr_push(&b, &first, &n, &t->open_run, sizeof(struct hrun), RUNS_FIRST);
        t->runbuf = b;
        t->sealed = first;
    }
    t->open_run = (struct hrun){stack, t0, t1};
    t->nruns++;
}

void history_thread_free_runs(struct hthread *t)
{
    hbuf_release(t->runbuf);
    t->runbuf = NULL;
    t->sealed = NULL;
    t->nruns = 0;
}

struct hrun *runs_own(struct hthread *t)
{
    struct hbuf *b = t->runbuf;

    if (b && !hbuf_alone(b)) {
        void *first = (void *)t->sealed;
        size_t room = b->cap - offset_of(b, first, sizeof(struct hrun));

        t->runbuf = place(b, &first, sealed_n(t), room, sizeof(struct hrun));
        t->sealed = first;
    }
    return (struct hrun *)t->sealed;
}

void runs_drop_front(struct hthread *t, size_t d)
{
    struct hbuf *b = t->runbuf;
    void *first = (void *)t->sealed;
    size_t n = sealed_n(t);

    if (!d)
        return;
    arr_drop_front(&b, &first, &n, d, sizeof(struct hrun));
    t->runbuf = b;
    t->sealed = first;
    t->nruns -= d;
}

size_t runs_bytes(const struct hthread *t)
{
    const struct hbuf *b = t->runbuf;

    return b ? sizeof(*b) + b->cap * sizeof(struct hrun) : 0;
}

void runs_share(struct hthread *t)
{
    hbuf_ref(t->runbuf);
}

/* s->cap: the room from s->pts on. */
static void series_room(struct hseries *s)
{
    struct hbuf *b = s->buf;

    s->cap = b ? b->cap - offset_of(b, s->pts, sizeof(struct hpoint)) : 0;
}

void series_push(struct hseries *s, uint64_t t, double v)
{
    struct hpoint p = {t, v};
    struct hbuf *b = s->buf;
    void *first = s->pts;

    arr_push(&b, &first, &s->n, &p, sizeof(p), PTS_FIRST);
    s->buf = b;
    s->pts = first;
    series_room(s);
}

void series_drop_front(struct hseries *s, size_t d)
{
    struct hbuf *b = s->buf;
    void *first = s->pts;

    if (!d)
        return;
    arr_drop_front(&b, &first, &s->n, d, sizeof(struct hpoint));
    s->buf = b;
    s->pts = first;
    series_room(s);
}

void series_share(struct hseries *s)
{
    struct hpoint *p;

    if (s->buf) {
        hbuf_ref(s->buf);
        return;
    }
    /* A series built by hand: its plain array is copied. */
    p = x_reallocarray(NULL, s->n ? s->n : 1, sizeof(*p));
    if (s->n)
        memcpy(p, s->pts, s->n * sizeof(*p));
    s->pts = p;
    s->cap = s->n;
}

void series_free(struct hseries *s)
{
    if (s->buf)
        hbuf_release(s->buf);
    else
        free(s->pts);
    s->buf = NULL;
    s->pts = NULL;
    s->n = s->cap = 0;
}
