/* The engine's published views (engine_acquire / engine_release) against a real engine
 * sampling a real CPython target (tests/py/exit_on_cue.py, which sleeps in a loop until it is
 * killed).
 *
 * A reader that asks within ENGINE_VIEW_PERIOD_NS of the last build shares that view; one that
 * asks later gets a new one. Whether two calls fell inside the period is judged from the
 * clock after the second one, so a busy machine only makes fewer pairs count, never a wrong
 * verdict. A view held while the engine keeps sampling stays as it was when taken (compared
 * with a copy made then), while newer views show the engine moved on; it outlives engine_stop
 * and engine_free; the last release frees it (engine_view_count, and the ASan build's leak
 * check). Every wait has a generous deadline; nothing is timed. Single-threaded test code;
 * the engine runs its own threads. */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ranktop/engine/engine.h"
#include "ranktop/base/status.h"
#include "ranktop/base/util.h"
#include "engine_priv.h" /* white-box: e->lock holds the recorder's build back */
#include "tsupport.h"

#include <pthread.h>
#include <stdatomic.h>

#define DEADLINE_S 60

static const char *python;

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

    while (nanosleep(&ts, &ts) != 0)
        ;
}

static struct engine *watch(int *pid)
{
    struct engine_opts o = {.rate_hz = 50, .mem = true};
    struct app_err err = {0};
    struct engine *e;

    o.disc.pids = pid;
    o.disc.npids = 1;
    o.disc.dev.nvidia_smi = "/nonexistent";
    o.disc.dev.npu_smi = "/nonexistent";
    o.disc.dev.no_nvml = true;
    o.disc.dev.no_dcmi = true;
    ck_assert_msg(engine_start(&o, &e, &err) == 0, "engine_start: %s", err.msg);
    return e;
}

/* Runs of every thread of pid in h; 0 when h has no such rank. */
static size_t runs_of(const struct history *h, int pid)
{
    size_t n = 0;

    for (size_t i = 0; i < h->nranks; i++)
        if (h->ranks[i].pid == pid)
            for (size_t k = 0; k < h->ranks[i].nthreads; k++)
                n += h->ranks[i].threads[k].nruns;
    return n;
}

/* Waits until the engine's view has runs of pid; returns that view's sample count. */
static uint64_t wait_sampled(struct engine *e, int pid)
{
    uint64_t end = clock_mono_ns() + (uint64_t)DEADLINE_S * 1000000000u, samples = 0;
    bool seen = false;

    while (!seen && clock_mono_ns() < end) {
        const struct engine_view *v = engine_acquire(e);

        seen = runs_of(&v->hist, pid) > 0;
        samples = v->stats.samples;
        engine_release(v);
        if (!seen)
            sleep_ms(20);
    }
    ck_assert_msg(seen, "the engine never sampled pid %d", pid);
    return samples;
}

/* The engine watching c once c is ready and sampled; *pid (the engine's pid list) must
 * outlive the engine. */
static struct engine *watch_ready(struct ts_child *c, int *pid)
{
    struct engine *e;

    ck_assert(ts_child_wait_ready(c, "idle"));
    *pid = c->pid;
    e = watch(pid);
    wait_sampled(e, *pid);
    return e;
}

static bool same_runs(const struct hthread *a, const struct hthread *b)
{
    if (a->ident != b->ident || a->nruns != b->nruns || a->last != b->last || a->gone != b->gone)
        return false;
    for (size_t r = 0; r < a->nruns; r++)
        if (history_run(a, r)->stack != history_run(b, r)->stack ||
            history_run(a, r)->t0 != history_run(b, r)->t0 ||
            history_run(a, r)->t1 != history_run(b, r)->t1)
            return false;
    return true;
}

static bool same_series(const struct hseries *a, const struct hseries *b)
{
    return a->id == b->id && a->pid == b->pid && a->n == b->n && !strcmp(a->name, b->name) &&
           (!a->n || !memcmp(a->pts, b->pts, a->n * sizeof(*a->pts)));
}

/* Whether two histories record the same: tables, ranks, every thread's runs, every series. */
static bool same_history(const struct history *a, const struct history *b)
{
    if (a->nframes != b->nframes || a->nstacks != b->nstacks || a->nranks != b->nranks ||
        a->nseries != b->nseries || a->gen != b->gen)
        return false;
    for (size_t i = 0; i < a->nranks; i++) {
        const struct hrank *ra = &a->ranks[i], *rb = &b->ranks[i];

        if (ra->pid != rb->pid || ra->nthreads != rb->nthreads || ra->exited != rb->exited)
            return false;
        for (size_t k = 0; k < ra->nthreads; k++)
            if (!same_runs(&ra->threads[k], &rb->threads[k]))
                return false;
    }
    for (size_t i = 0; i < a->nseries; i++)
        if (!same_series(&a->series[i], &b->series[i]))
            return false;
    return true;
}

/* What a reader copies of a view to check later that it did not change. */
struct view_copy {
    struct engine_view shallow; /* every field but refs, pointers as they were */
    struct history hist;
    void *live, *devs, *hosts, *unread;
};

static void *dup(const void *p, size_t n)
{
    void *q = malloc(n ? n : 1);

    ck_assert_ptr_nonnull(q);
    if (n)
        memcpy(q, p, n);
    return q;
}

static void view_copy(const struct engine_view *v, struct view_copy *c)
{
    memcpy(&c->shallow, v, sizeof(*v));
    history_clone(&v->hist, &c->hist);
    c->live = dup(v->live, v->nlive * sizeof(*v->live));
    c->devs = dup(v->devs, v->ndevs * sizeof(*v->devs));
    c->hosts = dup(v->hosts, v->nhosts * sizeof(*v->hosts));
    c->unread = dup(v->unread, v->nunread * sizeof(*v->unread));
}

static void view_copy_fini(struct view_copy *c)
{
    history_fini(&c->hist);
    free(c->live);
    free(c->devs);
    free(c->hosts);
    free(c->unread);
}

/* v against the copy made when it was taken: nothing but refs may differ. */
static void assert_unchanged(const struct engine_view *v, const struct view_copy *c)
{
    size_t from = offsetof(struct engine_view, t);

    /* Everything after refs: the scalars, inline arrays, pointers and counts. The history
     * struct's own fields are compared there too (same arrays, same counts). */
    ck_assert_msg(
        !memcmp((const char *)v + from, (const char *)&c->shallow + from, sizeof(*v) - from),
        "a held view's fields changed");
    ck_assert_msg(same_history(&v->hist, &c->hist), "a held view's history changed");
    ck_assert(!v->nlive || !memcmp(v->live, c->live, v->nlive * sizeof(*v->live)));
    ck_assert(!v->ndevs || !memcmp(v->devs, c->devs, v->ndevs * sizeof(*v->devs)));
    ck_assert(!v->nhosts || !memcmp(v->hosts, c->hosts, v->nhosts * sizeof(*v->hosts)));
    ck_assert(!v->nunread || !memcmp(v->unread, c->unread, v->nunread * sizeof(*v->unread)));
}

/* Within the period the same view, no copy; after it a new one. */
START_TEST(test_shared_then_new)
{
    struct ts_child *c = ts_target_start(python, "exit_on_cue.py", NULL);
    size_t base = engine_view_count(), counted = 0;
    const struct engine_view *a, *b;
    struct engine *e;
    int pid;

    e = watch_ready(c, &pid);
    for (int i = 0; i < 50 && counted < 5; i++) {
        a = engine_acquire(e);
        b = engine_acquire(e);
        /* Both calls came before this clock read: if it is inside a's period, so were they. */
        if (clock_mono_ns() - a->t < ENGINE_VIEW_PERIOD_NS) {
            ck_assert_ptr_eq(a, b);
            counted++;
        }
        engine_release(b);
        engine_release(a);
        sleep_ms(30);
    }
    ts_info("%zu pairs inside the period", counted);
    ck_assert_msg(counted > 0, "no two acquires came within %llu ns of each other",
                  (unsigned long long)ENGINE_VIEW_PERIOD_NS);
    a = engine_acquire(e);
    sleep_ms(ENGINE_VIEW_PERIOD_NS / 1000000 + 50);
    b = engine_acquire_fresh(e);
    ck_assert_ptr_ne(a, b);
    ck_assert_uint_ge(b->t, a->t + ENGINE_VIEW_PERIOD_NS);
    /* a, b and the engine's own reference to b. */
    ck_assert_uint_eq(engine_view_count(), base + 2);
    engine_release(a);
    ck_assert_uint_eq(engine_view_count(), base + 1);
    engine_release(b);
    ck_assert_uint_eq(engine_view_count(), base + 1);
    engine_stop(e);
    engine_free(e);
    ck_assert_uint_eq(engine_view_count(), base);
}
END_TEST

/* A stale view is still handed out at once (no reader waits for a copy), and the call asks
 * the recorder for a new one, which a later call gets. */
START_TEST(test_stale_then_new)
{
    struct ts_child *c = ts_target_start(python, "exit_on_cue.py", NULL);
    uint64_t end = clock_mono_ns() + (uint64_t)DEADLINE_S * 1000000000u;
    const struct engine_view *a, *b, *n = NULL;
    struct engine *e;
    int pid;

    e = watch_ready(c, &pid);
    a = engine_acquire(e);
    sleep_ms(ENGINE_VIEW_PERIOD_NS / 1000000 + 50);
    /* Nobody asked since a was built: the published view is still a, now stale. */
    b = engine_acquire(e);
    ck_assert_ptr_eq(a, b);
    ck_assert_uint_ge(clock_mono_ns() - b->t, ENGINE_VIEW_PERIOD_NS);
    while (clock_mono_ns() < end) {
        n = engine_acquire(e);
        if (n != a)
            break;
        engine_release(n);
        n = NULL;
        sleep_ms(20);
    }
    ck_assert_msg(n, "no new view in %d s", DEADLINE_S);
    ck_assert_uint_ge(n->t, a->t + ENGINE_VIEW_PERIOD_NS);
    ck_assert_uint_ge(n->stats.samples, a->stats.samples);
    engine_release(n);
    engine_release(b);
    engine_release(a);
    engine_stop(e);
    engine_free(e);
}
END_TEST

/* A save's engine_acquire_fresh, or the build the monitor itself asked for, takes a while (the
 * recorder copies the whole history); the monitor's engine_acquire meanwhile still gets the
 * stale view at once, never waiting for that copy. The build is held back by holding the
 * engine lock (view_build takes it), so the monitor's call comes while it is under way. */
struct acquirer {
    struct engine *e;
    bool fresh;
    const struct engine_view *v;
    atomic_bool done;
};

static void *acquire_main(void *arg)
{
    struct acquirer *a = arg;

    a->v = a->fresh ? engine_acquire_fresh(a->e) : engine_acquire(a->e);
    atomic_store(&a->done, true);
    return NULL;
}

static bool wait_done(struct acquirer *a, long ms)
{
    for (long i = 0; i < ms / 10 && !atomic_load(&a->done); i++)
        sleep_ms(10);
    return atomic_load(&a->done);
}

START_TEST(test_no_wait_during_build)
{
    struct ts_child *c = ts_target_start(python, "exit_on_cue.py", NULL);
    struct acquirer save = {.fresh = true}, mon = {.fresh = false};
    pthread_t ts, tm;
    const struct engine_view *a;
    struct engine *e;
    bool dropped = false, got;
    int pid;

    e = watch_ready(c, &pid);
    save.e = mon.e = e;
    atomic_init(&save.done, false);
    atomic_init(&mon.done, false);
    a = engine_acquire(e); /* the monitor's frame, held until its next one */
    sleep_ms(ENGINE_VIEW_PERIOD_NS / 1000000 + 50);
    pthread_mutex_lock(&e->lock);
    ck_assert_int_eq(pthread_create(&ts, NULL, acquire_main, &save), 0);
    /* Until the save has asked for its view (or the published one went away). */
    for (int i = 0; i < 200 && !dropped; i++) {
        /* A try: view_lock is taken after the engine lock only here, against the engine's
         * order, and a try cannot deadlock (nor does TSan count it as an order). */
        if (pthread_mutex_trylock(&e->view_lock) == 0) {
            dropped = e->view != a || e->view_want;
            pthread_mutex_unlock(&e->view_lock);
        }
        if (!dropped)
            sleep_ms(10);
    }
    ck_assert_int_eq(pthread_create(&tm, NULL, acquire_main, &mon), 0);
    /* The monitor's call needs no lock the build holds: generous, it is not a timing. */
    got = wait_done(&mon, DEADLINE_S * 1000 / 4);
    ck_assert(!atomic_load(&save.done));
    pthread_mutex_unlock(&e->lock);
    pthread_join(tm, NULL);
    pthread_join(ts, NULL);
    ck_assert_msg(got, "engine_acquire waited for the save's copy");
    ck_assert_ptr_eq(mon.v, a);
    ck_assert_uint_ge(save.v->t, a->t + ENGINE_VIEW_PERIOD_NS);
    engine_release(mon.v);
    engine_release(save.v);
    engine_release(a);
    engine_stop(e);
    engine_free(e);
}
END_TEST

/* engine_release_later leaves the freeing of a replaced view to the recorder thread, at its
 * next build; after engine_stop it frees at once. */
START_TEST(test_release_later)
{
    struct ts_child *c = ts_target_start(python, "exit_on_cue.py", NULL);
    uint64_t end = clock_mono_ns() + (uint64_t)DEADLINE_S * 1000000000u;
    const struct engine_view *a, *n = NULL;
    size_t base = engine_view_count(), before;
    struct engine *e;
    int pid;

    e = watch_ready(c, &pid);
    a = engine_acquire(e);
    while (clock_mono_ns() < end && (!n || n == a)) { /* until the engine replaced a */
        engine_release(n);
        sleep_ms(50);
        n = engine_acquire(e);
    }
    ck_assert_ptr_ne(n, a);
    engine_release(n);
    before = engine_view_count(); /* a, the engine's view and no other */
    engine_release_later(e, a);
    /* Each acquire of a stale view asks for a build; the one after it frees a. */
    while (clock_mono_ns() < end && engine_view_count() >= before) {
        sleep_ms(150);
        engine_release_later(e, engine_acquire(e));
    }
    ck_assert_uint_lt(engine_view_count(), before);
    engine_stop(e);
    a = engine_acquire(e);
    engine_release_later(e, a); /* no recorder: freed here, with what it still held */
    ck_assert_uint_eq(engine_view_count(), base + 1); /* the engine's own */
    engine_free(e);
    ck_assert_uint_eq(engine_view_count(), base);
}
END_TEST

/* A held view stays as taken while the engine samples on, and outlives the engine. */
START_TEST(test_held_view_unchanged)
{
    struct ts_child *c = ts_target_start(python, "exit_on_cue.py", NULL);
    uint64_t end = clock_mono_ns() + (uint64_t)DEADLINE_S * 1000000000u;
    size_t base = engine_view_count();
    const struct engine_view *held, *now = NULL;
    struct view_copy copy;
    struct engine *e;
    bool moved = false;
    int pid;

    e = watch_ready(c, &pid);
    held = engine_acquire(e);
    view_copy(held, &copy);
    /* Until a newer view shows more passes and another history: the engine moved on. */
    while (!moved && clock_mono_ns() < end) {
        sleep_ms(200);
        engine_release(now);
        now = engine_acquire(e);
        moved =
            now->stats.samples > held->stats.samples + 10 && !same_history(&now->hist, &held->hist);
        assert_unchanged(held, &copy);
    }
    ck_assert_msg(moved, "the engine recorded nothing new in %d s", DEADLINE_S);
    engine_release(now);
    /* After engine_stop a view is built anew, with the last samples, whatever its age. */
    now = engine_acquire(e);
    engine_stop(e);
    {
        const struct engine_view *last = engine_acquire(e);

        ck_assert_ptr_ne(last, now);
        ck_assert_uint_ge(last->stats.samples, now->stats.samples);
        engine_release(last);
    }
    engine_release(now);
    engine_free(e);
    assert_unchanged(held, &copy);
    ck_assert_uint_eq(runs_of(&held->hist, pid) > 0, true);
    ck_assert_uint_eq(engine_view_count(), base + 1);
    engine_release(held);
    ck_assert_uint_eq(engine_view_count(), base);
    view_copy_fini(&copy);
}
END_TEST

/* A view built by hand (benches, tests) is freed by its one release, arrays and all. */
START_TEST(test_hand_built)
{
    size_t base = engine_view_count();
    struct engine_view *v = engine_view_new();

    history_init(&v->hist, 1, 1, "here");
    history_rank(&v->hist, 42, 0, "");
    v->live = x_calloc(1, sizeof(*v->live));
    v->nlive = 1;
    v->native_keys = x_calloc(1, sizeof(int));
    v->native_keys[0] = 42;
    v->nnative = 1;
    ck_assert(engine_view_native_on(v, 42));
    ck_assert(!engine_view_native_on(v, 43));
    ck_assert_ptr_null(engine_view_native_error(v, 0));
    snprintf(v->native_err, sizeof(v->native_err), "cannot trace");
    v->native_err_key = 42;
    ck_assert_str_eq(engine_view_native_error(v, 0), "cannot trace");
    ck_assert_str_eq(engine_view_native_error(v, 42), "cannot trace");
    ck_assert_ptr_null(engine_view_native_error(v, 43));
    ck_assert_uint_eq(engine_view_count(), base + 1);
    engine_release(v);
    engine_release(NULL);
    ck_assert_uint_eq(engine_view_count(), base);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("view_publish");
    struct ts_pylist l;
    TCase *tc = tcase_create("hand");
    int rc;

    tcase_add_test(tc, test_hand_built);
    suite_add_tcase(s, tc);
    ts_pythons_discover(&l, 99, false);
    if (l.n == 0)
        fprintf(stderr, "check_view_publish: no python3; engine cases skipped\n");
    if (l.n) {
        python = l.v[l.n - 1].path;
        ts_add_case(s, "shared_then_new", test_shared_then_new, 4 * DEADLINE_S);
        ts_add_case(s, "stale_then_new", test_stale_then_new, 4 * DEADLINE_S);
        ts_add_case(s, "held_view_unchanged", test_held_view_unchanged, 4 * DEADLINE_S);
        ts_add_case(s, "no_wait_during_build", test_no_wait_during_build, 4 * DEADLINE_S);
        ts_add_case(s, "release_later", test_release_later, 4 * DEADLINE_S);
    }
    rc = ts_run(s);
    ts_pylist_free(&l);
    return rc;
}
