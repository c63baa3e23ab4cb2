/* The sampler's garbage-collection marks: whether a rank's interpreter was collecting when
 * its stacks were read, and the `<gc>` frame put on top of the collecting thread's stack then.
 *
 * A probe is one pygil read (collectors/python/pygil.c: gc.collecting among the GIL's fields,
 * one process_vm_readv) through a prober of its own per slot, made on the first probe; it is
 * taken only after a sample in which some thread held the GIL (a collection runs with the GIL
 * held), so an idle rank costs no read. Free-threaded builds have no prober: never marked.
 * Runs on the sampling thread that reads the slot (engine_gc_probe) or the sampler thread
 * (engine_gc_stack); a probe belongs to one slot. */
#include "engine_priv.h"

#include "ranktop/gil.h"
#include "ranktop/pystack.h"
#include "ranktop/util.h"

#define GC_RETRY_NS 2000000000ull /* after a failed set-up, the next try */

int engine_gc_probe(struct engine_gcprobe *g, const struct pyproc *py, const struct pysample *s)
{
    struct pygil_sample smp;
    uint64_t now;

    if (!py || !s->gil_locked)
        return g->last = 0;
    if (!g->g) {
        now = clock_mono_ns();
        if (now < g->retry_at)
            return g->last = -1;
        g->g = pygil_new(py);
        if (!g->g) { /* no GIL to probe (free-threaded): do not ask again soon */
            g->retry_at = now + GC_RETRY_NS;
            return g->last = -1;
        }
    }
    if (pygil_sample(g->g, &smp, NULL) < 0)
        return g->last = -1;
    return g->last = smp.in_gc;
}

void engine_gc_fini(struct engine_gcprobe *g)
{
    pygil_free(g->g);
    *g = (struct engine_gcprobe){0};
}

uint32_t engine_gc_stack(struct engine_sintern *si, struct engine_evbuf *out,
                         const uint32_t *outer_first, uint32_t n, uint32_t **buf, uint32_t *cap)
{
    if (n + 1 > *cap) {
        *cap = n + 1;
        *buf = x_reallocarray(*buf, *cap, sizeof(**buf));
    }
    for (uint32_t i = 0; i < n; i++)
        (*buf)[i] = outer_first[i];
    (*buf)[n] = engine_sintern_frame(si, out, ENGINE_GC_FRAME, "", 0, false);
    return engine_sintern_ids(si, out, *buf, n + 1);
}
