/* One sample of every thread of every interpreter of an attached process.
 *
 * Reads the runtime and interpreter heads, the GIL state, then each thread state in list
 * order; each thread's frames come from pywalk.c and its code objects from pycode.c. A torn
 * thread is retried from a fresh thread state a bounded number of times within a small time
 * budget, then dropped (counted): a thread's stack in a sample is whole, or explicitly empty
 * (no_python), or absent with a negative status. A torn thread list restarts the sample once.
 * The result lives in the pyproc and is valid until the next call. Sampling thread only. */
#include "pyproc_priv.h"

#include "ranktop/base/bytes.h"
#include "ranktop/base/hash.h"
#include "ranktop/base/util.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define GIL_READ 80 /* interval, last_holder, locked, switch_number, cond */
#define WALK_TRIES 6
#define WALK_BUDGET_NS (250 * 1000) /* per thread, for its retries */
#define PREFETCH_MAX 256            /* threads whose first walk reads share one system call */
#define RT_IOV 12                   /* ranges of read_runtime besides the thread states */

static void gil_parse(const struct py_layout *L, const uint8_t *gil, struct pygilview *g)
{
    g->known = true;
    g->locked = bytes_load_i32(gil + L->gil.locked) == 1;
    g->holder = bytes_load_u64(gil + L->gil.last_holder);
    g->switches = bytes_load_u64(gil + L->gil.switch_number);
}

/* One interpreter's header fields and a copy of its GIL (3.12+), as one sample read them. */
struct ifields {
    uint64_t addr, next, head, gilp, main_ts, gen;
    uint64_t gil_at; /* where `gil` was copied from; 0: not copied */
    uint8_t gil[GIL_READ];
};

static int ifields_iov(const struct py_layout *L, uint64_t interp, struct ifields *f,
                       struct rmem_iov *iov)
{
    int n = 0;

    *f = (struct ifields){.addr = interp};
    iov[n++] = (struct rmem_iov){interp + L->is.next, &f->next, 8};
    iov[n++] = (struct rmem_iov){interp + L->is.threads_head, &f->head, 8};
    if (L->is.gil_ptr >= 0)
        iov[n++] = (struct rmem_iov){interp + (uint64_t)L->is.gil_ptr, &f->gilp, 8};
    if (L->is.threads_main >= 0)
        iov[n++] = (struct rmem_iov){interp + (uint64_t)L->is.threads_main, &f->main_ts, 8};
    if (L->is.code_gen >= 0)
        iov[n++] = (struct rmem_iov){interp + (uint64_t)L->is.code_gen, &f->gen, 8};
    return n;
}

/* 3.11+: the first reads of the walks of the threads the last sample walked (a thread that
 * moved then is likely to have moved again), planned into the runtime's call from the thread
 * states as the last sample left them, so that a sample of a process whose list still holds
 * takes one system call. A walk takes those bytes only when they serve what it plans from the
 * fresh list (pywalk.c); pywalk_prefetch_done/drop settle them after the call. */
static int plan_walks(struct pyproc *p, const struct tslist *l, struct rmem_iov *iov, int n)
{
    static _Thread_local uint64_t addr[PREFETCH_MAX];
    static _Thread_local const uint8_t *guess[PREFETCH_MAX];
    int k = 0;

    for (size_t i = 0; i < l->n && k < PREFETCH_MAX; i++) {
        const struct pyhint *h = pywalk_hint(p, l->addr[i], false);

        if (h && h->walked_seq && h->walked_seq + 1 == p->walk_seq) {
            addr[k] = l->addr[i];
            guess[k++] = l->copy[i];
        }
    }
    return k ? pywalk_prefetch_plan(p, addr, guess, k, iov, n, RMEM_IOV_MAX) : n;
}

/* Reads the runtime header fields (and the runtime-wide GIL up to 3.11) in one call, which
 * also copies the first interpreter's fields and GIL where the last sample found them (*pre;
 * pre->addr is 0 when they were not copied), its thread states, and the first reads of the
 * walks plan_walks expects. */
static int read_runtime(struct pyproc *p, uint64_t *interp, uint64_t *main_interp,
                        struct pygilview *g, struct ifields *pre)
{
    const struct py_layout *L = &p->L;
    uint64_t head = 0, fin = 0, main = 0;
    uint8_t gil[GIL_READ];
    struct tslist *l = &p->ts;
    static _Thread_local struct rmem_iov iov[RMEM_IOV_MAX];
    int nrt = L->rt.gil >= 0 ? 3 : 2, n, nif = 0, ngil = 0, done = 0, nts, rc, nw = 0;

    iov[0] = (struct rmem_iov){p->runtime + L->rt.interp_head, &head, 8};
    iov[1] = (struct rmem_iov){p->runtime + L->rt.finalizing, &fin, 8};
    iov[2] = (struct rmem_iov){p->runtime + (uint64_t)(L->rt.gil >= 0 ? L->rt.gil : 0), gil,
                               sizeof(gil)};
    /* runtime->interpreters.main, just after .head in every version (pygil.c reads it too) */
    iov[nrt++] = (struct rmem_iov){p->runtime + L->rt.interp_head + 8, &main, 8};
    n = nrt;
    *pre = (struct ifields){0};
    l->preread = false;
    if (p->pred_interp)
        n += nif = ifields_iov(L, p->pred_interp, pre, iov + n);
    if (nif && p->pred_gilp)
        iov[n++] = (struct rmem_iov){p->pred_gilp, pre->gil, sizeof(pre->gil)}, ngil = 1;
    /* The first interpreter's thread states where the last sample found them: checked to
     * still form its list before use (read_tstates_again). */
    if (nif && l->iov && l->interp == p->pred_interp && l->n && l->n <= RMEM_IOV_MAX - RT_IOV)
        for (size_t i = 0; i < l->n; i++)
            iov[n++] = (struct rmem_iov){l->addr[i], l->copy[i], L->ts.size};
    nts = n;
    if (nts > nrt + nif + ngil)
        n = plan_walks(p, l, iov, n);
    if (p->watch_addr && n < RMEM_IOV_MAX) /* last: a failure costs only itself */
        iov[n++] = (struct rmem_iov){p->watch_addr, &p->watch_val, 4}, nw = 1;
    rc = rmem_readv(p->mem, iov, n, &done);
    p->watch_ok = nw && (rc == 0 || done >= n);
    if (rc < 0 && done < nrt)
        return rc;
    if (done < nrt + nif)
        pre->addr = 0;
    else if (ngil && done >= nrt + nif + 1)
        pre->gil_at = p->pred_gilp;
    l->preread = pre->addr && nts > nrt + nif + ngil && done >= nts;
    if (n > nts)
        pywalk_prefetch_done(p, l->preread ? done : 0);
    if (fin)
        return APP_E_EXITING;
    if (!head)
        return APP_E_STARTING;
    if (L->rt.gil >= 0)
        gil_parse(L, gil, g);
    *interp = head;
    *main_interp = bytes_ptr_ok(main) ? main : 0;
    return 0;
}

static struct pythread *new_thread(struct pyproc *p)
{
    if (p->sample.nthreads == p->threads_cap) {
        p->threads_cap = p->threads_cap ? p->threads_cap * 2 : 16;
        p->threads = x_reallocarray(p->threads, p->threads_cap, sizeof(*p->threads));
    }
    return memset(&p->threads[p->sample.nthreads++], 0, sizeof(struct pythread));
}

static size_t reserve_frames(struct pyproc *p, size_t n)
{
    if (p->frames_len + n > p->frames_cap) {
        while (p->frames_len + n > p->frames_cap)
            p->frames_cap = p->frames_cap ? p->frames_cap * 2 : 256;
        p->frames = x_reallocarray(p->frames, p->frames_cap, sizeof(*p->frames));
    }
    return p->frames_len;
}

_Static_assert(offsetof(struct pyrawframe, entry) == offsetof(struct pyrawframe, is_gen) + 4 &&
                   sizeof(struct pyrawframe) == 24,
               "raw frames have no padding: compared as memory and is_gen/entry as one word");

/* Three words: this runs for every frame of every stack sampled. */
static inline bool raw_same(const struct pyrawframe *a, const struct pyrawframe *b)
{
    uint64_t fa, fb;

    memcpy(&fa, &a->is_gen, sizeof(fa));
    memcpy(&fb, &b->is_gen, sizeof(fb));
    return a->code == b->code && a->q == b->q && fa == fb;
}

/* Where the memo keeps its frame r (outermost first) in its end-aligned arrays (raw, serial,
 * out; frames by output index the same way: pyproc_priv.h). */
static inline uint32_t m_ix(const struct pyresolved *c, uint32_t r)
{
    return c->cap - 1 - r;
}

#define CHAIN_SEED 0x5A17 /* the chain key of no frame */

/* How many of the walk's outermost raw frames equal (code, offset, flags) the ones the
 * thread's last resolution began with: the two line up from their outer ends, and are compared
 * as memory a block at a time. */
static uint32_t raw_common(const struct pyproc *p, const struct pyresolved *c, uint32_t n)
{
    uint32_t lim = n < c->n ? n : c->n, s = 0;
    const struct pyrawframe *a, *b;

    if (!lim)
        return 0;
    a = p->raw + n;
    b = c->raw + c->cap;
    while (s + 16 <= lim && !memcmp(a - s - 16, b - s - 16, 16 * sizeof(*a)))
        s += 16;
    while (s < lim && raw_same(a - s - 1, b - s - 1))
        s++;
    return s;
}

/* The memo's runs of equal codes that start in its s outermost frames. */
static uint32_t runs_below(const struct pyresolved *c, uint32_t s)
{
    uint32_t j = 0;

    while (j < c->nrun && c->run_start[j] < s)
        j++;
    return j;
}

/* Resolves raw_codes[0..k) into raw_res; 0 or a negative status (an unreadable code is a torn
 * walk). */
static int resolve_codes(struct pyproc *p, int k, bool alive)
{
    int rc = alive ? pycode_resolve_alive(&p->codes, p->raw_codes, (size_t)k, p->raw_res)
                   : pycode_resolve(&p->codes, p->mem, &p->L, p->pycode_type, p->raw_codes,
                                    (size_t)k, p->raw_res);

    return rc == 0 ? 0 : rc < 0 ? rc : APP_E_STALE;
}

/* Resolves the codes of the walk's n - s innermost frames (those the memo does not cover) into
 * raw_res[0..n-s), then those of the memo's nr runs over the s it covers, once per run, into
 * raw_res from n - s on: every code on the stack is still checked in this epoch, as when each
 * frame was resolved, but a deep recursion is one lookup. */
static int resolve_moved_and_runs(struct pyproc *p, const struct pyresolved *c, int n, uint32_t s,
                                  uint32_t nr, bool alive)
{
    int m = n - (int)s;

    for (int i = 0; i < m; i++)
        p->raw_codes[i] = p->raw[i].code;
    if (nr)
        memcpy(p->raw_codes + m, c->run_code, nr * sizeof(uint64_t));
    return resolve_codes(p, m + (int)nr, alive);
}

/* Of the memo's s frames equal to the walk's, how many can be taken as they were: those whose
 * code-cache entries are the ones they were resolved with (equal serials: the same strings,
 * line table and first traceable instruction), cut back so that the innermost of them gave a
 * frame. Resolving is a function of exactly these, and a hidden frame hands its entry flag to
 * the frame above it. runs: the entries of the memo's nr runs (resolve_moved_and_runs). With no
 * slot filled or released since the memo was stored, every entry is the one it was. */
static uint32_t common_valid(const struct pyresolved *c, struct pycode *const *runs, uint32_t nr,
                             uint32_t s, uint64_t changes)
{
    uint32_t cut = s;

    for (uint32_t j = 0; j < nr && cut == s && changes != c->changes; j++) {
        uint32_t end = j + 1 < nr && c->run_start[j + 1] < s ? c->run_start[j + 1] : s;

        for (uint32_t r = c->run_start[j]; r < end && cut == s; r++)
            if (runs[j]->serial != c->serial[m_ix(c, r)])
                cut = r;
    }
    while (cut > 0 && c->out[m_ix(c, cut - 1)] < 0)
        cut--;
    return cut;
}

/* realloc for an end-aligned array: what it held stays at its end. */
static void *grow_end(void *a, uint32_t old, uint32_t cap, size_t size)
{
    a = x_reallocarray(a, cap, size);
    memmove((char *)a + (size_t)(cap - old) * size, a, (size_t)old * size);
    return a;
}

static void res_reserve(struct pyresolved *c, uint32_t n)
{
    uint32_t old = c->cap;

    if (n <= c->cap)
        return;
    c->cap = n < 64 ? 64 : n + n / 2;
    c->raw = grow_end(c->raw, old, c->cap, sizeof(*c->raw));
    c->serial = grow_end(c->serial, old, c->cap, sizeof(*c->serial));
    c->out = grow_end(c->out, old, c->cap, sizeof(*c->out));
    c->frames = grow_end(c->frames, old, c->cap, sizeof(*c->frames));
    c->key = x_reallocarray(c->key, c->cap, sizeof(*c->key));
    c->run_code = x_reallocarray(c->run_code, c->cap, sizeof(*c->run_code));
    c->run_start = x_reallocarray(c->run_start, c->cap, sizeof(*c->run_start));
}

/* One raw frame into fr[*out] (or hidden); the memo's view of it is stored as its frame r. */
static void res_one(struct pyproc *p, int i, struct pyframe *fr, int *out, struct pyresolved *c,
                    uint32_t r)
{
    struct pycode *e = p->raw_res[i];
    long q = p->raw[i].q;
    int line;

    c->raw[m_ix(c, r)] = p->raw[i];
    c->serial[m_ix(c, r)] = e->serial;
    c->out[m_ix(c, r)] = -1;
    /* CPython hides frames that have not reached their first traceable instruction; a hidden
     * entry frame hands its boundary to the frame inside it. */
    if (p->L.co.firsttraceable >= 0 && !p->raw[i].is_gen && q < 2L * e->firsttraceable) {
        if (p->raw[i].entry && *out > 0)
            fr[*out - 1].entry = true;
        return;
    }
    line = q < 0 ? e->firstlineno : pycode_line(e, p->L.minor, q);
    fr[*out] = (struct pyframe){e->function, e->file, line, p->raw[i].entry != 0, e->serial};
    c->out[m_ix(c, r)] = *out; /* from the top for now; turned outermost-first below */
    (*out)++;
}

/* A reused walk (pyreuse: the GIL shows the thread has not run) whose resolution is the memo,
 * while no code-cache slot was filled or released since (so every entry, and the strings the
 * memo's frames point at, are as they were): its frames are the memo's. Returns the frame
 * count, or -1 when the walk must be resolved. */
static int res_same(struct pyproc *p, struct pyresolved *c, int n, size_t *first, uint64_t *key)
{
    if (c->n != (uint32_t)n || c->changes != p->codes.changes || !n ||
        memcmp(p->raw, c->raw + c->cap - (uint32_t)n, (size_t)n * sizeof(*p->raw)))
        return -1;
    *first = reserve_frames(p, (size_t)n);
    memcpy(p->frames + *first, c->frames + c->cap - c->nout, c->nout * sizeof(*c->frames));
    *key = hash_mix(c->nout ? c->key[c->nout - 1] : CHAIN_SEED, (uint64_t)c->nout);
    return (int)c->nout;
}

/* The memo's runs of equal codes after its frames from s on were replaced. */
static void runs_update(struct pyresolved *c, uint32_t s, uint32_t n)
{
    c->nrun = runs_below(c, s);
    for (uint32_t r = s; r < n; r++) {
        uint64_t code = c->raw[m_ix(c, r)].code;

        if (r == 0 || code != c->raw[m_ix(c, r - 1)].code) {
            c->run_code[c->nrun] = code;
            c->run_start[c->nrun++] = r;
        }
    }
}

/* The memo's frames [so, so + out) from the moved frames fr[0..out) (innermost first), with
 * their partial chain keys; returns the last key. */
static uint64_t memo_frames(struct pyresolved *c, const struct pyframe *fr, uint32_t so, int out)
{
    uint64_t k = so ? c->key[so - 1] : CHAIN_SEED;

    for (int j = out - 1; j >= 0; j--) {
        uint32_t o = so + (uint32_t)(out - 1 - j);

        /* line and entry flag in one word (exact), so a frame costs two mixes, not three */
        k = hash_mix(hash_mix(k, fr[j].key),
                     (uint64_t)(uint32_t)fr[j].line << 1 | (uint64_t)fr[j].entry);
        c->frames[m_ix(c, o)] = fr[j];
        c->key[o] = k;
    }
    return k;
}

/* Turns the raw walk into frames; returns the frame count or a negative status. The chain key
 * folds the frames outermost first, so the memo's partial keys carry over. */
static int resolve_frames(struct pyproc *p, uint64_t tsaddr, int n, bool alive, size_t *first,
                          uint64_t *key)
{
    struct pyresolved *c = &pywalk_hint(p, tsaddr, true)->res;
    uint32_t s, so, nr;
    int rc, out = 0;
    struct pyframe *fr;
    uint64_t k;

    if (alive && (rc = res_same(p, c, n, first, key)) >= 0)
        return rc;
    s = raw_common(p, c, (uint32_t)n);
    nr = runs_below(c, s);
    if ((rc = resolve_moved_and_runs(p, c, n, s, nr, alive)) < 0)
        return rc;
    so = common_valid(c, p->raw_res + (n - (int)s), nr, s, p->codes.changes);
    if (so < s) { /* the memo frames left out are moved ones: all resolved in one call again,
                   * as a call may move the cache's entries (it grows) */
        if ((rc = resolve_moved_and_runs(p, c, n, so, 0, alive)) < 0)
            return rc;
        s = so;
    }
    res_reserve(c, (uint32_t)n);
    so = s ? (uint32_t)c->out[m_ix(c, s - 1)] + 1 : 0;
    *first = reserve_frames(p, (size_t)n);
    fr = p->frames + *first;
    for (int i = 0; i < n - (int)s; i++)
        res_one(p, i, fr, &out, c, (uint32_t)(n - 1 - i));
    if (so) /* the memo's, innermost first */
        memcpy(fr + out, c->frames + c->cap - so, so * sizeof(*fr));
    for (uint32_t r = s; r < (uint32_t)n; r++) /* the moved ones' indices, outermost first */
        if (c->out[m_ix(c, r)] >= 0)
            c->out[m_ix(c, r)] = (int32_t)so + (out - 1 - c->out[m_ix(c, r)]);
    k = memo_frames(c, fr, so, out);
    runs_update(c, s, (uint32_t)n);
    c->n = (uint32_t)n;
    c->nout = so + (uint32_t)out;
    c->changes = p->codes.changes;
    *key = hash_mix(k, (uint64_t)c->nout);
    return (int)c->nout;
}

static void thread_done(struct pyproc *p, struct pythread *t, int n, size_t first, uint64_t key,
                        const struct pywalk_out *wo)
{
    t->nframes = (uint32_t)n;
    t->frames = (const struct pyframe *)(uintptr_t)first; /* fixed up at the end */
    t->truncated = wo->truncated;
    t->chain_key = key;
    t->no_python = n == 0;
    t->status = 0;
    p->frames_len = first + (size_t)n;
}

/* The thread's last whole walk, when the GIL proves it has not run since (pyreuse.c). */
static bool reuse_thread(struct pyproc *p, struct pythread *t, uint64_t tsaddr, uint64_t interp,
                         const struct pygilview *g)
{
    struct pywalk_out wo;
    size_t first = 0;
    uint64_t key = 0;
    int n = p->only ? -1 : pyreuse_try(p, tsaddr, interp, t->ident, g, &wo);

    if (n < 0 || (n = resolve_frames(p, tsaddr, n, true, &first, &key)) < 0)
        return false;
    thread_done(p, t, n, first, key, &wo);
    p->sample.reused++;
    p->stat_reused++;
    return true;
}

/* Walks and resolves one thread. A torn walk is retried from a fresh read of the thread
 * state, at most WALK_TRIES times and while WALK_BUDGET_NS lasts from the first torn walk (a
 * 1 kHz pass over several ranks must still fit its period); then the stack is dropped and
 * counted, never returned partial or empty. */
static void sample_thread(struct pyproc *p, struct pythread *t, uint64_t tsaddr, const uint8_t *ts,
                          uint64_t interp, const struct pygilview *g)
{
    uint64_t t0 = 0; /* read at the first retry: most walks need none */
    int empties = 0;

    if (reuse_thread(p, t, tsaddr, interp, g))
        return;
    pywalk_hint(p, tsaddr, true)->walked_seq = p->walk_seq;
    for (int attempt = 0; attempt < WALK_TRIES; attempt++) {
        struct pywalk_out wo;
        size_t first = 0;
        uint64_t key = 0;
        int nraw = pywalk_thread(p, tsaddr, attempt ? p->tsfresh : ts, &wo), n = nraw;

        if (n >= 0)
            n = resolve_frames(p, tsaddr, n, false, &first, &key);
        /* A whole walk may show no frame: none exists, or all are yet to start running. A
         * thread that runs Python fast can, rarely (about once in 30000 walks on 3.13), show
         * an empty but consistent-looking state while it enters a call; an empty answer is
         * therefore taken only when a second, fresh walk agrees. */
        if (n == 0 && ++empties < 2 && attempt + 1 < WALK_TRIES)
            continue;
        if (n >= 0) {
            thread_done(p, t, n, first, key, &wo);
            pyreuse_note(p, tsaddr, interp, t->ident, g, nraw, &wo);
            return;
        }
        t->status = n;
        if (n != APP_E_STALE) {
            pyreuse_forget(p, tsaddr);
            return;
        }
        p->sample.torn++;
        p->stat_torn++;
        if (!t0)
            t0 = clock_mono_ns();
        else if (clock_mono_ns() - t0 > WALK_BUDGET_NS)
            break;
    }
    p->sample.dropped++;
    p->stat_dropped++;
    pyreuse_forget(p, tsaddr);
}

static void describe_thread(struct pyproc *p, struct pythread *t, uint64_t interp,
                            const uint8_t *ts, uint64_t tsaddr, const struct pygilview *g)
{
    t->ident = bytes_load_u64(ts + p->L.ts.thread_id);
    t->gil = g->known && g->locked && g->holder == tsaddr;
    if (p->pid <= 0) { /* a memory image: no /proc to consult */
        if (p->L.ts.native_id >= 0)
            t->tid = bytes_load_i32(ts + p->L.ts.native_id);
        if (p->core_tids) { /* a core: TIDs through glibc's struct pthread, names in memory */
            t->tid = pytask_tid(p, t->ident, ts);
            if (!p->opts.no_names)
                t->name = pytask_name(p, p->main_interp ? p->main_interp : interp, t->ident);
        }
        return;
    }
    t->tid = pytask_tid(p, t->ident, ts);
    if (!p->opts.no_state)
        t->state = pytask_state(p, t->ident, t->tid);
    if (!p->opts.no_names)
        /* Names live in the main interpreter's threading._active, whichever interpreter's
         * state this is (a subinterpreter's may not even import threading). */
        t->name = pytask_name(p, p->main_interp ? p->main_interp : interp, t->ident);
}

/* Reads, in one call, the thread states at the addresses the last sample of this interpreter
 * found; true when they still form the whole list from head (each `next` names the following
 * copy, the last one ends it), as a walk of the list would have read them. */
static bool read_tstates_again(struct pyproc *p, uint64_t interp, uint64_t head, struct tslist *l)
{
    const struct py_layout *L = &p->L;
    struct rmem_iov *iov = l->iov;

    bool preread = l->preread;

    l->preread = false;
    if (l->interp != interp || !l->n || l->n > RMEM_IOV_MAX || l->addr[0] != head)
        return false;
    for (size_t i = 0; i < l->n && !preread; i++)
        iov[i] = (struct rmem_iov){l->addr[i], l->copy[i], L->ts.size};
    if (!preread && rmem_readv(p->mem, iov, (int)l->n, NULL) < 0)
        return false;
    for (size_t i = 0; i < l->n; i++) {
        uint64_t next = bytes_load_u64(l->copy[i] + L->ts.next);

        if (bytes_load_u64(l->copy[i] + L->ts.interp) != interp ||
            next != (i + 1 < l->n ? l->addr[i + 1] : 0))
            return false;
    }
    return true;
}

/* Copies every thread state of one interpreter, following `next` with a bound. */
static int read_tstates(struct pyproc *p, uint64_t interp, uint64_t head, struct tslist *l)
{
    const struct py_layout *L = &p->L;
    uint64_t ts = head;

    if (read_tstates_again(p, interp, head, l))
        return 0;
    pywalk_prefetch_drop(p); /* read for a list that no longer holds */
    l->n = 0;
    l->interp = 0;
    while (ts && l->n < p->opts.max_threads) {
        int rc;

        if (l->n == l->cap) {
            l->cap = l->cap ? l->cap * 2 : 16;
            l->copy = x_reallocarray(l->copy, l->cap, sizeof(*l->copy));
            l->addr = x_reallocarray(l->addr, l->cap, sizeof(*l->addr));
            l->iov = x_reallocarray(l->iov, l->cap + RT_IOV, sizeof(*l->iov));
        }
        if (ts & 7)
            return APP_E_STALE;
        rc = rmem_read(p->mem, ts, l->copy[l->n], L->ts.size);
        if (rc < 0)
            return rc;
        if (bytes_load_u64(l->copy[l->n] + L->ts.interp) != interp)
            return APP_E_STALE;
        l->addr[l->n++] = ts;
        ts = bytes_load_u64(l->copy[l->n - 1] + L->ts.next);
        for (size_t i = 0; i < l->n && ts; i++)
            if (l->addr[i] == ts)
                return APP_E_STALE;
    }
    if (!ts)
        l->interp = interp; /* a whole list: the next sample may read it again in one call */
    return 0;
}

/* Reads interpreter fields and its GIL (3.12+: behind interp->ceval.gil), or takes them from
 * `pre` when that copy is of this interpreter (and of the GIL it names). On 3.14+ a change
 * of the interpreter's code-object generation (bumped whenever a code object is freed)
 * flushes the code cache, as CPython's own remote reader does. */
static int read_interp(struct pyproc *p, uint64_t interp, const struct ifields *pre,
                       struct ifields *f, struct pygilview *g)
{
    const struct py_layout *L = &p->L;
    struct rmem_iov iov[5];
    int rc;

    if (pre && pre->addr == interp) {
        *f = *pre;
    } else {
        rc = rmem_readv(p->mem, iov, ifields_iov(L, interp, f, iov), NULL);
        if (rc < 0)
            return rc;
    }
    if (L->is.code_gen >= 0 && f->gen != p->code_gen) {
        pycode_cache_clear(&p->codes);
        p->code_gen = f->gen;
    }
    if (L->is.gil_ptr < 0 || !f->gilp)
        return 0;
    if (f->gil_at != f->gilp) {
        rc = rmem_read(p->mem, f->gilp, f->gil, sizeof(f->gil));
        if (rc < 0)
            return rc == APP_E_GONE ? rc : 0;
    }
    gil_parse(L, f->gil, g);
    return 0;
}

/* Whether the sample includes thread i of the list. The main thread is the interpreter's
 * first, i.e. the list's last entry. */
static bool thread_wanted(const struct pyproc *p, const struct tslist *l, size_t i,
                          uint64_t main_ts)
{
    if (p->only)
        return bytes_load_u64(l->copy[i] + p->L.ts.thread_id) == p->only_ident;
    return !p->opts.main_only || (main_ts ? l->addr[i] == main_ts : i + 1 == l->n);
}

/* Makes the first read of every thread that will be walked (not reused) in one system call. */
static void prefetch_walks(struct pyproc *p, uint64_t interp, const struct tslist *l,
                           uint64_t main_ts, const struct pygilview *g)
{
    static _Thread_local uint64_t addr[PREFETCH_MAX];
    static _Thread_local const uint8_t *guess[PREFETCH_MAX];
    int n = 0;

    for (size_t i = 0; i < l->n && n < PREFETCH_MAX; i++) {
        uint64_t ident = bytes_load_u64(l->copy[i] + p->L.ts.thread_id);

        if (!thread_wanted(p, l, i, main_ts) ||
            (!p->only && pyreuse_ready(p, l->addr[i], interp, ident, g)) ||
            pywalk_prefetch_serves(p, l->addr[i], l->copy[i])) /* read in the runtime's call */
            continue;
        addr[n] = l->addr[i];
        guess[n++] = l->copy[i];
    }
    pywalk_prefetch(p, addr, guess, n);
}

static int sample_interp(struct pyproc *p, uint64_t interp, const struct ifields *pre,
                         uint64_t *next, struct tslist *l, struct pygilview g)
{
    struct ifields f;
    uint64_t main_ts;
    int rc = read_interp(p, interp, pre, &f, &g);

    if (rc < 0)
        return rc;
    *next = f.next;
    main_ts = f.main_ts;
    if (pre) { /* the first interpreter: where the next sample copies it from */
        p->pred_interp = interp;
        p->pred_gilp = f.gilp;
    }
    rc = read_tstates(p, interp, f.head, l);
    if (rc < 0)
        return rc;
    if (g.known && g.locked)
        p->sample.gil_locked = true;
    prefetch_walks(p, interp, l, main_ts, &g);
    for (size_t i = 0; i < l->n; i++) {
        struct pythread *t;

        if (!thread_wanted(p, l, i, main_ts))
            continue;
        t = new_thread(p);
        describe_thread(p, t, interp, l->copy[i], l->addr[i], &g);
        sample_thread(p, t, l->addr[i], l->copy[i], interp, &g);
        if (t->status == APP_E_GONE)
            return APP_E_GONE;
    }
    return 0;
}

/* One OS thread has a thread state in every interpreter it entered (a subinterpreter run from
 * the main thread leaves one there, without frames while the thread is back in the main
 * interpreter): of the states of one ident, the sample keeps the one that shows the most
 * frames, the later one (the main interpreter is the list's last) on a tie. */
static void dedupe_idents(struct pyproc *p)
{
    uint32_t n = p->sample.nthreads, kept = 0;
    bool *drop = x_calloc(n ? n : 1, sizeof(*drop));

    /* Decided on the list as sampled, then compacted: no decision reads a moved entry. */
    for (uint32_t i = 0; i < n; i++) {
        const struct pythread *t = &p->threads[i];
        uint32_t tn = t->status == 0 ? t->nframes + 1 : 0;

        for (uint32_t j = 0; j < n && !drop[i]; j++) {
            const struct pythread *u = &p->threads[j];
            uint32_t un = u->status == 0 ? u->nframes + 1 : 0;

            drop[i] = j != i && u->ident == t->ident && (un > tn || (un == tn && j > i));
        }
    }
    for (uint32_t i = 0; i < n; i++)
        if (!drop[i])
            p->threads[kept++] = p->threads[i];
    p->sample.nthreads = kept;
    free(drop);
}

static int sample_once(struct pyproc *p, struct tslist *l)
{
    struct pygilview g = {0};
    struct ifields pre;
    uint64_t interp = 0, main_interp = 0, next;
    int rc, n = 0;

    p->walk_seq++; /* a retry of the sample is a sample of its own for what it fetched */
    rc = read_runtime(p, &interp, &main_interp, &g, &pre);

    p->main_interp = main_interp;

    /* The main thread alone: of the main interpreter, not of the newest one (the list's head). */
    if (rc == 0 && p->opts.main_only && !p->only && main_interp)
        return sample_interp(p, main_interp, &pre, &next, l, g);
    for (; rc == 0 && interp && n < PYPROC_MAX_INTERPS; n++) {
        rc = sample_interp(p, interp, n == 0 ? &pre : NULL, &next, l, g);
        if (p->opts.main_only && !p->only)
            break;
        interp = next;
    }
    if (n > 1)
        dedupe_idents(p);
    return rc;
}

static void reset_sample(struct pyproc *p)
{
    pycode_cache_collect(&p->codes);
    pycode_cache_next_epoch(&p->codes);
    memset(&p->sample, 0, sizeof(p->sample));
    p->frames_len = 0;
}

/* The process's CPU time in ns, or 0 when it cannot be had. */
static uint64_t process_cpu_ns(const struct pyproc *p)
{
    struct timespec ts;

    if (!p->cpu_clock_ok || clock_gettime(p->cpu_clock, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 1;
}

/* Returns the last sample again, stamped now, when no thread of the process has run since
 * just before it was read: its CPU clock (every thread's time, the running ones' included)
 * has not moved, so no frame can have moved either. Only the engine's kind of sample (no
 * running/idle state: a runnable thread may wait for a CPU without using any) is reused. */
static bool sample_unchanged(struct pyproc *p, uint64_t cpu)
{
    if (!cpu || cpu != p->cpu_before_last || !p->last_whole || !p->opts.no_state || p->only)
        return false;
    p->sample.t_mono_ns = clock_mono_ns();
    p->sample.reads = 0;
    p->sample.torn = 0;
    p->sample.dropped = 0;
    p->sample.reused = p->sample.nthreads;
    p->stat_reused += p->sample.nthreads;
    p->stat_samples++;
    return true;
}

#define CLOCK_SKIP_MAX 7 /* clock reads skipped at most between two, while the process moves */

/* Whether this sample reads the process's CPU clock. The read (a system call that sums every
 * thread's time) only pays when the process stands still; one that was found moving at
 * every read lately is read whole with fewer checks: after k moving reads in a row, k - 1 are
 * skipped (at most CLOCK_SKIP_MAX). A process that stops is then noticed within that many
 * samples, and a sample taken without the clock is never returned again (no clock value to
 * compare). */
static bool clock_due(struct pyproc *p)
{
    if (!p->opts.no_state || p->only)
        return false;
    if (p->clock_skip) {
        p->clock_skip--;
        return false;
    }
    return true;
}

/* After a sample that read the clock (cpu != 0): the moving streak and the reads to skip. */
static void clock_note(struct pyproc *p, uint64_t cpu, bool unchanged)
{
    if (!cpu)
        return;
    p->moved_streak = unchanged || cpu == p->cpu_seen ? 0 : p->moved_streak + 1;
    p->cpu_seen = cpu;
    p->clock_skip = p->moved_streak > 1 ? p->moved_streak - 1 : 0;
    if (p->clock_skip > CLOCK_SKIP_MAX)
        p->clock_skip = CLOCK_SKIP_MAX;
}

/* Notes whether the sample just taken may be returned again (sample_unchanged). */
static void note_whole(struct pyproc *p, int rc, uint64_t cpu)
{
    uint64_t digest = 0x51DE;
    bool whole = rc == 0 && !p->only && !p->sample.torn;

    for (uint32_t i = 0; i < p->sample.nthreads; i++) {
        whole = whole && p->threads[i].status == 0;
        digest = hash_mix(hash_mix(digest, p->threads[i].ident), p->threads[i].chain_key);
    }
    /* Only a state two samples in a row agree on is reused: one torn read that passed every
     * check must not be frozen in place for as long as the process sleeps. */
    p->last_whole = whole && digest == p->last_digest;
    p->last_digest = whole ? digest : 0;
    p->cpu_before_last = cpu;
}

int pyproc_sample(struct pyproc *p, const struct pysample **out, struct app_err *err)
{
    /* Only a reader that may reuse a still sample pays for the clock read. */
    uint64_t reads0 = rmem_calls(p->mem), cpu = clock_due(p) ? process_cpu_ns(p) : 0;
    int rc;

    if (sample_unchanged(p, cpu)) {
        clock_note(p, cpu, true);
        *out = &p->sample;
        return 0;
    }
    clock_note(p, cpu, false);
    reset_sample(p);
    p->sample.t_mono_ns = clock_mono_ns();
    rc = sample_once(p, &p->ts);
    if (rc == APP_E_STALE) {
        reset_sample(p);
        p->stat_torn++;
        rc = sample_once(p, &p->ts);
    }
    p->stat_samples++;
    for (uint32_t i = 0; i < p->sample.nthreads; i++)
        p->threads[i].frames =
            p->threads[i].nframes ? p->frames + (uintptr_t)p->threads[i].frames : NULL;
    p->sample.threads = p->threads;
    p->sample.names_gen = p->names_gen;
    p->sample.reads = (unsigned)(rmem_calls(p->mem) - reads0);
    note_whole(p, rc, cpu);
    *out = &p->sample;
    if (rc < 0)
        return app_err_set(err, rc, "process %d: %s", p->pid,
                           rc == APP_E_GONE ? "process exited" : app_status_str(rc));
    return 0;
}

const struct pythread *pyproc_sample_thread(struct pyproc *p, uint64_t ident)
{
    const struct pysample *s;
    int rc;

    p->only = true;
    p->only_ident = ident;
    rc = pyproc_sample(p, &s, NULL);
    p->only = false;
    return rc == 0 && s->nthreads == 1 && s->threads[0].status == 0 ? &s->threads[0] : NULL;
}
