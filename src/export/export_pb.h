/* A small protocol-buffers encoder for one message at a time (export_perfetto.c): varints,
 * length-delimited fields, nested messages, into a fixed-size buffer.
 *
 * The buffer never grows: a write that does not fit sets `full` and is dropped, and every
 * later write is dropped too, so a caller checks `full` once, after the message. Nested
 * messages reserve one length byte and move their body when the length needs more, which
 * keeps every length in its shortest form. Everything here works on one caller's stack. */
#ifndef RANKTOP_EXPORT_PB_H
#define RANKTOP_EXPORT_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PB_VARINT_MAX 10 /* bytes of the longest varint (a 64-bit value) */

struct pbuf {
    uint8_t *p;
    size_t len, cap;
    bool full; /* a write did not fit: the message is incomplete */
};

/* An empty message in the caller's buffer p[0..cap). */
void pb_init(struct pbuf *b, uint8_t *p, size_t cap);

/* Writes v as a varint to out (at least PB_VARINT_MAX bytes); returns its length (1..10). */
size_t pb_varint_put(uint8_t *out, uint64_t v);

/* Reads a varint from in[0..n): *v gets it; returns the bytes read, or 0 when in ends first
 * or the varint is longer than 10 bytes. For tests and the decoder-free checks. */
size_t pb_varint_get(const uint8_t *in, size_t n, uint64_t *v);

/* Fields. Field numbers are 1..2^29-1; the wire type comes from the function. */
void pb_uint(struct pbuf *b, uint32_t field, uint64_t v); /* uint32/64, enum, bool */
void pb_int(struct pbuf *b, uint32_t field, int64_t v);   /* int32/int64 */
void pb_double(struct pbuf *b, uint32_t field, double v); /* double (fixed64) */
void pb_bytes(struct pbuf *b, uint32_t field, const void *s, size_t n);
/* A string field: s cut to at most max bytes at a character boundary, each invalid UTF-8 byte
 * replaced by U+FFFD (readers may refuse strings that are not UTF-8). NULL is "". */
void pb_str(struct pbuf *b, uint32_t field, const char *s, size_t max);

/* Bytes already encoded as fields (a cached run of them), appended as they are. */
void pb_raw(struct pbuf *b, const void *p, size_t n);

/* A nested message: pb_begin writes the tag and returns the mark that pb_end, called after
 * the body's fields, turns into the body's length. */
size_t pb_begin(struct pbuf *b, uint32_t field);
void pb_end(struct pbuf *b, size_t mark);

#endif
