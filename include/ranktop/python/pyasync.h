/* asyncio tasks of a Python process, read from outside: collectors/python/pyasync.c.
 *
 * For a struct pyproc attached to a process, the tasks of its asyncio event loops, read from
 * the task registries asyncio keeps (CPython 3.8-3.13; 3.14 and 3.15, GIL and free-threaded:
 * the per-thread task lists its _AsyncioDebug describes; C Task objects of the _asyncio module),
 * with each task's name, state, loop thread, coroutine chain (the await stack) and the tasks
 * that await it. Read-only, bounded, validated reads; owned by the thread that owns the pyproc. */
#ifndef RANKTOP_PYASYNC_H
#define RANKTOP_PYASYNC_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_PYTHON)
#error "ranktop/python/pyasync.h belongs to collectors/python/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/base/status.h"

struct pyproc;

/* Most tasks taken from the registries in one read, most coroutines followed in one await
 * chain. Of those tasks one read reads at most PYASYNC_THREAD_TASKS per loop (per thread
 * running a loop) and stops reading more once the names and frames read reach
 * PYASYNC_MAX_BYTES: what a read costs stays bounded whatever the process holds, and the
 * tasks left out are counted (pyasync_list.not_read), never silently dropped. */
#define PYASYNC_MAX_TASKS 100000
#define PYASYNC_MAX_CHAIN 256
#define PYASYNC_THREAD_TASKS 1000
#define PYASYNC_MAX_BYTES (4u << 20)

enum pyasync_state { PYASYNC_PENDING, PYASYNC_RUNNING, PYASYNC_DONE, PYASYNC_CANCELLED };

struct pyasync_frame {
    char *function; /* co_qualname (3.11+) or co_name, UTF-8 */
    char *file;
    int line; /* 0 when the line table has none for the offset */
};

struct pyasync_task {
    uint64_t addr;   /* the remote Task object */
    uint64_t thread; /* ident (threading.get_ident()) of the thread running its loop; 0 unknown */
    char *name;      /* Task.get_name() as UTF-8 */
    enum pyasync_state state;
    size_t *awaited_by; /* indices into the list of the tasks that await this one */
    size_t nawaited_by;
    struct pyasync_frame *frames; /* the coroutine chain, innermost first */
    size_t nframes;
    bool chain_truncated; /* PYASYNC_MAX_CHAIN was reached */
};

struct pyasync_list {
    struct pyasync_task *tasks;
    size_t n;
    size_t not_read; /* tasks found but left out by the caps above */
};

/* Reads the asyncio tasks of the main interpreter of p's process into *out (free with
 * pyasync_free). No asyncio imported, or no tasks, is 0 tasks and status 0. Returns
 * APP_E_VERSION (with a one-line reason in err) for versions or builds whose task layout is
 * not known, APP_E_STALE when the registries kept changing under every retry, or an rmem
 * status (APP_E_GONE, APP_E_PERM). */
int pyasync_read(struct pyproc *p, struct pyasync_list *out, struct app_err *err);

void pyasync_free(struct pyasync_list *l);

/* "pending", "running", "done", "cancelled". */
const char *pyasync_state_name(enum pyasync_state s);

#endif
