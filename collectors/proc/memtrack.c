/* Per-process memory history: a ring of (time, memstat) readings and a baseline.
 *
 * Owns its ring (allocated by memtrack_init, freed by memtrack_fini). Invariants: 0 <= n <= cap,
 * ring[head] is the oldest point, ring[(head + n - 1) % cap] the newest, and point times never
 * decrease from oldest to newest (memtrack_push refuses a step back). No locking: the struct
 * belongs to whichever thread keeps the history (the engine's memory thread or the UI). */
#include "ranktop/memtrack.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ranktop/util.h"

#define WINDOW_MAX_S 1e10 /* beyond this, seconds * 1e9 would not fit in 64 bits */

void memtrack_init(struct memtrack *t, size_t cap)
{
    assert(cap > 0);
    memset(t, 0, sizeof(*t));
    t->cap = cap;
    t->ring = x_calloc(cap, sizeof(*t->ring));
}

void memtrack_fini(struct memtrack *t)
{
    free(t->ring);
    memset(t, 0, sizeof(*t));
}

/* The i-th point from the oldest (0 <= i < n). */
static const struct memtrack_point *point_at(const struct memtrack *t, size_t i)
{
    return &t->ring[(t->head + i) % t->cap];
}

const struct memtrack_point *memtrack_newest(const struct memtrack *t)
{
    return t->n ? point_at(t, t->n - 1) : NULL;
}

int memtrack_push(struct memtrack *t, uint64_t t_ns, const struct memstat *m)
{
    const struct memtrack_point *last = memtrack_newest(t);
    struct memtrack_point *p;

    if (t->cap == 0 || (last && t_ns < last->t_ns))
        return APP_E_USAGE;
    if (t->n == t->cap) {
        t->head = (t->head + 1) % t->cap; /* drop the oldest */
        t->n--;
    }
    p = &t->ring[(t->head + t->n) % t->cap];
    p->t_ns = t_ns;
    p->m = *m;
    t->n++;
    return 0;
}

int memtrack_set_baseline(struct memtrack *t)
{
    const struct memtrack_point *last = memtrack_newest(t);

    if (!last)
        return APP_E_NOTFOUND;
    t->baseline = *last;
    t->has_baseline = true;
    return 0;
}

int memtrack_delta_since_baseline(const struct memtrack *t, uint32_t field, int64_t *delta_kb)
{
    const struct memtrack_point *last = memtrack_newest(t);
    int64_t now, then;

    if (!last || !t->has_baseline || !memstat_get(&last->m, field, &now) ||
        !memstat_get(&t->baseline.m, field, &then))
        return APP_E_NOTFOUND;
    *delta_kb = now - then;
    return 0;
}

int memtrack_delta_over(const struct memtrack *t, double seconds, uint32_t field, int64_t *delta_kb,
                        uint64_t *span_ns)
{
    const struct memtrack_point *last = memtrack_newest(t), *ref = NULL;
    uint64_t window = !(seconds > 0)            ? 0
                      : seconds >= WINDOW_MAX_S ? UINT64_MAX
                                                : (uint64_t)(seconds * 1e9);
    int64_t now, then;

    if (!last || !memstat_get(&last->m, field, &now))
        return APP_E_NOTFOUND;
    /* Walk back from the newest: the first valid point old enough wins; failing that, the
     * oldest valid point seen. */
    for (size_t i = t->n - 1; i-- > 0;) {
        const struct memtrack_point *p = point_at(t, i);

        if (!memstat_get(&p->m, field, &then))
            continue;
        ref = p;
        if (last->t_ns - p->t_ns >= window)
            break;
    }
    if (!ref)
        return APP_E_NOTFOUND;
    memstat_get(&ref->m, field, &then);
    *delta_kb = now - then;
    if (span_ns)
        *span_ns = last->t_ns - ref->t_ns;
    return 0;
}
