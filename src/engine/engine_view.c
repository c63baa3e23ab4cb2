/* Published views: what readers (the monitor, the recorder's saves, exports) take instead of
 * asking the engine field by field.
 *
 * The engine keeps one published view (e->view, with a reference of its own) under
 * e->view_lock. engine_acquire takes a reference to it whatever its age, and asks for a new
 * one when it is ENGINE_VIEW_PERIOD_NS old (the next call gets that one), so that a reader
 * never waits for a copy once the first view exists; engine_acquire_fresh waits for a view
 * built since the period began. While such a steady reader (the monitor) is about (it called
 * engine_acquire within STEADY_NS), the stale view stays published until the next one
 * replaces it: a save's engine_acquire_fresh, or the build the monitor asked for, must not
 * leave the monitor's next frame waiting for a build; without a steady reader (record) a stale
 * view is dropped before the next build. A view is never written once published, and the last
 * engine_release frees it, so a reader holds no lock while it reads. Lock order: view_lock,
 * then the engine lock (only while a reader builds); collectors never take view_lock, so a
 * reader waits at most for a build, never a collector for one. The engine's reference lasts
 * until the next build or engine_stop. A view's history is a history_clone: it shares the
 * runs, points and tables with the engine's history and copies only the rank, thread and
 * series records, so building one costs O(ranks + threads), however long the history.
 *
 * A reader that finds the published view too old asks the recorder thread for a new one and
 * waits (engine_queue.c): view_build, the one function that copies, then runs on the recorder
 * thread, which is the history's one writer and so copies it without the engine lock while no
 * other writer exists; the getters take their short locks for the rest. Without a recorder
 * (after engine_stop, or in an agent) the reader builds the view itself, the history copied
 * under the engine lock. Any thread. */
#include "ranktop/engine/engine.h"
#include "engine_priv.h"

#include "ranktop/base/util.h"

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

/* Everything a reader reads, copied at `now`. The only place a view is filled. The history
 * is copied under the engine lock unless the caller is its one writer (unlocked). */
static struct engine_view *view_build(struct engine *e, uint64_t now, bool unlocked)
{
    struct engine_view *v = engine_view_new();
    size_t n;

    v->t = now;
    if (unlocked)
        history_clone(&e->hist, &v->hist);
    pthread_mutex_lock(&e->lock);
    if (!unlocked)
        history_clone(&e->hist, &v->hist);
    copy_controls_locked(e, v);
    pthread_mutex_unlock(&e->lock);
    engine_get_stats(e, &v->stats);
    engine_live_view(e, v, unlocked);
    engine_hosts(e, &v->hosts, &v->nhosts);
    v->ngrowth = engine_mem_growth(e, &v->growth_pid, v->growth, ENGINE_VIEW_GROWTH);
    v->unread = x_calloc(ENGINE_MAX_UNREAD, sizeof(*v->unread));
    n = engine_unreadable(e, v->unread, ENGINE_MAX_UNREAD);
    v->nunread = n < ENGINE_MAX_UNREAD ? n : ENGINE_MAX_UNREAD;
    engine_attach_error(e, v->attach_err, sizeof(v->attach_err));
    engine_last_errors(e, v->last_errors, sizeof(v->last_errors));
    return v;
}

/* How long after its last engine_acquire a reader counts as steady: a few of the monitor's
 * 0.5 s frames. */
#define STEADY_NS 2000000000ull

/* Drops the published view when stale (view_lock held), unless a steady reader may come back
 * for it before the next one is built (and `keep`): when no reader holds it, the process then
 * never holds two copies of the history for its readers (the memory cap counts one,
 * history.h's HISTORY_CAP_SHARE). Returns whether a fresh one is published. */
static bool drop_stale_locked(struct engine *e, uint64_t now, bool keep)
{
    bool stale = e->view && now - e->view->t >= ENGINE_VIEW_PERIOD_NS;

    keep = keep && e->steady_at && now - e->steady_at < STEADY_NS;
    if (stale && !keep) {
        engine_release(e->view);
        e->view = NULL;
    }
    return e->view && !stale;
}

void engine_release_later(struct engine *e, const struct engine_view *v)
{
    bool handed = false;

    if (!v)
        return;
    pthread_mutex_lock(&e->view_lock);
    if (e->rec_running && e->ndead < sizeof(e->dead) / sizeof(e->dead[0])) {
        e->dead[e->ndead++] = v;
        handed = true;
    }
    pthread_mutex_unlock(&e->view_lock);
    if (!handed)
        engine_release(v);
}

/* Gives back what engine_release_later left (on the recorder thread, or at the end). */
static void reap(struct engine *e)
{
    const struct engine_view *dead[sizeof(e->dead) / sizeof(e->dead[0])];
    size_t n;

    pthread_mutex_lock(&e->view_lock);
    n = e->ndead;
    memcpy(dead, e->dead, n * sizeof(*dead));
    e->ndead = 0;
    pthread_mutex_unlock(&e->view_lock);
    for (size_t i = 0; i < n; i++)
        engine_release(dead[i]);
}

void engine_view_publish(struct engine *e, bool unlocked_clone)
{
    uint64_t now = clock_mono_ns();
    struct engine_view *v, *old;

    reap(e); /* before the copy: the process holds no more copies than it did */
    pthread_mutex_lock(&e->view_lock);
    e->view_want = false;
    if (drop_stale_locked(e, now, true)) {
        pthread_cond_broadcast(&e->view_cond);
        pthread_mutex_unlock(&e->view_lock);
        return;
    }
    pthread_mutex_unlock(&e->view_lock);
    /* Readers that found no view wait meanwhile; no collector does. */
    v = view_build(e, now, unlocked_clone);
    pthread_mutex_lock(&e->view_lock);
    old = e->view; /* the stale one a steady reader may still have come for */
    e->view = v;
    pthread_mutex_unlock(&e->view_lock);
    /* Freed (when no reader holds it) outside the lock: freeing a history takes milliseconds,
     * and the monitor's engine_acquire takes view_lock. Before the waiters wake, so that a
     * save that gets the new view finds the old one already given back. */
    engine_release(old);
    pthread_mutex_lock(&e->view_lock);
    pthread_cond_broadcast(&e->view_cond);
    pthread_mutex_unlock(&e->view_lock);
}

/* Asks the recorder for a view built at `since` or later and waits for it (view_lock held);
 * false when the recorder is not running (any more), and the caller builds one itself. */
static bool await_recorder_locked(struct engine *e, uint64_t since)
{
    while (e->rec_running && !(e->view && e->view->t >= since)) {
        e->view_want = true;
        engine_wake(e);
        pthread_cond_wait(&e->view_cond, &e->view_lock);
    }
    return e->view && e->view->t >= since;
}

/* A reference to e->view (view_lock held), built here when none could be had from the
 * recorder: after engine_stop, or in an agent's engine. The collectors may still be ending,
 * so the copy takes the engine lock. */
static const struct engine_view *take_locked(struct engine *e, uint64_t now)
{
    if (!e->view) {
        e->view = view_build(e, now, false);
        pthread_cond_broadcast(&e->view_cond);
    }
    atomic_fetch_add(&e->view->refs, 1);
    return e->view;
}

const struct engine_view *engine_acquire(struct engine *e)
{
    uint64_t now = clock_mono_ns();
    const struct engine_view *v;

    pthread_mutex_lock(&e->view_lock);
    e->steady_at = now;
    if (e->view && now - e->view->t >= ENGINE_VIEW_PERIOD_NS) {
        if (e->rec_running) { /* this one now; a new one for the next call */
            e->view_want = true;
            engine_wake(e);
        } else {
            drop_stale_locked(e, now, false);
        }
    }
    if (!e->view)
        await_recorder_locked(e, 0);
    v = take_locked(e, now);
    pthread_mutex_unlock(&e->view_lock);
    return v;
}

const struct engine_view *engine_acquire_fresh(struct engine *e)
{
    uint64_t now = clock_mono_ns();
    const struct engine_view *v;

    pthread_mutex_lock(&e->view_lock);
    if (!drop_stale_locked(e, now, true) && !await_recorder_locked(e, now)) {
        engine_release(e->view); /* one the recorder built before it ended, too old */
        e->view = NULL;
    }
    v = take_locked(e, now);
    pthread_mutex_unlock(&e->view_lock);
    return v;
}

void engine_view_expire(struct engine *e)
{
    struct engine_view *old;

    reap(e);
    pthread_mutex_lock(&e->view_lock);
    old = e->view;
    e->view = NULL;
    pthread_mutex_unlock(&e->view_lock);
    engine_release(old);
}
