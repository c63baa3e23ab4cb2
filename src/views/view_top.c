/* Top functions over a recent window (py-spy top's table): for each function (merged by
 * function and file, lines ignored) the share of sampled thread time it was the innermost
 * frame ("own") and anywhere on the stack ("total", once per stack so recursion does not count
 * twice).
 *
 * Time comes from the runs: a run holds its stack from its t0 until the next run's t0; the
 * last run for one sampling interval after its last sample (cut at the rank's exit), as the
 * exporters do. Each run is weighted by its overlap with the window, the weights are summed per
 * stack, and only then are stacks walked frame by frame, so a long history with few distinct
 * stacks costs little. Time with no readable stack is left out of the denominator. */
#include "ranktop/views/view.h"

#include <stdlib.h>
#include <string.h>

#include "ranktop/base/status.h"
#include "ranktop/base/hash.h"
#include "ranktop/base/util.h"

#define GAPS_PER_THREAD 64 /* recent run gaps per thread used to estimate the interval */

struct wstack {
    uint32_t stack;
    uint64_t w; /* ns */
};

struct topb {
    const struct history *h;
    uint64_t from, to, ival;
    struct wstack *ws;
    size_t nws, wscap;
    struct view_top *out;
    size_t rowcap;
    uint32_t *mark; /* per row: last stack (+1) that counted it in total */
    int *slot;      /* row index + 1 */
    size_t mask;
};

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

uint64_t view_top_interval(const struct history *h)
{
    uint64_t *gaps = NULL, ival = VIEW_DEFAULT_INTERVAL_NS;
    size_t n = 0, cap = 0;

    for (size_t i = 0; i < h->nranks; i++)
        for (size_t k = 0; k < h->ranks[i].nthreads; k++) {
            const struct hthread *t = &h->ranks[i].threads[k];
            /* Tasks are read at their own, lower rate (ENGINE_ASYNC_HZ): not the interval. */
            size_t r = t->task                      ? t->nruns
                       : t->nruns > GAPS_PER_THREAD ? t->nruns - GAPS_PER_THREAD
                                                    : 1;

            for (; r < t->nruns; r++) {
                if (history_run(t, r)->t0 <= history_run(t, r - 1)->t1)
                    continue;
                if (n == cap) {
                    cap = cap ? cap * 2 : 256;
                    gaps = x_reallocarray(gaps, cap, sizeof(*gaps));
                }
                gaps[n++] = history_run(t, r)->t0 - history_run(t, r - 1)->t1;
            }
        }
    if (n) {
        x_qsort(gaps, n, sizeof(*gaps), cmp_u64);
        ival = gaps[n / 2];
    }
    free(gaps);
    return ival;
}

static uint64_t run_end(const struct hrank *r, const struct hthread *t, size_t i, uint64_t ival)
{
    uint64_t e, t1;

    if (i + 1 < t->nruns)
        return history_run(t, i + 1)->t0;
    t1 = history_run(t, i)->t1;
    e = t1 + ival;
    if (r->exited && r->end < e)
        e = r->end;
    return e < t1 ? t1 : e;
}

static void add_weight(struct topb *b, uint32_t stack, uint64_t w)
{
    if (b->nws == b->wscap) {
        b->wscap = b->wscap ? b->wscap * 2 : 256;
        b->ws = x_reallocarray(b->ws, b->wscap, sizeof(*b->ws));
    }
    b->ws[b->nws++] = (struct wstack){stack, w};
}

static void weigh_thread(struct topb *b, const struct hrank *r, const struct hthread *t)
{
    for (size_t i = 0; i < t->nruns; i++) {
        const struct hrun *run = history_run(t, i);
        uint32_t stack = run->stack;
        uint64_t s = run->t0 > b->from ? run->t0 : b->from;
        uint64_t e = run_end(r, t, i, b->ival);

        e = e < b->to ? e : b->to;
        if (e <= s || stack == HSTACK_NONE || stack >= b->h->nstacks)
            continue;
        b->out->sampled_ns += e - s;
        add_weight(b, stack, e - s);
    }
}

static int cmp_wstack(const void *a, const void *b)
{
    const struct wstack *x = a, *y = b;

    return (x->stack > y->stack) - (x->stack < y->stack);
}

/* Sums the weights per stack in place; returns the number of distinct stacks. */
static size_t merge_weights(struct topb *b)
{
    size_t m = 0;

    if (!b->nws)
        return 0;
    x_qsort(b->ws, b->nws, sizeof(*b->ws), cmp_wstack);
    for (size_t i = 0; i < b->nws; i++) {
        if (m && b->ws[m - 1].stack == b->ws[i].stack)
            b->ws[m - 1].w += b->ws[i].w;
        else
            b->ws[m++] = b->ws[i];
    }
    return m;
}

static void rehash(struct topb *b)
{
    size_t nslot = b->mask ? (b->mask + 1) * 2 : 256;

    free(b->slot);
    b->slot = x_calloc(nslot, sizeof(*b->slot));
    b->mask = nslot - 1;
    for (size_t i = 0; i < b->out->nrows; i++) {
        const struct view_top_row *row = &b->out->rows[i];
        size_t j = (hash_str(row->function) * 31 + hash_str(row->file)) & b->mask;

        while (b->slot[j])
            j = (j + 1) & b->mask;
        b->slot[j] = (int)i + 1;
    }
}

/* The row of frame f's function, created on first sight. */
static size_t row_of(struct topb *b, const struct hframe *f)
{
    struct view_top *out = b->out;
    size_t j;

    if ((out->nrows + 1) * 2 > b->mask + 1)
        rehash(b);
    for (j = (hash_str(f->function) * 31 + hash_str(f->file)) & b->mask; b->slot[j];
         j = (j + 1) & b->mask) {
        const struct view_top_row *row = &out->rows[b->slot[j] - 1];

        if (hash_str_same(row->function, f->function) && hash_str_same(row->file, f->file))
            return (size_t)b->slot[j] - 1;
    }
    if (out->nrows == b->rowcap) {
        b->rowcap = b->rowcap ? b->rowcap * 2 : 64;
        out->rows = x_reallocarray(out->rows, b->rowcap, sizeof(*out->rows));
        b->mark = x_reallocarray(b->mark, b->rowcap, sizeof(*b->mark));
    }
    out->rows[out->nrows] = (struct view_top_row){.function = f->function, .file = f->file};
    b->mark[out->nrows] = 0;
    b->slot[j] = (int)out->nrows + 1;
    return out->nrows++;
}

static void count_stack(struct topb *b, const struct wstack *ws)
{
    const struct history *h = b->h;
    const uint32_t *ids = history_stack_frames(h, ws->stack);
    uint32_t nf = h->stacks[ws->stack].nframes;

    size_t own;

    if (!nf)
        return;
    /* row_of may move the rows: take the index before indexing. */
    own = row_of(b, &h->frames[ids[nf - 1]]);
    b->out->rows[own].own_ns += ws->w;
    for (uint32_t d = 0; d < nf; d++) {
        size_t r = row_of(b, &h->frames[ids[d]]);

        /* A recursive function is on the stack once as far as total goes. */
        if (b->mark[r] == ws->stack + 1)
            continue;
        b->mark[r] = ws->stack + 1;
        b->out->rows[r].total_ns += ws->w;
    }
}

static int cmp_row(const void *a, const void *b)
{
    const struct view_top_row *x = a, *y = b;
    int c;

    if (x->own_ns != y->own_ns)
        return x->own_ns > y->own_ns ? -1 : 1;
    if (x->total_ns != y->total_ns)
        return x->total_ns > y->total_ns ? -1 : 1;
    if ((c = strcmp(x->function ? x->function : "", y->function ? y->function : "")))
        return c;
    return strcmp(x->file ? x->file : "", y->file ? y->file : "");
}

static void finish_rows(struct view_top *out)
{
    if (out->nrows)
        x_qsort(out->rows, out->nrows, sizeof(*out->rows), cmp_row);
    if (out->nrows > VIEW_MAX_ROWS) {
        out->nrows = VIEW_MAX_ROWS;
        out->truncated = true;
    }
    for (size_t i = 0; i < out->nrows; i++) {
        struct view_top_row *row = &out->rows[i];

        row->own_pct = out->sampled_ns ? 100.0 * (double)row->own_ns / (double)out->sampled_ns : 0;
        row->total_pct =
            out->sampled_ns ? 100.0 * (double)row->total_ns / (double)out->sampled_ns : 0;
    }
}

/* Weighs the chosen threads of every rank with pid rank_pid (0: all); false if none has it. */
static bool weigh_ranks(struct topb *b, int rank_pid, bool all_threads)
{
    bool found = !rank_pid;

    for (size_t i = 0; i < b->h->nranks; i++) {
        const struct hrank *r = &b->h->ranks[i];
        const struct hthread *main_t;

        if (rank_pid && r->pid != rank_pid)
            continue;
        found = true;
        if (!all_threads) {
            if ((main_t = view_main_thread(r)))
                weigh_thread(b, r, main_t);
            continue;
        }
        for (size_t k = 0; k < r->nthreads; k++)
            /* The rank's own threads, as the GIL view (tasks would count their loop twice). */
            if (!r->threads[k].worker && !r->threads[k].task)
                weigh_thread(b, r, &r->threads[k]);
    }
    return found;
}

int view_top(const struct history *h, uint64_t now, uint64_t window_ns, int rank_pid,
             bool all_threads, struct view_top *out)
{
    struct topb b = {.h = h, .out = out, .to = now};
    bool found;
    size_t n;

    memset(out, 0, sizeof(*out));
    b.from = window_ns && now > window_ns ? now - window_ns : 0;
    b.ival = out->interval_ns = view_top_interval(h);
    found = weigh_ranks(&b, rank_pid, all_threads);
    n = merge_weights(&b);
    for (size_t i = 0; i < n; i++)
        count_stack(&b, &b.ws[i]);
    finish_rows(out);
    free(b.ws);
    free(b.mark);
    free(b.slot);
    if (!found)
        return APP_E_NOTFOUND;
    return out->truncated ? APP_E_LIMIT : 0;
}

void view_top_fini(struct view_top *out)
{
    free(out->rows);
    memset(out, 0, sizeof(*out));
}
