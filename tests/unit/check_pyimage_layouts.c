/* The stack reader on memory images of CPythons that are not installed here (pyimage_layouts.h):
 * 3.15 (its release _Py_DebugOffsets shape and the shape of its earlier alphas), the
 * free-threaded builds 3.13t, 3.14t and 3.15t, an unknown future version and _Py_DebugOffsets
 * that fit no known shape. */
#include "pyimage_layouts.h"
#include "pyproc_priv.h"
#include "ranktop/python/gil.h"
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

/* The two threads as built: the newest first, the main thread last. */
static void check_threads(const struct pysample *s, bool gil)
{
    ck_assert_uint_eq(s->nthreads, 2);
    ck_assert_uint_eq(s->dropped, 0);
    ck_assert(s->gil_locked == gil);
    ck_assert_int_eq(s->threads[0].tid, 1002);
    ck_assert(s->threads[0].gil == gil);
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
}

/* Opens, samples three times and checks every sample; returns the reader for more checks. */
static struct pyproc *sample_image(const struct target *t, const char *vtext, struct img **imp)
{
    struct img *im = img_new(t);
    struct app_err err = {0};
    const struct pysample *s;
    int rc;
    struct pyproc *p = img_open(im, t->version, &rc, &err);

    ck_assert_msg(rc == 0, "open failed: %s", err.msg);
    ck_assert_str_eq(pyproc_version(p), vtext);
    ck_assert(p->L.free_threaded == t->ft);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(pyproc_sample(p, &s, &err), 0);
        check_threads(s, !t->ft);
        /* No GIL, no proof that a thread has not run: every thread is read every time. */
        if (t->ft)
            ck_assert_uint_eq(s->reused, 0);
    }
    *imp = im;
    return p;
}

START_TEST(test_3150_image)
{
    struct img *im;
    struct pyproc *p = sample_image(&t3150, "3.15.0", &im);

    /* From the target, not the 3.14 constant: holds_gil and the heap type's cached keys. */
    ck_assert_int_eq(p->L.ts.gil_flag, PY_GILFLAG_INT);
    ck_assert_int_eq(p->L.ts.gil_flag_off, 44);
    ck_assert(!p->L.names.off);
    ck_assert_uint_eq(p->L.names.ht_cached_keys, 896);
    pyproc_free(p);
    free(im);
}
END_TEST

/* An alpha of the earlier shape: the same stacks, its own thread-state fields. */
START_TEST(test_315_alpha_image)
{
    struct img *im;
    struct pyproc *p = sample_image(&t315a, "3.15.0a3", &im);

    ck_assert_int_eq(p->L.ts.gil_flag_off, 40);
    ck_assert(p->L.names.off); /* its types are not described: no thread-name walk */
    pyproc_free(p);
    free(im);
}
END_TEST

START_TEST(test_3140t_image)
{
    struct img *im;
    struct pyproc *p = sample_image(&t3140t, "3.14.0", &im);

    ck_assert_uint_eq(p->L.ob_type, 24);
    ck_assert_int_eq(p->L.fr.tlbc, 72);
    ck_assert(p->L.names.off);
    ck_assert_ptr_null(pygil_new(p)); /* no GIL figures for a build without a GIL */
    pyproc_free(p);
    free(im);
}
END_TEST

START_TEST(test_3150t_image)
{
    struct img *im;
    struct pyproc *p = sample_image(&t3150t, "3.15.0", &im);

    ck_assert_ptr_null(pygil_new(p));
    pyproc_free(p);
    free(im);
}
END_TEST

START_TEST(test_3130t_image)
{
    struct img *im;
    struct pyproc *p = sample_image(&t3130t, "3.13.0", &im);

    ck_assert_int_eq(p->L.fr.tlbc, 0);
    ck_assert_ptr_null(pygil_new(p));
    pyproc_free(p);
    free(im);
}
END_TEST

/* 3.15's GIL probe: holder, switch count, drop request (eval_breaker), gc.collecting, from
 * where each shape's _Py_DebugOffsets puts them. */
START_TEST(test_315_gil_probe)
{
    const struct target *ts[] = {&t3150, &t315a};

    for (size_t i = 0; i < 2; i++) {
        struct img *im = img_new(ts[i]);
        struct app_err err = {0};
        struct pygil_sample gs;
        int rc;
        struct pyproc *p = img_open(im, ts[i]->version, &rc, &err);
        struct pygil *g;

        ck_assert_int_eq(rc, 0);
        g = pygil_new(p);
        ck_assert_ptr_nonnull(g);
        ck_assert_int_eq(pygil_sample(g, &gs, &err), 0);
        ck_assert(gs.known && gs.locked);
        ck_assert_uint_eq(gs.holder_ident, 0x7f0000002000);
        ck_assert_uint_eq(gs.switch_number, 41);
        ck_assert(gs.drop_known && gs.drop_request);
        ck_assert_int_eq(gs.in_gc, 1);
        pygil_free(g);
        pyproc_free(p);
        free(im);
    }
}
END_TEST

/* Opens the image of t after writing len bytes at off of its runtime copy (its
 * _Py_DebugOffsets); returns the status and leaves the message in err. */
static int open_patched(const struct target *t, uint32_t version, size_t off, uint64_t value,
                        struct app_err *err)
{
    struct img *im = img_new(t);
    struct pyproc *p;
    int rc;

    put64(im->rt, 8, version);
    put64(im->rt, off, value);
    rmem_image_write(im->m, RUNTIME, im->rt, sizeof(im->rt));
    p = img_open(im, version, &rc, err);
    ck_assert_ptr_null(p);
    free(im);
    return rc;
}

/* A version newer than the newest known is refused by name, whatever its struct holds. */
START_TEST(test_future_refused)
{
    struct app_err err = {0};

    ck_assert_int_eq(open_patched(&t3150, 0x031000a1, 16, 0, &err), APP_E_VERSION);
    ck_assert_msg(strstr(err.msg, "CPython 3.16.0a1: layout not known to this ranktop (newest "
                                  "supported: 3.15)") != NULL,
                  "%s", err.msg);
}
END_TEST

/* _Py_DebugOffsets that fit no known 3.15 shape (a pre-release of another shape, or a torn
 * copy) are refused naming the version, never read with a guessed shape; a free-threaded
 * 3.13t whose struct does not fit is not read with the GIL build's compiled 3.13 table. */
START_TEST(test_unknown_shape_refused)
{
    struct app_err err = {0};

    /* pyobject.size of the release shape (slot 55) torn: neither 3.15 shape fits. */
    ck_assert_int_eq(open_patched(&t3150, 0x030f00f0, 24 + 8 * 55, 17, &err), APP_E_VERSION);
    ck_assert_msg(strstr(err.msg, "CPython 3.15.0: _Py_DebugOffsets fit no 3.15 layout") != NULL,
                  "%s", err.msg);
    /* A free-threaded flag on a GIL build's struct: the headers disagree. */
    ck_assert_int_eq(open_patched(&t3150, 0x030f00b1, 16, 1, &err), APP_E_VERSION);
    ck_assert_msg(strstr(err.msg, "3.15.0b1 (free-threaded)") != NULL, "%s", err.msg);
    /* 3.13t: ob_type torn (slot 42). */
    ck_assert_int_eq(open_patched(&t3130t, 0x030d00f0, 24 + 8 * 42, 8, &err), APP_E_VERSION);
    ck_assert_msg(strstr(err.msg, "3.13.0 (free-threaded)") != NULL, "%s", err.msg);
}
END_TEST

/* Opens the image of t, overwrites len bytes at addr, samples once; free p and im after. */
static const struct pysample *sample_patched(const struct target *t, struct img **im,
                                             struct pyproc **p, uint64_t addr, const void *data,
                                             size_t len)
{
    struct app_err err = {0};
    const struct pysample *s;
    int rc;

    *im = img_new(t);
    *p = img_open(*im, t->version, &rc, &err);
    ck_assert_int_eq(rc, 0);
    rmem_image_write((*p)->mem, addr, data, len);
    ck_assert_int_eq(pyproc_sample(*p, &s, &err), 0);
    return s;
}

/* Torn chains are dropped, not shortened: a frame that points at itself (3.15, 3.14t). */
START_TEST(test_torn_chain_dropped)
{
    const struct target *ts[] = {&t3150, &t3140t};

    for (size_t i = 0; i < 2; i++) {
        uint64_t self = CHUNK1 + 32 + 3 * ts[i]->v[FR_SIZE];
        struct img *im;
        struct pyproc *p;
        const struct pysample *s = sample_patched(ts[i], &im, &p, self + 8, &self, 8);

        ck_assert_uint_eq(s->dropped, 1);
        ck_assert_int_eq(s->threads[1].status, APP_E_STALE);
        ck_assert_uint_eq(s->threads[1].nframes, 0);
        ck_assert_uint_eq(s->threads[0].nframes, 2);
        pyproc_free(p);
        free(im);
    }
}
END_TEST

/* 3.14t: a frame on a per-thread bytecode copy the code's array does not have (its tlbc_index
 * past the array's size, or the array gone) is torn: no line from the wrong bytecode. */
START_TEST(test_tlbc_torn)
{
    const uint32_t idx = 5;
    const uint64_t zero = 0;
    const struct {
        uint64_t addr;
        const void *data;
        size_t len;
    } patch[] = {{GENF + 72, &idx, 4}, {CODES + 3 * 0x1000 + 224, &zero, 8}};

    for (size_t i = 0; i < 2; i++) {
        struct img *im;
        struct pyproc *p;
        const struct pysample *s =
            sample_patched(&t3140t, &im, &p, patch[i].addr, patch[i].data, patch[i].len);

        ck_assert_uint_eq(s->dropped, 1);
        ck_assert_int_eq(s->threads[0].status, APP_E_STALE);
        ck_assert_uint_eq(s->threads[0].nframes, 0);
        check_frame(&s->threads[1], 0, "Trainer.step", 43);
        pyproc_free(p);
        free(im);
    }
}
END_TEST

static Suite *layouts_suite(void)
{
    Suite *s = suite_create("pyimage_layouts");
    TCase *tc = tcase_create("images");

    tcase_add_test(tc, test_3150_image);
    tcase_add_test(tc, test_315_alpha_image);
    tcase_add_test(tc, test_315_gil_probe);
    tcase_add_test(tc, test_3140t_image);
    tcase_add_test(tc, test_3150t_image);
    tcase_add_test(tc, test_3130t_image);
    tcase_add_test(tc, test_future_refused);
    tcase_add_test(tc, test_unknown_shape_refused);
    tcase_add_test(tc, test_torn_chain_dropped);
    tcase_add_test(tc, test_tlbc_torn);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ts_run(layouts_suite());
}
