/* Samples per distinct stack of one exported thread: the aggregation behind the collapsed
 * stacks and the flame graph, so both count a run the same way.
 *
 * A run weighs its duration over the sampling interval, rounded, at least 1 (without an
 * interval, its duration in microseconds). Empty stacks (no frames, HSTACK_NONE) weigh
 * nothing. Runs on the caller's thread, on a scratch the caller owns. */
#include "export_priv.h"

#include "ranktop/util.h"

#include <stdlib.h>

void xstacks_init(struct xstacks *s, const struct history *h)
{
    size_t n = h->nstacks ? h->nstacks : 1;

    s->weight = x_calloc(n, sizeof(*s->weight));
    s->order = x_calloc(n, sizeof(*s->order));
    s->n = 0;
}

void xstacks_fini(struct xstacks *s)
{
    free(s->weight);
    free(s->order);
    memset(s, 0, sizeof(*s));
}

/* A run of ns as samples. */
static uint64_t xstacks_weight(const struct export_opts *o, uint64_t ns)
{
    uint64_t w = o->interval_ns ? (ns + o->interval_ns / 2) / o->interval_ns : ns / 1000;

    return w ? w : 1;
}

void xstacks_thread(struct xstacks *s, const struct xplan *p, const struct xlane *l,
                    const struct xthread *x)
{
    const struct history *h = p->h;
    struct xiter it;
    struct xseg seg;

    for (size_t i = 0; i < s->n; i++)
        s->weight[s->order[i]] = 0;
    s->n = 0;
    xiter_init(&it, p, l->r, x->t);
    while (xiter_next(&it, &seg)) {
        if (seg.stack == HSTACK_NONE || !h->stacks[seg.stack].nframes)
            continue;
        if (!s->weight[seg.stack])
            s->order[s->n++] = seg.stack;
        s->weight[seg.stack] += xstacks_weight(p->o, seg.e - seg.s);
    }
}
