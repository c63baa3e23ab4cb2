/* CPython structure layouts per minor version, and the _Py_DebugOffsets parser.
 *
 * The 3.8-3.13 tables are constant data (offsets compiled with offsetof against each version's
 * internal headers and checked by walking live interpreters). 3.13+ interpreters also describe
 * themselves; the parser below reads that description with the field order of the target's minor
 * version, because the struct's shape changes between minors. Pure code, any thread. */
#include "pylayout.h"

#include <string.h>

#define PY_UNICODE_OLD                                                                             \
    .str_length = 16, .str_state = 32, .str_ascii_size = 48, .str_compact_size = 72
#define PY_UNICODE_NEW                                                                             \
    .str_length = 16, .str_state = 32, .str_ascii_size = 40, .str_compact_size = 56
#define PY_BYTES .bytes_size = 16, .bytes_sval = 32
#define PY_GIL .gil_last_holder = 8, .gil_locked = 16, .gil_switch = 24, .gil_cond = 32

/* 3.8 to 3.10: frames are heap PyFrameObjects chained by f_back. */
#define PY_OLD_COMMON                                                                              \
    .is_next = 0, .is_threads_head = 8, .is_threads_main = PYLAYOUT_NONE,                          \
    .is_gil_ptr = PYLAYOUT_NONE, .is_code_gen = PYLAYOUT_NONE, .ts_next = 8, .ts_interp = 16,      \
    .ts_thread_id = 176, .ts_native_id = PYLAYOUT_NONE, .ts_frame = 24,                            \
    .ts_cframe = PYLAYOUT_NONE, .ts_cframe_current = 0, .ts_datastack = PYLAYOUT_NONE,             \
    .ts_gil_flag_off = PYLAYOUT_NONE, .ts_gil_flag = PY_GILFLAG_NONE, .fr_object = true,           \
    .fr_size = 112, .fr_prev = 24, .fr_code = 32, .fr_owner = 0, .fr_owner_gen = -1,               \
    .fr_owner_skip = 256, .co_filename = 104, .co_name = 112, .co_linetable = 120,                 \
    .co_firstlineno = 40, .co_qualname = PYLAYOUT_NONE, .co_code_adaptive = PYLAYOUT_NONE,         \
    .co_firsttraceable = PYLAYOUT_NONE, .co_read = 128, PY_UNICODE_OLD, PY_BYTES, PY_GIL

static const struct py_layout layout_3_8 = {
    .minor = 8,
    .rt_interp_head = 32,
    .rt_finalizing = 16,
    .rt_gil = 1152,
    .is_id = 16,
    .is_modules = 56,
    .ts_size = 264,
    .fr_instr = 104,
    PY_OLD_COMMON,
};

static const struct py_layout layout_3_9 = {
    .minor = 9,
    .rt_interp_head = 32,
    .rt_finalizing = 16,
    .rt_gil = 352,
    .is_id = 24,
    .is_modules = 856,
    .ts_size = 264,
    .fr_instr = 104,
    PY_OLD_COMMON,
};

static const struct py_layout layout_3_10 = {
    .minor = 10,
    .rt_interp_head = 32,
    .rt_finalizing = 16,
    .rt_gil = 352,
    .is_id = 24,
    .is_modules = 856,
    .ts_size = 280,
    .fr_instr = 96,
    .fr_lasti_units = true,
    PY_OLD_COMMON,
};

/* 3.11+: _PyInterpreterFrames live in per-thread data-stack chunks. */
#define PY_NEW_COMMON                                                                              \
    .ts_next = 8, .ts_interp = 16, .fr_object = false, .fr_size = 80, .fr_instr = 56,              \
    .fr_owner_gen = 1, .co_filename = 112, .co_name = 120, .co_qualname = 128,                     \
    .co_linetable = 136, .is_code_gen = PYLAYOUT_NONE, PY_BYTES, PY_GIL

static const struct py_layout layout_3_11 = {
    .minor = 11,
    .rt_interp_head = 40,
    .rt_finalizing = 24,
    .rt_gil = 360,
    .is_next = 0,
    .is_id = 48,
    .is_threads_head = 16,
    .is_modules = 888,
    .is_threads_main = PYLAYOUT_NONE,
    .is_gil_ptr = PYLAYOUT_NONE,
    .ts_size = 360,
    .ts_thread_id = 152,
    .ts_native_id = 160,
    .ts_frame = PYLAYOUT_NONE,
    .ts_cframe = 56,
    .ts_cframe_current = 8,
    .ts_datastack = 296,
    .ts_gil_flag_off = PYLAYOUT_NONE,
    .ts_gil_flag = PY_GILFLAG_NONE,
    .fr_prev = 48,
    .fr_code = 32,
    .fr_owner = 69,
    .fr_owner_skip = 256,
    .co_firstlineno = 72,
    .co_code_adaptive = 184,
    .co_firsttraceable = 168,
    .co_read = 176,
    PY_UNICODE_OLD,
    PY_NEW_COMMON,
};

static const struct py_layout layout_3_12 = {
    .minor = 12,
    .rt_interp_head = 40,
    .rt_finalizing = 24,
    .rt_gil = PYLAYOUT_NONE,
    .is_next = 0,
    .is_id = 8,
    .is_threads_head = 72,
    .is_modules = 944,
    .is_threads_main = PYLAYOUT_NONE,
    .is_gil_ptr = 384,
    .ts_size = 288,
    .ts_thread_id = 136,
    .ts_native_id = 144,
    .ts_frame = PYLAYOUT_NONE,
    .ts_cframe = 56,
    .ts_cframe_current = 0,
    .ts_datastack = 232,
    .ts_gil_flag_off = PYLAYOUT_NONE,
    .ts_gil_flag = PY_GILFLAG_NONE,
    .fr_prev = 8,
    .fr_code = 0,
    .fr_owner = 70,
    .fr_owner_skip = 3,
    .co_firstlineno = 68,
    .co_code_adaptive = 192,
    .co_firsttraceable = 176,
    .co_read = 184,
    PY_UNICODE_NEW,
    PY_NEW_COMMON,
};

static const struct py_layout layout_3_13 = {
    .minor = 13,
    .rt_interp_head = 632,
    .rt_finalizing = 608,
    .rt_gil = PYLAYOUT_NONE,
    .is_next = 7264,
    .is_id = 7272,
    .is_threads_head = 7344,
    .is_modules = 7656,
    .is_threads_main = 7352,
    .is_gil_ptr = 16,
    .ts_size = 304,
    .ts_thread_id = 152,
    .ts_native_id = 160,
    .ts_frame = 72,
    .ts_cframe = PYLAYOUT_NONE,
    .ts_cframe_current = 0,
    .ts_datastack = 232,
    .ts_gil_flag_off = 32,
    .ts_gil_flag = PY_GILFLAG_STATUS,
    .fr_prev = 8,
    .fr_code = 0,
    .fr_owner = 70,
    .fr_owner_skip = 3,
    .co_firstlineno = 68,
    .co_code_adaptive = 200,
    .co_firsttraceable = 184,
    .co_read = 192,
    PY_UNICODE_NEW,
    PY_NEW_COMMON,
};

const struct py_layout *pylayout_for_minor(int minor)
{
    switch (minor) {
    case 8:
        return &layout_3_8;
    case 9:
        return &layout_3_9;
    case 10:
        return &layout_3_10;
    case 11:
        return &layout_3_11;
    case 12:
        return &layout_3_12;
    case 13:
        return &layout_3_13;
    default:
        return NULL;
    }
}

/* Byte offsets, inside _Py_DebugOffsets, of the fields the reader takes from it. The struct
 * is a cookie followed by u64 slots whose order is fixed within a minor version only. */
struct dbg_shape {
    int minor;
    uint16_t rt_finalizing, rt_interp_head;
    uint16_t is_size, is_id, is_next, is_threads_head, is_threads_main, is_modules, is_gil_ptr,
        is_gil, is_gil_locked, is_gil_holder, is_code_gen;
    uint16_t ts_size, ts_next, ts_interp, ts_frame, ts_thread_id, ts_native_id, ts_datastack,
        ts_status, ts_holds_gil;
    uint16_t fr_size, fr_prev, fr_exec, fr_instr, fr_owner;
    uint16_t co_size, co_filename, co_name, co_qualname, co_linetable, co_firstlineno, co_adaptive;
    uint16_t ob_type, str_size, str_state, str_length, str_ascii_size, bytes_size, bytes_ob_size,
        bytes_sval;
    /* Not exported by that minor; taken from its compiled headers. */
    int32_t co_firsttraceable;
    int32_t threads_main_rel; /* interp threads.main relative to threads.head, 0 if absent */
    int32_t holds_gil_int;    /* tstate offset of an int holds_gil (3.14), 0 if absent */
    int fr_owner_skip;
};

/* 3.13.0: verified against a live interpreter (values in cpython-remote.md section 1.7). */
static const struct dbg_shape shape_3_13 = {
    .minor = 13,
    .rt_finalizing = 32,
    .rt_interp_head = 40,
    .is_size = 48,
    .is_id = 56,
    .is_next = 64,
    .is_threads_head = 72,
    .is_threads_main = 0,
    .is_modules = 88,
    .is_gil_ptr = 112,
    .is_gil = 120,
    .is_gil_locked = 136,
    .is_gil_holder = 144,
    .is_code_gen = 0,
    .ts_size = 152,
    .ts_next = 168,
    .ts_interp = 176,
    .ts_frame = 184,
    .ts_thread_id = 192,
    .ts_native_id = 200,
    .ts_datastack = 208,
    .ts_status = 216,
    .ts_holds_gil = 0,
    .fr_size = 224,
    .fr_prev = 232,
    .fr_exec = 240,
    .fr_instr = 248,
    .fr_owner = 264,
    .co_size = 272,
    .co_filename = 280,
    .co_name = 288,
    .co_qualname = 296,
    .co_linetable = 304,
    .co_firstlineno = 312,
    .co_adaptive = 344,
    .ob_type = 360,
    .str_size = 536,
    .str_state = 544,
    .str_length = 552,
    .str_ascii_size = 560,
    .bytes_size = 512,
    .bytes_ob_size = 520,
    .bytes_sval = 528,
    .co_firsttraceable = 184,
    .threads_main_rel = 8,
    .fr_owner_skip = 3,
};

/* 3.14: field order from the 3.14 headers (py-spy's generated 3.14.0 and 3.14.5 bindings
 * agree on it); several values move between 3.14.4 and 3.14.5, which is why they are read
 * from the target. tstate->holds_gil (an int at +36) and _co_firsttraceable are not in the
 * table. */
static const struct dbg_shape shape_3_14 = {
    .minor = 14,
    .rt_finalizing = 32,
    .rt_interp_head = 40,
    .is_size = 48,
    .is_id = 56,
    .is_next = 64,
    .is_threads_head = 72,
    .is_threads_main = 80,
    .is_modules = 96,
    .is_gil_ptr = 120,
    .is_gil = 128,
    .is_gil_locked = 144,
    .is_gil_holder = 152,
    .is_code_gen = 160,
    .ts_size = 176,
    .ts_next = 192,
    .ts_interp = 200,
    .ts_frame = 208,
    .ts_thread_id = 216,
    .ts_native_id = 224,
    .ts_datastack = 232,
    .ts_status = 240,
    .ts_holds_gil = 0,
    .fr_size = 248,
    .fr_prev = 256,
    .fr_exec = 264,
    .fr_instr = 272,
    .fr_owner = 288,
    .co_size = 312,
    .co_filename = 320,
    .co_name = 328,
    .co_qualname = 336,
    .co_linetable = 344,
    .co_firstlineno = 352,
    .co_adaptive = 384,
    .ob_type = 408,
    .str_size = 616,
    .str_state = 624,
    .str_length = 632,
    .str_ascii_size = 640,
    .bytes_size = 592,
    .bytes_ob_size = 600,
    .bytes_sval = 608,
    .co_firsttraceable = 192,
    .holds_gil_int = 36,
    .fr_owner_skip = 3,
};

static const struct dbg_shape *dbg_shape_for(int minor)
{
    return minor == 13 ? &shape_3_13 : minor == 14 ? &shape_3_14 : NULL;
}

static uint64_t dbg_u64(const uint8_t *dbg, uint16_t off)
{
    uint64_t v;

    memcpy(&v, dbg + off, sizeof(v));
    return v;
}

/* Copies one offset into a layout field, refusing values that cannot be struct offsets. */
static int dbg_take(const uint8_t *dbg, uint16_t off, uint64_t limit, uint32_t *field)
{
    uint64_t v = dbg_u64(dbg, off);

    if (v >= limit)
        return -1;
    *field = (uint32_t)v;
    return 0;
}

static int dbg_fill_core(const uint8_t *d, const struct dbg_shape *s, struct py_layout *o)
{
    uint64_t rt_size = dbg_u64(d, 24), is_size = dbg_u64(d, s->is_size);
    uint64_t ts_size = dbg_u64(d, s->ts_size), fr_size = dbg_u64(d, s->fr_size);
    uint64_t co_size = dbg_u64(d, s->co_size);
    uint32_t v = 0;
    int bad = 0;

    if (ts_size > 65536 || fr_size > 128 || co_size > 4096 || rt_size > (64u << 20) ||
        is_size > (64u << 20) || ts_size < 64)
        return -1;
    /* The reader copies at most PYLAYOUT_TSTATE_READ bytes of a thread state. */
    if (ts_size > PYLAYOUT_TSTATE_READ)
        ts_size = PYLAYOUT_TSTATE_READ;
    bad |= dbg_take(d, s->rt_finalizing, rt_size, &o->rt_finalizing);
    bad |= dbg_take(d, s->rt_interp_head, rt_size, &o->rt_interp_head);
    bad |= dbg_take(d, s->is_id, is_size, &o->is_id);
    bad |= dbg_take(d, s->is_next, is_size, &o->is_next);
    bad |= dbg_take(d, s->is_threads_head, is_size, &o->is_threads_head);
    bad |= dbg_take(d, s->is_modules, is_size, &o->is_modules);
    bad |= dbg_take(d, s->is_gil_ptr, is_size, &v);
    o->is_gil_ptr = (int32_t)v;
    o->ts_size = (uint32_t)ts_size;
    bad |= dbg_take(d, s->ts_next, ts_size, &o->ts_next);
    bad |= dbg_take(d, s->ts_interp, ts_size, &o->ts_interp);
    bad |= dbg_take(d, s->ts_frame, ts_size, &v);
    o->ts_frame = (int32_t)v;
    bad |= dbg_take(d, s->ts_thread_id, ts_size, &o->ts_thread_id);
    bad |= dbg_take(d, s->ts_native_id, ts_size, &v);
    o->ts_native_id = (int32_t)v;
    bad |= dbg_take(d, s->ts_datastack, ts_size - 16, &v);
    o->ts_datastack = (int32_t)v;
    return bad ? -1 : 0;
}

static int dbg_fill_frames(const uint8_t *d, const struct dbg_shape *s, struct py_layout *o)
{
    uint64_t fr_size = dbg_u64(d, s->fr_size), co_size = dbg_u64(d, s->co_size);
    int bad = 0;
    uint32_t v = 0;

    if (fr_size < 16 || (uint64_t)s->co_firsttraceable + 8 > co_size)
        return -1;
    o->fr_size = (uint32_t)fr_size;
    bad |= dbg_take(d, s->fr_prev, fr_size - 7, &o->fr_prev);
    bad |= dbg_take(d, s->fr_exec, fr_size - 7, &o->fr_code);
    bad |= dbg_take(d, s->fr_instr, fr_size - 7, &o->fr_instr);
    bad |= dbg_take(d, s->fr_owner, fr_size, &o->fr_owner);
    bad |= dbg_take(d, s->co_filename, co_size, &o->co_filename);
    bad |= dbg_take(d, s->co_name, co_size, &o->co_name);
    bad |= dbg_take(d, s->co_qualname, co_size, &v);
    o->co_qualname = (int32_t)v;
    bad |= dbg_take(d, s->co_linetable, co_size, &o->co_linetable);
    bad |= dbg_take(d, s->co_firstlineno, co_size, &o->co_firstlineno);
    bad |= dbg_take(d, s->co_adaptive, co_size + 1, &v);
    o->co_code_adaptive = (int32_t)v;
    o->co_firsttraceable = s->co_firsttraceable;
    o->co_read = (uint32_t)(s->co_firsttraceable + 8);
    return bad ? -1 : 0;
}

static int dbg_fill_objects(const uint8_t *d, const struct dbg_shape *s, struct py_layout *o)
{
    uint64_t str_size = dbg_u64(d, s->str_size), bytes_size = dbg_u64(d, s->bytes_size);
    uint64_t is_gil = dbg_u64(d, s->is_gil);
    uint64_t locked = dbg_u64(d, s->is_gil_locked), holder = dbg_u64(d, s->is_gil_holder);
    int bad = 0;

    if (dbg_u64(d, s->ob_type) != 8 || locked < is_gil || holder < is_gil || locked - is_gil > 64 ||
        holder - is_gil > 64)
        return -1;
    bad |= dbg_take(d, s->str_state, str_size, &o->str_state);
    bad |= dbg_take(d, s->str_length, str_size, &o->str_length);
    bad |= dbg_take(d, s->str_ascii_size, 256, &o->str_ascii_size);
    o->str_compact_size = o->str_ascii_size + 16; /* utf8_length, utf8 */
    bad |= dbg_take(d, s->bytes_ob_size, bytes_size, &o->bytes_size);
    bad |= dbg_take(d, s->bytes_sval, bytes_size + 1, &o->bytes_sval);
    o->gil_locked = (uint32_t)(locked - is_gil);
    o->gil_last_holder = (uint32_t)(holder - is_gil);
    o->gil_switch = o->gil_locked + 8;
    o->gil_cond = o->gil_switch + 8;
    return bad ? -1 : 0;
}

int pylayout_from_debug_offsets(const uint8_t *dbg, size_t len, uint32_t version,
                                struct py_layout *out, struct app_err *err)
{
    int minor = (int)((version >> 16) & 0xFF);
    const struct dbg_shape *s = dbg_shape_for(minor);

    if (!s)
        return app_err_set(err, APP_E_VERSION, "no _Py_DebugOffsets layout known for Python 3.%d",
                           minor);
    if (len < 600 || memcmp(dbg, "xdebugpy", 8) != 0 || dbg_u64(dbg, 8) != version)
        return app_err_set(err, APP_E_PARSE, "_Py_DebugOffsets missing or inconsistent");
    if (dbg_u64(dbg, 16) != 0)
        return app_err_set(err, APP_E_VERSION, "free-threaded Python builds are not supported yet");
    memset(out, 0, sizeof(*out));
    out->minor = minor;
    out->rt_gil = PYLAYOUT_NONE;
    out->is_threads_main = PYLAYOUT_NONE;
    out->is_code_gen = s->is_code_gen ? (int32_t)dbg_u64(dbg, s->is_code_gen) : PYLAYOUT_NONE;
    out->ts_cframe = PYLAYOUT_NONE;
    out->ts_gil_flag = s->holds_gil_int ? PY_GILFLAG_INT : PY_GILFLAG_STATUS;
    out->ts_gil_flag_off =
        s->holds_gil_int ? s->holds_gil_int : (int32_t)dbg_u64(dbg, s->ts_status);
    out->fr_owner_gen = 1;
    out->fr_owner_skip = s->fr_owner_skip;
    out->fr_code_tagged = minor >= 14;
    if (dbg_fill_core(dbg, s, out) < 0 || dbg_fill_frames(dbg, s, out) < 0 ||
        dbg_fill_objects(dbg, s, out) < 0)
        return app_err_set(err, APP_E_PARSE, "_Py_DebugOffsets of Python 3.%d failed validation",
                           minor);
    if (s->is_threads_main)
        out->is_threads_main = (int32_t)dbg_u64(dbg, s->is_threads_main);
    else if (s->threads_main_rel)
        out->is_threads_main = (int32_t)(out->is_threads_head + (uint32_t)s->threads_main_rel);
    return 0;
}
