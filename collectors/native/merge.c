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
#include "native_priv.h"

#include "ranktop/util.h"

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
    return false;
}

void native_merge(const struct native_stack *nat, const struct pythread *py,
                  struct merged_frame **out, size_t *n)
{
    size_t cap = nat->n + (py ? py->nframes : 0) + 1, k = 0;
    uint32_t p = 0, np = py ? py->nframes : 0;
    struct merged_frame *m = x_calloc(cap, sizeof(*m));

    for (size_t i = 0; i < nat->n; i++) {
        const struct native_frame *f = &nat->frames[i];

        if (f->eval) {
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
    *out = m;
    *n = k;
}
