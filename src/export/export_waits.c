/* The changes of each rank's kind of wait, for the trace exports: the main thread's runs in the
 * window, each stack classified by the rules (ranktop/model/waits.h; export_opts.waits, else the
 * built-in table) and one change wherever the kind differs from the last known one (runs
 * without a stack, or of an unknown kind, change nothing). Only what the
 * history keeps goes in: the stacks and the rank's exit (its own "exited" instant). The /proc
 * state, the syscall and the GC flag are read live and not recorded, so io, gil, stopped and
 * gc appear here only where frame rules say so. A stack is classified once (a cache by stack
 * id), whatever the number of runs showing it. Runs on the exporter's thread. */
#include "export_priv.h"

#include "ranktop/base/util.h"

#include <stdlib.h>
#include <string.h>

#define XWAIT_UNSEEN 0xff

static const struct xthread *lane_main(const struct xlane *l)
{
    for (size_t k = 0; k < l->nth; k++)
        if (l->th[k].t->main && !l->th[k].t->worker && !l->th[k].t->task)
            return &l->th[k];
    return NULL;
}

/* The kind of stack (cached in kinds[], and its reason the first time in why). */
static enum wait_kind stack_kind(const struct xplan *p, uint8_t *kinds, uint32_t stack, char *why,
                                 size_t whylen)
{
    struct wait_facts f;

    if (stack == HSTACK_NONE)
        return WAIT_UNKNOWN;
    wait_facts_init(&f);
    if (kinds[stack] == XWAIT_UNSEEN || why)
        kinds[stack] =
            (uint8_t)waits_classify_stack(p->o->waits, p->h, stack, &f, why, why ? whylen : 0);
    return (enum wait_kind)kinds[stack];
}

size_t xwaits_lane(const struct xplan *p, const struct xlane *l, struct xwait **out)
{
    const struct xthread *m = lane_main(l);
    uint8_t *kinds;
    struct xiter it;
    struct xseg seg;
    size_t n = 0, cap = 0;
    int prev = -1;

    *out = NULL;
    if (!m)
        return 0;
    kinds = x_malloc(p->h->nstacks ? p->h->nstacks : 1);
    memset(kinds, XWAIT_UNSEEN, p->h->nstacks ? p->h->nstacks : 1);
    xiter_init(&it, p, l->r, m->t);
    while (xiter_next(&it, &seg)) {
        enum wait_kind k = stack_kind(p, kinds, seg.stack, NULL, 0);

        /* A gap (a sample unread, no stack) keeps the kind before it: not a change. */
        if ((int)k == prev || k == WAIT_UNKNOWN)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            *out = x_reallocarray(*out, cap, sizeof(**out));
        }
        (*out)[n].t = seg.s;
        (*out)[n].kind = k;
        stack_kind(p, kinds, seg.stack, (*out)[n].why, sizeof((*out)[n].why));
        n++;
        prev = (int)k;
    }
    free(kinds);
    return n;
}
