/* The sampler's garbage-collection marks: whether a rank's interpreter was collecting when
 * its stacks were read, and the `<gc>` frame put on top of the collecting thread's stack then.
 *
 * Where gc.collecting lives is found once per reader by a GIL probe (collectors/python/
 * pygil.c, which validates the interpreter and the version's place for it), taken after a
 * sample in which some thread held the GIL (a collection runs with it held); from then on the
 * reader reads that word in each sample's first system call (pyproc_watch), so the mark
 * costs no call of its own. A word that cannot be read, or is neither 0 nor 1 (the
 * interpreter moved), is looked for again. Free-threaded builds have no GIL probe: never
 * marked. Runs on the sampling thread that reads the slot (engine_gc_probe) or the sampler
 * thread (engine_gc_stack); a probe belongs to one slot and its reader. */
#include "engine_priv.h"

#include "ranktop/python/gil.h"
#include "ranktop/python/pystack.h"
#include "ranktop/base/util.h"

#define GC_RETRY_NS 2000000000ull /* after a failed look, the next one */

/* Finds the word through one GIL probe and has the reader watch it; the probe's own reading
 * is the answer for this sample. */
static int gc_locate(struct engine_gcprobe *g, struct pyproc *py)
{
    struct pygil *pg = pygil_new(py);
    struct pygil_sample smp;
    int rc = pg ? pygil_sample(pg, &smp, NULL) : -1;

    g->addr = rc == 0 ? pygil_gc_addr(pg) : 0;
    pygil_free(pg);
    if (!g->addr) {
        g->retry_at = clock_mono_ns() + GC_RETRY_NS;
        return -1;
    }
    pyproc_watch(py, g->addr);
    return smp.in_gc;
}

int engine_gc_probe(struct engine_gcprobe *g, struct pyproc *py, const struct pysample *s)
{
    int32_t v;

    if (g->addr) {
        if (pyproc_watched(py, &v) && (v == 0 || v == 1))
            return g->last = v;
        pyproc_watch(py, 0); /* moved or unreadable: look again */
        g->addr = 0;
        g->retry_at = 0;
    }
    if (!s->gil_locked) /* no thread held the GIL: not collecting, and no look needed */
        return g->last = 0;
    if (clock_mono_ns() < g->retry_at)
        return g->last = -1;
    return g->last = gc_locate(g, py);
}

void engine_gc_fini(struct engine_gcprobe *g)
{
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
