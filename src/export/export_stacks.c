/* Samples per distinct stack of one exported thread: the aggregation behind the collapsed
 * stacks and the flame graph, so both count a run the same way.
 *
 * A run weighs its duration over the sampling interval, rounded, at least 1 (without an
 * interval, its duration in microseconds). Empty stacks (no frames, HSTACK_NONE) weigh
 * nothing. Runs on the caller's thread, on a scratch the caller owns. */
#include "export_priv.h"

#include "ranktop/base/hash.h"
#include "ranktop/base/util.h"

#include <stdlib.h>

static uint64_t stack_hash(const struct history *h, uint32_t id)
{
    const uint32_t *f = history_stack_frames(h, id);
    uint64_t x = h->stacks[id].nframes;

    for (uint32_t k = 0; k < h->stacks[id].nframes; k++)
        x = hash_mix(x, f[k]);
    return x;
}

static bool stack_same(const struct history *h, uint32_t a, uint32_t b)
{
    return h->stacks[a].nframes == h->stacks[b].nframes &&
           !memcmp(history_stack_frames(h, a), history_stack_frames(h, b),
                   h->stacks[a].nframes * sizeof(uint32_t));
}

/* Each stack id to the first id with the same frames (open addressing over the ids). */
static uint32_t *stacks_canon(const struct history *h)
{
    size_t cap = 16;
    uint32_t *slot, *canon = x_calloc(h->nstacks ? h->nstacks : 1, sizeof(*canon));

    while (cap < h->nstacks * 2)
        cap *= 2;
    slot = x_calloc(cap, sizeof(*slot)); /* id + 1; 0 empty */
    for (size_t i = 0; i < h->nstacks; i++) {
        size_t j = stack_hash(h, (uint32_t)i) & (cap - 1);

        while (slot[j] && !stack_same(h, slot[j] - 1, (uint32_t)i))
            j = (j + 1) & (cap - 1);
        if (!slot[j])
            slot[j] = (uint32_t)i + 1;
        canon[i] = slot[j] - 1;
    }
    free(slot);
    return canon;
}

void xstacks_init(struct xstacks *s, const struct history *h, bool merge)
{
    size_t n = h->nstacks ? h->nstacks : 1;

    s->weight = x_calloc(n, sizeof(*s->weight));
    s->order = x_calloc(n, sizeof(*s->order));
    s->n = 0;
    s->canon = merge ? stacks_canon(h) : NULL;
}

void xstacks_fini(struct xstacks *s)
{
    free(s->weight);
    free(s->order);
    free(s->canon);
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
        uint32_t id = seg.stack;

        if (id == HSTACK_NONE || !h->stacks[id].nframes)
            continue;
        if (s->canon)
            id = s->canon[id];
        if (!s->weight[id])
            s->order[s->n++] = id;
        s->weight[id] += xstacks_weight(p->o, seg.e - seg.s);
    }
}
