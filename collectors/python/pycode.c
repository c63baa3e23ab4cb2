/* The code-object cache: batched validation, resolution of misses, memoised line lookup.
 *
 * Invariants: a slot with addr != 0 owns its strings and table; `key` is the copy of the
 * identifying header bytes taken when the slot was filled, and a slot is only used while a
 * fresh read of the same bytes matches it. The table is open-addressed, at most half full;
 * when it would pass that, it is cleared (cheap to refill, bounded memory). Sampling thread. */
#include "pycode.h"

#include "pylinetable.h"
#include "pystr.h"
#include "ranktop/base/bytes.h"
#include "ranktop/base/util.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define PYCODE_INIT_CAP 1024
#define PYCODE_MAX_CAP 65536
#define PYCODE_BATCH 256
#define PYCODE_STALE_EPOCHS 256 /* samples without a sight of it before an entry may go */

/* Serials are counted for the whole process, not per cache: a frame's key is its entry's
 * serial (pystack.h), so no two readers, also one replacing another after an exec, ever give
 * one key to two code objects. 64 bits do not wrap. */
static _Atomic uint64_t next_serial;

void pycode_cache_init(struct pycode_cache *c)
{
    memset(c, 0, sizeof(*c));
    c->cap = PYCODE_INIT_CAP;
    c->slots = x_calloc(c->cap, sizeof(*c->slots));
}

/* Frames of the current sample may still point at a slot's strings, so they are parked and
 * freed by pycode_cache_collect at the start of the next sample. */
static void park(struct pycode_cache *c, void *p)
{
    if (!p)
        return;
    if (c->ngrave == c->capgrave) {
        c->capgrave = c->capgrave ? c->capgrave * 2 : 64;
        c->grave = x_reallocarray(c->grave, c->capgrave, sizeof(*c->grave));
    }
    c->grave[c->ngrave++] = p;
}

static void slot_release(struct pycode_cache *c, struct pycode *e)
{
    c->changes++;
    park(c, e->function);
    park(c, e->file);
    park(c, e->table);
    memset(e, 0, sizeof(*e));
}

void pycode_cache_collect(struct pycode_cache *c)
{
    for (size_t i = 0; i < c->ngrave; i++)
        free(c->grave[i]);
    c->ngrave = 0;
}

void pycode_cache_clear(struct pycode_cache *c)
{
    for (size_t i = 0; i < c->cap; i++)
        if (c->slots[i].addr)
            slot_release(c, &c->slots[i]);
    c->used = 0;
}

void pycode_cache_fini(struct pycode_cache *c)
{
    pycode_cache_clear(c);
    pycode_cache_collect(c);
    free(c->grave);
    free(c->slots);
    free(c->pre);
    c->pre = NULL;
    c->slots = NULL;
}

static size_t slot_index(const struct pycode_cache *c, uint64_t addr)
{
    uint64_t h = (addr >> 4) * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 32) & (c->cap - 1);

    while (c->slots[i].addr && c->slots[i].addr != addr)
        i = (i + 1) & (c->cap - 1);
    return i;
}

/* Drops the entries no sample has met in the last PYCODE_STALE_EPOCHS (code objects a job no
 * longer runs: generated functions, a finished phase) and rehashes the rest in place of the
 * table; returns how many went. */
static size_t evict_stale(struct pycode_cache *c)
{
    struct pycode *old = c->slots;
    size_t dropped = 0;

    c->slots = x_calloc(c->cap, sizeof(*c->slots));
    for (size_t i = 0; i < c->cap; i++) {
        if (!old[i].addr)
            continue;
        if (old[i].checked + PYCODE_STALE_EPOCHS < c->epoch) {
            slot_release(c, &old[i]);
            dropped++;
            continue;
        }
        c->slots[slot_index(c, old[i].addr)] = old[i];
    }
    c->used -= dropped;
    free(old);
    return dropped;
}

static void cache_grow(struct pycode_cache *c)
{
    struct pycode *old = c->slots;
    size_t oldcap = c->cap;

    /* A job that keeps making code objects must not grow the table without end: first drop
     * what has not been seen for a while, and grow only if the table is still half full. */
    if (c->cap >= PYCODE_INIT_CAP && evict_stale(c) && (c->used + PYCODE_BATCH) * 2 <= c->cap)
        return;
    old = c->slots;
    if (c->cap >= PYCODE_MAX_CAP) {
        pycode_cache_clear(c);
        return;
    }
    c->cap *= 2;
    c->slots = x_calloc(c->cap, sizeof(*c->slots));
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].addr)
            c->slots[slot_index(c, old[i].addr)] = old[i];
    free(old);
}

/* The identifying bytes of a code header: ob_type and the name/file/table pointers and the
 * first line, which together change when the address is reused for another code object. */
static void header_key(const struct py_layout *L, const uint8_t *hdr, uint8_t key[48])
{
    int32_t qual = L->co.qualname >= 0 ? L->co.qualname : (int32_t)L->co.name;

    memset(key, 0, 48);
    memcpy(key, hdr + L->ob_type, 8);
    memcpy(key + 8, hdr + L->co.filename, 8);
    memcpy(key + 16, hdr + L->co.name, 8);
    memcpy(key + 24, hdr + qual, 8);
    memcpy(key + 32, hdr + L->co.linetable, 8);
    memcpy(key + 40, hdr + L->co.firstlineno, 4);
}

/* Fills slot e for the code object whose header is hdr. Returns 0 or a negative status. */
static int slot_fill(struct pycode_cache *c, struct pycode *e, struct rmem *m,
                     const struct py_layout *L, uint64_t addr, const uint8_t *hdr)
{
    int32_t name_off = L->co.qualname >= 0 ? L->co.qualname : (int32_t)L->co.name;
    int st = 0;

    memset(e, 0, sizeof(*e));
    e->function = pystr_read(m, L, bytes_load_u64(hdr + name_off), &st);
    if (!e->function)
        goto fail;
    e->file = pystr_read(m, L, bytes_load_u64(hdr + L->co.filename), &st);
    if (!e->file)
        goto fail;
    e->table = pybytes_read(m, L, bytes_load_u64(hdr + L->co.linetable), &e->table_len, &st);
    if (!e->table)
        goto fail;
    e->addr = addr;
    header_key(L, hdr, e->key);
    e->firstlineno = bytes_load_i32(hdr + L->co.firstlineno);
    e->firsttraceable = L->co.firsttraceable >= 0 ? bytes_load_i32(hdr + L->co.firsttraceable) : 0;
    for (int k = 0; k < PYCODE_MEMO; k++)
        e->last_q[k] = -2;
    e->serial = atomic_fetch_add_explicit(&next_serial, 1, memory_order_relaxed) + 1;
    c->changes++;
    return 0;
fail:
    slot_release(c, e);
    return st < 0 ? st : APP_E_STALE;
}

/* Validates or fills the slot for one code address given its freshly read header. */
static struct pycode *resolve_one(struct pycode_cache *c, struct rmem *m, const struct py_layout *L,
                                  uint64_t pycode_type, uint64_t addr, const uint8_t *hdr,
                                  int *gone)
{
    uint8_t key[48];
    struct pycode *e;

    if (pycode_type && bytes_load_u64(hdr + L->ob_type) != pycode_type)
        return NULL;
    header_key(L, hdr, key);
    e = &c->slots[slot_index(c, addr)];
    if (e->addr == addr && memcmp(e->key, key, sizeof(key)) == 0) {
        c->hits++;
        return e;
    }
    if (e->addr == addr) {
        slot_release(c, e);
        c->used--;
    }
    c->misses++;
    if (slot_fill(c, e, m, L, addr, hdr) < 0) {
        if (rmem_read(m, addr, key, 8) == APP_E_GONE)
            *gone = 1;
        return NULL;
    }
    c->used++;
    return e;
}

void pycode_cache_next_epoch(struct pycode_cache *c)
{
    c->epoch++;
}

size_t pycode_prefetch_count(struct pycode_cache *c)
{
    if (c->pre_epoch != c->epoch) {
        c->npre = c->npre_ok = 0;
        c->pre_epoch = c->epoch;
    }
    return c->npre;
}

uint8_t *pycode_prefetch_add(struct pycode_cache *c, uint64_t addr)
{
    (void)pycode_prefetch_count(c); /* a new epoch starts an empty table */
    if (!addr || c->npre == PYCODE_PRE_MAX)
        return NULL;
    for (size_t i = 0; i < c->npre; i++)
        if (c->pre[i].addr == addr)
            return NULL;
    if (!c->pre)
        c->pre = x_reallocarray(NULL, PYCODE_PRE_MAX, sizeof(*c->pre));
    c->pre[c->npre].addr = addr;
    return c->pre[c->npre++].hdr;
}

void pycode_prefetch_done(struct pycode_cache *c, size_t base, size_t nok)
{
    if (c->pre_epoch != c->epoch || c->npre_ok != base)
        return;
    c->npre_ok = base + nok < c->npre ? base + nok : c->npre;
}

/* The header of addr read ahead in this epoch, or NULL. */
static const uint8_t *prefetched(const struct pycode_cache *c, uint64_t addr)
{
    if (c->pre_epoch != c->epoch)
        return NULL;
    for (size_t i = 0; i < c->npre_ok; i++)
        if (c->pre[i].addr == addr)
            return c->pre[i].hdr;
    return NULL;
}

/* The entry for addr when its header was already matched in this epoch, else NULL. */
static struct pycode *checked_now(struct pycode_cache *c, uint64_t addr)
{
    struct pycode *e = &c->slots[slot_index(c, addr)];

    return e->addr == addr && e->checked == c->epoch && c->epoch ? e : NULL;
}

/* Resolves up to PYCODE_BATCH code addresses: every distinct address not yet matched in this
 * epoch has its header read, all in one call (a 300-deep recursion reads its one code object
 * once, not 300 times). */
static int resolve_batch(struct pycode_cache *c, struct rmem *m, const struct py_layout *L,
                         uint64_t pycode_type, const uint64_t *code, size_t n, struct pycode **out)
{
    static _Thread_local uint8_t hdr[PYCODE_BATCH][PYCODE_HDR_MAX];
    struct rmem_iov iov[PYCODE_BATCH];
    /* each address's read: -1 when matched earlier in the epoch, -2 when the same as code[i-1] */
    int at[PYCODE_BATCH];
    /* Addresses already queued in this batch, direct-mapped: a collision only reads twice. */
    uint64_t qaddr[64] = {0};
    int qat[64];
    int nr = 0, ndone = 0, rc = 0, bad = 0, gone = 0, niov = 0;
    int slot_iov[PYCODE_BATCH]; /* each read slot's range in iov, -1 when read ahead */
    const uint8_t *pre;

    for (size_t i = 0; i < n; i++) {
        size_t q = (size_t)(((code[i] >> 4) * 0x9E3779B97F4A7C15ull) >> 58);

        at[i] = -1;
        if (i > 0 && code[i] == code[i - 1]) { /* recursion: the frame below, same answer */
            at[i] = -2;
            continue;
        }
        if (checked_now(c, code[i]))
            continue;
        if (code[i] && qaddr[q] == code[i]) {
            at[i] = qat[q];
            continue;
        }
        at[i] = nr;
        qaddr[q] = code[i];
        qat[q] = nr;
        if ((pre = prefetched(c, code[i])) != NULL) { /* read with the frames: no call */
            memcpy(hdr[nr], pre, L->co.read);
            slot_iov[nr++] = -1;
            continue;
        }
        slot_iov[nr] = niov;
        iov[niov++] = (struct rmem_iov){code[i], hdr[nr], L->co.read};
        nr++;
    }
    if (niov)
        rc = rmem_readv(m, iov, niov, &ndone);
    if (rc == APP_E_GONE || rc == APP_E_PERM)
        return rc;
    for (size_t i = 0; i < n; i++) {
        int r = at[i];

        if (r == -2) {
            out[i] = out[i - 1];
            c->hits++;
            bad += out[i] == NULL;
            continue;
        }
        if (r < 0 || checked_now(c, code[i])) { /* matched before, or by an earlier frame */
            out[i] = checked_now(c, code[i]);
            c->hits++;
            bad += out[i] == NULL;
            continue;
        }
        /* After a failed entry the rest of the batch was not transferred: read singly. */
        if (slot_iov[r] > ndone || (slot_iov[r] == ndone && rc < 0)) {
            if (slot_iov[r] > ndone && rmem_read(m, code[i], hdr[r], L->co.read) == 0)
                goto have;
            out[i] = NULL;
            bad++;
            continue;
        }
    have:
        out[i] = resolve_one(c, m, L, pycode_type, code[i], hdr[r], &gone);
        if (gone)
            return APP_E_GONE;
        if (out[i])
            out[i]->checked = c->epoch;
        bad += out[i] == NULL;
    }
    return bad;
}

int pycode_resolve(struct pycode_cache *c, struct rmem *m, const struct py_layout *L,
                   uint64_t pycode_type, const uint64_t *code, size_t n, struct pycode **out)
{
    int bad = 0;

    if (L->co.read > PYCODE_HDR_MAX)
        return APP_E_VERSION;
    while ((c->used + n) * 2 > c->cap)
        cache_grow(c);
    for (size_t i = 0; i < n; i += PYCODE_BATCH) {
        size_t k = n - i < PYCODE_BATCH ? n - i : PYCODE_BATCH;
        int rc = resolve_batch(c, m, L, pycode_type, code + i, k, out + i);

        if (rc < 0)
            return rc;
        bad += rc;
    }
    return bad;
}

int pycode_resolve_alive(struct pycode_cache *c, const uint64_t *code, size_t n,
                         struct pycode **out)
{
    int bad = 0;

    for (size_t i = 0; i < n; i++) {
        struct pycode *e = &c->slots[slot_index(c, code[i])];

        out[i] = code[i] && e->addr == code[i] ? e : NULL;
        if (out[i]) {
            e->checked = c->epoch; /* alive, so what the slot says is still true */
            c->hits++;
        }
        bad += out[i] == NULL;
    }
    return bad;
}

int pycode_line(struct pycode *e, int minor, long q)
{
    unsigned k;

    for (k = 0; k < PYCODE_MEMO; k++)
        if (e->last_q[k] == q)
            return e->last_line[k];
    k = e->last_next++ % PYCODE_MEMO;
    e->last_q[k] = q;
    e->last_line[k] = pyline_lookup(minor, e->table, e->table_len, e->firstlineno, q);
    return e->last_line[k];
}
