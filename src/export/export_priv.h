/* Pieces shared by the exporters (export*.c only): a buffered writer with JSON helpers, and
 * the export plan: which ranks become lanes, in which order, which threads they show, and the
 * runs of each thread clipped to the export window.
 *
 * Everything here works on one caller's stack; nothing is shared between threads. */
#ifndef RANKTOP_EXPORT_PRIV_H
#define RANKTOP_EXPORT_PRIV_H

#include "ranktop/export/export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Output buffer. With a FILE it drains there in large chunks; without one (f == NULL) it
 * grows in memory. The first write error's errno is kept in err and later output dropped. */
struct xbuf {
    FILE *f;
    char *p;
    size_t len, cap;
    int err;
};

void xb_init(struct xbuf *b, FILE *f);
void xb_fini(struct xbuf *b);
/* Drains the buffer to its FILE; returns b->err (0 or an errno value). */
int xb_flush(struct xbuf *b);
/* Slow path of xb_put: drain or grow, then append. */
void xb_put_slow(struct xbuf *b, const char *s, size_t n);

static inline void xb_put(struct xbuf *b, const char *s, size_t n)
{
    if (b->len + n > b->cap) {
        xb_put_slow(b, s, n);
        return;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static inline void xb_puts(struct xbuf *b, const char *s)
{
    xb_put(b, s, strlen(s));
}

void xb_u64(struct xbuf *b, uint64_t v);
void xb_i64(struct xbuf *b, int64_t v);
/* Nanoseconds as microseconds with at most 3 decimals ("1500" -> 1.5). */
void xb_us(struct xbuf *b, uint64_t ns);
/* A finite double as a JSON number (callers skip NaN and infinities). */
void xb_dbl(struct xbuf *b, double v);
/* s as the inside of a JSON string: quotes, backslashes and control characters escaped,
 * valid UTF-8 passed through, invalid bytes replaced by U+FFFD. NULL is "". */
void xb_jesc(struct xbuf *b, const char *s);
/* s as a quoted JSON string. */
void xb_jstr(struct xbuf *b, const char *s);

/* A thread as exported: its trace tid (see xplan_init), its place in the lane (0 = the main
 * thread) and display name. */
struct xthread {
    const struct hthread *t;
    int tid;
    int order;
    char name[64];
};

/* A rank as exported: its trace pid (see xplan_init), its place in rank order and names. */
struct xlane {
    const struct hrank *r;
    int pid;
    int order;      /* 1..N in rank order */
    char label[32]; /* "rank 3", or "pid 5263" when the rank is unknown */
    char name[224]; /* "rank 3 (pid 5263, node01, gpu 3)" */
    struct xthread *th;
    size_t nth;
    uint64_t start; /* first sample of the rank, 0 unknown */
};

struct xplan {
    const struct history *h;
    const struct export_opts *o;
    struct xlane *lane;
    size_t nlane;
    int dev_pid; /* trace pid of the node's devices lane, unused by every rank lane */
};

/* Builds the lanes of h that overlap the window of o; xplan_fini frees them.
 * Trace ids: a lane's pid is the rank's real OS pid (history_key_pid) unless an earlier lane
 * (in rank order) already has it: a rank on another node with the same pid, or a pid reused
 * after an exit. Then it is the rank's key (host slot above the pid's 22 bits), and should
 * that be taken too, a synthetic id from XPLAN_SYNTH_ID up; such a lane's name says "shown as
 * N". The main thread's tid is the lane's pid (tid == pid, as in the kernel); the other
 * threads keep their real kernel tids, unless unknown or taken in the lane (synthetic then).
 * Ids never exceed INT32_MAX, so every reader (Perfetto's uint32, speedscope's Number) keeps
 * them apart. */
#define XPLAN_SYNTH_ID 0x7f000000
void xplan_init(struct xplan *p, const struct history *h, const struct export_opts *o);
void xplan_fini(struct xplan *p);

/* The lane a counter series belongs to (its rank's lane), or -1 for the devices lane. */
long xplan_series_lane(const struct xplan *p, const struct hseries *s);

/* One run clipped to the window: the thread showed `stack` (HSTACK_NONE: nothing) over
 * [s, e), e > s. */
struct xseg {
    uint32_t stack;
    uint64_t s, e;
};

struct xiter {
    const struct xplan *p;
    const struct hrank *r;
    const struct hthread *t;
    size_t i;
    uint64_t last; /* end of the previous segment */
};

void xiter_init(struct xiter *it, const struct xplan *p, const struct hrank *r,
                const struct hthread *t);
/* The next non-empty clipped run; false after the last. Segments are contiguous: each
 * starts where the previous one ended. */
bool xiter_next(struct xiter *it, struct xseg *seg);

/* Samples per distinct stack of one thread (export_stacks.c). After xstacks_thread, order[0..n)
 * holds the thread's non-empty stacks in order of first appearance (callers may reorder it)
 * and weight[id] the samples of each; the next call clears both. */
struct xstacks {
    uint64_t *weight; /* per stack id of the history */
    uint32_t *order;
    size_t n;
    uint32_t *canon; /* merge: each stack id to the first with the same frames; else NULL */
};

/* merge: stacks with the same frame ids count as one (the first), for a no-lines copy
 * (xhist_nolines) whose stacks differ only in the lines it dropped. */
void xstacks_init(struct xstacks *s, const struct history *h, bool merge);
void xstacks_fini(struct xstacks *s);
void xstacks_thread(struct xstacks *s, const struct xplan *p, const struct xlane *l,
                    const struct xthread *x);

/* A change of a rank's kind of wait (export_waits.c): from t on, its main thread's stack is of
 * kind `kind`, for the reason why. */
struct xwait {
    uint64_t t;
    enum wait_kind kind;
    char why[160];
};

/* The changes of lane l's kind of wait over the window, in time order (*out, freed by the
 * caller; NULL when none): one where the kind of its main thread's stack changes, the first
 * known kind included. */
size_t xwaits_lane(const struct xplan *p, const struct xlane *l, struct xwait **out);

/* Function and file of a frame, never NULL. */
const char *xframe_fn(const struct hframe *f);
const char *xframe_file(const struct hframe *f);

/* Frames continue a slice while function, file, line and kind stay: a slice is one line's
 * run (the Chrome and Perfetto writers both cut slices this way). */
bool xframe_same(const struct history *h, uint32_t a, uint32_t b);

/* The slices one lane has open, outermost first. */
struct xopen {
    uint32_t *f;
    size_t n, cap;
};

/* Moves the lane from its open slices to `stack` at t: ends (begin false) for the old frames
 * below the common prefix, innermost first, then begins for the new ones, outermost first,
 * each through slice(ctx, begin, frame, t). HSTACK_NONE closes every slice. */
void xopen_move(struct xopen *o, const struct history *h, uint32_t stack, uint64_t t,
                void (*slice)(void *ctx, bool begin, uint32_t frame, uint64_t t), void *ctx);
/* The frame's name in every export that names frames by one string (Chrome trace slices,
 * collapsed stacks): "function (file:line)", "function (file)" without a line, "function"
 * with neither. Raw bytes, appended to out; the caller escapes them for its format. */
void xframe_label(struct xbuf *out, const struct hframe *f);

/* export_opts.no_lines: a shallow copy of h (in copy, returned) whose frames have no line and
 * whose stacks use one frame per function, file and kind; xhist_nolines_fini frees what the
 * copy owns (its frame and stack-frame tables), never h's. export_lines.c. */
const struct history *xhist_nolines(const struct history *h, struct history *copy);
void xhist_nolines_fini(struct history *copy);

/* Writers of each format, into b; they report nothing, errors surface through b->err. */
void export_chrome(struct xbuf *b, const struct xplan *p);
void export_speedscope(struct xbuf *b, const struct xplan *p);
void export_collapsed(struct xbuf *b, const struct xplan *p);
/* The interactive SVG flame graph (export_flamegraph.c). */
void export_flamegraph_stream(struct xbuf *b, const struct xplan *p);
/* Perfetto's protobuf trace (export_perfetto.c). */
void export_perfetto_stream(struct xbuf *b, const struct xplan *p);

/* A stream that gzips what is written to it into fd (export_gz.c); fclose finishes the gzip
 * member, fsyncs and closes fd, and fails when any of it did. NULL (fd left open) on failure. */
FILE *xgz_fdopen(int fd);

#endif
