/* Collapsed stacks for flamegraph.pl and inferno: one line per distinct stack of each exported
 * rank and thread, "rank 3;MainThread;outer (file:line);...;inner (file:line) WEIGHT".
 *
 * The weight counts samples: a run's duration over the sampling interval, rounded, at least
 * 1 (without an interval it is the duration in microseconds). Order is stable: lanes in rank
 * order, threads by tid, stacks in order of first appearance. ';' separates frames and the
 * last space starts the weight, so ';' and control characters in names are replaced; other
 * bytes, spaces included, pass through. Runs on the caller's thread. */
#include "export_priv.h"

#include "ranktop/util.h"

#include <stdlib.h>

struct cc {
    struct xbuf *b;
    const struct xplan *p;
    uint64_t *weight; /* per stack id, for the current thread */
    uint32_t *order;  /* stack ids of the current thread in order of first appearance */
    size_t norder;
};

/* Copies s, replacing the separators of the format. */
static void cc_text(struct xbuf *b, const char *s)
{
    for (; s && *s; s++) {
        char c = *s == ';' ? ':' : (unsigned char)*s < 0x20 ? ' ' : *s;

        xb_put(b, &c, 1);
    }
}

static void cc_frame(struct xbuf *b, const struct hframe *f)
{
    char line[16];

    cc_text(b, xframe_fn(f));
    xb_puts(b, " (");
    cc_text(b, xframe_file(f));
    if (f->line > 0) {
        snprintf(line, sizeof(line), ":%d", f->line);
        xb_puts(b, line);
    }
    xb_puts(b, ")");
}

static uint64_t cc_weight(const struct export_opts *o, uint64_t ns)
{
    uint64_t w = o->interval_ns ? (ns + o->interval_ns / 2) / o->interval_ns : ns / 1000;

    return w ? w : 1;
}

static void cc_thread(struct cc *c, const struct xlane *l, const struct xthread *x)
{
    const struct history *h = c->p->h;
    struct xiter it;
    struct xseg seg;

    c->norder = 0;
    xiter_init(&it, c->p, l->r, x->t);
    while (xiter_next(&it, &seg)) {
        if (seg.stack == HSTACK_NONE || !h->stacks[seg.stack].nframes)
            continue;
        if (!c->weight[seg.stack])
            c->order[c->norder++] = seg.stack;
        c->weight[seg.stack] += cc_weight(c->p->o, seg.e - seg.s);
    }
    for (size_t i = 0; i < c->norder; i++) {
        uint32_t s = c->order[i];
        const uint32_t *f = history_stack_frames(h, s);

        cc_text(c->b, l->label);
        xb_put(c->b, ";", 1);
        cc_text(c->b, x->name);
        for (uint32_t k = 0; k < h->stacks[s].nframes; k++) {
            xb_put(c->b, ";", 1);
            cc_frame(c->b, &h->frames[f[k]]);
        }
        xb_put(c->b, " ", 1);
        xb_u64(c->b, c->weight[s]);
        xb_put(c->b, "\n", 1);
        c->weight[s] = 0;
    }
}

void export_collapsed(struct xbuf *b, const struct xplan *p)
{
    size_t n = p->h->nstacks ? p->h->nstacks : 1;
    struct cc c = {.b = b, .p = p};

    c.weight = x_calloc(n, sizeof(*c.weight));
    c.order = x_calloc(n, sizeof(*c.order));
    for (size_t i = 0; i < p->nlane; i++)
        for (size_t k = 0; k < p->lane[i].nth; k++)
            cc_thread(&c, &p->lane[i], &p->lane[i].th[k]);
    free(c.weight);
    free(c.order);
}
