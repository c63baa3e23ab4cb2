/* Per-version layouts of the CPython structures the reader walks (x86-64, GIL builds).
 *
 * 3.8-3.13 come from compiled tables verified against live interpreters; 3.13 and later can
 * also be filled from the target's own _Py_DebugOffsets, parsed with the shape of its minor
 * version. All offsets are bytes from the start of the struct named in the field prefix. */
#ifndef RANKTOP_PYLAYOUT_H
#define RANKTOP_PYLAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/status.h"

#define PYLAYOUT_NONE (-1)

enum py_gil_flag {
    PY_GILFLAG_NONE,   /* no per-thread flag: use the GIL struct */
    PY_GILFLAG_STATUS, /* bit 5 of the u32 tstate->_status (3.13) */
    PY_GILFLAG_INT,    /* an int tstate->holds_gil (3.14+) */
};

struct py_layout {
    int minor;
    /* _PyRuntimeState */
    uint32_t rt_interp_head, rt_finalizing;
    int32_t rt_gil; /* runtime-wide GIL struct (<=3.11) or PYLAYOUT_NONE */
    /* PyInterpreterState */
    uint32_t is_next, is_id, is_threads_head, is_modules;
    int32_t is_threads_main; /* 3.13+: the main thread's tstate */
    int32_t is_gil_ptr;      /* 3.12+: the pointer interp->ceval.gil */
    int32_t is_code_gen;     /* 3.14+: _code_object_generation */
    /* PyThreadState */
    uint32_t ts_size, ts_next, ts_interp, ts_thread_id;
    int32_t ts_native_id;      /* 3.11+ */
    int32_t ts_frame;          /* 3.8-3.10 frame, 3.13+ current_frame */
    int32_t ts_cframe;         /* 3.11/3.12: _PyCFrame *cframe */
    int32_t ts_cframe_current; /* offset of current_frame inside _PyCFrame */
    int32_t ts_datastack;      /* 3.11+: newest _PyStackChunk */
    int32_t ts_gil_flag_off;
    enum py_gil_flag ts_gil_flag;
    /* frames: PyFrameObject (<=3.10) or _PyInterpreterFrame (3.11+) */
    bool fr_object; /* PyFrameObject chain */
    uint32_t fr_size, fr_prev, fr_code, fr_instr, fr_owner;
    bool fr_lasti_units; /* 3.10: f_lasti counts 2-byte code units */
    bool fr_code_tagged; /* 3.14+: f_executable is a _PyStackRef */
    int fr_owner_gen;    /* FRAME_OWNED_BY_GENERATOR */
    int fr_owner_skip;   /* owners >= this are not Python code (3.12+), else 256 */
    /* PyCodeObject */
    uint32_t co_filename, co_name, co_linetable, co_firstlineno;
    int32_t co_qualname;       /* 3.11+ */
    int32_t co_code_adaptive;  /* 3.11+ inline bytecode */
    int32_t co_firsttraceable; /* 3.11+ */
    uint32_t co_read;          /* bytes of the code header we read */
    /* PyUnicodeObject, PyBytesObject */
    uint32_t str_length, str_state, str_ascii_size, str_compact_size;
    uint32_t bytes_size, bytes_sval;
    /* _gil_runtime_state */
    uint32_t gil_last_holder, gil_locked, gil_switch, gil_cond;
};

/* The compiled table for 3.<minor> (8..13); NULL for other minors. */
const struct py_layout *pylayout_for_minor(int minor);

/* Fills out from a copy of the target's _Py_DebugOffsets (`dbg`, `len` bytes, read from
 * _PyRuntime + 0) for PY_VERSION_HEX `version`. Pure. Returns 0, APP_E_VERSION when the shape
 * of that minor is unknown, or APP_E_PARSE when the struct fails validation (cookie, sizes,
 * free-threaded builds). */
int pylayout_from_debug_offsets(const uint8_t *dbg, size_t len, uint32_t version,
                                struct py_layout *out, struct app_err *err);

/* At most this many bytes of a PyThreadState are copied; every field used lies below. */
#define PYLAYOUT_TSTATE_READ 512

/* Bytes of _Py_DebugOffsets the reader should copy before calling the function above. */
#define PYLAYOUT_DEBUG_OFFSETS_MAX 2048

#endif
