/* One descriptor per supported CPython minor version, and the lookup by minor.
 *
 * The compiled offsets of 3.8-3.13 come from offsetof() against each version's internal headers
 * and were checked by walking live interpreters; 3.14 and 3.15 exist here only as the slot
 * order of their _Py_DebugOffsets plus the parts that struct does not export (the thread-name
 * walk's dict and type offsets, the GIL drop request, the gc slots, where _co_firsttraceable
 * lies), read from CPython's headers (Include/internal/pycore_debug_offsets.h, cpython/code.h,
 * cpython/unicodeobject.h) and tested on memory images only. Free-threaded builds use the
 * same shapes (their _Py_DebugOffsets has the same slots; only the values differ). To support
 * a new minor, add its descriptor at the end of the table and raise PYABI_MAX_MINOR. Constant
 * data, any thread. */
#include "pyabi.h"

#define NONE PYABI_NONE

/* The tables are laid out by hand, one sub-struct per line, so that one minor reads as one
 * block; clang-format would put every field on its own line. */
// clang-format off

/* Objects whose layout only changed once in the supported range. */
#define STR_OLD {.length = 16, .state = 32, .ascii_size = 48, .compact_size = 72}
#define STR_NEW {.length = 16, .state = 32, .ascii_size = 40, .compact_size = 56}
#define BYTES {.size = 16, .sval = 32}
#define GIL_STRUCT .last_holder = 8, .locked = 16, .switch_number = 24, .cond = 32

/* 3.8-3.10: frames are heap PyFrameObjects chained by f_back; no native id, no chunks. */
#define IS_OLD(ID, MODULES) {.next = 0, .id = ID, .threads_head = 8, .modules = MODULES, \
                             .threads_main = NONE, .gil_ptr = NONE, .code_gen = NONE}
#define TS_OLD(SIZE) {.size = SIZE, .next = 8, .interp = 16, .thread_id = 176, \
                      .native_id = NONE, .frame = 24, .cframe = NONE, .datastack = NONE, \
                      .gil_flag_off = NONE}
#define FR_OLD(INSTR, UNITS, STATE, ENUM) {.object = true, .size = 120, .prev = 24, .code = 32, \
                              .instr = INSTR, .lasti_units = UNITS, .owner_gen = -1, \
                              .owner_skip = 256, .state = STATE, .entry = NONE, \
                              .state_enum = ENUM}
#define CO_OLD {.filename = 104, .name = 112, .linetable = 120, .firstlineno = 40, \
                .qualname = NONE, .code_adaptive = NONE, .firsttraceable = NONE, .read = 128}
#define NAMES_OLD(CACHED_KEYS) {.keys_nentries = 32, .values_ptr = NONE, .dict_ptr = NONE, \
                                .ht_cached_keys = CACHED_KEYS}

/* 3.12+: frames skip owners >= 3 (C stack shims); 3.13+: instance values may sit inline. */
#define FR_312 {.size = 80, .prev = 8, .code = 0, .instr = 56, .owner = 70, .owner_gen = 1, \
                .owner_skip = 3, .state = NONE, .entry = NONE}
#define NAMES_313 {.keys_new = true, .keys_nentries = 24, .values_ptr = NONE, .dict_ptr = -24, \
                   .inline_values = true, .values_off = 8, .ht_cached_keys = 880, \
                   .long_tag = true}

/* 3.13.0: verified against a live interpreter (values in cpython-remote.md section 1.7). It
 * has no slots for threads.main and the code object generation, which stay 0. 3.13t has no
 * thread-local bytecode and keeps the state bits where the GIL build has them. */
static const struct py_debug_shape debug_3_13 = {
    .rt_finalizing = 32, .rt_interp_head = 40,
    .is_size = 48, .is_id = 56, .is_next = 64, .is_threads_head = 72, .is_modules = 88,
    .is_gil_ptr = 112, .is_gil = 120, .is_gil_locked = 136, .is_gil_holder = 144,
    .ts_size = 152, .ts_next = 168, .ts_interp = 176, .ts_frame = 184, .ts_thread_id = 192,
    .ts_native_id = 200, .ts_datastack = 208, .ts_status = 216,
    .fr_size = 224, .fr_prev = 232, .fr_exec = 240, .fr_instr = 248, .fr_owner = 264,
    .co_size = 272, .co_filename = 280, .co_name = 288, .co_qualname = 296, .co_linetable = 304,
    .co_firstlineno = 312, .co_adaptive = 344,
    .ob_size = 352, .ob_type = 360,
    .str_size = 536, .str_state = 544, .str_length = 552, .str_ascii_size = 560,
    .bytes_size = 512, .bytes_ob_size = 520, .bytes_sval = 528,
    .co_firsttraceable_back = 16, .co_firsttraceable_back_ft = 16, .threads_main_rel = 8,
    .fr_owner_skip = 3};

/* 3.14: field order from the 3.14 headers (py-spy's generated 3.14.0 and 3.14.5 bindings
 * agree on it); several values move between 3.14.4 and 3.14.5, which is why they are read
 * from the target. tstate->holds_gil (an int at +36) and _co_firsttraceable are not in the
 * table: code.h puts it before co_extra (and, free-threaded, co_tlbc) and co_code_adaptive.
 * 3.14t: frames carry tlbc_index, code objects co_tlbc; `interned` is a byte of its own. */
static const struct py_debug_shape debug_3_14 = {
    .rt_finalizing = 32, .rt_interp_head = 40,
    .is_size = 48, .is_id = 56, .is_next = 64, .is_threads_head = 72, .is_threads_main = 80,
    .is_modules = 96, .is_gil_ptr = 120, .is_gil = 128, .is_gil_locked = 144,
    .is_gil_holder = 152, .is_code_gen = 160,
    .ts_size = 176, .ts_next = 192, .ts_interp = 200, .ts_frame = 208, .ts_thread_id = 216,
    .ts_native_id = 224, .ts_datastack = 232, .ts_status = 240,
    .fr_size = 248, .fr_prev = 256, .fr_exec = 264, .fr_instr = 272, .fr_owner = 288,
    .co_size = 312, .co_filename = 320, .co_name = 328, .co_qualname = 336, .co_linetable = 344,
    .co_firstlineno = 352, .co_adaptive = 384,
    .ob_size = 400, .ob_type = 408,
    .str_size = 616, .str_state = 624, .str_length = 632, .str_ascii_size = 640,
    .bytes_size = 592, .bytes_ob_size = 600, .bytes_sval = 608, .fr_tlbc = 304, .co_tlbc = 392,
    .co_firsttraceable_back = 16, .co_firsttraceable_back_ft = 24, .holds_gil_int = 36,
    .fr_owner_skip = 3, .fr_code_tagged = true, .str_shift_ft = 6};

/* 3.15 as released: the thread_state group grows base_frame, last_profiled_frame(_seq),
 * holds_gil, gil_requested and the exception fields (and an err_stackitem group follows it),
 * type_object exports tp_basicsize and tp_dictoffset, a heap_type_object group follows, unicode
 * adds the compact size, gc the generation stats. Owners: 3 is INTERPRETER, CSTACK is gone.
 * The code object's tail (_co_firsttraceable, co_extra, [co_tlbc], co_code_adaptive) is as in
 * 3.14. */
static const struct py_debug_shape debug_3_15 = {
    .rt_finalizing = 32, .rt_interp_head = 40,
    .is_size = 48, .is_id = 56, .is_next = 64, .is_threads_head = 72, .is_threads_main = 80,
    .is_gc = 88, .is_modules = 96, .is_gil_ptr = 120, .is_gil = 128, .is_gil_locked = 144,
    .is_gil_holder = 152, .is_code_gen = 160,
    .ts_size = 176, .ts_next = 192, .ts_interp = 200, .ts_frame = 208, .ts_thread_id = 240,
    .ts_native_id = 248, .ts_datastack = 256, .ts_status = 264, .ts_holds_gil = 272,
    .fr_size = 312, .fr_prev = 320, .fr_exec = 328, .fr_instr = 336, .fr_owner = 352,
    .fr_tlbc = 368,
    .co_size = 376, .co_filename = 384, .co_name = 392, .co_qualname = 400, .co_linetable = 408,
    .co_firstlineno = 416, .co_adaptive = 448, .co_tlbc = 456,
    .ob_size = 464, .ob_type = 472, .tp_flags = 504, .tp_basicsize = 512, .tp_dictoffset = 520,
    .ht_cached_keys = 536,
    .bytes_size = 688, .bytes_ob_size = 696, .bytes_sval = 704,
    .str_size = 712, .str_state = 720, .str_length = 728, .str_ascii_size = 736,
    .gc_coll = 760, .eval_breaker = 840,
    .co_firsttraceable_back = 16, .co_firsttraceable_back_ft = 24, .fr_owner_skip = 3,
    .fr_code_tagged = true, .str_shift_ft = 6};

/* 3.15's earlier alphas: thread_state without last_profiled_frame_seq, type_object, unicode
 * and gc without the later slots, no heap_type_object group. */
static const struct py_debug_shape debug_3_15_alpha = {
    .rt_finalizing = 32, .rt_interp_head = 40,
    .is_size = 48, .is_id = 56, .is_next = 64, .is_threads_head = 72, .is_threads_main = 80,
    .is_gc = 88, .is_modules = 96, .is_gil_ptr = 120, .is_gil = 128, .is_gil_locked = 144,
    .is_gil_holder = 152, .is_code_gen = 160,
    .ts_size = 176, .ts_next = 192, .ts_interp = 200, .ts_frame = 208, .ts_thread_id = 232,
    .ts_native_id = 240, .ts_datastack = 248, .ts_status = 256, .ts_holds_gil = 264,
    .fr_size = 304, .fr_prev = 312, .fr_exec = 320, .fr_instr = 328, .fr_owner = 344,
    .fr_tlbc = 360,
    .co_size = 368, .co_filename = 376, .co_name = 384, .co_qualname = 392, .co_linetable = 400,
    .co_firstlineno = 408, .co_adaptive = 440, .co_tlbc = 448,
    .ob_size = 456, .ob_type = 464, .tp_flags = 496,
    .bytes_size = 648, .bytes_ob_size = 656, .bytes_sval = 664,
    .str_size = 672, .str_state = 680, .str_length = 688, .str_ascii_size = 696,
    .gc_coll = 712, .eval_breaker = 776,
    .co_firsttraceable_back = 16, .co_firsttraceable_back_ft = 24, .fr_owner_skip = 3,
    .fr_code_tagged = true, .str_shift_ft = 6};

/* Indexed by minor - PYABI_MIN_MINOR. */
static const struct py_abi abis[] = {
    /* 3.8: the drop request and gc.collecting sit in the runtime. */
    {.compiled = true, .layout = {.minor = 8, .ob_type = PYABI_OB_TYPE, .rt = {.interp_head = 32, .finalizing = 16, .gil = 1152},
        .is = IS_OLD(16, 56), .ts = TS_OLD(264), .fr = FR_OLD(104, false, 116, false), .co = CO_OLD,
        .str = STR_OLD, .bytes = BYTES, .names = NAMES_OLD(872),
        .gil = {GIL_STRUCT, .drop = PY_DROP_RUNTIME, .drop_off = 596, .gc = PY_GC_RUNTIME, .gc_off = 544}}},
    /* 3.9: the drop request and gc.collecting move into the interpreter. */
    {.compiled = true, .layout = {.minor = 9, .ob_type = PYABI_OB_TYPE, .rt = {.interp_head = 32, .finalizing = 16, .gil = 352},
        .is = IS_OLD(24, 856), .ts = TS_OLD(264), .fr = FR_OLD(104, false, 116, false), .co = CO_OLD,
        .str = STR_OLD, .bytes = BYTES, .names = NAMES_OLD(864),
        .gil = {GIL_STRUCT, .drop = PY_DROP_INTERP, .drop_off = 76, .gc = PY_GC_INTERP, .gc_off = 816}}},
    /* 3.10: f_lasti counts 2-byte code units. */
    {.compiled = true, .layout = {.minor = 10, .ob_type = PYABI_OB_TYPE, .rt = {.interp_head = 32, .finalizing = 16, .gil = 352},
        .is = IS_OLD(24, 856), .ts = TS_OLD(280), .fr = FR_OLD(96, true, 108, true), .co = CO_OLD,
        .str = STR_OLD, .bytes = BYTES, .names = NAMES_OLD(872),
        .gil = {GIL_STRUCT, .drop = PY_DROP_INTERP, .drop_off = 72, .gc = PY_GC_INTERP, .gc_off = 816}}},
    /* 3.11: _PyInterpreterFrames live in per-thread data-stack chunks, reached through the
     * tstate's _PyCFrame; instances keep their values behind a pointer in front of them. */
    {.compiled = true, .layout = {.minor = 11, .ob_type = PYABI_OB_TYPE,
        .rt = {.interp_head = 40, .finalizing = 24, .gil = 360},
        .is = {.next = 0, .id = 48, .threads_head = 16, .modules = 888, .threads_main = NONE,
               .gil_ptr = NONE, .code_gen = NONE},
        .ts = {.size = 360, .next = 8, .interp = 16, .thread_id = 152, .native_id = 160,
               .frame = NONE, .cframe = 56, .cframe_current = 8, .datastack = 296,
               .gil_flag_off = NONE},
        .fr = {.size = 80, .prev = 48, .code = 32, .instr = 56, .owner = 69, .owner_gen = 1,
               .owner_skip = 256, .state = NONE, .entry = 68},
        .co = {.filename = 112, .name = 120, .linetable = 136, .firstlineno = 72,
               .qualname = 128, .code_adaptive = 184, .firsttraceable = 168, .read = 176},
        .str = STR_OLD, .bytes = BYTES,
        .gil = {GIL_STRUCT, .drop = PY_DROP_INTERP, .drop_off = 104,
                .gc = PY_GC_INTERP, .gc_off = 848},
        .names = {.keys_new = true, .keys_nentries = 24, .values_ptr = -32, .dict_ptr = -24,
                  .ht_cached_keys = 872}}},
    /* 3.12: each interpreter owns a GIL behind interp->ceval.gil; ints tag their size. */
    {.compiled = true, .layout = {.minor = 12, .ob_type = PYABI_OB_TYPE,
        .rt = {.interp_head = 40, .finalizing = 24, .gil = NONE},
        .is = {.next = 0, .id = 8, .threads_head = 72, .modules = 944, .threads_main = NONE,
               .gil_ptr = 384, .code_gen = NONE},
        .ts = {.size = 288, .next = 8, .interp = 16, .thread_id = 136, .native_id = 144,
               .frame = NONE, .cframe = 56, .cframe_current = 0, .datastack = 232,
               .gil_flag_off = NONE},
        .fr = FR_312,
        .co = {.filename = 112, .name = 120, .linetable = 136, .firstlineno = 68,
               .qualname = 128, .code_adaptive = 192, .firsttraceable = 176, .read = 184},
        .str = STR_NEW, .bytes = BYTES,
        .gil = {GIL_STRUCT, .drop = PY_DROP_INTERP, .drop_off = 372,
                .gc = PY_GC_INTERP, .gc_off = 312},
        .names = {.keys_new = true, .keys_nentries = 24, .values_ptr = NONE, .dict_ptr = -24,
                  .dict_ptr_tagged = true, .ht_cached_keys = 880, .long_tag = true}}},
    /* 3.13: the first _Py_DebugOffsets (preferred when it validates); the drop request
     * becomes a bit of the holder's eval_breaker; values may sit inline after the object. */
    {.compiled = true, .debug = {&debug_3_13}, .layout = {.minor = 13, .ob_type = PYABI_OB_TYPE,
        .rt = {.interp_head = 632, .finalizing = 608, .gil = NONE},
        .is = {.next = 7264, .id = 7272, .threads_head = 7344, .modules = 7656,
               .threads_main = 7352, .gil_ptr = 16, .code_gen = NONE},
        .ts = {.size = 304, .next = 8, .interp = 16, .thread_id = 152, .native_id = 160,
               .frame = 72, .cframe = NONE, .cframe_current = 0, .datastack = 232,
               .gil_flag_off = 32, .gil_flag = PY_GILFLAG_STATUS},
        .fr = FR_312,
        .co = {.filename = 112, .name = 120, .linetable = 136, .firstlineno = 68,
               .qualname = 128, .code_adaptive = 200, .firsttraceable = 184, .read = 192},
        .str = STR_NEW, .bytes = BYTES,
        .gil = {GIL_STRUCT, .drop = PY_DROP_TSTATE_BIT, .drop_off = 24,
                .gc = PY_GC_DEBUG, .gc_off = 80, .gc_slot_is_size = 48, .gc_slot_coll = 576},
        .names = NAMES_313}},
    /* 3.14: only through _Py_DebugOffsets; PyTypeObject and the dict layouts are as in 3.13,
     * and gc follows unicode_object in _Py_DebugOffsets, as in 3.13. */
    {.compiled = false, .debug = {&debug_3_14}, .layout = {.minor = 14,
        .gil = {.drop = PY_DROP_TSTATE_BIT, .drop_off = 24,
                .gc = PY_GC_DEBUG, .gc_off = 88, .gc_slot_is_size = 48, .gc_slot_coll = 656},
        .names = NAMES_313}},
    /* 3.15: only through _Py_DebugOffsets, which also places gc and the eval breaker; the
     * thread-name walk keeps the 3.13 dict layouts where the target's type offsets agree. */
    {.compiled = false, .debug = {&debug_3_15, &debug_3_15_alpha}, .layout = {.minor = 15,
        .gil = {.drop = PY_DROP_TSTATE_BIT, .drop_off = 24,
                .gc = PY_GC_DEBUG, .gc_slot_is_size = 48},
        .names = NAMES_313}},
};

// clang-format on

_Static_assert(sizeof(abis) / sizeof(abis[0]) == PYABI_MAX_MINOR - PYABI_MIN_MINOR + 1,
               "one descriptor per minor from PYABI_MIN_MINOR to PYABI_MAX_MINOR");

const struct py_abi *pyabi_for_minor(int minor)
{
    const struct py_abi *a;

    if (minor < PYABI_MIN_MINOR || minor > PYABI_MAX_MINOR)
        return NULL;
    a = &abis[minor - PYABI_MIN_MINOR];
    return a->layout.minor == minor ? a : NULL; /* a misordered table finds nothing */
}
