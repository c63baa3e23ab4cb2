/* The pure decoders of pyasync.c (asyncio tasks), shared with the unit tests that feed them
 * hand-made buffers: a set's header and table, and one step of a coroutine chain; and the
 * pieces that pyasync.c (3.8-3.13) and pyasync14.c (3.14+) both run. */
#ifndef RANKTOP_PYASYNC_PRIV_H
#define RANKTOP_PYASYNC_PRIV_H

#include "abi/pyabi.h"
#include "ranktop/python/pyasync.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PYASYNC_SET_HDR 48      /* PySetObject: ob_type 8, fill 16, used 24, mask 32, table 40 */
#define PYASYNC_SET_MAX_LOG2 20 /* 1M slots */
#define PYASYNC_FRAME_READ 128  /* bytes of a 3.8-3.10 PyFrameObject copied */

/* Field offsets of one minor's TaskObj, coroutine and frame (x86-64, GIL builds); -1 where the
 * version has no such field. */
struct async_offsets {
    int minor;
    int16_t loop, state, waiter, coro, name;     /* TaskObj (FutureObj_HEAD first) */
    int16_t gi_frame;                            /* 3.8-3.10: PyFrameObject *gi_frame */
    int16_t gi_iframe, gi_state;                 /* 3.11+: embedded frame, int8 gi_frame_state */
    int16_t f_stacktop;                          /* 3.8/3.9: NULL unless suspended */
    int16_t f_valuestack, f_stackdepth, f_state; /* 3.10 */
    int16_t if_stacktop, if_localsplus;          /* 3.11+ _PyInterpreterFrame */
    /* 3.11/3.12: FRAME_SUSPENDED covers yield and await alike; as in _PyGen_yf, the code unit
     * after the last instruction must be RESUME (or its quickened / instrumented form) with an
     * oparg >= 2 for the value stack's top to be the awaited object. -1 elsewhere. */
    int16_t resume_op, resume_op2;
};

/* The offsets of 3.<minor>; NULL for versions whose task layout is not known. */
const struct async_offsets *pyasync_offsets(int minor);

struct pyasync_set {
    uint64_t mask, table;
    int64_t used;
};

/* Checks a copied PySetObject header; 0 or APP_E_STALE. */
int pyasync_set_header(const uint8_t *h, struct pyasync_set *s);

/* The live keys of a copied set table (s->mask + 1 entries {key, hash}) into keys, which has
 * room for s->mask + 1; empty slots and dummies (hash -1) are skipped. APP_E_STALE when a key
 * is not a plausible pointer or there are more live keys than s->used. */
int pyasync_set_table(const uint8_t *tab, const struct pyasync_set *s, uint64_t *keys, size_t *n);

/* One coroutine of an await chain. */
struct pyasync_step {
    uint64_t code; /* its code object; 0 when it has no frame any more (finished) */
    long q;        /* byte offset of its instruction; -1 when not started */
    uint64_t slot; /* where the awaited object's pointer lies (its value stack's top) when it is
                    * suspended in an await, else 0 */
    uint64_t resume_at; /* 3.11/3.12: the code unit that must pass pyasync_resume_await for
                         * slot to be used; 0 when no check is needed */
};

/* Whether the code unit (opcode in the low byte, oparg in the high one) is a RESUME after an
 * await or yield from, in the layout A. */
bool pyasync_resume_await(const struct async_offsets *A, uint16_t unit);

/* Bytes of a 3.11+ coroutine object that pyasync_step_new decodes. */
size_t pyasync_coro_bytes(const struct async_offsets *A);

/* 3.11-3.13: decodes c, a copy of the coroutine at remote address coro. 0 or APP_E_STALE.
 * (3.14+ coroutines are decoded by pyasync14.c with the target's own offsets.) */
int pyasync_step_new(const struct async_offsets *A, const struct py_layout *L, const uint8_t *c,
                     uint64_t coro, struct pyasync_step *s);

/* 3.14+: the _asyncio module's _AsyncioDebug (_Py_AsyncioModuleDebugOffsets): 13 u64, the
 * TaskObj group (size, task_name, task_awaited_by, task_is_task, task_awaited_by_is_set,
 * task_coro, task_node), the interpreter group (size, asyncio_tasks_head) and the
 * _PyThreadStateImpl group (size, asyncio_running_loop, asyncio_running_task,
 * asyncio_tasks_head). */
#define PYASYNC_DEBUG_BYTES 104

struct pyasync_debug {
    uint32_t t_size, t_name, t_awaited_by, t_is_task, t_ab_is_set, t_coro, t_node, t_state;
    uint32_t is_head, ts_loop, ts_task, ts_head;
};

/* Checks and takes a copy of _AsyncioDebug: every offset inside the struct it names, and the
 * TaskObj order of the 3.14 sources (awaited_by, then the int fut_state, then is_task and
 * awaited_by_is_set), from which t_state (not exported) is taken. 0 or APP_E_VERSION. */
int pyasync_debug_parse(const uint8_t *b, struct pyasync_debug *d);

/* pyasync_read for 3.14 and later (pyasync14.c): the per-thread task lists of _AsyncioDebug,
 * GIL and free-threaded builds. */
struct pyproc;
int pyasync_read14(struct pyproc *p, struct pyasync_list *out, struct app_err *err);

/* 3.8-3.10: decodes f, a copy (PYASYNC_FRAME_READ bytes) of the coroutine's frame. */
int pyasync_step_old(const struct async_offsets *A, const struct py_layout *L, const uint8_t *f,
                     struct pyasync_step *s);

/* What the two readers (pyasync.c for 3.8-3.13, pyasync14.c) share, defined in pyasync.c. */
struct pyproc;
struct rmem;

/* The live keys of the set at addr (its header sh bytes further than a GIL build's: 0, or 16
 * free-threaded), appended to *keys; the header is read again afterwards, so that a set that
 * changed meanwhile is a retry (APP_E_STALE). */
int pyasync_set_keys(struct rmem *m, uint64_t addr, uint32_t sh, uint64_t **keys, size_t *n);

/* One step of an await chain, read by the caller's reader (ctx): decodes the object at coro
 * into s and sets *next to the awaited object (0: none); *more false when coro is not a
 * coroutine or generator (the chain ends before it). */
typedef int pyasync_step_fn(void *ctx, uint64_t coro, struct pyasync_step *s, uint64_t *next,
                            bool *more);

/* Follows the await chain from a task's coroutine with fn, resolves the codes in p's cache
 * and fills t->frames (innermost first), t->nframes and t->chain_truncated. */
int pyasync_chain_read(struct pyproc *p, pyasync_step_fn *fn, void *ctx, uint64_t coro,
                       struct pyasync_task *t);

/* Bytes of a type's name that pyasync_type_read copies (with its NUL). */
#define PYASYNC_TYPE_NAME 40

/* One step up a type's tp_base chain: the start of its tp_name into name (PYASYNC_TYPE_NAME
 * bytes, NUL-terminated) and its tp_base into *base; the type's fields lie sh bytes further than
 * a GIL build's. 0, or a negative status (APP_E_STALE for a bad pointer or an empty name). */
int pyasync_type_read(struct rmem *m, uint64_t t, uint32_t sh, char *name, uint64_t *base);

/* The index of the element holding addr in v, n elements of size bytes sorted by address, each
 * starting with its uint64_t address; SIZE_MAX when none does. */
size_t pyasync_task_index(const void *v, size_t n, size_t size, uint64_t addr);

/* The main interpreter: the last of the list (new interpreters are pushed at its head). */
int pyasync_main_interp(struct pyproc *p, uint64_t *interp);

/* Records that t is awaited by the task at index by. */
void pyasync_awaited_add(struct pyasync_task *t, size_t by);

/* What a task read costs, as PYASYNC_MAX_BYTES counts it: its record, name and frames. */
size_t pyasync_task_bytes(const struct pyasync_task *t);

#endif
