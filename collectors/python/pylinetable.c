/* Line-number decoders for CPython code objects: co_lnotab (3.8/3.9), the PEP 626
 * co_linetable (3.10) and the location table of 3.11+ (Objects/locations.md).
 *
 * Owns no state. Each decoder walks a caller-provided copy of the table, which may come from
 * a racing remote read and is therefore treated as hostile: no byte at or past `len` is read,
 * addresses and lines accumulate in int64_t, varints longer than PYLINE_VARINT_GROUPS groups
 * are rejected, and a running line that leaves the int range marks the table malformed. Only
 * the entries up to the one covering the query offset are decoded; if one of those is
 * malformed the result is 0. co_lnotab does not record the code length, so its last line
 * extends to every larger offset. Pure; callable from any thread. */
#include "pylinetable.h"

#include <limits.h>

/* 6 groups hold 36 bits: enough for any int CPython writes (write_varint takes an unsigned). */
#define PYLINE_VARINT_GROUPS 6

/* Location-table codes (Include/cpython/code.h, _PyCodeLocationInfoKind). */
enum loc_code {
    LOC_SHORT_MAX = 9, /* 0..9: short form, same line */
    LOC_ONE_LINE0 = 10,
    LOC_ONE_LINE2 = 12,
    LOC_NO_COLUMNS = 13,
    LOC_LONG = 14,
    LOC_NONE = 15,
};

/* 3.10 line delta meaning "no line for this range". */
#define LT310_NO_LINE (-128)

struct loc_reader {
    const uint8_t *t;
    size_t len;
    size_t pos;
};

struct loc_entry {
    int units;     /* code units covered, 1..8 */
    int64_t delta; /* line delta */
    int has_line;  /* 0 for the no-location form */
};

static int s8(uint8_t b)
{
    return b < 128 ? (int)b : (int)b - 256;
}

static int line_sane(int64_t line)
{
    return line >= INT_MIN && line <= INT_MAX;
}

/* Lines below 1 cannot come from a valid table; report them as "no line". */
static int line_result(int64_t line)
{
    return line > 0 && line <= INT_MAX ? (int)line : 0;
}

/* Objects/lnotab_notes.txt (3.8): pairs (address increment, signed line increment). */
static int lookup_lnotab(const uint8_t *t, size_t len, int firstlineno, long offset)
{
    int64_t addr = 0, line = firstlineno;

    for (size_t i = 0; i < len; i += 2) {
        addr += t[i];
        if (addr > offset)
            break;
        /* The pair applies to this offset but its line byte was cut off. */
        if (i + 1 >= len)
            return 0;
        line += s8(t[i + 1]);
        if (!line_sane(line))
            return 0;
    }
    return line_result(line);
}

/* PEP 626: pairs (unsigned byte delta, signed line delta) over ranges [start, end). The
 * address advances for "no line" entries too (py-spy's decoder gets this wrong). */
static int lookup_linetable310(const uint8_t *t, size_t len, int firstlineno, long offset)
{
    int64_t end = 0, line = firstlineno;

    for (size_t i = 0; i + 1 < len; i += 2) {
        int ldelta = s8(t[i + 1]);

        end += t[i];
        if (ldelta != LT310_NO_LINE) {
            line += ldelta;
            if (!line_sane(line))
                return 0;
        }
        /* Ranges are contiguous from 0, so the first end past the offset covers it. */
        if (offset < end)
            return ldelta == LT310_NO_LINE ? 0 : line_result(line);
    }
    return 0;
}

/* Unsigned varint: 6-bit groups, least significant first, 0x40 = more follow. A byte with
 * bit 7 set starts the next entry and so cannot belong to a varint. */
static int read_varint(struct loc_reader *r, uint64_t *out)
{
    uint64_t v = 0;

    for (unsigned shift = 0; shift < 6 * PYLINE_VARINT_GROUPS; shift += 6) {
        uint8_t b;

        if (r->pos >= r->len)
            return -1;
        b = r->t[r->pos++];
        if (b & 0x80)
            return -1;
        v |= (uint64_t)(b & 0x3f) << shift;
        if (!(b & 0x40)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* Signed varint: the sign is bit 0 of the unsigned value. */
static int read_svarint(struct loc_reader *r, int64_t *out)
{
    uint64_t v;

    if (read_varint(r, &v) < 0)
        return -1;
    *out = (v & 1) ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
    return 0;
}

/* Column bytes of the short and one-line forms; they never have bit 7 set. */
static int skip_plain(struct loc_reader *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (r->pos >= r->len || (r->t[r->pos] & 0x80))
            return -1;
        r->pos++;
    }
    return 0;
}

/* Decodes the entry at r->pos and leaves r->pos on the next one. */
static int loc_entry_read(struct loc_reader *r, struct loc_entry *e)
{
    uint64_t unused;
    uint8_t first;
    int code;

    if (r->pos >= r->len || !(r->t[r->pos] & 0x80))
        return -1;
    first = r->t[r->pos++];
    code = (first >> 3) & 15;
    e->units = (first & 7) + 1;
    e->delta = 0;
    e->has_line = code != LOC_NONE;
    if (code <= LOC_SHORT_MAX)
        return skip_plain(r, 1);
    if (code <= LOC_ONE_LINE2) {
        e->delta = code - LOC_ONE_LINE0;
        return skip_plain(r, 2);
    }
    if (code == LOC_NONE)
        return 0;
    /* LOC_NO_COLUMNS and LOC_LONG start with the line delta; the long form then adds the
     * end-line delta, column + 1 and end column + 1. */
    if (read_svarint(r, &e->delta) < 0)
        return -1;
    for (int i = 0; code == LOC_LONG && i < 3; i++)
        if (read_varint(r, &unused) < 0)
            return -1;
    return 0;
}

/* Objects/locations.md (3.11+): entries cover 1..8 code units of 2 bytes, caches included. */
static int lookup_locations(const uint8_t *t, size_t len, int firstlineno, long offset)
{
    struct loc_reader r = {t, len, 0};
    int64_t end = 0, line = firstlineno;

    while (r.pos < len) {
        struct loc_entry e;

        if (loc_entry_read(&r, &e) < 0)
            return 0;
        end += 2 * e.units;
        line += e.delta;
        if (!line_sane(line))
            return 0;
        if (offset < end)
            return e.has_line ? line_result(line) : 0;
    }
    return 0;
}

int pyline_lookup(int minor, const uint8_t *table, size_t len, int firstlineno, long offset)
{
    if (minor < 8)
        return 0;
    if (offset < 0)
        return firstlineno > 0 ? firstlineno : 0;
    if (table == NULL)
        len = 0;
    if (minor <= 9)
        return lookup_lnotab(table, len, firstlineno, offset);
    if (minor == 10)
        return lookup_linetable310(table, len, firstlineno, offset);
    return lookup_locations(table, len, firstlineno, offset);
}
