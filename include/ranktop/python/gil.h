/* GIL probes of an attached CPython process, and the figures derived from them.
 *
 * A struct pygil is a cheap, high-rate prober (1-10 kHz) for the process a struct pyproc is
 * attached to: each probe reads the main interpreter's GIL (runtime-wide up to 3.11, the main
 * interpreter's own GIL from 3.12; subinterpreters with their own GIL are not probed), its
 * drop request, glibc's condition-variable waiter count and gc.collecting. That is one
 * process_vm_readv while the holder stays the same, and a second one when it changed and
 * its ident is not cached (3.13+: whenever it changed). It owns its own reader, so it may run
 * on another thread than the pyproc it came from; one thread at a time uses it.
 * struct gilstats is pure arithmetic over probes. */
#ifndef RANKTOP_PYGIL_H
#define RANKTOP_PYGIL_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_PYTHON)
#error "ranktop/python/gil.h belongs to collectors/python/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/python/pystack.h"
#include "ranktop/base/status.h"

struct pygil;

struct pygil_sample {
    uint64_t t_ns;          /* CLOCK_MONOTONIC when the probe started */
    bool known;             /* the GIL struct was read and is initialised; else all unknown */
    bool locked;            /* some thread holds the GIL */
    uint64_t holder_ident;  /* threading.get_ident() of the holder; 0 none or unknown */
    uint64_t switch_number; /* owner changes since start-up (gil->switch_number) */
    int waiters;            /* threads blocked waiting for the GIL; -1 unknown (not glibc) */
    bool drop_known;        /* drop_request below is meaningful */
    bool drop_request;      /* a waiter timed out and asked the holder to drop the GIL */
    int in_gc;              /* 1 a collection is running, 0 not, -1 unknown */
};

struct pygil_stats {
    uint64_t probes;
    uint64_t reads; /* process_vm_readv calls, set-up included */
    uint64_t errors;
};

/* A prober for the process p is attached to. Copies the layout and runtime address; for a
 * live process it opens its own reader, so p may be freed or used by another thread. For a
 * memory image (tests) it borrows p's image: p must then outlive it, on the same thread.
 * Returns NULL when p's Python has no GIL to probe: free-threaded builds (3.13t and later). */
struct pygil *pygil_new(const struct pyproc *p);

void pygil_free(struct pygil *g);

/* One probe into *out. Returns 0, or APP_E_GONE (exited), APP_E_STARTING / APP_E_EXITING
 * (interpreter not running), APP_E_PERM, APP_E_STALE (torn read; try again); out->known is
 * false on any error. The first probe also resolves the interpreter (a few more reads). */
int pygil_sample(struct pygil *g, struct pygil_sample *out, struct app_err *err);

void pygil_get_stats(const struct pygil *g, struct pygil_stats *st);

/* Where the last successful probe read gc.collecting (an int), 0 when it read none. */
uint64_t pygil_gc_addr(const struct pygil *g);

#define GILSTATS_MAX_THREADS 64

/* Probe counters over one window. Plain data: init, add probes, read figures, then
 * gilstats_next() for the following window. */
struct gilstats {
    uint64_t t_base, t_last;   /* span of the window: baseline probe .. last known probe */
    uint64_t switch_last;      /* switch_number of the last known probe */
    bool have_base, drop_last; /* a baseline exists; the last probe saw a drop request */
    uint64_t probes, known, locked, unattributed;
    uint64_t switches; /* sum of switch_number increases between known probes */
    uint64_t waiters_sum, waiters_n;
    uint64_t drop_n, drop_set, drop_edges;
    uint64_t gc_n, gc_set;
    size_t nthreads;
    struct {
        uint64_t ident, held;
    } threads[GILSTATS_MAX_THREADS];
};

struct gilshare {
    uint64_t ident;    /* threading.get_ident() */
    double holder_pct; /* of known probes */
};

struct gilfigures {
    size_t probes;              /* known probes in the window */
    double busy_pct;            /* probes with the GIL held */
    double switches_per_s;      /* owner changes per second (exact: from switch_number) */
    double waiters_avg;         /* threads waiting for the GIL; -1 unknown */
    double drop_requests_per_s; /* drop requests seen starting, per second (a lower bound:
                                  a request lives for microseconds); -1 unknown */
    double drop_pending_pct;    /* probes that saw a pending drop request; -1 unknown */
    double gc_pct;              /* probes inside a collection; -1 unknown */
    double unattributed_pct;    /* held by a thread not identified (or beyond the table) */
    size_t nthreads;
    struct gilshare threads[GILSTATS_MAX_THREADS]; /* by holder share, largest first */
};

void gilstats_init(struct gilstats *st);

/* Starts the next window: clears the counters, keeps the last probe as the baseline of the
 * switch count so that no owner change falls between two windows. */
void gilstats_next(struct gilstats *st);

void gilstats_add(struct gilstats *st, const struct pygil_sample *s);

/* Figures over the window. window_ns is the denominator of the per-second rates; 0 uses the
 * time the probes span (baseline to last known probe). Percentages are of known probes. */
void gilstats_figures(const struct gilstats *st, uint64_t window_ns, struct gilfigures *out);

#endif
