/* Internals of the stack reader shared by pyproc.c (attach, sample loop), pywalk.c (frame
 * walks) and pytask.c (TIDs, thread states, names), and by unit tests that drive the reader
 * on memory images. Everything here belongs to the one thread that owns the struct pyproc. */
#ifndef RANKTOP_PYPROC_PRIV_H
#define RANKTOP_PYPROC_PRIV_H

#include "pycode.h"
#include "abi/pyabi.h"
#include "ranktop/python/pystack.h"
#include "ranktop/proc/rmem.h"

#include <time.h>

#define PYPROC_DEFAULT_FRAMES 4096
#define PYPROC_DEFAULT_THREADS 4096
#define PYPROC_MAX_INTERPS 256
#define PYPROC_TSTATE_MAX PYABI_TSTATE_READ
#define PYPROC_MAX_CHUNKS 64

/* A frame as the walk found it, before its code object is resolved. */
struct pyrawframe {
    uint64_t code; /* remote PyCodeObject */
    long q;        /* byte offset of the current instruction; -1 = not started */
    int is_gen;    /* owned by a generator (never "incomplete") */
    int entry;     /* outermost frame of a C-level evaluation call (pyframe.entry) */
};

#define PYHINT_MAX 32 /* off-chunk frames fetched in a walk's first call: shims, generators */
#define PYHINT_OLD 8  /* older data-stack chunks fetched in a walk's first call */
#define PYFETCH_IOV (3 + PYHINT_MAX + PYHINT_OLD) /* ranges of one walk's first call */

/* What the last walk of one thread learnt, so that the next one can fetch everything it
 * needs in its first system call: frames found outside the data-stack chunks, and the size
 * of the newest chunk (how far a read of it may run). */
/* The GIL as one sample read it before walking any thread. CPython bumps switch_number every
 * time a thread other than last_holder takes the GIL, so two reads with equal switches and
 * holder prove that no other thread ran Python in between (pyreuse.c). */
struct pygilview {
    bool known, locked;
    uint64_t holder, switches;
};

/* A thread's last whole walk (its raw frames) with the GIL view read before it: reused while
 * the GIL shows that the thread has not run since (pyreuse.c). */
struct pyprev {
    struct pyrawframe *raw;
    uint32_t n, cap;
    bool ok, truncated, no_python;
    bool confirmed; /* the walk before it found the same frames */
    uint64_t ident, interp, switches, holder;
};

/* The last resolution of one thread's walk (pysample.c, resolve_frames). raw, serial, out and
 * frames are end-aligned in walk order: the walk's raw frame r places from its outermost is
 * raw[cap - 1 - r], frame o (outermost first) is frames[cap - 1 - o], so the unchanged outer
 * part of a new walk lines up with them from the outer end, and the frames copy out as one
 * block. */
struct pyresolved {
    struct pyrawframe *raw; /* the raw frames, as above */
    uint64_t *serial;       /* serial of each raw frame's code-cache entry */
    int32_t *out;           /* each raw frame's frame (outermost-first index), -1 when hidden */
    struct pyframe *frames; /* the frames it gave */
    uint64_t *key;          /* key[o]: the chain key folded over frames 0..o */
    uint64_t *run_code;     /* runs of equal codes over the raw frames, outermost first: */
    uint32_t *run_start;    /* each run's code and first frame r; nrun of them */
    uint64_t changes;       /* the code cache's `changes` when this was stored */
    uint32_t n, nout, cap, nrun;
};

struct pyhint {
    uint64_t ts; /* the thread's PyThreadState address */
    uint64_t addr[PYHINT_MAX];
    int n;
    uint64_t chunk, chunk_size; /* the newest chunk and its allocated size; 0 unknown */
    uint64_t root;              /* 3.11+: the root chunk the last whole walk ended in; 0 none */
    /* 3.11+: the chunks older than the newest that the last whole walk loaded, with the
     * bytes it used of each, fetched again in the next walk's first call. */
    uint64_t old_addr[PYHINT_OLD];
    size_t old_len[PYHINT_OLD];
    int nold;
    /* 3.11+: this thread's first call, made ahead in one system call with the other threads'
     * (pywalk_prefetch): the ranges asked for and, in `stash`, the bytes that came back. */
    struct rmem_iov fetch[PYFETCH_IOV];
    int nfetch;
    bool fetched;         /* every range of `fetch` was read; consumed by the thread's next walk */
    uint64_t fetched_seq; /* the sample (pyproc walk_seq) the bytes were read in */
    uint64_t walked_seq;  /* the last sample that walked this thread (not reused) */
    uint8_t *stash;       /* the small ranges, one after the other */
    size_t stash_cap;
    int8_t fetch_slot[PYFETCH_IOV]; /* chunk ranges: the walk's chunk slot; else -1 */
    uint8_t *cbuf[1 + PYHINT_OLD];  /* chunk ranges, swapped into the walk's slots */
    size_t ccap[1 + PYHINT_OLD];
    uint64_t *chain; /* 3.8-3.10: the last whole walk's frame addresses, innermost first */
    uint32_t nchain;
    uint8_t base_misses;      /* 3.8-3.10: samples in a row that refused a new outermost frame */
    uint64_t base_miss_epoch; /* the sample (code-cache epoch) of the last one */
    struct pyprev prev;
    struct pyresolved res;
};

/* How one walk ended besides its frame count. */
struct pywalk_out {
    bool truncated; /* the frame cap was hit */
    bool no_python; /* the thread has no Python frame: 0 frames on purpose */
};

struct pytid {
    uint64_t ident;
    int tid;
};

struct pyname_cache {
    uint64_t *idents;
    char **names;
    size_t n;
};

/* Copies of one interpreter's thread states, taken at the start of a sample. */
struct tslist {
    uint8_t (*copy)[PYPROC_TSTATE_MAX];
    uint64_t *addr;
    struct rmem_iov *iov;
    size_t n, cap;
    uint64_t interp; /* the interpreter whose whole list this is; 0: none (partial, torn) */
    bool preread;    /* copy[] was read again in this sample's first call (read_runtime) */
};

/* A thread ident threading._active did not name: looked for again after retry_ns, with a
 * back-off, because a new thread enters _active a little after its first Python frame. */
struct pyname_miss {
    uint64_t ident, retry_ns;
    unsigned tries;
};

struct pyproc {
    int pid;
    struct rmem *mem;
    struct py_layout L;
    struct pyproc_opts opts;
    bool only; /* pyproc_sample_thread: sample only the thread `only_ident` */
    uint64_t only_ident;
    uint32_t version_hex;
    char version[24];
    uint64_t runtime;     /* remote &_PyRuntime */
    uint64_t pycode_type; /* remote &PyCode_Type, 0 if unknown */
    uint64_t asyncio_dbg; /* 3.14+: remote &_AsyncioDebug (pyasync.c); 0 not located yet */
    size_t asyncio_nmaps; /* mappings at the last search that found none: unchanged, not redone */
    uint64_t code_gen;    /* 3.14+: interp->_code_object_generation at the last sample */
    uint64_t pred_interp; /* the first interpreter and its GIL (3.12+) at the last sample: */
    uint64_t pred_gilp;   /* the next one copies them with the runtime's fields */
    uint64_t watch_addr;  /* pyproc_watch: read last in the runtime's call; 0 none */
    int32_t watch_val;
    bool watch_ok; /* watch_val is what the last call that read the runtime found */
    struct pycode_cache codes;

    /* Output of the last sample (borrowed by callers). */
    struct pysample sample;
    struct pythread *threads;
    size_t threads_cap;
    struct pyframe *frames;
    size_t frames_len, frames_cap;

    /* Scratch for one walk. */
    struct tslist ts;
    uint64_t main_interp; /* runtime->interpreters.main as the last sample read it; 0 unknown */
    uint8_t tsfresh[PYPROC_TSTATE_MAX]; /* the thread state as the last walk re-read it */
    struct pyhint *hints;
    size_t nhints, caphints;
    /* hints by thread-state address: open addressing, each slot a hint index + 1 (0 empty);
     * hix_cap a power of two at least twice nhints (pywalk_hint) */
    uint32_t *hix;
    size_t hix_cap;
    struct pyrawframe *raw;
    uint64_t *raw_codes;
    struct pycode **raw_res;
    uint8_t *chunk[PYPROC_MAX_CHUNKS];
    size_t chunk_cap[PYPROC_MAX_CHUNKS];
    uint64_t *chain_new; /* 3.8-3.10: this walk's frame addresses */
    uint8_t *chain_buf;  /* 3.8-3.10: frames fetched ahead in one call */
    uint8_t *span_buf;   /* ... as the page ranges that call read */
    size_t span_cap;

    /* Thread identity. */
    long pthread_tid_off; /* offset of the TID inside glibc's struct pthread; -1 unknown */
    struct pytid *tids;   /* ident -> kernel TID (pre-3.11), target namespace */
    size_t ntids;
    int *ns_inner, *ns_outer; /* TID translation when the target is in another PID ns */
    size_t nns;
    bool ns_differs;
    int ns_pid; /* the target's PID inside its own namespace */
    struct pyname_cache names, names_prev;
    uint64_t names_sample;   /* sample count at the last refresh */
    uint64_t names_gen;      /* pysample.names_gen: new at each refresh, unique in the process */
    struct pyname_miss *neg; /* idents not in threading._active when last looked for */
    size_t nneg;

    /* The process's CPU clock: when it has not moved since just before the last sample, no
     * thread has run since, and that sample, if whole, is still the truth (pysample.c). */
    clockid_t cpu_clock;
    bool cpu_clock_ok;
    bool last_whole; /* the last sample read every thread whole, as the one before it */
    uint64_t cpu_before_last;
    /* CPU clock reads skipped while the process keeps moving (pysample.c clock_due): the
     * count of reads in a row that found it moved, and reads still to skip. */
    uint32_t moved_streak, clock_skip;
    uint64_t cpu_seen;    /* the clock at its last read */
    uint64_t last_digest; /* the thread idents and chain keys of the last sample */

    /* A core (pycore.c): pid is 0, and the kernel TIDs of its threads are these; NULL else. */
    int *core_tids;
    size_t ncore_tids;
    /* A core: the frame starts pycore_frame_below stepped through in the data-stack chunk
     * whose first frame is at ds_first, in order (a core's memory does not change, so they
     * stay true: each chunk is stepped through once), and the last code's frame size. */
    uint64_t *ds_starts, ds_first, ds_code, ds_code_bytes;
    size_t nds_starts, ds_cap;

    uint64_t stat_samples, stat_torn, stat_dropped, stat_reused, stat_prefetched;
    uint64_t walk_seq; /* samples begun: what a hint's fetched_seq and walked_seq count */
};

/* Opens a reader over an already-located runtime (used by pyproc_open and by image tests):
 * takes ownership of mem. The layout is chosen from version_hex, using the target's
 * _Py_DebugOffsets for 3.13+. */
int pyproc_open_mem(struct rmem *mem, int pid, uint64_t runtime, uint64_t pycode_type,
                    uint32_t version_hex, const struct pyproc_opts *opts, struct pyproc **out,
                    struct app_err *err);

/* The target's PY_VERSION_HEX: from the 3.13+ debug offsets at runtime, Py_Version (3.11+),
 * the version text of elf (the object at path, loaded with bias), its .bss, or path's name;
 * 0 when none says. pylocate.c. */
struct elf_info;
uint32_t pylocate_version(struct rmem *m, const struct elf_info *elf, const char *path,
                          uint64_t runtime, uint64_t bias);

/* Cores of 3.12+ (pycore.c): the data-stack frame directly under `end` (a frame's start, or
 * the thread's datastack_top), found by stepping up its chunk frame by frame (co_framesize),
 * in the thread state p->tsfresh holds; *below 0 when end is the outermost frame. What a walk
 * takes where an entry frame on a C stack the core lacks (gdb writes zeros for a thread stack
 * it cannot read whole) hides its `previous`. 0 or APP_E_STALE. */
int pycore_frame_below(struct pyproc *p, uint64_t end, uint64_t *below);

/* Walks one thread's frames into p->raw. The thread state is re-read (from 3.11 in the same
 * system call as the top frame and the newest data-stack chunk); `guess` is an earlier copy
 * of it, which says where those lie and which thread must still be there. A retry passes the
 * copy the last attempt left in p->tsfresh. Returns the number of frames, or a negative
 * status: APP_E_STALE when the chain is torn or does not end where a thread's stack ends. */
int pywalk_thread(struct pyproc *p, uint64_t tsaddr, const uint8_t *guess, struct pywalk_out *o);

/* The walk hint of the thread whose state is at ts; created on first use when `create`,
 * else NULL when there is none. */
struct pyhint *pywalk_hint(struct pyproc *p, uint64_t ts, bool create);
/* Frees what a hint owns. */
void pywalk_hint_free(struct pyhint *h);

/* 3.11+: makes the first system call of the walks of n threads (states at tsaddr[i], copies
 * guess[i] as the thread list just read them) in one call, so that each walk that follows
 * finds its bytes already read; a walk whose ranges differ from what was fetched, or that were
 * not all read, reads for itself as before. Does nothing for 3.8-3.10. One thread alone gains
 * the code headers its last walk ran, read in its own first call. */
void pywalk_prefetch(struct pyproc *p, const uint64_t *tsaddr, const uint8_t *const *guess, int n);

/* The same first calls, planned into all[nall..cap) for a call the caller makes (the
 * runtime's, pysample.c): returns the new count. Then pywalk_prefetch_done(p, done) with the
 * number of leading ranges of that call that were read whole, or pywalk_prefetch_drop(p)
 * when what was read must not be used (the thread list changed under it). */
int pywalk_prefetch_plan(struct pyproc *p, const uint64_t *tsaddr, const uint8_t *const *guess,
                         int n, struct rmem_iov *all, int nall, int cap);
void pywalk_prefetch_done(struct pyproc *p, int done);
/* Whether what was read ahead for the thread at tsaddr in this sample serves the walk that
 * will start from `guess` (else the thread joins pywalk_prefetch's call). */
bool pywalk_prefetch_serves(struct pyproc *p, uint64_t tsaddr, const uint8_t *guess);
void pywalk_prefetch_drop(struct pyproc *p);

/* Keeps the n raw frames a whole walk of thread `ident` (state at tsaddr) left in p->raw,
 * stamped with g, the GIL view read before that walk. */
void pyreuse_note(struct pyproc *p, uint64_t tsaddr, uint64_t interp, uint64_t ident,
                  const struct pygilview *g, int n, const struct pywalk_out *wo);
/* Forgets what pyreuse_note kept for the thread (its last walk failed). */
void pyreuse_forget(struct pyproc *p, uint64_t tsaddr);
/* When g, read now, proves that the thread has not run Python since its kept walk, copies
 * that walk's raw frames into p->raw and returns their count; else -1 (walk it). */
int pyreuse_try(struct pyproc *p, uint64_t tsaddr, uint64_t interp, uint64_t ident,
                const struct pygilview *g, struct pywalk_out *wo);
void pyreuse_free(struct pyprev *v);
/* Whether pyreuse_try would reuse the thread's kept walk (it reads nothing). */
bool pyreuse_ready(struct pyproc *p, uint64_t tsaddr, uint64_t interp, uint64_t ident,
                   const struct pygilview *g);

/* Kernel TID (monitor namespace) for a thread, 0 when unknown. */
int pytask_tid(struct pyproc *p, uint64_t ident, const uint8_t *tstate);
/* Running / idle from /proc/PID/task/TID/stat; forgets cached identities of vanished TIDs. */
enum pythread_state pytask_state(struct pyproc *p, uint64_t ident, int tid);
/* Python thread name for ident, refreshed when an unknown ident appears; NULL if unknown. */
const char *pytask_name(struct pyproc *p, uint64_t interp, uint64_t ident);
void pytask_fini(struct pyproc *p);
/* Reads the namespace facts of the target once at attach. */
void pytask_init(struct pyproc *p);

#endif
