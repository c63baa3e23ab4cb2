/* The asyncio task reader of 3.14+ (collectors/python/pyasync14.c) on memory images of
 * CPythons that are not installed here (pyimage_layouts.h): 3.15 as released and its 3.15.0a8
 * pre-release (the awaited object under a NULL, stackpointer[-2]), a 3.15.0a7 of the alpha
 * _Py_DebugOffsets shape (stackpointer[-1], frame states already renumbered), and the
 * free-threaded 3.14t and 3.15t (32-byte object headers: TaskObj, types, sets and ints move;
 * a coroutine running its thread's copy of the bytecode; 3.15t's SUSPENDED_YIELD_FROM_LOCKED).
 * _AsyncioDebug, the _PyThreadStateImpl task lists, TaskObj and the coroutines are laid out as
 * the 3.14/3.15 sources place them (TaskObj: FutureObj_HEAD's awaited_by, fut_state, is_task,
 * awaited_by_is_set, then fut_waiter, coro, name, context, task_node; free-threaded task_tid
 * after it), the generator and frame offsets come from the image's _Py_DebugOffsets: two
 * threads, a running task awaiting another task, a task with a non-ASCII name whose coroutine
 * awaits a nested coroutine, a task awaited by a set of two, and a task named by its number on
 * the interpreter's list (its thread exited). Earlier 3.15 alphas and 3.13t are refused by
 * name; torn lists, a frame state of the wrong numbering and garbled offsets are refused, never
 * reported. */
#include "pyasync_priv.h"
#include "pyimage_layouts.h"
#include "ranktop/python/pyasync.h"
#include "tsupport.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

enum {
    ADBG = 0xB00000,
    TYPES = 0xB10000, /* Task, coroutine, str, int: 0x1000 apart */
    TASKS = 0xC00000, /* T1..T4: 0x1000 apart */
    COROS = 0xD00000, /* C1..C4: 0x1000 apart */
    SET = 0xE00000,
    SETTAB = 0xE01000,
    INTNAME = 0xE02000,
    TS_LOOP = 840, /* _PyThreadStateImpl, after PyThreadState */
    TS_TASK = 848,
    TS_HEAD = 856,
    TS_IMPL = 880,
    IS_AHEAD = 8000, /* PyInterpreterState.asyncio_tasks_head */
};

#define T(i) (TASKS + 0x1000 * (uint64_t)(i))
#define C(i) (COROS + 0x1000 * (uint64_t)(i))
#define TYPE(i) (TYPES + 0x1000 * (uint64_t)(i))

/* How one image differs: its target, version, await slot and frame-state numbering. */
struct acase {
    const struct target *t;
    uint32_t version;
    const char *vtext;
    int depth;          /* the awaited object is stackpointer[-depth] */
    int8_t yf, susp;    /* SUSPENDED_YIELD_FROM, SUSPENDED */
    int8_t fetch_state; /* fetch's state: yf, or (3.15t) SUSPENDED_YIELD_FROM_LOCKED */
};

/* The object header grows by 16 bytes in free-threaded builds. */
static uint64_t SH(const struct img *im)
{
    return im->t->ft ? 16 : 0;
}

/* TaskObj: awaited_by, fut_state (+8), is_task (+12), awaited_by_is_set (+13); then
 * fut_waiter, coro, name, context, task_node {next, prev}; free-threaded: task_tid. */
static uint64_t t_node(const struct img *im)
{
    return 152 + SH(im);
}

static void add_type(struct img *im, int i, const char *name)
{
    uint8_t t[300] = {0};
    char n[40] = {0};

    put64(t, 24 + SH(im), TYPE(i) + 0x800); /* tp_name; tp_base (256) stays NULL */
    strncpy(n, name, sizeof(n) - 1);
    rmem_image_add(im->m, TYPE(i), t, sizeof(t));
    rmem_image_add(im->m, TYPE(i) + 0x800, n, sizeof(n));
}

static uint64_t typed(struct img *im, uint64_t obj, int type)
{
    uint64_t t = TYPE(type);

    rmem_image_write(im->m, obj + V(im, OB_TYPE), &t, 8);
    return obj;
}

static void add_task(struct img *im, int i, uint64_t name, uint64_t coro, uint64_t ab, int ab_set,
                     uint64_t next, uint64_t prev)
{
    uint8_t t[256] = {0};
    uint64_t sh = SH(im);

    put64(t, V(im, OB_TYPE), TYPE(0));
    put64(t, 96 + sh, ab);
    t[108 + sh] = 1;
    t[109 + sh] = (uint8_t)ab_set;
    put64(t, 128 + sh, coro);
    put64(t, 136 + sh, name);
    put64(t, t_node(im), next);
    put64(t, t_node(im) + 8, prev);
    if (im->t->ft)
        put64(t, t_node(im) + 16, 0x7f0000001000); /* task_tid */
    rmem_image_add(im->m, T(i), t, sizeof(t));
}

/* A coroutine at offset q of code, in state `state`; awaited (when not 0) lies depth slots
 * under the stackpointer, a NULL above it when depth is 2. thread_copy: the frame runs its
 * thread's copy of the bytecode (free-threaded, tlbc_index 1). */
static void add_coro(struct img *im, const struct acase *k, int i, uint64_t code, long q,
                     int8_t state, uint64_t awaited, bool thread_copy)
{
    uint8_t c[256] = {0};
    uint64_t fr = V(im, GEN_IFRAME), lp = fr + V(im, FR_LP);
    uint64_t base = code + V(im, CO_ADAPT);

    if (thread_copy) {
        base = TLBC + (code - CODES) + 0x100;
        put32(c, fr + V(im, FR_TLBC), 1);
    }
    put64(c, V(im, OB_TYPE), TYPE(1));
    c[V(im, GEN_STATE)] = (uint8_t)state;
    put64(c, fr + V(im, FR_EXEC), code | 1);
    put64(c, fr + V(im, FR_INSTR), base + (uint64_t)q);
    c[fr + V(im, FR_OWNER)] = 1;
    put64(c, fr + V(im, FR_SP), C(i) + lp + 8); /* one value on its stack */
    if (awaited) {
        put64(c, lp, awaited);
        put64(c, lp + 8, 0);
        put64(c, fr + V(im, FR_SP), C(i) + lp + 8 * (uint64_t)k->depth);
    }
    rmem_image_add(im->m, C(i), c, sizeof(c));
}

static void put_asyncio_debug(struct img *im)
{
    uint64_t sh = SH(im);
    const uint64_t v[13] = {im->t->ft ? 192 : 168,
                            136 + sh,
                            96 + sh,
                            108 + sh,
                            109 + sh,
                            128 + sh,
                            t_node(im),
                            8192,
                            IS_AHEAD,
                            TS_IMPL,
                            TS_LOOP,
                            TS_TASK,
                            TS_HEAD};
    uint8_t b[PYASYNC_DEBUG_BYTES];

    for (int i = 0; i < 13; i++)
        put64(b, 8 * (size_t)i, v[i]);
    rmem_image_add(im->m, ADBG, b, sizeof(b));
}

static void put_head(struct img *im, uint64_t head, uint64_t next, uint64_t prev)
{
    uint64_t n[2] = {next, prev};

    rmem_image_write(im->m, head, n, sizeof(n));
}

/* The set {T1, T2} and the int 7 (one 30-bit digit), with their headers' growth. */
static void add_set_and_int(struct img *im)
{
    uint8_t num[96] = {0}, set[80] = {0}, tab[128] = {0};
    uint64_t sh = SH(im);

    put64(num, V(im, OB_TYPE), TYPE(3));
    put64(num, 16 + sh, 1 << 3);
    put32(num, 24 + sh, 7);
    rmem_image_add(im->m, INTNAME, num, sizeof(num));
    put64(set, 16 + sh, 2); /* fill, used, mask, table */
    put64(set, 24 + sh, 2);
    put64(set, 32 + sh, 7);
    put64(set, 40 + sh, SETTAB);
    rmem_image_add(im->m, SET, set, sizeof(set));
    put64(tab, 2 * 16, T(1));
    put64(tab, 2 * 16 + 8, 11);
    put64(tab, 5 * 16, T(2));
    put64(tab, 5 * 16 + 8, 12);
    rmem_image_add(im->m, SETTAB, tab, sizeof(tab));
}

static struct img *async_image(const struct acase *k, struct target *tv)
{
    static const uint16_t zadacha[] = {0x0417, 0x0430, 0x0434, 0x0430, 0x0447, 0x0430, 0xDF};
    struct img *im;
    uint64_t file, c_main, c_fetch, c_recv, c_work, n1, n2, n3;
    uint64_t tsf[2] = {0x7e0000, T(1)};

    *tv = *k->t;
    tv->version = k->version;
    im = img_new(tv);
    file = add_ascii(im, "/job/serve.py");
    c_main = add_code(im, 5, add_ascii(im, "main"), add_ascii(im, "main"), file, 100);
    c_fetch = add_code(im, 6, add_ascii(im, "fetch"), add_ascii(im, "Client.fetch"), file, 120);
    c_recv = add_code(im, 7, add_ascii(im, "recv"), add_ascii(im, "recv"), file, 140);
    c_work = add_code(im, 8, add_ascii(im, "work"), add_ascii(im, "work"), file, 160);
    n1 = typed(im, add_ascii(im, "main"), 2);
    n2 = typed(im, add_str(im, zadacha, 7, 2), 2);
    n3 = typed(im, add_ascii(im, "worker"), 2);
    add_type(im, 0, "_asyncio.Task");
    add_type(im, 1, "coroutine");
    add_type(im, 2, "str");
    add_type(im, 3, "int");
    add_set_and_int(im);
    add_coro(im, k, 1, c_main, 32, k->yf, T(2) | 1, false); /* awaits task T2 (tagged ref) */
    add_coro(im, k, 2, c_fetch, 16, k->fetch_state, C(3), false);
    add_coro(im, k, 3, c_recv, 48, k->susp, 0, im->t->ft); /* a plain yield */
    add_coro(im, k, 4, c_work, 0, k->susp, 0, false);
    add_task(im, 1, n1, C(1), 0, 0, T(2) + t_node(im), TS1 + TS_HEAD);
    add_task(im, 2, n2, C(2), T(1), 0, TS1 + TS_HEAD, T(1) + t_node(im));
    add_task(im, 3, n3, C(4), SET, 1, TS2 + TS_HEAD, TS2 + TS_HEAD);
    add_task(im, 4, INTNAME, 0, 0, 0, INTERP + IS_AHEAD, INTERP + IS_AHEAD);
    put_head(im, TS1 + TS_HEAD, T(1) + t_node(im), T(2) + t_node(im));
    put_head(im, TS2 + TS_HEAD, T(3) + t_node(im), T(3) + t_node(im));
    put_head(im, INTERP + IS_AHEAD, T(4) + t_node(im), T(4) + t_node(im));
    rmem_image_write(im->m, TS1 + TS_LOOP, tsf, 16); /* a loop runs T1 */
    /* A task's thread is the one running its loop (FutureObj's fut_loop, after the header):
     * T1 and T2 of TS1's loop, T3 of TS2's, T4 of a loop that no thread runs. */
    rmem_image_write(im->m, TS2 + TS_LOOP, (uint64_t[]){0x7e1000}, 8);
    for (int i = 1; i <= 4; i++)
        rmem_image_write(im->m, T(i) + 16 + SH(im),
                         (uint64_t[]){i <= 2   ? 0x7e0000
                                      : i == 3 ? 0x7e1000
                                               : 0x7e2000},
                         8);
    put_asyncio_debug(im);
    return im;
}

static struct pyproc *async_open(const struct acase *k, struct img *im)
{
    struct app_err err = {0};
    int rc;
    struct pyproc *p = img_open(im, k->version, &rc, &err);

    ck_assert_msg(rc == 0, "open failed: %s", err.msg);
    ck_assert_str_eq(pyproc_version(p), k->vtext);
    p->asyncio_dbg = ADBG;
    return p;
}

/* 3.14 numbering: CREATED -3, SUSPENDED -2, YIELD_FROM -1; 3.15: 0, 1, 2, LOCKED 3. */
static const struct acase k3150 = {&t3150, 0x030f00f0, "3.15.0", 2, 2, 1, 2};
static const struct acase k315a8 = {&t3150, 0x030f00a8, "3.15.0a8", 2, 2, 1, 2};
static const struct acase k315a7 = {&t315a, 0x030f00a7, "3.15.0a7", 1, 2, 1, 2};
static const struct acase k3140t = {&t3140t, 0x030e00f0, "3.14.0", 1, -1, -2, -1};
static const struct acase k3150t = {&t3150t, 0x030f00f0, "3.15.0", 2, 2, 1, 3};
static const struct acase *const cases[] = {&k3150, &k315a8, &k315a7, &k3140t, &k3150t};

static const struct pyasync_task *by_name(const struct pyasync_list *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->tasks[i].name, name) == 0)
            return &l->tasks[i];
    ck_abort_msg("no task %s", name);
    return NULL;
}

static void check_frame(const struct pyasync_task *t, size_t i, const char *fn, int line)
{
    ck_assert_uint_gt(t->nframes, i);
    ck_assert_str_eq(t->frames[i].function, fn);
    ck_assert_str_eq(t->frames[i].file, "/job/serve.py");
    ck_assert_int_eq(t->frames[i].line, line);
}

static bool awaited_by(const struct pyasync_list *l, const struct pyasync_task *t, const char *name)
{
    for (size_t i = 0; i < t->nawaited_by; i++)
        if (strcmp(l->tasks[t->awaited_by[i]].name, name) == 0)
            return true;
    return false;
}

static void check_tasks(const struct pyasync_list *l)
{
    const char *z = "\xd0\x97\xd0\xb0\xd0\xb4\xd0\xb0\xd1\x87\xd0\xb0\xc3\x9f"; /* Задачаß */
    const struct pyasync_task *t1 = by_name(l, "main"), *t2 = by_name(l, z);
    const struct pyasync_task *t3 = by_name(l, "worker"), *t4 = by_name(l, "Task-7");

    ck_assert_uint_eq(l->n, 4);
    ck_assert_int_eq(t1->state, PYASYNC_RUNNING);
    ck_assert_int_eq(t2->state, PYASYNC_PENDING);
    ck_assert_int_eq(t3->state, PYASYNC_PENDING);
    ck_assert_uint_eq(t1->thread, 0x7f0000001000);
    ck_assert_uint_eq(t2->thread, 0x7f0000001000);
    ck_assert_uint_eq(t3->thread, 0x7f0000002000);
    ck_assert_uint_eq(t4->thread, 0);
    /* main's chain ends at the task it awaits; fetch's goes on into recv, innermost first. */
    ck_assert_uint_eq(t1->nframes, 1);
    check_frame(t1, 0, "main", 103);
    ck_assert_uint_eq(t2->nframes, 2);
    check_frame(t2, 0, "recv", 144);
    check_frame(t2, 1, "Client.fetch", 122);
    ck_assert_uint_eq(t3->nframes, 1);
    check_frame(t3, 0, "work", 161);
    ck_assert_uint_eq(t4->nframes, 0);
    ck_assert_uint_eq(t1->nawaited_by, 0);
    ck_assert_uint_eq(t2->nawaited_by, 1);
    ck_assert(awaited_by(l, t2, "main"));
    ck_assert_uint_eq(t3->nawaited_by, 2);
    ck_assert(awaited_by(l, t3, "main") && awaited_by(l, t3, z));
}

START_TEST(tasks_on_every_layout)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct target tv;
        struct img *im = async_image(cases[i], &tv);
        struct pyproc *p = async_open(cases[i], im);
        struct pyasync_list l;
        struct app_err err = {0};

        ck_assert(p->L.free_threaded == cases[i]->t->ft);
        ck_assert_msg(pyasync_read(p, &l, &err) == 0, "%s: read failed: %s", cases[i]->vtext,
                      err.msg);
        check_tasks(&l);
        pyasync_free(&l);
        pyproc_free(p);
        free(im);
    }
}
END_TEST

/* The image's _Py_DebugOffsets slots of gen_object and the frame's localsplus/stackpointer,
 * placed by the header's field order, are where the reader's table looks for them. */
START_TEST(slots_where_the_reader_looks)
{
    const struct {
        const uint8_t *shape;
        size_t gen, lp, sp;
    } want[] = {
        {shape_314, 664, 280, 296}, {shape_315, 792, 344, 360}, {shape_315a, 728, 336, 352}};

    for (size_t i = 0; i < 3; i++)
        for (size_t s = 0; s < SHAPE_MAX; s++) {
            size_t at = 24 + 8 * s;

            if (want[i].shape[s] == GEN_SIZE)
                ck_assert_uint_eq(at, want[i].gen);
            if (want[i].shape[s] == FR_LP)
                ck_assert_uint_eq(at, want[i].lp);
            if (want[i].shape[s] == FR_SP)
                ck_assert_uint_eq(at, want[i].sp);
        }
}
END_TEST

/* Reads k's image with len bytes at addr overwritten: must fail with `want` and no tasks, the
 * message containing msg. */
static void check_refused(const struct acase *k, uint64_t addr, const void *data, size_t len,
                          int want, const char *msg)
{
    struct target tv;
    struct img *im = async_image(k, &tv);
    struct pyproc *p = async_open(k, im);
    struct pyasync_list l;
    struct app_err err = {0};

    if (len)
        ck_assert_int_eq(rmem_image_write(p->mem, addr, data, len), 0);
    ck_assert_int_eq(pyasync_read(p, &l, &err), want);
    ck_assert_uint_eq(l.n, 0);
    ck_assert_msg(strstr(err.msg, msg) != NULL, "message: %s", err.msg);
    pyproc_free(p);
    free(im);
}

START_TEST(torn_and_garbled_refused)
{
    const struct acase *ks[] = {&k3150t, &k3140t, &k3150};
    uint64_t node, v;
    int8_t s8;
    uint32_t idx = 9;

    for (size_t i = 0; i < 3; i++) {
        node = 152 + (ks[i]->t->ft ? 16 : 0);
        v = T(2) + node; /* T2's prev no longer T1's node: the list changed under the read */
        check_refused(ks[i], T(2) + node + 8, &v, 8, APP_E_STALE, "asyncio tasks");
        v = T(1) + node; /* a loop T1 -> T1 that never returns to the head */
        check_refused(ks[i], T(1) + node, &v, 8, APP_E_STALE, "asyncio tasks");
    }
    /* 3.14's SUSPENDED_YIELD_FROM (-1) in a 3.15 coroutine: a state 3.15 does not have. */
    s8 = -1;
    check_refused(&k3150, C(2) + ks[2]->t->v[GEN_STATE], &s8, 1, APP_E_STALE, "asyncio tasks");
    /* 3.15's SUSPENDED_YIELD_FROM_LOCKED (3) exists only in free-threaded builds. */
    s8 = 3;
    check_refused(&k3150, C(2) + ks[2]->t->v[GEN_STATE], &s8, 1, APP_E_STALE, "asyncio tasks");
    /* A coroutine whose embedded frame is not owned by a generator: not a coroutine's frame. */
    s8 = 0;
    check_refused(&k3150t, C(2) + 88 + 78, &s8, 1, APP_E_STALE, "asyncio tasks");
    /* A thread copy of the bytecode the code's array does not have. */
    check_refused(&k3150t, C(3) + 88 + 72, &idx, 4, APP_E_STALE, "asyncio tasks");
    /* gen_object.gi_iframe in _Py_DebugOffsets beyond any coroutine: a layout not known. */
    v = 1000;
    check_refused(&k3150t, RUNTIME + 792 + 16, &v, 8, APP_E_VERSION,
                  "CPython 3.15.0 (free-threaded): _AsyncioDebug or the generator offsets fit no "
                  "layout");
    /* _AsyncioDebug's task_is_task not after awaited_by and fut_state. */
    v = 100;
    check_refused(&k3140t, ADBG + 24, &v, 8, APP_E_VERSION, "CPython 3.14.0 (free-threaded)");
}
END_TEST

/* 3.15 pre-releases before 3.15.0a7 (frame states of an unknown numbering) and 3.13t
 * (registries behind free-threaded dicts and weak sets) are refused by name before any read. */
START_TEST(refused_by_name)
{
    const struct acase k315a3 = {&t315a, 0x030f00a3, "3.15.0a3", 1, 2, 1, 2};
    struct img *im = img_new(&t3130t);
    struct app_err err = {0};
    struct pyasync_list l;
    int rc;
    struct pyproc *p = img_open(im, t3130t.version, &rc, &err);

    check_refused(&k315a3, 0, NULL, 0, APP_E_VERSION,
                  "asyncio tasks: CPython 3.15.0a3: its coroutine frame states are not known to "
                  "this ranktop (3.15: 3.15.0a7 and later)");
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(pyasync_read(p, &l, &err), APP_E_VERSION);
    ck_assert_uint_eq(l.n, 0);
    ck_assert_str_eq(err.msg, "asyncio tasks: not supported on free-threaded 3.13 (its task "
                              "registries are dicts and weak sets of an unknown layout)");
    pyproc_free(p);
    free(im);
}
END_TEST

/* A finished task has no chain; a coroutine in the state CREATED (0 on 3.15, -3 on 3.14) awaits
 * nothing: its chain ends with it, whatever its stack holds. */
START_TEST(done_and_created)
{
    const struct acase *ks[] = {&k3150t, &k3140t, &k3150};

    for (size_t i = 0; i < 3; i++) {
        const char *z = "\xd0\x97\xd0\xb0\xd0\xb4\xd0\xb0\xd1\x87\xd0\xb0\xc3\x9f";
        struct target tv;
        struct img *im = async_image(ks[i], &tv);
        struct pyproc *p = async_open(ks[i], im);
        uint64_t sh = ks[i]->t->ft ? 16 : 0;
        int32_t done = 2;
        int8_t created = ks[i]->yf == 2 ? 0 : -3;
        struct pyasync_list l;
        struct app_err err = {0};
        const struct pyasync_task *t;

        rmem_image_write(p->mem, T(3) + 104 + sh, &done, 4);
        rmem_image_write(p->mem, C(2) + ks[i]->t->v[GEN_STATE], &created, 1);
        ck_assert_msg(pyasync_read(p, &l, &err) == 0, "read failed: %s", err.msg);
        t = by_name(&l, "worker");
        ck_assert_int_eq(t->state, PYASYNC_DONE);
        ck_assert_uint_eq(t->nframes, 0);
        t = by_name(&l, z);
        ck_assert_int_eq(t->state, PYASYNC_PENDING);
        ck_assert_uint_eq(t->nframes, 1);
        check_frame(t, 0, "Client.fetch", 122);
        pyasync_free(&l);
        pyproc_free(p);
        free(im);
    }
}
END_TEST

/* No _AsyncioDebug found (asyncio not imported): no tasks, on every layout. */
START_TEST(not_loaded)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct target tv;
        struct img *im = async_image(cases[i], &tv);
        struct pyproc *p = async_open(cases[i], im);
        struct pyasync_list l;
        struct app_err err = {0};

        p->asyncio_dbg = 0;
        ck_assert_int_eq(pyasync_read(p, &l, &err), 0);
        ck_assert_uint_eq(l.n, 0);
        pyproc_free(p);
        free(im);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pyasync_layouts");
    TCase *tc = tcase_create("3.15 and free-threaded");

    tcase_add_test(tc, tasks_on_every_layout);
    tcase_add_test(tc, slots_where_the_reader_looks);
    tcase_add_test(tc, torn_and_garbled_refused);
    tcase_add_test(tc, refused_by_name);
    tcase_add_test(tc, done_and_created);
    tcase_add_test(tc, not_loaded);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ts_run(suite());
}
