/* The _Py_DebugOffsets parser: fills a struct py_layout from the copy of a 3.13+ target's
 * self-description.
 *
 * The struct is a cookie, the version, a free-threading flag and then u64 slots whose order
 * changes between minors (and, for 3.15, between pre-releases), so each slot is found through
 * one of the minor's py_debug_shapes: the first whose values validate is taken, and a copy no
 * shape fits is refused, never guessed at. Every value is bounded by the size of the struct it
 * points into before it is taken, because the copy comes from another process and may be
 * garbage; the tstate size is clamped to the bytes the reader copies. The PyObject header
 * (16 bytes, 32 free-threaded) must match the build's flag, which also tells the shapes of one
 * minor apart. Free-threaded builds have no GIL to read (the GIL-side parts are turned off) and
 * no thread-name walk. The parts _Py_DebugOffsets does not describe (the thread-name walk's
 * layouts, the GIL drop request and gc slots) come from the minor's descriptor. Pure code, any
 * thread. */
#include "pyabi.h"

#include "ranktop/base/bytes.h"

#include <stdio.h>
#include <string.h>

static uint64_t dbg_u64(const uint8_t *dbg, uint16_t off)
{
    return bytes_load_u64(dbg + off);
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

static int dbg_fill_core(const uint8_t *d, const struct py_debug_shape *s, struct py_layout *o)
{
    uint64_t rt_size = dbg_u64(d, 24), is_size = dbg_u64(d, s->is_size);
    uint64_t ts_size = dbg_u64(d, s->ts_size), fr_size = dbg_u64(d, s->fr_size);
    uint64_t co_size = dbg_u64(d, s->co_size);
    uint32_t v = 0;
    int bad = 0;

    if (ts_size > 65536 || fr_size > 128 || co_size > 4096 || rt_size > (64u << 20) ||
        is_size > (64u << 20) || ts_size < 64)
        return -1;
    /* The reader copies at most PYABI_TSTATE_READ bytes of a thread state. */
    if (ts_size > PYABI_TSTATE_READ)
        ts_size = PYABI_TSTATE_READ;
    bad |= dbg_take(d, s->rt_finalizing, rt_size, &o->rt.finalizing);
    bad |= dbg_take(d, s->rt_interp_head, rt_size, &o->rt.interp_head);
    bad |= dbg_take(d, s->is_id, is_size, &o->is.id);
    bad |= dbg_take(d, s->is_next, is_size, &o->is.next);
    bad |= dbg_take(d, s->is_threads_head, is_size, &o->is.threads_head);
    bad |= dbg_take(d, s->is_modules, is_size, &o->is.modules);
    bad |= dbg_take(d, s->is_gil_ptr, is_size, &v);
    o->is.gil_ptr = (int32_t)v;
    o->ts.size = (uint32_t)ts_size;
    bad |= dbg_take(d, s->ts_next, ts_size, &o->ts.next);
    bad |= dbg_take(d, s->ts_interp, ts_size, &o->ts.interp);
    bad |= dbg_take(d, s->ts_frame, ts_size, &v);
    o->ts.frame = (int32_t)v;
    bad |= dbg_take(d, s->ts_thread_id, ts_size, &o->ts.thread_id);
    bad |= dbg_take(d, s->ts_native_id, ts_size, &v);
    o->ts.native_id = (int32_t)v;
    bad |= dbg_take(d, s->ts_datastack, ts_size - 16, &v);
    o->ts.datastack = (int32_t)v;
    if (s->ts_holds_gil) {
        bad |= dbg_take(d, s->ts_holds_gil, ts_size - 3, &v);
        o->ts.gil_flag_off = (int32_t)v;
    }
    return bad ? -1 : 0;
}

/* Where _co_firsttraceable lies (before co_code_adaptive) and how much of the code header the
 * reader copies: up to it, and free-threaded up to co_tlbc too. */
static int dbg_fill_code_tail(const uint8_t *d, const struct py_debug_shape *s, uint64_t co_size,
                              struct py_layout *o)
{
    int32_t back = o->free_threaded ? s->co_firsttraceable_back_ft : s->co_firsttraceable_back;
    uint32_t v = 0, read;

    if (o->co.code_adaptive < back + 8)
        return -1;
    o->co.firsttraceable = o->co.code_adaptive - back;
    read = (uint32_t)o->co.firsttraceable + 8;
    if (o->free_threaded && s->co_tlbc) {
        if (dbg_take(d, s->co_tlbc, co_size, &v) < 0 || v < 8 ||
            v + 8 > (uint32_t)o->co.code_adaptive)
            return -1;
        o->co.tlbc = (int32_t)v;
        read = v + 8 > read ? v + 8 : read;
    }
    o->co.read = read;
    return 0;
}

static int dbg_fill_frames(const uint8_t *d, const struct py_debug_shape *s, struct py_layout *o)
{
    uint64_t fr_size = dbg_u64(d, s->fr_size), co_size = dbg_u64(d, s->co_size);
    int bad = 0;
    uint32_t v = 0;

    if (fr_size < 16)
        return -1;
    o->fr.size = (uint32_t)fr_size;
    bad |= dbg_take(d, s->fr_prev, fr_size - 7, &o->fr.prev);
    bad |= dbg_take(d, s->fr_exec, fr_size - 7, &o->fr.code);
    bad |= dbg_take(d, s->fr_instr, fr_size - 7, &o->fr.instr);
    bad |= dbg_take(d, s->fr_owner, fr_size, &o->fr.owner);
    if (o->free_threaded && s->fr_tlbc) {
        bad |= dbg_take(d, s->fr_tlbc, fr_size - 3, &v);
        o->fr.tlbc = (int32_t)v;
        bad |= v == 0;
    }
    bad |= dbg_take(d, s->co_filename, co_size, &o->co.filename);
    bad |= dbg_take(d, s->co_name, co_size, &o->co.name);
    bad |= dbg_take(d, s->co_qualname, co_size, &v);
    o->co.qualname = (int32_t)v;
    bad |= dbg_take(d, s->co_linetable, co_size, &o->co.linetable);
    bad |= dbg_take(d, s->co_firstlineno, co_size, &o->co.firstlineno);
    bad |= dbg_take(d, s->co_adaptive, co_size + 1, &v);
    o->co.code_adaptive = (int32_t)v;
    if (bad || dbg_fill_code_tail(d, s, co_size, o) < 0)
        return -1;
    return 0;
}

/* The PyObject header the build flag promises (16 bytes, ob_type at 8; free-threaded 32 and
 * 24): the check that also tells one minor's shapes apart, since a slot read through the wrong
 * shape lands on another group's values. */
static int dbg_fill_objects(const uint8_t *d, const struct py_debug_shape *s, struct py_layout *o)
{
    uint64_t str_size = dbg_u64(d, s->str_size), bytes_size = dbg_u64(d, s->bytes_size);
    uint64_t is_gil = dbg_u64(d, s->is_gil);
    uint64_t locked = dbg_u64(d, s->is_gil_locked), holder = dbg_u64(d, s->is_gil_holder);
    uint64_t hdr = o->free_threaded ? 32 : 16;
    int bad = 0;

    if (dbg_u64(d, s->ob_size) != hdr || dbg_u64(d, s->ob_type) != hdr - 8 || locked < is_gil ||
        holder < is_gil || locked - is_gil > 64 || holder - is_gil > 64)
        return -1;
    o->ob_type = (uint32_t)(hdr - 8);
    bad |= dbg_take(d, s->str_state, str_size, &o->str.state);
    bad |= dbg_take(d, s->str_length, str_size, &o->str.length);
    bad |= dbg_take(d, s->str_ascii_size, 256, &o->str.ascii_size);
    bad |= o->str.ascii_size < hdr + 20;
    o->str.compact_size = o->str.ascii_size + 16; /* utf8_length, utf8 */
    o->str.state_shift = o->free_threaded ? s->str_shift_ft : 0;
    bad |= dbg_take(d, s->bytes_ob_size, bytes_size, &o->bytes.size);
    bad |= dbg_take(d, s->bytes_sval, bytes_size + 1, &o->bytes.sval);
    o->gil.locked = (uint32_t)(locked - is_gil);
    o->gil.last_holder = (uint32_t)(holder - is_gil);
    o->gil.switch_number = o->gil.locked + 8;
    o->gil.cond = o->gil.switch_number + 8;
    return bad ? -1 : 0;
}

/* The thread-name walk reads types and instances with the constants of pyabi.h and the
 * minor's dict layouts: where the shape exports the type offsets, they must agree. */
static void dbg_names(const uint8_t *d, const struct py_debug_shape *s, struct py_layout *o)
{
    o->names.off = o->free_threaded;
    if (s->tp_flags && dbg_u64(d, s->tp_flags) != PYABI_TP_FLAGS)
        o->names.off = true;
    if (s->tp_basicsize && (dbg_u64(d, s->tp_basicsize) != PYABI_TP_BASICSIZE ||
                            dbg_u64(d, s->tp_dictoffset) != PYABI_TP_DICTOFFSET))
        o->names.off = true;
    if (s->ht_cached_keys) {
        uint64_t k = dbg_u64(d, s->ht_cached_keys);

        if (k < 512 || k > 4096)
            o->names.off = true;
        else
            o->names.ht_cached_keys = (uint32_t)k;
    } else if (s->tp_flags) {
        o->names.off = true; /* 3.15 alphas: PyHeapTypeObject not described */
    }
}

/* The GIL side: free-threaded builds have no GIL to probe or to prove that threads did not
 * run (no reuse of walks); else the flag saying whether a thread holds it, the drop request
 * and gc.collecting, where the shape places them. */
static void dbg_gil(const uint8_t *d, const struct py_debug_shape *s, struct py_layout *o)
{
    if (o->free_threaded) {
        o->is.gil_ptr = PYABI_NONE;
        o->ts.gil_flag = PY_GILFLAG_NONE;
        o->ts.gil_flag_off = PYABI_NONE;
        o->gil.drop = PY_DROP_UNKNOWN;
        return;
    }
    if (s->ts_holds_gil) {
        o->ts.gil_flag = PY_GILFLAG_INT; /* gil_flag_off taken by dbg_fill_core */
    } else {
        o->ts.gil_flag = s->holds_gil_int ? PY_GILFLAG_INT : PY_GILFLAG_STATUS;
        o->ts.gil_flag_off =
            s->holds_gil_int ? s->holds_gil_int : (int32_t)dbg_u64(d, s->ts_status);
    }
    if (s->eval_breaker && dbg_u64(d, s->eval_breaker) >= 8 &&
        dbg_u64(d, s->eval_breaker) + 8 <= o->ts.size)
        o->gil.drop_off = (int32_t)dbg_u64(d, s->eval_breaker);
    if (s->is_gc) {
        o->gil.gc_off = s->is_gc;
        o->gil.gc_slot_coll = s->gc_coll;
    }
}

/* Fills o through shape s; -1 when the values do not fit it. */
static int dbg_fill(const uint8_t *dbg, size_t len, const struct py_abi *abi,
                    const struct py_debug_shape *s, struct py_layout *out)
{
    if (len < (size_t)s->eval_breaker + 8 || len < (size_t)s->str_ascii_size + 8)
        return -1;
    memset(out, 0, sizeof(*out));
    out->minor = abi->layout.minor;
    out->free_threaded = dbg_u64(dbg, 16) != 0;
    out->gil = abi->layout.gil; /* the GIL struct offsets are overwritten below */
    out->names = abi->layout.names;
    out->rt.gil = PYABI_NONE;
    out->is.threads_main = PYABI_NONE;
    out->is.code_gen = s->is_code_gen ? (int32_t)dbg_u64(dbg, s->is_code_gen) : PYABI_NONE;
    out->ts.cframe = PYABI_NONE;
    out->fr.owner_gen = 1;
    out->fr.owner_skip = s->fr_owner_skip;
    out->fr.state = PYABI_NONE;
    out->fr.entry = PYABI_NONE;
    out->fr.code_tagged = s->fr_code_tagged;
    if (dbg_fill_core(dbg, s, out) < 0 || dbg_fill_frames(dbg, s, out) < 0 ||
        dbg_fill_objects(dbg, s, out) < 0)
        return -1;
    if (s->is_threads_main)
        out->is.threads_main = (int32_t)dbg_u64(dbg, s->is_threads_main);
    else if (s->threads_main_rel)
        out->is.threads_main = (int32_t)(out->is.threads_head + (uint32_t)s->threads_main_rel);
    dbg_gil(dbg, s, out);
    dbg_names(dbg, s, out);
    return 0;
}

static void version_str(uint32_t v, char *buf, size_t len)
{
    static const char *level[16] = {[0xA] = "a", [0xB] = "b", [0xC] = "rc"};
    unsigned lv = (v >> 4) & 0xF;

    snprintf(buf, len, "%u.%u.%u%s", v >> 24, (v >> 16) & 0xFF, (v >> 8) & 0xFF,
             level[lv] ? level[lv] : "");
    if (level[lv])
        snprintf(buf + strlen(buf), len - strlen(buf), "%u", v & 0xF);
}

int pyabi_from_debug_offsets(const uint8_t *dbg, size_t len, uint32_t version,
                             struct py_layout *out, struct app_err *err)
{
    int minor = (int)((version >> 16) & 0xFF);
    const struct py_abi *abi = version >> 24 == 3 ? pyabi_for_minor(minor) : NULL;
    char vs[32];
    bool ft;

    version_str(version, vs, sizeof(vs));
    if (!abi || !abi->debug[0])
        return app_err_set(err, APP_E_VERSION,
                           "CPython %s: layout not known to this ranktop (newest supported: 3.%d)",
                           vs, PYABI_MAX_MINOR);
    if (len < 64 || memcmp(dbg, "xdebugpy", 8) != 0 || dbg_u64(dbg, 8) != version)
        return app_err_set(err, APP_E_PARSE, "_Py_DebugOffsets missing or inconsistent");
    ft = dbg_u64(dbg, 16) != 0;
    if (dbg_u64(dbg, 16) > 1)
        return app_err_set(err, APP_E_PARSE, "_Py_DebugOffsets missing or inconsistent");
    for (int i = 0; i < PYABI_SHAPES && abi->debug[i]; i++)
        if (dbg_fill(dbg, len, abi, abi->debug[i], out) == 0)
            return 0;
    return app_err_set(err, APP_E_VERSION,
                       "CPython %s%s: _Py_DebugOffsets fit no 3.%d layout known to this ranktop "
                       "(newest supported: 3.%d)",
                       vs, ft ? " (free-threaded)" : "", minor, PYABI_MAX_MINOR);
}
