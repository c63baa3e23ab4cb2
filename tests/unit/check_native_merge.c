/* native_merge (collectors/native/merge.c) on hand-made stacks: evaluation calls found by name,
 * and, in a stripped interpreter whose loop runs in an unnamed local clone (Debian sid's
 * python3.14 and python3.15), found as the runs of interpreter frames the Python stack's entry
 * frames call for, outermost runs first. */
#include "ranktop/native/native.h"
#include "ranktop/python/pystack.h"
#include "tsupport.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define PY "/usr/bin/python3.14"
#define LIBC "/usr/lib/x86_64-linux-gnu/libc.so.6"

static struct native_frame nf(const char *fn, const char *obj)
{
    return (struct native_frame){
        0x1000, fn, obj, 0, fn && !strcmp(fn, "_PyEval_EvalFrameDefault"), !strcmp(obj, PY)};
}

/* The merged stack as one string: native frames as "fn", unnamed ones as "?", Python frames
 * as "py:fn". Interpreter frames that are dropped do not appear. */
static void merged(const struct native_frame *f, size_t n, struct pyframe *pf, uint32_t np,
                   char *out, size_t len)
{
    struct native_stack ns = {(struct native_frame *)f, n, 0};
    struct pythread pt;
    struct merged_frame *m = NULL;
    size_t k = 0;

    memset(&pt, 0, sizeof(pt));
    pt.frames = pf;
    pt.nframes = np;
    native_merge(&ns, &pt, &m, &k);
    out[0] = '\0';
    for (size_t i = 0; i < k; i++) {
        const char *s =
            m[i].native ? (m[i].nat->function ? m[i].nat->function : "?") : m[i].py->function;

        strncat(out, i ? " " : "", len - strlen(out) - 1);
        if (!m[i].native)
            strncat(out, "py:", len - strlen(out) - 1);
        strncat(out, s, len - strlen(out) - 1);
    }
    free(m);
}

static struct pyframe pyf(const char *fn, bool entry)
{
    return (struct pyframe){fn, "/t.py", 1, entry, 0};
}

/* pause_native.py qsort as Debian's 3.14 shows it: two C-level calls, the loop unnamed. */
START_TEST(unnamed_loop_two_calls)
{
    struct native_frame f[] = {nf("pause", LIBC),
                               nf(NULL, "/ffi.so"),
                               nf(NULL, PY),
                               nf(NULL, PY),
                               nf("PyObject_Vectorcall", PY),
                               nf("qsort_r", LIBC),
                               nf(NULL, "/ffi.so"),
                               nf(NULL, PY),
                               nf(NULL, PY),
                               nf("PyEval_EvalCode", PY),
                               nf("Py_RunMain", PY),
                               nf("__libc_start_main", LIBC),
                               nf("_start", PY)};
    struct pyframe p[] = {pyf("wait_in_pause", false), pyf("cmp", true), pyf("outer", false),
                          pyf("<module>", true)};
    char got[512];

    merged(f, sizeof(f) / sizeof(f[0]), p, 4, got, sizeof(got));
    ck_assert_str_eq(got, "pause ? py:wait_in_pause py:cmp qsort_r ? py:outer py:<module>");
}
END_TEST

/* An inner run of interpreter frames that runs no Python (taking the GIL back after a C
 * call) does not take the Python frames: with one entry frame, the outermost run does. */
START_TEST(unnamed_loop_inner_run_without_python)
{
    struct native_frame f[] = {nf(NULL, LIBC),
                               nf(NULL, PY),
                               nf("PyEval_RestoreThread", PY),
                               nf("ext_wait", "/ext.so"),
                               nf(NULL, PY),
                               nf("PyEval_EvalCode", PY),
                               nf("__libc_start_main", LIBC)};
    struct pyframe p[] = {pyf("call_ext", false), pyf("<module>", true)};
    char got[512];

    merged(f, sizeof(f) / sizeof(f[0]), p, 2, got, sizeof(got));
    ck_assert_str_eq(got, "? ext_wait py:call_ext py:<module>");
}
END_TEST

/* A named loop is used as named: the guess never applies. */
START_TEST(named_loop)
{
    struct native_frame f[] = {nf("pause", LIBC), nf(NULL, PY), nf("_PyEval_EvalFrameDefault", PY),
                               nf(NULL, PY), nf("__libc_start_main", LIBC)};
    struct pyframe p[] = {pyf("f", false), pyf("<module>", true)};
    char got[512];

    merged(f, sizeof(f) / sizeof(f[0]), p, 2, got, sizeof(got));
    ck_assert_str_eq(got, "pause py:f py:<module>");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("native_merge");
    TCase *tc = tcase_create("merge");

    tcase_add_test(tc, unnamed_loop_two_calls);
    tcase_add_test(tc, unnamed_loop_inner_run_without_python);
    tcase_add_test(tc, named_loop);
    suite_add_tcase(s, tc);
    return ts_run(s);
}
