/* The reader on memory images of interpreters that are not installed here: CPython 3.14.0
 * and 3.14.5 (whose _Py_DebugOffsets values differ) laid out from the published 3.14 field
 * order, plus malformed variants. The image holds a runtime, one interpreter with its GIL,
 * two threads, data-stack chunks, a generator frame, an interpreter-owned frame to skip, the
 * entry frames each thread's chain ends on (on the C stack), code objects with ASCII and UCS-2
 * names and real 3.11+ location tables. */
#include "pyproc_priv.h"
#include "ranktop/rmem.h"
#include "tsupport.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

enum {
    RUNTIME = 0x100000,
    INTERP = 0x200000,
    TS1 = 0x300000,
    TS2 = 0x310000,
    CHUNK1 = 0x400000,
    CHUNK2 = 0x410000,
    CODES = 0x500000,
    PYCODE_TYPE = 0x600000,
    GENF = 0x700000,
    STRS = 0x800000,
    CSTACK = 0x900000, /* the threads' entry frames: owner 3, previous NULL */
};

/* The 3.14 values that differ between 3.14.0 and 3.14.5 (py-spy's generated bindings). */
struct variant {
    uint32_t version;
    uint64_t gil, locked, holder, code_gen, modules;
};

static const struct variant v3140 = {0x030e00f0, 7760, 7776, 7768, 7968, 7664};
static const struct variant v3145 = {0x030e05f0, 7784, 7800, 7792, 7992, 7688};

struct img {
    struct rmem *m;
    uint8_t rt[4096], interp[8192], ts1[1024], ts2[1024], chunk1[1024], chunk2[1024];
    uint8_t gen[256], cstack[256];
    uint64_t next_str;
};

static void put64(uint8_t *b, size_t off, uint64_t v)
{
    memcpy(b + off, &v, 8);
}

static void put32(uint8_t *b, size_t off, uint32_t v)
{
    memcpy(b + off, &v, 4);
}

/* _Py_DebugOffsets for 3.14 at byte offsets of the 3.14 shape. */
static void put_debug_offsets(uint8_t *rt, const struct variant *v)
{
    static const uint16_t off[] = {24,  32,  40,  48,  56,  64,  72,  80,  96,  120, 128,
                                   144, 152, 160, 176, 192, 200, 208, 216, 224, 232, 240,
                                   248, 256, 264, 272, 288, 312, 320, 328, 336, 344, 352,
                                   384, 400, 408, 592, 600, 608, 616, 624, 632, 640};
    const uint64_t val[] = {
        1 << 20,   784,       808,         225808, 7280, 7272, 7344, 7360, v->modules, 16,  v->gil,
        v->locked, v->holder, v->code_gen, 824,    8,    16,   72,   152,  160,        232, 32,
        88,        8,         0,           56,     74,   216,  112,  120,  128,        136, 68,
        208,       16,        8,           40,     16,   32,   64,   32,   16,         40};

    memcpy(rt, "xdebugpy", 8);
    put64(rt, 8, v->version);
    put64(rt, 16, 0);
    for (size_t i = 0; i < sizeof(off) / sizeof(*off); i++)
        put64(rt, off[i], val[i]);
}

/* A compact str object: ASCII (kind 1) or UCS-2 (kind 2) from UTF-16 units. */
static uint64_t add_str(struct img *im, const uint16_t *u, size_t n, int kind)
{
    uint8_t obj[256] = {0};
    uint64_t at = im->next_str;
    size_t data = kind == 1 ? 40 : 56;

    put64(obj, 16, n);
    put32(obj, 32, (uint32_t)(kind << 2 | 1 << 5 | (kind == 1) << 6));
    for (size_t i = 0; i < n; i++) {
        if (kind == 1)
            obj[data + i] = (uint8_t)u[i];
        else
            memcpy(obj + data + 2 * i, &u[i], 2);
    }
    rmem_image_add(im->m, at, obj, sizeof(obj));
    im->next_str += 0x1000;
    return at;
}

static uint64_t add_ascii(struct img *im, const char *s)
{
    uint16_t u[64];
    size_t n = strlen(s);

    for (size_t i = 0; i < n; i++)
        u[i] = (uint8_t)s[i];
    return add_str(im, u, n, 1);
}

/* A code object with a location table of 8 entries of 8 code units each, line deltas +1
 * ("one-line form", code 11): byte offset q is on line firstlineno + q / 16 + 1. */
static uint64_t add_code(struct img *im, int idx, uint64_t name, uint64_t qual, uint64_t file,
                         int firstlineno)
{
    uint8_t code[256] = {0}, bytes[64] = {0};
    uint64_t at = CODES + (uint64_t)idx * 0x1000, table = at + 0x800;

    put64(code, 8, PYCODE_TYPE);
    put32(code, 68, (uint32_t)firstlineno);
    put64(code, 112, file);
    put64(code, 120, name);
    put64(code, 128, qual);
    put64(code, 136, table);
    put32(code, 192, 0); /* _co_firsttraceable */
    put64(bytes, 16, 24);
    for (int i = 0; i < 8; i++) {
        bytes[32 + 3 * i] = 0xDF;
        bytes[33 + 3 * i] = 0;
        bytes[34 + 3 * i] = 1;
    }
    rmem_image_add(im->m, at, code, sizeof(code));
    rmem_image_add(im->m, table, bytes, sizeof(bytes));
    return at;
}

static void put_frame(uint8_t *f, uint64_t code, uint64_t prev, long q, int owner)
{
    put64(f, 0, code | 1); /* a _PyStackRef with the borrowed-reference tag */
    put64(f, 8, prev);
    put64(f, 56, code + 208 + (uint64_t)q);
    f[74] = (uint8_t)owner;
}

static void put_tstate(uint8_t *ts, uint64_t next, uint64_t frame, uint64_t ident, int tid,
                       uint64_t chunk, int nframes)
{
    put64(ts, 8, next);
    put64(ts, 16, INTERP);
    put64(ts, 72, frame);
    put64(ts, 152, ident);
    put32(ts, 160, (uint32_t)tid);
    put64(ts, 232, chunk);
    put64(ts, 240, chunk + 32 + (uint64_t)nframes * 88);
}

static void build(struct img *im, const struct variant *v)
{
    static const uint16_t hanzi[] = {0x51FD, 0x6570}; /* 函数 */
    uint64_t file = add_ascii(im, "/job/train.py");
    uint64_t c_mod = add_code(im, 0, add_ascii(im, "<module>"), add_ascii(im, "<module>"), file, 1);
    uint64_t c_inner = add_code(im, 1, add_ascii(im, "inner"), add_ascii(im, "inner"), file, 20);
    uint64_t c_step =
        add_code(im, 2, add_ascii(im, "step"), add_ascii(im, "Trainer.step"), file, 40);
    uint64_t c_gen = add_code(im, 3, add_str(im, hanzi, 2, 2), add_str(im, hanzi, 2, 2), file, 60);
    uint64_t c_work = add_code(im, 4, add_ascii(im, "worker"), add_ascii(im, "worker"), file, 80);
    uint64_t f1 = CHUNK1 + 32; /* data[1]: CPython skips data[0] of a root chunk */

    put_debug_offsets(im->rt, v);
    put64(im->rt, 808, INTERP);
    put64(im->interp, 7344, TS2);
    put64(im->interp, 7360, TS1);
    put64(im->interp, 16, INTERP + v->gil);
    put32(im->interp, (size_t)v->locked, 1);
    put64(im->interp, (size_t)v->holder, TS2);
    put64(im->chunk1, 8, 16384);
    put_frame(im->cstack, 0x10, 0, 0, 3);
    put_frame(im->cstack + 88, 0x10, 0, 0, 3);
    put_frame(im->chunk1 + 32, c_mod, CSTACK, 48, 0);
    put_frame(im->chunk1 + 32 + 88, 0x10, f1, 0, 3); /* interpreter-owned: skipped */
    put_frame(im->chunk1 + 32 + 176, c_inner, f1 + 88, 0, 0);
    put_frame(im->chunk1 + 32 + 264, c_step, f1 + 176, 32, 0);
    put_tstate(im->ts1, 0, f1 + 264, 0x7f0000001000, 1001, CHUNK1, 4);
    put64(im->chunk2, 8, 16384);
    put_frame(im->chunk2 + 32, c_work, CSTACK + 88, 0, 0);
    put_frame(im->gen, c_gen, CHUNK2 + 32, 16, 1);
    put_tstate(im->ts2, TS1, GENF, 0x7f0000002000, 1002, CHUNK2, 1);
}

static struct img *img_new(const struct variant *v)
{
    struct img *im = calloc(1, sizeof(*im));

    im->m = rmem_new_image();
    im->next_str = STRS;
    build(im, v);
    rmem_image_add(im->m, RUNTIME, im->rt, sizeof(im->rt));
    rmem_image_add(im->m, INTERP, im->interp, sizeof(im->interp));
    rmem_image_add(im->m, TS1, im->ts1, sizeof(im->ts1));
    rmem_image_add(im->m, TS2, im->ts2, sizeof(im->ts2));
    rmem_image_add(im->m, CHUNK1, im->chunk1, sizeof(im->chunk1));
    rmem_image_add(im->m, CHUNK2, im->chunk2, sizeof(im->chunk2));
    rmem_image_add(im->m, GENF, im->gen, sizeof(im->gen));
    rmem_image_add(im->m, CSTACK, im->cstack, sizeof(im->cstack));
    return im;
}

static struct pyproc *img_open(struct img *im, uint32_t version, int *rc, struct app_err *err)
{
    struct pyproc *p = NULL;

    *rc = pyproc_open_mem(im->m, 0, RUNTIME, PYCODE_TYPE, version, NULL, &p, err);
    im->m = NULL; /* owned by the reader now, or freed on failure */
    return p;
}

static void img_free(struct img *im)
{
    free(im);
}

static void check_frame(const struct pythread *t, unsigned i, const char *fn, int line)
{
    ck_assert_uint_gt(t->nframes, i);
    ck_assert_str_eq(t->frames[i].function, fn);
    ck_assert_str_eq(t->frames[i].file, "/job/train.py");
    ck_assert_int_eq(t->frames[i].line, line);
}

static void check_sample(const struct variant *v, const char *vtext)
{
    struct img *im = img_new(v);
    struct app_err err = {0};
    const struct pysample *s;
    int rc;
    struct pyproc *p = img_open(im, v->version, &rc, &err);

    ck_assert_msg(rc == 0, "open failed: %s", err.msg);
    ck_assert_str_eq(pyproc_version(p), vtext);
    ck_assert_int_eq(pyproc_sample(p, &s, &err), 0);
    ck_assert_uint_eq(s->nthreads, 2);
    ck_assert_uint_eq(s->dropped, 0);
    ck_assert(s->gil_locked);
    /* Thread list order: the newest thread first, the main thread last. */
    ck_assert_int_eq(s->threads[0].tid, 1002);
    ck_assert(s->threads[0].gil);
    ck_assert_uint_eq(s->threads[0].nframes, 2);
    check_frame(&s->threads[0], 0, "\xe5\x87\xbd\xe6\x95\xb0", 62);
    check_frame(&s->threads[0], 1, "worker", 81);
    ck_assert_uint_eq(s->threads[1].ident, 0x7f0000001000);
    ck_assert_int_eq(s->threads[1].tid, 1001);
    ck_assert(!s->threads[1].gil);
    ck_assert_uint_eq(s->threads[1].nframes, 3);
    check_frame(&s->threads[1], 0, "Trainer.step", 43);
    check_frame(&s->threads[1], 1, "inner", 21);
    check_frame(&s->threads[1], 2, "<module>", 5);
    pyproc_free(p);
    img_free(im);
}

START_TEST(test_3140_image)
{
    check_sample(&v3140, "3.14.0");
}
END_TEST

START_TEST(test_3145_image)
{
    check_sample(&v3145, "3.14.5");
}
END_TEST

/* Reading with the wrong minor's shape must fail cleanly, not walk garbage (the 3.15 and
 * free-threaded layouts themselves: check_pyimage_layouts.c). */
START_TEST(test_bad_debug_offsets)
{
    struct app_err err = {0};
    int rc;
    struct img *im = img_new(&v3140);
    struct pyproc *p;

    memcpy(im->rt, "ydebugpy", 8);
    rmem_image_write(im->m, RUNTIME, im->rt, 8);
    p = img_open(im, v3140.version, &rc, &err);
    ck_assert_ptr_null(p);
    ck_assert_int_lt(rc, 0);
    img_free(im);

    im = img_new(&v3140);
    put64(im->rt, 16, 1); /* a free-threaded flag on a GIL build's values: no shape fits */
    rmem_image_write(im->m, RUNTIME, im->rt, 24);
    p = img_open(im, v3140.version, &rc, &err);
    ck_assert_int_eq(rc, APP_E_VERSION);
    ck_assert(strstr(err.msg, "free-threaded") != NULL);
    img_free(im);

    im = img_new(&v3140);
    put64(im->rt, 8, 0x030f00f0); /* 3.14 values under 3.15: no 3.15 shape fits */
    rmem_image_write(im->m, RUNTIME, im->rt, 16);
    p = img_open(im, 0x030f00f0, &rc, &err);
    ck_assert_int_eq(rc, APP_E_VERSION);
    ck_assert(strstr(err.msg, "3.15") != NULL);
    img_free(im);
}
END_TEST

/* A frame whose `previous` points at itself (a torn read seen on 3.13) ends the walk. */
START_TEST(test_self_loop_dropped)
{
    struct app_err err = {0};
    const struct pysample *s;
    int rc;
    struct img *im = img_new(&v3140);
    struct pyproc *p = img_open(im, v3140.version, &rc, &err);
    uint64_t self = CHUNK1 + 32 + 264;

    ck_assert_int_eq(rc, 0);
    rmem_image_write(p->mem, self + 8, &self, 8);
    ck_assert_int_eq(pyproc_sample(p, &s, &err), 0);
    ck_assert_uint_eq(s->dropped, 1);
    ck_assert_uint_ge(s->torn, 2); /* retried from a fresh thread state, then dropped */
    ck_assert_int_eq(s->threads[1].status, APP_E_STALE);
    ck_assert_uint_eq(s->threads[0].nframes, 2);
    pyproc_free(p);
    img_free(im);
}
END_TEST

/* Opens the 3.14.0 image, overwrites len bytes at addr, takes one sample (which must succeed)
 * and returns it; free p and im after. */
static const struct pysample *sample_patched(struct img **im, struct pyproc **p, uint64_t addr,
                                             const void *data, size_t len)
{
    struct app_err err = {0};
    const struct pysample *s;
    int rc;

    *im = img_new(&v3140);
    *p = img_open(*im, v3140.version, &rc, &err);
    ck_assert_int_eq(rc, 0);
    rmem_image_write((*p)->mem, addr, data, len);
    ck_assert_int_eq(pyproc_sample(*p, &s, &err), 0);
    return s;
}

/* Chains that are not a thread's live stack are torn: dropped, never returned with fewer
 * frames. One ends (previous NULL) on a frame that is not the thread's entry frame; one
 * passes a frame owned by a frame object (a copy taken when its frame returned). */
START_TEST(test_torn_chains_dropped)
{
    static const uint8_t zero[8], dead_owner = 2;
    const struct {
        uint64_t addr;
        const void *data;
        size_t len;
    } patch[] = {{CHUNK1 + 32 + 176 + 8, zero, 8}, {CHUNK1 + 32 + 176 + 74, &dead_owner, 1}};

    for (size_t i = 0; i < sizeof(patch) / sizeof(patch[0]); i++) {
        struct img *im;
        struct pyproc *p;
        const struct pysample *s =
            sample_patched(&im, &p, patch[i].addr, patch[i].data, patch[i].len);

        ck_assert_uint_eq(s->dropped, 1);
        ck_assert_int_eq(s->threads[1].status, APP_E_STALE);
        ck_assert_uint_eq(s->threads[1].nframes, 0);
        ck_assert_uint_eq(s->threads[0].nframes, 2);
        pyproc_free(p);
        img_free(im);
    }
}
END_TEST

/* A thread with no current frame has no Python frame: an empty stack, flagged as such. */
START_TEST(test_no_python_flagged)
{
    uint64_t zero = 0;
    struct img *im;
    struct pyproc *p;
    const struct pysample *s = sample_patched(&im, &p, TS1 + 72, &zero, 8);

    ck_assert_uint_eq(s->dropped, 0);
    ck_assert_int_eq(s->threads[1].status, 0);
    ck_assert_uint_eq(s->threads[1].nframes, 0);
    ck_assert(s->threads[1].no_python);
    ck_assert(!s->threads[0].no_python);
    pyproc_free(p);
    img_free(im);
}
END_TEST

/* A bumped _code_object_generation flushes the code cache; an unchanged one keeps it. */
START_TEST(test_code_generation_flush)
{
    struct app_err err = {0};
    const struct pysample *s;
    struct pyproc_stats st;
    int rc;
    struct img *im = img_new(&v3140);
    struct pyproc *p = img_open(im, v3140.version, &rc, &err);
    uint64_t gen = 7;

    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(pyproc_sample(p, &s, &err), 0);
    ck_assert_int_eq(pyproc_sample(p, &s, &err), 0);
    pyproc_get_stats(p, &st);
    ck_assert_uint_eq(st.code_misses, 5);
    ck_assert_uint_eq(st.code_hits, 5);
    rmem_image_write(p->mem, INTERP + v3140.code_gen, &gen, 8);
    ck_assert_int_eq(pyproc_sample(p, &s, &err), 0);
    pyproc_get_stats(p, &st);
    ck_assert_uint_eq(st.code_misses, 10);
    check_frame(&s->threads[1], 0, "Trainer.step", 43);
    pyproc_free(p);
    img_free(im);
}
END_TEST

/* A thread takes the GIL from another: CPython's take_gil bumps switch_number (3.14: right
 * after `locked`), which is what tells the reader that threads may have moved. */
static void gil_switch(struct pyproc *p, const struct variant *v, uint64_t holder)
{
    uint64_t sw = 0;

    ck_assert_int_eq(rmem_read(p->mem, INTERP + v->locked + 8, &sw, 8), 0);
    sw++;
    rmem_image_write(p->mem, INTERP + v->locked + 8, &sw, 8);
    rmem_image_write(p->mem, INTERP + v->holder, &holder, 8);
}

/* A thread that is not the GIL's holder, with the GIL's switch count unchanged since its last
 * walk, has not run: its last walk, once a second walk agreed with it, is reused without a
 * read. Once the count moves, it is walked again and a change is seen. */
START_TEST(test_gil_quiet_reuse)
{
    struct app_err err = {0};
    const struct pysample *s;
    int rc;
    struct img *im = img_new(&v3140);
    struct pyproc *p = img_open(im, v3140.version, &rc, &err);
    uint64_t instr = CODES + 2 * 0x1000 + 208 + 48; /* Trainer.step, one line on: 44 */
    unsigned reads_first;

    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(pyproc_sample(p, &s, &err), 0);
    ck_assert_uint_eq(s->reused, 0);
    reads_first = s->reads;
    ck_assert_int_eq(pyproc_sample(p, &s, &err), 0);
    ck_assert_uint_eq(s->reused, 0); /* a walk is reused once a second one agrees */
    ck_assert_int_eq(pyproc_sample(p, &s, &err), 0);
    ck_assert_uint_eq(s->reused, 1); /* thread 1; thread 0 holds the GIL: always walked */
    ck_assert_uint_lt(s->reads, reads_first);
    check_frame(&s->threads[1], 0, "Trainer.step", 43);
    ck_assert_uint_eq(s->threads[1].nframes, 3);
    /* The frame moves on while thread 1 holds the GIL (and then gives it back). */
    rmem_image_write(p->mem, CHUNK1 + 32 + 264 + 56, &instr, 8);
    gil_switch(p, &v3140, TS1);
    gil_switch(p, &v3140, TS2);
    ck_assert_int_eq(pyproc_sample(p, &s, &err), 0);
    ck_assert_uint_eq(s->reused, 0);
    check_frame(&s->threads[1], 0, "Trainer.step", 44);
    pyproc_free(p);
    img_free(im);
}
END_TEST

/* A code object replaced at the same address (new name, same everything else) is noticed; a
 * real process replaces one only by running Python, so the GIL changes hands meanwhile. */
START_TEST(test_code_address_reuse)
{
    struct app_err err = {0};
    const struct pysample *s;
    int rc;
    struct img *im = img_new(&v3140);
    struct pyproc *p = img_open(im, v3140.version, &rc, &err);
    uint64_t name = STRS; /* the first string added: the file name */

    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(pyproc_sample(p, &s, &err), 0);
    check_frame(&s->threads[1], 0, "Trainer.step", 43);
    rmem_image_write(p->mem, CODES + 2 * 0x1000 + 128, &name, 8);
    gil_switch(p, &v3140, TS1);
    ck_assert_int_eq(pyproc_sample(p, &s, &err), 0);
    ck_assert_str_eq(s->threads[1].frames[0].function, "/job/train.py");
    pyproc_free(p);
    img_free(im);
}
END_TEST

/* No interpreter yet (start-up) and a set _finalizing (shut-down) are reported as such. */
START_TEST(test_starting_and_exiting)
{
    struct app_err err = {0};
    const struct pysample *s;
    int rc;
    struct img *im = img_new(&v3140);
    struct pyproc *p = img_open(im, v3140.version, &rc, &err);
    uint64_t zero = 0, one = 0x1234;

    ck_assert_int_eq(rc, 0);
    rmem_image_write(p->mem, RUNTIME + 808, &zero, 8);
    ck_assert_int_eq(pyproc_sample(p, &s, &err), APP_E_STARTING);
    ck_assert(strstr(err.msg, "starting up") != NULL);
    rmem_image_write(p->mem, RUNTIME + 784, &one, 8);
    ck_assert_int_eq(pyproc_sample(p, &s, &err), APP_E_EXITING);
    ck_assert(strstr(err.msg, "shutting down") != NULL);
    pyproc_free(p);
    img_free(im);
}
END_TEST

static Suite *pyimage_suite(void)
{
    Suite *s = suite_create("pyimage");
    TCase *tc = tcase_create("images");

    tcase_add_test(tc, test_3140_image);
    tcase_add_test(tc, test_3145_image);
    tcase_add_test(tc, test_bad_debug_offsets);
    tcase_add_test(tc, test_self_loop_dropped);
    tcase_add_test(tc, test_torn_chains_dropped);
    tcase_add_test(tc, test_no_python_flagged);
    tcase_add_test(tc, test_code_generation_flush);
    tcase_add_test(tc, test_code_address_reuse);
    tcase_add_test(tc, test_gil_quiet_reuse);
    tcase_add_test(tc, test_starting_and_exiting);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ts_run(pyimage_suite());
}
