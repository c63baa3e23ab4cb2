/* Python str/bytes decoding from remote memory.
 *
 * A str is read with one speculative copy of its header plus the first few hundred bytes;
 * only longer strings need a second read. The header is validated (kind 1/2/4, length capped,
 * compact flags) before any data is trusted, and the result is always valid UTF-8. Used by
 * the thread that owns the struct rmem. */
#include "pystr.h"

#include "ranktop/base/bytes.h"
#include "ranktop/base/util.h"

#include <stdlib.h>
#include <string.h>

#define PYSTR_SPECULATIVE 320

static uint32_t load_cp(const uint8_t *p, unsigned kind)
{
    if (kind == 1)
        return p[0];
    return kind == 2 ? bytes_load_u16(p) : bytes_load_u32(p);
}

static char *to_utf8(const uint8_t *data, int64_t n, unsigned kind, int cut)
{
    char *out = x_malloc((size_t)n * 4 + 4), *o = out;

    for (int64_t i = 0; i < n; i++)
        o += utf8_put(o, load_cp(data + i * kind, kind));
    if (cut) {
        memcpy(o, "...", 3);
        o += 3;
    }
    *o = '\0';
    return out;
}

/* Header fields of a str; returns 0 when plausible. *data_off is the data offset inside the
 * object, or 0 for a legacy (non-compact) string whose data pointer must be followed. */
static int str_header(const struct py_layout *L, const uint8_t *obj, int64_t *n, unsigned *kind,
                      size_t *data_off)
{
    uint32_t state;

    *n = (int64_t)bytes_load_u64(obj + L->str.length);
    state = bytes_load_u32(obj + L->str.state) >> L->str.state_shift;
    *kind = (state >> 2) & 7;
    if (*n < 0 || (*kind != 1 && *kind != 2 && *kind != 4))
        return -1;
    if (!((state >> 5) & 1))
        *data_off = 0;
    else if ((state >> 6) & 1)
        *data_off = L->str.ascii_size;
    else
        *data_off = L->str.compact_size;
    if (((state >> 6) & 1) && *kind != 1)
        return -1;
    return 0;
}

char *pystr_decode(const struct py_layout *L, const uint8_t *obj, size_t len, size_t *need)
{
    int64_t n;
    unsigned kind;
    size_t off, bytes;
    int cut = 0;

    *need = L->str.compact_size + 8;
    if (len < *need)
        return NULL;
    if (str_header(L, obj, &n, &kind, &off) < 0 || off == 0) {
        *need = 0;
        return NULL;
    }
    if (n > PYSTR_MAX_CHARS) {
        n = PYSTR_MAX_CHARS;
        cut = 1;
    }
    bytes = (size_t)n * kind;
    *need = off + bytes;
    if (len < *need)
        return NULL;
    return to_utf8(obj + off, n, kind, cut);
}

static char *legacy_read(struct rmem *m, const struct py_layout *L, const uint8_t *obj, int *status)
{
    int64_t n;
    unsigned kind;
    size_t off;
    uint64_t data;
    uint8_t *buf;
    char *s;
    int cut = 0;

    if (str_header(L, obj, &n, &kind, &off) < 0) {
        *status = APP_E_STALE;
        return NULL;
    }
    data = bytes_load_u64(obj + L->str.compact_size);
    if (n > PYSTR_MAX_CHARS) {
        n = PYSTR_MAX_CHARS;
        cut = 1;
    }
    buf = x_malloc((size_t)n * kind + 1);
    *status = rmem_read(m, data, buf, (size_t)n * kind);
    s = *status < 0 ? NULL : to_utf8(buf, n, kind, cut);
    free(buf);
    return s;
}

char *pystr_read(struct rmem *m, const struct py_layout *L, uint64_t addr, int *status)
{
    uint8_t small[PYSTR_SPECULATIVE];
    uint8_t *big;
    size_t need = 0;
    long got;
    char *s;

    *status = 0;
    got = rmem_read_some(m, addr, small, sizeof(small));
    if (got < 0) {
        *status = (int)got;
        return NULL;
    }
    s = pystr_decode(L, small, (size_t)got, &need);
    if (s)
        return s;
    if (need == 0 && (size_t)got >= L->str.compact_size + 8)
        return legacy_read(m, L, small, status);
    if (need <= (size_t)got || need > PYSTR_MAX_CHARS * 4 + 128) {
        *status = APP_E_STALE;
        return NULL;
    }
    big = x_malloc(need);
    *status = rmem_read(m, addr, big, need);
    s = *status < 0 ? NULL : pystr_decode(L, big, need, &need);
    if (!s && *status == 0)
        *status = APP_E_STALE;
    free(big);
    return s;
}

uint8_t *pybytes_read(struct rmem *m, const struct py_layout *L, uint64_t addr, size_t *len,
                      int *status)
{
    uint8_t head[PYSTR_SPECULATIVE], *out;
    int64_t n;
    long got;

    *len = 0;
    got = rmem_read_some(m, addr, head, sizeof(head));
    if (got < (long)(L->bytes.sval)) {
        *status = got < 0 ? (int)got : APP_E_STALE;
        return NULL;
    }
    n = (int64_t)bytes_load_u64(head + L->bytes.size);
    if (n < 0 || n > (int64_t)PYBYTES_MAX) {
        *status = APP_E_STALE;
        return NULL;
    }
    out = x_malloc((size_t)n + 1);
    if ((size_t)got >= L->bytes.sval + (size_t)n) {
        memcpy(out, head + L->bytes.sval, (size_t)n);
        *status = 0;
    } else {
        *status = rmem_read(m, addr + L->bytes.sval, out, (size_t)n);
    }
    if (*status < 0) {
        free(out);
        return NULL;
    }
    *len = (size_t)n;
    return out;
}
