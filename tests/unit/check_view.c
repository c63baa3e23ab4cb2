/* Tests for the view models (src/views): the merged tree, rank sets, the hang verdict, top
 * functions, the rank table's rows (filter, sort, ΔRSS against the baseline), the memory and
 * GIL panes, and counter series by id.
 *
 * The main fixture is the story the monitor exists for: 16 ranks sampled once a second, each
 * with a main thread and a pin-memory worker; all are in forward() under train_step() until
 * T(8), then 15 wait in all_reduce() and rank 3 goes into load_batch_slowly() at T(10). It is
 * built through the history API (history_rank, history_thread, history_intern_stack,
 * history_observe), as the engine builds it. Top functions use a crafted 100 ms timeline whose
 * own and total shares are worked out by hand in the comments. Single-threaded. */
#include "ranktop/views/view.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "ranktop/model/history.h"
#include "ranktop/base/status.h"
#include "ranktop/base/util.h"
#include "tsupport.h"

#define T0 5000000000000ull /* history start, ns */
#define SEC 1000000000ull
#define T(k) (T0 + (uint64_t)(k)*SEC) /* main fixture: one sample a second */
#define NRANKS 16
#define ODD_RANK 3
#define PID(i) (4000 + (i))
#define C10D "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py"

struct fx {
    struct history h;
    uint32_t maj, odd, early, work, here;
};

/* Frames are given innermost first, as the sampler returns them. */
static void stacks_init(struct fx *f)
{
    const struct hframe maj[] = {{"all_reduce", C10D, 1541, false},
                                 {"train_step", "/job/train.py", 30, false},
                                 {"main", "/job/train.py", 40, false},
                                 {"<module>", "/job/train.py", 50, false}};
    const struct hframe odd[] = {{"load_batch_slowly", "/job/train.py", 12, false},
                                 {"train_step", "/job/train.py", 25, false},
                                 {"main", "/job/train.py", 40, false},
                                 {"<module>", "/job/train.py", 50, false}};
    const struct hframe early[] = {{"forward", "/job/model.py", 7, false},
                                   {"train_step", "/job/train.py", 28, false},
                                   {"main", "/job/train.py", 40, false},
                                   {"<module>", "/job/train.py", 50, false}};
    const struct hframe work[] = {{"get", "/usr/lib/python3.11/queue.py", 180, false},
                                  {"_worker_loop", "/torch/pin_memory.py", 50, false},
                                  {"_bootstrap", "/usr/lib/python3.11/threading.py", 1002, false}};

    f->maj = history_intern_stack(&f->h, maj, 4);
    f->odd = history_intern_stack(&f->h, odd, 4);
    f->early = history_intern_stack(&f->h, early, 4);
    f->work = history_intern_stack(&f->h, work, 3);
    f->here = history_intern_stack(&f->h, odd + 1, 3); /* ends in train_step itself */
}

static struct hthread *main_of(struct history *h, int i)
{
    return history_thread(history_rank(h, PID(i), i, NULL), 1, PID(i), "MainThread", true);
}

static struct hthread *worker_of(struct history *h, int i, uint64_t ident)
{
    return history_thread(history_rank(h, PID(i), i, NULL), ident, PID(i) + 100, "pin_memory",
                          false);
}

/* Samples every rank once a second from T(0) to T(upto). */
static void fx_build(struct fx *f, int upto)
{
    char dev[16];

    history_init(&f->h, T0, 0, "node1");
    stacks_init(f);
    for (int i = 0; i < NRANKS; i++) {
        snprintf(dev, sizeof(dev), "gpu %d", i);
        history_rank(&f->h, PID(i), i, dev);
    }
    for (int k = 0; k <= upto; k++)
        for (int i = 0; i < NRANKS; i++) {
            uint32_t s = i == ODD_RANK ? (k < 10 ? f->early : f->odd) : (k < 8 ? f->early : f->maj);

            history_observe(main_of(&f->h, i), s, T(k));
            history_observe(worker_of(&f->h, i, 2), f->work, T(k));
        }
}

static const struct view_node *child_named(const struct view_tree *t, int parent, const char *fn)
{
    int n = parent < 0 ? t->root : t->nodes[parent].child;

    for (; n >= 0; n = t->nodes[n].next)
        if (!strcmp(t->nodes[n].function, fn))
            return &t->nodes[n];
    return NULL;
}

static int idx(const struct view_tree *t, const struct view_node *n)
{
    ck_assert_ptr_nonnull(n);
    return (int)(n - t->nodes);
}

static void ranks_text(const struct view_node *n, char *buf, size_t len)
{
    view_rankset_format(n->ranks, n->nranks, buf, len);
}

/* ---- rank sets ---- */

static void check_set(const int *v, size_t n, size_t len, const char *want)
{
    char buf[128];

    memset(buf, 'x', sizeof(buf));
    ck_assert_uint_eq(view_rankset_format(v, n, buf, len), strlen(want));
    ck_assert_str_eq(buf, want);
}

START_TEST(rankset_basic)
{
    const int one[] = {7}, run[] = {3, 0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const int gaps[] = {9, 0, 2, 3, 4, 5}, pair[] = {5, 4}, dup[] = {3, 3, 1, 1, 3};
    const int maj[] = {0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    char buf[4] = "abc";

    check_set(NULL, 0, 16, "");
    check_set(one, 1, 16, "7");
    check_set(run, 16, 16, "0-15");
    check_set(gaps, 6, 16, "0,2-5,9");
    check_set(pair, 2, 16, "4-5");
    check_set(dup, 5, 16, "1,3");
    check_set(maj, 15, 16, "0-2,4-15");
    ck_assert_uint_eq(view_rankset_format(one, 1, buf, 0), 0);
    ck_assert_str_eq(buf, "abc"); /* len 0: nothing written */
}
END_TEST

START_TEST(rankset_truncation)
{
    const int even[] = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18};
    const int run[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    char buf[64];

    /* "0,2,…(+8)" is 11 bytes ("…" is 3): the most that fits in 12 with the NUL. */
    check_set(even, 10, 12, "0,2,\u2026(+8)");
    check_set(even, 10, 11, "0,\u2026(+9)");
    check_set(even, 10, 9, "\u2026(+10)");
    check_set(even, 10, 8, "");
    check_set(even, 10, 1, "");
    check_set(even, 10, 25, "0,2,4,6,8,10,12,14,16,18"); /* exactly fits */
    check_set(even, 10, 24, "0,2,4,6,8,10,12,\u2026(+3)");
    check_set(run, 16, 5, "0-15");
    check_set(run, 16, 4, "");
    ck_assert_uint_eq(view_rankset_format_ex(even, 10, buf, 12, "..."), 11);
    ck_assert_str_eq(buf, "0,2,...(+8)");
}
END_TEST

/* ---- merged tree ---- */

START_TEST(merge_main_threads)
{
    struct fx f;
    struct view_tree t;
    const struct view_node *mod, *mn, *ts, *ar, *lb;
    char buf[64];

    fx_build(&f, 52);
    ck_assert_int_eq(view_merge(&f.h, T(52), NULL, &t), 0);
    ck_assert_uint_eq(t.nstacks, NRANKS);
    ck_assert_uint_eq(t.nnodes, 5);
    ck_assert(!t.truncated);
    mod = child_named(&t, -1, "<module>");
    ck_assert_int_eq(t.root, idx(&t, mod));
    ck_assert_int_eq(mod->next, -1);
    ck_assert_uint_eq(mod->count, NRANKS);
    ranks_text(mod, buf, sizeof(buf));
    ck_assert_str_eq(buf, "0-15");
    mn = child_named(&t, idx(&t, mod), "main");
    ts = child_named(&t, idx(&t, mn), "train_step");
    ck_assert_int_eq(ts->depth, 2);
    ck_assert_uint_eq(ts->count, NRANKS);
    /* Lines differ (15 on line 30, one on 25): merged, with the range and the common one. */
    ck_assert_int_eq(ts->line, 30);
    ck_assert_int_eq(ts->line_min, 25);
    ck_assert_int_eq(ts->line_max, 30);
    ck_assert_str_eq(ts->file, "/job/train.py");

    ar = &t.nodes[ts->child];
    lb = &t.nodes[ar->next];
    ck_assert_str_eq(ar->function, "all_reduce");
    ck_assert_str_eq(lb->function, "load_batch_slowly");
    ck_assert_int_eq(lb->next, -1);
    ck_assert_uint_eq(ar->count, 15);
    ck_assert_uint_eq(ar->nranks, 15);
    ck_assert_uint_eq(ar->nend, 15);
    ck_assert_int_eq(ar->line, 1541);
    ranks_text(ar, buf, sizeof(buf));
    ck_assert_str_eq(buf, "0-2,4-15");
    ck_assert_uint_eq(lb->count, 1);
    ranks_text(lb, buf, sizeof(buf));
    ck_assert_str_eq(buf, "3");
    ck_assert_int_eq(lb->line, 12);

    ck_assert(lb->odd);
    ck_assert(lb->end_odd);
    ck_assert(!ar->odd && !ar->end_odd && !ts->odd && !mod->odd && !mn->odd);

    /* Unchanged: the 15 since T(8), rank 3 since T(10); train_step spans both. */
    ck_assert_uint_eq(ar->unchanged_min, 44 * SEC);
    ck_assert_uint_eq(ar->unchanged_max, 44 * SEC);
    ck_assert_uint_eq(lb->unchanged_min, 42 * SEC);
    ck_assert_uint_eq(lb->unchanged_max, 42 * SEC);
    ck_assert_uint_eq(ts->unchanged_min, 42 * SEC);
    ck_assert_uint_eq(ts->unchanged_max, 44 * SEC);

    ck_assert_uint_eq(t.nvisible, 5);
    ck_assert_int_eq(t.visible[0], idx(&t, mod));
    ck_assert_int_eq(t.visible[1], idx(&t, mn));
    ck_assert_int_eq(t.visible[2], idx(&t, ts));
    ck_assert_int_eq(t.visible[3], idx(&t, ar));
    ck_assert_int_eq(t.visible[4], idx(&t, lb));
    ck_assert_int_eq(lb->parent, idx(&t, ts));
    view_merge_fini(&t);
    view_merge_fini(&t); /* twice is harmless */
    history_fini(&f.h);
}
END_TEST

START_TEST(merge_collapse_and_ids)
{
    struct fx f;
    struct view_tree a, b;
    struct view_merge_opts o = {0};
    uint64_t ids[2];
    const struct view_node *ts;

    fx_build(&f, 12);
    view_merge(&f.h, T(12), NULL, &a);
    ts = child_named(&a, a.nodes[a.root].child, "train_step");
    ck_assert_ptr_nonnull(ts);
    /* Ids name places, not positions: a rebuild later (other counts) gives the same ids. */
    ids[0] = ts->id;
    ids[1] = 42; /* unknown ids are ignored */
    ck_assert_uint_ne(a.nodes[ts->child].id, a.nodes[a.nodes[ts->child].next].id);
    o.collapsed = ids;
    o.ncollapsed = 2;
    history_observe(main_of(&f.h, 5), f.early, T(13));
    ck_assert_int_eq(view_merge(&f.h, T(13), &o, &b), 0);
    ck_assert_uint_eq(b.nvisible, 3);
    ck_assert_str_eq(b.nodes[b.visible[2]].function, "train_step");
    ck_assert_uint_eq(b.nodes[b.visible[2]].id, ids[0]);
    ck_assert(b.nodes[b.visible[2]].collapsed);
    ck_assert(!b.nodes[b.visible[0]].collapsed);
    /* The hidden children are still in the tree: 3 under train_step now. */
    ck_assert_uint_eq(b.nnodes, 6);
    ck_assert_uint_eq(b.nodes[0].id, a.nodes[0].id);
    view_merge_fini(&a);
    view_merge_fini(&b);
    history_fini(&f.h);
}
END_TEST

START_TEST(merge_synthetic_nodes)
{
    struct fx f;
    struct view_tree t;
    const struct view_node *ex, *ns, *mod;
    char buf[64];

    fx_build(&f, 17);
    for (int k = 18; k <= 20; k++)
        for (int i = 0; i < NRANKS; i++)
            history_observe(main_of(&f.h, i),
                            i == 9          ? HSTACK_NONE
                            : i == ODD_RANK ? f.odd
                                            : f.maj,
                            T(k));
    history_rank_exit(history_rank(&f.h, PID(7), 7, NULL), T(15));
    ck_assert_int_eq(view_merge(&f.h, T(20), NULL, &t), 0);
    mod = &t.nodes[t.root];
    ck_assert_str_eq(mod->function, "<module>");
    ck_assert_uint_eq(mod->count, 14);
    ranks_text(mod, buf, sizeof(buf));
    ck_assert_str_eq(buf, "0-6,8,10-15");
    ex = child_named(&t, -1, "<exited>");
    ns = child_named(&t, -1, "<no stack>");
    ck_assert_int_eq(ex->kind, VIEW_NODE_EXITED);
    ck_assert_int_eq(ns->kind, VIEW_NODE_NOSTACK);
    ck_assert_int_eq(ex->child, -1);
    ck_assert_uint_eq(ex->count, 1);
    ck_assert_int_eq(ex->ranks[0], 7);
    ck_assert_int_eq(ns->ranks[0], 9);
    ck_assert(ex->odd && ns->odd && !mod->odd);
    ck_assert_uint_eq(ex->unchanged_max, 5 * SEC);
    ck_assert_uint_eq(ns->unchanged_max, 2 * SEC);
    ck_assert_uint_eq(t.nvisible, t.nnodes);
    view_merge_fini(&t);
    history_fini(&f.h);
}
END_TEST

START_TEST(merge_stack_ending_inside)
{
    struct fx f;
    struct view_tree t;
    const struct view_node *ts;
    int i_ts;

    fx_build(&f, 12);
    history_observe(main_of(&f.h, ODD_RANK), f.here, T(13));
    view_merge(&f.h, T(13), NULL, &t);
    i_ts = t.nodes[t.nodes[t.root].child].child;
    ts = &t.nodes[i_ts];
    ck_assert_str_eq(ts->function, "train_step");
    ck_assert_uint_eq(ts->nend, 1);
    ck_assert_uint_eq(ts->nend_ranks, 1);
    ck_assert_int_eq(ts->end_ranks[0], ODD_RANK);
    ck_assert(ts->end_odd && !ts->odd);
    ck_assert_uint_eq(t.nodes[ts->child].count, 15);
    ck_assert_int_eq(t.nodes[ts->child].next, -1);
    ck_assert(!t.nodes[ts->child].odd);
    view_merge_fini(&t);
    history_fini(&f.h);
}
END_TEST

START_TEST(merge_all_threads)
{
    struct fx f;
    struct view_tree t;
    struct view_merge_opts o = {.all_threads = true};
    const struct view_node *pin, *mt, *boot, *mod;

    fx_build(&f, 12);
    /* Rank 0 gets a second pin-memory worker: 17 stacks from 16 ranks. */
    history_observe(worker_of(&f.h, 0, 3), f.work, T(12));
    ck_assert_int_eq(view_merge(&f.h, T(12), &o, &t), 0);
    ck_assert_uint_eq(t.nstacks, 2 * NRANKS + 1);
    /* Each thread name heads its own subtree, named by the thread (never "?"). */
    pin = &t.nodes[t.root];
    ck_assert_int_eq(pin->kind, VIEW_NODE_THREAD);
    ck_assert_str_eq(pin->function, "pin_memory");
    ck_assert_uint_eq(pin->count, 17);
    boot = &t.nodes[pin->child];
    ck_assert_str_eq(boot->function, "_bootstrap");
    ck_assert_uint_eq(boot->count, 17);
    ck_assert_uint_eq(boot->nranks, NRANKS);
    ck_assert_int_eq(boot->line, 1002);
    mt = &t.nodes[pin->next];
    ck_assert_int_eq(mt->kind, VIEW_NODE_THREAD);
    ck_assert_str_eq(mt->function, "MainThread");
    mod = &t.nodes[mt->child];
    ck_assert_str_eq(mod->function, "<module>");
    ck_assert_uint_eq(mod->count, NRANKS);
    ck_assert(mt->odd); /* fewer stacks than the workers' branch */
    ck_assert_uint_eq(t.nvisible, 2 + 5 + 3);
    view_merge_fini(&t);
    history_fini(&f.h);
}
END_TEST

START_TEST(merge_node_cap)
{
    struct fx f;
    struct view_tree t;
    struct view_merge_opts o = {.max_nodes = 3};
    const struct view_node *ts;

    fx_build(&f, 12);
    ck_assert_int_eq(view_merge(&f.h, T(12), &o, &t), APP_E_LIMIT);
    ck_assert(t.truncated);
    ck_assert_uint_eq(t.nnodes, 3);
    ts = &t.nodes[2];
    ck_assert_str_eq(ts->function, "train_step");
    ck_assert_uint_eq(ts->nend, NRANKS);
    ck_assert_int_eq(ts->child, -1);
    ck_assert_uint_eq(t.nvisible, 3);
    view_merge_fini(&t);
    history_fini(&f.h);

    /* An empty history gives an empty tree. */
    history_init(&f.h, T0, 0, "n");
    ck_assert_int_eq(view_merge(&f.h, T0, NULL, &t), 0);
    ck_assert_uint_eq(t.nnodes, 0);
    ck_assert_int_eq(t.root, -1);
    ck_assert_uint_eq(t.nvisible, 0);
    view_merge_fini(&t);
    history_fini(&f.h);
}
END_TEST

/* ---- hang verdict ---- */

static void gpu_series(struct history *h, int from, int to, int busy_gpu, int lo, int hi)
{
    char name[16];

    for (int k = from; k <= to; k++)
        for (int i = 0; i < NRANKS; i++) {
            snprintf(name, sizeof(name), "gpu%d", i);
            history_counter(h, SERIES_DEV_UTIL, name, 0, T(k),
                            i == busy_gpu ? (k % 2 ? hi : lo) : 100.0);
        }
}

#define BANNER                                                                                     \
    "HANG 42s: 15 ranks in all_reduce (distributed_c10d.py:1541); odd: rank 3 in "                 \
    "load_batch_slowly (train.py:12) [host]"

START_TEST(hang_verdict)
{
    struct fx f;
    struct view_hang v;

    fx_build(&f, 52);
    view_hang(&f.h, T(52), 30 * SEC, NULL, &v);
    ck_assert(v.hang);
    ck_assert_uint_eq(v.since, 42 * SEC);
    ck_assert_uint_eq(v.nlive, NRANKS);
    ck_assert_uint_eq(v.nmajority, 15);
    ck_assert_uint_eq(v.stack, f.maj);
    ck_assert_str_eq(v.where, "all_reduce (distributed_c10d.py:1541)");
    ck_assert_uint_eq(v.nodd, 1);
    ck_assert_int_eq(v.odd[0].rank, ODD_RANK);
    ck_assert_int_eq(v.odd[0].pid, PID(ODD_RANK));
    ck_assert_str_eq(v.odd[0].where, "load_batch_slowly (train.py:12)");
    ck_assert_int_eq(v.odd[0].wait, WAIT_HOST);
    ck_assert_uint_eq(v.ndevices, 0);
    ck_assert_str_eq(v.text, BANNER);
    view_hang_fini(&v);

    /* Before hang-after has passed: not yet, but the majority is already known. */
    view_hang(&f.h, T(39), 30 * SEC, NULL, &v);
    ck_assert(!v.hang);
    ck_assert_uint_eq(v.since, 29 * SEC);
    ck_assert_uint_eq(v.nmajority, 15);
    ck_assert_str_eq(v.text, "");
    view_hang_fini(&v);
    view_hang(&f.h, T(40), 30 * SEC, NULL, &v);
    ck_assert(v.hang);
    view_hang_fini(&v);
    history_fini(&f.h);
}
END_TEST

/* asyncio: a main thread that only shows its loop waiting is judged by its loop's tasks (task
 * pseudo-threads on its thread or an unknown one): the verdict names where the deepest await
 * chain awaits (the task still the longest of equally deep ones), a task whose chain moved
 * holds the verdict off, a task of another thread's loop does not; without tasks, or with a
 * main thread doing something else, nothing changes. */
START_TEST(hang_asyncio_tasks)
{
    const struct hframe loop[] = {
        {"EpollSelector.select", "/py/selectors.py", 468, false},
        {"BaseEventLoop._run_once", "/py/asyncio/base_events.py", 1884, false},
        {"BaseEventLoop.run_forever", "/py/asyncio/base_events.py", 607, false},
        {"<module>", "/job/serve.py", 30, false}};
    const struct hframe busy[] = {{"crunch", "/job/serve.py", 3, false},
                                  {"<module>", "/job/serve.py", 31, false}};
    const struct hframe top[] = {{"main", "/job/serve.py", 20, false}};
    const struct hframe wait[] = {{"Event.wait", "/py/asyncio/locks.py", 213, false},
                                  {"fetch", "/job/serve.py", 9, false}};
    const struct hframe get[] = {{"Queue.get", "/py/asyncio/queues.py", 158, false},
                                 {"fetch", "/job/serve.py", 9, false}};
    const struct hframe mv[2][1] = {{{"step_a", "/job/other.py", 1, false}},
                                    {{"step_b", "/job/other.py", 2, false}}};
    struct history h;
    struct view_hang v;
    struct hrank *r;
    struct hthread *m, *a, *b, *c;
    uint32_t sl, sb, st, sw, sg, smv[2];

    history_init(&h, T0, 0, "host");
    r = history_rank(&h, PID(0), 0, NULL);
    sl = history_intern_stack(&h, loop, 4);
    sb = history_intern_stack(&h, busy, 2);
    st = history_intern_stack(&h, top, 1);
    sw = history_intern_stack(&h, wait, 2);
    sg = history_intern_stack(&h, get, 2);
    smv[0] = history_intern_stack(&h, mv[0], 1);
    smv[1] = history_intern_stack(&h, mv[1], 1);
    m = history_thread(r, 1, PID(0), "MainThread", true);
    for (int k = 0; k <= 40; k++)
        history_observe(m, sl, T(k));
    view_hang(&h, T(40), 30 * SEC, NULL, &v); /* no tasks: the loop's select */
    ck_assert(v.hang);
    ck_assert_str_eq(v.where, "EpollSelector.select (selectors.py:468)");
    view_hang_fini(&v);

    a = history_task(r, 0x1000, "Task-1", 1);
    b = history_task(r, 0x2000, "fetch", 0);
    c = history_task(r, 0x3000, "other-loop", 77);
    for (int k = 0; k <= 40; k++) {
        history_observe(a, st, T(k));
        history_observe(b, k < 35 ? sw : sg, T(k));
        history_observe(c, smv[k % 2], T(k));
    }
    view_hang(&h, T(40), 30 * SEC, NULL, &v); /* fetch moved 5 s ago: no hang */
    ck_assert(!v.hang);
    ck_assert_uint_eq(v.since, 5 * SEC);
    view_hang_fini(&v);
    view_hang(&h, T(40), 4 * SEC, NULL, &v); /* fetch's chain is deeper than Task-1's */
    ck_assert(v.hang);
    ck_assert_str_eq(v.where, "Queue.get (queues.py:158)");
    ck_assert_uint_eq(v.stack, sg);
    view_hang_fini(&v);
    history_observe(a, sb, T(41)); /* Task-1 moves (c's moves never count) */
    for (int k = 41; k <= 50; k++) {
        history_observe(m, sl, T(k));
        history_observe(b, sg, T(k));
        history_observe(c, smv[k % 2], T(k));
    }
    history_observe(a, sb, T(50));
    view_hang(&h, T(50), 15 * SEC, NULL, &v);
    ck_assert(!v.hang);
    ck_assert_uint_eq(v.since, 9 * SEC);
    view_hang_fini(&v);
    view_hang(&h, T(50), 8 * SEC, NULL, &v); /* as deep: fetch, still 15 s, over Task-1's 9 */
    ck_assert(v.hang);
    ck_assert_str_eq(v.where, "Queue.get (queues.py:158)");
    view_hang_fini(&v);
    /* The last read left tasks without a lane (the engine's lane cap): whether they moved is
     * not known, so the tasks do not judge the rank; its loop's own stack does. */
    r->tasks_unlaned = 3;
    view_hang(&h, T(50), 8 * SEC, NULL, &v);
    ck_assert(v.hang);
    ck_assert_str_eq(v.where, "EpollSelector.select (selectors.py:468)");
    ck_assert_uint_eq(v.since, 50 * SEC);
    view_hang_fini(&v);
    r->tasks_unlaned = 0;
    for (int k = 51; k <= 90; k++) /* the main thread busy elsewhere: tasks are not asked */
        history_observe(m, sb, T(k));
    view_hang(&h, T(90), 30 * SEC, NULL, &v);
    ck_assert(v.hang);
    ck_assert_str_eq(v.where, "crunch (serve.py:3)");
    view_hang_fini(&v);
    history_fini(&h);
}
END_TEST

/* asyncio in the merged tree: a rank whose main thread only shows its loop waiting takes part
 * once per task of that loop, its frames down to _run_once then the task's await chain, so
 * ranks awaiting in the same place share one branch ending at the innermost coroutine (with
 * that line); a loop without tasks read, and a thread doing something else, show as before. */
START_TEST(merge_asyncio_tasks)
{
    const struct hframe loop[] = {{"EpollSelector.select", "/py/selectors.py", 468, false},
                                  {"_run_once", "/py/asyncio/base_events.py", 1884, false},
                                  {"<module>", "/job/serve.py", 30, false}};
    const struct hframe busy[] = {{"crunch", "/job/serve.py", 3, false},
                                  {"<module>", "/job/serve.py", 31, false}};
    const struct hframe top[] = {{"main", "/job/serve.py", 20, false}};
    const struct hframe get[] = {{"Queue.get", "/py/asyncio/queues.py", 158, false},
                                 {"fetch", "/job/serve.py", 9, false}};
    struct history h;
    struct view_tree t;
    struct view_merge_opts all = {.all_threads = true};
    const struct view_node *mod, *ro, *fetch, *q, *n;
    uint32_t sl, sb, st, sg;
    char buf[64];

    history_init(&h, T0, 0, "host");
    sl = history_intern_stack(&h, loop, 3);
    sb = history_intern_stack(&h, busy, 2);
    st = history_intern_stack(&h, top, 1);
    sg = history_intern_stack(&h, get, 2);
    for (int i = 0; i < 4; i++) {
        struct hrank *r = history_rank(&h, PID(i), i, NULL);

        history_observe(history_thread(r, 1, PID(i), "MainThread", true), i == 2 ? sb : sl, T(1));
        if (i == 3) /* its tasks were not read */
            continue;
        history_observe(history_task(r, 0x100, "handler", 1), sg, T(1));
        if (i == 0) /* its main coroutine, on an unknown thread: the main thread's loop */
            history_observe(history_task(r, 0x200, "Task-1", 0), st, T(1));
        if (i == 1) /* another thread's loop: not under the main thread */
            history_observe(history_task(r, 0x300, "elsewhere", 9), st, T(1));
    }
    view_merge(&h, T(2), NULL, &t);
    ck_assert_uint_eq(t.nstacks, 5); /* rank 0 twice, ranks 1, 2, 3 once */
    mod = child_named(&t, -1, "<module>");
    ck_assert_ptr_nonnull(mod);
    ro = child_named(&t, idx(&t, mod), "_run_once");
    ranks_text(ro, buf, sizeof(buf));
    ck_assert_str_eq(buf, "0-1,3");
    fetch = child_named(&t, idx(&t, ro), "fetch");
    ranks_text(fetch, buf, sizeof(buf));
    ck_assert_str_eq(buf, "0-1");
    q = child_named(&t, idx(&t, fetch), "Queue.get");
    ck_assert_uint_eq(q->count, 2);
    ck_assert_int_eq(q->line, 158);
    n = child_named(&t, idx(&t, ro), "main");
    ranks_text(n, buf, sizeof(buf));
    ck_assert_str_eq(buf, "0");
    n = child_named(&t, idx(&t, ro), "EpollSelector.select");
    ranks_text(n, buf, sizeof(buf));
    ck_assert_str_eq(buf, "3");
    ck_assert_ptr_nonnull(child_named(&t, idx(&t, mod), "crunch"));
    view_merge_fini(&t);

    view_merge(&h, T(2), &all, &t); /* the same under the thread's node */
    n = child_named(&t, -1, "MainThread");
    ck_assert_ptr_nonnull(n);
    mod = child_named(&t, idx(&t, n), "<module>");
    ro = child_named(&t, idx(&t, mod), "_run_once");
    fetch = child_named(&t, idx(&t, ro), "fetch");
    q = child_named(&t, idx(&t, fetch), "Queue.get");
    ck_assert_uint_eq(q->count, 2);
    ck_assert_int_eq(q->line, 158);
    ranks_text(child_named(&t, idx(&t, ro), "main"), buf, sizeof(buf));
    ck_assert_str_eq(buf, "0"); /* not rank 1's task of another loop */
    view_merge_fini(&t);
    history_fini(&h);
}
END_TEST

START_TEST(hang_one_rank_moves)
{
    struct fx f;
    struct view_hang v;

    fx_build(&f, 45);
    history_observe(main_of(&f.h, 7), f.early, T(46));
    for (int k = 47; k <= 52; k++)
        history_observe(main_of(&f.h, 7), f.maj, T(k));
    view_hang(&f.h, T(52), 30 * SEC, NULL, &v);
    ck_assert(!v.hang);
    ck_assert_uint_eq(v.since, 5 * SEC);
    view_hang_fini(&v);
    view_hang(&f.h, T(52), 5 * SEC, NULL, &v);
    ck_assert(v.hang);
    ck_assert_str_eq(v.text, "HANG 5s: 15 ranks in all_reduce (distributed_c10d.py:1541); odd: "
                             "rank 3 in load_batch_slowly (train.py:12) [host]");
    view_hang_fini(&v);
    history_fini(&f.h);
}
END_TEST

START_TEST(hang_devices)
{
    struct fx f;
    struct view_hang v;
    struct view_hang_in in = {0};

    fx_build(&f, 52);
    /* Flat at 100 % (NCCL spinning) on every device: still a hang. */
    gpu_series(&f.h, 0, 52, -1, 0, 0);
    view_hang(&f.h, T(52), 30 * SEC, NULL, &v);
    ck_assert(v.hang);
    ck_assert_uint_eq(v.ndevices, NRANKS);
    ck_assert_uint_eq(v.nvarying, 0);
    view_hang_fini(&v);
    history_fini(&f.h);

    /* gpu5 moves between 30 and 90 % within the interval: no hang. */
    fx_build(&f, 52);
    gpu_series(&f.h, 0, 52, 5, 30, 90);
    view_hang(&f.h, T(52), 30 * SEC, NULL, &v);
    ck_assert(!v.hang);
    ck_assert_uint_eq(v.nvarying, 1);
    view_hang_fini(&v);
    in.ignore_devices = true;
    view_hang(&f.h, T(52), 30 * SEC, &in, &v);
    ck_assert(v.hang);
    view_hang_fini(&v);
    in = (struct view_hang_in){.flat_pts = 70};
    view_hang(&f.h, T(52), 30 * SEC, &in, &v);
    ck_assert(v.hang);
    view_hang_fini(&v);
    history_fini(&f.h);

    /* Moving only before the interval, within 5 points, or on a device no rank uses: flat. */
    fx_build(&f, 52);
    gpu_series(&f.h, 0, 20, 5, 30, 90);
    gpu_series(&f.h, 21, 52, 6, 97, 100);
    for (int k = 0; k <= 52; k++)
        history_counter(&f.h, SERIES_DEV_UTIL, "gpu99", 0, T(k), k % 2 ? 0.0 : 80.0);
    history_counter(&f.h, SERIES_DEV_MEM, "gpu5 mem", 0, T(50), 100);
    history_counter(&f.h, SERIES_DEV_MEM, "gpu5 mem", 0, T(51), 9000);
    view_hang(&f.h, T(52), 30 * SEC, NULL, &v);
    ck_assert(v.hang);
    ck_assert_uint_eq(v.ndevices, NRANKS);
    view_hang_fini(&v);
    history_fini(&f.h);
}
END_TEST

START_TEST(hang_npu_device_names)
{
    struct history h;
    struct view_hang v;
    const struct hframe fr[] = {{"wait", "/w.py", 3, false}};
    uint32_t s;

    history_init(&h, T0, 0, "n");
    s = history_intern_stack(&h, fr, 1);
    for (int k = 0; k <= 40; k++) {
        history_observe(history_thread(history_rank(&h, 10, 0, "npu 2"), 1, 10, "MainThread", true),
                        s, T(k));
        history_counter(&h, SERIES_NPU_AICORE, "npu2.0", 0, T(k), k % 2 ? 10.0 : 60.0);
    }
    view_hang(&h, T(40), 30 * SEC, NULL, &v);
    ck_assert(!v.hang);
    ck_assert_uint_eq(v.ndevices, 1);
    ck_assert_uint_eq(v.nvarying, 1);
    view_hang_fini(&v);
    view_hang(&h, T(40), 30 * SEC, &(struct view_hang_in){.ignore_devices = true}, &v);
    ck_assert(v.hang);
    ck_assert_str_eq(v.text, "HANG 40s: 1 rank in wait (w.py:3)");
    view_hang_fini(&v);
    history_fini(&h);
}
END_TEST

START_TEST(hang_odd_groups_and_exits)
{
    struct fx f;
    struct view_hang v;

    fx_build(&f, 12);
    for (int k = 13; k <= 100; k++)
        for (int i = 0; i < NRANKS; i++) {
            uint32_t s = i == ODD_RANK || i == 9 ? f.odd : f.maj;

            if (i == 12 && k > 14)
                continue;
            if (i == 14 && k == 13)
                s = HSTACK_NONE;
            if (i == 14 && k > 13)
                continue;
            history_observe(main_of(&f.h, i), s, T(k));
        }
    history_rank_exit(history_rank(&f.h, PID(12), 12, NULL), T(15));
    /* Rank 14 can no longer be read: it keeps "no stack" and is named with it. */
    view_hang(&f.h, T(100), 30 * SEC, NULL, &v);
    ck_assert(v.hang);
    ck_assert_uint_eq(v.nlive, 15);
    ck_assert_uint_eq(v.nmajority, 12);
    ck_assert_uint_eq(v.nodd, 3);
    ck_assert_uint_eq(v.nexited, 1);
    ck_assert_int_eq(v.exited[0], 12);
    /* The rank that died leads: it is the likely reason the others wait. */
    ck_assert_str_eq(v.text, "HANG 87s: rank 12 exited (status unknown) 85s ago; 12 ranks in "
                             "all_reduce (distributed_c10d.py:1541); odd: ranks 3,9 in "
                             "load_batch_slowly (train.py:12) [host], rank 14 in <no stack>");
    view_hang_fini(&v);
    history_fini(&f.h);

    /* No live rank with a stack: never a hang. */
    history_init(&f.h, T0, 0, "n");
    view_hang(&f.h, T(100), 30 * SEC, NULL, &v);
    ck_assert(!v.hang);
    ck_assert_uint_eq(v.nlive, 0);
    ck_assert_str_eq(v.where, "<no stack>");
    view_hang_fini(&v);
    history_fini(&f.h);
}
END_TEST

START_TEST(hang_long_banner)
{
    struct history h;
    struct view_hang v;
    char fn[96];
    size_t len;
    uint32_t s;

    /* Six ranks agree; ten others each wait somewhere with a long name: the banner is cut. */
    history_init(&h, T0, 0, "n");
    for (int i = 0; i < NRANKS; i++) {
        struct hframe fr = {fn, "/x.py", i < 6 ? 1 : i, false};

        snprintf(fn, sizeof(fn), "a_rather_long_function_name_for_a_waiting_rank_%02d",
                 i < 6 ? 0 : i);
        s = history_intern_stack(&h, &fr, 1);
        history_observe(main_of(&h, i), s, T(0));
    }
    view_hang(&h, T(60), 30 * SEC, NULL, &v);
    ck_assert(v.hang);
    ck_assert_uint_eq(v.nmajority, 6);
    ck_assert_uint_eq(v.nodd, 10);
    len = strlen(v.text);
    ck_assert_uint_lt(len, sizeof(v.text));
    ck_assert_uint_gt(len, sizeof(v.text) - 40);
    ck_assert_str_eq(v.text + len - 3, "\u2026");
    ck_assert(!strncmp(v.text, "HANG 60s: 6 ranks in a_rather_long", 34));
    view_hang_fini(&v);
    history_fini(&h);
}
END_TEST

START_TEST(hang_since_and_rank_rows)
{
    struct fx f;
    struct view_ranks rows;
    struct hthread *t;

    fx_build(&f, 52);
    t = main_of(&f.h, ODD_RANK);
    ck_assert_uint_eq(view_since_change(t, T(52)), 42 * SEC);
    ck_assert_uint_eq(view_since_change(t, T(5)), 0);
    ck_assert_uint_eq(view_since_change(NULL, T(5)), 0);
    history_rank_exit(history_rank(&f.h, PID(0), 0, NULL), T(50));
    /* Rank 0 restarted under a new pid with no sample yet. */
    history_rank(&f.h, 9999, 0, "gpu 0");
    view_ranks(&f.h, T(52), &rows);
    ck_assert_uint_eq(rows.n, NRANKS + 1);
    ck_assert_int_eq(rows.rows[0].pid, 9999);
    ck_assert(!rows.rows[0].exited);
    ck_assert_uint_eq(rows.rows[0].stack, HSTACK_NONE);
    ck_assert_ptr_null(rows.rows[0].top);
    ck_assert_int_eq(rows.rows[1].pid, PID(0));
    ck_assert(rows.rows[1].exited);
    ck_assert_int_eq(rows.rows[4].rank, ODD_RANK);
    ck_assert_str_eq(rows.rows[4].device, "gpu 3");
    ck_assert_str_eq(rows.rows[4].host, "node1");
    ck_assert_str_eq(rows.rows[4].top->function, "load_batch_slowly");
    ck_assert_uint_eq(rows.rows[4].since, 42 * SEC);
    ck_assert_str_eq(rows.rows[5].top->function, "all_reduce");
    ck_assert_uint_eq(rows.rows[5].since, 44 * SEC);
    ck_assert_uint_eq(rows.rows[5].idx, 4);
    view_ranks_fini(&rows);
    history_fini(&f.h);
}
END_TEST

/* ---- top functions ---- */

#define MS 1000000ull
#define U(k) (T0 + (uint64_t)(k)*100 * MS) /* top fixture: 100 ms samples */

struct topfx {
    struct history h;
    uint32_t a, b, c, w;
};

/* Main thread: A = main>f>g for U(0..4), B = main>f for U(5..6), C = main>f>f for U(7..9).
 * With the 100 ms interval (every gap between runs) A lasts 500 ms, B 200, C 300 (its last
 * sample counts until U(10)). A worker shows W = loop>poll for U(0..9): 1000 ms. */
static void top_build(struct topfx *f)
{
    const struct hframe a[] = {
        {"g", "/m.py", 3, false}, {"f", "/m.py", 10, false}, {"main", "/m.py", 20, false}};
    const struct hframe b[] = {{"f", "/m.py", 11, false}, {"main", "/m.py", 20, false}};
    const struct hframe c[] = {
        {"f", "/m.py", 12, false}, {"f", "/m.py", 11, false}, {"main", "/m.py", 20, false}};
    const struct hframe w[] = {{"poll", "/w.py", 1, false}, {"loop", "/w.py", 9, false}};

    history_init(&f->h, T0, 0, "n");
    f->a = history_intern_stack(&f->h, a, 3);
    f->b = history_intern_stack(&f->h, b, 2);
    f->c = history_intern_stack(&f->h, c, 3);
    f->w = history_intern_stack(&f->h, w, 2);
    for (int k = 0; k < 10; k++) {
        struct hrank *r = history_rank(&f->h, 77, 0, NULL);

        history_observe(history_thread(r, 1, 77, "MainThread", true),
                        k < 5   ? f->a
                        : k < 7 ? f->b
                                : f->c,
                        U(k));
        history_observe(history_thread(r, 2, 78, "worker", false), f->w, U(k));
    }
}

static const struct view_top_row *row_named(const struct view_top *t, const char *fn)
{
    for (size_t i = 0; i < t->nrows; i++)
        if (!strcmp(t->rows[i].function, fn))
            return &t->rows[i];
    return NULL;
}

static void check_row(const struct view_top *t, size_t i, const char *fn, double own, double total)
{
    ck_assert_uint_lt(i, t->nrows);
    ck_assert_str_eq(t->rows[i].function, fn);
    ck_assert_double_eq_tol(t->rows[i].own_pct, own, 1e-9);
    ck_assert_double_eq_tol(t->rows[i].total_pct, total, 1e-9);
}

START_TEST(top_whole_history)
{
    struct topfx f;
    struct view_top t;

    top_build(&f);
    ck_assert_uint_eq(view_top_interval(&f.h), 100 * MS);
    ck_assert_int_eq(view_top(&f.h, U(10), 0, 0, false, &t), 0);
    ck_assert_uint_eq(t.interval_ns, 100 * MS);
    ck_assert_uint_eq(t.sampled_ns, 1000 * MS);
    /* own: g 500 (A), f 200 + 300 (B, C); total: f everywhere, once in C's recursion. */
    ck_assert_uint_eq(t.nrows, 3);
    check_row(&t, 0, "f", 50, 100);
    check_row(&t, 1, "g", 50, 50);
    check_row(&t, 2, "main", 0, 100);
    ck_assert_uint_eq(t.rows[0].own_ns, 500 * MS);
    ck_assert_str_eq(t.rows[0].file, "/m.py");
    view_top_fini(&t);

    /* All threads: the worker's second adds 1000 ms, all of it in poll. */
    ck_assert_int_eq(view_top(&f.h, U(10), 0, 77, true, &t), 0);
    ck_assert_uint_eq(t.sampled_ns, 2000 * MS);
    check_row(&t, 0, "poll", 50, 50);
    check_row(&t, 1, "f", 25, 50);
    check_row(&t, 2, "g", 25, 25);
    check_row(&t, 3, "loop", 0, 50);
    check_row(&t, 4, "main", 0, 50);
    view_top_fini(&t);
    ck_assert_int_eq(view_top(&f.h, U(10), 0, 12345, false, &t), APP_E_NOTFOUND);
    ck_assert_uint_eq(t.nrows, 0);
    view_top_fini(&t);
    history_fini(&f.h);
}
END_TEST

START_TEST(top_window)
{
    struct topfx f;
    struct view_top t;

    top_build(&f);
    /* [U(5), U(10)]: B 200 + C 300, all in f. */
    view_top(&f.h, U(10), 500 * MS, 0, false, &t);
    ck_assert_uint_eq(t.sampled_ns, 500 * MS);
    ck_assert_uint_eq(t.nrows, 2);
    check_row(&t, 0, "f", 100, 100);
    check_row(&t, 1, "main", 0, 100);
    ck_assert_ptr_null(row_named(&t, "g"));
    view_top_fini(&t);

    /* [U(4), U(8)]: A 100 (g), B 200 and C 100 (f) = 400. */
    view_top(&f.h, U(8), 400 * MS, 0, false, &t);
    ck_assert_uint_eq(t.sampled_ns, 400 * MS);
    check_row(&t, 0, "f", 75, 100);
    check_row(&t, 1, "g", 25, 25);
    view_top_fini(&t);
    history_fini(&f.h);
}
END_TEST

START_TEST(top_gaps_and_exit)
{
    struct topfx f;
    struct view_top t;
    struct hrank *r;

    top_build(&f);
    r = history_rank(&f.h, 77, 0, NULL);
    /* Unreadable at U(10), U(11): C now ends at U(10) and that time is not sampled. Then A
     * again at U(12) until the rank exits 50 ms after it. */
    history_observe(history_thread(r, 1, 77, NULL, true), HSTACK_NONE, U(10));
    history_observe(history_thread(r, 1, 77, NULL, true), HSTACK_NONE, U(11));
    history_observe(history_thread(r, 1, 77, NULL, true), f.a, U(12));
    history_rank_exit(r, U(12) + 50 * MS);
    view_top(&f.h, U(20), 0, 0, false, &t);
    ck_assert_uint_eq(t.sampled_ns, 1050 * MS);
    ck_assert_uint_eq(row_named(&t, "g")->own_ns, 550 * MS);
    ck_assert_uint_eq(row_named(&t, "f")->own_ns, 500 * MS);
    ck_assert_uint_eq(row_named(&t, "main")->total_ns, 1050 * MS);
    view_top_fini(&t);
    history_fini(&f.h);

    /* No gaps anywhere: the default interval. */
    history_init(&f.h, T0, 0, "n");
    ck_assert_uint_eq(view_top_interval(&f.h), VIEW_DEFAULT_INTERVAL_NS);
    ck_assert_int_eq(view_top(&f.h, U(1), 0, 0, true, &t), 0);
    ck_assert_uint_eq(t.nrows, 0);
    view_top_fini(&t);
    history_fini(&f.h);
}
END_TEST

/* The short, package-relative file names of the text outputs and the monitor (py-spy's). */
START_TEST(short_file_names)
{
    static const char *const cases[][2] = {
        {"/usr/lib/python3/dist-packages/torch/nn/modules/module.py", "torch/nn/modules/module.py"},
        {"/v/lib/python3.12/site-packages/numpy/core/x.py", "numpy/core/x.py"},
        {"/usr/lib/python3.11/threading.py", "threading.py"},
        {"/opt/py/lib/python3.13t/asyncio/tasks.py", "asyncio/tasks.py"},
        {"/usr/lib/python3.11/site-packages/a/site-packages/b.py", "b.py"},
        {"/home/me/train.py", "/home/me/train.py"},
        {"/x/my-site-packages/y.py", "/x/my-site-packages/y.py"},
        {"/x/site-packages/", "/x/site-packages/"},
        {"/lib/python/x.py", "/lib/python/x.py"},
        {"<string>", "<string>"},
        {"", ""},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_str_eq(path_short(cases[i][0]), cases[i][1]);
    ck_assert_ptr_null(path_short(NULL));
}
END_TEST

START_TEST(frame_format)
{
    char buf[64];
    struct hframe f = {"all_reduce", "/a/b/distributed_c10d.py", 1541, false};

    view_frame_format(&f, buf, sizeof(buf));
    ck_assert_str_eq(buf, "all_reduce (distributed_c10d.py:1541)");
    f.line = 0;
    view_frame_format(&f, buf, sizeof(buf));
    ck_assert_str_eq(buf, "all_reduce (distributed_c10d.py)");
    f.file = "";
    view_frame_format(&f, buf, sizeof(buf));
    ck_assert_str_eq(buf, "all_reduce");
}
END_TEST

/* ---- counter series, rank table, memory and GIL panes ---- */

START_TEST(series_ids_keep_export_names)
{
    struct history h;
    const struct hseries *s;

    history_init(&h, T0, 0, "n");
    history_counter(&h, SERIES_RSS, NULL, 77, T(1), 10);
    history_counter(&h, SERIES_GIL_BUSY, NULL, 77, T(1), 40);
    history_counter(&h, SERIES_DEV_UTIL, "gpu0", 0, T(1), 5);
    history_counter(&h, SERIES_DEV_UTIL, "gpu1", 0, T(1), 6);
    history_counter(&h, SERIES_RSS, NULL, 77, T(2), 12);
    ck_assert_uint_eq(h.nseries, 4); /* one series per (id, name, pid) */
    s = history_series(&h, SERIES_RSS, 77);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(s->name, "rss");
    ck_assert_str_eq(s->key, "MiB");
    ck_assert_uint_eq(s->n, 2);
    s = history_series(&h, SERIES_GIL_BUSY, 77);
    ck_assert_str_eq(s->name, "GIL busy");
    ck_assert_str_eq(s->key, "pct");
    ck_assert_str_eq(h.series[2].name, "gpu0");
    ck_assert_str_eq(h.series[2].key, "util_pct");
    ck_assert_ptr_null(history_series(&h, SERIES_RSS, 78));
    ck_assert_ptr_null(history_series(&h, SERIES_NONE, 77));
    ck_assert_str_eq(series_name(SERIES_CPU), "cpu");
    ck_assert_str_eq(series_key(SERIES_CPU), "pct");
    ck_assert_str_eq(series_name(SERIES_GC), "in GC");
    ck_assert_str_eq(series_key(SERIES_DEV_MEM), "used_mib");
    ck_assert_ptr_null(series_name(SERIES_DEV_UTIL));
    ck_assert_str_eq(series_key(SERIES_COUNT), "");
    ck_assert(isnan(view_series_last(&h, SERIES_USS, 77)));
    ck_assert_double_eq(view_series_last(&h, SERIES_RSS, 77), 12);
    history_fini(&h);
}
END_TEST

/* 1 Hz for 100 s, +10 MiB a second: the change over a window is the newest value minus the
 * oldest one inside it. */
START_TEST(series_delta_window)
{
    struct history h;
    const struct hseries *s;

    history_init(&h, T0, 0, "n");
    ck_assert(isnan(view_series_delta(NULL, 10 * SEC)));
    history_counter(&h, SERIES_RSS, NULL, 77, T(0), 0);
    s = history_series(&h, SERIES_RSS, 77);
    ck_assert(isnan(view_series_delta(s, 10 * SEC))); /* one point: no change known */
    for (int i = 1; i < 100; i++)
        history_counter(&h, SERIES_RSS, NULL, 77, T(i), 10.0 * i);
    s = history_series(&h, SERIES_RSS, 77);
    ck_assert_double_eq(view_series_delta(s, 10 * SEC), 100);
    ck_assert_double_eq(view_series_delta(s, 9 * SEC + SEC / 2), 90); /* t = 90 is inside */
    ck_assert_double_eq(view_series_delta(s, 1000 * SEC), 990);       /* shorter: the oldest */
    ck_assert_double_eq(view_series_delta(s, SEC / 2), 0);            /* nothing that close */
    history_fini(&h);
}
END_TEST

/* The main fixture with RSS 1000 + 10 i MiB and CPU i % (none for rank 5) per rank i, and
 * live figures for ranks 2 (GIL 50 %, 7000 MiB of device memory) and 7 (GIL unknown). */
static void table_fx(struct fx *f, struct engine_rank_live *live)
{
    fx_build(f, 52);
    for (int i = 0; i < NRANKS; i++) {
        history_counter(&f->h, SERIES_RSS, NULL, PID(i), T(50), 1000.0 + 10 * i);
        if (i != 5)
            history_counter(&f->h, SERIES_CPU, NULL, PID(i), T(50), i);
    }
    live[0] = (struct engine_rank_live){.pid = PID(2), .dev_mem_mb = 7000, .gil_busy_pct = 50};
    live[1] = (struct engine_rank_live){.pid = PID(7), .dev_mem_mb = -1, .gil_busy_pct = -1};
}

static struct view_table table_of(const struct history *h, const struct engine_rank_live *live,
                                  const char *filter, enum view_sort sort,
                                  const struct view_baseline *base)
{
    struct view_table t;
    struct view_table_in in = {
        .filter = filter, .sort = sort, .base = base, .live = live, .nlive = 2};

    view_table(h, T(52), &in, &t);
    return t;
}

START_TEST(table_rows_and_sorts)
{
    static const struct {
        enum view_sort sort;
        int first, at, then; /* rank of the first row, and of row `at` */
    } sorts[] = {
        {VIEW_SORT_CPU, 15, NRANKS - 1, 5},         /* descending, unknown last */
        {VIEW_SORT_RSS, 15, NRANKS - 1, 0},         /* descending */
        {VIEW_SORT_SINCE, 0, NRANKS - 1, ODD_RANK}, /* ties by pid; rank 3 moved last */
        {VIEW_SORT_GIL, 2, 1, 7},                   /* known first; -1 after 0 */
    };
    struct fx f;
    struct engine_rank_live live[2];
    struct view_table t;

    table_fx(&f, live);
    t = table_of(&f.h, live, NULL, VIEW_SORT_RANK, NULL);
    ck_assert_uint_eq(t.n, NRANKS);
    ck_assert_int_eq(t.rows[0].rank, 0);
    ck_assert_str_eq(t.rows[ODD_RANK].top, "load_batch_slowly (train.py:12)");
    ck_assert_int_eq(t.rows[ODD_RANK].wait, WAIT_HOST);
    ck_assert_int_eq(t.rows[0].wait, WAIT_COLLECTIVE);
    ck_assert_double_eq(t.rows[ODD_RANK].rss_mib, 1030);
    ck_assert_double_eq(t.rows[ODD_RANK].since_s, 42);
    ck_assert(isnan(t.rows[ODD_RANK].drss_mib)); /* no baseline */
    ck_assert_int_eq(t.rows[0].dev_mem_mb, -1);
    ck_assert(isnan(t.rows[0].gil));
    ck_assert_int_eq(t.rows[2].dev_mem_mb, 7000);
    ck_assert_double_eq(t.rows[2].gil, 50);
    ck_assert(isnan(t.rows[5].cpu));
    view_table_fini(&t);
    view_table_fini(&t); /* twice is safe */
    for (size_t i = 0; i < sizeof(sorts) / sizeof(*sorts); i++) {
        t = table_of(&f.h, live, "", sorts[i].sort, NULL);
        ck_assert_int_eq(t.rows[0].rank, sorts[i].first);
        ck_assert_int_eq(t.rows[sorts[i].at].rank, sorts[i].then);
        view_table_fini(&t);
    }
    history_fini(&f.h);
}
END_TEST

START_TEST(table_filter_and_baseline)
{
    struct fx f;
    struct engine_rank_live live[2];
    struct view_table t;
    struct view_baseline b = {0};

    table_fx(&f, live);
    t = table_of(&f.h, live, "load_batch", VIEW_SORT_RANK, NULL);
    ck_assert_uint_eq(t.n, 1);
    ck_assert_int_eq(t.rows[0].rank, ODD_RANK);
    view_table_fini(&t);
    t = table_of(&f.h, live, "rank 1", VIEW_SORT_RANK, NULL); /* 1 and 10..15 */
    ck_assert_uint_eq(t.n, 7);
    view_table_fini(&t);
    t = table_of(&f.h, live, "pid 4002 ", VIEW_SORT_RANK, NULL);
    ck_assert_uint_eq(t.n, 1);
    ck_assert_int_eq(t.rows[0].pid, PID(2));
    view_baseline_set(&b, &t, T(52)); /* only the rows shown get a baseline */
    view_table_fini(&t);
    ck_assert_uint_eq(b.n, 1);
    ck_assert_uint_eq(b.t, T(52));
    t = table_of(&f.h, live, NULL, VIEW_SORT_RANK, NULL);
    view_baseline_set(&b, &t, T(52));
    view_table_fini(&t);
    ck_assert_uint_eq(b.n, NRANKS);
    history_counter(&f.h, SERIES_RSS, NULL, PID(4), T(52), 1040.0 + 150);
    t = table_of(&f.h, live, NULL, VIEW_SORT_RANK, &b);
    ck_assert_double_eq(t.rows[4].drss_mib, 150);
    ck_assert_double_eq(t.rows[0].drss_mib, 0);
    view_table_fini(&t);
    history_fini(&f.h);
    ck_assert(isnan(view_baseline_delta(&b, 9999, 10))); /* a pid the baseline lacks */
    view_baseline_fini(&b);
    view_baseline_fini(&b);
    ck_assert_uint_eq(b.n, 0);
    ck_assert(isnan(view_baseline_delta(&b, PID(0), 10))); /* none after fini */
    ck_assert(isnan(view_baseline_delta(NULL, PID(0), 10)));
}
END_TEST

/* The state column: a rank whose CPU stayed under VIEW_IDLE_CPU_PCT (asleep, waiting) is
 * "idle", one on the CPU "run", one without a CPU reading "run"; a rank unchanged for
 * stuck_after_ns is "stuck" whatever its CPU; a stopped one "stopped". */
START_TEST(table_idle_state)
{
    struct fx f;
    struct engine_rank_live live[2];
    struct view_table t;
    struct view_table_in in = {.live = live, .nlive = 2};

    table_fx(&f, live); /* CPU i % for rank i, none for rank 5 */
    history_counter(&f.h, SERIES_CPU, NULL, PID(9), T(51), 0.3);
    history_counter(&f.h, SERIES_CPU, NULL, PID(10), T(51), 99.5);
    live[1].stopped = true; /* rank 7 */
    view_table(&f.h, T(52), &in, &t);
    ck_assert_uint_eq(t.n, NRANKS);
    ck_assert_str_eq(t.rows[0].state, "idle"); /* 0 % */
    ck_assert_str_eq(t.rows[4].state, "idle"); /* 4 % */
    ck_assert_str_eq(t.rows[5].state, "run");  /* CPU unknown */
    ck_assert_str_eq(t.rows[6].state, "run");  /* 6 % */
    ck_assert_str_eq(t.rows[7].state, "stopped");
    ck_assert_str_eq(t.rows[9].state, "idle"); /* the newest reading counts */
    ck_assert_str_eq(t.rows[10].state, "run");
    view_table_fini(&t);
    /* Unchanged for longer than stuck_after_ns: stuck, idle or not. Rank 3 changed at T(10). */
    in.stuck_after_ns = 43 * SEC;
    view_table(&f.h, T(52), &in, &t);
    ck_assert_str_eq(t.rows[0].state, "stuck"); /* unchanged since T(8) */
    ck_assert_str_eq(t.rows[10].state, "stuck");
    ck_assert_str_eq(t.rows[ODD_RANK].state, "idle"); /* 3 %, unchanged 42 s */
    view_table_fini(&t);
    history_fini(&f.h);
}
END_TEST

/* Before any baseline (m), ΔRSS counts from each rank's first RSS reading; a baseline taken
 * over a filtered table leaves the other ranks at their first reading. */
START_TEST(baseline_from_first_reading)
{
    struct fx f;
    struct engine_rank_live live[2];
    struct view_table t;
    struct view_baseline b = {0};

    table_fx(&f, live); /* RSS 1000 + 10 i at T(50) */
    history_counter(&f.h, SERIES_RSS, NULL, PID(4), T(51), 1040.0 + 64);
    view_baseline_extend(&b, &f.h);
    ck_assert_uint_eq(b.n, NRANKS);
    ck_assert_uint_eq(b.t, 0);
    t = table_of(&f.h, live, NULL, VIEW_SORT_RANK, &b);
    ck_assert_double_eq(t.rows[0].drss_mib, 0);
    ck_assert_double_eq(t.rows[4].drss_mib, 64);
    view_table_fini(&t);
    view_baseline_extend(&b, &f.h); /* known ranks keep their baseline */
    ck_assert_uint_eq(b.n, NRANKS);
    t = table_of(&f.h, live, "pid 4004 ", VIEW_SORT_RANK, NULL);
    view_baseline_set(&b, &t, T(52)); /* m over a filter: rank 4 alone */
    view_table_fini(&t);
    view_baseline_extend(&b, &f.h);
    ck_assert_uint_eq(b.n, NRANKS);
    t = table_of(&f.h, live, NULL, VIEW_SORT_RANK, &b);
    ck_assert_double_eq(t.rows[4].drss_mib, 0); /* from m */
    ck_assert_double_eq(t.rows[2].drss_mib, 0); /* from its first reading */
    view_table_fini(&t);
    view_baseline_fini(&b);
    history_fini(&f.h);
}
END_TEST

START_TEST(memory_and_gil_panes)
{
    struct fx f;
    struct engine_rank_live live[2];
    struct view_table t;
    struct view_baseline b = {0};
    struct view_memory m;
    struct view_gil g;

    table_fx(&f, live);
    t = table_of(&f.h, live, NULL, VIEW_SORT_RANK, NULL);
    view_baseline_set(&b, &t, T(50));
    view_table_fini(&t);
    for (int k = 0; k < 600; k++) /* rank 1 grows 1 MiB a second for 10 minutes */
        history_counter(&f.h, SERIES_RSS, NULL, PID(1), T(51 + k), 1010.0 + k);
    history_counter(&f.h, SERIES_USS, NULL, PID(1), T(51), 900);
    history_counter(&f.h, SERIES_SWAP, NULL, PID(1), T(51), 0);
    t = table_of(&f.h, live, NULL, VIEW_SORT_RANK, &b);
    view_memory(&f.h, &t, &m);
    ck_assert_uint_eq(m.n, NRANKS);
    ck_assert_int_eq(m.rows[1].pid, PID(1));
    ck_assert_double_eq(m.rows[1].drss_mib, 599);
    ck_assert(m.rows[1].warn);
    ck_assert(!m.rows[0].warn);
    ck_assert_double_eq(m.rows[1].d60_mib, 60);
    ck_assert_double_eq(m.rows[1].uss_mib, 900);
    ck_assert_double_eq(m.rows[1].swap_mib, 0);
    ck_assert(isnan(m.rows[0].uss_mib));
    ck_assert(isnan(m.rows[0].d60_mib)); /* a single point */
    ck_assert_uint_eq(m.rows[1].nspark, VIEW_SPARK_POINTS);
    ck_assert_double_eq(m.rows[1].spark[VIEW_SPARK_POINTS - 1], 1609);
    ck_assert_uint_eq(m.rows[0].nspark, 1);
    view_memory_fini(&m);
    live[0].gil_busy_pct = 95;
    live[0].gil_waiters = 1.5;
    live[0].nshares = 2;
    live[0].shares[0].ident = 1; /* the main thread's ident in the fixture */
    live[0].shares[0].pct = 80;
    live[0].shares[1].ident = 0x999;
    live[0].shares[1].pct = 20;
    view_gil(&f.h, &t, live, 2, &g);
    ck_assert_uint_eq(g.n, NRANKS);
    ck_assert(g.rows[2].known && g.rows[2].warn);
    ck_assert_str_eq(g.rows[2].shares, "MainThread 80%, ? 20%");
    ck_assert(!g.rows[7].known); /* GIL figures unknown */
    ck_assert(!g.rows[0].known); /* no live record */
    ck_assert_int_eq(g.rows[7].pid, PID(7));
    view_gil_fini(&g);
    view_table_fini(&t);
    view_baseline_fini(&b);
    history_fini(&f.h);
}
END_TEST

/* ---- issue 9: what the views say about each rank ---- */

/* An unknown rank is "pid N" everywhere: labels, rank sets, the banner. */
START_TEST(pid_never_a_rank)
{
    struct fx f;
    struct view_hang v;
    char buf[64];
    const int ids[] = {2, -812, 0, 1, -77};
    struct hrank r = {.pid = 812, .rank = -1};

    ck_assert_int_gt(history_rank_label(&r, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "pid 812");
    r.rank = 3;
    history_rank_label(&r, buf, sizeof(buf));
    ck_assert_str_eq(buf, "rank 3");
    view_rankset_format(ids, 5, buf, sizeof(buf));
    ck_assert_str_eq(buf, "0-2,pid 77,pid 812");
    /* A job whose rank 3 has no known rank number: the banner names its pid. */
    fx_build(&f, 12);
    f.h.ranks[ODD_RANK].rank = -1;
    for (int k = 13; k <= 60; k++)
        for (int i = 0; i < NRANKS; i++)
            history_observe(main_of(&f.h, i), i == ODD_RANK ? f.odd : f.maj, T(k));
    f.h.ranks[ODD_RANK].rank = -1; /* main_of() names it again */
    view_hang(&f.h, T(60), 30 * SEC, NULL, &v);
    ck_assert(v.hang);
    ck_assert_int_eq(v.odd[0].rank, -PID(ODD_RANK));
    ck_assert_ptr_nonnull(strstr(v.text, "odd: pid 4003 in load_batch_slowly"));
    ck_assert_ptr_null(strstr(v.text, "rank 4003"));
    view_hang_fini(&v);
    history_fini(&f.h);
}
END_TEST

/* Every rank spins in one function whose line changes every sample: the verdict, the table's
 * SINCE and the tree's ages hold by function, and the banner stays up sample after sample. */
START_TEST(verdict_by_function)
{
    struct history h;
    struct view_hang v;
    struct view_table t;
    struct view_table_in in = {.stuck_after_ns = 5 * SEC};
    struct view_tree tree;

    history_init(&h, T0, 0, "n");
    for (int k = 0; k <= 60; k++)
        for (int i = 0; i < 4; i++) {
            struct hframe fr[] = {{"spin", "/job/spin.py", 10 + (k + i) % 7, false},
                                  {"<module>", "/job/spin.py", 30, false}};
            uint32_t st = history_intern_stack(&h, fr, 2);

            history_observe(
                history_thread(history_rank(&h, PID(i), i, NULL), 1, PID(i), "MainThread", true),
                st, T(k));
            if (k < 40)
                continue;
            view_hang(&h, T(k), 30 * SEC, NULL, &v);
            ck_assert_msg(i < 3 || v.hang, "no verdict at %d s", k);
            ck_assert_uint_eq(v.since, (uint64_t)k * SEC);
            if (i == 3)
                ck_assert_ptr_nonnull(strstr(v.text, ": 4 ranks in spin (spin.py:"));
            view_hang_fini(&v);
        }
    view_table(&h, T(60), &in, &t);
    ck_assert_uint_eq(t.n, 4);
    ck_assert_str_eq(t.rows[0].state, "stuck");
    ck_assert(t.rows[0].since_s == 60.0);
    view_table_fini(&t);
    view_merge(&h, T(60), NULL, &tree);
    ck_assert_uint_eq(tree.nodes[tree.nodes[tree.root].child].unchanged_min, 60 * SEC);
    view_merge_fini(&tree);
    history_fini(&h);
}
END_TEST

/* The state column of rank ODD_RANK at T(60); every other rank must read "run". */
static void odd_state(const struct history *h, char *buf, size_t len)
{
    struct view_table_in in = {0};
    struct view_table t;

    view_table(h, T(60), &in, &t);
    for (size_t i = 0; i < t.n; i++)
        if (t.rows[i].rank == ODD_RANK)
            snprintf(buf, len, "%s", t.rows[i].state);
        else
            ck_assert_str_eq(t.rows[i].state, "run");
    view_table_fini(&t);
}

/* Whether rank ODD_RANK's frame column at T(60) starts with want. */
static bool odd_top_has(const struct history *h, const char *want)
{
    struct view_table_in in = {0};
    struct view_table t;
    bool has = false;

    view_table(h, T(60), &in, &t);
    for (size_t i = 0; i < t.n; i++)
        if (t.rows[i].rank == ODD_RANK)
            has = !strncmp(t.rows[i].top, want, strlen(want));
    view_table_fini(&t);
    return has;
}

/* Exit status in the state column and the banner: signal, code, unknown. */
START_TEST(exit_state_and_banner)
{
    struct fx f;
    struct view_hang v;
    struct hrank *r;
    char st[16];

    fx_build(&f, 12);
    for (int k = 13; k <= 60; k++)
        for (int i = 0; i < NRANKS; i++)
            if (i != ODD_RANK || k < 20)
                history_observe(main_of(&f.h, i), f.maj, T(k));
    r = history_rank(&f.h, PID(ODD_RANK), ODD_RANK, NULL);
    history_rank_exit(r, T(48));
    r->exit_signal = 11;
    odd_state(&f.h, st, sizeof(st));
    ck_assert_str_eq(st, "SIGSEGV");
    view_hang(&f.h, T(60), 30 * SEC, NULL, &v);
    ck_assert(v.hang);
    ck_assert_str_eq(v.text, "HANG 52s: rank 3 exited (SIGSEGV) 12s ago; 15 ranks in all_reduce "
                             "(distributed_c10d.py:1541)");
    view_hang_fini(&v);
    /* Where its core went: in the banner and first in the rank's frame column. */
    snprintf(r->core, sizeof(r->core), "/cores/core.%d", PID(ODD_RANK));
    view_hang(&f.h, T(60), 30 * SEC, NULL, &v);
    ck_assert_ptr_nonnull(strstr(v.text, "rank 3 exited (SIGSEGV core: /cores/core."));
    view_hang_fini(&v);
    odd_state(&f.h, st, sizeof(st));
    ck_assert_str_eq(st, "SIGSEGV");
    ck_assert(odd_top_has(&f.h, "core: /cores/core."));
    r->core[0] = '\0';
    r->exit_signal = 0;
    r->exit_code = 1;
    odd_state(&f.h, st, sizeof(st));
    ck_assert_str_eq(st, "exit 1");
    r->exit_code = -1;
    odd_state(&f.h, st, sizeof(st));
    ck_assert_str_eq(st, "exited");
    view_hang(&f.h, T(60), 30 * SEC, NULL, &v);
    ck_assert_ptr_nonnull(strstr(v.text, "rank 3 exited (status unknown) 12s ago; "));
    view_hang_fini(&v);
    history_fini(&f.h);
}
END_TEST

/* The filter's pids narrow the merged tree as they narrow the table. */
START_TEST(merge_filtered)
{
    struct fx f;
    struct view_tree t;
    const int pids[] = {PID(ODD_RANK), PID(5)};
    struct view_merge_opts o = {.pids = pids, .npids = 2};
    char buf[64];

    fx_build(&f, 12);
    view_merge(&f.h, T(12), &o, &t);
    ck_assert_uint_eq(t.nstacks, 2);
    ranks_text(&t.nodes[t.root], buf, sizeof(buf));
    ck_assert_str_eq(buf, "3,5");
    view_merge_fini(&t);
    history_fini(&f.h);
}
END_TEST

/* The Rank view: the main thread alone, or with all_threads every live thread, named. */
START_TEST(rank_view_threads)
{
    struct fx f;
    struct view_rank v;

    fx_build(&f, 12);
    view_rank(&f.h, PID(2), false, T(12), &v);
    ck_assert_ptr_nonnull(v.r);
    ck_assert_str_eq(v.title, "rank 2  pid 4002  gpu 2  Python ");
    ck_assert_uint_eq(v.n, 1);
    ck_assert_str_eq(v.threads[0].name, "MainThread");
    view_rank_fini(&v);
    view_rank(&f.h, PID(2), true, T(12), &v);
    ck_assert_uint_eq(v.n, 2);
    ck_assert_str_eq(v.threads[0].name, "MainThread");
    ck_assert_str_eq(v.threads[1].name, "pin_memory");
    ck_assert_uint_eq(v.threads[1].stack, f.work);
    view_rank_fini(&v);
    f.h.ranks[2].rank = -1;
    view_rank(&f.h, PID(2), true, T(12), &v);
    ck_assert_str_eq(v.title, "pid 4002  gpu 2  Python ");
    view_rank_fini(&v);
    view_rank(&f.h, 1, true, T(12), &v);
    ck_assert_ptr_null(v.r);
    view_rank_fini(&v);
    history_fini(&f.h);
}
END_TEST

/* A DataLoader-style worker's threads show under its rank in the Rank view, after the rank's
 * own (its main thread even in main-thread mode), and stay out of every cross-rank view: the
 * merged tree, Top and the GIL holder's name. Its main thread keeps the ident of the parent's
 * forking thread, so only the worker pid tells the two apart. */
START_TEST(rank_view_workers)
{
    struct fx f;
    struct view_rank v;
    struct view_tree t;
    struct view_top top;
    struct hrank *r;
    const struct hframe fetch[] = {{"fetch", "/torch/worker.py", 9, false}};
    uint32_t s;

    fx_build(&f, 12);
    r = &f.h.ranks[2];
    s = history_intern_stack(&f.h, fetch, 1);
    history_observe(history_worker_thread(r, 7001, 1, 7001, "MainThread"), s, T(12));
    ck_assert_uint_eq(r->nthreads, 3); /* not merged with the rank's ident-1 main thread */
    view_rank(&f.h, PID(2), false, T(12), &v);
    ck_assert_uint_eq(v.n, 2);
    ck_assert_int_eq(v.threads[0].worker, 0);
    ck_assert(v.threads[0].t->main);
    ck_assert_int_eq(v.threads[1].worker, 7001);
    ck_assert_str_eq(v.threads[1].name, "MainThread");
    ck_assert_uint_eq(v.threads[1].stack, s);
    view_rank_fini(&v);
    view_rank(&f.h, PID(2), true, T(12), &v);
    ck_assert_uint_eq(v.n, 3);
    ck_assert_str_eq(v.threads[1].name, "pin_memory");
    ck_assert_int_eq(v.threads[2].worker, 7001);
    view_rank_fini(&v);
    struct view_merge_opts mo = {.all_threads = true};

    view_merge(&f.h, T(12), &mo, &t);
    ck_assert_uint_gt(t.nnodes, 0);
    for (size_t i = 0; i < t.nnodes; i++)
        ck_assert_str_ne(t.nodes[i].function, "fetch");
    view_merge_fini(&t);
    ck_assert_int_eq(view_top(&f.h, T(12), T(12) - T0, PID(2), true, &top), 0);
    for (size_t i = 0; i < top.nrows; i++)
        ck_assert_str_ne(top.rows[i].function, "fetch");
    view_top_fini(&top);
    ck_assert_str_eq(view_thread_name(&f.h, PID(2), 1), "MainThread");
    history_fini(&f.h);
}
END_TEST

/* asyncio tasks (record --async, the monitor's `a`) are pseudo-threads of their rank: the Rank
 * view shows them only when asked, each after the thread running its loop (after the main
 * thread when that one is not shown), a thread's tasks by name; gone tasks are left out, and
 * the merged tree and Top never count them. A task's ident has the top bit set,
 * is stable for one task and differs for another name at the same address. */
START_TEST(rank_view_tasks)
{
    struct fx f;
    struct view_rank v;
    struct view_tree t;
    struct view_top top;
    struct hrank *r;
    const struct hframe chain[] = {{"Event.wait", "/py/locks.py", 213, false},
                                   {"serve", "/job/serve.py", 7, false}};
    uint32_t s;
    uint64_t pin_ident;
    struct hthread *gone;

    fx_build(&f, 12);
    r = &f.h.ranks[2];
    pin_ident = r->threads[1].ident;
    ck_assert_str_eq(r->threads[1].name, "pin_memory");
    s = history_intern_stack(&f.h, chain, 2);
    history_observe(history_task(r, 0x7000, "zeta", 0), s, T(12));
    history_observe(history_task(r, 0x8000, "alpha", pin_ident), s, T(12));
    history_observe(history_task(r, 0x9000, "beta", r->threads[0].ident), s, T(12));
    gone = history_task(r, 0xa000, "done", 0);
    history_observe(gone, s, T(11));
    history_thread_gone(gone, T(12));
    ck_assert(history_task(r, 0x7000, "zeta", 0) == &r->threads[r->nthreads - 4]);
    ck_assert(history_task_ident(0x7000, "zeta") >> 63);
    ck_assert_uint_ne(history_task_ident(0x7000, "zeta"), history_task_ident(0x7000, "zeta2"));
    ck_assert(r->threads[r->nthreads - 3].task && !r->threads[r->nthreads - 3].main);
    ck_assert_uint_eq(r->threads[r->nthreads - 3].task_thread, pin_ident);

    view_rank(&f.h, PID(2), true, T(12), &v); /* tasks not asked for */
    ck_assert_uint_eq(v.n, 2);
    view_rank_fini(&v);
    view_rank_tasks(&f.h, PID(2), true, true, T(12), &v);
    ck_assert_uint_eq(v.n, 5); /* MainThread, beta, zeta, pin_memory, alpha */
    ck_assert_str_eq(v.threads[0].name, "MainThread");
    ck_assert(v.threads[1].task && v.threads[2].task);
    ck_assert_str_eq(v.threads[1].name, "beta");
    ck_assert_str_eq(v.threads[2].name, "zeta"); /* thread unknown: under the main thread */
    ck_assert_str_eq(v.threads[3].name, "pin_memory");
    ck_assert(!v.threads[3].task);
    ck_assert_str_eq(v.threads[4].name, "alpha");
    ck_assert_uint_eq(v.threads[4].stack, s);
    view_rank_fini(&v);
    view_rank_tasks(&f.h, PID(2), false, true, T(12), &v); /* pin_memory not shown */
    ck_assert_uint_eq(v.n, 4);
    ck_assert_str_eq(v.threads[0].name, "MainThread");
    ck_assert_str_eq(v.threads[1].name, "alpha");
    ck_assert_str_eq(v.threads[2].name, "beta");
    ck_assert_str_eq(v.threads[3].name, "zeta");
    view_rank_fini(&v);

    struct view_merge_opts mo = {.all_threads = true};

    view_merge(&f.h, T(12), &mo, &t);
    for (size_t i = 0; i < t.nnodes; i++)
        ck_assert_str_ne(t.nodes[i].function, "Event.wait");
    view_merge_fini(&t);
    ck_assert_int_eq(view_top(&f.h, T(12), T(12) - T0, PID(2), true, &top), 0);
    for (size_t i = 0; i < top.nrows; i++)
        ck_assert_str_ne(top.rows[i].function, "Event.wait");
    view_top_fini(&top);
    ck_assert_uint_eq(view_top_interval(&f.h), SEC);
    history_fini(&f.h);
}
END_TEST

/* A thread other than the main one holding the GIL most is named in the table row. */
/* The achieved rate: nothing until a full window is measured (a first pass 20 ms after the
 * start is not 50 Hz), then passes over the window; a counter going back starts over. */
START_TEST(rate_needs_full_window)
{
    struct view_rate r = {0};
    uint64_t w = view_rate_window(10), s = 1000000000ull;

    ck_assert_uint_eq(w, 2 * s);
    ck_assert_uint_eq(view_rate_window(0.5), 40 * s);
    ck_assert_uint_eq(view_rate_window(0.01), VIEW_RATE_MAX_NS);
    ck_assert_uint_eq(view_rate_window(1000), VIEW_RATE_MIN_NS);
    ck_assert(isnan(view_rate_hz(&r, w)));
    view_rate_add(&r, 20000000ull, 1); /* first pass seen at 20 ms */
    ck_assert(isnan(view_rate_hz(&r, w)));
    for (uint64_t k = 1; k <= 3; k++) /* refreshes every 0.5 s, 10 Hz: under 2 s so far */
        view_rate_add(&r, 20000000ull + k * s / 2, 1 + 5 * k);
    ck_assert(isnan(view_rate_hz(&r, w)));
    view_rate_add(&r, 20000000ull + 2 * s, 21);
    ck_assert(fabs(view_rate_hz(&r, w) - 10.0) < 1e-9);
    for (uint64_t k = 5; k < 1000; k++) /* the ring wraps; the rate drops */
        view_rate_add(&r, 20000000ull + k * s / 2, 21 + 5 * 4 + (k - 5) * 2 + 1);
    ck_assert(fabs(view_rate_hz(&r, w) - 4.0) < 1e-9); /* 2 passes per 0.5 s */
    view_rate_add(&r, 20000000ull + 1000 * s / 2, 3);  /* counter went back: start over */
    ck_assert(isnan(view_rate_hz(&r, w)));
}
END_TEST

START_TEST(table_gil_holder)
{
    struct fx f;
    struct engine_rank_live live[2] = {
        {.pid = PID(1), .gil_busy_pct = 97, .nshares = 2},
        {.pid = PID(2), .gil_busy_pct = 60, .nshares = 1},
    };
    struct view_table_in in = {.live = live, .nlive = 2};
    struct view_table t;

    fx_build(&f, 12);
    live[0].shares[0].ident = 2; /* pin_memory */
    live[0].shares[0].pct = 96;
    live[0].shares[1].ident = 1;
    live[0].shares[1].pct = 1;
    live[1].shares[0].ident = 1; /* the main thread itself: nothing to point at */
    live[1].shares[0].pct = 60;
    view_table(&f.h, T(12), &in, &t);
    ck_assert_str_eq(t.rows[1].gil_holder, "pin_memory");
    ck_assert(t.rows[1].gil_holder_pct == 96);
    ck_assert_str_eq(t.rows[2].gil_holder, "");
    ck_assert_str_eq(t.rows[0].gil_holder, "");
    view_table_fini(&t);
    history_fini(&f.h);
}
END_TEST

/* The kind of wait in the table and the banner: the stack's rules, then what the live figures
 * add (the main thread's state and syscall, every thread stopped), and a user's rules. */
START_TEST(table_and_banner_waits)
{
    struct fx f;
    struct engine_rank_live live = {.pid = PID(ODD_RANK),
                                    .state = 'S',
                                    .syscall = SYS_read,
                                    .in_gc = -1,
                                    .dev_mem_mb = -1,
                                    .gil_busy_pct = -1};
    struct view_hang_in in = {.live = &live, .nlive = 1};
    struct view_table_in tin = {.live = &live, .nlive = 1};
    struct view_table t;
    struct view_hang v;
    struct waits *w;
    struct app_err err;
    const char *rules = "data func load_batch_slowly\n";

    fx_build(&f, 52);
    view_table(&f.h, T(52), &tin, &t);
    ck_assert_int_eq(t.rows[ODD_RANK].wait, WAIT_IO);
    ck_assert_str_eq(t.rows[ODD_RANK].wait_why, "state S in read");
    ck_assert_int_eq(t.rows[0].wait, WAIT_COLLECTIVE);
    view_table_fini(&t);
    view_hang(&f.h, T(52), 30 * SEC, &in, &v);
    ck_assert_str_eq(v.text, "HANG 42s: 15 ranks in all_reduce (distributed_c10d.py:1541); odd: "
                             "rank 3 in load_batch_slowly (train.py:12) [io]");
    view_hang_fini(&v);
    live.stopped = true;
    view_hang(&f.h, T(52), 30 * SEC, &in, &v);
    ck_assert_int_eq(v.odd[0].wait, WAIT_STOPPED);
    view_hang_fini(&v);
    ck_assert_int_eq(waits_parse(rules, strlen(rules), "my.rules", &w, &err), 0);
    in.waits = w;
    in.live = NULL;
    view_hang(&f.h, T(52), 30 * SEC, &in, &v);
    ck_assert_int_eq(v.odd[0].wait, WAIT_DATA);
    view_hang_fini(&v);
    waits_free(w);
    history_fini(&f.h);
}
END_TEST

static Suite *view_suite(void)
{
    Suite *s = suite_create("view");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, rankset_basic);
    tcase_add_test(tc, rankset_truncation);
    tcase_add_test(tc, merge_main_threads);
    tcase_add_test(tc, merge_collapse_and_ids);
    tcase_add_test(tc, merge_synthetic_nodes);
    tcase_add_test(tc, merge_stack_ending_inside);
    tcase_add_test(tc, merge_all_threads);
    tcase_add_test(tc, merge_node_cap);
    tcase_add_test(tc, hang_verdict);
    tcase_add_test(tc, table_and_banner_waits);
    tcase_add_test(tc, hang_asyncio_tasks);
    tcase_add_test(tc, merge_asyncio_tasks);
    tcase_add_test(tc, hang_one_rank_moves);
    tcase_add_test(tc, hang_devices);
    tcase_add_test(tc, hang_npu_device_names);
    tcase_add_test(tc, hang_odd_groups_and_exits);
    tcase_add_test(tc, hang_long_banner);
    tcase_add_test(tc, hang_since_and_rank_rows);
    tcase_add_test(tc, top_whole_history);
    tcase_add_test(tc, top_window);
    tcase_add_test(tc, top_gaps_and_exit);
    tcase_add_test(tc, frame_format);
    tcase_add_test(tc, short_file_names);
    tcase_add_test(tc, series_ids_keep_export_names);
    tcase_add_test(tc, series_delta_window);
    tcase_add_test(tc, table_rows_and_sorts);
    tcase_add_test(tc, table_filter_and_baseline);
    tcase_add_test(tc, table_idle_state);
    tcase_add_test(tc, baseline_from_first_reading);
    tcase_add_test(tc, memory_and_gil_panes);
    tcase_add_test(tc, pid_never_a_rank);
    tcase_add_test(tc, verdict_by_function);
    tcase_add_test(tc, exit_state_and_banner);
    tcase_add_test(tc, merge_filtered);
    tcase_add_test(tc, rank_view_threads);
    tcase_add_test(tc, rank_view_workers);
    tcase_add_test(tc, rank_view_tasks);
    tcase_add_test(tc, table_gil_holder);
    tcase_add_test(tc, rate_needs_full_window);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ts_run(view_suite());
}
