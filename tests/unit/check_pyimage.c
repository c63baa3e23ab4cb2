/* The reader on memory images of interpreters that are not installed here: CPython 3.14.0
 * and 3.14.5 (whose _Py_DebugOffsets values differ) laid out from the published 3.14 field
 * order, plus malformed variants. The image holds a runtime, one interpreter with its GIL,
 * two threads, data-stack chunks, a generator frame, an interpreter-owned frame to skip, the
 * entry frames each thread's chain ends on (on the C stack), code objects with ASCII and UCS-2
 * names and real 3.11+ location tables. */
#include "pyimage314.h"
#include "pyproc_priv.h"
#include "ranktop/proc/rmem.h"
#include "tsupport.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

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

/* The walk hints (one per thread-state address ever seen) are all dropped when their count
 * reaches the thread cap; a sample whose batch of first reads crosses the cap between two of
 * its threads still reads both. Threads that come and go leave a hint each, so a long job
 * with a churning thread pool gets there. */
START_TEST(test_hints_full_mid_batch)
{
    struct app_err err = {0};
    const struct pysample *s;
    int rc;
    struct img *im = img_new(&v3140);
    struct pyproc *p = img_open(im, v3140.version, &rc, &err);

    ck_assert_int_eq(rc, 0);
    /* Gone threads' hints after the live ones', up to one short of the cap: the batch of the
     * next sample would cross it. (Then with no live thread's hint kept: the first made
     * fills the cap.) */
    ck_assert_int_eq(pyproc_sample(p, &s, &err), 0);
    for (uint64_t i = 0; p->nhints + 1 < p->opts.max_threads; i++)
        pywalk_hint(p, 0x500000000000ull + i * 0x1000, true);
    ck_assert_int_eq(pyproc_sample(p, &s, &err), 0);
    check_frame(&s->threads[0], 1, "worker", 81);
    check_frame(&s->threads[1], 0, "Trainer.step", 43);
    pyproc_free(p);
    img_free(im);
    im = img_new(&v3140);
    p = img_open(im, v3140.version, &rc, &err);
    for (uint64_t i = 0; i + 1 < p->opts.max_threads; i++)
        pywalk_hint(p, 0x500000000000ull + i * 0x1000, true);
    ck_assert_int_eq(pyproc_sample(p, &s, &err), 0);
    ck_assert_uint_eq(s->nthreads, 2);
    check_frame(&s->threads[0], 1, "worker", 81);
    check_frame(&s->threads[1], 0, "Trainer.step", 43);
    ck_assert_uint_eq(s->threads[1].nframes, 3);
    ck_assert_uint_le(p->nhints, 2);
    ck_assert_int_eq(pyproc_sample(p, &s, &err), 0);
    check_frame(&s->threads[1], 2, "<module>", 5);
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
    tcase_add_test(tc, test_hints_full_mid_batch);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ts_run(pyimage_suite());
}
