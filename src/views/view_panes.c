/* The memory, GIL and Rank panes' models: per rank of the (filtered, sorted) rank table, the
 * memory figures with their recent change and RSS history, and the GIL figures with each
 * holder thread named; for one rank, its threads (main only, or all) with their stacks.
 *
 * Pure functions over a history the caller keeps still, a table built from it and the live
 * figures copied with it. Any thread (the UI thread in the monitor). Numbers are left
 * unformatted; the UI formats them. */
#include "ranktop/views/view.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ranktop/base/util.h"

#define D60_NS 60000000000ull

/* Copies the last VIEW_SPARK_POINTS values of s into v; returns how many. */
static size_t spark_values(const struct hseries *s, double *v)
{
    size_t n = 0;

    for (size_t k = s && s->n > VIEW_SPARK_POINTS ? s->n - VIEW_SPARK_POINTS : 0; s && k < s->n;
         k++)
        v[n++] = s->pts[k].v;
    return n;
}

void view_memory(const struct history *h, const struct view_table *t, struct view_memory *out)
{
    out->n = t->n;
    out->rows = x_calloc(t->n ? t->n : 1, sizeof(*out->rows));
    out->pool = x_calloc(t->n ? t->n * VIEW_SPARK_POINTS : 1, sizeof(*out->pool));
    for (size_t i = 0; i < t->n; i++) {
        const struct view_table_row *r = &t->rows[i];
        const struct hseries *s = history_series(h, SERIES_RSS, r->pid);
        struct view_mem_row *m = &out->rows[i];
        double *spark = out->pool + i * VIEW_SPARK_POINTS;

        *m = (struct view_mem_row){.rank = r->rank, .pid = r->pid};
        m->rss_mib = r->rss_mib;
        m->drss_mib = r->drss_mib;
        m->d60_mib = view_series_delta(s, D60_NS);
        m->uss_mib = view_series_last(h, SERIES_USS, r->pid);
        m->swap_mib = view_series_last(h, SERIES_SWAP, r->pid);
        m->nspark = spark_values(s, spark);
        m->spark = spark;
        m->warn = r->drss_mib > VIEW_MEM_WARN_MIB; /* false for NAN */
    }
}

void view_memory_fini(struct view_memory *out)
{
    free(out->rows);
    free(out->pool);
    *out = (struct view_memory){0};
}

static void gil_shares(const struct history *h, const struct engine_rank_live *l, char *buf,
                       size_t len)
{
    size_t at = 0;

    buf[0] = '\0';
    for (size_t k = 0; k < l->nshares && at < len - 1; k++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s %.0f%%", k ? ", " : "",
                               view_thread_name(h, l->pid, l->shares[k].ident), l->shares[k].pct);
}

void view_gil(const struct history *h, const struct view_table *t,
              const struct engine_rank_live *live, size_t nlive, struct view_gil *out)
{
    out->n = t->n;
    out->rows = x_calloc(t->n ? t->n : 1, sizeof(*out->rows));
    for (size_t i = 0; i < t->n; i++) {
        const struct engine_rank_live *l = view_live_of(live, nlive, t->rows[i].pid);
        struct view_gil_row *g = &out->rows[i];

        *g = (struct view_gil_row){.rank = t->rows[i].rank, .pid = t->rows[i].pid};
        if (!l || l->gil_busy_pct < 0)
            continue;
        g->known = true;
        g->busy_pct = l->gil_busy_pct;
        g->switches_per_s = l->gil_switches;
        g->waiters = l->gil_waiters;
        g->gc_pct = l->gc_pct;
        g->warn = l->gil_busy_pct > VIEW_GIL_WARN_BUSY && l->gil_waiters >= VIEW_GIL_WARN_WAITERS;
        gil_shares(h, l, g->shares, sizeof(g->shares));
    }
}

void view_gil_fini(struct view_gil *out)
{
    free(out->rows);
    *out = (struct view_gil){0};
}

static int cmp_rank_thread(const void *a, const void *b)
{
    const struct view_rank_thread *x = a, *y = b;

    if (x->t->main != y->t->main)
        return x->t->main ? -1 : 1;
    if (x->t->worker != y->t->worker) /* the rank's own threads, then each worker's */
        return (x->t->worker > y->t->worker) - (x->t->worker < y->t->worker);
    return (x->t->tid > y->t->tid) - (x->t->tid < y->t->tid);
}

static void rank_title(const struct hrank *r, char *buf, size_t len)
{
    char who[32], pid[24] = "", how[40] = "";

    history_rank_label(r, who, sizeof(who));
    if (r->rank >= 0) /* else "pid 812" already names it */
        snprintf(pid, sizeof(pid), "  pid %d", history_key_pid(r->pid));
    if (r->exited) {
        view_exit_text(r, how + 3, sizeof(how) - 4);
        memcpy(how, "  (", 3);
        strcat(how, ")");
    }
    snprintf(buf, len, "%s%s  %s  Python %s%s", who, pid, r->device, r->python, how);
}

static int cmp_task(const void *a, const void *b)
{
    const struct view_rank_thread *x = a, *y = b;

    return strcmp(x->name, y->name);
}

/* Where a task goes: after the shown thread running its loop, else after the first (main). */
static size_t task_parent(const struct view_rank *out, size_t nthreads, const struct hthread *t)
{
    for (size_t i = 0; i < nthreads; i++)
        if (!out->threads[i].worker && out->threads[i].t->ident == t->task_thread)
            return i;
    return 0;
}

/* Appends the rank's live tasks (out->threads has room for every thread record) and moves
 * each right after its thread. */
static void rank_tasks(const struct history *h, uint64_t now, struct view_rank *out)
{
    size_t nthreads = out->n, ntasks = 0, k = 0;
    struct view_rank_thread *all;
    size_t *parent;

    for (size_t i = 0; i < out->r->nthreads; i++) {
        const struct hthread *t = &out->r->threads[i];
        struct view_rank_thread *v = &out->threads[nthreads + ntasks];

        if (!t->task || t->gone)
            continue;
        *v = (struct view_rank_thread){.t = t, .name = t->name, .task = true};
        v->stack = view_thread_stack(h, t);
        v->since = view_since_fchange(h, t, now);
        ntasks++;
    }
    if (!ntasks || !nthreads) { /* no thread to put them under: tasks alone, by name */
        out->n = nthreads + ntasks;
        x_qsort(out->threads + nthreads, ntasks, sizeof(*out->threads), cmp_task);
        return;
    }
    x_qsort(out->threads + nthreads, ntasks, sizeof(*out->threads), cmp_task);
    parent = x_calloc(ntasks, sizeof(*parent));
    for (size_t j = 0; j < ntasks; j++)
        parent[j] = task_parent(out, nthreads, out->threads[nthreads + j].t);
    all = x_calloc(nthreads + ntasks, sizeof(*all));
    for (size_t i = 0; i < nthreads; i++) {
        all[k++] = out->threads[i];
        for (size_t j = 0; j < ntasks; j++)
            if (parent[j] == i)
                all[k++] = out->threads[nthreads + j];
    }
    memcpy(out->threads, all, k * sizeof(*all));
    out->n = k;
    free(all);
    free(parent);
}

void view_rank(const struct history *h, int pid, bool all_threads, uint64_t now,
               struct view_rank *out)
{
    view_rank_tasks(h, pid, all_threads, false, now, out);
}

void view_rank_tasks(const struct history *h, int pid, bool all_threads, bool tasks, uint64_t now,
                     struct view_rank *out)
{
    memset(out, 0, sizeof(*out));
    for (size_t i = h->nranks; i-- > 0 && !out->r;)
        if (h->ranks[i].pid == pid)
            out->r = &h->ranks[i];
    if (!out->r)
        return;
    rank_title(out->r, out->title, sizeof(out->title));
    out->threads = x_calloc(out->r->nthreads ? out->r->nthreads : 1, sizeof(*out->threads));
    for (size_t k = 0; k < out->r->nthreads; k++) {
        const struct hthread *t = &out->r->threads[k];
        struct view_rank_thread *v = &out->threads[out->n];

        /* Main-thread mode shows each worker's main thread too (the sampler reads no other). */
        if (t->gone || t->task || (!all_threads && !t->worker && t != view_main_thread(out->r)))
            continue;
        v->t = t;
        v->name = t->name[0] ? t->name : t->main ? "MainThread" : "?";
        v->worker = t->worker;
        v->stack = view_thread_stack(h, t);
        v->since = view_since_fchange(h, t, now);
        out->n++;
    }
    x_qsort(out->threads, out->n, sizeof(*out->threads), cmp_rank_thread);
    if (tasks)
        rank_tasks(h, now, out);
}

void view_rank_fini(struct view_rank *out)
{
    free(out->threads);
    memset(out, 0, sizeof(*out));
}
