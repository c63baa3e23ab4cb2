/* Reuse of a thread's last walk while the GIL proves the thread has not run since.
 *
 * CPython's take_gil bumps the GIL's switch_number whenever a thread other than last_holder
 * takes the GIL, and a thread pushes, pops or advances its Python frames only while holding
 * it. So if two GIL reads, A and then B, show the same switch_number and the same last_holder,
 * no thread but that holder held the GIL between them; every other thread's frames at B are
 * what they were at A, and what a walk read after A found. A kept walk is therefore stamped
 * with the GIL view read before it and reused, without reading the thread, while the view
 * stays the same and the thread is not its holder, and only once two walks in a row found the
 * same frames (one torn read that passed every check is not kept). The holder is always walked: it
 * may have dropped and retaken the GIL without a bump. The kept frames hold their code objects
 * alive, so their code-cache entries stay valid (pycode_resolve_alive) with no header read. Free-
 * threaded builds (no GIL) are not attached at all. Sampling thread only. */
#include "pyproc_priv.h"

#include "ranktop/base/util.h"

#include <stdlib.h>
#include <string.h>

void pyreuse_note(struct pyproc *p, uint64_t tsaddr, uint64_t interp, uint64_t ident,
                  const struct pygilview *g, int n, const struct pywalk_out *wo)
{
    struct pyhint *h = pywalk_hint(p, tsaddr, true);
    struct pyprev *v = &h->prev;

    /* A walk is reused only once a second walk has found the same frames: a torn read that
     * happened to pass every check must not be frozen in place for as long as the thread
     * sleeps. */
    bool same = v->ok && v->ident == ident && v->interp == interp && v->n == (uint32_t)n &&
                v->truncated == wo->truncated && v->no_python == wo->no_python &&
                (!n || !memcmp(v->raw, p->raw, (size_t)n * sizeof(*v->raw)));

    v->ok = false;
    if (!g->known || n < 0)
        return;
    if (same) {
        v->switches = g->switches;
        v->holder = g->holder;
        v->ok = v->confirmed = true;
        return;
    }
    v->confirmed = false;
    if ((uint32_t)n > v->cap) {
        free(v->raw);
        v->cap = (uint32_t)n;
        v->raw = x_reallocarray(NULL, v->cap, sizeof(*v->raw));
    }
    if (n) /* a thread with no Python frame may have no array yet */
        memcpy(v->raw, p->raw, (size_t)n * sizeof(*v->raw));
    v->n = (uint32_t)n;
    v->truncated = wo->truncated;
    v->no_python = wo->no_python;
    v->ident = ident;
    v->interp = interp;
    v->switches = g->switches;
    v->holder = g->holder;
    v->ok = true;
}

void pyreuse_forget(struct pyproc *p, uint64_t tsaddr)
{
    struct pyhint *h = pywalk_hint(p, tsaddr, false);

    if (h)
        h->prev.ok = false;
}

static const struct pyprev *kept(struct pyproc *p, uint64_t tsaddr, uint64_t interp, uint64_t ident,
                                 const struct pygilview *g)
{
    struct pyhint *h = pywalk_hint(p, tsaddr, false);
    const struct pyprev *v = h ? &h->prev : NULL;

    if (!v || !v->ok || !v->confirmed || !g->known || g->holder == tsaddr ||
        g->switches != v->switches || g->holder != v->holder || ident != v->ident ||
        interp != v->interp)
        return NULL;
    return v;
}

bool pyreuse_ready(struct pyproc *p, uint64_t tsaddr, uint64_t interp, uint64_t ident,
                   const struct pygilview *g)
{
    return kept(p, tsaddr, interp, ident, g) != NULL;
}

int pyreuse_try(struct pyproc *p, uint64_t tsaddr, uint64_t interp, uint64_t ident,
                const struct pygilview *g, struct pywalk_out *wo)
{
    const struct pyprev *v = kept(p, tsaddr, interp, ident, g);

    if (!v)
        return -1;
    if (v->n)
        memcpy(p->raw, v->raw, (size_t)v->n * sizeof(*v->raw));
    *wo = (struct pywalk_out){.truncated = v->truncated, .no_python = v->no_python};
    return (int)v->n;
}

void pyreuse_free(struct pyprev *v)
{
    free(v->raw);
    memset(v, 0, sizeof(*v));
}
