/* Memory images of CPythons that are not installed here, laid out from CPython's published
 * headers, shared by the image tests (check_pyimage_layouts.c: stacks; check_pyasync_layouts.c:
 * asyncio tasks): 3.15 (its release _Py_DebugOffsets shape and the shape of its earlier
 * alphas), the free-threaded builds 3.13t, 3.14t and 3.15t (32-byte object headers, so every
 * object field moves; 3.14t+ frames run per-thread bytecode copies; no GIL).
 *
 * Each image's _Py_DebugOffsets is written from the field order of the header (a list per
 * shape below, slot i at byte 24 + 8 i), independently of the reader's own slot tables, which
 * the tests therefore check. The struct offsets the slots carry are those of the 3.14 headers
 * where the headers fix them (object headers, code object tail, unicode state bits, frames,
 * generators) and plausible made-up values elsewhere (thread and interpreter state fields),
 * some moved on purpose so that a reader using constants instead of the target's values would
 * fail. The image holds a runtime, an interpreter, two threads, data-stack chunks, a generator
 * frame, an interpreter-owned frame to skip, entry frames, code objects with ASCII and UCS-2
 * names and real 3.11+ location tables. */
#ifndef RANKTOP_TESTS_PYIMAGE_LAYOUTS_H
#define RANKTOP_TESTS_PYIMAGE_LAYOUTS_H

#include "pyproc_priv.h"
#include "ranktop/proc/rmem.h"

#include <stdbool.h>
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
    TLBC = 0xA00000,   /* free-threaded: each code's _PyCodeArray at +0, thread copy at +0x100 */
};

/* The tables are laid out by hand, one struct group per line. */
// clang-format off

/* _Py_DebugOffsets fields, in the names of the header; X: a field the image leaves 0. */
enum f {
    X,
    RT_SIZE, RT_FIN, RT_HEAD,
    IS_SIZE, IS_ID, IS_NEXT, IS_HEAD, IS_MAIN, IS_GC, IS_MODULES, IS_GILP, IS_GIL, IS_LOCKED,
    IS_HOLDER, IS_CODEGEN,
    TS_SIZE, TS_NEXT, TS_INTERP, TS_FRAME, TS_TID, TS_NATIVE, TS_CHUNK, TS_STATUS, TS_HOLDS,
    FR_SIZE, FR_PREV, FR_EXEC, FR_INSTR, FR_OWNER, FR_TLBC,
    CO_SIZE, CO_FILE, CO_NAME, CO_QUAL, CO_TABLE, CO_FIRST, CO_ADAPT, CO_TLBC,
    OB_SIZE, OB_TYPE, TP_FLAGS, TP_BASIC, TP_DICTOFF, HT_KEYS,
    BY_SIZE, BY_OBSIZE, BY_SVAL, STR_SIZE, STR_STATE, STR_LEN, STR_ASCII, GC_SIZE, GC_COLL,
    EVAL_BREAKER, FR_LP, FR_SP, GEN_SIZE, GEN_NAME, GEN_IFRAME, GEN_STATE,
    NF
};

#define SHAPE_MAX 128

/* Field order after `free_threaded`, from Include/internal/pycore_debug_offsets.h. */
static const uint8_t shape_313[SHAPE_MAX] = {
    RT_SIZE, RT_FIN, RT_HEAD,
    IS_SIZE, IS_ID, IS_NEXT, IS_HEAD, IS_GC, IS_MODULES, X, X, IS_GILP, IS_GIL, X, IS_LOCKED,
    IS_HOLDER,
    TS_SIZE, X, TS_NEXT, TS_INTERP, TS_FRAME, TS_TID, TS_NATIVE, TS_CHUNK, TS_STATUS,
    FR_SIZE, FR_PREV, FR_EXEC, FR_INSTR, X, FR_OWNER,
    CO_SIZE, CO_FILE, CO_NAME, CO_QUAL, CO_TABLE, CO_FIRST, X, X, X, CO_ADAPT,
    OB_SIZE, OB_TYPE, X, X, X, TP_FLAGS,
    X, X, X, X, X, X, X, X, X, X, X, X, X, X, /* tuple, list, dict, float, long */
    BY_SIZE, BY_OBSIZE, BY_SVAL, STR_SIZE, STR_STATE, STR_LEN, STR_ASCII};

static const uint8_t shape_314[SHAPE_MAX] = {
    RT_SIZE, RT_FIN, RT_HEAD,
    IS_SIZE, IS_ID, IS_NEXT, IS_HEAD, IS_MAIN, IS_GC, IS_MODULES, X, X, IS_GILP, IS_GIL, X,
    IS_LOCKED, IS_HOLDER, IS_CODEGEN, X,
    TS_SIZE, X, TS_NEXT, TS_INTERP, TS_FRAME, TS_TID, TS_NATIVE, TS_CHUNK, TS_STATUS,
    FR_SIZE, FR_PREV, FR_EXEC, FR_INSTR, FR_LP, FR_OWNER, FR_SP, FR_TLBC,
    CO_SIZE, CO_FILE, CO_NAME, CO_QUAL, CO_TABLE, CO_FIRST, X, X, X, CO_ADAPT, CO_TLBC,
    OB_SIZE, OB_TYPE, X, X, X, TP_FLAGS,
    X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, /* tuple, list, set, dict, float, long */
    BY_SIZE, BY_OBSIZE, BY_SVAL, STR_SIZE, STR_STATE, STR_LEN, STR_ASCII,
    GC_SIZE, GC_COLL, GEN_SIZE, GEN_NAME, GEN_IFRAME, GEN_STATE};

/* 3.15 as released: thread_state base_frame, last_profiled_frame(_seq), holds_gil,
 * gil_requested, current_exception, exc_state; err_stackitem; type_object tp_basicsize,
 * tp_dictoffset; heap_type_object. */
static const uint8_t shape_315[SHAPE_MAX] = {
    RT_SIZE, RT_FIN, RT_HEAD,
    IS_SIZE, IS_ID, IS_NEXT, IS_HEAD, IS_MAIN, IS_GC, IS_MODULES, X, X, IS_GILP, IS_GIL, X,
    IS_LOCKED, IS_HOLDER, IS_CODEGEN, X,
    TS_SIZE, X, TS_NEXT, TS_INTERP, TS_FRAME, X, X, X, TS_TID, TS_NATIVE, TS_CHUNK, TS_STATUS,
    TS_HOLDS, X, X, X,
    X, /* err_stackitem */
    FR_SIZE, FR_PREV, FR_EXEC, FR_INSTR, FR_LP, FR_OWNER, FR_SP, FR_TLBC,
    CO_SIZE, CO_FILE, CO_NAME, CO_QUAL, CO_TABLE, CO_FIRST, X, X, X, CO_ADAPT, CO_TLBC,
    OB_SIZE, OB_TYPE, X, X, X, TP_FLAGS, TP_BASIC, TP_DICTOFF, X, HT_KEYS,
    X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, /* tuple, list, set, dict, float, long */
    BY_SIZE, BY_OBSIZE, BY_SVAL, STR_SIZE, STR_STATE, STR_LEN, STR_ASCII, X,
    GC_SIZE, GC_COLL, X, X, X, /* gc: frame, generation_stats_size, generation_stats */
    GEN_SIZE, GEN_NAME, GEN_IFRAME, GEN_STATE, X, X, /* gen_object, llist_node */
    EVAL_BREAKER};

/* 3.15's earlier alphas: no last_profiled_frame_seq, no tp_basicsize/tp_dictoffset, no
 * heap_type_object. */
static const uint8_t shape_315a[SHAPE_MAX] = {
    RT_SIZE, RT_FIN, RT_HEAD,
    IS_SIZE, IS_ID, IS_NEXT, IS_HEAD, IS_MAIN, IS_GC, IS_MODULES, X, X, IS_GILP, IS_GIL, X,
    IS_LOCKED, IS_HOLDER, IS_CODEGEN, X,
    TS_SIZE, X, TS_NEXT, TS_INTERP, TS_FRAME, X, X, TS_TID, TS_NATIVE, TS_CHUNK, TS_STATUS,
    TS_HOLDS, X, X, X,
    X, /* err_stackitem */
    FR_SIZE, FR_PREV, FR_EXEC, FR_INSTR, FR_LP, FR_OWNER, FR_SP, FR_TLBC,
    CO_SIZE, CO_FILE, CO_NAME, CO_QUAL, CO_TABLE, CO_FIRST, X, X, X, CO_ADAPT, CO_TLBC,
    OB_SIZE, OB_TYPE, X, X, X, TP_FLAGS,
    X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, /* tuple, list, set, dict, float, long */
    BY_SIZE, BY_OBSIZE, BY_SVAL, STR_SIZE, STR_STATE, STR_LEN, STR_ASCII,
    GC_SIZE, GC_COLL, X, /* gc: frame */
    GEN_SIZE, GEN_NAME, GEN_IFRAME, GEN_STATE, X, X, /* gen_object, llist_node */
    EVAL_BREAKER};

/* One target: version, build, shape and the struct offsets its _Py_DebugOffsets carries. */
struct target {
    uint32_t version;
    bool ft;
    const uint8_t *shape;
    uint64_t v[NF];
    int holds_gil_int;  /* 3.14: holds_gil, an int at this tstate offset (not exported) */
    int back;           /* _co_firsttraceable lies this far before co_code_adaptive */
    bool tagged;        /* f_executable is a _PyStackRef (3.14+) */
    unsigned str_shift; /* 8: free-threaded 3.14+, `interned` is a byte of its own */
};

/* Values shared by the targets below: the runtime, interpreter and thread-state fields. */
#define COMMON_VALUES                                                                         \
    [RT_SIZE] = 1 << 20, [RT_FIN] = 1000, [RT_HEAD] = 1008, [IS_SIZE] = 225808, [IS_ID] = 7280, \
    [IS_NEXT] = 7272, [IS_HEAD] = 7344, [IS_GC] = 7400, [IS_MODULES] = 7664, [IS_GILP] = 16,    \
    [IS_GIL] = 7760, [IS_LOCKED] = 7776, [IS_HOLDER] = 7768, [IS_CODEGEN] = 7968,              \
    [TS_SIZE] = 400, [TS_NEXT] = 8, [TS_INTERP] = 16, [TS_FRAME] = 72, [TS_CHUNK] = 232,        \
    [TS_STATUS] = 32, [HT_KEYS] = 896, [GC_SIZE] = 400, [GC_COLL] = 8, [EVAL_BREAKER] = 24,     \
    [FR_LP] = 80, [FR_SP] = 64
/* Where threads.main, the thread ids and the type offsets are, unless a target says else. */
#define USUAL_VALUES [IS_MAIN] = 7360, [TS_TID] = 152, [TS_NATIVE] = 160

/* GIL builds: 16-byte object headers. 3.14/3.15 code objects end _co_firsttraceable (192),
 * co_extra, co_code_adaptive (208); frames put owner at 74. */
#define GIL_OBJECTS                                                                            \
    [OB_SIZE] = 16, [OB_TYPE] = 8, [CO_FILE] = 112, [CO_NAME] = 120, [CO_QUAL] = 128,           \
    [CO_TABLE] = 136, [CO_FIRST] = 68, [BY_OBSIZE] = 16, [BY_SVAL] = 32, [STR_STATE] = 32,      \
    [STR_LEN] = 16, [STR_ASCII] = 40, [TP_FLAGS] = 168, [TP_BASIC] = 32, [TP_DICTOFF] = 288,  \
    [STR_SIZE] = 64, [BY_SIZE] = 40, [GEN_SIZE] = 160, [GEN_NAME] = 24, [GEN_IFRAME] = 72,      \
    [GEN_STATE] = 67
/* Free-threaded builds: ob_tid, ob_flags, ob_mutex, ob_gc_bits, ob_ref_local, ob_ref_shared
 * before ob_type: every object field 16 bytes further. */
#define FT_OBJECTS                                                                             \
    [OB_SIZE] = 32, [OB_TYPE] = 24, [CO_FILE] = 128, [CO_NAME] = 136, [CO_QUAL] = 144,          \
    [CO_TABLE] = 152, [CO_FIRST] = 84, [BY_OBSIZE] = 32, [BY_SVAL] = 48, [STR_STATE] = 48,      \
    [STR_LEN] = 32, [STR_ASCII] = 56, [TP_FLAGS] = 184, [TP_BASIC] = 48, [TP_DICTOFF] = 304,  \
    [STR_SIZE] = 80, [BY_SIZE] = 56, [GEN_SIZE] = 176, [GEN_NAME] = 40, [GEN_IFRAME] = 88,      \
    [GEN_STATE] = 83

static const struct target t3150 = {
    0x030f00f0, false, shape_315,
    {COMMON_VALUES, USUAL_VALUES, GIL_OBJECTS, [TS_HOLDS] = 44, [FR_SIZE] = 88, [FR_PREV] = 8, [FR_EXEC] = 0,
     [FR_INSTR] = 56, [FR_OWNER] = 74, [CO_SIZE] = 216, [CO_ADAPT] = 208},
    0, 16, true, 0};
/* An alpha with the earlier shape, and its thread states' fields elsewhere. */
static const struct target t315a = {
    0x030f00a3, false, shape_315a,
    {COMMON_VALUES, GIL_OBJECTS, [IS_MAIN] = 7360, [TS_HOLDS] = 40, [TS_TID] = 144,
     [TS_NATIVE] = 168,
     [FR_SIZE] = 88, [FR_PREV] = 8, [FR_EXEC] = 0, [FR_INSTR] = 56, [FR_OWNER] = 74,
     [CO_SIZE] = 216, [CO_ADAPT] = 208},
    0, 16, true, 0};
/* 3.14t: frames add tlbc_index (72; owner at 78), code objects co_tlbc (224) before
 * co_code_adaptive (232). */
static const struct target t3140t = {
    0x030e00f0, true, shape_314,
    {COMMON_VALUES, USUAL_VALUES, FT_OBJECTS, [FR_SIZE] = 88, [FR_PREV] = 8, [FR_EXEC] = 0, [FR_INSTR] = 56,
     [FR_OWNER] = 78, [FR_TLBC] = 72, [CO_SIZE] = 240, [CO_ADAPT] = 232, [CO_TLBC] = 224},
    0, 24, true, 8};
static const struct target t3150t = {
    0x030f00f0, true, shape_315,
    {COMMON_VALUES, USUAL_VALUES, FT_OBJECTS, [TS_HOLDS] = 44, [FR_SIZE] = 88, [FR_PREV] = 8, [FR_EXEC] = 0,
     [FR_INSTR] = 56, [FR_OWNER] = 78, [FR_TLBC] = 72, [CO_SIZE] = 240, [CO_ADAPT] = 232,
     [CO_TLBC] = 224},
    0, 24, true, 8};
/* 3.13t: no thread-local bytecode, untagged f_executable, 3.13 frames (owner at 70), the
 * GIL build's state bits; threads.main follows threads.head (not exported). */
static const struct target t3130t = {
    0x030d00f0, true, shape_313,
    {COMMON_VALUES, FT_OBJECTS, [IS_MAIN] = 7352, [TS_TID] = 152, [TS_NATIVE] = 160,
     [FR_SIZE] = 80, [FR_PREV] = 8, [FR_EXEC] = 0,
     [FR_INSTR] = 56, [FR_OWNER] = 70, [CO_SIZE] = 224, [CO_ADAPT] = 216},
    0, 16, false, 0};

// clang-format on

struct img {
    const struct target *t;
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

static inline uint64_t V(const struct img *im, enum f f)
{
    return im->t->v[f];
}

static inline void put_debug_offsets(uint8_t *rt, const struct target *t, uint32_t version)
{
    memcpy(rt, "xdebugpy", 8);
    put64(rt, 8, version);
    put64(rt, 16, t->ft);
    for (int i = 0; i < SHAPE_MAX; i++)
        if (t->shape[i] != X)
            put64(rt, 24 + 8 * (size_t)i, t->v[t->shape[i]]);
}

/* A compact str object: ASCII (kind 1) or UCS-2 (kind 2) from UTF-16 units, interned. */
static inline uint64_t add_str(struct img *im, const uint16_t *u, size_t n, int kind)
{
    uint8_t obj[256] = {0};
    uint64_t at = im->next_str;
    size_t data = kind == 1 ? V(im, STR_ASCII) : V(im, STR_ASCII) + 16;
    uint32_t bits = (uint32_t)(kind << 2 | 1 << 5 | (kind == 1) << 6);

    put64(obj, V(im, STR_LEN), n);
    put32(obj, V(im, STR_STATE), im->t->str_shift ? bits << 6 | 2 : bits | 1);
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
 * ("one-line form", code 11): byte offset q is on line firstlineno + q / 16 + 1. Free-
 * threaded 3.14+: a _PyCodeArray of two copies, the second (thread 2's) at TLBC + 0x100. */
static inline uint64_t add_code(struct img *im, int idx, uint64_t name, uint64_t qual,
                                uint64_t file, int firstlineno)
{
    uint8_t code[512] = {0}, bytes[128] = {0}, arr[24] = {0};
    uint64_t at = CODES + (uint64_t)idx * 0x1000, table = at + 0x800;
    uint64_t tl = TLBC + (uint64_t)idx * 0x1000;
    size_t adapt = V(im, CO_ADAPT);

    put64(code, V(im, OB_TYPE), PYCODE_TYPE);
    put32(code, V(im, CO_FIRST), (uint32_t)firstlineno);
    put64(code, V(im, CO_FILE), file);
    put64(code, V(im, CO_NAME), name);
    put64(code, V(im, CO_QUAL), qual);
    put64(code, V(im, CO_TABLE), table);
    put32(code, adapt - (size_t)im->t->back, 0); /* _co_firsttraceable */
    if (V(im, CO_TLBC)) {
        put64(code, V(im, CO_TLBC), tl);
        put64(arr, 0, 2);
        put64(arr, 8, at + adapt);
        put64(arr, 16, tl + 0x100);
        rmem_image_add(im->m, tl, arr, sizeof(arr));
    }
    put64(bytes, V(im, BY_OBSIZE), 24);
    for (int i = 0; i < 8; i++) {
        bytes[V(im, BY_SVAL) + 3 * (size_t)i] = 0xDF;
        bytes[V(im, BY_SVAL) + 3 * (size_t)i + 1] = 0;
        bytes[V(im, BY_SVAL) + 3 * (size_t)i + 2] = 1;
    }
    rmem_image_add(im->m, at, code, sizeof(code));
    rmem_image_add(im->m, table, bytes, sizeof(bytes));
    return at;
}

/* A frame at offset q of its code's bytecode: the shared copy, or (thread_copy, free-threaded
 * 3.14+) the thread's own copy, tlbc_index 1. */
static inline void put_frame(const struct img *im, uint8_t *f, uint64_t code, uint64_t prev, long q,
                             int owner, bool thread_copy)
{
    uint64_t base = code + V(im, CO_ADAPT);

    if (thread_copy && V(im, FR_TLBC)) {
        base = TLBC + (code - CODES) + 0x100;
        put32(f, V(im, FR_TLBC), 1);
    }
    put64(f, V(im, FR_EXEC), im->t->tagged ? code | 1 : code);
    put64(f, V(im, FR_PREV), prev);
    put64(f, V(im, FR_INSTR), code ? base + (uint64_t)q : 0);
    f[V(im, FR_OWNER)] = (uint8_t)owner;
}

static inline void put_tstate(struct img *im, uint8_t *ts, uint64_t next, uint64_t frame,
                              uint64_t ident, int tid, uint64_t chunk, int nframes, bool holds)
{
    put64(ts, V(im, TS_NEXT), next);
    put64(ts, V(im, TS_INTERP), INTERP);
    put64(ts, V(im, TS_FRAME), frame);
    put64(ts, V(im, TS_TID), ident);
    put32(ts, V(im, TS_NATIVE), (uint32_t)tid);
    put64(ts, V(im, TS_CHUNK), chunk);
    put64(ts, V(im, TS_CHUNK) + 8, chunk + 32 + (uint64_t)nframes * V(im, FR_SIZE));
    put64(ts, V(im, EVAL_BREAKER), holds); /* bit 0: the GIL drop request, for its holder */
    if (!im->t->ft && V(im, TS_HOLDS))
        put32(ts, V(im, TS_HOLDS), holds);
    else if (!im->t->ft)
        put32(ts, V(im, TS_STATUS), holds ? 1u << 5 : 0);
}

static inline void build(struct img *im)
{
    static const uint16_t hanzi[] = {0x51FD, 0x6570}; /* 函数 */
    uint64_t file = add_ascii(im, "/job/train.py");
    uint64_t c_mod = add_code(im, 0, add_ascii(im, "<module>"), add_ascii(im, "<module>"), file, 1);
    uint64_t c_inner = add_code(im, 1, add_ascii(im, "inner"), add_ascii(im, "inner"), file, 20);
    uint64_t c_step =
        add_code(im, 2, add_ascii(im, "step"), add_ascii(im, "Trainer.step"), file, 40);
    uint64_t c_gen = add_code(im, 3, add_str(im, hanzi, 2, 2), add_str(im, hanzi, 2, 2), file, 60);
    uint64_t c_work = add_code(im, 4, add_ascii(im, "worker"), add_ascii(im, "worker"), file, 80);
    uint64_t fs = V(im, FR_SIZE),
             f1 = CHUNK1 + 32; /* data[1]: data[0] of a root chunk is skipped */

    put_debug_offsets(im->rt, im->t, im->t->version);
    put64(im->rt, V(im, RT_HEAD), INTERP);
    put64(im->interp, V(im, IS_HEAD), TS2);
    put64(im->interp, V(im, IS_MAIN), TS1);
    put64(im->interp, V(im, IS_GILP), INTERP + V(im, IS_GIL));
    put32(im->interp, V(im, IS_LOCKED), 1);
    put64(im->interp, V(im, IS_HOLDER), TS2);
    put64(im->interp, V(im, IS_LOCKED) + 8, 41); /* switch_number */
    put32(im->interp, V(im, IS_GC) + V(im, GC_COLL), 1);
    put64(im->chunk1, 8, 16384);
    put_frame(im, im->cstack, 0x10, 0, 0, 3, false);
    put_frame(im, im->cstack + fs, 0x10, 0, 0, 3, false);
    put_frame(im, im->chunk1 + 32, c_mod, CSTACK, 48, 0, false);
    put_frame(im, im->chunk1 + 32 + fs, 0x10, f1, 0, 3, false); /* interpreter-owned: skipped */
    put_frame(im, im->chunk1 + 32 + 2 * fs, c_inner, f1 + fs, 0, 0, false);
    put_frame(im, im->chunk1 + 32 + 3 * fs, c_step, f1 + 2 * fs, 32, 0, false);
    put_tstate(im, im->ts1, 0, f1 + 3 * fs, 0x7f0000001000, 1001, CHUNK1, 4, false);
    put64(im->chunk2, 8, 16384);
    put_frame(im, im->chunk2 + 32, c_work, CSTACK + fs, 0, 0, true);
    put_frame(im, im->gen, c_gen, CHUNK2 + 32, 16, 1, true);
    put_tstate(im, im->ts2, TS1, GENF, 0x7f0000002000, 1002, CHUNK2, 1, true);
}

static inline struct img *img_new(const struct target *t)
{
    struct img *im = calloc(1, sizeof(*im));

    im->t = t;
    im->m = rmem_new_image();
    im->next_str = STRS;
    build(im);
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

/* Opens a reader over the image (which it then owns) as a target of PY_VERSION_HEX version. */
static inline struct pyproc *img_open(struct img *im, uint32_t version, int *rc,
                                      struct app_err *err)
{
    struct pyproc *p = NULL;

    *rc = pyproc_open_mem(im->m, 0, RUNTIME, PYCODE_TYPE, version, NULL, &p, err);
    im->m = NULL;
    return p;
}

#endif
