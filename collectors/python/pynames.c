/* Python thread names: interp->modules -> "threading" -> md_dict -> "_active" -> {ident: Thread}
 * -> each Thread's "_name" attribute, read from another process.
 *
 * The layouts it needs (dict keys and values, int digits, instance attribute storage, a few type
 * fields) come from the names part of the version's descriptor (abi/pyabi.h), the interpreter
 * and str layouts from the rest of it. The target keeps running while we read, so nothing is
 * trusted:
 * pointers are range- and alignment-checked, dict geometry is validated and capped, every dict
 * must have the type of the modules dict, int keys must agree with their entry hash, and the
 * _active dict is read again at the end so that a thread starting or ending mid-walk yields
 * APP_E_STALE instead of a mixed answer. A key reported missing was missing in a dict that did
 * not change meanwhile; a Thread whose attributes really lack _name is left out. Each walk step
 * reads all threads with one process_vm_readv, so the cost grows with steps, not threads,
 * except one read per name. Stateless; runs on the thread that owns the struct rmem. */
#include "pynames.h"

#include "pystr.h"
#include "ranktop/base/bytes.h"
#include "ranktop/base/util.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define DICT_MAX_LOG2 17      /* 131072 slots: far above any modules dict */
#define KEYS_SPECULATIVE 2048 /* first read of a keys object: header, indices, entries */
#define STR_FROM 16           /* str bytes read to filter keys: length @16, hash, state @32 */
#define STR_LEN 24
#define LONG_READ 32 /* header and two 30-bit digits: every pthread_t below 2^60 */
#define PRE_HDR 32   /* bytes read in front of a managed-dict object */
#define FIND_CHUNK 512
#define BATCH_IOV 512
#define BATCH_MAX_BAD 16

/* A local copy of the entries of one keys object. */
struct dview {
    uint8_t *ent;
    size_t n, stride; /* entries, bytes per entry */
    bool split;       /* values are not in the entries */
    uint64_t values;  /* remote values[] of a split dict, 0 when unknown */
};

struct ttype {
    uint64_t addr, flags, basicsize, cached_keys;
    int64_t dictoffset;
};

struct tslot {
    uint64_t key, obj, hash; /* the _active entry; hash is 0 when the table has none */
    uint64_t ident;
    uint64_t pre[PRE_HDR / 8]; /* words in front of the object (3.11+) */
    uint64_t type;
    size_t t;              /* index into the type array */
    uint64_t probe;        /* inline values header, or tp_dictoffset slot, to read */
    uint64_t dict;         /* an attribute dict still to open */
    uint64_t keys, values; /* split attributes: shared keys and remote values[] */
    unsigned capacity;     /* inline values capacity, 0 when unknown */
    uint64_t name;         /* the _name str */
    bool noname;           /* the attributes really have no _name: leave the thread out */
};

static int read_ptr(struct rmem *m, uint64_t addr, uint64_t *out)
{
    int st = rmem_read(m, addr, out, sizeof(*out));

    if (st == 0 && !bytes_ptr_ok(*out))
        return APP_E_STALE;
    return st;
}

/* Reads record i (len bytes) from addr[i] into out + i * len for all n, in as few system calls
 * as the ranges allow; zero addresses are skipped. Records are zero-filled first. When strict
 * is false an unreadable range stays zeroed and the batch goes on after it, so one odd key
 * cannot hide the others; a burst of failures still ends the walk. */
static int read_batch(struct rmem *m, const uint64_t *addr, size_t n, size_t len, uint8_t *out,
                      bool strict)
{
    struct rmem_iov iov[BATCH_IOV];
    size_t idx[BATCH_IOV], i = 0;
    int bad = 0;

    memset(out, 0, n * len);
    while (i < n) {
        int k = 0, done = 0, st;

        for (; i < n && k < BATCH_IOV; i++) {
            if (!addr[i])
                continue;
            iov[k] = (struct rmem_iov){addr[i], out + i * len, len};
            idx[k++] = i;
        }
        if (k == 0)
            break;
        st = rmem_readv(m, iov, k, &done);
        if (st == 0)
            continue;
        if (st != APP_E_STALE || strict || ++bad > BATCH_MAX_BAD || done >= k)
            return st;
        memset(out + idx[done] * len, 0, len);
        i = idx[done] + 1;
    }
    return 0;
}

static uint64_t dv_key(const struct dview *v, size_t i)
{
    return bytes_load_u64(v->ent + i * v->stride + (v->stride == 24 ? 8 : 0));
}

static uint64_t dv_value(const struct dview *v, size_t i)
{
    return bytes_load_u64(v->ent + i * v->stride + (v->stride == 24 ? 16 : 8));
}

static uint64_t dv_hash(const struct dview *v, size_t i)
{
    return v->stride == 24 ? bytes_load_u64(v->ent + i * v->stride) : 0;
}

/* Deleted entries have a NULL key (3.11+) or a NULL value next to the dummy key (<= 3.10). */
static bool dv_live(const struct dview *v, size_t i)
{
    return dv_key(v, i) != 0 && (v->split || dv_value(v, i) != 0);
}

/* 3.11+ keys header: checks the geometry the way new_keys_object() builds it. */
static int keys_geom_new(const uint8_t *h, struct dview *v, size_t *eoff)
{
    unsigned log2 = h[8], log2_idx = h[9], kind = h[10];
    int64_t n = (int64_t)bytes_load_u64(h + 24);
    unsigned want = log2 < 8 ? log2 : log2 < 16 ? log2 + 1 : log2 + 2;

    if (log2 < 3 || log2 > DICT_MAX_LOG2 || log2_idx != want || kind > PYABI_KIND_SPLIT)
        return APP_E_STALE;
    if (n < 0 || n > ((int64_t)2 << log2) / 3 || (kind == PYABI_KIND_SPLIT) != v->split)
        return APP_E_STALE;
    v->stride = kind == PYABI_KIND_GENERAL ? 24 : 16;
    v->n = (size_t)n;
    *eoff = 32 + ((size_t)1 << log2_idx);
    return 0;
}

/* 3.8-3.10 keys header: dk_size @8, dk_nentries @32, indices @40 sized by dk_size. */
static int keys_geom_old(const uint8_t *h, struct dview *v, size_t *eoff)
{
    int64_t size = (int64_t)bytes_load_u64(h + 8), n = (int64_t)bytes_load_u64(h + 32);
    size_t width;

    if (size < 8 || size > (1 << DICT_MAX_LOG2) || (size & (size - 1)) != 0)
        return APP_E_STALE;
    if (n < 0 || n > (2 * size) / 3)
        return APP_E_STALE;
    width = size <= 0xff ? 1 : size <= 0xffff ? 2 : 4;
    v->stride = 24;
    v->n = (size_t)n;
    *eoff = 40 + (size_t)size * width;
    return 0;
}

/* Copies the entries of the keys object at `keys`; one read for small tables. `split` says
 * whether the values live outside the entries (a split dict or an object's shared keys). */
static int keys_load(struct pynames_walk *w, uint64_t keys, bool split, struct dview *v)
{
    uint8_t head[KEYS_SPECULATIVE];
    size_t eoff = 0, need;
    long got;
    int st;

    memset(v, 0, sizeof(*v));
    v->split = split;
    if (!bytes_ptr_ok(keys))
        return APP_E_STALE;
    got = rmem_read_some(w->m, keys, head, sizeof(head));
    if (got < 0)
        return (int)got;
    if (got < 40)
        return APP_E_STALE;
    st = w->N->keys_new ? keys_geom_new(head, v, &eoff) : keys_geom_old(head, v, &eoff);
    if (st < 0)
        return st;
    need = v->n * v->stride;
    v->ent = x_malloc(need ? need : 1);
    if (eoff + need <= (size_t)got)
        memcpy(v->ent, head + eoff, need);
    else if (need && (st = rmem_read(w->m, keys + eoff, v->ent, need)) < 0)
        return st;
    return 0;
}

/* Checks a copied dict header: type, keys pointer, used count. The first dict seen (the
 * modules dict, which is always a real dict) teaches us the address of PyDict_Type. */
static int dict_check(struct pynames_walk *w, const uint8_t *hdr)
{
    uint64_t type = bytes_load_u64(hdr + PYABI_OB_TYPE);
    int64_t used = (int64_t)bytes_load_u64(hdr + PYABI_DICT_USED);

    if (!w->dict_type && bytes_ptr_ok(type))
        w->dict_type = type;
    if (type != w->dict_type || !bytes_ptr_ok(bytes_load_u64(hdr + PYABI_DICT_KEYS)) || used < 0)
        return APP_E_STALE;
    if (bytes_load_u64(hdr + PYABI_DICT_VALUES) &&
        !bytes_ptr_ok(bytes_load_u64(hdr + PYABI_DICT_VALUES)))
        return APP_E_STALE;
    return 0;
}

/* Loads the dict at addr whose header is already in hdr (PYABI_DICT_HDR bytes). */
static int dict_load_hdr(struct pynames_walk *w, const uint8_t *hdr, struct dview *v)
{
    uint64_t values = bytes_load_u64(hdr + PYABI_DICT_VALUES);
    int st = dict_check(w, hdr);

    if (st == 0)
        st = keys_load(w, bytes_load_u64(hdr + PYABI_DICT_KEYS), values != 0, v);
    if (st == 0 && (uint64_t)bytes_load_u64(hdr + PYABI_DICT_USED) > v->n)
        st = APP_E_STALE;
    if (values)
        v->values = values + w->N->values_off;
    return st;
}

static int dict_load(struct pynames_walk *w, uint64_t addr, struct dview *v, uint8_t *hdr)
{
    int st;

    memset(v, 0, sizeof(*v));
    if (!bytes_ptr_ok(addr))
        return APP_E_STALE;
    st = rmem_read(w->m, addr, hdr, PYABI_DICT_HDR);
    return st < 0 ? st : dict_load_hdr(w, hdr, v);
}

/* True when hdr, a copy of str bytes [STR_FROM, STR_FROM + STR_LEN), describes a compact ASCII
 * string of len characters. Zero-filled (unreadable) copies never match. */
static bool str_is_ascii(const struct py_layout *L, const uint8_t *hdr, size_t len)
{
    int64_t n;
    uint32_t state;

    n = (int64_t)bytes_load_u64(hdr + L->str.length - STR_FROM);
    state = bytes_load_u32(hdr + L->str.state - STR_FROM);
    return n == (int64_t)len && ((state >> 2) & 7) == 1 && ((state >> 5) & 1) && ((state >> 6) & 1);
}

/* Looks for the str s among entries [at, at + k) of v (k <= FIND_CHUNK): one batched read of
 * every key's length and state, then one of the characters of the keys of the right length. */
static int find_chunk(struct pynames_walk *w, const struct dview *v, size_t at, size_t k,
                      const char *s, size_t *ix)
{
    uint64_t addr[FIND_CHUNK] = {0};
    size_t cidx[FIND_CHUNK], len = strlen(s), nc = 0;
    uint8_t buf[FIND_CHUNK * STR_LEN];
    int st;

    for (size_t i = 0; i < k; i++) {
        uint64_t key = dv_key(v, at + i);

        addr[i] = dv_live(v, at + i) && bytes_ptr_ok(key) ? key + STR_FROM : 0;
    }
    st = read_batch(w->m, addr, k, STR_LEN, buf, false);
    for (size_t i = 0; st == 0 && i < k; i++) {
        if (addr[i] && str_is_ascii(w->L, buf + i * STR_LEN, len)) {
            cidx[nc] = at + i;
            addr[nc++] = addr[i] - STR_FROM + w->L->str.ascii_size;
        }
    }
    if (st == 0)
        st = read_batch(w->m, addr, nc, len, buf, false);
    for (size_t c = 0; st == 0 && c < nc; c++) {
        if (memcmp(buf + c * len, s, len) == 0) {
            *ix = cidx[c];
            return 0;
        }
    }
    return st < 0 ? st : APP_E_NOTFOUND;
}

/* Finds the entry whose key is the str s (ASCII, at most STR_LEN characters), chunk by chunk
 * so that a key near the front of a large dict costs two reads. Returns 0 with *ix set,
 * APP_E_NOTFOUND, or a read status. */
static int dv_find_str(struct pynames_walk *w, const struct dview *v, const char *s, size_t *ix)
{
    int st = APP_E_NOTFOUND;

    if (strlen(s) > STR_LEN)
        return APP_E_NOTFOUND;
    for (size_t at = 0; st == APP_E_NOTFOUND && at < v->n; at += FIND_CHUNK)
        st = find_chunk(w, v, at, v->n - at < FIND_CHUNK ? v->n - at : FIND_CHUNK, s, ix);
    return st;
}

/* The value of entry ix: from the entry itself, or from values[ix] of a split table. */
static int dv_get(struct pynames_walk *w, const struct dview *v, size_t ix, uint64_t *val)
{
    if (!v->split) {
        *val = dv_value(v, ix);
        return bytes_ptr_ok(*val) ? 0 : APP_E_STALE;
    }
    if (!v->values)
        return APP_E_STALE;
    return read_ptr(w->m, v->values + 8 * ix, val);
}

/* Returns 0 when the dict at addr still has the header (hdr0) and entry count (n0) it had when
 * it was loaded, else APP_E_STALE: any insert, delete or resize changes ma_used, the version
 * tag (to 3.13), ma_keys or dk_nentries. One read. */
static int dict_unchanged(struct pynames_walk *w, uint64_t addr, const uint8_t *hdr0, size_t n0)
{
    uint8_t hdr[PYABI_DICT_HDR], kh[40];
    struct rmem_iov iov[2] = {{addr, hdr, sizeof(hdr)},
                              {bytes_load_u64(hdr0 + PYABI_DICT_KEYS), kh, 40}};
    int st = rmem_readv(w->m, iov, 2, NULL);

    if (st < 0)
        return st;
    if (memcmp(hdr + PYABI_DICT_USED, hdr0 + PYABI_DICT_USED, PYABI_DICT_HDR - PYABI_DICT_USED) !=
        0)
        return APP_E_STALE;
    return bytes_load_u64(kh + w->N->keys_nentries) == n0 ? 0 : APP_E_STALE;
}

/* Looks up the str key s in the dict at addr; *val gets the value object. APP_E_NOTFOUND is
 * only returned when the dict did not change during the lookup (else APP_E_STALE), so a dict
 * being resized under us is never mistaken for a missing key. */
static int dict_lookup_str(struct pynames_walk *w, uint64_t addr, const char *s, uint64_t *val)
{
    uint8_t hdr[PYABI_DICT_HDR];
    struct dview v;
    size_t ix = 0;
    int st = dict_load(w, addr, &v, hdr);

    if (st == 0)
        st = dv_find_str(w, &v, s, &ix);
    if (st == 0)
        st = dv_get(w, &v, ix, val);
    if (st == APP_E_NOTFOUND && dict_unchanged(w, addr, hdr, v.n) < 0)
        st = APP_E_STALE;
    free(v.ent);
    return st;
}

/* interp -> modules dict -> threading module -> its md_dict -> the _active dict. */
static int find_active(struct pynames_walk *w, uint64_t interp, uint64_t *active,
                       struct app_err *err)
{
    uint64_t modules = 0, mod = 0, md = 0;
    int st = rmem_read(w->m, interp + w->L->is.modules, &modules, sizeof(modules));

    if (st < 0)
        return app_err_set(err, st, "interpreter state unreadable");
    if (modules == 0)
        return app_err_set(err, APP_E_NOTFOUND, "no modules dict yet");
    st = dict_lookup_str(w, modules, "threading", &mod);
    if (st == APP_E_NOTFOUND)
        return app_err_set(err, st, "threading is not imported");
    if (st == 0)
        st = read_ptr(w->m, mod + PYABI_MOD_DICT, &md);
    if (st == 0)
        st = dict_lookup_str(w, md, "_active", active);
    if (st == APP_E_NOTFOUND)
        return app_err_set(err, st, "threading._active not defined yet");
    if (st < 0)
        return app_err_set(err, st, "modules or threading dict torn");
    return 0;
}

/* Copies the live entries of _active (at most PYNAMES_MAX_THREADS) into slots. */
static int active_slots(const struct dview *v, struct tslot **out, size_t *n)
{
    struct tslot *s;
    size_t k = 0;

    if (v->split)
        return APP_E_STALE;
    s = x_calloc(v->n + 1, sizeof(*s));
    for (size_t i = 0; i < v->n && k < PYNAMES_MAX_THREADS; i++) {
        if (!dv_live(v, i))
            continue;
        s[k].key = dv_key(v, i);
        s[k].obj = dv_value(v, i);
        s[k].hash = dv_hash(v, i);
        if (!bytes_ptr_ok(s[k].key) || !bytes_ptr_ok(s[k].obj)) {
            free(s);
            return APP_E_STALE;
        }
        k++;
    }
    *out = s;
    *n = k;
    return 0;
}

/* Digit count of a copied PyLong header, or -1 for a negative (or implausible) int. */
static int64_t long_ndigits(const struct py_names_offsets *N, const uint8_t *obj)
{
    int64_t size = (int64_t)bytes_load_u64(obj + PYABI_LONG_SIZE);

    if (!N->long_tag)
        return size;
    if ((size & 3) == 2)
        return -1;
    return (size & 3) == 1 ? 0 : (int64_t)((uint64_t)size >> 3);
}

/* Decodes a non-negative int of at most three 30-bit digits whose first ndig digits are in
 * obj. pthread_t values are addresses, so anything longer is torn data. */
static int long_decode(const uint8_t *obj, int64_t ndig, uint64_t *out)
{
    uint32_t d;

    if (ndig <= 0 || ndig > 3)
        return APP_E_STALE;
    *out = 0;
    for (int64_t i = 0; i < ndig; i++) {
        d = bytes_load_u32(obj + PYABI_LONG_DIGITS + 4 * i);
        if (d >> 30 || (i == 2 && d >> 4))
            return APP_E_STALE;
        *out |= (uint64_t)d << (30 * i);
    }
    return 0;
}

/* Hash of a non-negative int: value mod 2^61 - 1 (Python/pyhash.c). */
static bool hash_matches(uint64_t ident, uint64_t hash)
{
    uint64_t h = ident % ((1ull << 61) - 1);

    return hash == 0 || h == hash;
}

/* Reads the int key of every slot. Idents of three digits (>= 2^60) take one more read. */
static int idents_read(struct pynames_walk *w, struct tslot *s, size_t n)
{
    uint64_t *addr = x_calloc(n + 1, sizeof(*addr));
    uint8_t *buf = x_malloc((n + 1) * LONG_READ), big[PYABI_LONG_DIGITS + 12];
    int st;

    for (size_t i = 0; i < n; i++)
        addr[i] = s[i].key;
    st = read_batch(w->m, addr, n, LONG_READ, buf, true);
    for (size_t i = 0; st == 0 && i < n; i++) {
        const uint8_t *b = buf + i * LONG_READ;
        int64_t ndig = long_ndigits(w->N, b);

        if (ndig == 3) {
            st = rmem_read(w->m, s[i].key, big, sizeof(big));
            b = big;
            if (st == 0 && long_ndigits(w->N, b) != 3)
                st = APP_E_STALE;
        }
        if (st == 0)
            st = long_decode(b, ndig, &s[i].ident);
        if (st == 0 && (s[i].ident == 0 || !hash_matches(s[i].ident, s[i].hash)))
            st = APP_E_STALE;
    }
    free(addr);
    free(buf);
    return st;
}

/* Reads each Thread's header and, for managed dicts, the words in front of it. */
static int objects_read(struct pynames_walk *w, struct tslot *s, size_t n)
{
    size_t pre = w->N->dict_ptr != PYABI_NONE ? PRE_HDR : 0, len = pre + 16;
    uint64_t *addr = x_calloc(n + 1, sizeof(*addr));
    uint8_t *buf = x_malloc((n + 1) * len);
    int st;

    for (size_t i = 0; i < n; i++)
        addr[i] = s[i].obj - pre;
    st = read_batch(w->m, addr, n, len, buf, true);
    for (size_t i = 0; st == 0 && i < n; i++) {
        const uint8_t *b = buf + i * len;

        memcpy(s[i].pre, b, pre);
        s[i].type = bytes_load_u64(b + pre + PYABI_OB_TYPE);
        if ((int64_t)bytes_load_u64(b + pre) <= 0 || !bytes_ptr_ok(s[i].type))
            st = APP_E_STALE;
    }
    free(addr);
    free(buf);
    return st;
}

/* Fills a type record from its copied header; Threads are always heap types. */
static int type_parse(const struct py_names_offsets *N, const uint8_t *b, struct ttype *t)
{
    t->flags = bytes_load_u64(b + PYABI_TP_FLAGS);
    t->basicsize = bytes_load_u64(b + PYABI_TP_BASICSIZE);
    t->dictoffset = (int64_t)bytes_load_u64(b + PYABI_TP_DICTOFFSET);
    t->cached_keys = bytes_load_u64(b + N->ht_cached_keys);
    if (!(t->flags & PYABI_TPF_HEAPTYPE) || !(t->flags & PYABI_TPF_READY))
        return APP_E_STALE;
    if (t->basicsize < 16 || t->basicsize > 65536 || (t->basicsize & 7) != 0)
        return APP_E_STALE;
    if (t->cached_keys && !bytes_ptr_ok(t->cached_keys))
        return APP_E_STALE;
    return 0;
}

/* Reads each distinct type once (a handful: Thread, _MainThread, _DummyThread, subclasses). */
static int types_read(struct pynames_walk *w, struct tslot *s, size_t n, struct ttype **out)
{
    size_t len = w->N->ht_cached_keys + 8, k = 0;
    uint64_t *addr = x_calloc(n + 1, sizeof(*addr));
    struct ttype *t = x_calloc(n + 1, sizeof(*t));
    uint8_t *buf;
    int st;

    for (size_t i = 0; i < n; i++) {
        size_t j = 0;

        while (j < k && addr[j] != s[i].type)
            j++;
        if (j == k)
            addr[k++] = s[i].type;
        s[i].t = j;
    }
    buf = x_malloc(k * len);
    st = read_batch(w->m, addr, k, len, buf, true);
    for (size_t j = 0; st == 0 && j < k; j++) {
        t[j].addr = addr[j];
        st = type_parse(w->N, buf + j * len, &t[j]);
    }
    free(addr);
    free(buf);
    *out = t;
    return st;
}

/* Decides where a Thread keeps its attributes, from its type and the words in front of it:
 * shared keys + values (3.11 values pointer, 3.12 tagged pointer), a probe still to read
 * (3.13+ inline values header, or the tp_dictoffset slot), or a managed dict. */
static int slot_resolve(const struct py_names_offsets *N, const struct ttype *t, struct tslot *s)
{
    uint64_t d = N->dict_ptr != PYABI_NONE ? s->pre[(PRE_HDR + N->dict_ptr) / 8] : 0;
    uint64_t vals = N->values_ptr != PYABI_NONE ? s->pre[(PRE_HDR + N->values_ptr) / 8] : 0;

    if (N->dict_ptr == PYABI_NONE || !(t->flags & PYABI_TPF_MANAGED_DICT)) {
        if (t->dictoffset < 16 || (uint64_t)t->dictoffset + 8 > t->basicsize)
            return APP_E_STALE;
        s->probe = s->obj + (uint64_t)t->dictoffset;
        return 0;
    }
    if (N->dict_ptr_tagged && (d & 1)) {
        vals = d + 1;
        d = 0;
    }
    if (vals) {
        s->keys = t->cached_keys;
        s->values = vals + N->values_off;
        return bytes_ptr_ok(vals) && s->keys ? 0 : APP_E_STALE;
    }
    if (N->inline_values && (t->flags & PYABI_TPF_INLINE_VALUES))
        s->probe = s->obj + t->basicsize;
    if (d && !bytes_ptr_ok(d))
        return APP_E_STALE;
    s->dict = d;
    return s->probe || d ? 0 : APP_E_STALE;
}

/* Reads the probes: an inline values header {capacity, size, embedded, valid} selects the
 * shared keys when valid (else the managed dict stays); a tp_dictoffset slot gives the dict. */
static int probes_read(struct pynames_walk *w, struct tslot *s, size_t n, const struct ttype *t)
{
    uint64_t *addr = x_calloc(n + 1, sizeof(*addr));
    uint8_t *buf = x_malloc((n + 1) * 8);
    int st;

    for (size_t i = 0; i < n; i++)
        addr[i] = s[i].probe;
    st = read_batch(w->m, addr, n, 8, buf, true);
    for (size_t i = 0; st == 0 && i < n; i++) {
        const uint8_t *b = buf + i * 8;
        bool inl = w->N->inline_values && s[i].probe == s[i].obj + t[s[i].t].basicsize;

        if (!s[i].probe)
            continue;
        if (inl && b[3]) {
            s[i].keys = t[s[i].t].cached_keys;
            s[i].values = s[i].probe + w->N->values_off;
            s[i].capacity = b[0];
            s[i].dict = 0;
        } else if (!inl) {
            s[i].dict = bytes_load_u64(b);
        }
        if (!s[i].keys && !bytes_ptr_ok(s[i].dict))
            st = APP_E_STALE;
    }
    free(addr);
    free(buf);
    return st;
}

/* Opens the attribute dicts: a split one yields shared keys + values, a combined one is
 * searched for "_name" directly (rare: only after attributes were deleted or overflowed). */
static int dicts_read(struct pynames_walk *w, struct tslot *s, size_t n)
{
    uint64_t *addr = x_calloc(n + 1, sizeof(*addr));
    uint8_t *buf = x_malloc((n + 1) * PYABI_DICT_HDR);
    int st;

    for (size_t i = 0; i < n; i++)
        addr[i] = s[i].keys ? 0 : s[i].dict;
    st = read_batch(w->m, addr, n, PYABI_DICT_HDR, buf, true);
    for (size_t i = 0; st == 0 && i < n; i++) {
        const uint8_t *b = buf + i * PYABI_DICT_HDR;

        if (!addr[i])
            continue;
        st = dict_check(w, b);
        if (st == 0 && bytes_load_u64(b + PYABI_DICT_VALUES)) {
            s[i].keys = bytes_load_u64(b + PYABI_DICT_KEYS);
            s[i].values = bytes_load_u64(b + PYABI_DICT_VALUES) + w->N->values_off;
        } else if (st == 0) {
            st = dict_lookup_str(w, s[i].dict, w->attr, &s[i].name);
        }
        if (st == APP_E_NOTFOUND) {
            s[i].noname = true;
            st = 0;
        }
    }
    free(addr);
    free(buf);
    return st;
}

/* Index of "_name" in the shared keys at `keys` (SIZE_MAX when absent), memoised per keys
 * object in ix_keys/ix_val. Shared keys only ever grow in place, so a miss is genuine. */
static int shared_index(struct pynames_walk *w, uint64_t keys, uint64_t *ix_keys, size_t *ix_val,
                        size_t *nix, size_t *ix)
{
    struct dview v;
    int st;

    for (size_t j = 0; j < *nix; j++) {
        if (ix_keys[j] == keys) {
            *ix = ix_val[j];
            return 0;
        }
    }
    st = keys_load(w, keys, true, &v);
    if (st == 0)
        st = dv_find_str(w, &v, w->attr, ix);
    free(v.ent);
    if (st == APP_E_NOTFOUND) {
        *ix = SIZE_MAX;
        st = 0;
    }
    if (st == 0) {
        ix_keys[*nix] = keys;
        ix_val[(*nix)++] = *ix;
    }
    return st;
}

/* For split attributes: finds "_name" in each distinct shared keys object, then reads every
 * values[ix] pointer in one batch. */
static int split_names(struct pynames_walk *w, struct tslot *s, size_t n)
{
    uint64_t *addr = x_calloc(n + 1, sizeof(*addr)), *ix_keys = x_calloc(n + 1, 8);
    size_t *ix_val = x_calloc(n + 1, sizeof(size_t)), nix = 0, ix = 0;
    uint8_t *buf = x_malloc((n + 1) * 8);
    int st = 0;

    for (size_t i = 0; st == 0 && i < n; i++) {
        if (s[i].name || s[i].noname || !s[i].keys)
            continue;
        st = shared_index(w, s[i].keys, ix_keys, ix_val, &nix, &ix);
        if (st == 0 && ix == SIZE_MAX)
            s[i].noname = true;
        else if (st == 0 && s[i].capacity && ix >= s[i].capacity)
            st = APP_E_STALE;
        else
            addr[i] = s[i].values + 8 * ix;
    }
    if (st == 0)
        st = read_batch(w->m, addr, n, 8, buf, true);
    for (size_t i = 0; st == 0 && i < n; i++) {
        if (addr[i])
            s[i].name = bytes_load_u64(buf + i * 8);
        if (addr[i] && !s[i].name)
            s[i].noname = true; /* deleted from the values array */
        else if (!s[i].noname && !bytes_ptr_ok(s[i].name))
            st = APP_E_STALE;
    }
    free(addr);
    free(ix_keys);
    free(ix_val);
    free(buf);
    return st;
}

/* Resolves every slot's _name str object. */
static int names_locate(struct pynames_walk *w, struct tslot *s, size_t n)
{
    struct ttype *t = NULL;
    int st = objects_read(w, s, n);

    if (st == 0)
        st = types_read(w, s, n, &t);
    for (size_t i = 0; st == 0 && i < n; i++)
        st = slot_resolve(w->N, &t[s[i].t], &s[i]);
    if (st == 0)
        st = probes_read(w, s, n, t);
    if (st == 0)
        st = dicts_read(w, s, n);
    if (st == 0)
        st = split_names(w, s, n);
    free(t);
    return st;
}

/* Decodes the names into a new array of *n records, leaving out threads without a _name. */
static int names_decode(struct pynames_walk *w, const struct tslot *s, size_t ns,
                        struct pyname **out, size_t *n)
{
    struct pyname *v = x_calloc(ns + 1, sizeof(*v));
    size_t k = 0;
    int st = 0;

    for (size_t i = 0; st == 0 && i < ns; i++) {
        if (s[i].noname)
            continue;
        v[k].ident = s[i].ident;
        v[k].name = pystr_read(w->m, w->L, s[i].name, &st);
        if (v[k++].name == NULL && st == 0)
            st = APP_E_STALE;
    }
    if (st < 0 || k == 0) {
        pynames_free(v, k);
        v = NULL;
        k = 0;
    }
    *out = v;
    *n = k;
    return st;
}

static int active_walk(struct pynames_walk *w, uint64_t active, struct pyname **out, size_t *n)
{
    uint8_t hdr0[PYABI_DICT_HDR];
    struct dview v;
    struct tslot *s = NULL;
    size_t ns = 0;
    int st = dict_load(w, active, &v, hdr0);

    if (st == 0)
        st = active_slots(&v, &s, &ns);
    if (st == 0)
        st = idents_read(w, s, ns);
    if (st == 0)
        st = names_locate(w, s, ns);
    if (st == 0)
        st = dict_unchanged(w, active, hdr0, v.n);
    if (st == 0)
        st = names_decode(w, s, ns, out, n);
    free(v.ent);
    free(s);
    return st;
}

int pynames_walk_init(struct pynames_walk *w, struct rmem *m, const struct py_layout *L,
                      struct app_err *err)
{
    *w = (struct pynames_walk){.m = m, .L = L, .N = L ? &L->names : NULL, .attr = "_name"};
    if (!w->N || w->N->off || w->N->ht_cached_keys == 0 || L->is.modules == 0 ||
        L->str.length != STR_FROM || L->str.state + 4 > STR_FROM + STR_LEN)
        return app_err_set(err, APP_E_VERSION, "no object layout for 3.%d", L ? L->minor : 0);
    return 0;
}

int pynames_module_get(struct pynames_walk *w, uint64_t interp, const char *module,
                       const char *name, uint64_t *val)
{
    uint64_t modules = 0, mod = 0, md = 0;
    int st = rmem_read(w->m, interp + w->L->is.modules, &modules, sizeof(modules));

    if (st == 0 && modules == 0)
        st = APP_E_NOTFOUND;
    if (st == 0)
        st = dict_lookup_str(w, modules, module, &mod);
    if (st == 0)
        st = read_ptr(w->m, mod + PYABI_MOD_DICT, &md);
    if (st == 0)
        st = dict_lookup_str(w, md, name, val);
    return st;
}

int pynames_attr(struct pynames_walk *w, uint64_t obj, const char *attr, uint64_t *val)
{
    struct tslot s = {.obj = obj};
    const char *saved = w->attr;
    int st;

    if (!bytes_ptr_ok(obj))
        return APP_E_STALE;
    w->attr = attr;
    st = names_locate(w, &s, 1);
    w->attr = saved;
    if (st == 0 && s.noname)
        st = APP_E_NOTFOUND;
    if (st == 0)
        *val = s.name;
    return st;
}

/* The attribute dict in the object's dict slot: split (its shared keys and values go into s),
 * or combined, then looked up name by name (0 for a name it lacks). */
static int attrs_dict(struct pynames_walk *w, struct tslot *s, const char *const *attrs, size_t n,
                      uint64_t *vals)
{
    uint8_t b[PYABI_DICT_HDR];
    int st = rmem_read(w->m, s->dict, b, sizeof(b));

    if (st == 0)
        st = dict_check(w, b);
    if (st == 0 && bytes_load_u64(b + PYABI_DICT_VALUES)) {
        s->keys = bytes_load_u64(b + PYABI_DICT_KEYS);
        s->values = bytes_load_u64(b + PYABI_DICT_VALUES) + w->N->values_off;
        return 0;
    }
    for (size_t i = 0; st == 0 && i < n; i++) {
        st = dict_lookup_str(w, s->dict, attrs[i], &vals[i]);
        if (st == APP_E_NOTFOUND)
            st = 0, vals[i] = 0;
    }
    return st;
}

/* The places of attrs in the shared keys at keys (SIZE_MAX: absent): from the memo while it
 * holds (a miss only while the keys' nentries has not moved: one read), else searched and
 * remembered. */
static int attrs_places(struct pynames_walk *w, uint64_t keys, const char *const *attrs, size_t n,
                        size_t *ix)
{
    struct pynames_memo *mo = NULL;
    struct dview v;
    uint8_t kh[40];
    bool miss = false;
    int st;

    for (size_t j = 0; j < w->nmemo && !mo; j++)
        if (w->memo[j].keys == keys && w->memo[j].attrs == attrs)
            mo = &w->memo[j];
    for (size_t i = 0; mo && i < n; i++)
        miss |= mo->ix[i] == SIZE_MAX;
    if (mo && miss && (st = rmem_read(w->m, keys, kh, sizeof(kh))) < 0)
        return st;
    if (mo && (!miss || bytes_load_u64(kh + w->N->keys_nentries) == mo->nentries)) {
        memcpy(ix, mo->ix, n * sizeof(*ix));
        return 0;
    }
    st = keys_load(w, keys, true, &v);
    for (size_t i = 0; st == 0 && i < n; i++) {
        st = dv_find_str(w, &v, attrs[i], &ix[i]);
        if (st == APP_E_NOTFOUND)
            st = 0, ix[i] = SIZE_MAX;
    }
    if (st == 0) {
        if (!mo)
            mo = &w->memo[w->nmemo < PYNAMES_MEMO ? w->nmemo++ : 0];
        *mo = (struct pynames_memo){.keys = keys, .nentries = v.n, .attrs = attrs};
        memcpy(mo->ix, ix, n * sizeof(*ix));
    }
    free(v.ent);
    return st;
}

int pynames_attrs(struct pynames_walk *w, uint64_t obj, const char *const *attrs, size_t n,
                  uint64_t *vals)
{
    struct tslot s = {.obj = obj};
    struct ttype *t = NULL;
    size_t ix[PYNAMES_ATTRS_MAX];
    uint64_t addr[PYNAMES_ATTRS_MAX] = {0};
    uint8_t buf[PYNAMES_ATTRS_MAX * 8];
    int st;

    if (n == 0 || n > PYNAMES_ATTRS_MAX || !bytes_ptr_ok(obj))
        return APP_E_STALE;
    memset(vals, 0, n * sizeof(*vals));
    st = objects_read(w, &s, 1);
    if (st == 0)
        st = types_read(w, &s, 1, &t);
    if (st == 0)
        st = slot_resolve(w->N, &t[0], &s);
    if (st == 0)
        st = probes_read(w, &s, 1, t);
    free(t);
    if (st == 0 && !s.keys)
        st = attrs_dict(w, &s, attrs, n, vals);
    if (st < 0 || !s.keys)
        return st;
    st = attrs_places(w, s.keys, attrs, n, ix);
    for (size_t i = 0; st == 0 && i < n; i++) {
        if (ix[i] != SIZE_MAX && s.capacity && ix[i] >= s.capacity)
            st = APP_E_STALE;
        else if (ix[i] != SIZE_MAX)
            addr[i] = s.values + 8 * ix[i];
    }
    if (st == 0)
        st = read_batch(w->m, addr, n, 8, buf, true);
    for (size_t i = 0; st == 0 && i < n; i++) {
        vals[i] = addr[i] ? bytes_load_u64(buf + 8 * i) : 0; /* NULL: deleted from the values */
        if (vals[i] && !bytes_ptr_ok(vals[i]))
            st = APP_E_STALE;
    }
    return st;
}

int pynames_dict_items(struct pynames_walk *w, uint64_t dict, uint64_t *keys, uint64_t *vals,
                       size_t max, size_t *n, bool recheck)
{
    uint8_t hdr[PYABI_DICT_HDR];
    struct dview v;
    int st = dict_load(w, dict, &v, hdr);

    *n = 0;
    if (st == 0 && v.split)
        st = APP_E_STALE; /* a plain dict ({}) is never split */
    for (size_t i = 0; st == 0 && i < v.n && *n < max; i++) {
        if (!dv_live(&v, i))
            continue;
        keys[*n] = dv_key(&v, i);
        vals[(*n)++] = dv_value(&v, i);
        if (!bytes_ptr_ok(keys[*n - 1]) || !bytes_ptr_ok(vals[*n - 1]))
            st = APP_E_STALE;
    }
    if (st == 0 && recheck)
        st = dict_unchanged(w, dict, hdr, v.n);
    free(v.ent);
    return st;
}

int pynames_long(struct pynames_walk *w, uint64_t obj, uint64_t *val)
{
    uint8_t b[PYABI_LONG_DIGITS + 12];
    int st = rmem_read(w->m, obj, b, sizeof(b));

    return st < 0 ? st : long_decode(b, long_ndigits(w->N, b), val);
}

int pynames_read(struct rmem *m, const struct py_layout *L, uint64_t interp, struct pyname **out,
                 size_t *n, struct app_err *err)
{
    struct pynames_walk w;
    uint64_t active = 0;
    int st;

    *out = NULL;
    *n = 0;
    st = pynames_walk_init(&w, m, L, err);
    if (st < 0)
        return st;
    if (!bytes_ptr_ok(interp))
        return app_err_set(err, APP_E_STALE, "bad interpreter address");
    st = find_active(&w, interp, &active, err);
    if (st < 0)
        return st;
    st = active_walk(&w, active, out, n);
    if (st < 0)
        return app_err_set(err, st, "threading._active: %s", app_status_str(st));
    return 0;
}

void pynames_free(struct pyname *v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
}
