/* speedscope's own file format (https://www.speedscope.app/file-format-schema.json): one
 * "sampled" profile per exported rank and thread, each run of identical stacks one sample
 * weighted by its duration in microseconds.
 *
 * Invariants: the shared frame table is the history's frame table, index for index (so a
 * frame keeps its line, as py-spy's speedscope output does); samples and weights have equal
 * length, every weight is positive, and the weights of a profile add up to exactly
 * endValue - startValue because the clipped runs are contiguous. A stretch in which the
 * thread showed no stack is an empty sample, which speedscope draws as idle. Runs on the
 * caller's thread. */
#include "export_priv.h"

#include "ranktop/base/util.h"

#include <stdlib.h>

#define SPEEDSCOPE_SCHEMA "https://www.speedscope.app/file-format-schema.json"

static void ss_frames(struct xbuf *b, const struct history *h)
{
    xb_puts(b, "\"shared\":{\"frames\":[");
    for (size_t i = 0; i < h->nframes; i++) {
        const struct hframe *f = &h->frames[i];

        xb_puts(b, i ? ",\n{\"name\":" : "\n{\"name\":");
        xb_jstr(b, xframe_fn(f));
        if (f->file && f->file[0]) {
            xb_puts(b, ",\"file\":");
            xb_jstr(b, f->file);
        }
        if (f->line > 0) {
            xb_puts(b, ",\"line\":");
            xb_i64(b, f->line);
        }
        xb_puts(b, "}");
    }
    xb_puts(b, "]}");
}

/* The clipped runs of one thread, collected so samples and weights can be written from the
 * same list. */
static size_t ss_segs(const struct xplan *p, const struct xlane *l, const struct xthread *x,
                      struct xseg **out)
{
    struct xseg *seg = x_reallocarray(NULL, x->t->nruns ? x->t->nruns : 1, sizeof(*seg));
    struct xiter it;
    size_t n = 0;

    xiter_init(&it, p, l->r, x->t);
    while (xiter_next(&it, &seg[n]))
        n++;
    *out = seg;
    return n;
}

static void ss_samples(struct xbuf *b, const struct history *h, const struct xseg *seg, size_t n)
{
    xb_puts(b, ",\"samples\":[");
    for (size_t i = 0; i < n; i++) {
        xb_puts(b, i ? ",[" : "[");
        if (seg[i].stack != HSTACK_NONE) {
            const uint32_t *f = history_stack_frames(h, seg[i].stack);
            uint32_t nf = h->stacks[seg[i].stack].nframes;

            for (uint32_t k = 0; k < nf; k++) {
                if (k)
                    xb_put(b, ",", 1);
                xb_u64(b, f[k]);
            }
        }
        xb_puts(b, "]");
    }
    xb_puts(b, "],\"weights\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            xb_put(b, ",", 1);
        xb_us(b, seg[i].e - seg[i].s);
    }
    xb_puts(b, "]}");
}

/* One profile; returns false (writing nothing) when the thread has no run in the window. */
static bool ss_profile(struct xbuf *b, const struct xplan *p, const struct xlane *l,
                       const struct xthread *x, bool first)
{
    uint64_t t0 = p->h->t0;
    struct xseg *seg;
    size_t n = ss_segs(p, l, x, &seg);

    if (n) {
        xb_puts(b,
                first ? "\n{\"type\":\"sampled\",\"name\":" : ",\n{\"type\":\"sampled\",\"name\":");
        xb_put(b, "\"", 1);
        xb_jesc(b, l->name);
        xb_put(b, " ", 1);
        xb_jesc(b, x->name);
        xb_puts(b, "\",\"unit\":\"microseconds\",\"startValue\":");
        xb_us(b, seg[0].s > t0 ? seg[0].s - t0 : 0);
        xb_puts(b, ",\"endValue\":");
        xb_us(b, (seg[0].s > t0 ? seg[0].s - t0 : 0) + (seg[n - 1].e - seg[0].s));
        ss_samples(b, p->h, seg, n);
    }
    free(seg);
    return n > 0;
}

void export_speedscope(struct xbuf *b, const struct xplan *p)
{
    const char *v = p->o->version ? p->o->version : "";
    bool first = true;

    xb_puts(b, "{\"$schema\":\"" SPEEDSCOPE_SCHEMA "\",\"name\":\"ranktop ");
    xb_jesc(b, p->h->host);
    xb_puts(b, "\",\"exporter\":\"ranktop ");
    xb_jesc(b, v);
    xb_puts(b, "\",\"activeProfileIndex\":0,");
    ss_frames(b, p->h);
    xb_puts(b, ",\"profiles\":[");
    for (size_t i = 0; i < p->nlane; i++)
        for (size_t k = 0; k < p->lane[i].nth; k++)
            if (ss_profile(b, p, &p->lane[i], &p->lane[i].th[k], first))
                first = false;
    xb_puts(b, "\n]}\n");
}
