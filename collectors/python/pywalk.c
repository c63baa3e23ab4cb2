/* Frame walks, innermost first, into pyproc's raw-frame scratch.
 *
 * Every walk starts from a fresh copy of the thread state, never from the copy the thread
 * list was built from: a retry that walked the same bytes again would fail the same way.
 * 3.8-3.10 frames are heap objects: the top one is read singly, the ones below it where the
 * thread's last walk found them, in one call, used only as far as f_back leads to them. 3.11+
 * frames live in the thread's data-stack chunks: the thread state, the top-frame pointer
 * (3.11/3.12: in a _PyCFrame on the target's C stack) and the newest chunk are copied in one system
 * call at addresses the previous copy predicts, then checked against the fresh thread state; frames
 * found elsewhere (generators, 3.12+ entry shims) come in that call too when the last walk met them
 * at the same address, else are read singly.
 *
 * A walk is a sample only when it ends where a thread's stack really ends: a NULL `previous`
 * on an entry frame of the expected owner (3.11 is_entry and owned by the thread, 3.12+ an
 * owner >= owner_skip whose code word matches the walk's other entry frames), with the
 * outermost Python frame at data[1] of the root chunk (3.11+), and every frame on the way
 * still alive (3.8-3.10 executing or unwinding; 3.11+ not owned by a frame object). Anything
 * else is APP_E_STALE, and so is a missing top frame unless the thread truly has none
 * (3.11/3.12: the cframe is the one inside the thread state; 3.13+: current_frame is NULL;
 * 3.8-3.10: frame is NULL). Every step counts toward an absolute bound and a loop check, so a
 * torn, looping chain ends as APP_E_STALE instead of a hang or a "truncated" stack. Sampling
 * thread only. */
#include "pyproc_priv.h"

#include "ranktop/base/bytes.h"
#include "ranktop/base/util.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK_GUESS (16 * 1024)
#define CHUNK_MAX (16u << 20)
#define FRAME_MAX 128
#define CHUNK_SLACK 512    /* bytes read past the predicted top: the stack may grow meanwhile */
#define PYFETCH_BATCH 256  /* threads whose first calls pywalk_prefetch joins */
#define BASE_CHECK_MAX 256 /* threads whose outermost frames a 3.8-3.10 walk is checked against */
#define BASE_MISSES_MAX 3  /* samples refusing a changed outermost frame before it is believed */
#define PY_OWNER_THREAD 0
#define PY_OWNER_FRAME_OBJECT 2

#define TLBC_MAX 4096 /* free-threaded: the most per-thread bytecode copies believed */

struct chunkset {
    uint64_t addr[PYPROC_MAX_CHUNKS];
    size_t len[PYPROC_MAX_CHUNKS]; /* valid bytes from addr */
    uint64_t older;                /* next older chunk not loaded yet, 0 if none */
    int n;
    struct pyhint *hint; /* this thread's off-chunk frames of the last walk */
    uint8_t hbuf[PYHINT_MAX][FRAME_MAX];
    bool hread[PYHINT_MAX];    /* hbuf[i] holds a copy taken with the chunk */
    uint64_t seen[PYHINT_MAX]; /* off-chunk frames met in this walk */
    int nseen;
    /* Older chunks the first call copied into slots 1.. (old_got bytes each), for chunk_load
     * to take instead of a read when the chain leads to them. */
    uint64_t old_addr[PYHINT_OLD];
    size_t old_got[PYHINT_OLD];
    int nold;
    int last; /* the chunk the last frame was found in */
};

static uint8_t *chunk_buf(struct pyproc *p, int i, size_t len)
{
    if (p->chunk_cap[i] < len) {
        free(p->chunk[i]);
        p->chunk[i] = x_malloc(len);
        p->chunk_cap[i] = len;
    }
    return p->chunk[i];
}

/* 3.8-3.10: a frame in the live chain is executing (or, 3.10, unwinding an exception); a
 * freed one (zombie or on the free list, whose f_back links the list) is not. */
static bool old_frame_alive(const struct py_layout *L, const uint8_t *f)
{
    int8_t v = (int8_t)f[L->fr.state];

    return L->fr.state_enum ? v == 0 || v == 2 : v == 1;
}

/* Brent's cycle check over a chain of frame addresses: a torn chain can loop through several
 * frames (one that points at itself is caught at once), and a loop shorter than the frame cap
 * would otherwise come back as a "truncated" stack. O(1) memory; a loop is caught within
 * about twice its length past its entry. */
struct loopcheck {
    uint64_t mark;
    uint32_t len, power;
};

static bool chain_loops(struct loopcheck *lc, uint64_t frame)
{
    if (frame && frame == lc->mark)
        return true;
    if (++lc->len >= lc->power) {
        lc->mark = frame;
        lc->power = lc->power ? lc->power * 2 : 2;
        lc->len = 0;
    }
    return false;
}

/* 3.8-3.10 frames fetched ahead: the last walk's chain from where the walk meets it, copied a
 * window at a time, each window in one call. A frame below the running one does not change while
 * its callee runs, so a deep stack is mostly where the last walk found it; the copies are used only
 * where the walk's own f_back leads to the same address, in the same order as single reads would
 * take them (innermost first), so what a walk accepts is what one read per frame would have
 * accepted. */
#define AHEAD_MAX 512
#define AHEAD_FIRST 32  /* the first call fetches this many, each next one twice as many: */
#define AHEAD_FETCHES 6 /* a chain that changed under us wastes little (32+64+...+512+512) */
struct ahead {
    const struct pyhint *h;
    uint32_t next, n; /* chain[next, next + n) are in p->chain_buf, chain[next] at slot `at` */
    uint32_t at;
    uint32_t window; /* frames the next call fetches */
    int fetches;
};

#define SPAN_LOOKBACK 8 /* spans searched for a frame's page: chains walk pools in order */

struct spans {
    struct rmem_iov iov[AHEAD_MAX];
    uint64_t page[AHEAD_MAX];
    uint16_t of[AHEAD_MAX]; /* each frame's span */
    uint64_t pg;            /* the kernel's page size (4 KiB, or 16 or 64 KiB on aarch64) */
    int n;
};

/* The span of frame addr's page among the last few, widened to cover it, or a new one. */
static int span_add(struct spans *sp, uint64_t addr, uint32_t fs)
{
    for (int s = sp->n - 1; s >= 0 && s >= sp->n - SPAN_LOOKBACK; s--) {
        struct rmem_iov *v = &sp->iov[s];

        if (sp->page[s] != addr / sp->pg)
            continue;
        if (addr + fs > v->addr + v->len)
            v->len = addr + fs - v->addr;
        if (addr < v->addr) {
            v->len += v->addr - addr;
            v->addr = addr;
        }
        return s;
    }
    sp->page[sp->n] = addr / sp->pg;
    sp->iov[sp->n] = (struct rmem_iov){addr, NULL, fs};
    return sp->n++;
}

/* Copies the frames at addr[0..n) into chain_buf slots 0..n-1, reading the frames that start
 * in one page as one range (pymalloc keeps frames several to a pool page, so a deep chain
 * takes a range per page instead of a range per frame). Every byte of a range is mapped: it
 * starts in a page that holds a frame and ends where a frame ends. Returns how many leading
 * frames were copied. */
static uint32_t fetch_frames(struct pyproc *p, const uint64_t *addr, uint32_t n)
{
    static _Thread_local struct spans sp;
    uint32_t fs = p->L.fr.size, i;
    size_t total = 0;
    int done = 0;

    sp.n = 0;
    sp.pg = sys_page_size();
    for (i = 0; i < n; i++)
        sp.of[i] = (uint16_t)span_add(&sp, addr[i], fs);
    for (int s = 0; s < sp.n; s++)
        total += sp.iov[s].len;
    if (p->span_cap < total) {
        free(p->span_buf);
        p->span_cap = total > 65536 ? total : 65536;
        p->span_buf = x_malloc(p->span_cap);
    }
    total = 0;
    for (int s = 0; s < sp.n; s++) {
        sp.iov[s].buf = p->span_buf + total;
        total += sp.iov[s].len;
    }
    rmem_readv(p->mem, sp.iov, sp.n, &done);
    for (i = 0; i < n && sp.of[i] < done; i++) {
        const struct rmem_iov *v = &sp.iov[sp.of[i]];

        memcpy(p->chain_buf + (size_t)i * fs, (uint8_t *)v->buf + (addr[i] - v->addr), fs);
    }
    return i;
}

static const uint8_t *ahead_frame(struct pyproc *p, struct ahead *a, uint64_t frame)
{
    const struct py_layout *L = &p->L;
    uint32_t j = 0, want, done;

    if (a->n && a->h->chain[a->next] == frame) { /* the next copy in line */
        a->next++, a->n--;
        return p->chain_buf + (size_t)a->at++ * L->fr.size;
    }
    /* A miss: copies taken before the frames read since must not be used after them. */
    a->n = 0;
    if (!a->h->nchain || a->fetches == AHEAD_FETCHES)
        return NULL;
    while (j < a->h->nchain && a->h->chain[j] != frame) /* where the last walk had it */
        j++;
    if (j == a->h->nchain)
        return NULL;
    a->fetches++;
    if (!p->chain_buf)
        p->chain_buf = x_malloc((size_t)AHEAD_MAX * FRAME_MAX);
    a->window = a->window ? (a->window * 2 < AHEAD_MAX ? a->window * 2 : AHEAD_MAX) : AHEAD_FIRST;
    want = a->h->nchain - j < a->window ? a->h->nchain - j : a->window;
    done = fetch_frames(p, a->h->chain + j, want);
    if (done < 1)
        return NULL;
    a->next = j + 1;
    a->n = done - 1;
    a->at = 1;
    return p->chain_buf;
}

/* 3.8-3.10: a chain ends at the first frame whose f_back is NULL, which is the thread's
 * outermost frame only if nothing tore the walk. A thread keeps its outermost frame for its
 * whole life, so a chain that ends elsewhere than the last whole walk did is checked: while
 * the old outermost frame is still a live frame with no caller, the new chain stopped short
 * of it (issue 14: stacks that began mid-stack, their callers
 * missing). One read, only when the outermost frame changed. */
static bool old_base_kept(struct pyproc *p, const struct pyhint *h, uint64_t outer)
{
    const struct py_layout *L = &p->L;
    uint64_t base = h->nchain ? h->chain[h->nchain - 1] : 0;
    uint8_t f[FRAME_MAX];

    if (!base || base == outer || rmem_read(p->mem, base, f, L->fr.size) < 0)
        return true;
    return !(old_frame_alive(L, f) && !bytes_load_u64(f + L->fr.prev) &&
             bytes_load_u64(f + L->fr.code));
}

/* The walk hints of the threads of the current thread list other than h's, one a call from
 * *i on (at most BASE_CHECK_MAX looked at); NULL at the end. */
static const struct pyhint *next_other(struct pyproc *p, const struct pyhint *h, size_t *i)
{
    const struct tslist *l = &p->ts;

    while (*i < l->n && *i < BASE_CHECK_MAX) {
        uint64_t ts = l->addr[(*i)++];
        const struct pyhint *o = ts != h->ts ? pywalk_hint(p, ts, false) : NULL;

        if (o)
            return o;
    }
    return NULL;
}

/* 3.8-3.10: whether `outer` is the outermost frame another thread of this sample had at its
 * last whole walk. Frame objects are recycled from thread to thread; a chain that ends there
 * went from this thread's frames into that thread's through a frame freed and reused between
 * two reads, and would show this thread running the other's callers. */
static bool base_of_other(struct pyproc *p, const struct pyhint *h, uint64_t outer)
{
    const struct pyhint *o;

    for (size_t i = 0; (o = next_other(p, h, &i)) != NULL;)
        if (o->nchain && o->chain[o->nchain - 1] == outer)
            return true;
    return false;
}

/* Follows f_back from `frame`: the top frame read singly, then the frames the last walk of
 * this thread found below it, fetched ahead a window per call (ahead_frame), the rest one
 * read each. */
static int walk_old(struct pyproc *p, struct pyhint *h, uint64_t frame, struct pywalk_out *o)
{
    const struct py_layout *L = &p->L;
    uint32_t limit = p->opts.max_frames + 64, steps = 0;
    struct loopcheck lc = {0};
    struct ahead ah = {h, 0, 0, 0, 0, 0};
    uint8_t single[FRAME_MAX];
    int n = 0, rc;

    if (!p->chain_new)
        p->chain_new = x_calloc(limit, sizeof(*p->chain_new));
    for (; frame && steps < limit; steps++) {
        uint64_t at = frame;
        const uint8_t *f = NULL;
        int lasti;

        if (frame & 7)
            return APP_E_STALE;
        if ((uint32_t)n == p->opts.max_frames) {
            o->truncated = true;
            return n;
        }
        if (n > 0)
            f = ahead_frame(p, &ah, frame);
        /* A copy fetched ahead that is not a live frame may be older than the frame now: read
         * it again, as a walk without copies would, and take no more copies this walk. */
        if (f && (!old_frame_alive(L, f) || !bytes_load_u64(f + L->fr.code))) {
            f = NULL;
            ah.n = 0;
            ah.fetches = AHEAD_FETCHES;
        }
        if (!f) {
            rc = rmem_read(p->mem, frame, single, L->fr.size);
            if (rc < 0)
                return rc == APP_E_GONE ? rc : APP_E_STALE;
            f = single;
        }
        if (!old_frame_alive(L, f))
            return APP_E_STALE;
        lasti = bytes_load_i32(f + L->fr.instr);
        p->raw[n].code = bytes_load_u64(f + L->fr.code);
        p->raw[n].q = lasti < 0 ? -1 : L->fr.lasti_units ? 2L * lasti : lasti;
        p->raw[n].is_gen = 1;
        p->raw[n].entry = 1; /* before 3.11 every frame has an evaluation call of its own */
        if (!p->raw[n].code)
            return APP_E_STALE;
        p->chain_new[n++] = at;
        frame = bytes_load_u64(f + L->fr.prev);
        if (frame == at || chain_loops(&lc, frame))
            return APP_E_STALE;
    }
    if (frame || (n > 0 && base_of_other(p, h, p->chain_new[n - 1])))
        return APP_E_STALE;
    if (n > 0 && !old_base_kept(p, h, p->chain_new[n - 1])) {
        /* A torn read passes; an old base that stays alive elsewhere (the thread state was
         * reused by a new thread, whose stack ends elsewhere) must not refuse every walk. */
        if (h->base_miss_epoch != p->codes.epoch) { /* counted once a sample, not a retry */
            h->base_miss_epoch = p->codes.epoch;
            if (++h->base_misses >= BASE_MISSES_MAX)
                h->nchain = 0, h->base_misses = 0;
        }
        return APP_E_STALE;
    }
    h->base_misses = 0;
    if (h->nchain < (uint32_t)n || !h->chain) { /* the whole chain, for the next walk */
        free(h->chain);
        h->chain = x_calloc((size_t)n ? (size_t)n : 1, sizeof(*h->chain));
    }
    memcpy(h->chain, p->chain_new, (size_t)n * sizeof(*h->chain));
    h->nchain = (uint32_t)n;
    return n;
}

/* Takes the older chunk at addr from what the walk's first call copied into slot cs->n, when
 * that copy holds all the bytes its header says are in use. */
static bool chunk_offered(struct pyproc *p, struct chunkset *cs, uint64_t addr)
{
    int i = cs->n - 1;
    const uint8_t *b;
    size_t need;

    if (i < 0 || i >= cs->nold || cs->old_addr[i] != addr || cs->old_got[i] < PYABI_CHUNK_HDR)
        return false;
    b = p->chunk[cs->n];
    need = PYABI_CHUNK_HDR + bytes_load_u64(b + PYABI_CHUNK_TOP) * 8;
    if (need < PYABI_CHUNK_HDR || need > cs->old_got[i] ||
        need > bytes_load_u64(b + PYABI_CHUNK_SIZE))
        return false; /* grown or torn: read it as if never offered */
    cs->addr[cs->n] = addr;
    cs->len[cs->n] = need;
    cs->older = bytes_load_u64(b + PYABI_CHUNK_PREVIOUS);
    cs->n++;
    return true;
}

/* Loads the chunk at addr into slot cs->n. `want` is the byte count to read when known. */
static int chunk_load(struct pyproc *p, struct chunkset *cs, uint64_t addr, size_t want)
{
    size_t len = want ? want : CHUNK_GUESS;
    uint8_t *b;
    long got;
    size_t need;

    if (!want && chunk_offered(p, cs, addr))
        return 0;
    b = chunk_buf(p, cs->n, len);
    got = rmem_read_some(p->mem, addr, b, len);

    if (got < PYABI_CHUNK_HDR)
        return got == APP_E_GONE ? APP_E_GONE : APP_E_STALE;
    need = want ? want
                : PYABI_CHUNK_HDR +
                      bytes_load_u64(b + PYABI_CHUNK_TOP) * 8; /* an older chunk's saved top */
    if (need < PYABI_CHUNK_HDR || need > CHUNK_MAX || need > bytes_load_u64(b + PYABI_CHUNK_SIZE))
        return APP_E_STALE;
    if (need > (size_t)got) {
        b = chunk_buf(p, cs->n, need);
        if (rmem_read(p->mem, addr, b, need) < 0)
            return APP_E_STALE;
    }
    cs->addr[cs->n] = addr;
    cs->len[cs->n] = need;
    cs->older = bytes_load_u64(b + PYABI_CHUNK_PREVIOUS);
    cs->n++;
    return 0;
}

/* Returns a local copy of the frame at addr: from a loaded chunk, the next older chunk, or a
 * single read into `single`. NULL with *rc set on failure. */
static const uint8_t *frame_at(struct pyproc *p, struct chunkset *cs, uint64_t addr,
                               uint8_t *single, int *rc)
{
    uint32_t fs = p->L.fr.size;

    /* The chunk of the frame before (cs->last) was looked in by the walk loop (wwin). A frame
     * found in a chunk copy is as fresh as a hinted one (both came in the walk's first call). */
    for (int i = 0; cs->hint && i < cs->hint->n; i++)
        if (cs->hread[i] && cs->hint->addr[i] == addr) {
            if (cs->nseen < PYHINT_MAX)
                cs->seen[cs->nseen++] = addr;
            return cs->hbuf[i];
        }
    for (int pass = 0; pass < 2; pass++) {
        for (int i = cs->n - 1; i >= 0; i--)
            /* Differences, not sums: a torn address near 2^64 must not wrap into a chunk. */
            if (addr >= cs->addr[i] && addr - cs->addr[i] >= PYABI_CHUNK_HDR && cs->len[i] >= fs &&
                addr - cs->addr[i] <= cs->len[i] - fs) {
                cs->last = i;
                return p->chunk[i] + (addr - cs->addr[i]);
            }
        if (pass || !cs->older || cs->n == PYPROC_MAX_CHUNKS)
            break;
        *rc = chunk_load(p, cs, cs->older, 0);
        if (*rc < 0)
            return NULL;
    }
    if (cs->nseen < PYHINT_MAX)
        cs->seen[cs->nseen++] = addr;
    *rc = rmem_read(p->mem, addr, single, fs);
    if (*rc < 0 && *rc != APP_E_GONE)
        *rc = APP_E_STALE;
    return *rc < 0 ? NULL : single;
}

static size_t hix_home(uint64_t ts, size_t cap)
{
    return (size_t)((ts >> 3) * 0x9E3779B97F4A7C15ull >> 32) & (cap - 1);
}

/* The index rebuilt for the hints there are, at a capacity that keeps it at most half full. */
static void hix_rebuild(struct pyproc *p, size_t want)
{
    size_t cap = 16;

    while (cap < 2 * want)
        cap *= 2;
    if (cap != p->hix_cap) {
        free(p->hix);
        p->hix = x_calloc(cap, sizeof(*p->hix));
        p->hix_cap = cap;
    } else {
        memset(p->hix, 0, cap * sizeof(*p->hix));
    }
    for (size_t i = 0; i < p->nhints; i++) {
        size_t j = hix_home(p->hints[i].ts, cap);

        while (p->hix[j])
            j = (j + 1) & (cap - 1);
        p->hix[j] = (uint32_t)i + 1;
    }
}

/* Every hint goes (a hint is kept per thread-state address ever seen, and threads that come
 * and go leave theirs): at the thread cap, or before a batch that would cross it. */
static void hints_drop(struct pyproc *p)
{
    for (size_t i = 0; i < p->nhints; i++)
        pywalk_hint_free(&p->hints[i]);
    p->nhints = 0;
    if (p->hix) /* the index must not find the slots just freed */
        memset(p->hix, 0, p->hix_cap * sizeof(*p->hix));
}

/* The hint slot of the thread whose tstate is at ts. Frames outside the data stack -- 3.12/3.13
 * entry frames on the C stack, long-lived generators -- tend to stay at the same address, so
 * the next walk fetches them in its first system call. Found through the index (a linear scan
 * was called several times per thread per sample: quadratic in a process's threads). */
struct pyhint *pywalk_hint(struct pyproc *p, uint64_t ts, bool create)
{
    size_t j;

    for (j = p->hix_cap ? hix_home(ts, p->hix_cap) : 0; p->hix_cap && p->hix[j];
         j = (j + 1) & (p->hix_cap - 1))
        if (p->hints[p->hix[j] - 1].ts == ts)
            return &p->hints[p->hix[j] - 1];
    if (!create)
        return NULL;
    if (p->nhints == p->opts.max_threads)
        hints_drop(p);
    if (p->nhints == p->caphints) {
        p->caphints = p->caphints ? p->caphints * 2 : 16;
        p->hints = x_reallocarray(p->hints, p->caphints, sizeof(*p->hints));
    }
    p->hints[p->nhints++] = (struct pyhint){.ts = ts};
    hix_rebuild(p, p->caphints); /* cheap next to a walk: once per new thread */
    return &p->hints[p->nhints - 1];
}

static void hint_save(struct chunkset *cs)
{
    struct pyhint *h = cs->hint;

    h->n = cs->nseen;
    memcpy(h->addr, cs->seen, sizeof(cs->seen[0]) * (size_t)cs->nseen);
    h->nold = 0;
    for (int i = 1; i < cs->n && h->nold < PYHINT_OLD; i++) {
        h->old_addr[h->nold] = cs->addr[i];
        h->old_len[h->nold++] = cs->len[i];
    }
}

void pywalk_hint_free(struct pyhint *h)
{
    free(h->chain);
    free(h->stash);
    for (int i = 0; i < 1 + PYHINT_OLD; i++)
        free(h->cbuf[i]);
    pyreuse_free(&h->prev);
    free(h->res.raw);
    free(h->res.serial);
    free(h->res.out);
    free(h->res.frames);
    free(h->res.key);
    free(h->res.run_code);
    free(h->res.run_start);
}

/* The fields of a thread-state copy a 3.11+ walk starts from. */
struct tsview {
    uint64_t interp, ident, chunk, live, cframe, top;
};

static void ts_parse(const struct py_layout *L, const uint8_t *ts, struct tsview *v)
{
    v->interp = bytes_load_u64(ts + L->ts.interp);
    v->ident = bytes_load_u64(ts + L->ts.thread_id);
    v->chunk = L->ts.datastack >= 0 ? bytes_load_u64(ts + L->ts.datastack) : 0;
    v->live = L->ts.datastack >= 0 ? bytes_load_u64(ts + ((uint32_t)L->ts.datastack + 8)) : 0;
    v->cframe = L->ts.cframe >= 0 ? bytes_load_u64(ts + L->ts.cframe) : 0;
    v->top = L->ts.frame >= 0 ? bytes_load_u64(ts + L->ts.frame) : 0;
}

/* Bytes of the newest chunk to copy: up to the live top, plus some slack for frames pushed
 * since the copy v was taken when the chunk's allocated size is known (reading beyond an
 * allocation could fault and cut the batch short). 0 when v names no usable chunk. */
static size_t chunk_want(const struct pyhint *h, const struct tsview *v, bool slack)
{
    size_t want, room;

    if (!v->chunk || v->live <= v->chunk + PYABI_CHUNK_HDR || v->live - v->chunk > CHUNK_MAX)
        return 0;
    want = v->live - v->chunk;
    if (!slack || h->chunk != v->chunk || h->chunk_size < want)
        return want;
    room = h->chunk_size - want;
    return want + (room < CHUNK_SLACK ? room : CHUNK_SLACK);
}

/* Adopts the copy of the chunk at addr held in slot 0 (got bytes), if its header agrees. */
static bool chunk_adopt(struct pyproc *p, struct chunkset *cs, uint64_t addr, size_t got)
{
    uint64_t size = bytes_load_u64(p->chunk[0] + PYABI_CHUNK_SIZE);

    if (got < PYABI_CHUNK_HDR || size < got || size > CHUNK_MAX)
        return false;
    cs->addr[0] = addr;
    cs->len[0] = got;
    cs->older = bytes_load_u64(p->chunk[0] + PYABI_CHUNK_PREVIOUS);
    cs->n = 1;
    if (cs->hint->chunk != addr) { /* a read past the live top failed once: keep it exact */
        cs->hint->chunk = addr;
        cs->hint->chunk_size = size;
    }
    return true;
}

/* What the start of a 3.11+ walk fetched. */
struct batch {
    uint64_t top; /* the top frame, read behind a cframe (3.11/3.12) or from the thread state */
    bool top_ok;
    uint64_t chunk; /* the chunk copied into slot 0, `got` bytes of it (0: none) */
    size_t got;
};

/* The ranges of a walk's first call, in order: the thread state (when ts), the top-frame
 * pointer behind v's cframe (3.11/3.12), the newest chunk as v names it, the frames found off
 * the chunks last time, and the older chunks the last walk loaded (only while the newest is
 * the same one: a new newest chunk means the stack went through them). bufs are left NULL. */
struct plan {
    struct rmem_iov iov[PYFETCH_IOV];
    int n, its, itop, ichunk, nfixed, nhint, nold;
    size_t chunk_min; /* the newest chunk's bytes up to the live top, without the slack */
};

static void plan_batch(const struct pyproc *p, uint64_t ts, const struct tsview *v,
                       const struct pyhint *h, struct plan *pl)
{
    const struct py_layout *L = &p->L;
    size_t want = chunk_want(h, v, true);

    pl->n = 0;
    pl->its = pl->itop = pl->ichunk = -1;
    pl->chunk_min = chunk_want(h, v, false);
    if (ts) {
        pl->its = pl->n;
        pl->iov[pl->n++] = (struct rmem_iov){ts, NULL, L->ts.size};
    }
    if (L->ts.cframe >= 0 && v->cframe) {
        pl->itop = pl->n;
        pl->iov[pl->n++] = (struct rmem_iov){v->cframe + (uint64_t)L->ts.cframe_current, NULL, 8};
    }
    if (want) {
        pl->ichunk = pl->n;
        pl->iov[pl->n++] = (struct rmem_iov){v->chunk, NULL, want};
    }
    pl->nfixed = pl->n;
    pl->nhint = h->n;
    for (int i = 0; i < h->n; i++)
        pl->iov[pl->n++] = (struct rmem_iov){h->addr[i], NULL, L->fr.size};
    pl->nold = want && v->chunk == h->chunk ? h->nold : 0;
    for (int i = 0; i < pl->nold; i++)
        pl->iov[pl->n++] = (struct rmem_iov){h->old_addr[i], NULL, h->old_len[i]};
}

/* Points the plan's ranges at where the walk keeps them. */
static void plan_bind(struct pyproc *p, struct chunkset *cs, struct batch *b, struct plan *pl)
{
    if (pl->its >= 0)
        pl->iov[pl->its].buf = p->tsfresh;
    if (pl->itop >= 0)
        pl->iov[pl->itop].buf = &b->top;
    if (pl->ichunk >= 0)
        pl->iov[pl->ichunk].buf = chunk_buf(p, 0, pl->iov[pl->ichunk].len);
    for (int i = 0; i < pl->nhint; i++)
        pl->iov[pl->nfixed + i].buf = cs->hbuf[i];
    for (int i = 0; i < pl->nold; i++) {
        struct rmem_iov *o = &pl->iov[pl->nfixed + pl->nhint + i];

        o->buf = chunk_buf(p, 1 + i, o->len);
    }
}

/* The walk's chunk slot of range i of a plan (0 the newest, 1.. the older ones), or -1. */
static int plan_slot(const struct plan *pl, int i)
{
    if (i == pl->ichunk)
        return 0;
    return i >= pl->nfixed + pl->nhint ? 1 + i - (pl->nfixed + pl->nhint) : -1;
}

/* Whether fetched range f serves range i of the plan: the same range, or for the newest chunk
 * one from the same address that holds the live part (the prefetch may have been planned from
 * an older copy of the thread state, whose top was elsewhere; what lies past the live top is
 * never walked into, as with the slack). */
static bool fetch_serves(const struct pyhint *h, const struct plan *pl, int i)
{
    const struct rmem_iov *f = &h->fetch[i];

    if (f->addr != pl->iov[i].addr || h->fetch_slot[i] != plan_slot(pl, i))
        return false;
    if (i == pl->ichunk)
        return f->len >= pl->chunk_min && pl->chunk_min > 0;
    return f->len == pl->iov[i].len;
}

/* Whether the thread's bytes read ahead in this sample serve every range of the plan. */
static bool fetch_matches(const struct pyproc *p, const struct pyhint *h, const struct plan *pl)
{
    if (!h->fetched || h->fetched_seq != p->walk_seq || h->nfetch != pl->n)
        return false;
    for (int i = 0; i < pl->n; i++)
        if (!fetch_serves(h, pl, i))
            return false;
    return true;
}

/* Takes the thread's prefetched bytes, read in this sample, when they are what the plan asks
 * for (fetch_serves): as if the plan's call had been made then. Chunks change hands (the
 * walk's slot buffer and the hint's swap), the small ranges are copied. Returns true (with
 * *done) when taken. */
static bool take_fetched(struct pyproc *p, struct pyhint *h, struct plan *pl, int *done)
{
    bool match = fetch_matches(p, h, pl);

    h->fetched = false;
    if (!match)
        return false;
    for (int i = 0; i < pl->n; i++) {
        int k = h->fetch_slot[i];
        uint8_t *b;
        size_t cap;

        if (k < 0) {
            memcpy(pl->iov[i].buf, h->fetch[i].buf, pl->iov[i].len);
            continue;
        }
        b = p->chunk[k], cap = p->chunk_cap[k];
        p->chunk[k] = h->cbuf[k], p->chunk_cap[k] = h->ccap[k];
        h->cbuf[k] = b, h->ccap[k] = cap;
        pl->iov[i].len = h->fetch[i].len; /* the newest chunk: what was read of it */
    }
    *done = pl->n;
    return true;
}

/* Points the plan's ranges into the hint's own buffers, for pywalk_prefetch. */
static void plan_stash(struct pyhint *h, struct plan *pl)
{
    size_t small = 0;

    for (int i = 0; i < pl->n; i++)
        if (plan_slot(pl, i) < 0)
            small += pl->iov[i].len;
    if (h->stash_cap < small) {
        free(h->stash);
        h->stash = x_malloc(small);
        h->stash_cap = small;
    }
    small = 0;
    for (int i = 0; i < pl->n; i++) {
        int k = plan_slot(pl, i);

        h->fetch_slot[i] = (int8_t)k;
        if (k < 0) {
            pl->iov[i].buf = h->stash + small;
            small += pl->iov[i].len;
            continue;
        }
        if (h->ccap[k] < pl->iov[i].len) {
            free(h->cbuf[k]);
            h->cbuf[k] = x_malloc(pl->iov[i].len);
            h->ccap[k] = pl->iov[i].len;
        }
        pl->iov[i].buf = h->cbuf[k];
    }
}

/* One system call (or the bytes pywalk_prefetch read for it): the plan_batch ranges. `ts`
 * (0: none) is read into p->tsfresh. Older chunks that came whole are offered to chunk_load.
 * Returns 0, APP_E_GONE, or APP_E_STALE when the thread state could not be read. */
static int read_batch(struct pyproc *p, uint64_t ts, const struct tsview *v, struct chunkset *cs,
                      struct batch *b)
{
    struct plan pl;
    int done = 0, rc = 0;

    plan_batch(p, ts, v, cs->hint, &pl);
    plan_bind(p, cs, b, &pl);
    if (take_fetched(p, cs->hint, &pl, &done)) {
        p->sample.prefetched++;
        p->stat_prefetched++;
    } else {
        rc = rmem_readv(p->mem, pl.iov, pl.n, &done);
    }
    for (int i = 0; i < pl.nhint; i++)
        cs->hread[i] = done > pl.nfixed + i;
    cs->nold = 0;
    for (int i = 0; i < pl.nold && done > pl.nfixed + pl.nhint + i; i++) {
        cs->old_addr[i] = pl.iov[pl.nfixed + pl.nhint + i].addr;
        cs->old_got[i] = pl.iov[pl.nfixed + pl.nhint + i].len;
        cs->nold = i + 1;
    }
    b->top_ok = pl.itop >= 0 && done > pl.itop;
    b->chunk = pl.ichunk >= 0 && done > pl.ichunk ? v->chunk : 0;
    b->got = b->chunk ? pl.iov[pl.ichunk].len : 0;
    if (rc == APP_E_GONE)
        return rc;
    return ts && done < 1 ? APP_E_STALE : 0;
}

/* Appends to all[] the headers of the code objects the threads' last walks ran, to be checked
 * in this sample without a call of their own (pycode_resolve takes them); returns the new
 * count. A thread that has moved on costs only the bytes of a header it no longer needs. */
static int prefetch_codes(struct pyproc *p, struct pyhint *const *hs, int n, struct rmem_iov *all,
                          int nall, int cap)
{
    for (int i = 0; i < n; i++) {
        const struct pyresolved *r = &hs[i]->res; /* the last walk's runs of equal codes */

        for (uint32_t j = 0; j < r->nrun && nall < cap; j++) {
            uint8_t *hdr = pycode_prefetch_add(&p->codes, r->run_code[j]);

            if (hdr)
                all[nall++] = (struct rmem_iov){r->run_code[j], hdr, p->L.co.read};
        }
    }
    return nall;
}

/* What pywalk_prefetch_plan planned, for pywalk_prefetch_done: the threads (by state
 * address: the hints may move in between), where each one's ranges begin, and the code
 * headers' ranges and their base in the code cache's table. */
struct pfplan {
    struct pyproc *p;
    uint64_t ts[PYFETCH_BATCH];
    int first[PYFETCH_BATCH], nt, code0, ncode;
    size_t codebase;
};
static _Thread_local struct pfplan pf;

int pywalk_prefetch_plan(struct pyproc *p, const uint64_t *tsaddr, const uint8_t *const *guess,
                         int n, struct rmem_iov *all, int nall, int cap)
{
    struct pyhint *hs[PYFETCH_BATCH];

    pf = (struct pfplan){.p = p};
    if (p->L.fr.object || n < 1)
        return nall;
    n = n < PYFETCH_BATCH ? n : PYFETCH_BATCH;
    if (n > (int)p->opts.max_threads)
        n = (int)p->opts.max_threads;
    /* Made all at once below, the batch's hints must not reach the cap midway: that would drop
     * the ones made before it. */
    if (p->nhints + (size_t)n > p->opts.max_threads)
        hints_drop(p);
    for (int i = 0; i < n; i++)
        (void)pywalk_hint(p, tsaddr[i], true); /* may move the hints: no pointer kept yet */
    for (int i = 0; i < n; i++) {
        hs[i] = pywalk_hint(p, tsaddr[i], false);
        hs[i]->fetched = false; /* also for a thread left out below: nothing stale is taken */
    }
    for (; pf.nt < n; pf.nt++) {
        struct pyhint *h = hs[pf.nt];
        struct tsview v;
        struct plan pl;

        ts_parse(&p->L, guess[pf.nt], &v);
        plan_batch(p, tsaddr[pf.nt], &v, h, &pl);
        if (nall + pl.n > cap)
            break;
        plan_stash(h, &pl);
        for (int k = 0; k < pl.n; k++)
            h->fetch[k] = all[nall + k] = pl.iov[k];
        h->nfetch = pl.n;
        pf.ts[pf.nt] = tsaddr[pf.nt];
        pf.first[pf.nt] = nall;
        nall += pl.n;
    }
    if (!pf.nt)
        return nall;
    pf.code0 = nall;
    pf.codebase = pycode_prefetch_count(&p->codes);
    nall = prefetch_codes(p, hs, pf.nt, all, nall, cap);
    pf.ncode = nall - pf.code0;
    return nall;
}

void pywalk_prefetch_done(struct pyproc *p, int done)
{
    int nok = done - pf.code0;

    if (pf.p != p)
        return;
    for (int i = 0; i < pf.nt; i++) {
        struct pyhint *h = pywalk_hint(p, pf.ts[i], false);

        if (h) {
            h->fetched = done >= pf.first[i] + h->nfetch;
            h->fetched_seq = p->walk_seq;
        }
    }
    if (pf.nt)
        pycode_prefetch_done(&p->codes, pf.codebase,
                             (size_t)(nok < 0          ? 0
                                      : nok > pf.ncode ? pf.ncode
                                                       : nok));
}

bool pywalk_prefetch_serves(struct pyproc *p, uint64_t tsaddr, const uint8_t *guess)
{
    struct pyhint *h = pywalk_hint(p, tsaddr, false);
    struct tsview v;
    struct plan pl;

    if (!h || !h->fetched || p->L.fr.object)
        return false;
    ts_parse(&p->L, guess, &v);
    plan_batch(p, tsaddr, &v, h, &pl);
    return fetch_matches(p, h, &pl);
}

void pywalk_prefetch_drop(struct pyproc *p)
{
    for (int i = 0; i < pf.nt && pf.p == p; i++) {
        struct pyhint *h = pywalk_hint(p, pf.ts[i], false);

        if (h)
            h->fetched = false;
    }
    pf.p = NULL;
}

void pywalk_prefetch(struct pyproc *p, const uint64_t *tsaddr, const uint8_t *const *guess, int n)
{
    static _Thread_local struct rmem_iov all[RMEM_IOV_MAX];
    int nall = pywalk_prefetch_plan(p, tsaddr, guess, n, all, 0, RMEM_IOV_MAX), done = 0;

    if (!nall)
        return;
    (void)rmem_readv(p->mem, all, nall, &done); /* what failed is read again by its walk */
    pywalk_prefetch_done(p, done);
}

/* Re-reads the thread state with the top-frame pointer, the newest chunk and the hinted
 * frames (one system call when the guess holds), then checks them against each other.
 * 3.11/3.12 keep the top frame in a _PyCFrame on the target's C stack: when the fresh thread
 * state points at another cframe than the guess, a second call reads it and the chunk.
 * *top is 0 with *no_python when the thread truly has no Python frame. */
static int walk_start(struct pyproc *p, uint64_t tsaddr, const uint8_t *guess, struct chunkset *cs,
                      uint64_t *top, bool *no_python)
{
    const struct py_layout *L = &p->L;
    struct batch b = {0};
    struct tsview g, f;
    size_t want;
    int rc;

    ts_parse(L, guess, &g);
    rc = read_batch(p, tsaddr, &g, cs, &b);
    if (rc < 0)
        return rc;
    ts_parse(L, p->tsfresh, &f);
    if (f.interp != g.interp || f.ident != g.ident)
        return APP_E_STALE; /* the thread state was freed, maybe reused */
    if (L->ts.cframe < 0)
        b.top = f.top, b.top_ok = true;
    else if (!f.cframe)
        return APP_E_STALE;
    else if (f.cframe != g.cframe || !b.top_ok)
        rc = read_batch(p, 0, &f, cs, &b);
    if (rc < 0 || !b.top_ok)
        return rc < 0 ? rc : APP_E_STALE;
    *top = b.top;
    if (!*top) {
        /* 3.11/3.12: only the root cframe inside the thread state may have no frame. */
        *no_python = L->ts.cframe < 0 || (f.cframe >= tsaddr && f.cframe < tsaddr + L->ts.size);
        return *no_python ? 0 : APP_E_STALE;
    }
    /* A thread with no data stack yet (its only frame a generator resumed from C) has no chunk
     * to adopt: slot 0 may never have been allocated. */
    if (b.chunk && b.chunk == f.chunk && chunk_adopt(p, cs, f.chunk, b.got))
        return 0;
    if (!b.got && cs->hint->chunk == g.chunk)
        cs->hint->chunk_size = 0;
    /* Without slack: the batch may have failed by reading past what is mapped. */
    want = chunk_want(cs->hint, &f, false);
    if (want)
        return chunk_load(p, cs, f.chunk, want) == APP_E_GONE ? APP_E_GONE : 0;
    return 0;
}

/* Where a 3.11+ chain may end: the thread's first entry frame. 3.11 marks it is_entry and
 * the thread owns it, or it is a generator resumed from C with nothing under it (outer_anchored
 * then wants an empty data stack under it); 3.12+ put an entry shim (owner >= owner_skip)
 * under every thread. */
static bool frame_is_base(const struct py_layout *L, const uint8_t *f, int owner)
{
    if (L->fr.entry >= 0)
        return f[L->fr.entry] != 0 && (owner == PY_OWNER_THREAD || owner == L->fr.owner_gen);
    return owner >= L->fr.owner_skip;
}

/* 3.12+: every entry frame of one owner carries the same code word (3.12 the interpreter's
 * trampoline code object, 3.13 None), so an "entry frame" that differs from the walk's others
 * is stale bytes on the target's C stack, which is reused as soon as a C call returns. */
static bool shim_consistent(const struct py_layout *L, uint64_t shim[2], int owner, uint64_t code)
{
    uint64_t *seen;

    if (owner < L->fr.owner_skip || owner > L->fr.owner_skip + 1)
        return true;
    seen = &shim[owner - L->fr.owner_skip];
    if (!*seen)
        *seen = code;
    return *seen == code;
}

/* 3.11+: no Python frame on the thread's data stack, as the walk's fresh thread state shows
 * it: no top yet, or the top back at data[1] of the root chunk (a non-root chunk is freed
 * when its last frame pops). */
static bool datastack_empty(const struct pyproc *p)
{
    struct tsview v;

    ts_parse(&p->L, p->tsfresh, &v);
    return !v.live || (v.chunk && v.live <= v.chunk + PYABI_CHUNK_HDR + 8);
}

/* 3.11+: a thread's outermost Python frame is the first one pushed on its data stack, which
 * CPython puts at data[1] of the root chunk (previous NULL) so that popping it never frees
 * that chunk. A chain whose outermost frame lies anywhere else stopped early on stale bytes.
 * A generator resumed from C with nothing under it may be outermost; then the chain's own
 * data-stack frames (outermost: outer_ds, 0 if none) must be the whole data stack. A chain
 * cut under a generator by a stale entry shim whose `previous` reads NULL shows the generator
 * outermost while its callers are still on the data stack (issue 14: stacks that began at
 * all_reduce.<locals>.<genexpr>); this rejects it as torn. */
/* 3.11+: the chunk holding frame `outer` (the root chunk of an anchored walk), or 0. */
static uint64_t root_chunk_of(const struct chunkset *cs, uint64_t outer)
{
    for (int i = 0; outer && i < cs->n; i++)
        if (outer >= cs->addr[i] && outer < cs->addr[i] + cs->len[i])
            return cs->addr[i];
    return 0;
}

/* 3.11+: whether another live thread's last whole walk ended in root chunk r. A thread keeps
 * its root chunk for life and no two threads share one; a walk that ends in another's went
 * from a chunk this thread freed into the same memory reused by that thread between two
 * reads of one call (seen on 3.13 under ASan: a worker shown running the main thread's
 * callers, <module> at the bottom). */
static bool root_of_other(struct pyproc *p, const struct pyhint *h, uint64_t r)
{
    const struct pyhint *o;

    for (size_t i = 0; (o = next_other(p, h, &i)) != NULL;)
        if (o->root == r)
            return true;
    return false;
}

static bool outer_anchored(const struct pyproc *p, const struct chunkset *cs, uint64_t outer,
                           bool gen, uint64_t outer_ds)
{
    if (gen && !outer_ds)
        return datastack_empty(p);
    if (gen)
        outer = outer_ds;
    for (int i = 0; i < cs->n; i++)
        if (outer >= cs->addr[i] && outer < cs->addr[i] + cs->len[i])
            return outer == cs->addr[i] + PYABI_CHUNK_HDR + 8 &&
                   bytes_load_u64(p->chunk[i] + PYABI_CHUNK_PREVIOUS) == 0;
    return false;
}

/* Free-threaded 3.14+: a frame whose tlbc_index is not 0 runs its thread's own copy of the
 * code's bytecode, entries[tlbc_index] of the code's _PyCodeArray {Py_ssize_t size; char
 * *entries[]} (entries[0] is co_code_adaptive itself), so its instruction offset is taken from
 * there. Two reads, made only for such frames; a copy that cannot be had makes the walk torn,
 * never a line computed against the wrong bytecode. */
static int tlbc_offset(struct pyproc *p, uint64_t code, int32_t idx, uint64_t instr, long *q)
{
    uint64_t arr = 0, size = 0, base = 0;
    struct rmem_iov iov[2];
    int rc;

    if (idx < 0 || idx >= TLBC_MAX)
        return APP_E_STALE;
    rc = rmem_read(p->mem, code + (uint64_t)p->L.co.tlbc, &arr, 8);
    if (rc == 0 && !bytes_ptr_ok(arr))
        rc = APP_E_STALE;
    if (rc == 0) {
        iov[0] = (struct rmem_iov){arr, &size, 8};
        iov[1] = (struct rmem_iov){arr + 8 + 8 * (uint64_t)idx, &base, 8};
        rc = rmem_readv(p->mem, iov, 2, NULL);
    }
    if (rc < 0)
        return rc == APP_E_GONE ? rc : APP_E_STALE;
    if ((uint64_t)idx >= size || size > TLBC_MAX || !bytes_ptr_ok(base) || instr < base)
        return APP_E_STALE;
    *q = (long)(instr - base);
    return 0;
}

/* The layout words the 3.11+ walk loop reads every frame, hoisted out of the loop (the stores
 * into p->raw would otherwise make the compiler reload each one every frame). */
struct wconst {
    uint32_t fs, o_code, o_instr, o_owner, o_prev;
    int32_t o_entry, o_tlbc;
    uint64_t cmask, adaptive;
    int skip, gen, dead_above;
    uint32_t max_frames;
};

static void wconst_init(const struct pyproc *p, struct wconst *w)
{
    const struct py_layout *L = &p->L;

    *w = (struct wconst){.fs = L->fr.size,
                         .o_code = L->fr.code,
                         .o_instr = L->fr.instr,
                         .o_owner = L->fr.owner,
                         .o_prev = L->fr.prev,
                         .o_entry = L->fr.entry,
                         .o_tlbc = L->fr.tlbc,
                         .cmask = L->fr.code_tagged ? ~(uint64_t)7 : ~(uint64_t)0,
                         .adaptive = (uint64_t)L->co.code_adaptive,
                         .skip = L->fr.owner_skip,
                         .gen = L->fr.owner_gen,
                         .dead_above = L->fr.owner_skip == 256 ? 1 : 4,
                         .max_frames = p->opts.max_frames};
}

/* The chunk the walk is in, as a window of addresses a whole frame fits in: most frames lie
 * in the chunk of the frame before them, so the loop looks there without a call. */
struct wwin {
    uint64_t lo, hi; /* frame start addresses in [lo, hi] lie in the chunk copy */
    const uint8_t *buf;
    uint64_t at; /* the remote address buf[0] was copied from */
};

static void wwin_set(const struct pyproc *p, const struct chunkset *cs, uint32_t fs, struct wwin *w)
{
    int i = cs->last;

    w->lo = 1;
    w->hi = 0;
    if (i < cs->n && cs->len[i] >= PYABI_CHUNK_HDR + fs) {
        w->lo = cs->addr[i] + PYABI_CHUNK_HDR;
        w->hi = cs->addr[i] + cs->len[i] - fs;
        w->buf = p->chunk[i];
        w->at = cs->addr[i];
    }
}

/* A 3.11+ walk's state between frames. */
struct wstate {
    uint64_t outer, outer_ds, shim[2];
    bool outer_gen;
    struct loopcheck lc;
    int n;
};

/* An owner no frame of a live chain has: a frame object's copy (2, the frame has returned)
 * or a value beyond the version's owners. */
static inline bool is_dead(const struct wconst *w, int owner)
{
    return owner == PY_OWNER_FRAME_OBJECT || owner > w->dead_above;
}

/* A 3.11+ frame's instruction as a byte offset into its code's bytecode; -1 before the first. */
static inline long frame_q(uint64_t instr, uint64_t code, uint64_t adaptive)
{
    return instr ? (long)(instr - (code + adaptive)) : -1;
}

/* One frame of a 3.11+ walk: its checks and raw entry; returns the next frame address via
 * *frame, 0 to continue, or a negative status. 1: the frame cap was reached. */
static int walk_step(struct pyproc *p, const struct wconst *w, struct wstate *st, const uint8_t *f,
                     uint64_t *frame, uint64_t lo)
{
    uint64_t code = bytes_load_u64(f + w->o_code) & w->cmask;
    uint64_t instr = bytes_load_u64(f + w->o_instr);
    uint64_t prev = bytes_load_u64(f + w->o_prev);
    int owner = f[w->o_owner], rc;
    struct pyrawframe r;
    /* A step down within the chunk window cannot close a loop (a loop must climb somewhere),
     * so only the other steps go through the loop check: it still sees every loop's values
     * come round. Most frames of a deep stack are such steps. */
    bool down = prev >= lo && prev < *frame;

    if (prev == *frame || (!down && chain_loops(&st->lc, prev)) || is_dead(w, owner) ||
        (!prev && !frame_is_base(&p->L, f, owner)) ||
        (owner >= w->skip && !shim_consistent(&p->L, st->shim, owner, code)))
        return APP_E_STALE;
    if (owner < w->skip && code)
        st->outer = *frame, st->outer_gen = owner == w->gen;
    if (owner == PY_OWNER_THREAD && code) /* on the thread's data stack */
        st->outer_ds = *frame;
    *frame = prev;
    if (owner >= w->skip && st->n > 0) /* 3.12+: an entry shim under the frame before */
        p->raw[st->n - 1].entry = 1;
    if (owner >= w->skip || !code)
        return 0;
    if ((uint32_t)st->n == w->max_frames)
        return 1;
    r.code = code;
    r.q = frame_q(instr, code, w->adaptive);
    if (instr && w->o_tlbc > 0 && bytes_load_i32(f + w->o_tlbc) != 0) {
        rc = tlbc_offset(p, code, bytes_load_i32(f + w->o_tlbc), instr, &r.q);
        if (rc < 0)
            return rc;
    }
    r.is_gen = owner == w->gen;
    r.entry = w->o_entry >= 0 && f[w->o_entry] != 0; /* 3.11's is_entry */
    p->raw[st->n++] = r;
    return 0;
}

/* The common case of a 3.11+ walk without walk_step's branches and reloads: consecutive frames
 * of the thread's data stack in the chunk window, each stepping down to the one before it (so
 * no loop can close), with a code object, under the frame cap, and no free-threaded bytecode
 * copy. Takes as many as it can, with the effects walk_step would have had, and leaves *frame
 * (in the window) at the first it could not take, for walk_step to judge. Returns how many it
 * took. A deep stack's frames are almost all taken here. */
static uint32_t walk_run(struct pyproc *p, const struct wconst *w, struct wstate *st,
                         const struct wwin *win, uint64_t *frame)
{
    const uint32_t oc = w->o_code, op = w->o_prev, oi = w->o_instr, oo = w->o_owner;
    const uint64_t lo = win->lo, cmask = w->cmask, adaptive = w->adaptive;
    const int32_t oe = w->o_entry;
    const int is_gen = PY_OWNER_THREAD == w->gen;
    struct pyrawframe *raw = p->raw;
    uint32_t n = (uint32_t)st->n, n0 = n;
    uint64_t at = *frame, last = 0;

    if (w->o_tlbc > 0)
        return 0;
    while (n < w->max_frames) {
        const uint8_t *f = win->buf + (at - win->at);
        uint64_t code = bytes_load_u64(f + oc) & cmask, prev = bytes_load_u64(f + op), instr;

        if (!code || f[oo] != PY_OWNER_THREAD || prev < lo || prev >= at || (prev & 7))
            break;
        instr = bytes_load_u64(f + oi);
        raw[n] = (struct pyrawframe){code, frame_q(instr, code, adaptive), is_gen,
                                     oe >= 0 && f[oe] != 0};
        n++;
        last = at;
        at = prev;
    }
    if (n > n0) {
        st->outer = st->outer_ds = last;
        st->outer_gen = is_gen;
        st->n = (int)n;
        *frame = at;
    }
    return n - n0;
}

/* A chain walked whole that held no Python frame at all: true only when the thread state still
 * points at the same top frame. A thread of a moving target can pop the frames we started from
 * and reuse their memory between our reads; what is left may then read as entry shims only, a
 * "no Python" thread that never was. 3.11 keeps the top in a cframe on the C stack: not
 * checked there. */
static bool empty_walk_holds(struct pyproc *p, uint64_t tsaddr, uint64_t top)
{
    const struct py_layout *L = &p->L;
    uint8_t ts[PYPROC_TSTATE_MAX];
    struct tsview v;

    if (L->ts.cframe >= 0 || L->ts.frame < 0)
        return true;
    if (rmem_read(p->mem, tsaddr, ts, L->ts.size) < 0)
        return false;
    ts_parse(L, ts, &v);
    return v.top == top;
}

/* A core of 3.12+: the frame at `frame` (f its copy, NULL unread) is an entry frame whose C
 * stack the core holds as zeros or not at all, as gdb's gcore leaves the stacks of threads it
 * could not read whole (sid's glibc 2.43 puts their guard pages inside the mapping). Only
 * entry frames lie off the data stack and generators, so this is one. */
static bool entry_lost(const struct pyproc *p, const uint8_t *f, uint64_t frame)
{
    if (!p->core_tids || p->L.fr.owner_skip == 256 || (frame & 7))
        return false;
    for (uint32_t i = 0; f && i < p->L.fr.size; i++)
        if (f[i])
            return false;
    return true;
}

/* Loads older chunks until one holds the frame at `at` (the anchoring checks look there). */
static void chunks_cover(struct pyproc *p, struct chunkset *cs, uint64_t at)
{
    while (!root_chunk_of(cs, at))
        if (!cs->older || cs->n == PYPROC_MAX_CHUNKS || chunk_load(p, cs, cs->older, 0) < 0)
            return;
}

/* Steps over a lost entry frame: its `previous` is the data-stack frame under the lowest one
 * this walk has met (or under the data stack's top when it met none), as frames in between
 * are generators' (pycore_frame_below); none under the outermost: the walk ends there. */
static int cross_lost_entry(struct pyproc *p, struct chunkset *cs, struct wstate *st,
                            uint64_t *frame)
{
    struct tsview v;

    ts_parse(&p->L, p->tsfresh, &v);
    if (pycore_frame_below(p, st->outer_ds ? st->outer_ds : v.live, frame) < 0)
        return APP_E_STALE;
    if (st->n > 0)
        p->raw[st->n - 1].entry = 1;
    if (*frame)
        chunks_cover(p, cs, *frame);
    return 0;
}

static int walk_new(struct pyproc *p, uint64_t tsaddr, const uint8_t *guess, struct pywalk_out *o)
{
    struct wconst w;
    uint32_t limit = p->opts.max_frames + 1024, steps = 0;
    static _Thread_local struct chunkset cs;
    uint8_t single[FRAME_MAX];
    uint64_t frame = 0, root, top;
    struct wstate st = {0};
    struct wwin win = {.lo = 1};
    int rc;

    wconst_init(p, &w);
    cs.n = 0;
    cs.older = 0;
    cs.nseen = 0;
    cs.nold = 0;
    cs.last = 0;
    memset(cs.hread, 0, sizeof(cs.hread));
    cs.hint = pywalk_hint(p, tsaddr, true);
    rc = walk_start(p, tsaddr, guess, &cs, &frame, &o->no_python);
    top = frame;
    wwin_set(p, &cs, w.fs, &win); /* the newest chunk: most frames lie there */

    for (; rc == 0 && frame && steps < limit; steps++) {
        const uint8_t *f;
        uint64_t lo = UINT64_MAX; /* the window's start while the frame lies in it */

        if (frame >= win.lo && frame <= win.hi && !(frame & 7)) {
            steps += walk_run(p, &w, &st, &win, &frame);
            f = win.buf + (frame - win.at);
            lo = win.lo;
        } else {
            f = frame & 7 ? NULL : frame_at(p, &cs, frame, single, &rc);
            if (entry_lost(p, f, frame)) {
                rc = cross_lost_entry(p, &cs, &st, &frame);
                continue;
            }
            if (!f)
                return rc == APP_E_GONE ? rc : APP_E_STALE;
            wwin_set(p, &cs, w.fs, &win);
        }
        rc = walk_step(p, &w, &st, f, &frame, lo);
        if (rc == 1) {
            o->truncated = true;
            hint_save(&cs);
            return st.n;
        }
    }
    if (rc < 0)
        return rc;
    hint_save(&cs);
    if (frame)
        return APP_E_STALE;
    if (st.outer && !outer_anchored(p, &cs, st.outer, st.outer_gen, st.outer_ds)) {
        cs.hint->n = 0; /* next time through the chunks, not a stale single copy */
        return APP_E_STALE;
    }
    root = st.outer ? root_chunk_of(&cs, st.outer_gen ? st.outer_ds : st.outer) : 0;
    if (root && root_of_other(p, cs.hint, root))
        return APP_E_STALE;
    cs.hint->root = root;
    if (st.n == 0 && top && !empty_walk_holds(p, tsaddr, top))
        return APP_E_STALE;
    return st.n;
}

/* 3.8-3.10 keep the top frame in the thread state itself: re-read it, check it is still the
 * same thread, and walk. */
static int walk_old_thread(struct pyproc *p, uint64_t tsaddr, const uint8_t *guess,
                           struct pywalk_out *o)
{
    const struct py_layout *L = &p->L;
    uint8_t ts[PYPROC_TSTATE_MAX];
    int rc = rmem_read(p->mem, tsaddr, ts, L->ts.size);

    if (rc < 0)
        return rc == APP_E_GONE ? rc : APP_E_STALE;
    if (guess != p->tsfresh)
        memcpy(p->tsfresh, guess, L->ts.size);
    if (bytes_load_u64(ts + L->ts.interp) != bytes_load_u64(p->tsfresh + L->ts.interp) ||
        bytes_load_u64(ts + L->ts.thread_id) != bytes_load_u64(p->tsfresh + L->ts.thread_id))
        return APP_E_STALE; /* the thread state was freed, maybe reused */
    memcpy(p->tsfresh, ts, L->ts.size);
    o->no_python = !bytes_load_u64(ts + L->ts.frame);
    return walk_old(p, pywalk_hint(p, tsaddr, true), bytes_load_u64(ts + L->ts.frame), o);
}

int pywalk_thread(struct pyproc *p, uint64_t tsaddr, const uint8_t *guess, struct pywalk_out *o)
{
    *o = (struct pywalk_out){0};
    if (p->L.fr.object)
        return walk_old_thread(p, tsaddr, guess, o);
    return walk_new(p, tsaddr, guess, o);
}
