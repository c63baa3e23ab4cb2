/* GIL prober and GIL figures.
 *
 * The prober watches the main interpreter's _gil_runtime_state: runtime-wide up to 3.11,
 * behind interp->ceval.gil from 3.12 (own GIL of the main interpreter). The holder is
 * `locked && last_holder`; its tstate is mapped to a threading ident through a small cache.
 * Drop requests are an int in the runtime (3.8) or interpreter (3.9-3.12), and bit 0 of the
 * holder's tstate->eval_breaker from 3.13. Waiters are glibc's condvar waiter count, only
 * when the target maps a glibc whose release the mapped libc names (__wrefs moved in 2.41).
 * gc.collecting sits in the runtime (3.8), the interpreter (3.9-3.12), or where _Py_DebugOffsets
 * says (3.13+). Every one of those locations comes from the gil part of the version's descriptor
 * (abi/pyabi.h); this file holds none.
 *
 * Cost: after a one-time resolution, a probe is one process_vm_readv of a few merged ranges
 * that re-validates the cached interpreter and GIL pointers and speculatively reads the
 * previous holder's tstate; a second read happens only when the holder changed and is not
 * in the tstate -> ident cache (3.13+: whenever it changed, for its eval_breaker). A cached
 * ident is re-checked by the next probe's speculative read, so a reused tstate address is
 * misattributed for at most one probe. Owned by one thread at a time. */
#include "ranktop/python/gil.h"

#include "pyproc_priv.h"
#include "ranktop/base/bytes.h"
#include "ranktop/proc/procmaps.h"
#include "ranktop/base/util.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define COND_SIZE 48      /* sizeof(pthread_cond_t), x86-64 and aarch64 glibc */
#define COND_WREFS 36     /* glibc 2.25-2.40: __wrefs, waiters << 3 | flags */
#define COND_WREFS_241 28 /* glibc 2.41+ (__g_refs gone): __wrefs after __g1_orig_size */
#define LIBC_READ_MAX (32u << 20)
/* The target has our architecture (its ELF machine is checked) and so our glibc's condvar.
 * pthread_mutex_t differs (40 bytes on x86-64, 48 on aarch64) but sits after cond, outside
 * what is read. */
#ifdef __GLIBC__
_Static_assert(sizeof(pthread_cond_t) == COND_SIZE, "COND_SIZE is this glibc's condvar");
#endif
#define GIL_READ_MAX 256 /* bytes of _gil_runtime_state up to the end of cond */
#define SPAN_MAX 512     /* bytes of a tstate read for its ident and eval_breaker */
#define IDENT_CACHE 64
#define MAX_WAITERS 65536

struct ident_entry {
    uint64_t ts, ident;
};

/* The fields a probe reads; ranges closer than MERGE_GAP are read as one. */
enum field { F_HEAD, F_MAIN, F_FIN, F_GILP, F_GIL, F_DROP, F_GC, NFIELDS };

#define MERGE_GAP 1024
#define PLAN_BUF 16384 /* > NFIELDS * GIL_READ_MAX + (NFIELDS - 1) * MERGE_GAP */
#define AT_NONE UINT32_MAX

/* The steady-state read, built once the addresses are resolved: merged ranges landing in
 * buf, and where each field sits inside buf. */
struct plan {
    struct rmem_iov iov[NFIELDS];
    int n;
    uint32_t at[NFIELDS];
    uint8_t buf[PLAN_BUF];
};

struct pygil {
    struct rmem *mem;
    bool own_mem;
    int pid;
    struct py_layout L;
    uint64_t runtime;
    uint32_t gil_len;           /* bytes of the GIL struct read per probe */
    uint32_t span_lo, span_len; /* tstate bytes read for the holder */

    /* Resolved on the first probe and re-validated by every probe. */
    bool ready;
    uint64_t interp, gil, drop_addr, gc_addr; /* 0 = none */
    int glibc; /* __wrefs' place in the condvar, 0 unknown (not glibc), -1 not checked yet */
    struct plan plan;

    uint64_t spec_ts; /* the last holder: its tstate is read speculatively */
    uint8_t span[SPAN_MAX];
    struct ident_entry cache[IDENT_CACHE];
    unsigned cache_next;
    uint64_t probes, reads, errors;
};

/* The main interpreter: runtime->interpreters.main (just after .head), else the head. */
static uint64_t pick_interp(uint64_t head, uint64_t main)
{
    return bytes_ptr_ok(main) ? main : head;
}

struct pygil *pygil_new(const struct pyproc *p)
{
    const struct py_gil_offsets *x = &p->L.gil;
    struct pygil *g;
    uint32_t lo, hi;

    if (x->drop == PY_DROP_UNKNOWN || x->cond + COND_SIZE > GIL_READ_MAX)
        return NULL;
    g = x_calloc(1, sizeof(*g));
    g->pid = p->pid;
    g->own_mem = p->pid > 0;
    g->mem = g->own_mem ? rmem_new_pid(p->pid) : p->mem;
    g->L = p->L;
    g->runtime = p->runtime;
    g->gil_len = x->cond + COND_SIZE;
    lo = p->L.ts.interp;
    if (x->drop == PY_DROP_TSTATE_BIT && (uint32_t)x->drop_off < lo)
        lo = (uint32_t)x->drop_off;
    hi = p->L.ts.thread_id + 8;
    g->span_lo = lo;
    g->span_len = hi > lo && hi - lo <= SPAN_MAX ? hi - lo : 0;
    g->glibc = p->pid > 0 ? -1 : COND_WREFS; /* memory images describe glibc 2.36 processes */
    return g;
}

uint64_t pygil_gc_addr(const struct pygil *g)
{
    return g->ready ? g->gc_addr : 0;
}

void pygil_free(struct pygil *g)
{
    if (!g)
        return;
    if (g->own_mem)
        rmem_free(g->mem);
    free(g);
}

void pygil_get_stats(const struct pygil *g, struct pygil_stats *st)
{
    st->probes = g->probes;
    st->reads = g->reads;
    st->errors = g->errors;
}

/* The minor release of the glibc in the file at path, from its banner ("... release version
 * 2.43"), or -1. */
static int glibc_minor(const char *path)
{
    static const char tag[] = "release version 2.";
    char *buf = NULL, *at;
    size_t len = 0;
    int minor = -1;

    if (file_read_all(path, LIBC_READ_MAX, &buf, &len) < 0)
        return -1;
    at = memmem(buf, len, tag, sizeof(tag) - 1);
    if (at && (size_t)(at - buf) + sizeof(tag) + 2 < len)
        minor = atoi(at + sizeof(tag) - 1);
    free(buf);
    return minor;
}

/* Where the target's glibc keeps a condvar's __wrefs: 36 up to 2.40, 28 from 2.41 (which
 * dropped __g_refs and moved __g_signals behind __wrefs); 0 for musl, which has none, and for
 * a libc whose release cannot be read (a wrong word would be shown as a waiter count). */
static int detect_glibc(int pid)
{
    struct procmaps maps;
    int at = 0;
    bool seen = false;

    if (procmaps_read(pid, &maps, NULL) < 0)
        return 0;
    for (size_t i = 0; i < maps.n && !seen; i++) {
        const char *base = strrchr(maps.v[i].path, '/');
        char path[4200];
        int minor;

        base = base ? base + 1 : maps.v[i].path;
        if (maps.v[i].offset != 0 ||
            (strncmp(base, "libc.so.6", 9) != 0 && strncmp(base, "libc-2.", 7) != 0))
            continue;
        seen = true;
        if (procmaps_file_path(pid, &maps.v[i], path, sizeof(path)) < 0)
            continue;
        minor = glibc_minor(path);
        at = minor >= 41 ? COND_WREFS_241 : minor >= 25 ? COND_WREFS : 0;
    }
    procmaps_fini(&maps);
    return at;
}

/* 3.13+: &interp->gc.collecting from the target's _Py_DebugOffsets, validated; 0 if not. */
static uint64_t gc_from_debug(struct pygil *g, uint64_t interp)
{
    const struct py_gil_offsets *x = &g->L.gil;
    uint64_t is_size = 0, is_gc = 0, gc_size = 0, coll = 0;
    struct rmem_iov iov[4] = {
        {g->runtime + (uint64_t)x->gc_slot_is_size, &is_size, 8},
        {g->runtime + (uint64_t)x->gc_off, &is_gc, 8},
        {g->runtime + (uint64_t)x->gc_slot_coll - 8, &gc_size, 8},
        {g->runtime + (uint64_t)x->gc_slot_coll, &coll, 8},
    };

    if (rmem_readv(g->mem, iov, 4, NULL) < 0)
        return 0;
    if (gc_size > is_size || is_gc > is_size - gc_size || coll + 4 > gc_size)
        return 0;
    return interp + is_gc + coll;
}

struct want {
    uint64_t addr;
    uint32_t len;
    enum field f;
};

/* Sorts the wanted ranges by address and merges neighbours into as few iovecs as possible:
 * the cost of process_vm_readv grows with the number of remote ranges, not their bytes. */
static void plan_build(struct plan *pl, struct want *w, int n)
{
    uint32_t used = 0;
    uint64_t start = 0, end = 0;

    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && w[k].addr < w[k - 1].addr; k--) {
            struct want t = w[k];

            w[k] = w[k - 1];
            w[k - 1] = t;
        }
    pl->n = 0;
    for (int f = 0; f < NFIELDS; f++)
        pl->at[f] = AT_NONE;
    for (int i = 0; i < n; i++) {
        if (pl->n == 0 || w[i].addr > end + MERGE_GAP) {
            used += pl->n ? (uint32_t)(end - start) : 0;
            start = w[i].addr;
            end = start;
            pl->iov[pl->n++] = (struct rmem_iov){start, pl->buf + used, 0};
        }
        if (w[i].addr + w[i].len > end)
            end = w[i].addr + w[i].len;
        pl->iov[pl->n - 1].len = (size_t)(end - start);
        pl->at[w[i].f] = used + (uint32_t)(w[i].addr - start);
    }
}

static void plan_for(struct pygil *g)
{
    const struct py_layout *L = &g->L;
    struct want w[NFIELDS];
    int n = 0;

    w[n++] = (struct want){g->runtime + L->rt.interp_head, 8, F_HEAD};
    w[n++] = (struct want){g->runtime + L->rt.interp_head + 8, 8, F_MAIN};
    w[n++] = (struct want){g->runtime + L->rt.finalizing, 8, F_FIN};
    if (L->is.gil_ptr >= 0)
        w[n++] = (struct want){g->interp + (uint64_t)L->is.gil_ptr, 8, F_GILP};
    w[n++] = (struct want){g->gil, g->gil_len, F_GIL};
    if (g->drop_addr)
        w[n++] = (struct want){g->drop_addr, 4, F_DROP};
    if (g->gc_addr)
        w[n++] = (struct want){g->gc_addr, 4, F_GC};
    plan_build(&g->plan, w, n);
}

/* Finds the main interpreter, its GIL and the drop-request and gc addresses. */
static int resolve(struct pygil *g)
{
    const struct py_layout *L = &g->L;
    uint64_t head = 0, main = 0, fin = 0, interp, gilp = 0;
    struct rmem_iov iov[3] = {
        {g->runtime + L->rt.interp_head, &head, 8},
        {g->runtime + L->rt.interp_head + 8, &main, 8},
        {g->runtime + L->rt.finalizing, &fin, 8},
    };
    int rc = rmem_readv(g->mem, iov, 3, NULL);

    if (rc < 0)
        return rc;
    if (fin)
        return APP_E_EXITING;
    interp = pick_interp(head, main);
    if (!interp)
        return APP_E_STARTING;
    if (!bytes_ptr_ok(interp))
        return APP_E_STALE;
    if (L->rt.gil >= 0) {
        gilp = g->runtime + (uint64_t)L->rt.gil;
    } else {
        rc = rmem_read(g->mem, interp + (uint64_t)L->is.gil_ptr, &gilp, 8);
        if (rc < 0)
            return rc;
        if (!gilp)
            return APP_E_STARTING;
        if (!bytes_ptr_ok(gilp))
            return APP_E_STALE;
    }
    g->interp = interp;
    g->gil = gilp;
    g->drop_addr = L->gil.drop == PY_DROP_RUNTIME  ? g->runtime + (uint64_t)L->gil.drop_off
                   : L->gil.drop == PY_DROP_INTERP ? interp + (uint64_t)L->gil.drop_off
                                                   : 0;
    g->gc_addr = L->gil.gc == PY_GC_RUNTIME  ? g->runtime + (uint64_t)L->gil.gc_off
                 : L->gil.gc == PY_GC_INTERP ? interp + (uint64_t)L->gil.gc_off
                                             : gc_from_debug(g, interp);
    if (g->glibc < 0)
        g->glibc = detect_glibc(g->pid);
    plan_for(g);
    g->ready = true;
    return 0;
}

static uint64_t field64(const struct plan *pl, enum field f)
{
    return pl->at[f] == AT_NONE ? 0 : bytes_load_u64(pl->buf + pl->at[f]);
}

/* The steady-state read: the plan's ranges, then the last holder's tstate (last, so that a
 * freed tstate costs only that range). Returns 0 with *span_ok telling whether the
 * speculative range was read. */
static int read_probe(struct pygil *g, bool *span_ok)
{
    struct plan *pl = &g->plan;
    struct rmem_iov iov[NFIELDS + 1];
    int n = pl->n, ndone = 0, rc;
    bool spec = g->spec_ts && g->span_len;

    memcpy(iov, pl->iov, (size_t)n * sizeof(iov[0]));
    if (spec)
        iov[n++] = (struct rmem_iov){g->spec_ts + g->span_lo, g->span, g->span_len};
    rc = rmem_readv(g->mem, iov, n, &ndone);
    *span_ok = spec && rc == 0;
    if (rc == APP_E_STALE && spec && ndone == pl->n)
        rc = 0; /* only the speculative range failed: the old holder's tstate is gone */
    if (rc == APP_E_STALE)
        g->ready = false; /* the interpreter or its GIL may have moved: resolve again */
    if (rc < 0)
        return rc;
    if (field64(pl, F_FIN))
        return APP_E_EXITING;
    if (pick_interp(field64(pl, F_HEAD), field64(pl, F_MAIN)) != g->interp ||
        (pl->at[F_GILP] != AT_NONE && field64(pl, F_GILP) != g->gil)) {
        g->ready = false; /* re-resolve: the interpreter or its GIL moved */
        return APP_E_STALE;
    }
    return 0;
}

static bool cache_get(const struct pygil *g, uint64_t ts, uint64_t *ident)
{
    for (size_t i = 0; i < IDENT_CACHE; i++) {
        if (g->cache[i].ts == ts) {
            *ident = g->cache[i].ident;
            return true;
        }
    }
    return false;
}

static void cache_put(struct pygil *g, uint64_t ts, uint64_t ident)
{
    for (size_t i = 0; i < IDENT_CACHE; i++) {
        if (g->cache[i].ts == ts) {
            g->cache[i].ident = ident;
            return;
        }
    }
    g->cache[g->cache_next] = (struct ident_entry){ts, ident};
    g->cache_next = (g->cache_next + 1) % IDENT_CACHE;
}

/* Takes the ident (and, 3.13+, the drop bit) from a copy of the holder's tstate span. */
static void holder_from_span(struct pygil *g, uint64_t ts, struct pygil_sample *out)
{
    uint64_t interp = bytes_load_u64(g->span + (g->L.ts.interp - g->span_lo));
    uint64_t ident = bytes_load_u64(g->span + (g->L.ts.thread_id - g->span_lo));

    if (!bytes_ptr_ok(interp) || !ident)
        return; /* freed or reused memory: leave the holder unknown */
    out->holder_ident = ident;
    cache_put(g, ts, ident);
    if (g->L.gil.drop == PY_DROP_TSTATE_BIT) {
        out->drop_known = true;
        out->drop_request =
            bytes_load_u64(g->span + ((uint32_t)g->L.gil.drop_off - g->span_lo)) & 1;
    }
}

/* Identifies the holder: from the speculative read, the cache, or one more read. */
static void find_holder(struct pygil *g, uint64_t ts, bool span_ok, struct pygil_sample *out)
{
    bool need_span = g->L.gil.drop == PY_DROP_TSTATE_BIT;

    if (ts == g->spec_ts && span_ok) {
        holder_from_span(g, ts, out);
    } else if (!need_span && cache_get(g, ts, &out->holder_ident)) {
        /* Cached; the next probe's speculative read re-checks it. */
    } else if (bytes_ptr_ok(ts) && g->span_len &&
               rmem_read(g->mem, ts + g->span_lo, g->span, g->span_len) == 0) {
        holder_from_span(g, ts, out);
    }
    g->spec_ts = ts;
}

static void decode(struct pygil *g, int32_t locked, bool span_ok, struct pygil_sample *out)
{
    const struct py_layout *L = &g->L;
    const struct plan *pl = &g->plan;
    const uint8_t *gil = pl->buf + pl->at[F_GIL];
    int32_t gc = pl->at[F_GC] == AT_NONE ? -1 : bytes_load_i32(pl->buf + pl->at[F_GC]);
    uint32_t wrefs = g->glibc > 0 ? bytes_load_u32(gil + L->gil.cond + (uint32_t)g->glibc) : 0;

    out->known = true;
    out->locked = locked == 1;
    out->switch_number = bytes_load_u64(gil + L->gil.switch_number);
    out->waiters = g->glibc > 0 && wrefs >> 3 <= MAX_WAITERS ? (int)(wrefs >> 3) : -1;
    out->in_gc = gc == 0 || gc == 1 ? gc : -1;
    if (pl->at[F_DROP] != AT_NONE) {
        out->drop_known = true;
        out->drop_request = bytes_load_i32(pl->buf + pl->at[F_DROP]) != 0;
    } else if (!out->locked) {
        out->drop_known = true; /* 3.13+: no holder, nothing to drop */
    }
    if (out->locked)
        find_holder(g, bytes_load_u64(gil + L->gil.last_holder), span_ok, out);
}

static int probe_once(struct pygil *g, struct pygil_sample *out)
{
    int32_t locked;
    bool span_ok = false;
    int rc = g->ready ? 0 : resolve(g);

    if (rc < 0)
        return rc;
    rc = read_probe(g, &span_ok);
    if (rc < 0)
        return rc;
    locked = bytes_load_i32(g->plan.buf + g->plan.at[F_GIL] + g->L.gil.locked);
    if (locked < 0)
        return APP_E_STARTING; /* the GIL is not created (yet) or already destroyed */
    if (locked > 1)
        return APP_E_STALE;
    decode(g, locked, span_ok, out);
    return 0;
}

static void sample_reset(struct pygil_sample *out)
{
    memset(out, 0, sizeof(*out));
    out->waiters = -1;
    out->in_gc = -1;
    out->t_ns = clock_mono_ns();
}

int pygil_sample(struct pygil *g, struct pygil_sample *out, struct app_err *err)
{
    uint64_t calls = rmem_calls(g->mem);
    int rc;

    sample_reset(out);
    rc = probe_once(g, out);
    if (rc == APP_E_STALE) { /* retried once, after re-resolving the addresses */
        sample_reset(out);
        rc = probe_once(g, out);
    }
    g->probes++;
    g->reads += rmem_calls(g->mem) - calls;
    if (rc == 0)
        return 0;
    g->errors++;
    out->known = false;
    return app_err_set(err, rc, "process %d: GIL probe: %s", g->pid,
                       rc == APP_E_GONE ? "process exited" : app_status_str(rc));
}

/* ---- figures -------------------------------------------------------------------------- */

void gilstats_init(struct gilstats *st)
{
    memset(st, 0, sizeof(*st));
}

void gilstats_next(struct gilstats *st)
{
    struct gilstats keep = *st;

    memset(st, 0, sizeof(*st));
    st->have_base = keep.have_base;
    st->t_base = keep.t_last;
    st->t_last = keep.t_last;
    st->switch_last = keep.switch_last;
    st->drop_last = keep.drop_last;
}

static void attribute(struct gilstats *st, uint64_t ident)
{
    size_t i;

    for (i = 0; i < st->nthreads; i++)
        if (st->threads[i].ident == ident)
            break;
    if (!ident || (i == st->nthreads && i == GILSTATS_MAX_THREADS)) {
        st->unattributed++;
        return;
    }
    if (i == st->nthreads)
        st->threads[st->nthreads++].ident = ident;
    st->threads[i].held++;
}

static void add_drop(struct gilstats *st, const struct pygil_sample *s)
{
    if (!s->drop_known) {
        st->drop_last = false;
        return;
    }
    st->drop_n++;
    if (s->drop_request) {
        st->drop_set++;
        st->drop_edges += !st->drop_last;
    }
    st->drop_last = s->drop_request;
}

void gilstats_add(struct gilstats *st, const struct pygil_sample *s)
{
    st->probes++;
    if (!s->known)
        return;
    if (!st->have_base) {
        st->have_base = true;
        st->t_base = s->t_ns;
    } else if (s->switch_number >= st->switch_last) {
        st->switches += s->switch_number - st->switch_last;
    }
    st->switch_last = s->switch_number;
    st->t_last = s->t_ns;
    st->known++;
    if (s->locked) {
        st->locked++;
        attribute(st, s->holder_ident);
    }
    if (s->waiters >= 0) {
        st->waiters_sum += (uint64_t)s->waiters;
        st->waiters_n++;
    }
    add_drop(st, s);
    if (s->in_gc >= 0) {
        st->gc_n++;
        st->gc_set += (uint64_t)s->in_gc;
    }
}

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : -1.0;
}

static double per_s(uint64_t count, uint64_t span_ns)
{
    return span_ns ? (double)count * 1e9 / (double)span_ns : 0.0;
}

static int by_share(const void *a, const void *b)
{
    double x = ((const struct gilshare *)a)->holder_pct;
    double y = ((const struct gilshare *)b)->holder_pct;

    return x < y ? 1 : x > y ? -1 : 0;
}

void gilstats_figures(const struct gilstats *st, uint64_t window_ns, struct gilfigures *out)
{
    uint64_t span = window_ns ? window_ns : st->t_last - st->t_base;

    memset(out, 0, sizeof(*out));
    out->probes = st->known;
    out->busy_pct = st->known ? pct(st->locked, st->known) : 0.0;
    out->unattributed_pct = st->known ? pct(st->unattributed, st->known) : 0.0;
    out->switches_per_s = per_s(st->switches, span);
    out->waiters_avg = st->waiters_n ? (double)st->waiters_sum / (double)st->waiters_n : -1.0;
    out->drop_pending_pct = pct(st->drop_set, st->drop_n);
    out->drop_requests_per_s = st->drop_n ? per_s(st->drop_edges, span) : -1.0;
    out->gc_pct = pct(st->gc_set, st->gc_n);
    out->nthreads = st->nthreads;
    for (size_t i = 0; i < st->nthreads; i++) {
        out->threads[i].ident = st->threads[i].ident;
        out->threads[i].holder_pct = pct(st->threads[i].held, st->known);
    }
    x_qsort(out->threads, out->nthreads, sizeof(out->threads[0]), by_share);
}
