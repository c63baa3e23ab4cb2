/* The rank table's model: each rank's row with its counter and live figures, the filter the
 * user typed, the chosen sort, and ΔRSS against the memory baseline; plus the look-ups of
 * counter series by id that the memory pane shares.
 *
 * Pure functions over a history the caller keeps still and the live figures copied with it;
 * the baseline is a caller-owned value kept between snapshots. Any thread (the UI thread in
 * the monitor). Rows own their frame text, so they stay valid after the history is freed.
 *
 * The table is built every frame for every rank (a thousand and more across nodes), so its
 * cost must follow the ranks, not ranks times series: a build indexes the series and live
 * figures it reads by pid once (sorted, then binary searched; the first in history order
 * wins, as view_series_last's and view_live_of's scans would), classifies each distinct
 * (stack, facts) wait once (view_wait_memo), and sorts row indexes rather than rows. */
#include "ranktop/views/view.h"
#include "view_priv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ranktop/base/util.h"

double view_series_last(const struct history *h, enum series_id id, int pid)
{
    const struct hseries *s = history_series(h, id, pid);

    return s && s->n ? s->pts[s->n - 1].v : NAN;
}

double view_series_delta(const struct hseries *s, uint64_t span)
{
    size_t k;

    if (!s || s->n < 2)
        return NAN;
    /* Walk back while the previous point is still within span of the newest. */
    for (k = s->n - 1; k > 0 && s->pts[s->n - 1].t - s->pts[k - 1].t <= span; k--)
        ;
    return s->pts[s->n - 1].v - s->pts[k].v;
}

void view_baseline_set(struct view_baseline *b, const struct view_table *t, uint64_t now)
{
    view_baseline_fini(b);
    b->n = t->n;
    b->pid = x_calloc(t->n ? t->n : 1, sizeof(*b->pid));
    b->rss_mib = x_calloc(t->n ? t->n : 1, sizeof(*b->rss_mib));
    for (size_t i = 0; i < t->n; i++) {
        b->pid[i] = t->rows[i].pid;
        b->rss_mib[i] = t->rows[i].rss_mib;
    }
    b->t = now;
}

void view_baseline_extend(struct view_baseline *b, const struct history *h)
{
    for (size_t i = 0; i < h->nseries; i++) {
        const struct hseries *s = &h->series[i];
        bool known = false;

        if (s->id != SERIES_RSS || !s->pid || !s->n)
            continue;
        for (size_t k = 0; k < b->n && !known; k++)
            known = b->pid[k] == s->pid;
        if (known)
            continue;
        b->pid = x_reallocarray(b->pid, b->n + 1, sizeof(*b->pid));
        b->rss_mib = x_reallocarray(b->rss_mib, b->n + 1, sizeof(*b->rss_mib));
        b->pid[b->n] = s->pid;
        b->rss_mib[b->n++] = s->pts[0].v;
    }
}

void view_baseline_fini(struct view_baseline *b)
{
    free(b->pid);
    free(b->rss_mib);
    *b = (struct view_baseline){0};
}

double view_baseline_delta(const struct view_baseline *b, int pid, double rss_mib)
{
    for (size_t i = 0; b && i < b->n; i++)
        if (b->pid[i] == pid)
            return rss_mib - b->rss_mib[i]; /* NAN when either is */
    return NAN;
}

/* The filter matches the text "rank R pid P HOST FRAME STATE HOLDER", so "rank 3", a host, a
 * function name, "SIGSEGV" or a thread holding the GIL works. */
static bool row_matches(const struct view_table_row *r, const char *host, const char *filter)
{
    char buf[512];

    if (!filter || !filter[0])
        return true;
    snprintf(buf, sizeof(buf), "rank %d pid %d %s %s %s %s", r->rank, history_key_pid(r->pid), host,
             r->top, r->state, r->gil_holder);
    return strstr(buf, filter) != NULL;
}

/* The figure a sort orders by, arranged so that ascending order is the one shown: figures
 * are negated (largest first), unknown ones go last. */
static double sort_key(const struct view_table_row *r, enum view_sort s)
{
    double v = s == VIEW_SORT_CPU     ? r->cpu
               : s == VIEW_SORT_RSS   ? r->rss_mib
               : s == VIEW_SORT_SINCE ? r->since_s
                                      : r->gil;

    if (s == VIEW_SORT_RANK || s >= VIEW_SORT_COUNT)
        return r->rank < 0 ? 1e9 : r->rank;
    return isnan(v) ? 1e18 : -v;
}

static int cmp_rows(const void *a, const void *b, void *arg)
{
    const struct view_table_row *x = a, *y = b;
    enum view_sort s = *(const enum view_sort *)arg;
    double dx = sort_key(x, s), dy = sort_key(y, s);

    if (dx != dy)
        return dx < dy ? -1 : 1;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

/* The thread holding the GIL most, when it is not the main thread (the one the row shows) and
 * holds it at least VIEW_GIL_HOLDER_PCT of the time: the first screen must point at it. */
static void gil_holder(const struct history *h, const struct hrank *hr,
                       const struct engine_rank_live *l, struct view_table_row *r)
{
    const struct hthread *m = view_main_thread(hr);

    if (!l->nshares || l->shares[0].pct < VIEW_GIL_HOLDER_PCT ||
        (m && m->ident == l->shares[0].ident))
        return;
    snprintf(r->gil_holder, sizeof(r->gil_holder), "%s",
             view_thread_name(h, hr->pid, l->shares[0].ident));
    r->gil_holder_pct = l->shares[0].pct;
}

/* A live rank's state: "stuck" once its stack has kept its functions for stuck_after_ns,
 * whatever its CPU (a rank spinning in a wait is as stuck as one asleep in it); else "idle"
 * when it used less than VIEW_IDLE_CPU_PCT of a core over the last reading (blocked in a
 * sleep, a wait or a receive), "run" when it used more or its CPU is not known. */
static const char *live_state(const struct view_table_in *in, const struct view_rank_row *v,
                              double cpu)
{
    if (in->stuck_after_ns && v->since >= in->stuck_after_ns)
        return "stuck";
    return !isnan(cpu) && cpu < VIEW_IDLE_CPU_PCT ? "idle" : "run";
}

/* A dead rank's frame column: where its core went first (the crash is in it), then the last
 * frame seen. */
static void core_first(const char *core, char *top, size_t len)
{
    char last[192];
    size_t n, k;

    snprintf(last, sizeof(last), "%s", top);
    n = (size_t)snprintf(top, len, "core: %.160s", core);
    if (!last[0] || n + 9 >= len)
        return;
    memcpy(top + n, "  last: ", 8);
    n += 8;
    k = strnlen(last, len - n - 1); /* the frame is cut where the column would cut it anyway */
    memcpy(top + n, last, k);
    top[n + k] = '\0';
}

/* What one build reads by pid: the CPU and RSS series, the live figures; and the waits. */
struct table_idx {
    struct view_by_pid *cpu, *rss, *live;
    size_t ncpu, nrss, nlive;
    struct view_wait_memo waits;
};

static void table_idx_init(struct table_idx *x, const struct history *h,
                           const struct view_table_in *in)
{
    size_t nl = in->live ? in->nlive : 0;

    memset(x, 0, sizeof(*x));
    x->cpu = x_malloc((h->nseries ? h->nseries : 1) * sizeof(*x->cpu));
    x->rss = x_malloc((h->nseries ? h->nseries : 1) * sizeof(*x->rss));
    for (size_t i = 0; i < h->nseries; i++) {
        if (h->series[i].id == SERIES_CPU)
            x->cpu[x->ncpu++] = (struct view_by_pid){h->series[i].pid, i};
        else if (h->series[i].id == SERIES_RSS)
            x->rss[x->nrss++] = (struct view_by_pid){h->series[i].pid, i};
    }
    x->live = view_live_index(in->live, nl);
    x->nlive = nl;
    view_by_pid_sort(x->cpu, x->ncpu);
    view_by_pid_sort(x->rss, x->nrss);
    view_wait_memo_init(&x->waits, h->nranks);
}

static void table_idx_fini(struct table_idx *x)
{
    free(x->cpu);
    free(x->rss);
    free(x->live);
    view_wait_memo_fini(&x->waits);
}

/* view_series_last through the index. */
static double last_of(const struct history *h, const struct view_by_pid *v, size_t n, int pid)
{
    const struct view_by_pid *p = view_by_pid_find(v, n, pid);
    const struct hseries *s = p ? &h->series[p->at] : NULL;

    return s && s->n ? s->pts[s->n - 1].v : NAN;
}

static void row_fill(const struct history *h, const struct view_table_in *in, struct table_idx *x,
                     const struct view_rank_row *v, struct view_table_row *r)
{
    const struct view_by_pid *lp = view_by_pid_find(x->live, x->nlive, v->pid);
    const struct engine_rank_live *l = lp ? &in->live[lp->at] : NULL;

    *r = (struct view_table_row){.pid = v->pid, .rank = v->rank, .hrank = v->idx};
    r->exited = v->exited;
    r->cpu = last_of(h, x->cpu, x->ncpu, v->pid);
    r->rss_mib = last_of(h, x->rss, x->nrss, v->pid);
    r->drss_mib = view_baseline_delta(in->base, v->pid, r->rss_mib);
    r->dev_mem_mb = l ? l->dev_mem_mb : -1;
    r->gil = l ? l->gil_busy_pct : NAN;
    r->gc = l ? l->gc_pct : NAN;
    r->since_s = (double)v->since / 1e9;
    if (v->top)
        view_frame_format(v->top, r->top, sizeof(r->top));
    if (v->exited && h->ranks[v->idx].core[0])
        core_first(h->ranks[v->idx].core, r->top, sizeof(r->top));
    if (v->exited)
        view_exit_text(&h->ranks[v->idx], r->state, sizeof(r->state));
    else if (l && l->stopped)
        snprintf(r->state, sizeof(r->state), "stopped");
    else
        snprintf(r->state, sizeof(r->state), "%s", live_state(in, v, r->cpu));
    if (l)
        gil_holder(h, &h->ranks[v->idx], l, r);
    r->wait = view_wait_memo_get(&x->waits, h, &h->ranks[v->idx], v->stack, l, in->waits,
                                 r->wait_why, sizeof(r->wait_why));
}

/* Row indexes ordered as cmp_rows orders the rows, ties by index: the order a stable sort of
 * the rows gives. */
struct order_arg {
    const struct view_table_row *rows;
    enum view_sort sort;
};

static int cmp_order(const void *a, const void *b, void *arg)
{
    const struct order_arg *o = arg;
    enum view_sort s = o->sort;
    int c = cmp_rows(&o->rows[*(const size_t *)a], &o->rows[*(const size_t *)b], &s);

    if (c)
        return c;
    return (*(const size_t *)a > *(const size_t *)b) - (*(const size_t *)a < *(const size_t *)b);
}

/* Sorts the rows by moving each once (the rows are large) after sorting their indexes. */
static void sort_rows(struct view_table *out, enum view_sort sort)
{
    struct order_arg o = {out->rows, sort};
    size_t *ix = x_malloc((out->n ? out->n : 1) * sizeof(*ix));
    struct view_table_row *sorted = x_calloc(out->n ? out->n : 1, sizeof(*sorted));

    for (size_t i = 0; i < out->n; i++)
        ix[i] = i;
    qsort_r(ix, out->n, sizeof(*ix), cmp_order, &o);
    for (size_t i = 0; i < out->n; i++)
        sorted[i] = out->rows[ix[i]];
    free(out->rows);
    out->rows = sorted;
    free(ix);
}

void view_table(const struct history *h, uint64_t now, const struct view_table_in *in,
                struct view_table *out)
{
    struct view_ranks vr;
    struct table_idx x;

    view_ranks(h, now, &vr);
    table_idx_init(&x, h, in);
    out->rows = x_calloc(vr.n ? vr.n : 1, sizeof(*out->rows));
    out->n = 0;
    for (size_t i = 0; i < vr.n; i++) {
        row_fill(h, in, &x, &vr.rows[i], &out->rows[out->n]);
        if (row_matches(&out->rows[out->n], h->ranks[vr.rows[i].idx].host, in->filter))
            out->n++;
    }
    table_idx_fini(&x);
    view_ranks_fini(&vr);
    sort_rows(out, in->sort);
}

void view_table_fini(struct view_table *out)
{
    free(out->rows);
    out->rows = NULL;
    out->n = 0;
}
