/* asyncio tasks read from outside the process (CPython 3.8-3.15).
 *
 * 3.14 and later (GIL and free-threaded builds: 3.14, 3.14t, 3.15 from 3.15.0a7, 3.15t) have
 * no registry sets: their per-thread intrusive task lists, described by the _asyncio module's
 * _AsyncioDebug, are read by pyasync14.c, which pyasync_read hands them to. 3.13t is refused
 * by name: its registries (below) sit behind free-threaded dicts and weak sets. What follows
 * describes 3.8-3.13 (GIL builds).
 *
 * The registries of the main interpreter: asyncio.tasks._all_tasks (3.8-3.11) or
 * _scheduled_tasks (3.12+), WeakSets whose `data` set holds weak references to the tasks, plus
 * the plain set _eager_tasks (3.12+: tasks in their eager first step) and the dict
 * _current_tasks {loop: task} that says which task each loop runs now. All are the _asyncio
 * module's own objects, re-exported by asyncio.tasks, and reached from sys.modules with the
 * object walk of pynames.c. The TaskObj fields (loop, state, fut_waiter, coro, name) and the
 * coroutine and frame fields come from the per-minor table below, measured on live
 * interpreters (pyenv 3.8-3.13, Debian's 3.11.2) and held by tests/e2e/dump_async.sh. The await
 * chain follows CPython's _PyGen_yf: a coroutine suspended in an await has the awaited object
 * on top of its frame's value stack (3.8/3.9 f_stacktop[-1], 3.10 f_valuestack[f_stackdepth -
 * 1], 3.11+ localsplus[stacktop - 1] of the frame embedded in the coroutine; 3.11/3.12 also
 * need the RESUME after the last instruction to say "after an await", 3.13 has a state of its
 * own for it). Only coroutines and generators are followed; a future ends the chain. A task
 * awaits another when its fut_waiter is that task, or a gather() future whose _children list
 * holds it. The thread of a loop is its _thread_id attribute (set by run_forever), else
 * unknown. The registry sets are checked unchanged after they were read, so a registry
 * changing mid-read is a retry (APP_E_STALE), never a mixed answer; _current_tasks, which
 * changes at every task step, is taken entry by entry, each value checked to be a task.
 * Every loop is bounded. Runs on the pyproc's owner thread; the strings it returns are
 * copies. The pieces both readers run (set keys, a type's name and base, the await chain walk
 * and its frames, the main interpreter, task lookup by address) are defined here once, with
 * pyasync14.c's free-threaded header shift and chain step as parameters (pyasync_priv.h). */
#include "pyproc_priv.h"

#include "pyasync_priv.h"
#include "pynames.h"
#include "pystr.h"
#include "ranktop/base/bytes.h"
#include "ranktop/python/pyasync.h"
#include "ranktop/base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TP_NAME 24  /* PyTypeObject.tp_name, GIL build */
#define TP_BASE 256 /* PyTypeObject.tp_base, GIL build */
#define TYPE_DEPTH 8
#define TYPE_CACHE 64
#define LIST_MAX 10000
#define TRIES 5
#define CODE_CACHE 64
#define CO_CODE_OLD 48 /* 3.8-3.10 PyCodeObject.co_code (measured with ctypes on each) */

/* gi_frame_state / f_state of a frame suspended in an await: 3.10-3.12 FRAME_SUSPENDED, 3.13
 * FRAME_SUSPENDED_YIELD_FROM; both -1. */
#define SUSPENDED (-1)

static const struct async_offsets TABLE[] = {
    {8, 16, 72, 104, 112, 120, 16, -1, -1, 72, -1, -1, -1, -1, -1, 72, -1}, /* YIELD_FROM */
    {9, 16, 80, 144, 152, 160, 16, -1, -1, 72, -1, -1, -1, -1, -1, 72, -1},
    {10, 16, 88, 152, 160, 168, 16, -1, -1, -1, 64, 80, 108, -1, -1, 72, -1},
    {11, 16, 88, 128, 136, 144, -1, 80, 75, -1, -1, -1, -1, 64, 72, 151, 150}, /* RESUME_QUICK */
    {12, 16, 88, 128, 136, 144, -1, 72, 67, -1, -1, -1, -1, 64, 72, 151, 240}, /* INSTRUMENTED_ */
    {13, 16, 96, 112, 120, 128, -1, 72, 67, -1, -1, -1, -1, 64, 72, -1, -1},
};

/* K_PYTASK, K_PYFUTURE: asyncio.tasks._PyTask, asyncio.futures._PyFuture (pure Python) or a
 * subclass of them. */
enum kind {
    K_OTHER,
    K_TASK,
    K_FUTURE,
    K_GATHER,
    K_CORO,
    K_GEN,
    K_INT,
    K_STR,
    K_LIST,
    K_NONE,
    K_PYTASK,
    K_PYFUTURE
};

struct tkind {
    uint64_t type;
    enum kind kind;
};

struct raw {
    uint64_t addr, loop, waiter, coro, name;
    int state;
};

struct actx {
    struct pyproc *p;
    struct rmem *m;
    const struct async_offsets *A;
    struct pynames_walk w;
    struct tkind types[TYPE_CACHE];
    size_t ntypes;
    uint64_t *cur; /* tasks that are the current task of their loop */
    size_t ncur;
    uint64_t *loops, *idents; /* loop -> thread ident */
    uint64_t *nread;          /* per loop: its tasks read so far */
    size_t nloops;
    size_t over;                 /* tasks beyond PYASYNC_MAX_TASKS in the registries */
    size_t bytes;                /* names and frames read so far */
    uint64_t interp;             /* the interpreter read */
    uint64_t py_task, py_future; /* _PyTask and _PyFuture (0: absent), once py_looked */
    bool py_looked;
    uint64_t codes[CODE_CACHE][2]; /* 3.8-3.10: code object -> its co_code's bytes */
    size_t ncodes;
    uint64_t pystates[3]; /* the str objects of _PyFuture's _state, once seen */
};

const char *pyasync_state_name(enum pyasync_state s)
{
    static const char *const names[] = {"pending", "running", "done", "cancelled"};

    return (unsigned)s < 4 ? names[s] : "?";
}

const struct async_offsets *pyasync_offsets(int minor)
{
    for (size_t i = 0; i < sizeof(TABLE) / sizeof(TABLE[0]); i++)
        if (TABLE[i].minor == minor)
            return &TABLE[i];
    return NULL;
}

static int read_u64(struct rmem *m, uint64_t addr, uint64_t *out)
{
    return rmem_read(m, addr, out, sizeof(*out));
}

/* The kind of one type from its name, or that of its bases for Task and Future subclasses. */
static enum kind name_kind(const char *s, int depth)
{
    static const struct {
        const char *name;
        enum kind kind;
        bool base; /* also matches as a base class */
    } known[] = {{"_asyncio.Task", K_TASK, true}, {"_asyncio.Future", K_FUTURE, true},
                 {"coroutine", K_CORO, false},    {"generator", K_GEN, false},
                 {"int", K_INT, false},           {"str", K_STR, false},
                 {"list", K_LIST, false},         {"NoneType", K_NONE, false}};

    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if ((depth == 0 || known[i].base) && strcmp(s, known[i].name) == 0)
            return known[i].kind;
    return K_OTHER;
}

/* A type named Task or Future that is asyncio's pure-Python _PyTask or _PyFuture, compared by
 * address with asyncio.tasks._PyTask and asyncio.futures._PyFuture (looked up once per read),
 * so that a user's class of that name is not taken for one. */
static int py_kind(struct actx *a, uint64_t type, const char *name, enum kind *k)
{
    int st = 0;

    if (strcmp(name, "Task") != 0 && strcmp(name, "Future") != 0)
        return 0;
    if (!a->py_looked) {
        st = pynames_module_get(&a->w, a->interp, "asyncio.tasks", "_PyTask", &a->py_task);
        if (st == APP_E_NOTFOUND)
            st = 0, a->py_task = 0;
        if (st == 0)
            st =
                pynames_module_get(&a->w, a->interp, "asyncio.futures", "_PyFuture", &a->py_future);
        if (st == APP_E_NOTFOUND)
            st = 0, a->py_future = 0;
        if (st < 0)
            return st;
        a->py_looked = true;
    }
    if (type && type == a->py_task)
        *k = K_PYTASK;
    else if (type && type == a->py_future)
        *k = K_PYFUTURE;
    return 0;
}

int pyasync_type_read(struct rmem *m, uint64_t t, uint32_t sh, char *name, uint64_t *base)
{
    uint64_t nb[2];
    struct rmem_iov iov[2] = {{t + TP_NAME + sh, &nb[0], 8}, {t + TP_BASE + sh, &nb[1], 8}};
    long got;
    int st;

    memset(name, 0, PYASYNC_TYPE_NAME);
    if (!bytes_ptr_ok(t))
        return APP_E_STALE;
    st = rmem_readv(m, iov, 2, NULL);
    if (st < 0)
        return st;
    got = rmem_read_some(m, nb[0], name, PYASYNC_TYPE_NAME - 1);
    if (got <= 0)
        return got < 0 ? (int)got : APP_E_STALE;
    *base = nb[1];
    return 0;
}

/* Classifies a type object by walking tp_name up the tp_base chain (bounded); cached. */
static int type_kind(struct actx *a, uint64_t type, enum kind *out)
{
    uint64_t t = type;
    bool gather = false;
    enum kind k = K_OTHER;

    for (size_t i = 0; i < a->ntypes; i++)
        if (a->types[i].type == type)
            return *out = a->types[i].kind, 0;
    for (int depth = 0; depth < TYPE_DEPTH && t && k == K_OTHER; depth++) {
        char name[PYASYNC_TYPE_NAME];
        uint64_t base = 0;
        int st = pyasync_type_read(a->m, t, 0, name, &base);

        if (st < 0)
            return st;
        if (depth == 0 && strcmp(name, "_GatheringFuture") == 0)
            gather = true;
        k = name_kind(name, depth);
        if (k == K_OTHER && (st = py_kind(a, t, name, &k)) < 0)
            return st;
        t = base;
    }
    if ((k == K_FUTURE || k == K_PYFUTURE) && gather)
        k = K_GATHER;
    if (a->ntypes < TYPE_CACHE)
        a->types[a->ntypes++] = (struct tkind){type, k};
    *out = k;
    return 0;
}

static int obj_kind(struct actx *a, uint64_t obj, enum kind *out)
{
    uint64_t type = 0;
    int st;

    if (!bytes_ptr_ok(obj))
        return APP_E_STALE;
    st = read_u64(a->m, obj + PYABI_OB_TYPE, &type);
    return st < 0 ? st : type_kind(a, type, out);
}

static void push(uint64_t **v, size_t *n, uint64_t x)
{
    if ((*n & (*n - 1)) == 0 || *n == 0)
        *v = x_reallocarray(*v, *n ? *n * 2 : 8, sizeof(**v));
    (*v)[(*n)++] = x;
}

int pyasync_set_header(const uint8_t *h, struct pyasync_set *s)
{
    int64_t fill = (int64_t)bytes_load_u64(h + 16);

    s->used = (int64_t)bytes_load_u64(h + 24);
    s->mask = bytes_load_u64(h + 32);
    s->table = bytes_load_u64(h + 40);
    if (s->mask < 7 || s->mask >= (1ull << PYASYNC_SET_MAX_LOG2) || ((s->mask + 1) & s->mask) ||
        s->used < 0 || fill < s->used || (uint64_t)fill > s->mask + 1 || !bytes_ptr_ok(s->table))
        return APP_E_STALE;
    return 0;
}

int pyasync_set_table(const uint8_t *tab, const struct pyasync_set *s, uint64_t *keys, size_t *n)
{
    *n = 0;
    for (uint64_t i = 0; i <= s->mask; i++) {
        uint64_t key = bytes_load_u64(tab + i * 16);

        if (key == 0 || (int64_t)bytes_load_u64(tab + i * 16 + 8) == -1)
            continue;
        if (!bytes_ptr_ok(key) || (int64_t)*n >= s->used)
            return APP_E_STALE;
        keys[(*n)++] = key;
    }
    return 0;
}

int pyasync_set_keys(struct rmem *m, uint64_t addr, uint32_t sh, uint64_t **keys, size_t *n)
{
    uint8_t h0[PYASYNC_SET_HDR + 16], h1[PYASYNC_SET_HDR + 16], *tab = NULL;
    size_t hl = PYASYNC_SET_HDR + sh, k = 0;
    uint64_t *got = NULL;
    struct pyasync_set s;
    int st = sh <= 16 ? rmem_read(m, addr, h0, hl) : APP_E_VERSION;

    if (st == 0)
        st = pyasync_set_header(h0 + sh, &s);
    if (st < 0)
        return st;
    tab = x_malloc((s.mask + 1) * 16);
    got = x_malloc((s.mask + 1) * 8);
    st = rmem_read(m, s.table, tab, (s.mask + 1) * 16);
    if (st == 0)
        st = pyasync_set_table(tab, &s, got, &k);
    for (size_t i = 0; st == 0 && i < k; i++)
        push(keys, n, got[i]);
    free(tab);
    free(got);
    if (st == 0)
        st = rmem_read(m, addr, h1, hl);
    if (st == 0 && memcmp(h0 + 16 + sh, h1 + 16 + sh, PYASYNC_SET_HDR - 16) != 0)
        st = APP_E_STALE;
    return st;
}

/* The referents of the weak references in a WeakSet's data set: live tasks only (a dead
 * reference points at None). */
static int weakset_tasks(struct actx *a, uint64_t ws, uint64_t **tasks, size_t *n)
{
    uint64_t data = 0, *refs = NULL;
    size_t nrefs = 0;
    int st = pynames_attr(&a->w, ws, "data", &data);

    if (st == 0)
        st = pyasync_set_keys(a->m, data, 0, &refs, &nrefs);
    for (size_t i = 0; st == 0 && i < nrefs; i++) {
        uint64_t obj = 0;
        enum kind k = K_OTHER;

        st = read_u64(a->m, refs[i] + 16, &obj); /* PyWeakReference.wr_object */
        if (st == 0 && bytes_ptr_ok(obj))
            st = obj_kind(a, obj, &k);
        if (st == 0 && (k == K_TASK || k == K_PYTASK))
            push(tasks, n, obj);
    }
    free(refs);
    return st;
}

/* asyncio.tasks.<name>, or APP_E_NOTFOUND. */
static int tasks_attr(struct actx *a, uint64_t interp, const char *name, uint64_t *val)
{
    return pynames_module_get(&a->w, interp, "asyncio.tasks", name, val);
}

/* Every registered task (weak set, and the eager set on 3.12+) and the current tasks. */
static int collect(struct actx *a, uint64_t interp, uint64_t **tasks, size_t *n)
{
    uint64_t ws = 0, eager = 0, cur = 0, *eg = NULL, keys[256], vals[256];
    size_t neg = 0, ncur = 0;
    int st = tasks_attr(a, interp, a->A->minor >= 12 ? "_scheduled_tasks" : "_all_tasks", &ws);

    if (st == 0)
        st = weakset_tasks(a, ws, tasks, n);
    if (st == 0 && a->A->minor >= 12 && (st = tasks_attr(a, interp, "_eager_tasks", &eager)) == 0)
        st = pyasync_set_keys(a->m, eager, 0, &eg, &neg);
    for (size_t i = 0; st == 0 && i < neg; i++) {
        enum kind k = K_OTHER;

        st = obj_kind(a, eg[i], &k);
        if (st == 0 && (k == K_TASK || k == K_PYTASK))
            push(tasks, n, eg[i]);
    }
    free(eg);
    /* {loop: task} changes at every step of every task (_enter_task, _leave_task): taken as
     * the read finds each entry, whose value must still be a task. */
    if (st == 0 && (st = tasks_attr(a, interp, "_current_tasks", &cur)) == 0)
        st = pynames_dict_items(&a->w, cur, keys, vals, 256, &ncur, false);
    for (size_t i = 0; st == 0 && i < ncur; i++) {
        enum kind k = K_OTHER;

        st = obj_kind(a, vals[i], &k);
        if (st == 0 && k != K_TASK && k != K_PYTASK)
            st = APP_E_STALE;
        if (st == 0)
            push(&a->cur, &a->ncur, vals[i]);
    }
    if (*n > PYASYNC_MAX_TASKS) {
        a->over = *n - PYASYNC_MAX_TASKS;
        *n = PYASYNC_MAX_TASKS;
    }
    return st;
}

/* The ident of the thread that runs loop: its _thread_id (None when not running: 0). Unreadable
 * is unknown (0) too, never a guess: the task is then shown under the main thread. */
static int loop_thread(struct actx *a, uint64_t loop, uint64_t *ident)
{
    uint64_t v = 0;
    enum kind k = K_OTHER;
    int st;

    for (size_t i = 0; i < a->nloops; i++)
        if (a->loops[i] == loop)
            return *ident = a->idents[i], 0;
    *ident = 0;
    st = pynames_attr(&a->w, loop, "_thread_id", &v);
    if (st == 0 && (st = obj_kind(a, v, &k)) == 0 && k == K_INT)
        st = pynames_long(&a->w, v, ident);
    if (st == APP_E_GONE || st == APP_E_PERM)
        return st;
    if (st < 0) /* no _thread_id, or a loop type without an instance dict: thread unknown */
        *ident = 0;
    push(&a->idents, &(size_t){a->nloops}, *ident);
    push(&a->nread, &(size_t){a->nloops}, 0);
    push(&a->loops, &a->nloops, loop);
    return 0;
}

/* Task.get_name(): a str, or (3.13 defers the formatting) the int N of "Task-N". */
static int task_name(struct actx *a, uint64_t obj, char **out)
{
    enum kind k = K_OTHER;
    uint64_t v = 0;
    int st = obj_kind(a, obj, &k);
    char buf[32];

    if (st == 0 && k == K_STR) {
        *out = pystr_read(a->m, &a->p->L, obj, &st);
        return *out ? 0 : st < 0 ? st : APP_E_STALE;
    }
    if (st == 0 && k != K_INT)
        st = APP_E_STALE;
    if (st == 0)
        st = pynames_long(&a->w, obj, &v);
    if (st == 0) {
        snprintf(buf, sizeof(buf), "Task-%llu", (unsigned long long)v);
        *out = x_strdup(buf);
    }
    return st;
}

int pyasync_step_old(const struct async_offsets *A, const struct py_layout *L, const uint8_t *f,
                     struct pyasync_step *s)
{
    int lasti = bytes_load_i32(f + L->fr.instr);

    s->code = bytes_load_u64(f + L->fr.code);
    s->q = lasti < 0 ? -1 : L->fr.lasti_units ? 2L * lasti : lasti;
    s->slot = 0;
    if (!bytes_ptr_ok(s->code))
        return APP_E_STALE;
    if (lasti < 0)
        return 0;
    if (A->f_stacktop >= 0) { /* 3.8/3.9: f_stacktop is set only while suspended */
        uint64_t top = bytes_load_u64(f + A->f_stacktop);

        s->slot = top ? top - 8 : 0;
    } else if ((int8_t)f[A->f_state] == SUSPENDED) {
        int depth = bytes_load_i32(f + A->f_stackdepth);

        if (depth < 0 || depth > 1 << 16)
            return APP_E_STALE;
        if (depth == 0) /* a plain yield with nothing on its stack: nothing awaited */
            return 0;
        s->slot = bytes_load_u64(f + A->f_valuestack) + 8 * (uint64_t)(depth - 1);
    }
    return s->slot && !bytes_ptr_ok(s->slot) ? APP_E_STALE : 0;
}

size_t pyasync_coro_bytes(const struct async_offsets *A)
{
    return (size_t)(A->gi_iframe + A->if_localsplus);
}

int pyasync_step_new(const struct async_offsets *A, const struct py_layout *L, const uint8_t *c,
                     uint64_t coro, struct pyasync_step *s)
{
    const uint8_t *f = c + A->gi_iframe;
    int8_t state = (int8_t)c[A->gi_state];
    uint64_t instr;
    int top;

    *s = (struct pyasync_step){0, -1, 0, 0};
    if (state > 0) /* completed or cleared */
        return 0;
    s->code = bytes_load_u64(f + L->fr.code) & (L->fr.code_tagged ? ~(uint64_t)7 : ~(uint64_t)0);
    instr = bytes_load_u64(f + L->fr.instr);
    s->q = instr ? (long)(instr - (s->code + (uint64_t)L->co.code_adaptive)) : -1;
    if (!bytes_ptr_ok(s->code))
        return APP_E_STALE;
    if (state != SUSPENDED)
        return 0;
    top = bytes_load_i32(f + A->if_stacktop);
    if (top < 0 || top > 1 << 16 || (top == 0 && A->resume_op < 0))
        return APP_E_STALE;
    if (top == 0) /* 3.11/3.12: suspended in a plain yield with nothing on its stack */
        return 0;
    s->slot = coro + pyasync_coro_bytes(A) + 8 * (uint64_t)(top - 1);
    if (A->resume_op >= 0)
        s->resume_at = instr + 2;
    return !s->resume_at || (instr >= 4096 && instr < (1ull << 57) && !(instr & 1)) ? 0
                                                                                    : APP_E_STALE;
}

bool pyasync_resume_await(const struct async_offsets *A, uint16_t unit)
{
    int op = unit & 0xff, arg = unit >> 8;

    if (A->minor <= 10) /* YIELD_FROM, whatever its (unused) oparg */
        return op == A->resume_op;
    return (op == A->resume_op || op == A->resume_op2) && arg >= 2;
}

/* 3.8-3.10: where the code unit after the frame's last instruction lies, in its code's co_code
 * bytes (cached per read). As in _PyGen_yf, that unit must be YIELD_FROM for the top of the
 * value stack to be the awaited object: a plain yield leaves other things there (a for loop's
 * iterator, or a local below an empty stack). */
static int yield_from_at(struct actx *a, struct pyasync_step *s)
{
    uint64_t bytes = 0;
    size_t i = 0;
    int st;

    while (i < a->ncodes && a->codes[i][0] != s->code)
        i++;
    if (i < a->ncodes) {
        bytes = a->codes[i][1];
    } else {
        st = read_u64(a->m, s->code + CO_CODE_OLD, &bytes);
        if (st == 0 && !bytes_ptr_ok(bytes))
            st = APP_E_STALE;
        if (st < 0)
            return st;
        if (a->ncodes < CODE_CACHE) {
            a->codes[a->ncodes][0] = s->code;
            a->codes[a->ncodes++][1] = bytes;
        }
    }
    s->resume_at = bytes + a->p->L.bytes.sval + (uint64_t)s->q + 2;
    return 0;
}

/* One step of the chain: reads the object (3.11+: the coroutine with its frame, in one read),
 * stops unless it is a coroutine or generator (*more false), decodes it (3.8-3.10: from its
 * frame), and reads the awaited object (with, on 3.11/3.12, the code unit that says whether it
 * is one) when it is suspended in an await. */
static int step(void *ctx, uint64_t coro, struct pyasync_step *s, uint64_t *next, bool *more)
{
    struct actx *a = ctx;
    uint8_t buf[PYASYNC_FRAME_READ + 64];
    size_t want = a->A->gi_frame < 0 ? pyasync_coro_bytes(a->A) : (size_t)a->A->gi_frame + 8;
    uint64_t frame = 0;
    uint16_t unit = 0;
    enum kind k = K_OTHER;
    long got;
    int st;

    *next = 0;
    *more = false;
    *s = (struct pyasync_step){0, -1, 0, 0};
    if (!bytes_ptr_ok(coro))
        return APP_E_STALE;
    got = rmem_read_some(a->m, coro, buf, want); /* a smaller object may end a page */
    if (got < 0 || got < 16)
        return got < 0 ? (int)got : APP_E_STALE;
    st = type_kind(a, bytes_load_u64(buf + PYABI_OB_TYPE), &k);
    if (st < 0 || (k != K_CORO && k != K_GEN))
        return st;
    *more = true;
    if ((size_t)got < want)
        return APP_E_STALE;
    if (a->A->gi_frame < 0) {
        st = pyasync_step_new(a->A, &a->p->L, buf, coro, s);
    } else {
        frame = bytes_load_u64(buf + a->A->gi_frame);
        if (frame == 0) /* finished: no frame */
            return 0;
        st = bytes_ptr_ok(frame) ? rmem_read(a->m, frame, buf, PYASYNC_FRAME_READ) : APP_E_STALE;
        if (st == 0)
            st = pyasync_step_old(a->A, &a->p->L, buf, s);
        if (st == 0 && s->slot && a->A->resume_op >= 0)
            st = yield_from_at(a, s);
    }
    if (st < 0 || !s->slot)
        return st;
    if (s->resume_at) {
        struct rmem_iov iov[2] = {{s->resume_at, &unit, sizeof(unit)}, {s->slot, next, 8}};

        st = rmem_readv(a->m, iov, 2, NULL);
        if (st == 0 && !pyasync_resume_await(a->A, unit))
            *next = 0; /* suspended in a plain yield: nothing awaited */
        return st;
    }
    return read_u64(a->m, s->slot, next);
}

/* Frames come out innermost first. */
int pyasync_chain_read(struct pyproc *p, pyasync_step_fn *fn, void *ctx, uint64_t coro,
                       struct pyasync_task *t)
{
    uint64_t codes[PYASYNC_MAX_CHAIN] = {0}; /* (-Wmaybe-uninitialized once inlined twice) */
    long qs[PYASYNC_MAX_CHAIN];
    struct pycode *res[PYASYNC_MAX_CHAIN];
    size_t n = 0;
    int st = 0;

    while (coro && st == 0) {
        struct pyasync_step one;
        uint64_t next = 0;
        bool more = false;

        st = fn(ctx, coro, &one, &next, &more);
        if (!more)
            break;
        if (n == PYASYNC_MAX_CHAIN) {
            t->chain_truncated = true;
            break;
        }
        if (st == 0 && one.code) {
            codes[n] = one.code;
            qs[n++] = one.q;
        }
        coro = next;
    }
    if (st < 0)
        return st;
    st = pycode_resolve(&p->codes, p->mem, &p->L, p->pycode_type, codes, n, res);
    if (st != 0)
        return st < 0 ? st : APP_E_STALE;
    t->frames = x_calloc(n + 1, sizeof(*t->frames));
    for (size_t i = 0; i < n; i++) {
        struct pycode *e = res[n - 1 - i];
        long q = qs[n - 1 - i];

        t->frames[i].function = x_strdup(e->function ? e->function : "?");
        t->frames[i].file = x_strdup(e->file ? e->file : "?");
        t->frames[i].line = q < 0 ? e->firstlineno : pycode_line(e, p->L.minor, q);
    }
    t->nframes = n;
    return 0;
}

static bool in(const uint64_t *v, size_t n, uint64_t x)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

/* The object at *obj, or 0 for None (an unset _fut_waiter or _coro of a pure-Python task). */
static int none_to_zero(struct actx *a, uint64_t *obj)
{
    enum kind k = K_OTHER;
    int st = obj_kind(a, *obj, &k);

    if (st == 0 && k == K_NONE)
        *obj = 0;
    return st;
}

/* _PyFuture._state: the str 'PENDING', 'CANCELLED' or 'FINISHED' as 0, 1, 2 (fut_state's
 * values); each of the three str objects is decoded once per read. */
static int pystate(struct actx *a, uint64_t obj, int *state)
{
    static const char *const names[] = {"PENDING", "CANCELLED", "FINISHED"};
    enum kind k = K_OTHER;
    char *s;
    int st = 0;

    for (int i = 0; i < 3; i++)
        if (a->pystates[i] == obj)
            return *state = i, 0;
    if ((st = obj_kind(a, obj, &k)) < 0 || k != K_STR)
        return st < 0 ? st : APP_E_STALE;
    s = pystr_read(a->m, &a->p->L, obj, &st);
    for (int i = 0; s && i < 3; i++)
        if (strcmp(s, names[i]) == 0) {
            a->pystates[i] = obj;
            *state = i;
            free(s);
            return 0;
        }
    free(s);
    return st < 0 ? st : APP_E_STALE;
}

/* A pure-Python task (asyncio.tasks._PyTask, or a Python subclass of it): its fields are
 * instance attributes, looked up in its instance dict as pynames.c does for any object
 * (3.8-3.10 tp_dictoffset dicts, 3.11 shared keys and values, 3.12 managed dicts, 3.13 inline
 * values), all five at once (pynames_attrs: the object, its type and storage read once, and the
 * places in the class's shared keys remembered, so a task costs about four reads). _state is a
 * class attribute until the task is cancelled or finishes, so an instance without one is
 * pending. Fills r as task_read does for a C task. */
static int pytask_read(struct actx *a, uint64_t addr, struct raw *r)
{
    static const char *const attr[] = {"_loop", "_fut_waiter", "_coro", "_name", "_state"};
    uint64_t v[5] = {0};
    int st = pynames_attrs(&a->w, addr, attr, 5, v), state = 0;

    if (st == 0 && (!v[0] || !v[1] || !v[2] || !v[3])) /* a task always has these four */
        st = APP_E_STALE;
    if (st == 0 && v[4])
        st = pystate(a, v[4], &state);
    if (st == 0)
        st = none_to_zero(a, &v[1]);
    if (st == 0)
        st = none_to_zero(a, &v[2]);
    *r = (struct raw){addr, v[0], v[1], v[2], v[3], state};
    return st;
}

/* Reads one task's object, name, thread and chain. */
#define TASK_LEFT_OUT 1 /* task_read: a cap left the task out */

/* The tasks of loop read so far, counting this one. */
static uint64_t loop_read(struct actx *a, uint64_t loop)
{
    for (size_t i = 0; i < a->nloops; i++)
        if (a->loops[i] == loop)
            return ++a->nread[i];
    return 0;
}

size_t pyasync_task_bytes(const struct pyasync_task *t)
{
    size_t b = sizeof(*t) + (t->name ? strlen(t->name) + 1 : 0);

    for (size_t i = 0; i < t->nframes; i++)
        b += sizeof(t->frames[i]) + (t->frames[i].function ? strlen(t->frames[i].function) : 0) +
             (t->frames[i].file ? strlen(t->frames[i].file) : 0) + 2;
    return b;
}

static int task_read(struct actx *a, uint64_t addr, struct raw *r, struct pyasync_task *t)
{
    const struct async_offsets *A = a->A;
    uint8_t b[192];
    enum kind k = K_OTHER;
    long got = rmem_read_some(a->m, addr, b, (size_t)A->name + 8); /* may end a page */
    int st = got < 16 ? (got < 0 ? (int)got : APP_E_STALE) : 0;

    if (st == 0)
        st = type_kind(a, bytes_load_u64(b + PYABI_OB_TYPE), &k);
    if (st == 0 && k == K_PYTASK)
        st = pytask_read(a, addr, r);
    else if (st == 0 && (k != K_TASK || got < (long)A->name + 8))
        st = APP_E_STALE;
    if (st < 0)
        return st;
    if (k == K_TASK)
        *r = (struct raw){addr,
                          bytes_load_u64(b + A->loop),
                          bytes_load_u64(b + A->waiter),
                          bytes_load_u64(b + A->coro),
                          bytes_load_u64(b + A->name),
                          bytes_load_i32(b + A->state)};
    if (r->state < 0 || r->state > 2 || !bytes_ptr_ok(r->loop) || !bytes_ptr_ok(r->name) ||
        (r->coro && !bytes_ptr_ok(r->coro)) || (r->waiter && !bytes_ptr_ok(r->waiter)))
        return APP_E_STALE;
    /* The caps: the loop's thread first, which tells whose share the task counts in. */
    if ((st = loop_thread(a, r->loop, &t->thread)) < 0)
        return st;
    if (a->bytes >= PYASYNC_MAX_BYTES || loop_read(a, r->loop) > PYASYNC_THREAD_TASKS)
        return TASK_LEFT_OUT;
    t->addr = addr;
    t->state = r->state == 1               ? PYASYNC_CANCELLED
               : r->state == 2             ? PYASYNC_DONE
               : in(a->cur, a->ncur, addr) ? PYASYNC_RUNNING
                                           : PYASYNC_PENDING;
    st = task_name(a, r->name, &t->name);
    if (st == 0 && r->state == 0 && r->coro)
        st = pyasync_chain_read(a->p, step, a, r->coro, t);
    a->bytes += pyasync_task_bytes(t);
    return st;
}

size_t pyasync_task_index(const void *v, size_t n, size_t size, uint64_t addr)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t at;

        memcpy(&at, (const uint8_t *)v + mid * size, sizeof(at));
        if (at == addr)
            return mid;
        if (at < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return SIZE_MAX;
}

/* The index of the task at addr in r, sorted by address (read_once sorts them), or SIZE_MAX. */
static size_t task_index(const struct raw *r, size_t n, uint64_t addr)
{
    return pyasync_task_index(r, n, sizeof(*r), addr);
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

    return a < b ? -1 : a > b;
}

/* Sorts the task addresses and drops duplicates (a 3.12+ eager task moving from the eager set
 * to the weak set may be seen in both). */
static size_t sort_unique(uint64_t *v, size_t n)
{
    size_t k = 0;

    if (n)
        qsort(v, n, sizeof(*v), cmp_u64);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || v[k - 1] != v[i])
            v[k++] = v[i];
    return k;
}

void pyasync_awaited_add(struct pyasync_task *t, size_t by)
{
    t->awaited_by = x_reallocarray(t->awaited_by, t->nawaited_by + 1, sizeof(size_t));
    t->awaited_by[t->nawaited_by++] = by;
}

/* The children of a gather() future: its _children list. */
static int gather_children(struct actx *a, uint64_t fut, uint64_t *items, size_t *n)
{
    uint8_t h[40];
    uint64_t list = 0;
    enum kind k = K_OTHER;
    int64_t size;
    int st = pynames_attr(&a->w, fut, "_children", &list);

    *n = 0;
    if (st == 0)
        st = obj_kind(a, list, &k);
    if (st == 0 && k != K_LIST)
        return APP_E_STALE;
    if (st == 0)
        st = rmem_read(a->m, list, h, sizeof(h));
    if (st < 0)
        return st;
    size = (int64_t)bytes_load_u64(h + 16);
    if (size < 0 || size > LIST_MAX || (size && !bytes_ptr_ok(bytes_load_u64(h + 24))))
        return APP_E_STALE;
    *n = (size_t)size;
    return size ? rmem_read(a->m, bytes_load_u64(h + 24), items, (size_t)size * 8) : 0;
}

/* awaited_by: a task whose fut_waiter is another task, or a gather() of tasks, awaits them. */
static int link_waiters(struct actx *a, const struct raw *r, struct pyasync_list *l)
{
    uint64_t *items = x_malloc(LIST_MAX * 8);
    int st = 0;

    for (size_t i = 0; st == 0 && i < l->n; i++) {
        size_t j = r[i].waiter ? task_index(r, l->n, r[i].waiter) : SIZE_MAX, nit = 0;
        enum kind k = K_OTHER;

        if (j != SIZE_MAX) {
            pyasync_awaited_add(&l->tasks[j], i);
            continue;
        }
        if (!r[i].waiter || (st = obj_kind(a, r[i].waiter, &k)) < 0 || k != K_GATHER)
            continue;
        st = gather_children(a, r[i].waiter, items, &nit);
        if (st == APP_E_NOTFOUND) /* no _children (yet, or any more): nothing to link */
            st = 0, nit = 0;
        for (size_t c = 0; st == 0 && c < nit; c++)
            if ((j = task_index(r, l->n, items[c])) != SIZE_MAX)
                pyasync_awaited_add(&l->tasks[j], i);
    }
    free(items);
    return st;
}

static int read_once(struct actx *a, uint64_t interp, struct pyasync_list *l)
{
    uint64_t *addrs = NULL;
    size_t n = 0;
    struct raw *r = NULL;
    int st = collect(a, interp, &addrs, &n);

    if (st == APP_E_NOTFOUND) /* asyncio (or a registry) not there yet: no tasks */
        st = 0, n = 0;
    n = sort_unique(addrs, n);
    l->tasks = x_calloc(n + 1, sizeof(*l->tasks));
    r = x_calloc(n + 1, sizeof(*r));
    /* Tasks left out by a cap leave no gap: the kept ones stay sorted for task_index. */
    for (size_t i = 0; st == 0 && i < n; i++) {
        st = task_read(a, addrs[i], &r[l->n], &l->tasks[l->n]);
        if (st == TASK_LEFT_OUT) {
            memset(&l->tasks[l->n], 0, sizeof(l->tasks[l->n]));
            l->not_read++;
            st = 0;
            continue;
        }
        l->n++;
    }
    l->not_read += a->over;
    if (st == 0)
        st = link_waiters(a, r, l);
    if (st == APP_E_NOTFOUND) /* an attribute of an object freed under the read: torn */
        st = APP_E_STALE;
    free(addrs);
    free(r);
    return st;
}

static void actx_reset(struct actx *a)
{
    free(a->cur);
    free(a->loops);
    free(a->idents);
    free(a->nread);
    a->cur = a->loops = a->idents = a->nread = NULL;
    a->ncur = a->nloops = a->ntypes = a->over = a->bytes = 0;
    a->py_looked = false;
    a->ncodes = 0;
    memset(a->pystates, 0, sizeof(a->pystates));
}

int pyasync_main_interp(struct pyproc *p, uint64_t *interp)
{
    uint64_t next = 0;
    int st = read_u64(p->mem, p->runtime + p->L.rt.interp_head, interp);

    for (int i = 0; st == 0 && i < PYPROC_MAX_INTERPS; i++) {
        if (!bytes_ptr_ok(*interp))
            return APP_E_STARTING;
        st = read_u64(p->mem, *interp + p->L.is.next, &next);
        if (st == 0 && next == 0)
            return 0;
        if (st == 0 && !bytes_ptr_ok(next))
            return APP_E_STALE;
        *interp = next;
    }
    return st < 0 ? st : APP_E_STALE;
}

int pyasync_read(struct pyproc *p, struct pyasync_list *out, struct app_err *err)
{
    struct actx a = {.p = p, .m = p->mem, .A = pyasync_offsets(p->L.minor)};
    uint64_t interp = 0;
    int st = APP_E_STALE;

    memset(out, 0, sizeof(*out));
    if (p->L.minor >= 14) /* per-thread task lists (pyasync14.c), GIL or free-threaded */
        return pyasync_read14(p, out, err);
    if (p->L.free_threaded) /* 3.13t: registries behind free-threaded dicts and weak sets */
        return app_err_set(err, APP_E_VERSION,
                           "asyncio tasks: not supported on free-threaded 3.%d (its task "
                           "registries are dicts and weak sets of an unknown layout)",
                           p->L.minor);
    if (!a.A)
        return app_err_set(err, APP_E_VERSION, "asyncio tasks: not supported on 3.%d yet",
                           p->L.minor);
    if (pynames_walk_init(&a.w, p->mem, &p->L, err) < 0)
        return APP_E_VERSION;
    pycode_cache_next_epoch(&p->codes);
    for (int i = 0; i < TRIES && st == APP_E_STALE; i++) {
        pyasync_free(out);
        actx_reset(&a);
        a.w.dict_type = 0;
        a.w.nmemo = 0;
        st = pyasync_main_interp(p, &interp);
        a.interp = interp;
        if (st == 0)
            st = read_once(&a, interp, out);
    }
    actx_reset(&a);
    if (st < 0) {
        pyasync_free(out);
        return app_err_set(err, st, "asyncio tasks: %s", app_status_str(st));
    }
    return 0;
}

void pyasync_free(struct pyasync_list *l)
{
    for (size_t i = 0; l->tasks && i < l->n; i++) {
        struct pyasync_task *t = &l->tasks[i];

        free(t->name);
        free(t->awaited_by);
        for (size_t j = 0; j < t->nframes; j++) {
            free(t->frames[j].function);
            free(t->frames[j].file);
        }
        free(t->frames);
    }
    free(l->tasks);
    l->tasks = NULL;
    l->n = l->not_read = 0;
}
