/* The view models' indexes and memos (src/views: the rank table's series, live figures and
 * waits looked up by pid and memoised by stack and facts, the hang verdict's odd ranks, the
 * walk back to a stack's last change of functions) against brute-force references built
 * here from the public, linear look-ups (view_series_last, view_live_of, view_rank_wait)
 * and a plain walk over every run.
 *
 * The history is large enough for the indexes to matter: 240 ranks on three hosts, main
 * threads with thousands of runs that move between 40 line variants of two function stacks
 * (more stacks than the walk's memo has slots, so its slots collide), ranks ending in
 * different stacks (many odd ranks), exited ranks, series of several kinds per pid (some pids
 * none), live figures for two ranks in three with mixed states. Single-threaded; no timing. */
#include "ranktop/views/view.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ranktop/model/history.h"
#include "ranktop/base/util.h"
#include "tsupport.h"

#define T0 7000000000000ull
#define MS 1000000ull
#define NR 240
#define NVAR 40
#define NRUNS 3000
#define PID(i) (9000 + 7 * (i))

struct fx {
    struct history h;
    uint32_t fwd[NVAR], bwd[NVAR], odd, io;
    struct engine_rank_live live[NR];
    size_t nlive;
    uint64_t now;
};

static void fx_stacks(struct fx *f)
{
    /* All forward variants, then all backward ones: ids of both kinds share the walk memo's
     * slots (the memo has 16). */
    for (int k = 0; k < NVAR; k++) {
        const struct hframe a[] = {{"forward", "/job/model.py", 20 + k, false},
                                   {"step", "/job/train.py", 30, false},
                                   {"<module>", "/job/train.py", 1, false}};

        f->fwd[k] = history_intern_stack(&f->h, a, 3);
    }
    for (int k = 0; k < NVAR; k++) {
        const struct hframe b[] = {{"backward", "/job/model.py", 60 + k, false},
                                   {"step", "/job/train.py", 31, false},
                                   {"<module>", "/job/train.py", 1, false}};

        f->bwd[k] = history_intern_stack(&f->h, b, 3);
    }
    {
        const struct hframe o[] = {{"load_batch", "/job/data.py", 12, false},
                                   {"step", "/job/train.py", 25, false},
                                   {"<module>", "/job/train.py", 1, false}};
        const struct hframe io[] = {
            {"read", "/usr/lib/python3.11/socket.py", 700, false},
            {"all_reduce", "/torch/distributed/distributed_c10d.py", 1541, false},
            {"<module>", "/job/train.py", 1, false}};

        f->odd = history_intern_stack(&f->h, o, 3);
        f->io = history_intern_stack(&f->h, io, 3);
    }
}

/* Rank i's main thread: runs moving over the line variants, the functions changing every
 * (i % 7 + 1) * 50 runs, a long still stretch at the end for some, another stack for some. */
static void fx_runs(struct fx *f, int i, struct hthread *t)
{
    int every = (i % 7 + 1) * 50;
    uint64_t at = T0;

    for (int k = 0; k < NRUNS; k++, at += 10 * MS) {
        bool back = (k / every) % 2;
        int var = (k * 7 + i) % NVAR;

        history_observe(t, back ? f->bwd[var] : f->fwd[var], at);
    }
    if (i % 5 == 1)
        history_observe(t, f->odd, at);
    if (i % 11 == 2)
        history_observe(t, f->io, at);
    f->now = f->now > at + 5 * MS ? f->now : at + 5 * MS;
}

static void fx_rank(struct fx *f, int i)
{
    char dev[16];
    struct hrank *r;
    struct hthread *t;

    snprintf(dev, sizeof(dev), "gpu %d", i % 8);
    r = history_rank(&f->h, PID(i), i % 37 == 5 ? -1 : i, dev);
    snprintf(r->host, sizeof(r->host), "node%d", i % 3);
    t = history_thread(r, 1, PID(i), "MainThread", true);
    history_thread(r, 2, PID(i) + 1, "pin_memory", false);
    fx_runs(f, i, t);
    if (i % 3 != 2) /* some pids have no series at all */
        for (int s = 0; s < 3; s++) {
            history_counter(&f->h, SERIES_RSS, NULL, PID(i), T0 + (uint64_t)s * 1000 * MS,
                            1000 + i * 3 + s);
            history_counter(&f->h, SERIES_PSS, NULL, PID(i), T0 + (uint64_t)s * 1000 * MS, i);
            history_counter(&f->h, SERIES_CPU, NULL, PID(i), T0 + (uint64_t)s * 1000 * MS,
                            (double)(i % 4) * 25); /* many ties: the sort falls back to pid */
        }
    if (i % 13 == 4) {
        history_rank_exit(r, f->now);
        r->exit_code = i % 2 ? 1 : -1;
        r->exit_signal = i % 2 ? 0 : 11;
    }
}

static void fx_live(struct fx *f, int i)
{
    struct engine_rank_live *l = &f->live[f->nlive++];
    static const char states[] = {'S', 'R', 'D', 0};

    memset(l, 0, sizeof(*l));
    l->pid = PID(i);
    l->dev_mem_mb = i % 4 ? 100 * i : -1;
    l->gil_busy_pct = i % 6 ? i % 100 : -1;
    l->gc_pct = -1;
    l->stopped = i % 29 == 3;
    l->state = states[i % 4];
    l->syscall = i % 4 == 2 ? 0 : -1; /* read on x86-64 and aarch64 alike is not assumed */
    l->in_gc = i % 17 == 1 ? 1 : -1;
    if (i % 9 == 0) {
        l->nshares = 1;
        l->shares[0].ident = 2;
        l->shares[0].pct = 80;
    }
}

static void fx_build(struct fx *f)
{
    memset(f, 0, sizeof(*f));
    history_init(&f->h, T0, 0, "node0");
    fx_stacks(f);
    for (int i = 0; i < NR; i++)
        fx_rank(f, i);
    /* Live figures in another order than the ranks, for two ranks in three. */
    for (int i = NR; i-- > 0;)
        if (i % 3)
            fx_live(f, i);
}

/* The walk as it was written first: every run back, hashing each stack anew. */
static uint64_t ref_since(const struct history *h, const struct hthread *t, uint64_t now)
{
    uint64_t key;
    size_t i;

    if (!t || !t->nruns)
        return 0;
    i = t->nruns - 1;
    key = view_stack_fkey(h, history_run(t, i)->stack);
    for (size_t steps = 0; i > 0 && steps < 100000; i--, steps++)
        if (view_stack_fkey(h, history_run(t, i - 1)->stack) != key)
            break;
    return now > history_run(t, i)->t0 ? now - history_run(t, i)->t0 : 0;
}

static bool same_double(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

static void check_table(struct fx *f, enum view_sort sort)
{
    struct view_table_in in = {.sort = sort, .live = f->live, .nlive = f->nlive};
    struct view_table t;

    view_table(&f->h, f->now, &in, &t);
    ck_assert_uint_eq(t.n, f->h.nranks);
    for (size_t i = 0; i < t.n; i++) {
        const struct view_table_row *r = &t.rows[i];
        const struct hrank *hr = &f->h.ranks[r->hrank];
        const struct hthread *m = view_main_thread(hr);
        const struct engine_rank_live *l = view_live_of(f->live, f->nlive, r->pid);
        char why[sizeof(r->wait_why)] = "";
        enum wait_kind k =
            view_rank_wait(&f->h, hr, view_thread_stack(&f->h, m), l, NULL, why, sizeof(why));

        ck_assert_int_eq(r->pid, hr->pid);
        ck_assert(same_double(r->cpu, view_series_last(&f->h, SERIES_CPU, r->pid)));
        ck_assert(same_double(r->rss_mib, view_series_last(&f->h, SERIES_RSS, r->pid)));
        ck_assert_int_eq(r->dev_mem_mb, l ? l->dev_mem_mb : -1);
        ck_assert_int_eq(r->wait, k);
        ck_assert_str_eq(r->wait_why, why);
        ck_assert(r->since_s == (double)ref_since(&f->h, m, f->now) / 1e9);
        if (i) { /* sorted, ties by pid */
            const struct view_table_row *p = &t.rows[i - 1];

            if (sort == VIEW_SORT_RANK && (p->rank < 0) == (r->rank < 0) && p->rank != r->rank)
                ck_assert(r->rank < 0 ? true : p->rank < r->rank);
            if (sort == VIEW_SORT_CPU && same_double(p->cpu, r->cpu))
                ck_assert_int_lt(p->pid, r->pid);
        }
    }
    view_table_fini(&t);
}

START_TEST(test_table_as_reference)
{
    struct fx *f = x_calloc(1, sizeof(*f));

    fx_build(f);
    check_table(f, VIEW_SORT_RANK);
    check_table(f, VIEW_SORT_CPU);
    check_table(f, VIEW_SORT_RSS);
    history_fini(&f->h);
    free(f);
}
END_TEST

START_TEST(test_hang_as_reference)
{
    struct fx *f = x_calloc(1, sizeof(*f));
    struct view_hang_in in = {.ignore_devices = true, .live = NULL};
    struct view_hang out;

    fx_build(f);
    in.live = f->live;
    in.nlive = f->nlive;
    view_hang(&f->h, f->now, 1, &in, &out);
    ck_assert_uint_gt(out.nodd, NR / 4);
    for (size_t i = 0; i < out.nodd; i++) {
        const struct view_hang_rank *o = &out.odd[i];
        const struct hrank *hr = NULL;
        char host[sizeof(o->host)] = "";

        for (size_t k = 0; k < f->h.nranks; k++)
            if (f->h.ranks[k].pid == o->pid) {
                hr = &f->h.ranks[k];
                if (hr->host[0] && strcmp(hr->host, f->h.host))
                    snprintf(host, sizeof(host), "%s", hr->host);
            }
        ck_assert_ptr_nonnull(hr);
        ck_assert_str_eq(o->host, host);
        ck_assert_int_eq(o->wait,
                         view_rank_wait(&f->h, hr, o->stack,
                                        view_live_of(f->live, f->nlive, o->pid), NULL, NULL, 0));
    }
    for (size_t k = 0; k < f->h.nranks; k++) {
        const struct hrank *hr = &f->h.ranks[k];
        uint64_t s = ref_since(&f->h, view_main_thread(hr), f->now);

        if (!hr->exited)
            ck_assert_uint_le(out.since, s); /* the least of the live ranks' */
    }
    view_hang_fini(&out);
    history_fini(&f->h);
    free(f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("view_fast");
    TCase *tc = tcase_create("reference");

    tcase_add_test(tc, test_table_as_reference);
    tcase_add_test(tc, test_hang_as_reference);
    suite_add_tcase(s, tc);
    return ts_run(s);
}
