/* Native frames in the engine's samples (issue 11): which ranks get them, and one native
 * sample of a rank -- every thread stopped on its own, its Python stack read again while it is
 * stopped, both merged (collectors/native) and interned as one stack whose native frames are
 * marked (hframe.native).
 *
 * Which ranks: every one with engine_opts.native (record --native, agent --native), at every
 * sampling pass; or those the monitor toggles with engine_set_native, at ENGINE_NATIVE_HZ only,
 * so that a job is not stopped a hundred times a second. A rank that cannot be traced keeps
 * its Python-only samples and says why once (the view's native_err).
 *
 * Threads: the toggles and the error live under the engine lock; everything else is run by
 * the sampler thread, which owns each slot's native context. */
#include "engine_priv.h"

#include "ranktop/native/native.h"
#include "ranktop/base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NATIVE_RETRY_NS 10000000000ull /* a rank that refused tracing is tried again after */

void engine_native_toggle_locked(struct engine *e, int key, bool on)
{
    size_t k = 0;

    for (size_t i = 0; i < e->nnative; i++)
        if (e->native_keys[i] != key)
            e->native_keys[k++] = e->native_keys[i];
    e->nnative = k;
    if (on && e->nnative < ENGINE_MAX_NATIVE)
        e->native_keys[e->nnative++] = key;
    if (e->native_err_key == key)
        e->native_err[0] = '\0';
}

int engine_set_native(struct engine *e, int key, bool on, struct app_err *err)
{
    if (key >> HISTORY_KEY_PID_BITS)
        return engine_remote_native(e, key, on, err);
    pthread_mutex_lock(&e->lock);
    if (on && e->nnative == ENGINE_MAX_NATIVE) {
        pthread_mutex_unlock(&e->lock);
        return app_err_set(err, APP_E_LIMIT, "native frames are on for %d ranks already",
                           ENGINE_MAX_NATIVE);
    }
    engine_native_toggle_locked(e, key, on);
    pthread_mutex_unlock(&e->lock);
    return 0;
}

int engine_toggle_native(struct engine *e, int key, bool *on, struct app_err *err)
{
    pthread_mutex_lock(&e->lock);
    *on = !engine_native_wanted_locked(e, key);
    pthread_mutex_unlock(&e->lock);
    /* Only the UI thread toggles: nothing flips it between the two locks. */
    return engine_set_native(e, key, *on, err);
}

bool engine_native_wanted_locked(const struct engine *e, int key)
{
    if (e->o.native)
        return true;
    for (size_t i = 0; i < e->nnative; i++)
        if (e->native_keys[i] == key)
            return true;
    return false;
}

static void set_error(struct engine *e, int key, const char *msg)
{
    pthread_mutex_lock(&e->lock);
    snprintf(e->native_err, sizeof(e->native_err), "%s", msg);
    e->native_err_key = key;
    pthread_mutex_unlock(&e->lock);
}

void engine_native_close(struct engine_native *n)
{
    native_close(n->ctx);
    n->ctx = NULL;
}

/* The hook: the stopped thread's Python stack, borrowed until the sampler's next read. */
struct stopped_read {
    struct pyproc *py;
    uint64_t ident;
    const struct pythread *out;
};

static void read_stopped(void *arg, int tid)
{
    struct stopped_read *r = arg;

    (void)tid;
    r->out = pyproc_sample_thread(r->py, r->ident);
}

/* The merged frames as history frames, innermost first, interned as a source-0 stack of si
 * (new definitions to out); a native frame without a symbol is named by its object and
 * offset. A thread the Python sample marked collecting (gc) keeps its <gc> frame on top, as
 * its Python-only stack had it (engine_gc.c): the merge must not hide a GC pause. */
static uint32_t intern_merged(struct engine_sintern *si, struct engine_evbuf *out,
                              struct engine_native *n, const struct merged_frame *m, size_t cnt,
                              bool gc)
{
    size_t top = gc ? 1 : 0, all = cnt + top;

    n->scratch = x_reallocarray(n->scratch, all ? all : 1, sizeof(*n->scratch));
    n->names = x_reallocarray(n->names, cnt ? cnt : 1, ENGINE_NATIVE_NAME);
    if (gc)
        n->scratch[0] = (struct hframe){ENGINE_GC_FRAME, "", 0, false};
    for (size_t i = 0; i < cnt; i++) {
        const struct native_frame *f = m[i].nat;
        char *name = n->names + i * ENGINE_NATIVE_NAME;

        if (!m[i].native) {
            n->scratch[top + i] =
                (struct hframe){m[i].py->function, m[i].py->file, m[i].py->line, false};
            continue;
        }
        if (!f->function) {
            const char *base = strrchr(f->object, '/');

            snprintf(name, ENGINE_NATIVE_NAME, "%s+0x%llx", base ? base + 1 : "?",
                     (unsigned long long)(base ? f->offset : f->ip));
        }
        n->scratch[top + i] = (struct hframe){f->function ? f->function : name, f->object, 0, true};
    }
    return engine_sintern_stack(si, out, n->scratch, (uint32_t)all);
}

/* One thread: stopped, copied, its Python stack read, resumed, unwound, merged and interned.
 * Returns the stack id, or HSTACK_NONE with err set (the caller keeps the Python-only one). */
static uint32_t native_thread(struct engine_sintern *si, struct engine_evbuf *out,
                              struct engine_native *n, struct pyproc *py,
                              const struct engine_tview *v, struct app_err *err)
{
    struct stopped_read rd = {py, v->ident, NULL};
    struct native_hook hook = {read_stopped, &rd};
    struct native_stack st;
    struct merged_frame *m = NULL;
    size_t cnt = 0;
    uint32_t id = HSTACK_NONE;

    if (native_unwind(n->ctx, v->tid, &hook, &st, err) < 0)
        return HSTACK_NONE;
    if (rd.out) { /* else the thread's Python stack could not be read at the stop */
        native_merge(&st, rd.out, &m, &cnt);
        id = intern_merged(si, out, n, m, cnt, v->gc);
    }
    free(m);
    native_stack_fini(&st);
    return id;
}

/* A note of the symbolizer (an object's symbols skipped, and why), said once as the rank's
 * native error unless a real error is already there. */
static void take_notes(struct engine *e, struct engine_native *n, int key)
{
    char *notes = native_take_notes(n->ctx);

    if (!notes)
        return;
    notes[strcspn(notes, "\n")] = '\0';
    pthread_mutex_lock(&e->lock);
    if (!e->native_err[0]) {
        snprintf(e->native_err, sizeof(e->native_err), "%s", notes);
        e->native_err_key = key;
    }
    pthread_mutex_unlock(&e->lock);
    free(notes);
}

void engine_native_sample(struct engine *e, struct engine_native *n, int key, int pid,
                          struct pyproc *py, const struct engine_tview *tv, uint32_t *ids,
                          size_t nthreads, uint64_t now, struct engine_sintern *si,
                          struct engine_evbuf *out)
{
    struct app_err err = {0};

    if (!n->ctx && now < n->retry_at)
        return;
    if (!n->ctx && native_open(pid, &n->ctx, &err) < 0) {
        n->retry_at = now + NATIVE_RETRY_NS;
        set_error(e, key, err.msg);
        return;
    }
    for (size_t i = 0; i < nthreads; i++) {
        uint32_t id;

        if (tv[i].tid <= 0 || tv[i].status != 0) /* unreadable, or skipped (ENGINE_TV_SKIPPED) */
            continue;
        id = native_thread(si, out, n, py, &tv[i], &err);
        if (id != HSTACK_NONE) {
            ids[i] = id;
            continue;
        }
        if (err.code == APP_E_PERM) { /* the same for every thread: try again later */
            set_error(e, key, err.msg);
            engine_native_close(n);
            n->retry_at = now + NATIVE_RETRY_NS;
            return;
        }
    }
    take_notes(e, n, key);
}

void engine_native_fini(struct engine_native *n)
{
    engine_native_close(n);
    free(n->scratch);
    free(n->names);
    memset(n, 0, sizeof(*n));
}
