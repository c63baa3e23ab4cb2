/* Frame walks, innermost first, into pyproc's raw-frame scratch.
 *
 * 3.8-3.10 frames are heap objects read one by one. 3.11+ frames live in the thread's
 * data-stack chunks, which are copied whole (the newest one in the same system call as the
 * top-frame pointer) so a warm 50-frame stack costs one read; frames found elsewhere
 * (generators) are read singly. Every step counts toward an absolute bound, so a torn,
 * self-referencing chain ends as APP_E_STALE instead of a hang. Sampling thread only. */
#include "pyproc_priv.h"

#include "ranktop/bytes.h"
#include "ranktop/util.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK_GUESS (16 * 1024)
#define CHUNK_MAX (16u << 20)
#define FRAME_MAX 128

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

static int walk_old(struct pyproc *p, uint64_t frame, bool *truncated)
{
    const struct py_layout *L = &p->L;
    uint32_t limit = p->opts.max_frames + 64, steps = 0;
    uint8_t f[FRAME_MAX];
    int n = 0;

    for (; frame && steps < limit; steps++) {
        int rc, lasti;
        uint64_t prev;

        if (frame & 7)
            return APP_E_STALE;
        if ((uint32_t)n == p->opts.max_frames) {
            *truncated = true;
            return n;
        }
        rc = rmem_read(p->mem, frame, f, L->fr.size);
        if (rc < 0)
            return rc == APP_E_GONE ? rc : APP_E_STALE;
        lasti = bytes_load_i32(f + L->fr.instr);
        p->raw[n].code = bytes_load_u64(f + L->fr.code);
        p->raw[n].q = lasti < 0 ? -1 : L->fr.lasti_units ? 2L * lasti : lasti;
        p->raw[n].is_gen = 1;
        if (!p->raw[n].code)
            return APP_E_STALE;
        n++;
        prev = bytes_load_u64(f + L->fr.prev);
        if (prev == frame)
            return APP_E_STALE;
        frame = prev;
    }
    return frame ? APP_E_STALE : n;
}

/* Loads the chunk at addr into slot cs->n. `want` is the byte count to read when known. */
static int chunk_load(struct pyproc *p, struct chunkset *cs, uint64_t addr, size_t want)
{
    size_t len = want ? want : CHUNK_GUESS;
    uint8_t *b = chunk_buf(p, cs->n, len);
    long got = rmem_read_some(p->mem, addr, b, len);
    size_t need;

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

    for (int i = 0; cs->hint && i < cs->hint->n; i++)
        if (cs->hread[i] && cs->hint->addr[i] == addr) {
            if (cs->nseen < PYHINT_MAX)
                cs->seen[cs->nseen++] = addr;
            return cs->hbuf[i];
        }
    for (int pass = 0; pass < 2; pass++) {
        for (int i = cs->n - 1; i >= 0; i--)
            if (addr >= cs->addr[i] + PYABI_CHUNK_HDR && addr + fs <= cs->addr[i] + cs->len[i])
                return p->chunk[i] + (addr - cs->addr[i]);
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

/* The hint slot of the thread whose tstate is at ts (created on first use). Frames outside
 * the data stack -- 3.12/3.13 entry frames on the C stack, long-lived generators -- tend to
 * stay at the same address, so the next walk fetches them in its first system call. */
static struct pyhint *hint_for(struct pyproc *p, uint64_t ts)
{
    for (size_t i = 0; i < p->nhints; i++)
        if (p->hints[i].ts == ts)
            return &p->hints[i];
    if (p->nhints == p->opts.max_threads)
        p->nhints = 0;
    if (p->nhints == p->caphints) {
        p->caphints = p->caphints ? p->caphints * 2 : 16;
        p->hints = x_reallocarray(p->hints, p->caphints, sizeof(*p->hints));
    }
    p->hints[p->nhints] = (struct pyhint){.ts = ts};
    return &p->hints[p->nhints++];
}

static void hint_save(struct chunkset *cs)
{
    cs->hint->n = cs->nseen;
    memcpy(cs->hint->addr, cs->seen, sizeof(cs->seen[0]) * (size_t)cs->nseen);
}

/* Reads the top-frame pointer, the newest chunk (up to the live top) and the hinted frames
 * in one call. */
static int walk_start(struct pyproc *p, const uint8_t *ts, struct chunkset *cs, uint64_t *top)
{
    const struct py_layout *L = &p->L;
    uint64_t chunk = L->ts.datastack >= 0 ? bytes_load_u64(ts + L->ts.datastack) : 0;
    uint64_t live = L->ts.datastack >= 0 ? bytes_load_u64(ts + ((uint32_t)L->ts.datastack + 8)) : 0;
    uint64_t cframe = L->ts.cframe >= 0 ? bytes_load_u64(ts + L->ts.cframe) : 0;
    size_t want = live > chunk + PYABI_CHUNK_HDR && live - chunk <= CHUNK_MAX ? live - chunk : 0;
    struct rmem_iov iov[2 + PYHINT_MAX];
    int n = 0, done = 0, rc, nfixed;

    *top = L->ts.frame >= 0 ? bytes_load_u64(ts + L->ts.frame) : 0;
    if (L->ts.cframe >= 0) {
        if (!cframe)
            return 0;
        iov[n++] = (struct rmem_iov){cframe + (uint64_t)L->ts.cframe_current, top, 8};
    }
    if (chunk && want)
        iov[n++] = (struct rmem_iov){chunk, chunk_buf(p, 0, want), want};
    nfixed = n;
    for (int i = 0; i < cs->hint->n; i++)
        iov[n++] = (struct rmem_iov){cs->hint->addr[i], cs->hbuf[i], L->fr.size};
    rc = rmem_readv(p->mem, iov, n, &done);
    for (int i = 0; i < cs->hint->n; i++)
        cs->hread[i] = done > nfixed + i;
    if (rc == APP_E_GONE)
        return rc;
    if (L->ts.cframe >= 0 && done < 1)
        return APP_E_STALE;
    if (chunk && want && done >= nfixed && bytes_load_u64(p->chunk[0] + PYABI_CHUNK_SIZE) >= want) {
        cs->addr[0] = chunk;
        cs->len[0] = want;
        cs->older = bytes_load_u64(p->chunk[0] + PYABI_CHUNK_PREVIOUS);
        cs->n = 1;
    } else if (chunk) {
        cs->older = chunk; /* let frame_at load it the slow way */
    }
    return 0;
}

static int walk_new(struct pyproc *p, uint64_t tsaddr, const uint8_t *ts, bool *truncated)
{
    const struct py_layout *L = &p->L;
    uint32_t limit = p->opts.max_frames + 1024, steps = 0;
    static _Thread_local struct chunkset cs;
    uint8_t single[FRAME_MAX];
    uint64_t frame;
    int n = 0, rc;

    cs.n = 0;
    cs.older = 0;
    cs.nseen = 0;
    memset(cs.hread, 0, sizeof(cs.hread));
    cs.hint = hint_for(p, tsaddr);
    rc = walk_start(p, ts, &cs, &frame);

    for (; rc == 0 && frame && steps < limit; steps++) {
        const uint8_t *f = frame & 7 ? NULL : frame_at(p, &cs, frame, single, &rc);
        uint64_t code, instr, prev;
        int owner;

        if (!f)
            return rc == APP_E_GONE ? rc : APP_E_STALE;
        code = bytes_load_u64(f + L->fr.code) & (L->fr.code_tagged ? ~(uint64_t)7 : ~(uint64_t)0);
        instr = bytes_load_u64(f + L->fr.instr);
        owner = f[L->fr.owner];
        prev = bytes_load_u64(f + L->fr.prev);
        if (prev == frame)
            return APP_E_STALE;
        frame = prev;
        if (owner >= L->fr.owner_skip || !code)
            continue;
        if ((uint32_t)n == p->opts.max_frames) {
            *truncated = true;
            hint_save(&cs);
            return n;
        }
        p->raw[n].code = code;
        p->raw[n].q = instr ? (long)(instr - (code + (uint64_t)L->co.code_adaptive)) : -1;
        p->raw[n].is_gen = owner == L->fr.owner_gen;
        n++;
    }
    if (rc < 0)
        return rc;
    hint_save(&cs);
    return frame ? APP_E_STALE : n;
}

int pywalk_thread(struct pyproc *p, uint64_t tsaddr, const uint8_t *tstate, bool *truncated)
{
    *truncated = false;
    if (p->L.fr.object)
        return walk_old(p, bytes_load_u64(tstate + p->L.ts.frame), truncated);
    return walk_new(p, tsaddr, tstate, truncated);
}
