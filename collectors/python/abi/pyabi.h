/* What the reader knows about each CPython minor version's ABI (x86-64 and aarch64: the same
 * offsets on both; check_pyabi_arch compares the compiled ones with offsetof() on each minor's
 * headers for the architecture built for): every structure offset the stack reader, the
 * thread-name walk and the GIL prober use.
 *
 * There is one descriptor per minor version, in pyabi_versions.c. 3.8-3.13 carry compiled
 * tables verified against live interpreters; 3.13 and later also describe their own layout in
 * _Py_DebugOffsets, which pyabi_debug.c parses with the slot order recorded in the minor's
 * descriptor, because that struct changes shape between minors (3.15 even between its
 * pre-releases: a minor may list several shapes, and the one the target's values fit is taken).
 * Free-threaded builds (3.13t and later) are read only through _Py_DebugOffsets: their object
 * header is 16 bytes larger, so every object field moves. Supporting a new minor means adding
 * its descriptor there and nothing elsewhere. All offsets are bytes from the start of
 * the struct named by the sub-struct; the constants below are the same in every supported
 * version. */
#ifndef RANKTOP_PYABI_H
#define RANKTOP_PYABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/base/status.h"

#define PYABI_NONE (-1)

/* Oldest and newest minor with a descriptor; pyabi_versions.c checks its table against them. */
#define PYABI_MIN_MINOR 8
#define PYABI_MAX_MINOR 15

/* At most this many bytes of a PyThreadState are copied; every field used lies below. */
#define PYABI_TSTATE_READ 512

/* Bytes of _Py_DebugOffsets the reader copies before calling pyabi_from_debug_offsets. */
#define PYABI_DEBUG_OFFSETS_MAX 2048

/* Version-independent offsets of the objects the thread-name walk reads. */
#define PYABI_OB_TYPE 8         /* PyObject.ob_type (GIL builds; free-threaded: 24) */
#define PYABI_DICT_USED 16      /* PyDictObject.ma_used */
#define PYABI_DICT_KEYS 32      /* PyDictObject.ma_keys */
#define PYABI_DICT_VALUES 40    /* PyDictObject.ma_values */
#define PYABI_DICT_HDR 48       /* bytes of a PyDictObject */
#define PYABI_TP_BASICSIZE 32   /* PyTypeObject.tp_basicsize */
#define PYABI_TP_FLAGS 168      /* PyTypeObject.tp_flags */
#define PYABI_TP_DICTOFFSET 288 /* PyTypeObject.tp_dictoffset */
#define PYABI_MOD_DICT 16       /* PyModuleObject.md_dict */
#define PYABI_LONG_SIZE 16      /* ob_size (signed digit count) to 3.11, lv_tag from 3.12 */
#define PYABI_LONG_DIGITS 24    /* PyLongObject.ob_digit, 30-bit digits in u32s */

/* tp_flags bits. */
#define PYABI_TPF_INLINE_VALUES (1ul << 2)
#define PYABI_TPF_MANAGED_DICT (1ul << 4)
#define PYABI_TPF_HEAPTYPE (1ul << 9)
#define PYABI_TPF_READY (1ul << 12)

/* dk_kind of a 3.11+ keys object. */
#define PYABI_KIND_GENERAL 0 /* entries {hash, key, value}; the only kind before 3.11 */
#define PYABI_KIND_UNICODE 1 /* entries {key, value} */
#define PYABI_KIND_SPLIT 2   /* entries {key, -}; values live in a PyDictValues */

/* _PyStackChunk (3.11+): previous, size, top, then the frames. */
#define PYABI_CHUNK_PREVIOUS 0
#define PYABI_CHUNK_SIZE 8
#define PYABI_CHUNK_TOP 16
#define PYABI_CHUNK_HDR 24

enum py_gil_flag {
    PY_GILFLAG_NONE,   /* no per-thread flag: use the GIL struct */
    PY_GILFLAG_STATUS, /* bit 5 of the u32 tstate->_status (3.13) */
    PY_GILFLAG_INT,    /* an int tstate->holds_gil (3.14+) */
};

/* Most _Py_DebugOffsets shapes one minor may have (3.15 changed it during its alphas). */
#define PYABI_SHAPES 2

/* Where the GIL drop request lives. */
enum py_drop_kind {
    PY_DROP_UNKNOWN,    /* no descriptor: the prober refuses the version */
    PY_DROP_RUNTIME,    /* an int at runtime + drop_off (3.8) */
    PY_DROP_INTERP,     /* an int at interp + drop_off (3.9-3.12) */
    PY_DROP_TSTATE_BIT, /* bit 0 of the holder's u64 tstate->eval_breaker at drop_off (3.13+) */
};

/* Where gc.collecting lives. */
enum py_gc_kind {
    PY_GC_RUNTIME, /* an int at runtime + gc_off (3.8) */
    PY_GC_INTERP,  /* an int at interp + gc_off (3.9-3.12) */
    PY_GC_DEBUG,   /* interp + the offsets the target's _Py_DebugOffsets gives (3.13+) */
};

struct py_runtime_offsets { /* _PyRuntimeState */
    uint32_t interp_head, finalizing;
    int32_t gil; /* runtime-wide GIL struct (<=3.11) or PYABI_NONE */
};

struct py_interp_offsets { /* PyInterpreterState */
    uint32_t next, id, threads_head, modules;
    int32_t threads_main; /* 3.13+: the main thread's tstate */
    int32_t gil_ptr;      /* 3.12+: the pointer interp->ceval.gil */
    int32_t code_gen;     /* 3.14+: _code_object_generation */
};

struct py_tstate_offsets { /* PyThreadState */
    uint32_t size, next, interp, thread_id;
    int32_t native_id;      /* 3.11+ */
    int32_t frame;          /* 3.8-3.10 frame, 3.13+ current_frame */
    int32_t cframe;         /* 3.11/3.12: _PyCFrame *cframe */
    int32_t cframe_current; /* offset of current_frame inside _PyCFrame */
    int32_t datastack;      /* 3.11+: newest _PyStackChunk */
    int32_t gil_flag_off;
    enum py_gil_flag gil_flag;
};

struct py_frame_offsets { /* PyFrameObject (<=3.10) or _PyInterpreterFrame (3.11+) */
    bool object;          /* PyFrameObject chain */
    uint32_t size, prev, code, instr, owner;
    int32_t tlbc;     /* free-threaded 3.14+: int32 tlbc_index, the copy instr is in; 0: none */
    bool lasti_units; /* 3.10: f_lasti counts 2-byte code units */
    bool code_tagged; /* 3.14+: f_executable is a _PyStackRef */
    int owner_gen;    /* FRAME_OWNED_BY_GENERATOR */
    int owner_skip;   /* owners >= this are not Python code (3.12+), else 256 */
    /* Where a walk may end. 3.8-3.10: `state` is f_executing (a char that is 1 while the
     * frame runs) or, with state_enum, the 3.10 f_state (EXECUTING 0 or UNWINDING 2); a frame
     * in the chain with any other value was freed under the reader. 3.11: `entry` is is_entry,
     * set on the bottom frame of every thread. PYABI_NONE where the version has no such field
     * (3.12+ end on an entry frame of an owner >= owner_skip instead). */
    int32_t state, entry;
    bool state_enum;
};

struct py_code_offsets { /* PyCodeObject */
    uint32_t filename, name, linetable, firstlineno;
    int32_t qualname;       /* 3.11+ */
    int32_t code_adaptive;  /* 3.11+ inline bytecode */
    int32_t firsttraceable; /* 3.11+ */
    int32_t tlbc;           /* free-threaded 3.14+: _PyCodeArray *co_tlbc; 0: none */
    uint32_t read;          /* bytes of the code header we read */
};

struct py_str_offsets { /* PyUnicodeObject */
    uint32_t length, state, ascii_size, compact_size;
    /* How far state's kind/compact/ascii bits sit above bits 2/5/6: 8 bits more (6 = 8 - 2)
     * in free-threaded 3.14+, where `interned` is a byte of its own. */
    uint32_t state_shift;
};

struct py_bytes_offsets { /* PyBytesObject */
    uint32_t size, sval;
};

/* _gil_runtime_state, and the drop request and gc.collecting the prober reads beside it. */
struct py_gil_offsets {
    uint32_t last_holder, locked, switch_number, cond;
    enum py_drop_kind drop;
    int32_t drop_off;
    enum py_gc_kind gc;
    int32_t gc_off; /* PY_GC_DEBUG: slot of interpreter_state.gc in _Py_DebugOffsets */
    /* PY_GC_DEBUG: slots of interpreter_state.size and gc.collecting (gc.size is the slot
     * before the latter) in _Py_DebugOffsets. */
    int32_t gc_slot_is_size, gc_slot_coll;
};

/* Dict, int, type and instance-attribute layouts for the threading._active walk. */
struct py_names_offsets {
    bool keys_new;           /* 3.11+ keys header: log2 sizes, dk_kind, 32 bytes */
    uint32_t keys_nentries;  /* dk_nentries in the keys header */
    int32_t values_ptr;      /* 3.11: PyDictValues * in front of the object */
    int32_t dict_ptr;        /* 3.11+: managed dict pointer in front of the object */
    bool dict_ptr_tagged;    /* 3.12: an odd dict_ptr is (values - 1) */
    bool inline_values;      /* 3.13+: values follow the object (Py_TPFLAGS_INLINE_VALUES) */
    uint32_t values_off;     /* values[] inside PyDictValues: 3.13 adds a 4-byte header */
    uint32_t ht_cached_keys; /* PyHeapTypeObject: shared keys of the instances */
    bool long_tag;           /* 3.12+ ints: digit count in lv_tag >> 3, sign in the low bits */
    bool off; /* not walked: free-threaded builds, or type layouts the target does not confirm */
};

/* The offsets one target uses, whether compiled or read from its _Py_DebugOffsets. */
struct py_layout {
    int minor;
    bool free_threaded; /* no GIL to read; thread names are not walked */
    uint32_t ob_type;   /* PyObject.ob_type */
    struct py_runtime_offsets rt;
    struct py_interp_offsets is;
    struct py_tstate_offsets ts;
    struct py_frame_offsets fr;
    struct py_code_offsets co;
    struct py_str_offsets str;
    struct py_bytes_offsets bytes;
    struct py_gil_offsets gil;
    struct py_names_offsets names;
};

/* Byte offsets, inside _Py_DebugOffsets, of the fields the reader takes from it. The struct
 * is a cookie followed by u64 slots whose order is fixed within a minor version only. */
struct py_debug_shape {
    uint16_t rt_finalizing, rt_interp_head;
    uint16_t is_size, is_id, is_next, is_threads_head, is_threads_main, is_modules, is_gil_ptr,
        is_gil, is_gil_locked, is_gil_holder, is_code_gen;
    uint16_t ts_size, ts_next, ts_interp, ts_frame, ts_thread_id, ts_native_id, ts_datastack,
        ts_status;
    uint16_t fr_size, fr_prev, fr_exec, fr_instr, fr_owner;
    uint16_t co_size, co_filename, co_name, co_qualname, co_linetable, co_firstlineno, co_adaptive;
    uint16_t ob_size, ob_type, str_size, str_state, str_length, str_ascii_size, bytes_size,
        bytes_ob_size, bytes_sval;
    /* 0 where the shape has no such slot: interpreter_state.gc and gc.collecting (3.15: the gc
     * group moves with the shape), thread_state.holds_gil (3.15), the free-threaded
     * interpreter_frame.tlbc_index and code_object.co_tlbc (3.14+), heap_type_object.
     * ht_cached_keys (3.15), debugger_support.eval_breaker (3.14+). */
    uint16_t is_gc, gc_coll, ts_holds_gil, fr_tlbc, co_tlbc, ht_cached_keys, eval_breaker;
    /* 3.15: type_object.tp_flags, tp_basicsize, tp_dictoffset, checked against the constants
     * the thread-name walk uses (0: not in the shape). */
    uint16_t tp_flags, tp_basicsize, tp_dictoffset;
    /* Not exported by that minor; taken from its headers. _co_firsttraceable lies this many
     * bytes before co_code_adaptive (GIL build, free-threaded build: co_tlbc sits between). */
    int32_t co_firsttraceable_back, co_firsttraceable_back_ft;
    int32_t threads_main_rel; /* interp threads.main relative to threads.head, 0 if absent */
    int32_t holds_gil_int;    /* tstate offset of an int holds_gil (3.14), 0 if absent */
    int fr_owner_skip;
    bool fr_code_tagged;   /* f_executable is a _PyStackRef (3.14) */
    uint32_t str_shift_ft; /* py_str_offsets.state_shift of the free-threaded build */
};

/* Everything known about one minor version. */
struct py_abi {
    /* The compiled offsets. When `compiled` is false only minor, gil's drop and gc parts and
     * names are set: the rest must come from the target's _Py_DebugOffsets. */
    struct py_layout layout;
    bool compiled;
    /* 3.13+: the shapes of _Py_DebugOffsets, newest first, NULL-padded; else all NULL. */
    const struct py_debug_shape *debug[PYABI_SHAPES];
};

/* The descriptor of 3.<minor>; NULL for minors outside PYABI_MIN_MINOR..PYABI_MAX_MINOR. */
const struct py_abi *pyabi_for_minor(int minor);

/* Fills out from a copy of the target's _Py_DebugOffsets (`dbg`, `len` bytes, read from
 * _PyRuntime + 0) for PY_VERSION_HEX `version`, with the names and GIL-side parts of that
 * minor's descriptor, using the first of the minor's shapes whose values validate. Pure.
 * Returns 0, APP_E_VERSION when the minor has no known shape or none of its shapes fits the
 * values (an unknown pre-release or a garbled copy: never guessed), or APP_E_PARSE when the
 * cookie or version is missing. */
int pyabi_from_debug_offsets(const uint8_t *dbg, size_t len, uint32_t version,
                             struct py_layout *out, struct app_err *err);

#endif
