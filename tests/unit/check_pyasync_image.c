/* The 3.14 asyncio task reader (collectors/python/pyasync14.c) on memory images of 3.14.0 and
 * 3.14.5 processes (pyimage314.h, the images the stack reader is tested on), with the _asyncio
 * module's _AsyncioDebug, the _PyThreadStateImpl task lists and TaskObj / coroutine objects
 * laid out as the 3.14 sources place them: two threads, a running task awaiting another task, a
 * task with a non-ASCII name whose coroutine awaits a nested coroutine, a task awaited by a set of
 * two, and a task named by its number on the interpreter's list (its thread exited). A list torn
 * under the read or a garbled _AsyncioDebug must be refused, never reported. */
#include "pyasync_priv.h"
#include "pyimage314.h"
#include "ranktop/python/pyasync.h"
#include "tsupport.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

enum {
    ADBG = 0xA00000,
    TYPES = 0xB00000, /* Task, coroutine, str, int: 0x1000 apart */
    TASKS = 0xC00000, /* T1..T4: 0x1000 apart */
    COROS = 0xD00000, /* C1..C4: 0x1000 apart */
    SET = 0xE00000,
    SETTAB = 0xE01000,
    INTNAME = 0xE02000,
    TS_LOOP = 840, /* _PyThreadStateImpl, after the 824 bytes of PyThreadState */
    TS_TASK = 848,
    TS_HEAD = 856,
    IS_HEAD = 8000,
    T_NODE = 152,
};

#define T(i) (TASKS + 0x1000 * (uint64_t)(i))
#define C(i) (COROS + 0x1000 * (uint64_t)(i))
#define TYPE(i) (TYPES + 0x1000 * (uint64_t)(i))
#define NODE(i) (T(i) + T_NODE)

static void add_type(struct rmem *m, int i, const char *name)
{
    uint8_t t[264] = {0};
    char n[40] = {0};

    put64(t, 24, TYPE(i) + 0x800);
    strncpy(n, name, sizeof(n) - 1);
    rmem_image_add(m, TYPE(i), t, sizeof(t));
    rmem_image_add(m, TYPE(i) + 0x800, n, sizeof(n));
}

static uint64_t typed(struct img *im, uint64_t obj, int type)
{
    uint64_t t = TYPE(type);

    rmem_image_write(im->m, obj + 8, &t, 8);
    return obj;
}

/* A TaskObj of 3.14 (GIL build): awaited_by 96, fut_state 104, is_task 108, awaited_by_is_set
 * 109, coro 128, name 136, task_node 152 {next, prev}. */
static void add_task(struct rmem *m, int i, uint64_t name, uint64_t coro, uint64_t ab, int ab_set,
                     uint64_t next, uint64_t prev)
{
    uint8_t t[168] = {0};

    put64(t, 8, TYPE(0));
    put64(t, 96, ab);
    t[108] = 1;
    t[109] = (uint8_t)ab_set;
    put64(t, 128, coro);
    put64(t, 136, name);
    put64(t, T_NODE, next);
    put64(t, T_NODE + 8, prev);
    rmem_image_add(m, T(i), t, sizeof(t));
}

/* A coroutine: gi_frame_state 67, gi_iframe 72 (executable +0, instr_ptr +56, stackpointer
 * +64, owner +74, localsplus +80); awaited (when state is -1) is the top of its stack. */
static void add_coro(struct rmem *m, int i, uint64_t code, long q, int state, uint64_t awaited)
{
    uint8_t c[256] = {0};

    put64(c, 8, TYPE(1));
    c[67] = (uint8_t)(int8_t)state;
    put64(c, 72, code | 1);
    put64(c, 72 + 56, code + 208 + (uint64_t)q);
    c[72 + 74] = 1;
    if (awaited) {
        put64(c, 152, awaited);
        put64(c, 72 + 64, C(i) + 160);
    }
    rmem_image_add(m, C(i), c, sizeof(c));
}

static void put_asyncio_debug(struct rmem *m)
{
    const uint64_t v[13] = {168,  136,     96,  108,     109,     128,    T_NODE,
                            8192, IS_HEAD, 880, TS_LOOP, TS_TASK, TS_HEAD};
    uint8_t b[PYASYNC_DEBUG_BYTES];

    for (int i = 0; i < 13; i++)
        put64(b, 8 * (size_t)i, v[i]);
    rmem_image_add(m, ADBG, b, sizeof(b));
}

static void put_head(struct rmem *m, uint64_t head, uint64_t next, uint64_t prev)
{
    uint64_t n[2] = {next, prev};

    rmem_image_write(m, head, n, sizeof(n));
}

/* The 3.14 slots the chain reads from _Py_DebugOffsets: interpreter_frame.localsplus and
 * .stackpointer, gen_object {size, gi_name, gi_iframe, gi_frame_state}. */
static void put_gen_offsets(struct rmem *m)
{
    const uint64_t fr[3] = {80, 74, 64}, gen[4] = {160, 24, 72, 67};

    rmem_image_write(m, RUNTIME + 280, fr, sizeof(fr));
    rmem_image_write(m, RUNTIME + 664, gen, sizeof(gen));
}

static struct img *async_image(const struct variant *v)
{
    static const uint16_t zadacha[] = {0x0417, 0x0430, 0x0434, 0x0430, 0x0447, 0x0430, 0xDF};
    struct img *im = img_new(v);
    struct rmem *m = im->m;
    uint64_t file = add_ascii(im, "/job/serve.py");
    uint64_t c_main = add_code(im, 5, add_ascii(im, "main"), add_ascii(im, "main"), file, 100);
    uint64_t c_fetch =
        add_code(im, 6, add_ascii(im, "fetch"), add_ascii(im, "Client.fetch"), file, 120);
    uint64_t c_recv = add_code(im, 7, add_ascii(im, "recv"), add_ascii(im, "recv"), file, 140);
    uint64_t c_work = add_code(im, 8, add_ascii(im, "work"), add_ascii(im, "work"), file, 160);
    uint64_t n1 = typed(im, add_ascii(im, "main"), 2);
    uint64_t n2 = typed(im, add_str(im, zadacha, 7, 2), 2);
    uint64_t n3 = typed(im, add_ascii(im, "worker"), 2);
    uint8_t num[96] = {0}, set[48] = {0}, tab[128] = {0};
    uint64_t tsf[3] = {0x7e0000, T(1), 0};

    add_type(m, 0, "_asyncio.Task");
    add_type(m, 1, "coroutine");
    add_type(m, 2, "str");
    add_type(m, 3, "int");
    put64(num, 8, TYPE(3));
    put64(num, 16, 1 << 3); /* one digit, positive */
    put32(num, 24, 7);
    rmem_image_add(m, INTNAME, num, sizeof(num));
    put64(set, 16, 2);
    put64(set, 24, 2);
    put64(set, 32, 7);
    put64(set, 40, SETTAB);
    rmem_image_add(m, SET, set, sizeof(set));
    put64(tab, 2 * 16, T(1));
    put64(tab, 2 * 16 + 8, 11);
    put64(tab, 5 * 16, T(2));
    put64(tab, 5 * 16 + 8, 12);
    rmem_image_add(m, SETTAB, tab, sizeof(tab));
    add_coro(m, 1, c_main, 32, -1, T(2) | 1); /* main awaits task T2 (a tagged stack ref) */
    add_coro(m, 2, c_fetch, 16, -1, C(3));    /* fetch awaits the coroutine recv */
    add_coro(m, 3, c_recv, 48, -2, 0);        /* recv: suspended in a plain yield */
    add_coro(m, 4, c_work, 0, -2, 0);
    add_task(m, 1, n1, C(1), 0, 0, NODE(2), TS1 + TS_HEAD);
    add_task(m, 2, n2, C(2), T(1), 0, TS1 + TS_HEAD, NODE(1));
    add_task(m, 3, n3, C(4), SET, 1, TS2 + TS_HEAD, TS2 + TS_HEAD);
    add_task(m, 4, INTNAME, 0, 0, 0, INTERP + IS_HEAD, INTERP + IS_HEAD);
    put_head(m, TS1 + TS_HEAD, NODE(1), NODE(2));
    put_head(m, TS2 + TS_HEAD, NODE(3), NODE(3));
    put_head(m, INTERP + IS_HEAD, NODE(4), NODE(4));
    rmem_image_write(m, TS1 + TS_LOOP, tsf, 16); /* a loop runs T1 */
    /* A task's thread is the one running its loop (FutureObj's fut_loop, after the header):
     * T1 and T2 of TS1's loop, T3 of TS2's, T4 of a loop that no thread runs. */
    rmem_image_write(m, TS2 + TS_LOOP, (uint64_t[]){0x7e1000}, 8);
    for (int i = 1; i <= 4; i++)
        rmem_image_write(m, T(i) + 16,
                         (uint64_t[]){i <= 2   ? 0x7e0000
                                      : i == 3 ? 0x7e1000
                                               : 0x7e2000},
                         8);
    put_asyncio_debug(m);
    put_gen_offsets(m);
    return im;
}

static struct pyproc *async_open(struct img *im, const struct variant *v)
{
    struct app_err err = {0};
    int rc;
    struct pyproc *p = img_open(im, v->version, &rc, &err);

    ck_assert_msg(rc == 0, "open failed: %s", err.msg);
    p->asyncio_dbg = ADBG;
    return p;
}

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

/* 3.14.0 and 3.14.5, whose interpreter state moved (the values come from the target). */
START_TEST(tasks_3140)
{
    const struct variant *v = _i ? &v3145 : &v3140;
    struct img *im = async_image(v);
    struct pyproc *p = async_open(im, v);
    struct pyasync_list l;
    struct app_err err = {0};
    const struct pyasync_task *t1, *t2, *t3, *t4;
    const char *z = "\xd0\x97\xd0\xb0\xd0\xb4\xd0\xb0\xd1\x87\xd0\xb0\xc3\x9f"; /* Задачаß */

    ck_assert_msg(pyasync_read(p, &l, &err) == 0, "read failed: %s", err.msg);
    ck_assert_uint_eq(l.n, 4);
    t1 = by_name(&l, "main");
    t2 = by_name(&l, z);
    t3 = by_name(&l, "worker");
    t4 = by_name(&l, "Task-7");
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
    ck_assert(awaited_by(&l, t2, "main"));
    ck_assert_uint_eq(t3->nawaited_by, 2);
    ck_assert(awaited_by(&l, t3, "main") && awaited_by(&l, t3, z));
    pyasync_free(&l);
    pyproc_free(p);
    img_free(im);
}
END_TEST

/* Reads with one thing broken in the image: must fail with `want`, no tasks. */
static void check_refused(uint64_t addr, const void *data, size_t len, int want, const char *msg)
{
    struct img *im = async_image(&v3140);
    struct pyproc *p = async_open(im, &v3140);
    struct pyasync_list l;
    struct app_err err = {0};

    ck_assert_int_eq(rmem_image_write(p->mem, addr, data, len), 0);
    ck_assert_int_eq(pyasync_read(p, &l, &err), want);
    ck_assert_uint_eq(l.n, 0);
    ck_assert_msg(strstr(err.msg, msg) != NULL, "message: %s", err.msg);
    pyproc_free(p);
    img_free(im);
}

START_TEST(torn_and_garbled_refused)
{
    uint64_t v;

    v = NODE(2); /* T2's prev no longer T1's node: the list changed under the read */
    check_refused(NODE(2) + 8, &v, 8, APP_E_STALE, "asyncio tasks");
    v = 0x7ff000000000; /* T1's next into unmapped memory */
    check_refused(NODE(1), &v, 8, APP_E_STALE, "asyncio tasks");
    v = NODE(1); /* a loop T1 -> T1 that never returns to the head */
    check_refused(NODE(1), &v, 8, APP_E_STALE, "asyncio tasks");
    v = 5; /* fut_state out of range */
    check_refused(T(3) + 104, &v, 4, APP_E_STALE, "asyncio tasks");
    v = 100; /* task_is_task not after awaited_by and fut_state: a layout not known */
    check_refused(ADBG + 24, &v, 8, APP_E_VERSION, "3.14.0");
    v = 1000; /* gi_iframe beyond any coroutine */
    check_refused(RUNTIME + 680, &v, 8, APP_E_VERSION, "3.14.0");
}
END_TEST

/* The caps: TS1's list runs on with 1500 more tasks of its own loop and 1200 of a loop no
 * thread runs (one region, 0x100 apart). TS1's loop thread keeps 1000 of its 1502 (T1 and T2
 * first), the tasks of loops no thread runs 1000 of their 1201 (the first walked: T4, on the
 * interpreter's list walked last, is left out), TS2 its T3; the other 703 are counted as not
 * read. */
#define MANY 0x10000000u
#define MANY_OWN 1500
#define MANY_IDLE 1200
#define M_NODE(i) (MANY + 0x100 * (uint64_t)(i) + T_NODE)

START_TEST(caps)
{
    const size_t nm = MANY_OWN + MANY_IDLE;
    struct img *im = async_image(&v3140);
    uint64_t name = typed(im, add_ascii(im, "many"), 2);
    uint8_t *b = calloc(nm, 0x100);
    struct pyproc *p;
    struct pyasync_list l;
    struct app_err err = {0};
    size_t own = 0, idle = 0;

    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < nm; i++) {
        uint8_t *t = b + 0x100 * i;

        put64(t, 8, TYPE(0));
        put64(t, 16, i < MANY_OWN ? 0x7e0000 : 0x7e2000);
        t[108] = 1;
        put64(t, 136, name);
        put64(t, T_NODE, i + 1 < nm ? M_NODE(i + 1) : TS1 + TS_HEAD);
        put64(t, T_NODE + 8, i ? M_NODE(i - 1) : NODE(2));
    }
    rmem_image_add(im->m, MANY, b, nm * 0x100);
    free(b);
    ck_assert_int_eq(rmem_image_write(im->m, NODE(2), (uint64_t[]){M_NODE(0)}, 8), 0);
    put_head(im->m, TS1 + TS_HEAD, NODE(1), M_NODE(nm - 1));
    p = async_open(im, &v3140);
    ck_assert_msg(pyasync_read(p, &l, &err) == 0, "read failed: %s", err.msg);
    for (size_t i = 0; i < l.n; i++) {
        own += l.tasks[i].thread == 0x7f0000001000;
        idle += l.tasks[i].thread == 0;
    }
    ck_assert_uint_eq(own, PYASYNC_THREAD_TASKS);
    ck_assert_uint_eq(idle, PYASYNC_THREAD_TASKS);
    ck_assert_uint_eq(l.n, 2 * PYASYNC_THREAD_TASKS + 1);
    ck_assert_uint_eq(l.not_read, MANY_OWN + MANY_IDLE + 4 - l.n);
    ck_assert_int_eq(by_name(&l, "main")->state, PYASYNC_RUNNING);
    for (size_t i = 0; i < l.n; i++)
        ck_assert_str_ne(l.tasks[i].name, "Task-7");
    ck_assert_uint_eq(by_name(&l, "worker")->nawaited_by, 2);
    pyasync_free(&l);
    pyproc_free(p);
    img_free(im);
}
END_TEST

/* No _AsyncioDebug found (asyncio not imported) is no tasks. (3.15 and the free-threaded
 * builds: check_pyasync_layouts.) */
START_TEST(not_loaded)
{
    struct img *im = async_image(&v3140);
    struct pyproc *p = async_open(im, &v3140);
    struct pyasync_list l;
    struct app_err err = {0};

    p->asyncio_dbg = 0;
    ck_assert_int_eq(pyasync_read(p, &l, &err), 0);
    ck_assert_uint_eq(l.n, 0);
    pyproc_free(p);
    img_free(im);
}
END_TEST

START_TEST(debug_parse)
{
    const uint64_t good[13] = {168, 136, 96, 108, 109, 128, 152, 8192, 8000, 880, 840, 848, 856};
    uint8_t b[PYASYNC_DEBUG_BYTES];
    struct pyasync_debug d;

    for (int i = 0; i < 13; i++)
        put64(b, 8 * (size_t)i, good[i]);
    ck_assert_int_eq(pyasync_debug_parse(b, &d), 0);
    ck_assert_uint_eq(d.t_state, 104);
    ck_assert_uint_eq(d.t_node, 152);
    ck_assert_uint_eq(d.ts_head, 856);
    put64(b, 48, 160); /* task_node's two pointers past the end of the object */
    ck_assert_int_eq(pyasync_debug_parse(b, &d), APP_E_VERSION);
    put64(b, 48, 152);
    put64(b, 96, 880); /* the thread's list head past the end of the thread state */
    ck_assert_int_eq(pyasync_debug_parse(b, &d), APP_E_VERSION);
    put64(b, 96, 856);
    put64(b, 0, 1 << 20); /* an implausible TaskObj size */
    ck_assert_int_eq(pyasync_debug_parse(b, &d), APP_E_VERSION);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pyasync_image");
    TCase *tc = tcase_create("3.14");

    tcase_add_loop_test(tc, tasks_3140, 0, 2);
    tcase_add_test(tc, torn_and_garbled_refused);
    tcase_add_test(tc, caps);
    tcase_add_test(tc, not_loaded);
    tcase_add_test(tc, debug_parse);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ts_run(suite());
}
