/* Protocol-buffers encoding into a fixed buffer (see export_pb.h): the wire format's varints
 * (7 bits a byte, low bits first, high bit = more), tags (field << 3 | wire type), 64-bit
 * little-endian doubles and length-delimited strings and messages.
 *
 * Invariants: b->len never passes b->cap; once b->full is set nothing more is written. A
 * nested message's length is always the shortest varint of its body's size. Runs on the
 * caller's thread; no state outside the buffer. */
#include "export_pb.h"

#include "ranktop/base/util.h"

#include <string.h>

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };

void pb_init(struct pbuf *b, uint8_t *p, size_t cap)
{
    b->p = p;
    b->len = 0;
    b->cap = cap;
    b->full = false;
}

size_t pb_varint_put(uint8_t *out, uint64_t v)
{
    size_t n = 0;

    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

size_t pb_varint_get(const uint8_t *in, size_t n, uint64_t *v)
{
    uint64_t x = 0;

    for (size_t i = 0; i < n && i < PB_VARINT_MAX; i++) {
        x |= (uint64_t)(in[i] & 0x7f) << (7 * i);
        if (!(in[i] & 0x80)) {
            *v = x;
            return i + 1;
        }
    }
    return 0;
}

/* True when n more bytes fit; otherwise marks the message incomplete. */
static bool room(struct pbuf *b, size_t n)
{
    if (!b->full && b->cap - b->len >= n)
        return true;
    b->full = true;
    return false;
}

static void put_varint(struct pbuf *b, uint64_t v)
{
    uint8_t tmp[PB_VARINT_MAX];
    size_t n;

    if (!b->full && b->cap - b->len >= PB_VARINT_MAX) { /* the common case: plenty of room */
        b->len += pb_varint_put(b->p + b->len, v);
        return;
    }
    n = pb_varint_put(tmp, v);

    if (room(b, n)) {
        memcpy(b->p + b->len, tmp, n);
        b->len += n;
    }
}

static void put_tag(struct pbuf *b, uint32_t field, unsigned wt)
{
    put_varint(b, (uint64_t)field << 3 | wt);
}

void pb_uint(struct pbuf *b, uint32_t field, uint64_t v)
{
    put_tag(b, field, WT_VARINT);
    put_varint(b, v);
}

void pb_int(struct pbuf *b, uint32_t field, int64_t v)
{
    /* int32 and int64 are two's complement in 64 bits: a negative value takes 10 bytes. */
    pb_uint(b, field, (uint64_t)v);
}

void pb_double(struct pbuf *b, uint32_t field, double v)
{
    uint64_t bits;

    memcpy(&bits, &v, sizeof(bits));
    put_tag(b, field, WT_I64);
    if (!room(b, 8))
        return;
    for (int i = 0; i < 8; i++)
        b->p[b->len++] = (uint8_t)(bits >> (8 * i));
}

void pb_bytes(struct pbuf *b, uint32_t field, const void *s, size_t n)
{
    put_tag(b, field, WT_LEN);
    put_varint(b, n);
    if (n && room(b, n)) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
    }
}

void pb_raw(struct pbuf *b, const void *p, size_t n)
{
    if (n && room(b, n)) {
        memcpy(b->p + b->len, p, n);
        b->len += n;
    }
}

/* Walks s as UTF-8 within max output bytes: returns the output size; with out, writes it. */
static size_t utf8_clean(const unsigned char *s, size_t max, uint8_t *out)
{
    size_t n = 0;

    while (*s) {
        size_t k = *s < 0x80 ? 1 : utf8_valid_len(s);
        const unsigned char *src = k ? s : (const unsigned char *)"\xEF\xBF\xBD";
        size_t w = k ? k : 3;

        if (n + w > max)
            break;
        if (out)
            memcpy(out + n, src, w);
        n += w;
        s += k ? k : 1;
    }
    return n;
}

void pb_str(struct pbuf *b, uint32_t field, const char *s, size_t max)
{
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    size_t n = utf8_clean(u, max, NULL);

    put_tag(b, field, WT_LEN);
    put_varint(b, n);
    if (n && room(b, n)) {
        utf8_clean(u, max, b->p + b->len);
        b->len += n;
    }
}

size_t pb_begin(struct pbuf *b, uint32_t field)
{
    size_t mark;

    put_tag(b, field, WT_LEN);
    mark = b->len;
    if (room(b, 1))
        b->p[b->len++] = 0;
    return mark;
}

void pb_end(struct pbuf *b, size_t mark)
{
    size_t body, k;
    uint8_t tmp[PB_VARINT_MAX];

    if (b->full)
        return;
    body = b->len - mark - 1;
    k = pb_varint_put(tmp, body);
    if (k > 1) {
        /* The body moves right to make room for a longer length. */
        if (!room(b, k - 1))
            return;
        memmove(b->p + mark + k, b->p + mark + 1, body);
        b->len += k - 1;
    }
    memcpy(b->p + mark, tmp, k);
}
