/* The compiled CPython tables (collectors/python/abi/pyabi_versions.c, 3.8-3.13) against
 * offsetof() on that minor's own internal headers, compiled by this build's compiler for this
 * build's architecture: built once per minor whose headers meson found (-DPYABI_ARCH_MINOR).
 * The tables are one set for x86-64 and aarch64; this test is what says they hold for
 * both: the cross build (tests/aarch64.sh) compiles it with the aarch64 compiler and runs it
 * under qemu. The fields checked are those the stack reader, the thread-name walk's entry
 * points and the GIL prober read, including every one behind or inside a pthread type
 * (pthread_mutex_t is 40 bytes on x86-64 glibc and 48 on aarch64; pthread_cond_t 48 on both):
 * the GIL struct's fields up to the end of cond, and sizeof(pthread_cond_t), which pygil.c
 * reads as COND_SIZE. Headers of another architecture's pyconfig.h are fine here: no field
 * checked depends on a configure result that differs between the two. Single-threaded. */
#define Py_BUILD_CORE 1
#include <Python.h>
#if PY_MINOR_VERSION >= 9
#include "internal/pycore_interp.h"
#include "internal/pycore_runtime.h"
#else
#include "internal/pycore_pystate.h"
#endif
#include "internal/pycore_gil.h"

#include "abi/pyabi.h"
#include "tsupport.h"

#include <check.h>
#include <pthread.h>
#include <stddef.h>

#if PY_MINOR_VERSION != PYABI_ARCH_MINOR
#error "the headers found are not of the minor this test was built for"
#endif

#define EQ(field, expr)                                                                            \
    ck_assert_msg((long)(field) == (long)(expr), "3.%d %s: table %ld, headers %ld",                \
                  PY_MINOR_VERSION, #field, (long)(field), (long)(expr))

static const struct py_layout *layout(void)
{
    const struct py_abi *a = pyabi_for_minor(PY_MINOR_VERSION);

    ck_assert_ptr_nonnull(a);
    ck_assert(a->compiled);
    return &a->layout;
}

START_TEST(test_runtime_interp)
{
    const struct py_layout *L = layout();

    EQ(L->rt.interp_head, offsetof(_PyRuntimeState, interpreters.head));
#if PY_MINOR_VERSION == 8
    EQ(L->rt.finalizing, offsetof(_PyRuntimeState, finalizing));
#else
    EQ(L->rt.finalizing, offsetof(_PyRuntimeState, _finalizing));
#endif
#if PY_MINOR_VERSION <= 11
    EQ(L->rt.gil, offsetof(_PyRuntimeState, ceval.gil));
#else
    EQ(L->rt.gil, PYABI_NONE);
#endif
    EQ(L->is.next, offsetof(PyInterpreterState, next));
    EQ(L->is.id, offsetof(PyInterpreterState, id));
#if PY_MINOR_VERSION <= 10
    EQ(L->is.threads_head, offsetof(PyInterpreterState, tstate_head));
#else
    EQ(L->is.threads_head, offsetof(PyInterpreterState, threads.head));
#endif
#if PY_MINOR_VERSION >= 12
    EQ(L->is.modules, offsetof(PyInterpreterState, imports.modules));
    EQ(L->is.gil_ptr, offsetof(PyInterpreterState, ceval.gil));
#else
    EQ(L->is.modules, offsetof(PyInterpreterState, modules));
#endif
#if PY_MINOR_VERSION >= 13
    EQ(L->is.threads_main, offsetof(PyInterpreterState, threads.main));
#endif
}
END_TEST

START_TEST(test_tstate_code)
{
    const struct py_layout *L = layout();

    EQ(L->ts.size, sizeof(PyThreadState));
    EQ(L->ts.next, offsetof(PyThreadState, next));
    EQ(L->ts.interp, offsetof(PyThreadState, interp));
    EQ(L->ts.thread_id, offsetof(PyThreadState, thread_id));
#if PY_MINOR_VERSION <= 10
    EQ(L->ts.frame, offsetof(PyThreadState, frame));
#elif PY_MINOR_VERSION <= 12
    EQ(L->ts.cframe, offsetof(PyThreadState, cframe));
#else
    EQ(L->ts.frame, offsetof(PyThreadState, current_frame));
#endif
#if PY_MINOR_VERSION >= 11
    EQ(L->ts.native_id, offsetof(PyThreadState, native_thread_id));
    EQ(L->ts.datastack, offsetof(PyThreadState, datastack_chunk));
    EQ(L->co.qualname, offsetof(PyCodeObject, co_qualname));
#endif
    EQ(L->co.filename, offsetof(PyCodeObject, co_filename));
    EQ(L->co.name, offsetof(PyCodeObject, co_name));
    EQ(L->co.firstlineno, offsetof(PyCodeObject, co_firstlineno));
#if PY_MINOR_VERSION >= 10
    EQ(L->co.linetable, offsetof(PyCodeObject, co_linetable));
#else
    EQ(L->co.linetable, offsetof(PyCodeObject, co_lnotab));
#endif
}
END_TEST

/* The GIL prober's fields, the pthread-sized ones among them. */
START_TEST(test_gil)
{
    const struct py_layout *L = layout();

    EQ(L->gil.last_holder, offsetof(struct _gil_runtime_state, last_holder));
    EQ(L->gil.locked, offsetof(struct _gil_runtime_state, locked));
    EQ(L->gil.switch_number, offsetof(struct _gil_runtime_state, switch_number));
    EQ(L->gil.cond, offsetof(struct _gil_runtime_state, cond));
    EQ(48, sizeof(pthread_cond_t)); /* pygil.c's COND_SIZE */
#if PY_MINOR_VERSION == 8
    EQ(L->gil.drop_off, offsetof(_PyRuntimeState, ceval.gil_drop_request));
    EQ(L->gil.gc_off, offsetof(_PyRuntimeState, gc.collecting));
#elif PY_MINOR_VERSION <= 12
    EQ(L->gil.drop_off, offsetof(PyInterpreterState, ceval.gil_drop_request));
    EQ(L->gil.gc_off, offsetof(PyInterpreterState, gc.collecting));
#else
    EQ(L->gil.drop_off, offsetof(PyThreadState, eval_breaker));
#endif
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pyabi_arch");
    TCase *tc = tcase_create("tables");

    tcase_add_test(tc, test_runtime_interp);
    tcase_add_test(tc, test_tstate_code);
    tcase_add_test(tc, test_gil);
    suite_add_tcase(s, tc);
    return ts_run(s);
}
