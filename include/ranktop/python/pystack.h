/* Remote CPython stack reader: the public face of collectors/python/pyproc.c.
 *
 * A struct pyproc is attached to one process and owned by one thread at a time (the sampler
 * or `ranktop dump`); it is not thread-safe. It never writes into the target and never stops
 * it: every read is bounded and validated (process_vm_readv, or /proc/PID/mem: see rmem.h). */
#ifndef RANKTOP_PYSTACK_H
#define RANKTOP_PYSTACK_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_PYTHON)
#error "ranktop/python/pystack.h belongs to collectors/python/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stdint.h>

#include "ranktop/base/status.h"

struct pyproc;

struct pyframe {
    const char *function; /* co_qualname (3.11+) or co_name (3.8-3.10), UTF-8 */
    const char *file;     /* co_filename, UTF-8 */
    int line;             /* 1-based line, 0 when the table has no line for the offset */
    /* The outermost Python frame of one C-level evaluation call: the native merge replaces
     * each evaluation-loop frame by the Python frames up to and including the next entry frame
     * (3.8-3.10: every frame; 3.11: is_entry; 3.12+: the frame above an entry shim). */
    bool entry;
    /* The code object's identity in the reader's cache: a serial the reader never gives to
     * another. Equal keys and equal lines in two samples of one reader mean equal function,
     * file and line, exactly (no hash): a consumer may reuse what it made of the frame. */
    uint64_t key;
};

enum pythread_state { PYTHREAD_UNKNOWN = 0, PYTHREAD_RUNNING, PYTHREAD_IDLE, PYTHREAD_STOPPED };

struct pythread {
    uint64_t ident;            /* threading.get_ident(): the pthread_t value */
    int tid;                   /* kernel TID in the monitor's PID namespace; 0 when unknown */
    const char *name;          /* Python thread name (threading module); NULL when unknown */
    bool gil;                  /* holds the GIL at sample time */
    enum pythread_state state; /* running (R in /proc), stopped (T, t) or idle */
    int status;                /* 0, or the negative app_status that made us drop this stack */
    bool truncated;            /* the frame cap was hit; frames[] holds the innermost ones */
    /* The thread has no Python frame now (a C-created thread before its first call, or one
     * running only C code): nframes is 0 on purpose. A stack that could not be read whole is
     * never empty with status 0; it has status < 0 instead. */
    bool no_python;
    /* A digest of the frames (each code object's cache identity, line and entry flag): equal
     * keys in two samples of one reader mean equal frames, so a consumer may reuse what it
     * made of the last ones (the sampler: its interned stack) without comparing strings. */
    uint64_t chain_key;
    uint32_t nframes;
    const struct pyframe *frames; /* innermost first */
};

struct pysample {
    uint64_t t_mono_ns; /* when the sample started (CLOCK_MONOTONIC) */
    uint32_t nthreads;
    const struct pythread *threads; /* in the interpreter's thread-list order */
    bool gil_locked;                /* some thread held the GIL at sample time */
    unsigned reads;                 /* process_vm_readv calls this sample took */
    unsigned torn;                  /* torn thread walks seen (each retried while time allows) */
    unsigned dropped;               /* thread stacks dropped after every retry failed */
    unsigned reused;     /* thread stacks not read: the GIL shows their thread has not run since */
    unsigned prefetched; /* 3.11+ walks whose first read came in the sample's one shared call */
    /* The generation of the threads' name pointers: a name pointer seen in an earlier sample
     * of the same generation (of any pyproc: generations are unique) still holds the same
     * text, so a caller may compare pointers instead of reading the names again. 0: no such
     * promise (a core). */
    uint64_t names_gen;
};

struct pyproc_opts {
    uint32_t max_frames;  /* per thread; 0 = default (4096) */
    uint32_t max_threads; /* per interpreter; 0 = default (4096) */
    bool main_only;       /* sample the main thread only */
    bool no_names;        /* skip Python thread names */
    bool no_state;        /* skip the /proc running/idle lookup */
};

struct pyproc_stats {
    uint64_t samples;
    uint64_t reads; /* process_vm_readv calls (or /proc/PID/mem reads) */
    uint64_t bytes;
    uint64_t torn;       /* thread walks that had to be retried */
    uint64_t dropped;    /* thread stacks dropped */
    uint64_t reused;     /* thread stacks reused unread (pysample.reused) */
    uint64_t prefetched; /* walks that took their first read from the shared call */
    uint64_t code_hits, code_misses;
    /* How the target's memory is read (README, "Reading stacks"): "process_vm_readv" or
     * "/proc/PID/mem", and why the latter ("process_vm_readv: ENOSYS"; NULL for the former).
     * reader is NULL until a read decided it. Static strings. */
    const char *reader, *reader_why;
};

/* Attaches to pid: locates _PyRuntime, detects the version and picks the layout. Reads only.
 * opts may be NULL. Returns 0 and *out, or a negative app_status with a one-line reason in err
 * (APP_E_NOTFOUND no such process, APP_E_PERM, APP_E_NOTPY, APP_E_VERSION, APP_E_ARCH...). */
int pyproc_open(int pid, const struct pyproc_opts *opts, struct pyproc **out, struct app_err *err);

/* Takes one sample of every thread. *out is borrowed: valid until the next pyproc_sample or
 * pyproc_free. Returns 0, APP_E_GONE when the process exited, APP_E_STARTING / APP_E_EXITING
 * while the interpreter is not running, or another negative status. */
int pyproc_sample(struct pyproc *p, const struct pysample **out, struct app_err *err);

/* One sample of the one thread whose ident is given (of any interpreter, main_only
 * notwithstanding): the native sampler reads a thread's Python stack while that thread is
 * stopped, so the two stacks it merges are of one instant. Returns that thread when its stack
 * was read whole, else NULL; borrowed as pyproc_sample's output is. */
const struct pythread *pyproc_sample_thread(struct pyproc *p, uint64_t ident);
void pyproc_free(struct pyproc *p);

/* One argument, local or cell/free variable of a frame, as `dump --locals` shows it. */
enum pylocal_kind { PYLOCAL_ARG, PYLOCAL_LOCAL, PYLOCAL_CELL };

struct pylocal {
    char *name; /* UTF-8 */
    char *type; /* the value's type name ("int", "list", "Foo"); "?" when unreadable */
    char *repr; /* a bounded rendering: "42", "'abc'", "[1, 2, ...] (1000 items)",
                 * "<Foo at 0x7f...>", "<unreadable: ...>" when it could not be read whole */
    enum pylocal_kind kind;
};

/* The locals of one Python frame of one thread, innermost frame first. */
struct pylocals_frame {
    char *function, *file; /* as pyframe's */
    int line;
    int status; /* 0, or why this frame's locals are missing (APP_E_STALE: it moved) */
    uint32_t nlocals;
    struct pylocal *locals; /* in the code object's order: arguments first */
};

struct pylocals {
    uint32_t nframes;
    struct pylocals_frame *frames;
};

/* Reads the arguments and locals of every Python frame (at most max_frames; 0: 256) of the
 * thread whose ident is given, now, from outside: reads only, every read bounded; a value that
 * cannot be read whole is shown as unreadable, never guessed. Returns 0 and *out (free with
 * pylocals_free), or a negative status (APP_E_NOTFOUND: no such thread; APP_E_VERSION: a
 * build whose layout is not known, such as free-threaded ones). */
int pyproc_locals(struct pyproc *p, uint64_t ident, uint32_t max_frames, struct pylocals **out,
                  struct app_err *err);
void pylocals_free(struct pylocals *l);

/* Turns the /proc running/idle lookup (pyproc_opts.no_state) on or off from the next sample:
 * the engine reads the state only while on-CPU samples are wanted. */
void pyproc_set_state(struct pyproc *p, bool on);

/* Adds a read of the 4 bytes at addr (0: none) to every later sample's first system call, so
 * that a word kept beside the stacks (the engine's gc.collecting) costs no call of its own;
 * the range goes last, where failing loses only itself. pyproc_watched gives the word as the
 * last sample that read it did; false when that read failed. */
void pyproc_watch(struct pyproc *p, uint64_t addr);
bool pyproc_watched(const struct pyproc *p, int32_t *val);

/* "3.11.7"; borrowed, valid for the life of p. */
const char *pyproc_version(const struct pyproc *p);
/* PY_VERSION_HEX of the target (0x030b07f0). */
uint32_t pyproc_version_hex(const struct pyproc *p);
void pyproc_get_stats(const struct pyproc *p, struct pyproc_stats *st);

/* The reader a new pyproc of another process would start with (see pyproc_stats.reader), from
 * a read of ranktop's own memory made once per process; why is NULL for process_vm_readv.
 * For what `ranktop ls` says before reading any target. Static strings. */
const char *pyproc_reader_probe(const char **why);

/* Opens a reader over an ELF core (ranktop/proc/corefile.h) of a Python process: locates libpython
 * or the executable among the core's mapped files and _PyRuntime in it, as pyproc_open does for
 * a live process. pyproc_sample then reads the process as it was when the core was written
 * (TIDs from the core, no running/idle state). core must outlive *out. Returns 0, or
 * APP_E_NOTPY / APP_E_NOTFOUND (a file the core needs is not on this machine) / APP_E_VERSION
 * with a line in err. */
struct corefile;
int pyproc_open_core(const struct corefile *core, const struct pyproc_opts *opts,
                     struct pyproc **out, struct app_err *err);

/* The supported range as text, for error messages ("3.8 to 3.14"). */
const char *pyproc_supported_range(void);

#endif
