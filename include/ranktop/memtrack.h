/* Per-process memory history: a bounded ring of memstat readings, a baseline that can be set,
 * and the deltas since the baseline and over the last N seconds. Pure arithmetic over what the
 * caller pushes (no I/O, no clock); a struct memtrack belongs to one thread at a time. */
#ifndef RANKTOP_MEMTRACK_H
#define RANKTOP_MEMTRACK_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_PROC)
#error                                                                                             \
    "ranktop/memtrack.h is the contract of collectors/proc/, a layer this one may not use (README, Architecture)"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/memstat.h"

struct memtrack_point {
    uint64_t t_ns; /* monotonic clock of the reading */
    struct memstat m;
};

/* A bounded ring of one process's readings (oldest dropped first) plus an optional baseline.
 * Caller-owned; not locked: one thread at a time. */
struct memtrack {
    struct memtrack_point *ring;
    size_t cap, head, n; /* ring[head] is the oldest of n points */
    bool has_baseline;
    struct memtrack_point baseline;
};

/* Prepares t to keep the last cap readings (cap > 0; e.g. 600 for 10 minutes at 1 Hz). */
void memtrack_init(struct memtrack *t, size_t cap);

/* Frees the ring; t may be initialised again. */
void memtrack_fini(struct memtrack *t);

/* Appends a reading, dropping the oldest when the ring is full. Times must not decrease:
 * APP_E_USAGE (and nothing stored) when t_ns is earlier than the newest point, or when t was
 * never initialised. */
int memtrack_push(struct memtrack *t, uint64_t t_ns, const struct memstat *m);

/* Makes the newest reading the baseline; it stays when the ring moves on. APP_E_NOTFOUND when
 * there is no reading yet. */
int memtrack_set_baseline(struct memtrack *t);

/* The newest point, or NULL when there is none. Borrowed, valid until the next push or fini. */
const struct memtrack_point *memtrack_newest(const struct memtrack *t);

/* *delta_kb = newest - baseline for field (one MEMSTAT_* bit). APP_E_NOTFOUND when there is no
 * baseline, or the field is not valid in the newest reading or in the baseline. */
int memtrack_delta_since_baseline(const struct memtrack *t, uint32_t field, int64_t *delta_kb);

/* *delta_kb = newest - reference for field, where the reference is the newest reading that has
 * the field valid and was taken at least `seconds` before the newest one. When the history is
 * shorter than that, the oldest reading with the field valid is used instead; *span_ns (may be
 * NULL) gets the time actually covered, so the caller can show "+120 MiB in 42 s". APP_E_NOTFOUND
 * when the newest reading lacks the field or no older reading has it. */
int memtrack_delta_over(const struct memtrack *t, double seconds, uint32_t field, int64_t *delta_kb,
                        uint64_t *span_ns);

#endif
