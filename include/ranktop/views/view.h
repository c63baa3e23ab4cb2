/* View models behind the monitor's panes: the merged (STAT-style) tree of all ranks' stacks,
 * the hang verdict, the top functions over a window, the rank table's rows (filtered, sorted,
 * ΔRSS against the memory baseline), the memory and GIL panes' rows and the achieved sampling
 * rate (measured over a window of pass counts the caller keeps).
 *
 * Everything here is pure: it reads a history and the live figures of one engine view
 * (ranktop/model/snapshot.h: immutable, so no lock), and a time `now`, and fills a plain struct
 * whose arrays it allocates. No function does I/O, takes a lock or keeps state between calls,
 * so any thread may call them on a history no other thread writes. Strings in the outputs
 * (function and file names, hosts, devices) and frame pointers are borrowed from the history
 * and valid while it lives; arrays are owned by the output and freed by the matching _fini
 * (safe on a zeroed struct and twice in a row). Times are CLOCK_MONOTONIC nanoseconds, as in the
 * history.
 *
 * Ranks are named by view_rank_id(): the job rank when known, else minus the pid, which every
 * text form writes "pid N" (never a pid as a rank). A rank's stack is
 * its interpreter main thread's stack at its last run; a thread that is gone, has no run, or
 * whose last sample could not be read or held no Python frame has no stack (HSTACK_NONE). */
#ifndef RANKTOP_VIEW_H
#define RANKTOP_VIEW_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_VIEWS)
#error "ranktop/views/view.h belongs to src/views/, a layer this one may not use"
#endif

#include "ranktop/model/history.h"
#include "ranktop/model/snapshot.h"
#include "ranktop/model/waits.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VIEW_MAX_NODES 10000                /* default cap on merged-tree nodes */
#define VIEW_MAX_ROWS 10000                 /* cap on top-function rows */
#define VIEW_DEFAULT_INTERVAL_NS 100000000u /* 10 Hz, the engine's default rate */

/* ---- Shared helpers (view.c) ---- */

/* The rank's job rank when known (>= 0), else minus its pid (< 0). */
int view_rank_id(const struct hrank *r);

/* "rank 3" for an id >= 0, "pid 12788" for -12788 (history_rank_label's forms). */
int view_rank_id_label(int id, char *buf, size_t len);

/* A rank's exit for the state column: "exit 1" (exit_code >= 0), "SIGSEGV" (exit_signal > 0;
 * "signal N" for the less common ones), "exited" when the status is unknown. */
int view_exit_text(const struct hrank *r, char *buf, size_t len);

/* The rank's interpreter main thread: a thread flagged main, preferring one still present and
 * then the most recently sampled. NULL when none is flagged. Borrowed from the history. */
const struct hthread *view_main_thread(const struct hrank *r);

/* The name of thread ident of pid ("MainThread" for an unnamed main thread), "?" when the
 * history does not know it. Borrowed from h. */
const char *view_thread_name(const struct history *h, int pid, uint64_t ident);

/* The live figures of pid among a view's n (live may be NULL); NULL if absent. */
const struct engine_rank_live *view_live_of(const struct engine_rank_live *live, size_t n, int pid);

/* Stack of t's last run; HSTACK_NONE when t is NULL or gone, has no run, or the last sample
 * was unreadable, out of range or empty. */
uint32_t view_thread_stack(const struct history *h, const struct hthread *t);

/* Nanoseconds since t's stack last changed: now - t0 of its last run; 0 without runs or when
 * now precedes that run. */
uint64_t view_since_change(const struct hthread *t, uint64_t now);

/* Function-level identity of a stack: a hash of its (function, file) pairs, lines left out,
 * so a thread spinning in one function keeps its key while its line changes. 0 for
 * HSTACK_NONE. Verdicts (hang, stuck state, unchanged ages) compare these, not stack ids. */
uint64_t view_stack_fkey(const struct history *h, uint32_t stack);

/* Nanoseconds since t's stack last changed function-wise: now - t0 of the earliest run of the
 * trailing runs sharing the last run's view_stack_fkey; 0 without runs. */
uint64_t view_since_fchange(const struct history *h, const struct hthread *t, uint64_t now);

/* asyncio: whether stack only shows an event loop waiting for work (innermost, frames of
 * selectors.py, then BaseEventLoop._run_once of asyncio/base_events.py); *outer (may be
 * NULL) gets the number of frames from the outermost down to _run_once included. */
bool view_loop_waiting(const struct history *h, uint32_t stack, uint32_t *outer);

/* Whether task (a live task pseudo-thread with a stack) belongs to the loop thread t runs:
 * its loop's thread is t, or is unknown and t is the rank's main thread. */
bool view_task_on(const struct hrank *r, const struct hthread *t, const struct hthread *task,
                  const struct history *h);

/* Writes the set of ranks compactly into buf (always NUL-terminated when len > 0): sorted,
 * duplicates dropped, runs of two or more consecutive ranks as "a-b": "0,2-5,9"; unknown ranks
 * (ids < 0) last, as "pid N": "0-2,pid 812". When the
 * whole set does not fit, as many leading items as fit are followed by "…(+N)", N the ranks
 * left out ("0-6,8,…(+7)"); if even that does not fit, buf gets "". ranks need not be
 * sorted; n == 0 gives "". Returns the bytes written (without the NUL). */
size_t view_rankset_format(const int *ranks, size_t n, char *buf, size_t len);

/* Same with another ellipsis (e.g. "..." when the terminal is not UTF-8). */
size_t view_rankset_format_ex(const int *ranks, size_t n, char *buf, size_t len,
                              const char *ellipsis);

/* Writes "function (file:line)" with the file's base name ("all_reduce
 * (distributed_c10d.py:1541)"); ":line" is left out when the line is unknown; a native frame
 * is "symbol (object) [native]". Returns the length snprintf would have written. */
int view_frame_format(const struct hframe *f, char *buf, size_t len);

/* ---- Rank table rows (view.c) ---- */

struct view_rank_row {
    size_t idx; /* index into h->ranks */
    int pid;
    int rank;                  /* -1 unknown */
    const char *host, *device; /* borrowed */
    bool exited;
    uint32_t stack;           /* main thread's current stack, HSTACK_NONE */
    const struct hframe *top; /* innermost frame of that stack; NULL without one */
    uint64_t since;           /* ns since the main thread's stack last changed function */
};

struct view_ranks {
    struct view_rank_row *rows;
    size_t n;
};

/* One row per rank record, ordered by rank (unknown last), live before exited, then pid.
 * view_table adds CPU, RSS and GIL figures, the filter and the sort. */
void view_ranks(const struct history *h, uint64_t now, struct view_ranks *out);
void view_ranks_fini(struct view_ranks *out);

/* ---- Counter series (view_table.c) ---- */

/* Latest value of pid's series id; NAN when there is none or it has no point. */
double view_series_last(const struct history *h, enum series_id id, int pid);

/* Change of s over the last span ns: its newest value minus the oldest one at most span
 * before it (the oldest point when the series is shorter than span; 0 when no other point is
 * that close). NAN for a NULL series or one with fewer than two points. */
double view_series_delta(const struct hseries *s, uint64_t span);

/* ---- Memory baseline (view_table.c) ---- */

/* Each rank's RSS when the user took a baseline (key m), or its first RSS reading for a rank
 * the user's baseline does not cover (view_baseline_extend): the reference of the ΔRSS
 * columns. Caller-owned and kept between snapshots; zeroed means no baseline. */
struct view_baseline {
    int *pid;
    double *rss_mib; /* NAN when the rank had no RSS reading then */
    size_t n;
    uint64_t t; /* when it was taken; 0 never */
};

struct view_table;

/* Replaces b with the RSS of every row of t at `now`. */
void view_baseline_set(struct view_baseline *b, const struct view_table *t, uint64_t now);
void view_baseline_fini(struct view_baseline *b);

/* Adds every rank of h that b lacks and whose RSS series has a point, at that series' oldest
 * point: called at each snapshot, it gives a rank its first reading as baseline, so ΔRSS
 * counts from the start until the user takes one. b->t is left as it is. */
void view_baseline_extend(struct view_baseline *b, const struct history *h);

/* rss_mib minus pid's baseline; NAN without a baseline for pid or when either is unknown. */
double view_baseline_delta(const struct view_baseline *b, int pid, double rss_mib);

/* ---- Rank table (view_table.c) ---- */

enum view_sort {
    VIEW_SORT_RANK, /* rank ascending, unknown ranks last */
    VIEW_SORT_CPU,  /* the figures descending, unknown last */
    VIEW_SORT_RSS,
    VIEW_SORT_SINCE,
    VIEW_SORT_GIL,
    VIEW_SORT_COUNT
};

struct view_table_in {
    const char *filter; /* substring of "rank R pid P FRAME"; NULL or "" keeps all rows */
    enum view_sort sort;
    const struct view_baseline *base;    /* NULL: no ΔRSS */
    const struct engine_rank_live *live; /* a view's live figures (borrowed), may be NULL */
    size_t nlive;
    uint64_t stuck_after_ns; /* a live rank unchanged this long is "stuck"; 0: never */
    /* The kind-of-wait rules; NULL: the built-in table. */
    const struct waits *waits;
};

#define VIEW_GIL_HOLDER_PCT 50.0 /* another thread's GIL share the table names */
#define VIEW_IDLE_CPU_PCT 5.0    /* CPU % of one core below which a live rank is "idle" */

/* One row of the rank table: a rank's identity and figures, ready to format. */
struct view_table_row {
    int pid, rank; /* rank -1 unknown */
    size_t hrank;  /* index into h->ranks */
    bool exited;
    double cpu;            /* % of one core, NAN unknown */
    double rss_mib;        /* NAN unknown */
    double drss_mib;       /* RSS minus the baseline, NAN without one */
    double gil;            /* GIL busy %, NAN or negative unknown */
    double gc;             /* % of the last second in garbage collection, NAN or < 0 unknown */
    int64_t dev_mem_mb;    /* device memory, -1 unknown */
    double since_s;        /* seconds the main thread's stack has been unchanged */
    char top[192];         /* innermost frame (view_frame_format), "" without a stack */
    char state[16];        /* "run", "idle" (CPU below VIEW_IDLE_CPU_PCT), "stuck" (unchanged
                              stuck_after_ns), "stopped", or view_exit_text: "exit 1",
                              "SIGSEGV", "exited" */
    char gil_holder[64];   /* the thread other than the main one holding the GIL at least
                              VIEW_GIL_HOLDER_PCT of the time; "" none */
    double gil_holder_pct; /* its share */
    enum wait_kind wait;   /* the main thread's kind of wait (view_rank_wait) */
    char wait_why[160];    /* and why */
};

struct view_table {
    struct view_table_row *rows; /* filtered and sorted; ties by pid */
    size_t n;
};

/* The rank table at `now`: view_ranks with the counter and live figures, filtered and sorted
 * as in asks. Release with view_table_fini(). */
void view_table(const struct history *h, uint64_t now, const struct view_table_in *in,
                struct view_table *out);
void view_table_fini(struct view_table *out);

/* The kind of wait of rank hr: stack (its main thread's current one, or the asyncio task's the
 * verdict shows; HSTACK_NONE none) against the rules w (NULL: built-in), its exit, and the
 * live figures l when there are (NULL: none; the stopped flag, the main thread's state and
 * syscall, the GC flag). why may be NULL. */
enum wait_kind view_rank_wait(const struct history *h, const struct hrank *hr, uint32_t stack,
                              const struct engine_rank_live *l, const struct waits *w, char *why,
                              size_t whylen);

/* ---- Memory and GIL panes (view_panes.c) ---- */

#define VIEW_SPARK_POINTS 512 /* RSS points kept for a memory row's sparkline */
#define VIEW_MEM_WARN_MIB 100 /* ΔRSS above which a memory row is flagged */

struct view_mem_row {
    int rank, pid;
    double rss_mib, drss_mib; /* as in the table row */
    double d60_mib;           /* RSS change over the last 60 s, NAN unknown */
    double uss_mib, swap_mib; /* NAN unknown */
    const double *spark;      /* the last RSS values, oldest first (owned by the view) */
    size_t nspark;
    bool warn; /* grew more than VIEW_MEM_WARN_MIB since the baseline */
};

struct view_memory {
    struct view_mem_row *rows; /* one per table row, in the table's order */
    size_t n;
    double *pool; /* private: sparkline values */
};

/* The memory pane's rows for the ranks of t. Release with view_memory_fini(). */
void view_memory(const struct history *h, const struct view_table *t, struct view_memory *out);
void view_memory_fini(struct view_memory *out);

#define VIEW_GIL_WARN_BUSY 90.0 /* busy % and waiters above which a GIL row is flagged */
#define VIEW_GIL_WARN_WAITERS 1.0

struct view_gil_row {
    int rank, pid;
    bool known; /* false: no GIL figures for this rank (yet) */
    double busy_pct, switches_per_s, waiters;
    double gc_pct;    /* in garbage collection; < 0 unknown */
    bool warn;        /* busy over VIEW_GIL_WARN_BUSY with VIEW_GIL_WARN_WAITERS waiting */
    char shares[400]; /* holder share per thread: "MainThread 80%, worker 20%" */
};

struct view_gil {
    struct view_gil_row *rows; /* one per table row, in the table's order */
    size_t n;
};

/* The GIL pane's rows: each table row's live GIL figures, thread idents named from h. Release
 * with view_gil_fini(). */
void view_gil(const struct history *h, const struct view_table *t,
              const struct engine_rank_live *live, size_t nlive, struct view_gil *out);
void view_gil_fini(struct view_gil *out);

/* ---- Rank view (view_panes.c) ---- */

struct view_rank_thread {
    const struct hthread *t; /* borrowed */
    const char *name;        /* its name; "MainThread" for an unnamed main thread, else "?" */
    int worker;              /* pid of the worker process it lives in; 0: the rank's own */
    bool task;               /* an asyncio task (view_rank_tasks), shown under its thread */
    uint32_t stack;          /* view_thread_stack */
    uint64_t since;          /* view_since_fchange */
};

struct view_rank {
    const struct hrank *r;            /* NULL when no rank has the pid */
    char title[192];                  /* "rank 1  pid 812  gpu 1  Python 3.11.7", "pid 812 ..." */
    struct view_rank_thread *threads; /* main thread first, the others by tid, workers last */
    size_t n;
};

/* The Rank view of the rank with pid (the latest record of that pid): its main thread, or
 * with all_threads every live thread; then its DataLoader-style workers' threads (their main
 * threads, or every thread), after the rank's own. Release with view_rank_fini(). */
void view_rank(const struct history *h, int pid, bool all_threads, uint64_t now,
               struct view_rank *out);
void view_rank_fini(struct view_rank *out);

/* The same with the rank's live asyncio tasks (task pseudo-threads, record --async or the
 * monitor's `a`) when tasks is set: each task right under the thread running its loop (under
 * the main thread when that thread is unknown or not shown), tasks of a thread by name. */
void view_rank_tasks(const struct history *h, int pid, bool all_threads, bool tasks, uint64_t now,
                     struct view_rank *out);

/* ---- Merged tree (view_merge.c) ---- */

enum view_node_kind {
    VIEW_NODE_FRAME,   /* a frame, merged by function and file */
    VIEW_NODE_NOSTACK, /* synthetic top-level node "<no stack>" */
    VIEW_NODE_EXITED,  /* synthetic top-level node "<exited>" */
    VIEW_NODE_THREAD,  /* all-threads mode: top-level node per thread name (function = name) */
};

struct view_merge_opts {
    bool all_threads; /* every live thread of every rank, not just main threads,
                         each under a top-level node of its thread's name */
    const int *pids;  /* only the ranks with these pids (the filtered table's);
                         NULL: every rank (borrowed) */
    size_t npids;
    const uint64_t *collapsed; /* ids of nodes whose children are hidden (borrowed) */
    size_t ncollapsed;
    size_t max_nodes; /* 0 = VIEW_MAX_NODES */
};

/* One node: a frame shared by the stacks passing through it. Stacks and ranks: in main-thread
 * mode each rank gives one stack; with all_threads each live thread gives one, keyed by its
 * rank, so count may exceed nranks. */
struct view_node {
    uint64_t id; /* hash of the (function, file) path from the top: stable across rebuilds */
    int parent;  /* node index; -1 at the top */
    int child;   /* first child; -1 for a leaf */
    int next;    /* next sibling; siblings are in descending count order */
    int depth;   /* 0 at the top */
    enum view_node_kind kind;
    const char *function, *file; /* borrowed; synthetic nodes: "<no stack>" / "<exited>", "" */
    int line;                    /* most common line among the stacks here; 0 unknown */
    int line_min, line_max;      /* range of the known lines; 0 unknown */
    const int *ranks;            /* distinct rank ids through here, sorted (owned by tree) */
    size_t nranks;
    size_t count;         /* stacks through here */
    const int *end_ranks; /* ranks whose stack ends exactly here, sorted, distinct */
    size_t nend_ranks;
    size_t nend;                           /* stacks ending exactly here */
    uint64_t unchanged_min, unchanged_max; /* ns their stacks have been unchanged (exited: since
                                              the exit) */
    /* Odd rank out: this branch is taken by fewer stacks than the biggest sibling branch (or
     * than the stacks ending at the parent), or lies under such a branch. end_odd: stacks end
     * here and the node is odd or they are fewer than those going on to its biggest child. */
    bool odd;
    bool end_odd;
    bool collapsed; /* has children and its id is in opts->collapsed */
};

struct view_tree {
    struct view_node *nodes; /* parents precede their children */
    size_t nnodes;
    int root;     /* first top-level node, -1 when empty; the others follow by `next` */
    int *visible; /* node indexes in drawing order: depth first, collapsed subtrees skipped */
    size_t nvisible;
    size_t nstacks; /* stacks merged */
    bool truncated; /* max_nodes was reached: deeper frames of some stacks were left out */
    int *pool;      /* private: rank arrays */
};

/* Builds the merged prefix tree of the ranks' current stacks. Exited ranks go under
 * "<exited>", ranks (or threads) without a stack under "<no stack>". o may be NULL. out must
 * be released with view_merge_fini() whatever the result. Returns 0, or APP_E_LIMIT when the
 * node cap truncated the tree (which is still consistent and drawable). */
int view_merge(const struct history *h, uint64_t now, const struct view_merge_opts *o,
               struct view_tree *out);
void view_merge_fini(struct view_tree *out);

/* ---- Hang verdict (view_hang.c) ---- */

struct view_hang_in {
    double flat_pts;     /* utilisation range (max - min, points) still flat; 0 = 5 */
    bool ignore_devices; /* judge by stacks alone */
    /* For the odd ranks' kinds of wait: the rules (NULL: built-in) and the live figures
     * (NULL: the stacks and exits alone). */
    const struct waits *waits;
    const struct engine_rank_live *live;
    size_t nlive;
};

struct view_hang_rank {
    int rank; /* view_rank_id */
    int pid;
    uint32_t stack;  /* HSTACK_NONE when it has none */
    uint64_t fkey;   /* view_stack_fkey(stack) */
    char where[160]; /* innermost frame, view_frame_format; "<no stack>" */
    char host[64];   /* its host when that is not this node (multi-node), else "" */
    /* Its kind of wait (view_rank_wait). */
    enum wait_kind wait;
};

struct view_hang {
    bool hang;
    uint64_t since;             /* ns every live rank has kept its stack (min over them) */
    size_t nlive;               /* ranks not exited */
    size_t nmajority;           /* live ranks sharing the most common stack */
    uint32_t stack;             /* that stack (its lowest rank's); HSTACK_NONE when none */
    uint64_t fkey;              /* its view_stack_fkey: ranks are grouped by function */
    char where[160];            /* its innermost frame */
    struct view_hang_rank *odd; /* live ranks with another stack, by rank (owned) */
    size_t nodd;
    int *exited; /* ranks that exited and were not restarted, sorted (owned) */
    size_t nexited;
    size_t ndevices; /* device utilisation series judged over the interval */
    size_t nvarying; /* of those, series that were not flat */
    char text[512];  /* banner when hang: "HANG 42s: 15 ranks in f (a.py:3); odd: rank 3 in
                        g (b.py:12) [data]" (the odd ranks' kind of wait in brackets when
                        known), led by the ranks that died meanwhile: "HANG 42s: rank 3
                        exited (SIGSEGV) 12s ago; 7 ranks in ..."; "" otherwise */
};

/* Judges whether the job hangs at `now`: every live rank's stack unchanged for at least
 * hang_after_ns, the most common stack a real one, and every device utilisation series
 * (SERIES_DEV_UTIL "gpuN", SERIES_NPU_AICORE "npuN.M"; only the ranks' devices when those are
 * known) flat over [now - hang_after_ns, now]. dev may be NULL (defaults). The majority, odd ranks
 * and since are filled in whatever the verdict. Release with view_hang_fini(). */
void view_hang(const struct history *h, uint64_t now, uint64_t hang_after_ns,
               const struct view_hang_in *dev, struct view_hang *out);
void view_hang_fini(struct view_hang *out);

/* ---- Top functions (view_top.c) ---- */

struct view_top_row {
    const char *function, *file; /* borrowed; lines are merged */
    uint64_t own_ns;             /* time it was the innermost frame */
    uint64_t total_ns;           /* time it was anywhere on the stack (once per stack) */
    double own_pct, total_pct;   /* of sampled_ns */
};

struct view_top {
    struct view_top_row *rows; /* own desc, then total desc, then name */
    size_t nrows;
    uint64_t sampled_ns;  /* thread time in the window with a readable stack */
    uint64_t interval_ns; /* how long a run's last sample counts */
    bool truncated;       /* rows beyond VIEW_MAX_ROWS were dropped */
};

/* Sampling interval estimated from the history: the median gap between a run's last sample
 * and the next run's first over all threads; VIEW_DEFAULT_INTERVAL_NS without any. */
uint64_t view_top_interval(const struct history *h);

/* Own and total time per function over [now - window_ns, now] (window_ns 0 = all history),
 * for the ranks with pid rank_pid (0 = all ranks), main threads or all threads. A run lasts
 * from its t0 to the next run's t0; the last one to t1 + view_top_interval() or the rank's
 * exit. Returns 0, APP_E_NOTFOUND when no rank has that pid, APP_E_LIMIT when rows were
 * dropped. Release with view_top_fini(). */
int view_top(const struct history *h, uint64_t now, uint64_t window_ns, int rank_pid,
             bool all_threads, struct view_top *out);
void view_top_fini(struct view_top *out);

/* ---- Achieved sampling rate (view_rate.c) ---- */

#define VIEW_RATE_POINTS 256             /* pass counts kept (the UI adds one per refresh) */
#define VIEW_RATE_PERIODS 20             /* a window is this many sampling periods... */
#define VIEW_RATE_MIN_NS 2000000000ull   /* ...but at least 2 s */
#define VIEW_RATE_MAX_NS 120000000000ull /* and at most 2 min */

/* Recent (time, passes) points, oldest first in a ring. Zero it to start. */
struct view_rate {
    uint64_t t[VIEW_RATE_POINTS], passes[VIEW_RATE_POINTS];
    size_t first, n;
};

/* Adds the engine's pass counter as read at now; a counter or time that went back starts
 * the measure over. The oldest point goes when the ring is full. */
void view_rate_add(struct view_rate *r, uint64_t now, uint64_t passes);

/* The window to measure a rate of about rate_hz over: VIEW_RATE_PERIODS periods, clamped to
 * [VIEW_RATE_MIN_NS, VIEW_RATE_MAX_NS]. */
uint64_t view_rate_window(double rate_hz);

/* Passes per second between the newest point and the newest one at least window_ns older;
 * NaN while the points span less than a full window (a first frame shows no rate). */
double view_rate_hz(const struct view_rate *r, uint64_t window_ns);

#endif
