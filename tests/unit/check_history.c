/* Unit tests of src/model/history.c: interning and the deep copy the UI and exporters take.
 * The clone must stay valid after the original is freed (under ASan a dangling string pointer
 * is a use-after-free report, not a lucky read). */
#include "ranktop/base/hash.h"
#include "ranktop/model/history.h"
#include "tsupport.h"

#include <check.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fill(struct history *h)
{
    const struct hframe a[] = {{"leaf", "/x/a.py", 3, false},
                               {"mid", "/x/a.py", 10, false},
                               {"main", "/x/m.py", 1, false}};
    const struct hframe b[] = {{"other", "/x/b.py", 7, false}, {"main", "/x/m.py", 1, false}};
    struct hrank *r = history_rank(h, 100, 0, "gpu 0");
    struct hthread *t = history_thread(r, 1, 100, "MainThread", true);

    history_observe(t, history_intern_stack(h, a, 3), 10);
    history_observe(t, history_intern_stack(h, b, 2), 20);
    history_counter(h, SERIES_RSS, NULL, 100, 10, 12.5);
}

START_TEST(test_intern_dedups)
{
    struct history h;
    const struct hframe a[] = {{"f", "/x/a.py", 1, false}};
    const struct hframe a2[] = {{"f", "/x/a.py", 1, false}};
    const struct hframe b[] = {{"f", "/x/a.py", 2, false}};

    history_init(&h, 0, 0, "host");
    ck_assert_uint_eq(history_intern_stack(&h, a, 1), history_intern_stack(&h, a2, 1));
    ck_assert_uint_ne(history_intern_stack(&h, a, 1), history_intern_stack(&h, b, 1));
    ck_assert_uint_eq(h.nframes, 2);
    /* Equal strings are interned once: both frames share the pointers. */
    ck_assert_ptr_eq(h.frames[0].function, h.frames[1].function);
    history_fini(&h);
}
END_TEST

/* A native frame is never the Python frame of the same name, file and line, and a clone keeps
 * the mark (exports and views show it). */
START_TEST(test_native_frames_distinct)
{
    struct history h, c;
    const struct hframe py[] = {{"pause", "/lib/libc.so.6", 0, false}};
    const struct hframe nat[] = {{"pause", "/lib/libc.so.6", 0, true}};
    uint32_t a, b;

    history_init(&h, 0, 0, "host");
    a = history_intern_stack(&h, py, 1);
    b = history_intern_stack(&h, nat, 1);
    ck_assert_uint_ne(a, b);
    ck_assert_uint_eq(history_intern_stack(&h, nat, 1), b);
    history_clone(&h, &c);
    ck_assert(!c.frames[history_stack_frames(&c, a)[0]].native);
    ck_assert(c.frames[history_stack_frames(&c, b)[0]].native);
    history_fini(&c);
    history_fini(&h);
}
END_TEST

/* A stack interned from frame ids (the sampler keeps the ids of unchanged outer frames) is
 * the stack interned from its frames. */
START_TEST(test_intern_by_ids)
{
    struct history h;
    const struct hframe inner_first[] = {{"leaf", "/x/a.py", 3, false},
                                         {"mid", "/x/a.py", 10, false},
                                         {"main", "/x/m.py", 1, false}};
    uint32_t ids[3], a, b;

    history_init(&h, 0, 0, "host");
    a = history_intern_stack(&h, inner_first, 3);
    for (int i = 0; i < 3; i++)
        ids[i] = history_intern_frame(&h, &inner_first[2 - i]);
    b = history_intern_stack_ids(&h, ids, 3);
    ck_assert_uint_eq(a, b);
    ck_assert_uint_eq(h.nstacks, 1);
    ck_assert_uint_ne(history_intern_stack_ids(&h, ids, 2), a);
    history_fini(&h);
}
END_TEST

START_TEST(test_clone_outlives_original)
{
    struct history h, c, cc;

    history_init(&h, 0, 0, "host");
    fill(&h);
    history_clone(&h, &c);
    history_fini(&h);

    ck_assert_uint_eq(c.nframes, 4);
    ck_assert_uint_eq(c.nstacks, 2);
    ck_assert_str_eq(c.frames[history_stack_frames(&c, 0)[2]].function, "leaf");
    ck_assert_str_eq(c.frames[history_stack_frames(&c, 0)[0]].file, "/x/m.py");
    ck_assert_str_eq(c.frames[history_stack_frames(&c, 1)[1]].function, "other");
    ck_assert_int_eq(c.frames[history_stack_frames(&c, 1)[1]].line, 7);
    ck_assert_str_eq(c.ranks[0].threads[0].name, "MainThread");
    ck_assert_uint_eq(c.ranks[0].threads[0].nruns, 2);
    ck_assert_uint_eq(c.series[0].n, 1);
    ck_assert_ptr_nonnull(history_series(&c, SERIES_RSS, 100));
    /* Frames 1 and 2 (mid, leaf) share their interned file. */
    ck_assert_ptr_eq(c.frames[1].file, c.frames[2].file);
    ck_assert_uint_gt(history_memory(&c), 0);

    /* A clone of a clone is as independent. */
    history_clone(&c, &cc);
    history_fini(&c);
    ck_assert_str_eq(cc.frames[history_stack_frames(&cc, 1)[0]].function, "main");
    history_fini(&cc);
}
END_TEST

/* A view is a clone taken as often as every 100 ms: it must cost the history's records, not its
 * runs, points and tables (an hour at scale is millions of runs), and stay what it was, strings
 * included, while the writer goes on appending, trimming and compacting (which frees the
 * strings no run refers to), and after the original is freed. */
#define SH_THREADS 64
#define SH_RUNS 8192

static uint64_t runs_sum(const struct history *h)
{
    uint64_t sum = 0;

    for (size_t i = 0; i < h->nranks; i++)
        for (size_t k = 0; k < h->ranks[i].nthreads; k++) {
            const struct hthread *t = &h->ranks[i].threads[k];

            for (size_t r = 0; r < t->nruns; r++) {
                const struct hrun *run = history_run(t, r);
                const struct hframe *f = &h->frames[history_stack_frames(h, run->stack)[0]];

                sum = hash_mix(sum, hash_mix(run->t0 * 31 + run->t1, (uint64_t)f->line));
                sum = hash_mix(sum, hash_str(f->function) ^ hash_str(f->file));
            }
        }
    for (size_t i = 0; i < h->nseries; i++)
        for (size_t k = 0; k < h->series[i].n; k++)
            sum = hash_mix(sum, h->series[i].pts[k].t + (uint64_t)h->series[i].pts[k].v);
    return sum;
}

/* Bytes malloc hands out, large blocks (mapped on their own) included. glibc before 2.33
 * (Debian 11, where the portable build is made) has only mallinfo, whose int fields hold the
 * few MB this test measures. */
static size_t heap_bytes(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 m = mallinfo2();

    return m.uordblks + m.hblkhd;
#else
    struct mallinfo m = mallinfo();

    return (size_t)(unsigned)m.uordblks + (size_t)(unsigned)m.hblkhd;
#endif
}

static uint32_t line_stack(struct history *h, int line)
{
    char fn[32];
    const struct hframe f = {fn, "/x/a.py", line, false};

    snprintf(fn, sizeof(fn), "f%d", line); /* a string per frame, for compactions to drop */
    return history_intern_stack(h, &f, 1);
}

START_TEST(test_clone_shares_runs)
{
    struct history h, c;
    struct hrank *r;
    uint32_t st[8];
    uint64_t sum, now = (uint64_t)SH_RUNS * 10;
    size_t before, grew;

    history_init(&h, 0, 0, "host");
    for (int i = 0; i < 8; i++)
        st[i] = line_stack(&h, i + 1);
    r = history_rank(&h, 100, 0, "");
    for (int k = 0; k < SH_THREADS; k++) {
        struct hthread *t = history_thread(r, (uint64_t)k + 1, 0, "", k == 0);

        for (int i = 0; i < SH_RUNS; i++)
            history_observe(t, st[i % 8], (uint64_t)i * 10 + 5);
    }
    for (int i = 0; i < 1000; i++)
        history_counter(&h, SERIES_RSS, NULL, 100, (uint64_t)i * 10, i);
    /* A thread that ends early: the trim below drops it, and the compaction its strings. */
    history_observe(history_thread(r, 999, 0, "", false), line_stack(&h, 500), 1);
    history_observe(&r->threads[SH_THREADS], line_stack(&h, 501), 2);
    history_thread_gone(&r->threads[SH_THREADS], 3);
    before = heap_bytes();
    history_clone(&h, &c);
    grew = heap_bytes() - before;
    ck_assert_uint_lt(grew, SH_THREADS * SH_RUNS * sizeof(struct hrun) / 20);
    sum = runs_sum(&c);
    ck_assert_uint_eq(sum, runs_sum(&h));

    /* The writer goes on: new runs and points, a trim that drops the older half, and enough
     * new stacks that the trim compacts (renumbering every run's stack). */
    h.window_ns = now / 2;
    r = &h.ranks[0];
    for (int i = 0; i < 2100; i++)
        line_stack(&h, 1000 + i);
    for (int k = 0; k < SH_THREADS; k++)
        for (int i = 0; i < 64; i++)
            history_observe(&r->threads[k], line_stack(&h, 100 + i % 3), now + (uint64_t)i * 10);
    now += 640;
    history_counter(&h, SERIES_RSS, NULL, 100, now, 1);
    history_trim(&h, now);
    ck_assert_uint_ge(h.gen, 1);
    ck_assert_uint_eq(h.ranks[0].nthreads, SH_THREADS);
    ck_assert_uint_lt(h.ranks[0].threads[0].nruns, SH_RUNS / 2 + 64);
    ck_assert_int_eq(
        h
            .frames[history_stack_frames(
                &h, history_run(&h.ranks[0].threads[0], h.ranks[0].threads[0].nruns - 1)->stack)[0]]
            .line,
        100 + 63 % 3);
    ck_assert_uint_eq(runs_sum(&c), sum);
    history_fini(&h);
    ck_assert_uint_eq(runs_sum(&c), sum);
    ck_assert_uint_eq(c.ranks[0].threads[SH_THREADS - 1].nruns, SH_RUNS);
    ck_assert_uint_eq(c.ranks[0].nthreads, SH_THREADS + 1);
    history_fini(&c);
}
END_TEST

/* The monitor exports its tagged ranks alone: history_keep_ranks drops the other ranks'
 * threads and series from a clone, keeps node-wide series, and the clone still exports. */
START_TEST(test_keep_ranks)
{
    struct history h, c;
    const int keep[] = {300, 100};
    uint32_t st;

    history_init(&h, 0, 0, "host");
    fill(&h); /* rank pid 100 */
    st = history_intern_stack(&h, &(struct hframe){"f", "/x/f.py", 1, false}, 1);
    for (int pid = 200; pid <= 300; pid += 100) {
        history_observe(history_thread(history_rank(&h, pid, pid / 100, NULL), 1, pid, "M", true),
                        st, 5);
        history_counter(&h, SERIES_RSS, NULL, pid, 5, pid);
    }
    history_counter(&h, SERIES_DEV_UTIL, "gpu0", 0, 5, 50);
    history_clone(&h, &c);
    history_keep_ranks(&c, keep, 2);
    ck_assert_uint_eq(c.nranks, 2);
    ck_assert_int_eq(c.ranks[0].pid, 100);
    ck_assert_int_eq(c.ranks[1].pid, 300);
    ck_assert_uint_eq(c.ranks[1].threads[0].nruns, 1);
    ck_assert_ptr_nonnull(history_series(&c, SERIES_RSS, 100));
    ck_assert_ptr_nonnull(history_series(&c, SERIES_RSS, 300));
    ck_assert_ptr_null(history_series(&c, SERIES_RSS, 200));
    ck_assert_ptr_nonnull(history_series(&c, SERIES_DEV_UTIL, 0));
    history_keep_ranks(&c, NULL, 0);
    ck_assert_uint_eq(c.nranks, 0);
    ck_assert_ptr_nonnull(history_series(&c, SERIES_DEV_UTIL, 0));
    history_fini(&c);
    ck_assert_uint_eq(h.nranks, 3); /* the original is untouched */
    history_fini(&h);
}
END_TEST

/* A task pseudo-thread (record --async): one record per task (address and name), never main,
 * its loop's thread kept; a long name is cut to leave room for "task " in a 64-byte thread
 * name, never inside a UTF-8 sequence; a clone keeps the task marks. */
START_TEST(test_task_threads)
{
    struct history h, c;
    struct hrank *r;
    struct hthread *t;
    char name[128] = "";

    history_init(&h, 0, 0, "host");
    r = history_rank(&h, 100, 0, NULL);
    history_thread(r, 1, 100, "MainThread", true);
    t = history_task(r, 0x5000, "serve", 1);
    ck_assert(t->task && !t->main && t->task_thread == 1);
    ck_assert_str_eq(t->name, "serve");
    ck_assert(history_task(r, 0x5000, "serve", 1) == t);
    ck_assert(history_task(r, 0x5000, "other", 1) != &r->threads[1]); /* new name: new task */
    ck_assert_uint_eq(r->nthreads, 3);
    for (int i = 0; i < 20; i++) /* 28 "ж" (2 bytes each), then 6 "€" (3 bytes each) */
        strcat(name, i < 14 ? "жж" : "€");
    ck_assert_uint_eq(strlen(name), 74);
    t = history_task(r, 0x6000, name, 0);
    ck_assert_uint_le(strlen(t->name), 58);
    ck_assert_uint_eq(strlen(t->name), 56); /* the cut at 58 falls inside the first "€" */
    ck_assert(strncmp(t->name, name, strlen(t->name)) == 0);
    history_clone(&h, &c);
    ck_assert(c.ranks[0].threads[3].task && c.ranks[0].threads[3].task_thread == 0);
    ck_assert(!c.ranks[0].threads[0].task);
    history_fini(&c);
    history_fini(&h);
}
END_TEST

/* Task lanes under churn (record --async on a server making tasks all the time): a lane is
 * found by its task through the index, also after lanes before it were folded or trimmed
 * away; an ended lane is never found again (the task's next lane is a new one); folding keeps
 * the newest-ended lanes, oldest-ended first out (ties too), never a live lane or a thread,
 * and counts what it dropped in the rank and the history; the lanes stay bounded however
 * many tasks come and go; a clone carries no index. */
START_TEST(test_task_lanes_fold)
{
    struct history h, c;
    struct hrank *r;
    struct hthread *t;
    size_t folded = 0;

    history_init(&h, 0, 0, "host");
    r = history_rank(&h, 100, 0, NULL);
    history_thread(r, 1, 100, "MainThread", true);
    t = history_task(r, 0x10, "steady", 1);
    history_observe(t, HSTACK_NONE, 1);
    for (uint64_t i = 0; i < 20000; i++) { /* 20000 short tasks, each seen once at time i */
        char name[32];

        snprintf(name, sizeof(name), "Task-%llu", (unsigned long long)i);
        t = history_task(r, 0x1000 + 64 * (i % 500), name, 1); /* addresses come back */
        ck_assert_ptr_eq(history_task_find(r, 0x1000 + 64 * (i % 500), name), t);
        history_observe(t, HSTACK_NONE, 10 + i);
        history_thread_gone(t, 10 + i);
        ck_assert_ptr_null(history_task_find(r, 0x1000 + 64 * (i % 500), name));
        folded += history_tasks_fold(&h, r, 64);
        ck_assert_uint_le(r->nthreads, 2 + 64);
    }
    ck_assert_uint_eq(folded, 20000 - 64);
    ck_assert_uint_eq(r->tasks_folded, folded);
    ck_assert_uint_eq(h.tasks_folded, folded);
    /* The thread and the live task stay; the 64 ended lanes kept are the newest-ended. */
    ck_assert_uint_eq(r->nthreads, 66);
    ck_assert(!r->threads[0].task && r->threads[0].main);
    ck_assert_str_eq(r->threads[1].name, "steady");
    ck_assert_ptr_eq(history_task_find(r, 0x10, "steady"), &r->threads[1]);
    for (size_t k = 2; k < r->nthreads; k++)
        ck_assert_uint_ge(r->threads[k].last, 10 + 20000 - 64);
    /* Ties: four lanes ended at once, two of them folded; the other two stay. */
    for (uint64_t i = 0; i < 4; i++) {
        t = history_task(r, 0x900000 + i, "tie", 0);
        history_observe(t, HSTACK_NONE, 5);
        history_thread_gone(t, 5);
    }
    ck_assert_uint_eq(history_tasks_fold(&h, r, 66), 2);
    ck_assert_uint_eq(r->nthreads, 2 + 66);
    ck_assert_ptr_eq(history_task_find(r, 0x10, "steady"), &r->threads[1]);
    ck_assert_uint_eq(history_tasks_fold(&h, r, 66), 0);
    /* The window drops gone lanes too (not counted as folded); the index follows. */
    h.window_ns = 10;
    history_observe(&r->threads[1], HSTACK_NONE, 100000);
    history_trim(&h, 100000);
    ck_assert_uint_eq(r->nthreads, 2);
    ck_assert_ptr_eq(history_task_find(r, 0x10, "steady"), &r->threads[1]);
    ck_assert_uint_eq(h.tasks_folded, folded + 2);
    history_clone(&h, &c);
    ck_assert_ptr_null(c.ranks[0].task_index);
    ck_assert_uint_eq(c.tasks_folded, folded + 2);
    history_fini(&c);
    history_fini(&h);
}
END_TEST

/* A job whose call chains never repeat (a fresh, long function name every sample) under a
 * 1 s window: the interning tables, the strings and the threads stay bounded by the window, not
 * by the run; every run's stack still reads as what was observed; gone threads go; a holder
 * of stack ids can follow each compaction through history_remap_stack. */
START_TEST(test_compaction_bounds_memory)
{
    struct history h;
    struct hrank *r;
    uint32_t held = HSTACK_NONE;
    uint64_t held_gen = 0, gens = 0;
    size_t peak_after_warm = 0, most_stacks = 0;
    char name[256];

    history_init(&h, 0, 0, "host");
    h.window_ns = 1000000000ull;
    r = history_rank(&h, 100, 0, "");
    for (int i = 0; i < 200000; i++) {
        uint64_t now = (uint64_t)i * 1000000ull; /* 1 kHz: 1000 samples in the window */
        struct hthread *t = history_thread(r, 1, 100, "MainThread", true);
        struct hthread *w = history_thread(r, 1000 + (uint64_t)(i / 100), 0, "churn", false);
        struct hframe f[2] = {{name, "/x/gen.py", i % 7 + 1, false},
                              {"<module>", "/x/m.py", 1, false}};

        snprintf(name, sizeof(name), "generated_function_with_a_long_name_%0200d", i);
        history_observe(t, history_intern_stack(&h, f, 2), now);
        history_observe(w, history_intern_stack(&h, f + 1, 1), now);
        if (i % 100 == 99)
            history_thread_gone(w, now);
        if (i == 0)
            held = history_intern_stack(&h, f + 1, 1), held_gen = h.gen;
        if (i % 1000 == 999) {
            history_trim(&h, now);
            /* The holder follows every compaction; its stack is the live workers' one. */
            if (h.gen != held_gen) {
                gens++;
                ck_assert_uint_eq(h.gen, held_gen + 1);
                held = history_remap_stack(&h, held);
                held_gen = h.gen;
                ck_assert_uint_ne(held, HSTACK_NONE);
                ck_assert_str_eq(h.frames[history_stack_frames(&h, held)[0]].function, "<module>");
            }
            if (i > 20000 && history_memory(&h) > peak_after_warm)
                peak_after_warm = history_memory(&h);
            if (h.nstacks > most_stacks)
                most_stacks = h.nstacks;
            /* Every run reads as what was observed: the main thread's last is this sample's. */
            t = history_thread(r, 1, 100, "MainThread", true);
            ck_assert_str_eq(
                h.frames[history_stack_frames(&h, history_run(t, t->nruns - 1)->stack)[1]].function,
                name);
            ck_assert_int_eq(
                h.frames[history_stack_frames(&h, history_run(t, t->nruns - 1)->stack)[1]].line,
                i % 7 + 1);
        }
    }
    ck_assert_uint_gt(gens, 10);
    /* About 1000 live stacks in the window; the tables may double before a compaction. */
    ck_assert_uint_lt(most_stacks, 8192);
    ck_assert_uint_lt(peak_after_warm, 8u << 20);
    ck_assert_uint_lt(r->nthreads, 30); /* gone churn threads past the window are dropped */
    history_fini(&h);
}
END_TEST

/* --memory-cap without a window: a fresh 1000-character function every sample and a new
 * thread every tenth. A writer that trims when history_over_budget says so (as the engine
 * does after every sample) keeps the history within its budget, a quarter of the cap, after
 * every trim; the kept strings survive the compactions that moved them; threads are found
 * again by (worker, ident) and, once gone, only by their tid. */
START_TEST(test_budget_holds_without_window)
{
    struct history h;
    struct hrank *r;
    char *name = malloc(1100);
    size_t trims = 0;

    ck_assert_ptr_nonnull(name);
    history_init(&h, 0, 0, "host");
    h.mem_cap = 8u << 20;
    ck_assert_uint_eq(history_budget(&h), 2u << 20);
    r = history_rank(&h, 100, 0, "");
    for (int i = 0; i < 20000; i++) {
        uint64_t now = 1 + (uint64_t)i * 1000000ull;
        struct hthread *w = history_thread(r, 5000 + (uint64_t)(i / 10), 0, "churn", false);
        struct hframe f = {name, "/x/gen.py", 3, false};

        snprintf(name, 1100, "fn_%06d_%0990d", i, 0);
        history_observe(history_thread(r, 1, 100, "MainThread", true),
                        history_intern_stack(&h, &f, 1), now);
        history_observe(w, HSTACK_NONE, now);
        if (i % 10 == 9)
            history_thread_gone(w, now);
        if (history_over_budget(&h) || i % 1000 == 999) {
            history_trim(&h, now);
            trims++;
            ck_assert_uint_le(history_memory(&h), history_budget(&h));
        }
    }
    ck_assert_uint_gt(trims, 20);
    /* The main thread's last run reads as this sample's function after all the moves. */
    {
        struct hthread *t = history_thread(r, 1, 100, "MainThread", true);
        const struct hframe *f =
            &h.frames[history_stack_frames(&h, history_run(t, t->nruns - 1)->stack)[0]];

        ck_assert_str_eq(f->function, name);
        ck_assert_ptr_eq(history_thread(r, 1, 0, "", false), t);
    }
    /* A gone thread is found by its tid only; its ident alone makes a new record. */
    {
        struct hthread *a = history_thread(r, 77, 4242, "a", false);
        size_t n;

        history_thread_gone(a, 1);
        n = r->nthreads;
        ck_assert_ptr_eq(history_thread(r, 77, 4242, "a", false), &r->threads[n - 1]);
        history_thread_gone(&r->threads[n - 1], 1);
        ck_assert_ptr_ne(history_thread(r, 77, 4343, "b", false), &r->threads[n - 1]);
        ck_assert_uint_eq(r->nthreads, n + 1);
    }
    history_fini(&h);
    free(name);
}
END_TEST

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

/* Keys folded with hash_mix are compared for equality (a stack's key, the merged tree's node
 * ids), so small structured inputs, a counter and a line number, must not collide: the old
 * mix gave hash_mix(6, 1176) == hash_mix(24, 21), and the sampler showed a frame that was
 * gone. All 64 x 4096 pairs, once as (h, v) and once folded onto a seed, must be distinct. */
START_TEST(test_hash_mix_small_inputs)
{
    enum { NH = 64, NV = 4096 };
    uint64_t *k = malloc(sizeof(*k) * NH * NV);

    ck_assert_ptr_nonnull(k);
    for (int pass = 0; pass < 2; pass++) {
        for (uint64_t h = 0; h < NH; h++)
            for (uint64_t v = 0; v < NV; v++)
                k[h * NV + v] = pass ? hash_mix(hash_mix(0x5A17, h), v) : hash_mix(h, v);
        qsort(k, NH * NV, sizeof(*k), u64_cmp);
        for (size_t i = 1; i < NH * NV; i++)
            ck_assert_msg(k[i] != k[i - 1], "pass %d: two inputs mix to %016llx", pass,
                          (unsigned long long)k[i]);
    }
    ck_assert_uint_ne(hash_mix(6, 1176), hash_mix(24, 21));
    free(k);
}
END_TEST

static Suite *history_suite(void)
{
    Suite *s = suite_create("history");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_intern_dedups);
    tcase_add_test(tc, test_native_frames_distinct);
    tcase_add_test(tc, test_intern_by_ids);
    tcase_add_test(tc, test_clone_outlives_original);
    tcase_add_test(tc, test_clone_shares_runs);
    tcase_add_test(tc, test_task_threads);
    tcase_add_test(tc, test_task_lanes_fold);
    tcase_add_test(tc, test_compaction_bounds_memory);
    tcase_add_test(tc, test_budget_holds_without_window);
    tcase_add_test(tc, test_hash_mix_small_inputs);
    tcase_add_test(tc, test_keep_ranks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ts_run(history_suite());
}
