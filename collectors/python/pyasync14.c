/* asyncio tasks of CPython 3.14 and later (GIL and free-threaded builds), the half of
 * pyasync_read that pyasync.c hands over for minor >= 14.
 *
 * These versions have no registry sets: the _asyncio module links every native task into an
 * intrusive list (TaskObj.task_node, a struct llist_node {next, prev}) headed in the
 * _PyThreadStateImpl of the thread that created it (tasks of exited threads: in the
 * interpreter's list), and exports the offsets in _AsyncioDebug (the .AsyncioDebug section,
 * found in the mapped _asyncio extension, the interpreter or libpython). Its 13 fields are the
 * same in 3.14 and 3.15, GIL and free-threaded; only the values move. Those lists are walked
 * with every node checked against its neighbour (prev); the thread's asyncio_running_task is
 * the running one; awaited_by is TaskObj's own task_awaited_by (a task or a set of them); the
 * await chain follows each coroutine's embedded frame with the generator and frame offsets of
 * the target's _Py_DebugOffsets (gen_object, interpreter_frame.localsplus/.stackpointer),
 * whose slots are found by matching the shape the stack reader took (the slots of
 * interpreter_frame.size and .owner must hold the values the layout has).
 *
 * What changes between the versions and builds read here:
 * - 3.15 renumbered the generator frame states (gh-144409, in 3.15.0a7: CREATED 0, SUSPENDED
 *   1, SUSPENDED_YIELD_FROM 2, the free-threaded SUSPENDED_YIELD_FROM_LOCKED 3 while another
 *   thread reads gi_yieldfrom, EXECUTING 4, CLEARED 5; 3.14: -3, -2, -1, -, 0, COMPLETED 1,
 *   CLEARED 4). Earlier 3.15 alphas are refused by name (where the renumbering landed among
 *   them is not known here).
 * - 3.15.0a8 (gh-146120, SEND fed by GET_ITER) leaves a NULL on top of a coroutine suspended
 *   in an await: the awaited object is stackpointer[-2], not [-1].
 * - Free-threaded builds (3.14t, 3.15t): every object header is 32 bytes (ob_tid, flags,
 *   mutex, gc bits, ob_ref_local, ob_ref_shared, then ob_type at 24), so the type's tp_name and
 *   tp_base, a set's fill/used/mask/table and an int's lv_tag/digits sit 16 bytes further;
 *   TaskObj (which ends in task_tid) and the coroutine are described by the target itself; a
 *   coroutine frame with tlbc_index != 0 runs its thread's copy of the bytecode
 *   (co_tlbc->entries[tlbc_index]), from which its instruction offset is taken.
 * 3.13t keeps the registries of 3.13, reached through dicts and weak sets whose free-threaded
 * layouts this reader does not know: refused by name (pyasync.c). Runs on the pyproc's owner
 * thread; every loop is bounded (the list walks at WALK_MAX nodes); a list that changes under
 * the read is retried, then APP_E_STALE, never a mixed answer. The caps of pyasync.h hold as in
 * pyasync.c: a task counts in the share of the thread that runs its loop (the tasks of loops no
 * thread runs in one share together), and those left out are counted in not_read. */
#include "pyproc_priv.h"

#include "pyasync_priv.h"
#include "pynames.h"
#include "pystr.h"
#include "ranktop/base/bytes.h"
#include "ranktop/proc/elfsym.h"
#include "ranktop/proc/procmaps.h"
#include "ranktop/python/pyasync.h"
#include "ranktop/base/util.h"

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TYPE_DEPTH 8
#define TYPE_CACHE 64
#define TRIES 5
#define TLBC_MAX 4096
#define CORO_MAX 256 /* bytes of a coroutine (with its frame's header) copied */
/* Most list nodes one read walks, over all lists: as many tasks as the largest registry set
 * the 3.8-3.13 reader takes (PYASYNC_SET_MAX_LOG2). Past it the read is refused (APP_E_LIMIT)
 * rather than counted on: a list that has not come back to its head cannot be checked. */
#define WALK_MAX (1u << PYASYNC_SET_MAX_LOG2)

/* The first 3.15 whose frame states this reader knows, and the first that leaves a NULL above
 * the awaited object. */
#define V315_STATES 0x030f00a7u
#define V315_NULL_TOP 0x030f00a8u

/* Where one _Py_DebugOffsets shape keeps the slots the chain needs; the shape is the one whose
 * interpreter_frame.size and .owner slots hold the layout's values. */
static const struct dbg_slots {
    int minor;
    uint16_t fr_size, fr_owner, fr_localsplus, fr_stackpointer, gen;
} SLOTS[] = {
    {14, 248, 288, 280, 296, 664}, /* 3.14: gen_object after gc {size, collecting} */
    {15, 312, 352, 344, 360, 792}, /* 3.15: after gc's frame and generation stats */
    {15, 304, 344, 336, 352, 728}, /* 3.15 alphas: gc {size, collecting, frame} */
};

enum kind14 { K_OTHER, K_TASK, K_CORO, K_GEN, K_INT, K_STR };

/* Everything one read needs besides the pyproc. */
struct a14 {
    struct pyproc *p;
    struct rmem *m;
    const struct py_layout *L;
    struct pyasync_debug d;
    uint32_t sh; /* how much larger the object header is: 0, or 16 free-threaded */
    uint32_t gi_iframe, gi_state, if_sp, if_lp;
    int depth;               /* the awaited object is stackpointer[-depth] */
    int8_t st_yf, st_locked; /* frame states of a coroutine suspended in an await */
    int8_t st_min, st_max;   /* the valid states */
    int8_t st_finished;      /* states >= this one have no frame any more */
    struct {
        uint64_t type;
        enum kind14 kind;
    } types[TYPE_CACHE];
    size_t ntypes;
    /* The loop each thread runs (asyncio_running_loop), collected with the lists: a task's
     * thread is the one running its loop, as asyncio itself sees it; a task whose loop no
     * thread runs (never run, or stopped) has no known thread, whichever list holds it. */
    struct {
        uint64_t loop, ident;
        size_t nread; /* its tasks kept so far (PYASYNC_THREAD_TASKS) */
    } * loops;
    size_t nloops;
    size_t nread_idle; /* tasks kept whose loop no thread runs: one share for all of them */
    size_t walked;     /* list nodes walked (WALK_MAX) */
    size_t not_read;   /* tasks left out by a cap */
    size_t bytes;      /* names and frames read (PYASYNC_MAX_BYTES) */
};

/* A thread state as collect found it: its list's head, running loop and task, ident. */
struct tstate {
    uint64_t ts, loop, task, ident;
};

/* A task found on a list, with the thread whose list holds it (0: the interpreter's list of
 * tasks left by exited threads) and whether that thread runs it now. */
struct tref {
    uint64_t addr, ident;
    bool running;
};

/* A task's fields as read: awaited_by (a task, or a set when ab_set), coro, name, state. */
struct raw14 {
    uint64_t addr, ab, coro, name;
    bool ab_set;
    int state;
};

static int read_u64(struct rmem *m, uint64_t addr, uint64_t *out)
{
    return rmem_read(m, addr, out, sizeof(*out));
}

static enum kind14 name_kind(const char *s, int depth)
{
    static const struct {
        const char *name;
        enum kind14 kind;
        bool base; /* also matches as a base class */
    } known[] = {{"_asyncio.Task", K_TASK, true},
                 {"coroutine", K_CORO, false},
                 {"generator", K_GEN, false},
                 {"int", K_INT, false},
                 {"str", K_STR, false}};

    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if ((depth == 0 || known[i].base) && strcmp(s, known[i].name) == 0)
            return known[i].kind;
    return K_OTHER;
}

/* Classifies a type by tp_name up the tp_base chain (bounded); cached for the read. */
static int type_kind(struct a14 *a, uint64_t type, enum kind14 *out)
{
    uint64_t t = type;
    enum kind14 k = K_OTHER;

    for (size_t i = 0; i < a->ntypes; i++)
        if (a->types[i].type == type)
            return *out = a->types[i].kind, 0;
    for (int depth = 0; depth < TYPE_DEPTH && t && k == K_OTHER; depth++) {
        char name[PYASYNC_TYPE_NAME];
        int st = pyasync_type_read(a->m, t, a->sh, name, &t);

        if (st < 0)
            return st;
        k = name_kind(name, depth);
    }
    if (a->ntypes < TYPE_CACHE) {
        a->types[a->ntypes].type = type;
        a->types[a->ntypes++].kind = k;
    }
    *out = k;
    return 0;
}

static int obj_kind(struct a14 *a, uint64_t obj, enum kind14 *out)
{
    uint64_t type = 0;
    int st;

    if (!bytes_ptr_ok(obj))
        return APP_E_STALE;
    st = read_u64(a->m, obj + a->L->ob_type, &type);
    return st < 0 ? st : type_kind(a, type, out);
}

/* A non-negative int of at most three 30-bit digits (3.12+ lv_tag: digit count << 3, sign in
 * the low bits); anything else is torn data. */
static int long_read(struct a14 *a, uint64_t obj, uint64_t *val)
{
    uint8_t b[40 + 16];
    uint64_t tag;
    size_t nd;
    int st = rmem_read(a->m, obj, b, 36 + a->sh);

    if (st < 0)
        return st;
    tag = bytes_load_u64(b + 16 + a->sh);
    nd = (size_t)(tag >> 3);
    if ((tag & 3) == 2 || nd > 3)
        return APP_E_STALE;
    *val = 0;
    for (size_t i = nd; (tag & 3) == 0 && i-- > 0;) {
        uint32_t dg = bytes_load_u32(b + 24 + a->sh + 4 * i);

        if (dg >> 30)
            return APP_E_STALE;
        *val = *val << 30 | dg;
    }
    return 0;
}

/* Task.get_name(): a str, or the int N of "Task-N" (the formatting is deferred). */
static int task_name(struct a14 *a, uint64_t obj, char **out)
{
    enum kind14 k = K_OTHER;
    uint64_t v = 0;
    int st = obj_kind(a, obj, &k);
    char buf[32];

    if (st == 0 && k == K_STR) {
        *out = pystr_read(a->m, a->L, obj, &st);
        return *out ? 0 : st < 0 ? st : APP_E_STALE;
    }
    if (st == 0 && k != K_INT)
        st = APP_E_STALE;
    if (st == 0)
        st = long_read(a, obj, &v);
    if (st == 0) {
        snprintf(buf, sizeof(buf), "Task-%llu", (unsigned long long)v);
        *out = x_strdup(buf);
    }
    return st;
}

/* Free-threaded: the offset of instr in the thread's copy entries[idx] of the code's
 * _PyCodeArray {Py_ssize_t size; char *entries[]}. */
static int tlbc_q(struct a14 *a, uint64_t code, int32_t idx, uint64_t instr, long *q)
{
    uint64_t arr = 0, size = 0, base = 0;
    struct rmem_iov iov[2];
    int st;

    if (idx < 0 || idx >= TLBC_MAX || a->L->co.tlbc <= 0)
        return APP_E_STALE;
    st = read_u64(a->m, code + (uint64_t)a->L->co.tlbc, &arr);
    if (st == 0 && !bytes_ptr_ok(arr))
        st = APP_E_STALE;
    if (st == 0) {
        iov[0] = (struct rmem_iov){arr, &size, 8};
        iov[1] = (struct rmem_iov){arr + 8 + 8 * (uint64_t)idx, &base, 8};
        st = rmem_readv(a->m, iov, 2, NULL);
    }
    if (st < 0)
        return st;
    if ((uint64_t)idx >= size || size > TLBC_MAX || !bytes_ptr_ok(base) || instr < base)
        return APP_E_STALE;
    *q = (long)(instr - base);
    return 0;
}

/* Decodes c, a copy of the coroutine at coro: its code and instruction offset, and where the
 * awaited object lies when it is suspended in an await (0 otherwise). */
static int decode(struct a14 *a, const uint8_t *c, uint64_t coro, struct pyasync_step *s)
{
    const struct py_layout *L = a->L;
    const uint8_t *f = c + a->gi_iframe;
    int8_t state = (int8_t)c[a->gi_state];
    uint64_t instr, base, sp;
    int32_t idx = L->fr.tlbc > 0 ? bytes_load_i32(f + L->fr.tlbc) : 0;
    int st = 0;

    *s = (struct pyasync_step){0, -1, 0, 0};
    if (state < a->st_min || state > a->st_max)
        return APP_E_STALE;
    if (state == a->st_locked && state != a->st_yf && !L->free_threaded)
        return APP_E_STALE;      /* SUSPENDED_YIELD_FROM_LOCKED: free-threaded builds only */
    if (state >= a->st_finished) /* completed or cleared: no frame */
        return 0;
    if (f[L->fr.owner] != L->fr.owner_gen) /* the embedded frame is the generator's */
        return APP_E_STALE;
    s->code = bytes_load_u64(f + L->fr.code) & ~(uint64_t)7; /* a tagged _PyStackRef */
    instr = bytes_load_u64(f + L->fr.instr);
    if (!bytes_ptr_ok(s->code))
        return APP_E_STALE;
    base = s->code + (uint64_t)L->co.code_adaptive;
    if (instr && idx != 0)
        st = tlbc_q(a, s->code, idx, instr, &s->q);
    else if (instr && instr < base)
        st = APP_E_STALE;
    else if (instr)
        s->q = (long)(instr - base);
    if (st < 0 || (state != a->st_yf && (state != a->st_locked || !L->free_threaded)))
        return st;
    base = coro + a->gi_iframe + a->if_lp;
    sp = bytes_load_u64(f + a->if_sp);
    if (sp < base + 8 * (uint64_t)a->depth || sp > base + 8 * (1u << 16) || (sp & 7))
        return APP_E_STALE;
    s->slot = sp - 8 * (uint64_t)a->depth;
    return 0;
}

/* One step of the chain: stops unless coro is a coroutine or generator (*more false). */
static int step(void *ctx, uint64_t coro, struct pyasync_step *s, uint64_t *next, bool *more)
{
    struct a14 *a = ctx;
    uint8_t buf[CORO_MAX];
    size_t want = a->gi_iframe + a->if_lp;
    enum kind14 k = K_OTHER;
    long got;
    int st;

    *next = 0;
    *more = false;
    *s = (struct pyasync_step){0, -1, 0, 0};
    if (!bytes_ptr_ok(coro))
        return APP_E_STALE;
    got = rmem_read_some(a->m, coro, buf, want); /* a smaller object may end a page */
    if (got < 0 || (size_t)got < a->L->ob_type + 8)
        return got < 0 ? (int)got : APP_E_STALE;
    st = type_kind(a, bytes_load_u64(buf + a->L->ob_type), &k);
    if (st < 0 || (k != K_CORO && k != K_GEN))
        return st;
    *more = true;
    if ((size_t)got < want)
        return APP_E_STALE;
    st = decode(a, buf, coro, s);
    if (st < 0 || !s->slot)
        return st;
    st = read_u64(a->m, s->slot, next);
    *next &= ~(uint64_t)7; /* a _PyStackRef: the low bits are tags */
    return st;
}

int pyasync_debug_parse(const uint8_t *b, struct pyasync_debug *d)
{
    uint64_t v[13];

    for (int i = 0; i < 13; i++)
        v[i] = bytes_load_u64(b + 8 * i);
    if (v[0] < 64 || v[0] > 512 || v[7] < 64 || v[7] > (64u << 20) || v[9] < 64 || v[9] > 65536)
        return APP_E_VERSION;
    for (int i = 1; i <= 6; i++)
        if (v[i] < 16 || v[i] + (i == 6 ? 16 : 8) > v[0])
            return APP_E_VERSION;
    /* TaskObj: ... PyObject *awaited_by; fut_state state; char is_task, awaited_by_is_set */
    if (v[3] != v[2] + 12 || v[4] != v[3] + 1 || v[8] + 16 > v[7] || v[10] + 8 > v[9] ||
        v[11] + 8 > v[9] || v[12] + 16 > v[9])
        return APP_E_VERSION;
    *d =
        (struct pyasync_debug){(uint32_t)v[0], (uint32_t)v[1],  (uint32_t)v[2],  (uint32_t)v[3],
                               (uint32_t)v[4], (uint32_t)v[5],  (uint32_t)v[6],  (uint32_t)v[3] - 4,
                               (uint32_t)v[8], (uint32_t)v[10], (uint32_t)v[11], (uint32_t)v[12]};
    return 0;
}

/* The generator and frame offsets of the chain walk, from the target's _Py_DebugOffsets
 * (the shape whose frame slots hold the layout's values), and the frame-state numbering and
 * await slot of its version. 0 or APP_E_VERSION. */
static int chain_offsets(struct a14 *a)
{
    uint8_t b[PYABI_DEBUG_OFFSETS_MAX];
    const struct dbg_slots *s = NULL;
    uint64_t lp, sp, gsize, iframe, state;
    int st = rmem_read(a->m, a->p->runtime, b, sizeof(b));

    if (st < 0)
        return st;
    for (size_t i = 0; !s && i < sizeof(SLOTS) / sizeof(SLOTS[0]); i++)
        if (SLOTS[i].minor == a->L->minor &&
            bytes_load_u64(b + SLOTS[i].fr_size) == a->L->fr.size &&
            bytes_load_u64(b + SLOTS[i].fr_owner) == a->L->fr.owner)
            s = &SLOTS[i];
    if (!s)
        return APP_E_VERSION;
    lp = bytes_load_u64(b + s->fr_localsplus);
    sp = bytes_load_u64(b + s->fr_stackpointer);
    gsize = bytes_load_u64(b + s->gen);
    iframe = bytes_load_u64(b + s->gen + 16);
    state = bytes_load_u64(b + s->gen + 24);
    /* Every frame field the decoder reads lies in the frame's header, before localsplus. */
    if (lp < 16 || lp > 128 || lp > a->L->fr.size || sp + 8 > lp || a->L->fr.owner >= lp ||
        a->L->fr.code + 8 > lp || a->L->fr.instr + 8 > lp || a->L->fr.tlbc + 4 > (int64_t)lp ||
        iframe < a->L->ob_type + 16 || iframe + lp > CORO_MAX || iframe + lp > gsize ||
        state < a->L->ob_type + 8 || state >= iframe)
        return APP_E_VERSION;
    a->gi_iframe = (uint32_t)iframe;
    a->gi_state = (uint32_t)state;
    a->if_lp = (uint32_t)lp;
    a->if_sp = (uint32_t)sp;
    if (a->L->minor == 14) /* CREATED -3 ... EXECUTING 0, COMPLETED 1, CLEARED 4 */
        a->st_min = -3, a->st_max = 4, a->st_yf = -1, a->st_locked = -1, a->st_finished = 1;
    else /* CREATED 0, SUSPENDED 1, YIELD_FROM 2, YIELD_FROM_LOCKED 3, EXECUTING 4, CLEARED 5 */
        a->st_min = 0, a->st_max = 5, a->st_yf = 2, a->st_locked = 3, a->st_finished = 5;
    a->depth = a->p->version_hex >= V315_NULL_TOP ? 2 : 1;
    return 0;
}

/* Makes room in the array v, holding n elements and grown by doubling, for one more. */
#define GROW(v, n)                                                                                 \
    do {                                                                                           \
        if ((n) == 0 || ((n) & ((n)-1)) == 0)                                                      \
            (v) = x_reallocarray((v), (n) ? (n)*2 : 8, sizeof(*(v)));                              \
    } while (0)

/* Whether a task of loop is kept: at most PYASYNC_THREAD_TASKS for each thread's running
 * loop, as many for all the tasks whose loop no thread runs together, and PYASYNC_MAX_TASKS
 * in all (kept so far: n). The others are counted in not_read. */
static bool keep(struct a14 *a, uint64_t loop, size_t n)
{
    size_t *nread = &a->nread_idle;

    for (size_t i = 0; loop && i < a->nloops; i++)
        if (a->loops[i].loop == loop)
            nread = &a->loops[i].nread;
    if (*nread >= PYASYNC_THREAD_TASKS || n >= PYASYNC_MAX_TASKS) {
        a->not_read++;
        return false;
    }
    ++*nread;
    return true;
}

/* The tasks of the circular list headed at head: each node must lie in a task (is_task set,
 * an _asyncio.Task type) whose prev is the node before it, and the head's prev the last one,
 * else the list changed or is garbage (APP_E_STALE). Every node is checked, those beyond the
 * caps too (keep), so that the count of the tasks left out is as sure as the tasks read; the
 * walks of one read take at most WALK_MAX nodes in all (APP_E_LIMIT), which also ends a list
 * torn into a cycle that never comes back to its head. */
static int list_walk(struct a14 *a, uint64_t head, struct tref ref, struct tref **v, size_t *n)
{
    const struct pyasync_debug *d = &a->d;
    uint64_t node[2], prev = head, cur;
    int st = rmem_read(a->m, head, node, sizeof(node));

    for (cur = node[0]; st == 0 && cur != head;) {
        uint8_t tb[512];
        uint64_t task = cur - d->t_node;
        enum kind14 k = K_OTHER;

        if (++a->walked > WALK_MAX)
            return APP_E_LIMIT;
        if (!bytes_ptr_ok(cur) || cur < d->t_node)
            return APP_E_STALE;
        st = rmem_read(a->m, task, tb, d->t_size);
        if (st == 0 && (bytes_load_u64(tb + d->t_node + 8) != prev || tb[d->t_is_task] != 1))
            st = APP_E_STALE;
        /* The type from the same copy: one read a node. */
        if (st == 0 && (st = type_kind(a, bytes_load_u64(tb + a->L->ob_type), &k)) == 0 &&
            k != K_TASK)
            st = APP_E_STALE;
        if (st == 0 && keep(a, bytes_load_u64(tb + a->L->ob_type + 8), *n)) { /* fut_loop */
            GROW(*v, *n);
            (*v)[(*n)++] = (struct tref){task, ref.ident, ref.running && ref.addr == task};
        }
        prev = cur;
        cur = bytes_load_u64(tb + d->t_node);
    }
    if (st == 0 && node[1] != prev)
        st = APP_E_STALE;
    return st == APP_E_GONE || st == APP_E_PERM || st == 0 ? st : APP_E_STALE;
}

/* The thread states of interp (at most PYPROC_DEFAULT_THREADS), with each running loop
 * added to a->loops. */
static int threads_read(struct a14 *a, uint64_t interp, struct tstate **t, size_t *nt)
{
    const struct py_layout *L = a->L;
    const struct pyasync_debug *d = &a->d;
    uint64_t ts = 0;
    int st = read_u64(a->m, interp + L->is.threads_head, &ts);

    while (st == 0 && ts) {
        struct tstate s = {ts, 0, 0, 0};
        struct rmem_iov iov[4] = {{ts + d->ts_loop, &s.loop, 8},
                                  {ts + d->ts_task, &s.task, 8},
                                  {ts + L->ts.thread_id, &s.ident, 8},
                                  {ts + L->ts.next, &ts, 8}};

        if (*nt == PYPROC_DEFAULT_THREADS || !bytes_ptr_ok(s.ts))
            return APP_E_STALE;
        st = rmem_readv(a->m, iov, 4, NULL);
        GROW(*t, *nt);
        (*t)[(*nt)++] = s;
        if (st == 0 && s.loop) {
            GROW(a->loops, a->nloops);
            a->loops[a->nloops].loop = s.loop;
            a->loops[a->nloops].ident = s.ident;
            a->loops[a->nloops++].nread = 0;
        }
    }
    return st;
}

/* Every thread's list (with its running task) and the interpreter's. The running loops are
 * all known before any list is walked: a task counts in the share of the thread that runs
 * its loop, whichever list holds it. */
static int collect(struct a14 *a, uint64_t interp, struct tref **v, size_t *n)
{
    struct tstate *t = NULL;
    size_t nt = 0;
    int st = threads_read(a, interp, &t, &nt);

    for (size_t i = 0; st == 0 && i < nt; i++)
        st = list_walk(a, t[i].ts + a->d.ts_head,
                       (struct tref){t[i].task, t[i].ident, t[i].loop != 0}, v, n);
    if (st == 0)
        st = list_walk(a, interp + a->d.is_head, (struct tref){0, 0, false}, v, n);
    free(t);
    return st;
}

static int cmp_tref(const void *x, const void *y)
{
    const struct tref *a = x, *b = y;

    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* The thread whose running loop is loop; 0 when none runs it. */
static uint64_t loop_thread(const struct a14 *a, uint64_t loop)
{
    for (size_t i = 0; loop && i < a->nloops; i++)
        if (a->loops[i].loop == loop)
            return a->loops[i].ident;
    return 0;
}

#define TASK_LEFT_OUT 1 /* task_read: PYASYNC_MAX_BYTES left the task out */

static int task_read(struct a14 *a, const struct tref *t, struct raw14 *r, struct pyasync_task *o)
{
    const struct pyasync_debug *d = &a->d;
    uint8_t b[512];
    int st;

    if (a->bytes >= PYASYNC_MAX_BYTES)
        return TASK_LEFT_OUT;
    if ((st = rmem_read(a->m, t->addr, b, d->t_size)) < 0)
        return st;
    *r = (struct raw14){t->addr,
                        bytes_load_u64(b + d->t_awaited_by),
                        bytes_load_u64(b + d->t_coro),
                        bytes_load_u64(b + d->t_name),
                        b[d->t_ab_is_set] != 0,
                        bytes_load_i32(b + d->t_state)};
    if (r->state < 0 || r->state > 2 || !bytes_ptr_ok(r->name) ||
        (r->coro && !bytes_ptr_ok(r->coro)) || (r->ab && !bytes_ptr_ok(r->ab)))
        return APP_E_STALE;
    o->addr = t->addr;
    o->thread = loop_thread(a, bytes_load_u64(b + a->L->ob_type + 8)); /* FutureObj's fut_loop */
    o->state = r->state == 1   ? PYASYNC_CANCELLED
               : r->state == 2 ? PYASYNC_DONE
               : t->running    ? PYASYNC_RUNNING
                               : PYASYNC_PENDING;
    st = task_name(a, r->name, &o->name);
    if (st == 0 && r->state == 0 && r->coro)
        st = pyasync_chain_read(a->p, step, a, r->coro, o);
    a->bytes += pyasync_task_bytes(o);
    return st;
}

/* The index of the task at addr in r (sorted by address), or SIZE_MAX. */
static size_t task_index(const struct raw14 *r, size_t n, uint64_t addr)
{
    return pyasync_task_index(r, n, sizeof(*r), addr);
}

/* awaited_by: the awaiting future or task itself, or a set of them. */
static int link_waiters(struct a14 *a, const struct raw14 *r, struct pyasync_list *l)
{
    int st = 0;

    for (size_t i = 0; st == 0 && i < l->n; i++) {
        uint64_t *keys = NULL;
        size_t nk = 0, j;

        if (!r[i].ab)
            continue;
        if (!r[i].ab_set) {
            if ((j = task_index(r, l->n, r[i].ab)) != SIZE_MAX)
                pyasync_awaited_add(&l->tasks[i], j);
            continue;
        }
        st = pyasync_set_keys(a->m, r[i].ab, a->sh, &keys, &nk);
        for (size_t k = 0; st == 0 && k < nk; k++)
            if ((j = task_index(r, l->n, keys[k])) != SIZE_MAX)
                pyasync_awaited_add(&l->tasks[i], j);
        free(keys);
    }
    return st;
}

static int read_once(struct a14 *a, uint64_t interp, struct pyasync_list *l)
{
    struct tref *v = NULL;
    size_t n = 0;
    struct raw14 *r = NULL;
    int st = collect(a, interp, &v, &n);

    if (st == 0 && n)
        qsort(v, n, sizeof(*v), cmp_tref);
    for (size_t i = 1; st == 0 && i < n; i++)
        if (v[i].addr == v[i - 1].addr) /* on two lists: one changed under the read */
            st = APP_E_STALE;
    if (st < 0)
        n = 0;
    l->tasks = x_calloc(n + 1, sizeof(*l->tasks));
    r = x_calloc(n + 1, sizeof(*r));
    /* Tasks left out leave no gap: the kept ones stay sorted for task_index. */
    for (size_t i = 0; st == 0 && i < n; i++) {
        st = task_read(a, &v[i], &r[l->n], &l->tasks[l->n]);
        if (st == TASK_LEFT_OUT) {
            a->not_read++;
            st = 0;
            continue;
        }
        l->n++;
    }
    l->not_read = a->not_read;
    if (st == 0)
        st = link_waiters(a, r, l);
    free(v);
    free(r);
    return st;
}

/* Finds _AsyncioDebug (the .AsyncioDebug section) in the mapped _asyncio extension, or in
 * the interpreter or libpython when _asyncio is built in. None of them mapped with one:
 * asyncio's C module is not loaded (1). A file that could not be inspected, or an _asyncio
 * loaded without the section, is an error that names it: never "no tasks" for structures
 * that were not found. */
static int locate(struct pyproc *p, struct app_err *err)
{
    struct procmaps maps;
    int st = procmaps_read(p->pid, &maps, err);
    char why[4400] = "";

    /* Searching inspects ELF files: done again only once the mappings changed (an import). */
    if (st == 0 && maps.n == p->asyncio_nmaps) {
        procmaps_fini(&maps);
        return 1;
    }
    for (size_t i = 0; st == 0 && i < maps.n && !p->asyncio_dbg; i++) {
        const struct procmap *m = &maps.v[i];
        const char *base = strrchr(m->path, '/');
        bool ext;
        struct elf_info elf;
        struct app_err e2 = {0};
        char path[4200];
        int rc;

        base = base ? base + 1 : "";
        ext = !strncmp(base, "_asyncio.", 9);
        if (m->offset != 0 || m->path[0] != '/' ||
            (!ext && strncmp(base, "libpython", 9) && strncmp(base, "python", 6)))
            continue;
        rc = procmaps_file_path(p->pid, m, path, sizeof(path));
        if (rc == 0)
            rc = elf_inspect_file(NULL, path, &elf, &e2);
        if (rc < 0 && !why[0])
            snprintf(why, sizeof(why), "cannot inspect %s: %s", m->path,
                     e2.msg[0] ? e2.msg : app_status_str(rc));
        else if (rc == 0 && !elf.asyncio_debug && ext && !why[0])
            snprintf(why, sizeof(why), "%s has no .AsyncioDebug section", m->path);
        if (rc == 0 && elf.asyncio_debug)
            p->asyncio_dbg =
                elf.asyncio_debug + (elf.type == ET_DYN ? m->start - elf.load_vaddr : 0);
    }
    if (st == 0 && !p->asyncio_dbg && why[0])
        st = app_err_set(err, APP_E_NOTFOUND, "asyncio tasks: task lists not found: %s", why);
    else if (st == 0 && !p->asyncio_dbg)
        p->asyncio_nmaps = maps.n; /* asyncio's C module is not loaded: no search until then */
    if (maps.v)
        procmaps_fini(&maps);
    return st < 0 ? st : p->asyncio_dbg ? 0 : 1;
}

/* _AsyncioDebug and the chain's offsets; 1 when asyncio is not loaded (no tasks). */
static int setup(struct a14 *a, struct app_err *err)
{
    struct pyproc *p = a->p;
    uint8_t b[PYASYNC_DEBUG_BYTES];
    int st = 0;

    if (!p->asyncio_dbg && p->pid > 0 && (st = locate(p, err)) < 0)
        return st;
    if (!p->asyncio_dbg)
        return 1;
    st = rmem_read(p->mem, p->asyncio_dbg, b, sizeof(b));
    if (st < 0)
        return app_err_set(err, st, "asyncio tasks: _AsyncioDebug: %s", app_status_str(st));
    if (pyasync_debug_parse(b, &a->d) < 0 || (st = chain_offsets(a)) == APP_E_VERSION)
        return app_err_set(err, APP_E_VERSION,
                           "asyncio tasks: CPython %s%s: _AsyncioDebug or the generator offsets "
                           "fit no layout known to this ranktop",
                           p->version, p->L.free_threaded ? " (free-threaded)" : "");
    return st < 0 ? app_err_set(err, st, "asyncio tasks: %s", app_status_str(st)) : 0;
}

/* How many tasks asyncio's pure-Python registries hold: asyncio.tasks._scheduled_tasks (a
 * WeakSet: its data set of weak references) and _eager_tasks. On 3.14+ every
 * asyncio.tasks._PyTask registers there (also beside the C module), and the C module's lists
 * hold none of them, so this reader, which reads those lists only, must not answer "no
 * tasks" while these are not empty. 0 when asyncio is not imported. */
static int pure_count(struct a14 *a, uint64_t interp, size_t *count)
{
    static const char *const regs[] = {"_scheduled_tasks", "_eager_tasks"};
    struct pynames_walk w;
    int st = pynames_walk_init(&w, a->m, a->L, NULL);

    *count = 0;
    if (st == APP_E_VERSION) /* no object layout for this build (free-threaded): unknown */
        return 0;
    for (size_t i = 0; st == 0 && i < sizeof(regs) / sizeof(regs[0]); i++) {
        uint64_t obj = 0, *keys = NULL;
        size_t n = 0;

        st = pynames_module_get(&w, interp, "asyncio.tasks", regs[i], &obj);
        if (st == 0 && i == 0)
            st = pynames_attr(&w, obj, "data", &obj);
        if (st == 0)
            st = pyasync_set_keys(a->m, obj, a->sh, &keys, &n);
        free(keys);
        *count += n;
    }
    return st == APP_E_NOTFOUND ? 0 : st;
}

static int read_all(struct a14 *a, bool lists, struct pyasync_list *out, size_t *npure)
{
    uint64_t interp = 0;
    int st = pyasync_main_interp(a->p, &interp);

    a->ntypes = 0;
    a->nloops = 0;
    a->nread_idle = a->walked = a->not_read = a->bytes = 0;
    if (st == 0 && lists)
        st = read_once(a, interp, out);
    if (st == 0)
        st = pure_count(a, interp, npure);
    return st == APP_E_NOTFOUND ? APP_E_STALE : st;
}

int pyasync_read14(struct pyproc *p, struct pyasync_list *out, struct app_err *err)
{
    struct a14 *a;
    size_t npure = 0;
    bool lists;
    int st = APP_E_STALE;

    memset(out, 0, sizeof(*out));
    if (p->L.minor > 15 || (p->L.minor == 15 && p->version_hex < V315_STATES))
        return app_err_set(err, APP_E_VERSION,
                           "asyncio tasks: CPython %s%s: its coroutine frame states are not "
                           "known to this ranktop (3.15: 3.15.0a7 and later)",
                           p->version, p->L.free_threaded ? " (free-threaded)" : "");
    a = x_calloc(1, sizeof(*a));
    *a = (struct a14){.p = p, .m = p->mem, .L = &p->L, .sh = p->L.ob_type - 8};
    st = setup(a, err);
    if (st < 0) {
        free(a);
        return st;
    }
    lists = st == 0; /* else asyncio's C module is not loaded: no C task lists */
    pycode_cache_next_epoch(&p->codes);
    st = APP_E_STALE;
    for (int i = 0; i < TRIES && st == APP_E_STALE; i++) {
        pyasync_free(out);
        st = read_all(a, lists, out, &npure);
    }
    free(a->loops);
    free(a);
    if (st == 0 && npure)
        st = app_err_set(err, APP_E_VERSION,
                         "asyncio tasks: %zu pure-Python task%s (asyncio.tasks._PyTask, or any "
                         "Task without the _asyncio module) not read: on CPython 3.14 and later "
                         "this ranktop reads _asyncio.Task only",
                         npure, npure == 1 ? "" : "s");
    else if (st == APP_E_LIMIT)
        st = app_err_set(err, st, "asyncio tasks: more than %u tasks listed: not read", WALK_MAX);
    else if (st < 0)
        st = app_err_set(err, st, "asyncio tasks: %s", app_status_str(st));
    if (st < 0)
        pyasync_free(out);
    return st;
}
