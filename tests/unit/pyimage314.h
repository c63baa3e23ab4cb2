/* A memory image of a CPython 3.14 process (GIL build), shared by the image tests
 * (check_pyimage.c, check_pyasync.c): a runtime whose _Py_DebugOffsets follow the published
 * 3.14 field order, one interpreter with its GIL, two threads, data-stack chunks, a generator
 * frame, an interpreter-owned frame to skip, the entry frames each thread's chain ends on (on
 * the C stack), code objects with ASCII and UCS-2 names and real 3.11+ location tables. The
 * 3.14.0 and 3.14.5 variants differ in the values that moved between them. */
#ifndef RANKTOP_TESTS_PYIMAGE314_H
#define RANKTOP_TESTS_PYIMAGE314_H

#include "pyproc_priv.h"
#include "ranktop/proc/rmem.h"

#include <stdlib.h>
#include <string.h>

enum {
    RUNTIME = 0x100000,
    INTERP = 0x200000,
    TS1 = 0x300000,
    TS2 = 0x310000,
    CHUNK1 = 0x400000,
    CHUNK2 = 0x410000,
    CODES = 0x500000,
    PYCODE_TYPE = 0x600000,
    GENF = 0x700000,
    STRS = 0x800000,
    CSTACK = 0x900000, /* the threads' entry frames: owner 3, previous NULL */
};

/* The 3.14 values that differ between 3.14.0 and 3.14.5 (py-spy's generated bindings). */
struct variant {
    uint32_t version;
    uint64_t gil, locked, holder, code_gen, modules;
};

static const struct variant v3140 = {0x030e00f0, 7760, 7776, 7768, 7968, 7664};
static const struct variant v3145 = {0x030e05f0, 7784, 7800, 7792, 7992, 7688};

struct img {
    struct rmem *m;
    uint8_t rt[4096], interp[8192], ts1[1024], ts2[1024], chunk1[1024], chunk2[1024];
    uint8_t gen[256], cstack[256];
    uint64_t next_str;
};

static inline void put64(uint8_t *b, size_t off, uint64_t v)
{
    memcpy(b + off, &v, 8);
}

static inline void put32(uint8_t *b, size_t off, uint32_t v)
{
    memcpy(b + off, &v, 4);
}

/* _Py_DebugOffsets for 3.14 at byte offsets of the 3.14 shape. */
static inline void put_debug_offsets(uint8_t *rt, const struct variant *v)
{
    static const uint16_t off[] = {24,  32,  40,  48,  56,  64,  72,  80,  96,  120, 128,
                                   144, 152, 160, 176, 192, 200, 208, 216, 224, 232, 240,
                                   248, 256, 264, 272, 288, 312, 320, 328, 336, 344, 352,
                                   384, 400, 408, 592, 600, 608, 616, 624, 632, 640};
    const uint64_t val[] = {
        1 << 20,   784,       808,         225808, 7280, 7272, 7344, 7360, v->modules, 16,  v->gil,
        v->locked, v->holder, v->code_gen, 824,    8,    16,   72,   152,  160,        232, 32,
        88,        8,         0,           56,     74,   216,  112,  120,  128,        136, 68,
        208,       16,        8,           40,     16,   32,   64,   32,   16,         40};

    memcpy(rt, "xdebugpy", 8);
    put64(rt, 8, v->version);
    put64(rt, 16, 0);
    for (size_t i = 0; i < sizeof(off) / sizeof(*off); i++)
        put64(rt, off[i], val[i]);
}

/* A compact str object: ASCII (kind 1) or UCS-2 (kind 2) from UTF-16 units. */
static inline uint64_t add_str(struct img *im, const uint16_t *u, size_t n, int kind)
{
    uint8_t obj[256] = {0};
    uint64_t at = im->next_str;
    size_t data = kind == 1 ? 40 : 56;

    put64(obj, 16, n);
    put32(obj, 32, (uint32_t)(kind << 2 | 1 << 5 | (kind == 1) << 6));
    for (size_t i = 0; i < n; i++) {
        if (kind == 1)
            obj[data + i] = (uint8_t)u[i];
        else
            memcpy(obj + data + 2 * i, &u[i], 2);
    }
    rmem_image_add(im->m, at, obj, sizeof(obj));
    im->next_str += 0x1000;
    return at;
}

static inline uint64_t add_ascii(struct img *im, const char *s)
{
    uint16_t u[64];
    size_t n = strlen(s);

    for (size_t i = 0; i < n; i++)
        u[i] = (uint8_t)s[i];
    return add_str(im, u, n, 1);
}

/* A code object with a location table of 8 entries of 8 code units each, line deltas +1
 * ("one-line form", code 11): byte offset q is on line firstlineno + q / 16 + 1. */
static inline uint64_t add_code(struct img *im, int idx, uint64_t name, uint64_t qual,
                                uint64_t file, int firstlineno)
{
    uint8_t code[256] = {0}, bytes[64] = {0};
    uint64_t at = CODES + (uint64_t)idx * 0x1000, table = at + 0x800;

    put64(code, 8, PYCODE_TYPE);
    put32(code, 68, (uint32_t)firstlineno);
    put64(code, 112, file);
    put64(code, 120, name);
    put64(code, 128, qual);
    put64(code, 136, table);
    put32(code, 192, 0); /* _co_firsttraceable */
    put64(bytes, 16, 24);
    for (int i = 0; i < 8; i++) {
        bytes[32 + 3 * i] = 0xDF;
        bytes[33 + 3 * i] = 0;
        bytes[34 + 3 * i] = 1;
    }
    rmem_image_add(im->m, at, code, sizeof(code));
    rmem_image_add(im->m, table, bytes, sizeof(bytes));
    return at;
}

static inline void put_frame(uint8_t *f, uint64_t code, uint64_t prev, long q, int owner)
{
    put64(f, 0, code | 1); /* a _PyStackRef with the borrowed-reference tag */
    put64(f, 8, prev);
    put64(f, 56, code + 208 + (uint64_t)q);
    f[74] = (uint8_t)owner;
}

static inline void put_tstate(uint8_t *ts, uint64_t next, uint64_t frame, uint64_t ident, int tid,
                              uint64_t chunk, int nframes)
{
    put64(ts, 8, next);
    put64(ts, 16, INTERP);
    put64(ts, 72, frame);
    put64(ts, 152, ident);
    put32(ts, 160, (uint32_t)tid);
    put64(ts, 232, chunk);
    put64(ts, 240, chunk + 32 + (uint64_t)nframes * 88);
}

static inline void build(struct img *im, const struct variant *v)
{
    static const uint16_t hanzi[] = {0x51FD, 0x6570}; /* 函数 */
    uint64_t file = add_ascii(im, "/job/train.py");
    uint64_t c_mod = add_code(im, 0, add_ascii(im, "<module>"), add_ascii(im, "<module>"), file, 1);
    uint64_t c_inner = add_code(im, 1, add_ascii(im, "inner"), add_ascii(im, "inner"), file, 20);
    uint64_t c_step =
        add_code(im, 2, add_ascii(im, "step"), add_ascii(im, "Trainer.step"), file, 40);
    uint64_t c_gen = add_code(im, 3, add_str(im, hanzi, 2, 2), add_str(im, hanzi, 2, 2), file, 60);
    uint64_t c_work = add_code(im, 4, add_ascii(im, "worker"), add_ascii(im, "worker"), file, 80);
    uint64_t f1 = CHUNK1 + 32; /* data[1]: CPython skips data[0] of a root chunk */

    put_debug_offsets(im->rt, v);
    put64(im->rt, 808, INTERP);
    put64(im->interp, 7344, TS2);
    put64(im->interp, 7360, TS1);
    put64(im->interp, 16, INTERP + v->gil);
    put32(im->interp, (size_t)v->locked, 1);
    put64(im->interp, (size_t)v->holder, TS2);
    put64(im->chunk1, 8, 16384);
    put_frame(im->cstack, 0x10, 0, 0, 3);
    put_frame(im->cstack + 88, 0x10, 0, 0, 3);
    put_frame(im->chunk1 + 32, c_mod, CSTACK, 48, 0);
    put_frame(im->chunk1 + 32 + 88, 0x10, f1, 0, 3); /* interpreter-owned: skipped */
    put_frame(im->chunk1 + 32 + 176, c_inner, f1 + 88, 0, 0);
    put_frame(im->chunk1 + 32 + 264, c_step, f1 + 176, 32, 0);
    put_tstate(im->ts1, 0, f1 + 264, 0x7f0000001000, 1001, CHUNK1, 4);
    put64(im->chunk2, 8, 16384);
    put_frame(im->chunk2 + 32, c_work, CSTACK + 88, 0, 0);
    put_frame(im->gen, c_gen, CHUNK2 + 32, 16, 1);
    put_tstate(im->ts2, TS1, GENF, 0x7f0000002000, 1002, CHUNK2, 1);
}

static inline struct img *img_new(const struct variant *v)
{
    struct img *im = calloc(1, sizeof(*im));

    im->m = rmem_new_image();
    im->next_str = STRS;
    build(im, v);
    rmem_image_add(im->m, RUNTIME, im->rt, sizeof(im->rt));
    rmem_image_add(im->m, INTERP, im->interp, sizeof(im->interp));
    rmem_image_add(im->m, TS1, im->ts1, sizeof(im->ts1));
    rmem_image_add(im->m, TS2, im->ts2, sizeof(im->ts2));
    rmem_image_add(im->m, CHUNK1, im->chunk1, sizeof(im->chunk1));
    rmem_image_add(im->m, CHUNK2, im->chunk2, sizeof(im->chunk2));
    rmem_image_add(im->m, GENF, im->gen, sizeof(im->gen));
    rmem_image_add(im->m, CSTACK, im->cstack, sizeof(im->cstack));
    return im;
}

static inline struct pyproc *img_open(struct img *im, uint32_t version, int *rc,
                                      struct app_err *err)
{
    struct pyproc *p = NULL;

    *rc = pyproc_open_mem(im->m, 0, RUNTIME, PYCODE_TYPE, version, NULL, &p, err);
    im->m = NULL; /* owned by the reader now, or freed on failure */
    return p;
}

static inline void img_free(struct img *im)
{
    free(im);
}

#endif
