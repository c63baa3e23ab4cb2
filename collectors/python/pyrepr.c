/* Safe renderings of Python objects read from another process, for `dump --locals` and the
 * monitor's locals panes.
 *
 * Only built-in types are rendered by content, and only when the object's type is a static
 * (non-heap) type of exactly that name: None, bool, int (any size: decimal digits up to a
 * bound, then cut), float (Python's shortest repr), str and bytes (cut, escaped as Python's
 * repr escapes them), tuple, list, dict, set and frozenset (the first items, nested to a
 * bounded depth, and the length). Everything else is its type name and address; torch tensors
 * say that their dtype and shape were not read. The target
 * runs on while we read, so every read is bounded and checked: containers are read again after
 * their items and must not have changed, ints must be normalised, lengths plausible; anything
 * that fails makes the whole value "<unreadable: ...>", never a guess. Nothing is ever called
 * in or written to the target. Runs on the thread that owns the struct rmem. */
#include "pyrepr.h"

#include "pystr.h"
#include "ranktop/base/bytes.h"
#include "ranktop/base/util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TYPE_HDR 176    /* PyTypeObject bytes read: tp_flags @168 lies below */
#define TP_NAME 24      /* PyTypeObject.tp_name */
#define NAME_MAX_LEN 64 /* longest type name read */
#define SEQ_SHOW 8      /* items shown of a container */
#define DEPTH_MAX 3     /* containers nested deeper show their length only */
#define LONG_MAXDIG 70  /* 30-bit digits of the largest int shown in decimal (632 digits) */
#define DEC_SHOW 100    /* decimal digits shown whole; longer ints are cut */
#define STR_SHOW 100    /* characters of a str (bytes of a bytes) shown */
#define LEN_MAX (1ll << 40)
#define LIST_ITEMS 24 /* PyListObject.ob_item, allocated @32 */
#define FLOAT_VAL 16
#define SET_USED 24 /* PySetObject: fill @16, used, mask @32, table @40 */
#define SET_SCAN 256
#define CELL_REF 16

struct sb {
    char b[PYREPR_MAX + 64];
    size_t n;
    bool full;
};

static void sb_putn(struct sb *o, const char *s, size_t n)
{
    if (o->full)
        return;
    if (o->n + n > PYREPR_MAX) {
        o->full = true;
        return;
    }
    memcpy(o->b + o->n, s, n);
    o->n += n;
    o->b[o->n] = 0;
}

static void sb_puts(struct sb *o, const char *s)
{
    sb_putn(o, s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static void sb_printf(struct sb *o, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    int k;

    va_start(ap, fmt);
    k = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (k > 0)
        sb_putn(o, tmp, (size_t)k < sizeof(tmp) ? (size_t)k : sizeof(tmp) - 1);
}

void pyrepr_init(struct pyrepr *r, struct rmem *m, const struct py_layout *L)
{
    memset(r, 0, sizeof(*r));
    r->m = m;
    r->L = L;
    r->tuple_items = L->minor >= 14 ? 32 : 24;
    r->nw_ok = pynames_walk_init(&r->nw, m, L, NULL) == 0;
}

int pyrepr_type(struct pyrepr *r, uint64_t obj, char *name, size_t len, uint64_t *flags)
{
    uint8_t hdr[TYPE_HDR];
    char buf[NAME_MAX_LEN];
    uint64_t type;
    long got;
    size_t i;
    int st;

    if (!bytes_ptr_ok(obj))
        return APP_E_STALE;
    if ((st = rmem_read(r->m, obj + r->L->ob_type, &type, sizeof(type))) < 0)
        return st;
    if (!bytes_ptr_ok(type) || (st = rmem_read(r->m, type, hdr, sizeof(hdr))) < 0)
        return st < 0 ? st : APP_E_STALE;
    *flags = bytes_load_u64(hdr + PYABI_TP_FLAGS);
    if (!(*flags & PYABI_TPF_READY) || !bytes_ptr_ok(bytes_load_u64(hdr + TP_NAME) & ~7ull))
        return APP_E_STALE;
    got = rmem_read_some(r->m, bytes_load_u64(hdr + TP_NAME), buf, sizeof(buf));
    if (got <= 0)
        return got < 0 ? (int)got : APP_E_STALE;
    for (i = 0; i < (size_t)got && buf[i]; i++)
        if ((unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] > 0x7e)
            return APP_E_STALE; /* type names are identifiers */
    if (i == 0 || i >= (size_t)got)
        return APP_E_STALE;
    snprintf(name, len, "%s", buf);
    return 0;
}

static int render(struct pyrepr *r, uint64_t obj, int depth, struct sb *o, char *tn, size_t tl);

/* --- ints ------------------------------------------------------------------------------- */

/* Decimal of the little-endian base-2^30 number d[0..n), destroying d; into out (reversed
 * 9-digit groups made readable). Returns the number of decimal digits. */
static size_t long_decimal(uint32_t *d, size_t n, char *out, size_t cap)
{
    char rev[LONG_MAXDIG * 10 + 16];
    size_t k = 0;

    while (n > 0) {
        uint64_t rem = 0;
        for (size_t i = n; i-- > 0;) {
            uint64_t cur = (rem << 30) | d[i];
            d[i] = (uint32_t)(cur / 1000000000u);
            rem = cur % 1000000000u;
        }
        while (n > 0 && d[n - 1] == 0)
            n--;
        for (int j = 0; j < 9 && (n > 0 || rem > 0 || j == 0) && k < sizeof(rev); j++) {
            rev[k++] = (char)('0' + rem % 10);
            rem /= 10;
        }
    }
    if (k == 0)
        rev[k++] = '0';
    for (size_t i = 0; i < k && i + 1 < cap; i++)
        out[i] = rev[k - 1 - i];
    out[k < cap ? k : cap - 1] = 0;
    return k;
}

/* The int (or bool, as_bool) at obj. */
static int render_long(struct pyrepr *r, uint64_t obj, struct sb *o, bool as_bool)
{
    uint8_t b[PYABI_LONG_DIGITS + 4 * LONG_MAXDIG];
    uint32_t d[LONG_MAXDIG];
    char dec[LONG_MAXDIG * 10 + 16];
    uint64_t tag;
    size_t n, nd;
    bool neg;
    int st = rmem_read(r->m, obj, b, PYABI_LONG_DIGITS + 4);

    if (st < 0)
        return st;
    tag = bytes_load_u64(b + PYABI_LONG_SIZE);
    if (r->L->names.long_tag) {
        n = (size_t)(tag >> 3), neg = (tag & 3) == 2;
        if ((tag & 3) == 3 || ((tag & 3) == 1) != (n == 0))
            return APP_E_STALE;
    } else {
        int64_t s = (int64_t)tag;
        neg = s < 0, n = (size_t)(s < 0 ? -(uint64_t)s : (uint64_t)s);
    }
    if (n > LONG_MAXDIG) {
        sb_printf(o, "<int of %zu bits>", n * 30);
        return n > (1u << 28) ? APP_E_STALE : 0;
    }
    if (n > 1 && (st = rmem_read(r->m, obj, b, PYABI_LONG_DIGITS + 4 * n)) < 0)
        return st;
    for (size_t i = 0; i < n; i++)
        if ((d[i] = bytes_load_u32(b + PYABI_LONG_DIGITS + 4 * i)) >= (1u << 30))
            return APP_E_STALE;
    if (n > 0 && d[n - 1] == 0)
        return APP_E_STALE; /* not normalised: torn */
    if (as_bool) {
        if (n > 1 || neg)
            return APP_E_STALE;
        sb_puts(o, n ? "True" : "False");
        return 0;
    }
    nd = long_decimal(d, n, dec, sizeof(dec));
    if (neg)
        sb_puts(o, "-");
    if (nd <= DEC_SHOW)
        sb_puts(o, dec);
    else {
        sb_putn(o, dec, 40);
        sb_printf(o, "... (%zu digits)", nd);
    }
    return 0;
}

/* --- floats ----------------------------------------------------------------------------- */

/* Python's repr of a float: the shortest digits that read back the same, in positional
 * notation for exponents -4..15, else d.ddde+XX. */
static void float_repr(double v, struct sb *o)
{
    char t[40], digits[24];
    int p, exp = 0, nd = 0;

    if (isnan(v)) {
        sb_puts(o, "nan");
        return;
    }
    if (isinf(v)) {
        sb_puts(o, v < 0 ? "-inf" : "inf");
        return;
    }
    for (p = 0; p < 17; p++) {
        snprintf(t, sizeof(t), "%.*e", p, v);
        if (strtod(t, NULL) == v)
            break;
    }
    snprintf(t, sizeof(t), "%.*e", p, v);
    for (const char *c = t; *c && *c != 'e'; c++)
        if (*c >= '0' && *c <= '9' && nd < (int)sizeof(digits) - 1)
            digits[nd++] = *c;
    digits[nd] = 0;
    exp = atoi(strchr(t, 'e') + 1);
    if (signbit(v))
        sb_puts(o, "-");
    while (nd > 1 && digits[nd - 1] == '0')
        digits[--nd] = 0;
    if (exp < -4 || exp >= 16) {
        sb_putn(o, digits, 1);
        if (nd > 1) {
            sb_puts(o, ".");
            sb_puts(o, digits + 1);
        }
        sb_printf(o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    } else if (exp < 0) {
        sb_puts(o, "0.");
        for (int i = -1; i > exp; i--)
            sb_puts(o, "0");
        sb_puts(o, digits);
    } else {
        for (int i = 0; i <= exp; i++)
            sb_putn(o, i < nd ? digits + i : "0", 1);
        sb_puts(o, ".");
        sb_puts(o, nd > exp + 1 ? digits + exp + 1 : "0");
    }
}

/* --- str and bytes ------------------------------------------------------------------------ */

static void esc_char(struct sb *o, uint32_t c, char quote)
{
    if (c == '\\' || c == (uint32_t)quote)
        sb_printf(o, "\\%c", (char)c);
    else if (c == '\n')
        sb_puts(o, "\\n");
    else if (c == '\r')
        sb_puts(o, "\\r");
    else if (c == '\t')
        sb_puts(o, "\\t");
    else if (c < 0x20 || (c >= 0x7f && c < 0xa0))
        sb_printf(o, "\\x%02x", c);
    else {
        char u[8];
        sb_putn(o, u, utf8_put(u, c));
    }
}

/* Decodes one UTF-8 sequence at s; returns its length. A byte that starts no valid sequence
 * (pystr writes none, but the rule holds for any input) decodes as U+FFFD. */
static size_t utf8_get(const unsigned char *s, uint32_t *c)
{
    size_t n = s[0] < 0x80 ? 1 : utf8_valid_len(s);

    if (n == 0)
        return *c = 0xfffd, 1;
    *c = n == 1 ? s[0] : s[0] & (0x7fu >> n);
    for (size_t i = 1; i < n; i++)
        *c = *c << 6 | (s[i] & 0x3fu);
    return n;
}

static char pick_quote(const char *s, size_t n)
{
    bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;

    return sq && !dq ? '"' : '\'';
}

static int render_str(struct pyrepr *r, uint64_t obj, struct sb *o)
{
    int64_t len;
    int st = rmem_read(r->m, obj + r->L->str.length, &len, sizeof(len));
    char *s, q;
    size_t i = 0, shown = 0, sl;

    if (st < 0)
        return st;
    if (len < 0 || len > LEN_MAX || !(s = pystr_read(r->m, r->L, obj, &st)))
        return st < 0 ? st : APP_E_STALE;
    sl = strlen(s);
    q = pick_quote(s, sl);
    sb_putn(o, &q, 1);
    while (i < sl && shown < STR_SHOW && shown < (size_t)len) {
        uint32_t c;
        i += utf8_get((const unsigned char *)s + i, &c);
        esc_char(o, c, q);
        shown++;
    }
    sb_putn(o, &q, 1);
    if (shown < (size_t)len)
        sb_printf(o, "... (%lld chars)", (long long)len);
    free(s);
    return 0;
}

static int render_bytes(struct pyrepr *r, uint64_t obj, struct sb *o)
{
    int64_t len;
    char buf[STR_SHOW], q;
    size_t n;
    int st = rmem_read(r->m, obj + r->L->bytes.size, &len, sizeof(len));

    if (st < 0)
        return st;
    if (len < 0 || len > LEN_MAX)
        return APP_E_STALE;
    n = (size_t)len < sizeof(buf) ? (size_t)len : sizeof(buf);
    if (n && (st = rmem_read(r->m, obj + r->L->bytes.sval, buf, n)) < 0)
        return st;
    q = pick_quote(buf, n);
    sb_puts(o, "b");
    sb_putn(o, &q, 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (c >= 0x80)
            sb_printf(o, "\\x%02x", c);
        else
            esc_char(o, c, q);
    }
    sb_putn(o, &q, 1);
    if (n < (size_t)len)
        sb_printf(o, "... (%lld bytes)", (long long)len);
    return 0;
}

/* --- containers ------------------------------------------------------------------------- */

/* The items of a list (item array at arr) or tuple, already counted; k of them read. */
static int render_items(struct pyrepr *r, const uint64_t *it, size_t k, int depth, struct sb *o,
                        const char *sep)
{
    char tn[NAME_MAX_LEN];
    int st;

    for (size_t i = 0; i < k; i++) {
        if (i)
            sb_puts(o, sep);
        if ((st = render(r, it[i], depth + 1, o, tn, sizeof(tn))) < 0)
            return st;
    }
    return 0;
}

static void close_seq(struct sb *o, size_t shown, int64_t len, const char *close)
{
    if ((int64_t)shown < len)
        sb_puts(o, shown ? ", ..." : "...");
    sb_puts(o, close);
    if ((int64_t)shown < len)
        sb_printf(o, " (%lld items)", (long long)len);
}

static int render_seq(struct pyrepr *r, uint64_t obj, bool tuple, int depth, struct sb *o)
{
    uint8_t h[40], h2[40];
    uint64_t it[SEQ_SHOW], arr;
    int64_t len;
    size_t k;
    int st = rmem_read(r->m, obj, h, sizeof(h));

    if (st < 0)
        return st;
    len = (int64_t)bytes_load_u64(h + 16);
    arr = tuple ? obj + r->tuple_items : bytes_load_u64(h + LIST_ITEMS);
    if (len < 0 || len > LEN_MAX ||
        (!tuple && (len > (int64_t)bytes_load_u64(h + 32) || (len && !bytes_ptr_ok(arr)))))
        return APP_E_STALE;
    k = len < SEQ_SHOW ? (size_t)len : SEQ_SHOW;
    if (depth >= DEPTH_MAX && len > 0)
        k = 0;
    if (k && (st = rmem_read(r->m, arr, it, 8 * k)) < 0)
        return st;
    sb_puts(o, tuple ? "(" : "[");
    if ((st = render_items(r, it, k, depth, o, ", ")) < 0)
        return st;
    if (tuple && len == 1)
        sb_puts(o, ",");
    close_seq(o, k, len, tuple ? ")" : "]");
    /* A list may have grown, shrunk or moved its items while we read them. */
    if (!tuple && ((st = rmem_read(r->m, obj, h2, sizeof(h2))) < 0 || memcmp(h + 16, h2 + 16, 24)))
        return st < 0 ? st : APP_E_STALE;
    return 0;
}

static int render_dict(struct pyrepr *r, uint64_t obj, int depth, struct sb *o)
{
    uint8_t h[PYABI_DICT_HDR];
    uint64_t keys[SEQ_SHOW], vals[SEQ_SHOW], type;
    char tn[NAME_MAX_LEN];
    size_t k = 0;
    int64_t len;
    int st = rmem_read(r->m, obj, h, sizeof(h));

    if (st < 0)
        return st;
    len = (int64_t)bytes_load_u64(h + PYABI_DICT_USED);
    type = bytes_load_u64(h + r->L->ob_type);
    if (len < 0 || len > LEN_MAX)
        return APP_E_STALE;
    /* Split dicts (an instance's __dict__) and dicts nested too deep show their length. */
    if (len > 0 && depth < DEPTH_MAX && r->nw_ok && !bytes_load_u64(h + PYABI_DICT_VALUES)) {
        r->nw.dict_type = type;
        st = pynames_dict_items(&r->nw, obj, keys, vals, SEQ_SHOW, &k, true);
        if (st < 0)
            return st;
    }
    sb_puts(o, "{");
    for (size_t i = 0; i < k; i++) {
        if (i)
            sb_puts(o, ", ");
        if ((st = render(r, keys[i], depth + 1, o, tn, sizeof(tn))) < 0)
            return st;
        sb_puts(o, ": ");
        if ((st = render(r, vals[i], depth + 1, o, tn, sizeof(tn))) < 0)
            return st;
    }
    close_seq(o, k, len, "}");
    return 0;
}

static int render_set(struct pyrepr *r, uint64_t obj, bool frozen, int depth, struct sb *o)
{
    uint8_t h[48], h2[48], ent[SET_SCAN * 16];
    uint64_t it[SEQ_SHOW], mask, table;
    int64_t len;
    size_t k = 0, scan;
    int st = rmem_read(r->m, obj, h, sizeof(h));

    if (st < 0)
        return st;
    len = (int64_t)bytes_load_u64(h + SET_USED);
    mask = bytes_load_u64(h + 32), table = bytes_load_u64(h + 40);
    if (len < 0 || len > LEN_MAX || (mask & (mask + 1)) || mask >= (1ull << 40) ||
        !bytes_ptr_ok(table) || (uint64_t)len > mask + 1)
        return APP_E_STALE;
    scan = mask + 1 < SET_SCAN ? (size_t)mask + 1 : SET_SCAN;
    if (len > 0 && depth < DEPTH_MAX && (st = rmem_read(r->m, table, ent, 16 * scan)) < 0)
        return st;
    for (size_t i = 0; len > 0 && depth < DEPTH_MAX && i < scan && k < SEQ_SHOW; i++) {
        uint64_t key = bytes_load_u64(ent + 16 * i);
        if (key && (int64_t)bytes_load_u64(ent + 16 * i + 8) != -1) /* -1: a dummy (deleted) */
            it[k++] = key;
    }
    if (len == 0) {
        sb_puts(o, frozen ? "frozenset()" : "set()");
        return 0;
    }
    sb_puts(o, frozen ? "frozenset({" : "{");
    if ((st = render_items(r, it, k, depth, o, ", ")) < 0)
        return st;
    close_seq(o, k, len, frozen ? "})" : "}");
    if ((st = rmem_read(r->m, obj, h2, sizeof(h2))) < 0 || memcmp(h + 16, h2 + 16, 32))
        return st < 0 ? st : APP_E_STALE;
    return 0;
}

/* --- torch tensors ------------------------------------------------------------------- */

/* torch 1.13 on x86-64 and aarch64 (offsetof against its headers, checked against the
 * target's own dtype, shape and device in tests/e2e/dump_locals.sh): THPVariable holds a
 * c10::MaybeOwned<at::Tensor> after the object header (isBorrowed_, then the TensorImpl
 * pointer or, borrowed, a pointer to an at::Tensor); TensorImpl keeps sizes_and_strides_
 * (ndim, then five inline sizes or a pointer to them), the dtype's TypeMeta index (the
 * ScalarType) and an optional<Device> (engaged, type, index). */
#define THP_BORROWED 16
#define THP_TENSOR 24
#define TI_NDIM 72
#define TI_SIZES 80
#define TI_DTYPE 176
#define TI_DEVICE 178
#define TI_INLINE 5
#define TI_MAXDIM 64

static const char *const dtypes[] = {
    "uint8",     "int8",      "int16",      "int32", "int64", "float16", "float32", "float64",
    "complex32", "complex64", "complex128", "bool",  "qint8", "quint8",  "qint32",  "bfloat16"};

/* Whether the target's torch is one whose layout is known: torch.__version__ starts "1.13.". */
static bool torch_known(struct pyrepr *r)
{
    uint64_t v;
    char *s;
    int st;

    if (r->torch_checked)
        return r->torch_ok;
    r->torch_checked = true;
    if (!r->nw_ok || !r->interp ||
        pynames_module_get(&r->nw, r->interp, "torch", "__version__", &v) < 0 ||
        !(s = pystr_read(r->m, r->L, v, &st)))
        return false;
    snprintf(r->torch_version, sizeof(r->torch_version), "%s", s);
    r->torch_ok = !strncmp(s, "1.13.", 5);
    free(s);
    return r->torch_ok;
}

static void device_name(const uint8_t *d, struct sb *o)
{
    static const char *const types[] = {
        [0] = "cpu", [1] = "cuda", [13] = "mps", [14] = "meta", [12] = "xpu"};
    int type = (int8_t)d[1], index = (int8_t)d[2];
    const char *n = type >= 0 && type < 15 ? types[type] : NULL;

    if (n)
        sb_puts(o, n);
    else
        sb_printf(o, "device type %d", type);
    if (index >= 0)
        sb_printf(o, ":%d", index);
}

static int render_tensor(struct pyrepr *r, uint64_t obj, const char *tn, struct sb *o)
{
    uint8_t h[THP_TENSOR + 8], ti[TI_DEVICE + 4];
    int64_t sizes[TI_MAXDIM];
    uint64_t impl, ndim;
    int st;

    if (!torch_known(r)) {
        sb_printf(o, "<%s at 0x%llx: dtype and shape not read (torch %s: layout not verified)>", tn,
                  (unsigned long long)obj, r->torch_version[0] ? r->torch_version : "?");
        return 0;
    }
    if ((st = rmem_read(r->m, obj, h, sizeof(h))) < 0)
        return st;
    impl = bytes_load_u64(h + THP_TENSOR);
    if (h[THP_BORROWED] > 1 || (h[THP_BORROWED] && (st = rmem_read(r->m, impl, &impl, 8)) < 0))
        return st < 0 ? st : APP_E_STALE;
    if (!bytes_ptr_ok(impl) || (st = rmem_read(r->m, impl, ti, sizeof(ti))) < 0)
        return st < 0 ? st : APP_E_STALE;
    ndim = bytes_load_u64(ti + TI_NDIM);
    if (ndim > TI_MAXDIM || bytes_load_u16(ti + TI_DTYPE) >= sizeof(dtypes) / sizeof(*dtypes) ||
        ti[TI_DEVICE] > 1)
        return APP_E_STALE;
    if (ndim <= TI_INLINE)
        memcpy(sizes, ti + TI_SIZES, 8 * ndim);
    else if ((st = rmem_read(r->m, bytes_load_u64(ti + TI_SIZES), sizes, 8 * ndim)) < 0)
        return st;
    sb_printf(o, "%s(dtype=torch.%s, shape=(", tn, dtypes[bytes_load_u16(ti + TI_DTYPE)]);
    for (uint64_t i = 0; i < ndim; i++) {
        if (sizes[i] < 0)
            return APP_E_STALE;
        sb_printf(o, "%s%lld", i ? ", " : "", (long long)sizes[i]);
    }
    sb_puts(o, ndim == 1 ? ",), device=" : "), device=");
    if (ti[TI_DEVICE])
        device_name(ti + TI_DEVICE, o);
    else
        sb_puts(o, "?");
    sb_puts(o, ")");
    return 0;
}

/* --- dispatch --------------------------------------------------------------------------- */

static int render(struct pyrepr *r, uint64_t obj, int depth, struct sb *o, char *tn, size_t tl)
{
    uint64_t flags;
    int st = pyrepr_type(r, obj, tn, tl, &flags);

    if (st < 0)
        return st;
    if ((flags & PYABI_TPF_HEAPTYPE) && (!strcmp(tn, "Tensor") || !strcmp(tn, "Parameter")))
        return render_tensor(r, obj, tn, o);
    if (flags & PYABI_TPF_HEAPTYPE) {
        sb_printf(o, "<%s object at 0x%llx>", tn, (unsigned long long)obj);
        return 0;
    }
    if (!strcmp(tn, "NoneType"))
        return sb_puts(o, "None"), 0;
    if (!strcmp(tn, "bool") || !strcmp(tn, "int"))
        return render_long(r, obj, o, tn[0] == 'b');
    if (!strcmp(tn, "float")) {
        double v;
        if ((st = rmem_read(r->m, obj + FLOAT_VAL, &v, sizeof(v))) < 0)
            return st;
        float_repr(v, o);
        return 0;
    }
    if (!strcmp(tn, "str"))
        return render_str(r, obj, o);
    if (!strcmp(tn, "bytes"))
        return render_bytes(r, obj, o);
    if (!strcmp(tn, "tuple") || !strcmp(tn, "list"))
        return render_seq(r, obj, tn[0] == 't', depth, o);
    if (!strcmp(tn, "dict"))
        return render_dict(r, obj, depth, o);
    if (!strcmp(tn, "set") || !strcmp(tn, "frozenset"))
        return render_set(r, obj, tn[0] == 'f', depth, o);
    sb_printf(o, "<%s object at 0x%llx>", tn, (unsigned long long)obj);
    return 0;
}

int pyrepr_value(struct pyrepr *r, uint64_t obj, char **type, char **repr)
{
    struct sb o = {.n = 0};
    char tn[NAME_MAX_LEN];
    int st;

    o.b[0] = 0;
    st = render(r, obj, 0, &o, tn, sizeof(tn));
    if (st < 0) {
        *type = x_strdup("?");
        *repr = x_strdup(st == APP_E_STALE ? "<unreadable: changed or invalid while read>"
                                           : "<unreadable>");
        return st;
    }
    if (o.full) /* the buffer has room beyond PYREPR_MAX for the mark */
        memcpy(o.b + o.n, "...", 4);
    *type = x_strdup(tn);
    *repr = x_strdup(o.b);
    return 0;
}
