/* The pure decoders of the asyncio task reader (collectors/python/pyasync.c) on hand-made
 * buffers: a set's header and table (the WeakSet's data set and the eager-task set), and one
 * step of a coroutine chain for every supported layout (3.8/3.9 f_stacktop, 3.10 f_state and
 * f_stackdepth, 3.11-3.13 the frame embedded in the coroutine). Torn or implausible copies must
 * be refused (APP_E_STALE), never decoded into a wrong awaited-object address; unknown versions
 * and free-threaded builds are refused in one line. (The whole
 * reader runs against real interpreters in tests/e2e/dump_async.sh.) */
#include "pyasync_priv.h"
#include "pyproc_priv.h"
#include "ranktop/python/pyasync.h"
#include "ranktop/base/bytes.h"
#include "tsupport.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static void put64(uint8_t *b, size_t off, uint64_t v)
{
    memcpy(b + off, &v, 8);
}

static void put32(uint8_t *b, size_t off, int32_t v)
{
    memcpy(b + off, &v, 4);
}

static void set_hdr(uint8_t *h, int64_t fill, int64_t used, uint64_t mask, uint64_t table)
{
    memset(h, 0, PYASYNC_SET_HDR);
    put64(h, 16, (uint64_t)fill);
    put64(h, 24, (uint64_t)used);
    put64(h, 32, mask);
    put64(h, 40, table);
}

START_TEST(set_header_checks)
{
    uint8_t h[PYASYNC_SET_HDR];
    struct pyasync_set s;

    set_hdr(h, 3, 2, 7, 0x10000);
    ck_assert_int_eq(pyasync_set_header(h, &s), 0);
    ck_assert_uint_eq(s.mask, 7);
    ck_assert_uint_eq(s.table, 0x10000);
    ck_assert_int_eq(s.used, 2);
    set_hdr(h, 3, 2, 6, 0x10000); /* mask + 1 not a power of two */
    ck_assert_int_eq(pyasync_set_header(h, &s), APP_E_STALE);
    set_hdr(h, 3, 2, 3, 0x10000); /* below the smallest table */
    ck_assert_int_eq(pyasync_set_header(h, &s), APP_E_STALE);
    set_hdr(h, 1, 2, 7, 0x10000); /* used > fill */
    ck_assert_int_eq(pyasync_set_header(h, &s), APP_E_STALE);
    set_hdr(h, 9, 2, 7, 0x10000); /* fill > slots */
    ck_assert_int_eq(pyasync_set_header(h, &s), APP_E_STALE);
    set_hdr(h, 3, -1, 7, 0x10000);
    ck_assert_int_eq(pyasync_set_header(h, &s), APP_E_STALE);
    set_hdr(h, 3, 2, 7, 0x10004); /* misaligned table */
    ck_assert_int_eq(pyasync_set_header(h, &s), APP_E_STALE);
    set_hdr(h, 3, 2, (1ull << PYASYNC_SET_MAX_LOG2) - 1 + (1ull << PYASYNC_SET_MAX_LOG2), 0x10000);
    ck_assert_int_eq(pyasync_set_header(h, &s), APP_E_STALE);
}
END_TEST

START_TEST(set_table_keys)
{
    uint8_t tab[8 * 16] = {0};
    uint64_t keys[8];
    struct pyasync_set s = {.mask = 7, .table = 0x10000, .used = 2};
    size_t n = 99;

    put64(tab, 1 * 16, 0x20000); /* live */
    put64(tab, 1 * 16 + 8, 1234);
    put64(tab, 3 * 16, 0x30000); /* dummy: hash -1 */
    put64(tab, 3 * 16 + 8, (uint64_t)-1);
    put64(tab, 6 * 16, 0x40000); /* live */
    put64(tab, 6 * 16 + 8, 5);
    ck_assert_int_eq(pyasync_set_table(tab, &s, keys, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(keys[0], 0x20000);
    ck_assert_uint_eq(keys[1], 0x40000);
    s.used = 1; /* more live keys than used: torn */
    ck_assert_int_eq(pyasync_set_table(tab, &s, keys, &n), APP_E_STALE);
    s.used = 3;
    put64(tab, 2 * 16, 0x50003); /* not a pointer */
    ck_assert_int_eq(pyasync_set_table(tab, &s, keys, &n), APP_E_STALE);
    memset(tab, 0, sizeof(tab));
    ck_assert_int_eq(pyasync_set_table(tab, &s, keys, &n), 0);
    ck_assert_uint_eq(n, 0);
}
END_TEST

#define CORO 0x7f0000001000ull
#define CODE 0x7f0000100000ull
#define AWAITED 0x7f0000200000ull

/* A 3.11+ coroutine copy: state, code, instruction 2 units past the code's bytecode, stack top. */
static void coro_new(const struct async_offsets *A, const struct py_layout *L, uint8_t *c,
                     int8_t state, int top)
{
    uint8_t *f = c + A->gi_iframe;

    memset(c, 0, 192);
    c[A->gi_state] = (uint8_t)state;
    put64(f, L->fr.code, CODE | (L->fr.code_tagged ? 1 : 0));
    put64(f, L->fr.instr, CODE + (uint64_t)L->co.code_adaptive + 4);
    put32(f, A->if_stacktop, top);
}

START_TEST(step_new_layouts)
{
    for (int minor = 11; minor <= 13; minor++) {
        const struct async_offsets *A = pyasync_offsets(minor);
        const struct py_layout *L = &pyabi_for_minor(minor)->layout;
        uint8_t c[192];
        struct pyasync_step s;

        ck_assert_ptr_nonnull(A);
        ck_assert_int_lt(A->gi_frame, 0);
        ck_assert_uint_le(pyasync_coro_bytes(A), sizeof(c));
        /* Suspended in an await with 3 slots used: the awaited object is localsplus[2]. */
        coro_new(A, L, c, -1, 3);
        ck_assert_int_eq(pyasync_step_new(A, L, c, CORO, &s), 0);
        ck_assert_uint_eq(s.code, CODE);
        ck_assert_int_eq(s.q, 4);
        ck_assert_uint_eq(s.slot, CORO + (uint64_t)A->gi_iframe + 72 + 16);
        /* 3.11/3.12 cannot tell await from yield by the state: the code unit after the
         * instruction must be checked (RESUME, oparg >= 2); 3.13 has its own state for it. */
        if (minor <= 12) {
            ck_assert_uint_eq(s.resume_at, CODE + (uint64_t)L->co.code_adaptive + 4 + 2);
            ck_assert(pyasync_resume_await(A, 151 | 3 << 8));  /* RESUME after await */
            ck_assert(pyasync_resume_await(A, 151 | 2 << 8));  /* after yield from */
            ck_assert(!pyasync_resume_await(A, 151 | 1 << 8)); /* after a plain yield */
            ck_assert(!pyasync_resume_await(A, 100 | 3 << 8)); /* another instruction */
            ck_assert(pyasync_resume_await(A, (uint16_t)(A->resume_op2 | 3 << 8)));
        } else {
            ck_assert_uint_eq(s.resume_at, 0);
        }
        /* Running (the task's frames are on its thread): a frame, nothing awaited. */
        coro_new(A, L, c, 0, 3);
        ck_assert_int_eq(pyasync_step_new(A, L, c, CORO, &s), 0);
        ck_assert_uint_eq(s.code, CODE);
        ck_assert_uint_eq(s.slot, 0);
        /* Just created: frame at its start, nothing awaited. */
        coro_new(A, L, c, minor >= 13 ? -3 : -2, 1);
        ck_assert_int_eq(pyasync_step_new(A, L, c, CORO, &s), 0);
        ck_assert_uint_eq(s.slot, 0);
        /* Completed or cleared: no frame. */
        coro_new(A, L, c, 4, 3);
        ck_assert_int_eq(pyasync_step_new(A, L, c, CORO, &s), 0);
        ck_assert_uint_eq(s.code, 0);
        /* An empty value stack: a plain yield on 3.11/3.12 (nothing awaited), torn on 3.13
         * (FRAME_SUSPENDED_YIELD_FROM always has the awaited object on it). */
        coro_new(A, L, c, -1, 0);
        ck_assert_int_eq(pyasync_step_new(A, L, c, CORO, &s), minor <= 12 ? 0 : APP_E_STALE);
        ck_assert_uint_eq(s.slot, 0);
        /* Torn: an absurd value stack, or no code object. */
        coro_new(A, L, c, -1, -1);
        ck_assert_int_eq(pyasync_step_new(A, L, c, CORO, &s), APP_E_STALE);
        coro_new(A, L, c, -1, 1 << 20);
        ck_assert_int_eq(pyasync_step_new(A, L, c, CORO, &s), APP_E_STALE);
        coro_new(A, L, c, -1, 2);
        put64(c + A->gi_iframe, L->fr.code, 0);
        ck_assert_int_eq(pyasync_step_new(A, L, c, CORO, &s), APP_E_STALE);
    }
}
END_TEST

START_TEST(step_old_stacktop)
{
    for (int minor = 8; minor <= 9; minor++) {
        const struct async_offsets *A = pyasync_offsets(minor);
        const struct py_layout *L = &pyabi_for_minor(minor)->layout;
        uint8_t f[PYASYNC_FRAME_READ] = {0};
        struct pyasync_step s;

        ck_assert_int_eq(A->gi_frame, 16);
        put64(f, L->fr.code, CODE);
        put32(f, L->fr.instr, 10); /* f_lasti, bytes */
        put64(f, A->f_stacktop, AWAITED + 24);
        ck_assert_int_eq(pyasync_step_old(A, L, f, &s), 0);
        ck_assert_uint_eq(s.code, CODE);
        ck_assert_int_eq(s.q, 10);
        ck_assert_uint_eq(s.slot, AWAITED + 16); /* f_stacktop[-1] */
        put64(f, A->f_stacktop, 0);              /* executing: no stack top */
        ck_assert_int_eq(pyasync_step_old(A, L, f, &s), 0);
        ck_assert_uint_eq(s.slot, 0);
        put32(f, L->fr.instr, -1); /* not started */
        put64(f, A->f_stacktop, AWAITED + 24);
        ck_assert_int_eq(pyasync_step_old(A, L, f, &s), 0);
        ck_assert_int_eq(s.q, -1);
        ck_assert_uint_eq(s.slot, 0);
        put32(f, L->fr.instr, 10);
        put64(f, A->f_stacktop, AWAITED + 28); /* misaligned */
        ck_assert_int_eq(pyasync_step_old(A, L, f, &s), APP_E_STALE);
    }
}
END_TEST

START_TEST(step_old_stackdepth)
{
    const struct async_offsets *A = pyasync_offsets(10);
    const struct py_layout *L = &pyabi_for_minor(10)->layout;
    uint8_t f[PYASYNC_FRAME_READ] = {0};
    struct pyasync_step s;

    put64(f, L->fr.code, CODE);
    put32(f, L->fr.instr, 7); /* f_lasti in code units on 3.10 */
    put64(f, A->f_valuestack, AWAITED);
    put32(f, A->f_stackdepth, 2);
    f[A->f_state] = (uint8_t)-1; /* FRAME_SUSPENDED */
    ck_assert_int_eq(pyasync_step_old(A, L, f, &s), 0);
    ck_assert_int_eq(s.q, 14);
    ck_assert_uint_eq(s.slot, AWAITED + 8);
    f[A->f_state] = 0; /* executing */
    ck_assert_int_eq(pyasync_step_old(A, L, f, &s), 0);
    ck_assert_uint_eq(s.slot, 0);
    f[A->f_state] = (uint8_t)-1;
    put32(f, A->f_stackdepth, 0); /* a plain yield with an empty stack: nothing awaited */
    ck_assert_int_eq(pyasync_step_old(A, L, f, &s), 0);
    ck_assert_uint_eq(s.slot, 0);
    put32(f, A->f_stackdepth, -1); /* torn */
    ck_assert_int_eq(pyasync_step_old(A, L, f, &s), APP_E_STALE);
}
END_TEST

/* 3.8-3.10 cannot tell await from yield by the frame: as in _PyGen_yf, the code unit after
 * f_lasti must be YIELD_FROM (72, any oparg) for the value stack's top to be awaited. */
START_TEST(yield_from_old)
{
    for (int minor = 8; minor <= 10; minor++) {
        const struct async_offsets *A = pyasync_offsets(minor);

        ck_assert_int_eq(A->resume_op, 72);
        ck_assert(pyasync_resume_await(A, 72));
        ck_assert(pyasync_resume_await(A, 72 | 3 << 8));
        ck_assert(!pyasync_resume_await(A, 86)); /* YIELD_VALUE: a plain yield */
        ck_assert(!pyasync_resume_await(A, 1));  /* POP_TOP, after a yield */
    }
}
END_TEST

START_TEST(versions_known)
{
    for (int minor = 8; minor <= 13; minor++)
        ck_assert_ptr_nonnull(pyasync_offsets(minor));
    ck_assert_ptr_null(pyasync_offsets(7));
    ck_assert_ptr_null(pyasync_offsets(14)); /* 3.14: from _AsyncioDebug (check_pyasync_image) */
    ck_assert_ptr_null(pyasync_offsets(15));
}
END_TEST

/* Versions and builds without a known task layout: one line, before any read (the reader has
 * no memory to read here). */
START_TEST(refusals_say_why)
{
    struct pyproc *p = calloc(1, sizeof(*p));
    struct pyasync_list l;
    struct app_err e = {0};

    /* A 3.15 alpha from before the frame states were renumbered (3.15.0a7). */
    p->L.minor = 15;
    p->version_hex = 0x030f00a3;
    strcpy(p->version, "3.15.0a3");
    ck_assert_int_eq(pyasync_read(p, &l, &e), APP_E_VERSION);
    ck_assert_str_eq(e.msg, "asyncio tasks: CPython 3.15.0a3: its coroutine frame states are "
                            "not known to this ranktop (3.15: 3.15.0a7 and later)");
    ck_assert_uint_eq(l.n, 0);
    /* 3.13t: the registries sit behind free-threaded dicts and weak sets. */
    p->L.minor = 13;
    p->L.free_threaded = true;
    ck_assert_int_eq(pyasync_read(p, &l, &e), APP_E_VERSION);
    ck_assert_str_eq(e.msg, "asyncio tasks: not supported on free-threaded 3.13 (its task "
                            "registries are dicts and weak sets of an unknown layout)");
    ck_assert_str_eq(pyasync_state_name(PYASYNC_RUNNING), "running");
    ck_assert_str_eq(pyasync_state_name(PYASYNC_CANCELLED), "cancelled");
    free(p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pyasync");
    TCase *tc = tcase_create("decode");

    tcase_add_test(tc, set_header_checks);
    tcase_add_test(tc, set_table_keys);
    tcase_add_test(tc, step_new_layouts);
    tcase_add_test(tc, step_old_stacktop);
    tcase_add_test(tc, step_old_stackdepth);
    tcase_add_test(tc, yield_from_old);
    tcase_add_test(tc, versions_known);
    tcase_add_test(tc, refusals_say_why);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ts_run(suite());
}
