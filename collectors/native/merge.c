/* A thread's native and Python stacks as one, innermost first, the way py-spy and austinp
 * show them: every evaluation-loop frame is replaced in place by the Python frames it runs --
 * from the next Python frame up to and including the next entry frame (the outermost Python
 * frame of that C-level call) -- other interpreter frames are dropped unless they show where
 * the thread blocks (sleeping, waiting for a lock or the GIL, collecting garbage), and frames
 * outside the interpreter stay, except the thread start machinery.
 *
 * When the two do not line up (the unwind stopped early, or a Python frame was popped while
 * its evaluation call is still on the C stack) nothing is lost: the Python frames left over
 * follow the native ones. Pure; any thread. */
#include "arch.h"
#include "native_priv.h"

#include "ranktop/base/util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Interpreter frames worth keeping: where a thread waits. */
static bool interp_kept(const char *fn)
{
    static const char *const keep[] = {"time_sleep",
                                       "pysleep",
                                       "PyThread_acquire_lock",
                                       "acquire_timed",
                                       "lock_PyThread_acquire_lock",
                                       "take_gil",
                                       "drop_gil",
                                       "PyGILState",
                                       "gc_collect",
                                       "select_select",
                                       "os_read",
                                       "os_waitpid"};

    for (size_t i = 0; fn && i < sizeof(keep) / sizeof(keep[0]); i++)
        if (!strncmp(fn, keep[i], strlen(keep[i])))
            return true;
    return false;
}

/* The frames that start a process or a thread. glibc names that code by several aliases
 * (clone3, __clone3 and the hidden __GI___clone3 at one address); which one a frame shows
 * depends on the symbols at hand -- libc6-dbg's full table adds the hidden ones -- so the
 * hidden prefix is dropped before the names are compared. */
static bool start_machinery(const char *fn)
{
    static const char *const start[] = {"_start",
                                        "__libc_start_main",
                                        "__libc_start_main_impl",
                                        "__libc_start_call_main",
                                        "clone",
                                        "__clone",
                                        "clone3",
                                        "__clone3",
                                        "__clone_internal",
                                        "start_thread"};

    if (!fn)
        return false;
    if (!strncmp(fn, "__GI_", 5))
        fn += 5;
    for (size_t i = 0; i < sizeof(start) / sizeof(start[0]); i++)
        if (!strcmp(fn, start[i]))
            return true;
    return arch_is_thread_start(fn);
}

/* Where the evaluation calls are when no frame is named as one: a stripped interpreter whose
 * compiler moved the loop into a local clone (Debian's 3.14 and 3.15, GCC 16, run the loop in
 * an unnamed part of _PyEval_EvalFrameDefault called straight from PyEval_EvalCode and the
 * vectorcall paths). Each maximal run of interpreter frames with an unnamed frame may hold
 * one; a run without one cannot (its frames are all named, none the loop). The Python stack
 * says how many there are (its entry frames), and the outermost runs take them, innermost
 * unnamed frame first: inner runs are the likelier to be interpreter code that runs no Python
 * (taking the GIL back after a C call). A run that holds two (Python -> a builtin -> Python
 * without foreign frames between) shows its inner Python frames further out. */
static bool in_run(const struct native_frame *f)
{
    return f->interp && !start_machinery(f->function);
}

static void guess_evals(const struct native_stack *nat, const struct pythread *py, bool *eval)
{
    size_t want = 0, have = 0, i = nat->n;

    for (uint32_t j = 0; j < py->nframes; j++)
        want += py->frames[j].entry;
    if (!want)
        want = 1;
    while (i > 0 && have < want) { /* outermost run first */
        size_t pick = SIZE_MAX;

        if (!in_run(&nat->frames[--i]))
            continue;
        for (;;) { /* inward to the run's innermost frame */
            if (!nat->frames[i].function)
                pick = i;
            if (i == 0 || !in_run(&nat->frames[i - 1]))
                break;
            i--;
        }
        if (pick != SIZE_MAX) {
            eval[pick] = true;
            have++;
        }
    }
}

void native_merge(const struct native_stack *nat, const struct pythread *py,
                  struct merged_frame **out, size_t *n)
{
    size_t cap = nat->n + (py ? py->nframes : 0) + 1, k = 0;
    uint32_t p = 0, np = py ? py->nframes : 0;
    struct merged_frame *m = x_calloc(cap, sizeof(*m));
    bool *eval = x_calloc(nat->n + 1, sizeof(*eval)), named = false;

    for (size_t i = 0; i < nat->n; i++)
        named |= eval[i] = nat->frames[i].eval;
    if (!named && np)
        guess_evals(nat, py, eval);
    for (size_t i = 0; i < nat->n; i++) {
        const struct native_frame *f = &nat->frames[i];

        if (eval[i]) {
            /* The Python frames this call runs: up to and including its entry frame. */
            while (p < np) {
                bool entry = py->frames[p].entry;

                m[k++] = (struct merged_frame){false, &py->frames[p++], NULL};
                if (entry)
                    break;
            }
            continue;
        }
        if ((f->interp && !interp_kept(f->function)) || start_machinery(f->function))
            continue;
        m[k++] = (struct merged_frame){true, NULL, f};
    }
    while (p < np) /* not lined up: what is left of the Python stack follows */
        m[k++] = (struct merged_frame){false, &py->frames[p++], NULL};
    free(eval);
    *out = m;
    *n = k;
}
