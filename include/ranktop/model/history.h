/* The recorded timeline of a job: per rank and thread, runs of identical stacks over interned
 * frames and stacks; counter series (device utilisation and memory, host memory, GIL busy %);
 * rank start and exit times.
 *
 * Ownership and threads: a struct history has one writer (the engine's recorder thread) and is
 * read on clones (history_clone: the engine's published views, exporters), so no reader ever
 * holds a lock while it reads. A clone shares what the writer only appends to (sealed runs,
 * series points, the interning tables and strings) and copies the records (ranks, threads,
 * series headers), so it costs O(ranks + threads + series), not O(runs). Times are
 * CLOCK_MONOTONIC nanoseconds. */
#ifndef RANKTOP_HISTORY_H
#define RANKTOP_HISTORY_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_MODEL)
#error "ranktop/model/history.h belongs to src/model/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/model/series.h"

struct hframe {
    const char *function; /* interned */
    const char *file;     /* interned */
    int line;             /* 0 unknown */
    /* A native (C/C++) frame of a --native sample: function is its symbol, or "OBJECT+0xOFF"
     * without one; file is the mapped object's path; line is 0. */
    bool native;
};

struct hstack {
    uint32_t nframes;
    uint32_t first; /* index into history.stack_frames: frame ids, OUTERMOST first */
    uint64_t hash;
};

/* One run: the thread showed `stack` in every sample from t0 to t1 (the last such sample).
 * A run ends at the next sample, which showed another stack (or none: the thread was gone
 * or its stack could not be read, then stack == HSTACK_NONE). */
#define HSTACK_NONE UINT32_MAX
struct hrun {
    uint32_t stack;
    uint64_t t0, t1;
};

struct hthread {
    uint64_t ident;       /* Python thread ident */
    int tid;              /* kernel TID (monitor namespace), 0 unknown */
    char name[64];        /* Python thread name, "" unknown */
    bool main;            /* the interpreter's main thread (of the rank's own process) */
    int worker;           /* pid of the DataLoader-style worker process the thread lives in;
                           * 0 for the rank's own threads. Workers' threads are never main. */
    uint64_t first, last; /* first and last sample that saw it */
    bool gone;            /* no longer present at `last` + one interval */
    bool seen;            /* scratch for the sampler: seen in the current sample */
    /* An asyncio task of the rank (record --async, the monitor's `a`): a pseudo-thread whose
     * stacks are the task's await chain and whose name is the task's. ident is
     * history_task_ident(); task_thread is the ident of the thread running its loop (0
     * unknown). Tasks are never main, and the views of threads leave them out. */
    bool task;
    uint64_t task_thread;
    /* The thread's runs, oldest first: history_run(t, i) for i < nruns. The last run is the
     * open one, the only run a writer still extends (its t1), kept here in open_run; the
     * others are sealed and never change: `sealed` points at them, in a reference-counted
     * buffer (runbuf, private to src/model/) that a clone shares instead of copying, so that a
     * view costs its threads, not its runs. */
    size_t nruns;
    struct hrun open_run;
    const struct hrun *sealed;
    void *runbuf;
};

/* Run i of t (i < t->nruns), in constant time. */
static inline const struct hrun *history_run(const struct hthread *t, size_t i)
{
    return i + 1 < t->nruns ? &t->sealed[i] : &t->open_run;
}

/* Appends a run that starts after t's last one (a history built by hand, or read back): it
 * becomes the open run. Free a thread's runs with history_thread_free_runs. */
void history_run_append(struct hthread *t, uint32_t stack, uint64_t t0, uint64_t t1);
void history_thread_free_runs(struct hthread *t);

/* A rank's key: its pid on this node; for a rank on another host (multi-node), the host's
 * slot above the pid's 22 bits (the engine's engine_key), so that equal pids on two hosts stay
 * two ranks. Shown to people as history_key_pid(key). */
#define HISTORY_KEY_PID_BITS 22
static inline int history_key_pid(int key)
{
    return key & ((1 << HISTORY_KEY_PID_BITS) - 1);
}

struct hrank {
    int pid;  /* the rank's key (see above): its pid on this node */
    int rank; /* -1 unknown */
    char host[64];
    char device[32]; /* "gpu 3", "npu 2.1", "" */
    uint64_t start;  /* first sample */
    uint64_t end;    /* exit time when exited */
    bool exited;
    int exit_code;   /* when exited: the exit code, or -1 (killed by a signal, or unknown) */
    int exit_signal; /* when exited: the signal that killed it, or 0 (normal exit, or unknown) */
    char core[256];  /* where its core went (record_exit's core), "" none or not known */
    char python[24]; /* "3.11.7" */
    struct hthread *threads;
    size_t nthreads, cap;
    /* Task lanes (record --async): an index of the live ones by ident (private to history.c,
     * rebuilt from threads when NULL; a clone has none), the ended lanes folded away so far
     * (history_tasks_fold) and the live tasks of the last read left without a lane (the
     * engine's live-lane cap). */
    void *task_index;
    void *thread_index; /* the threads by (worker, ident), private to history.c like it */
    uint64_t tasks_folded;
    uint32_t tasks_unlaned;
};

/* A numeric time series, exported as a Chrome `C` counter named `name` with one key `key`.
 * Code finds a series by its id (series.h); name and key are what exports write. */
struct hpoint {
    uint64_t t;
    double v;
};

struct hseries {
    enum series_id id; /* SERIES_NONE for a series built by hand without one */
    char name[48];     /* series_name(id), or the device's: "rss", "GIL busy", "gpu3", "gpu3 mem" */
    char key[24];      /* series_key(id): "MiB", "pct", "util_pct", "used_mib" */
    int pid;           /* the rank's pid, or 0 for node-wide series (devices) */
    /* Points, oldest first; pts[0..n) never change once written, and lie in a reference-
     * counted buffer (buf, private to src/model/; NULL in a series built by hand) that a clone
     * shares, so a clone's points are read-only. cap: room from pts on. */
    struct hpoint *pts;
    size_t n, cap;
    void *buf;
};

struct history {
    uint64_t t0;        /* CLOCK_MONOTONIC ns at the start of recording */
    int64_t wall_t0_us; /* wall clock (µs since the epoch) at t0 */
    char host[64];
    /* Interning: frames and stacks are append-only; ids are indexes. */
    struct hframe *frames;
    size_t nframes, frames_cap;
    struct hstack *stacks;
    size_t nstacks, stacks_cap;
    uint32_t *stack_frames;
    size_t nstack_frames, stack_frames_cap;
    void *intern; /* private hash tables (strings, frames, stacks) */
    struct hrank *ranks;
    size_t nranks, ranks_cap;
    struct hseries *series;
    size_t nseries, series_cap;
    uint64_t window_ns;  /* runs ending before now - window are trimmed; 0 keeps all */
    size_t mem_cap;      /* the process's memory cap (bytes, 0 none): see history_budget */
    size_t dropped_runs; /* runs trimmed so far */
    /* Compaction (history_trim): once the tables have doubled since the last one, frames,
     * stacks and strings no run refers to any more are dropped and the rest renumbered. gen
     * counts compactions; stack_remap maps the stack ids of generation gen - 1 to gen's
     * (HSTACK_NONE: dropped), for holders of stack ids to follow (frame ids are not mapped:
     * holders of those drop them). */
    uint64_t gen;
    uint32_t *stack_remap;
    size_t nstack_remap;
    size_t compact_at; /* stacks + frames at the last compaction */
    /* history_memory, the part of it in the interning tables and an estimate of the thread
     * records at the end of the last history_trim, for history_over_budget to tell quickly. */
    size_t trim_bytes, trim_tables, trim_threads;
    uint64_t cap_cut; /* where the last trim to the budget cut (ns; 0 none yet) */
    bool trim_failed; /* the last trim left the history past its budget */
    /* Task lanes: the per-rank cap the engine keeps them to (0: no task reads), ended task
     * lanes folded away in all ranks, and the most live tasks one read left without a lane. */
    size_t task_lane_cap;
    uint64_t tasks_folded;
    uint32_t tasks_unlaned_max;
};

void history_init(struct history *h, uint64_t t0, int64_t wall_t0_us, const char *host);

/* A stack id of generation gen - 1 in generation h->gen, or HSTACK_NONE when it was dropped
 * (or is of an older generation). */
uint32_t history_remap_stack(const struct history *h, uint32_t id);
void history_fini(struct history *h);

/* Interns a stack given innermost-first frames (as the reader returns them). */
uint32_t history_intern_stack(struct history *h, const struct hframe *inner_first, uint32_t n);

/* The parts of it, for a caller that keeps frame ids of unchanged frames from one sample to
 * the next: a frame's id, and a stack from frame ids (outermost first). */
uint32_t history_intern_frame(struct history *h, const struct hframe *f);
uint32_t history_intern_stack_ids(struct history *h, const uint32_t *outer_first, uint32_t n);

/* The rank record for pid (created on first use with the given identity). */
struct hrank *history_rank(struct history *h, int pid, int rank, const char *device);

/* The rank's name for people: "rank 3", or "pid 12788" when the rank is unknown (a pid is never
 * printed as a rank). Writes at most len bytes (NUL included); returns snprintf's length. */
int history_rank_label(const struct hrank *r, char *buf, size_t len);

/* The thread record for ident within r (created on first use). */
struct hthread *history_thread(struct hrank *r, uint64_t ident, int tid, const char *name,
                               bool main);

/* The thread record for ident within worker process `worker` of rank r (created on first
 * use): a worker's threads are kept under the rank it serves, so drilling into the rank
 * shows them, while every view of ranks (main thread, merged tree, verdicts) ignores them. */
struct hthread *history_worker_thread(struct hrank *r, int worker, uint64_t ident, int tid,
                                      const char *name);

/* A task's pseudo-thread ident: stable for one task (its address and name), with the top bit
 * set, which no thread ident (a pthread_t address) has. */
uint64_t history_task_ident(uint64_t addr, const char *name);

/* The pseudo-thread of the asyncio task at addr within r (created on first use): named
 * `name`, its loop running on thread `thread` (0 unknown). Found through a hash index of the
 * rank's live task lanes: constant time, whatever the number of lanes. */
struct hthread *history_task(struct hrank *r, uint64_t addr, const char *name, uint64_t thread);

/* The live (not gone) lane of the task at addr named name within r, or NULL. Constant time. */
struct hthread *history_task_find(struct hrank *r, uint64_t addr, const char *name);

/* Folds away the ended (gone) task lanes of r beyond the newest-ended `keep` (by their last
 * sample; live lanes and threads are never touched): their lanes and runs are dropped and
 * counted in r->tasks_folded and h->tasks_folded. Returns how many were folded. Pointers into
 * r->threads are invalid afterwards when it returns more than 0. */
size_t history_tasks_fold(struct history *h, struct hrank *r, size_t keep);

/* Records that thread t showed `stack` at time t (ns): extends the last run or starts one. */
void history_observe(struct hthread *t, uint32_t stack, uint64_t now);

/* Marks a thread or rank gone / exited at `now`. A rank's exit status, when some collector
 * learns it, goes into exit_code / exit_signal (both unset: "exited (status unknown)"). */
void history_thread_gone(struct hthread *t, uint64_t now);
void history_rank_exit(struct hrank *r, uint64_t now);

/* Appends a point to the series (id, name, pid), creating it on first use with the key
 * series_key(id). name NULL means series_name(id); per-device ids need the device's name. */
void history_counter(struct history *h, enum series_id id, const char *name, int pid, uint64_t t,
                     double v);

/* The series of id for pid (0: node-wide), the first one when several devices share the id;
 * NULL when there is none. Borrowed from h (series.c). */
const struct hseries *history_series(const struct history *h, enum series_id id, int pid);

/* Drops runs and points older than the window and keeps the history within its budget. */
void history_trim(struct history *h, uint64_t now);

/* Bytes the history uses (arrays, strings with malloc's overhead, tables). */
size_t history_memory(const struct history *h);

/* --memory-cap bounds the whole process beyond a fixed base, not the history alone: at its
 * peak the process holds the history, a compaction's new tables (history_trim) and, while a
 * clone still holds the old runs, their renumbered copy, and the exporter's own tables. So the
 * history keeps to a share of the cap, its budget: history_trim trims it below that, and exporters
 * keep their tables within it too (h->mem_cap of a clone is the original's). 0: no cap. */
#define HISTORY_CAP_SHARE 4
size_t history_budget(const struct history *h);

/* Whether the history has grown past its budget since the last history_trim, by what new
 * frames, stacks, strings and thread records cost (further runs aside). Constant time per
 * rank: a writer asks after every sample and trims at once when it says so. After a trim
 * that could not reach the budget (all it holds is live) it says no until the next trim. */
bool history_over_budget(const struct history *h);

/* A copy for an exporter or a view, in O(ranks + threads + series): it shares the original's
 * sealed runs, points, tables and strings (reference-counted: the original's writer never
 * changes what a clone can see, and moves what it must rewrite to new buffers), and stays
 * valid after the original is freed. Any thread may read it while the writer goes on. It is
 * read-only: never intern into it, trim it or append to it (history_keep_ranks may drop its
 * ranks). Free it with history_fini. */
void history_clone(const struct history *h, struct history *out);

/* Keeps only the ranks whose key is among pids[0..n) (every record of such a pid) and their
 * counter series; node-wide series (pid 0) stay. Frames and stacks are left as they are. For
 * a private copy (a clone an exporter writes): pointers into h->ranks are invalid after. */
void history_keep_ranks(struct history *h, const int *pids, size_t n);

/* Frame ids of a stack, outermost first. */
static inline const uint32_t *history_stack_frames(const struct history *h, uint32_t stack)
{
    return h->stack_frames + h->stacks[stack].first;
}

#endif
