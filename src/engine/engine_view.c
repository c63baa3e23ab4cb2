/* Published views: what readers (the monitor, the recorder's saves, exports) take instead of
 * asking the engine field by field.
 *
 * The engine keeps one published view (e->view, with a reference of its own) under
 * e->view_lock. engine_acquire takes a reference to it while it is younger than
 * ENGINE_VIEW_PERIOD_NS, else builds a new one and publishes it; a view is never written once
 * published, and the last engine_release frees it, so a reader holds no lock while it reads.
 * Lock order: view_lock, then the engine lock (only while building); collectors never take
 * view_lock, so a reader waits at most for another reader's build, never a collector for one.
 * The engine's reference lasts until the next build or engine_stop: a recorder between two
 * saves keeps the last one, the one copy the memory cap allows for.
 *
 * Today a view is built by the reader that finds the published one too old: view_build, the
 * one function that copies, takes the engine lock for the history copy and the getters' short
 * locks for the rest. When the recorder owns the history, it calls view_build itself, off the
 * collectors' path, and publishes every ENGINE_VIEW_PERIOD_NS; engine_acquire then only takes
 * a reference. Any thread. */
#include "ranktop/engine.h"
#include "engine_priv.h"

#include "ranktop/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Views allocated and not yet freed, in the whole process (engine_view_count). */
static atomic_size_t views_alive;

struct engine_view *engine_view_new(void)
{
    struct engine_view *v = x_calloc(1, sizeof(*v));

    atomic_init(&v->refs, 1);
    atomic_fetch_add(&views_alive, 1);
    return v;
}

size_t engine_view_count(void)
{
    return atomic_load(&views_alive);
}

void engine_release(const struct engine_view *cv)
{
    /* The reference count is the one field that changes after publication. */
    struct engine_view *v = (struct engine_view *)cv;

    if (!v || atomic_fetch_sub(&v->refs, 1) != 1)
        return;
    history_fini(&v->hist);
    free(v->native_keys);
    free(v->devs);
    free(v->live);
    free(v->hosts);
    free(v->unread);
    free(v);
    atomic_fetch_sub(&views_alive, 1);
}

/* The native toggles, rate and asyncio state: fields without a getter of their own. */
static void copy_controls_locked(struct engine *e, struct engine_view *v)
{
    v->rate_hz = e->o.rate_hz;
    v->async_on = e->o.async;
    v->native_all = e->o.native;
    v->nnative = e->nnative;
    v->native_keys = x_calloc(e->nnative ? e->nnative : 1, sizeof(*v->native_keys));
    memcpy(v->native_keys, e->native_keys, e->nnative * sizeof(*v->native_keys));
    snprintf(v->native_err, sizeof(v->native_err), "%s", e->native_err);
    v->native_err_key = e->native_err_key;
}

/* Everything a reader reads, copied at `now`. The only place a view is filled. */
static struct engine_view *view_build(struct engine *e, uint64_t now)
{
    struct engine_view *v = engine_view_new();
    size_t n;

    v->t = now;
    pthread_mutex_lock(&e->lock);
    history_clone(&e->hist, &v->hist);
    copy_controls_locked(e, v);
    pthread_mutex_unlock(&e->lock);
    engine_get_stats(e, &v->stats);
    engine_snapshot_live(e, &v->devs, &v->ndevs, &v->live, &v->nlive);
    engine_hosts(e, &v->hosts, &v->nhosts);
    v->ngrowth = engine_mem_growth(e, &v->growth_pid, v->growth, ENGINE_VIEW_GROWTH);
    v->unread = x_calloc(ENGINE_MAX_UNREAD, sizeof(*v->unread));
    n = engine_unreadable(e, v->unread, ENGINE_MAX_UNREAD);
    v->nunread = n < ENGINE_MAX_UNREAD ? n : ENGINE_MAX_UNREAD;
    engine_attach_error(e, v->attach_err, sizeof(v->attach_err));
    engine_last_errors(e, v->last_errors, sizeof(v->last_errors));
    return v;
}

const struct engine_view *engine_acquire(struct engine *e)
{
    uint64_t now = clock_mono_ns();
    struct engine_view *v;

    pthread_mutex_lock(&e->view_lock);
    /* The stale view goes before the new one is built: when no reader holds it, the process
     * then never holds two copies of the history for its readers (the memory cap counts one,
     * history.h's HISTORY_CAP_SHARE). */
    if (e->view && now - e->view->t >= ENGINE_VIEW_PERIOD_NS) {
        engine_release(e->view);
        e->view = NULL;
    }
    if (!e->view)
        e->view = view_build(e, now);
    v = e->view;
    atomic_fetch_add(&v->refs, 1);
    pthread_mutex_unlock(&e->view_lock);
    return v;
}

void engine_view_expire(struct engine *e)
{
    struct engine_view *old;

    pthread_mutex_lock(&e->view_lock);
    old = e->view;
    e->view = NULL;
    pthread_mutex_unlock(&e->view_lock);
    engine_release(old);
}
