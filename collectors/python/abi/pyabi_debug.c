/* The _Py_DebugOffsets parser: fills a struct py_layout from the copy of a 3.13+ target's
 * self-description.
 *
 * The struct is a cookie, the version, a free-threading flag and then u64 slots whose order
 * changes between minors, so each slot is found through the minor's py_debug_shape. Every
 * value is bounded by the size of the struct it points into before it is taken, because the
 * copy comes from another process and may be garbage; the tstate size is clamped to the bytes
 * the reader copies. The parts _Py_DebugOffsets does not describe (the thread-name walk's
 * layouts, the GIL drop request and gc slots) come from the minor's descriptor. Pure code,
 * any thread. */
#include "pyabi.h"

#include "ranktop/bytes.h"

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
    return bad ? -1 : 0;
}

static int dbg_fill_frames(const uint8_t *d, const struct py_debug_shape *s, struct py_layout *o)
{
    uint64_t fr_size = dbg_u64(d, s->fr_size), co_size = dbg_u64(d, s->co_size);
    int bad = 0;
    uint32_t v = 0;

    if (fr_size < 16 || (uint64_t)s->co_firsttraceable + 8 > co_size)
        return -1;
    o->fr.size = (uint32_t)fr_size;
    bad |= dbg_take(d, s->fr_prev, fr_size - 7, &o->fr.prev);
    bad |= dbg_take(d, s->fr_exec, fr_size - 7, &o->fr.code);
    bad |= dbg_take(d, s->fr_instr, fr_size - 7, &o->fr.instr);
    bad |= dbg_take(d, s->fr_owner, fr_size, &o->fr.owner);
    bad |= dbg_take(d, s->co_filename, co_size, &o->co.filename);
    bad |= dbg_take(d, s->co_name, co_size, &o->co.name);
    bad |= dbg_take(d, s->co_qualname, co_size, &v);
    o->co.qualname = (int32_t)v;
    bad |= dbg_take(d, s->co_linetable, co_size, &o->co.linetable);
    bad |= dbg_take(d, s->co_firstlineno, co_size, &o->co.firstlineno);
    bad |= dbg_take(d, s->co_adaptive, co_size + 1, &v);
    o->co.code_adaptive = (int32_t)v;
    o->co.firsttraceable = s->co_firsttraceable;
    o->co.read = (uint32_t)(s->co_firsttraceable + 8);
    return bad ? -1 : 0;
}

static int dbg_fill_objects(const uint8_t *d, const struct py_debug_shape *s, struct py_layout *o)
{
    uint64_t str_size = dbg_u64(d, s->str_size), bytes_size = dbg_u64(d, s->bytes_size);
    uint64_t is_gil = dbg_u64(d, s->is_gil);
    uint64_t locked = dbg_u64(d, s->is_gil_locked), holder = dbg_u64(d, s->is_gil_holder);
    int bad = 0;

    if (dbg_u64(d, s->ob_type) != 8 || locked < is_gil || holder < is_gil || locked - is_gil > 64 ||
        holder - is_gil > 64)
        return -1;
    bad |= dbg_take(d, s->str_state, str_size, &o->str.state);
    bad |= dbg_take(d, s->str_length, str_size, &o->str.length);
    bad |= dbg_take(d, s->str_ascii_size, 256, &o->str.ascii_size);
    o->str.compact_size = o->str.ascii_size + 16; /* utf8_length, utf8 */
    bad |= dbg_take(d, s->bytes_ob_size, bytes_size, &o->bytes.size);
    bad |= dbg_take(d, s->bytes_sval, bytes_size + 1, &o->bytes.sval);
    o->gil.locked = (uint32_t)(locked - is_gil);
    o->gil.last_holder = (uint32_t)(holder - is_gil);
    o->gil.switch_number = o->gil.locked + 8;
    o->gil.cond = o->gil.switch_number + 8;
    return bad ? -1 : 0;
}

int pyabi_from_debug_offsets(const uint8_t *dbg, size_t len, uint32_t version,
                             struct py_layout *out, struct app_err *err)
{
    int minor = (int)((version >> 16) & 0xFF);
    const struct py_abi *abi = pyabi_for_minor(minor);
    const struct py_debug_shape *s = abi ? abi->debug : NULL;

    if (!s)
        return app_err_set(err, APP_E_VERSION, "no _Py_DebugOffsets layout known for Python 3.%d",
                           minor);
    if (len < 600 || memcmp(dbg, "xdebugpy", 8) != 0 || dbg_u64(dbg, 8) != version)
        return app_err_set(err, APP_E_PARSE, "_Py_DebugOffsets missing or inconsistent");
    if (dbg_u64(dbg, 16) != 0)
        return app_err_set(err, APP_E_VERSION, "free-threaded Python builds are not supported yet");
    memset(out, 0, sizeof(*out));
    out->minor = minor;
    out->gil = abi->layout.gil; /* the GIL struct offsets are overwritten below */
    out->names = abi->layout.names;
    out->rt.gil = PYABI_NONE;
    out->is.threads_main = PYABI_NONE;
    out->is.code_gen = s->is_code_gen ? (int32_t)dbg_u64(dbg, s->is_code_gen) : PYABI_NONE;
    out->ts.cframe = PYABI_NONE;
    out->ts.gil_flag = s->holds_gil_int ? PY_GILFLAG_INT : PY_GILFLAG_STATUS;
    out->ts.gil_flag_off =
        s->holds_gil_int ? s->holds_gil_int : (int32_t)dbg_u64(dbg, s->ts_status);
    out->fr.owner_gen = 1;
    out->fr.owner_skip = s->fr_owner_skip;
    out->fr.state = PYABI_NONE;
    out->fr.entry = PYABI_NONE;
    out->fr.code_tagged = s->fr_code_tagged;
    if (dbg_fill_core(dbg, s, out) < 0 || dbg_fill_frames(dbg, s, out) < 0 ||
        dbg_fill_objects(dbg, s, out) < 0)
        return app_err_set(err, APP_E_PARSE, "_Py_DebugOffsets of Python 3.%d failed validation",
                           minor);
    if (s->is_threads_main)
        out->is.threads_main = (int32_t)dbg_u64(dbg, s->is_threads_main);
    else if (s->threads_main_rel)
        out->is.threads_main = (int32_t)(out->is.threads_head + (uint32_t)s->threads_main_rel);
    return 0;
}
