/* Collapsed stacks for flamegraph.pl and inferno: one line per distinct stack of each exported
 * rank and thread, "rank 3;MainThread;outer (file:line);...;inner (file:line) WEIGHT"; files
 * package-relative with export_opts.short_files.
 *
 * The weight counts samples as export_stacks.c aggregates them. Order is stable: lanes in rank
 * order, threads by tid, stacks in order of first appearance. ';' separates frames and the
 * last space starts the weight, so ';' and control characters in names are replaced; other
 * bytes, spaces included, pass through. Runs on the caller's thread. */
#include "export_priv.h"

#include "ranktop/base/util.h"

/* Copies s, replacing the separators of the format. */
static void cc_text(struct xbuf *b, const char *s)
{
    for (; s && *s; s++) {
        char c = *s == ';' ? ':' : (unsigned char)*s < 0x20 ? ' ' : *s;

        xb_put(b, &c, 1);
    }
}

/* The frame as xframe_label names it (the Chrome trace's slice names), separators replaced;
 * its file package-relative with short. */
static void cc_frame(struct xbuf *b, const struct hframe *f, bool short_files)
{
    char line[16];

    cc_text(b, xframe_fn(f));
    if (!xframe_file(f)[0] && f->line <= 0)
        return;
    xb_puts(b, " (");
    cc_text(b, short_files ? path_short(xframe_file(f)) : xframe_file(f));
    if (f->line > 0) {
        snprintf(line, sizeof(line), ":%d", f->line);
        xb_puts(b, line);
    }
    xb_puts(b, ")");
}

static void cc_thread(struct xbuf *b, struct xstacks *s, const struct xplan *p,
                      const struct xlane *l, const struct xthread *x)
{
    const struct history *h = p->h;

    xstacks_thread(s, p, l, x);
    for (size_t i = 0; i < s->n; i++) {
        uint32_t id = s->order[i];
        const uint32_t *f = history_stack_frames(h, id);

        cc_text(b, l->label);
        xb_put(b, ";", 1);
        cc_text(b, x->name);
        for (uint32_t k = 0; k < h->stacks[id].nframes; k++) {
            xb_put(b, ";", 1);
            cc_frame(b, &h->frames[f[k]], p->o->short_files);
        }
        xb_put(b, " ", 1);
        xb_u64(b, s->weight[id]);
        xb_put(b, "\n", 1);
    }
}

void export_collapsed(struct xbuf *b, const struct xplan *p)
{
    struct xstacks s;

    xstacks_init(&s, p->h, p->o->no_lines);
    for (size_t i = 0; i < p->nlane; i++)
        for (size_t k = 0; k < p->lane[i].nth; k++)
            cc_thread(b, &s, p, &p->lane[i], &p->lane[i].th[k]);
    xstacks_fini(&s);
}
