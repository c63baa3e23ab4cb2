/* The sampler's read helpers: when one thread cannot read every target within the period,
 * the sampler splits a pass's reads into parts and runs them on up to ENGINE_POOL_MAX
 * threads at once (itself included).
 *
 * Helpers only read: each part owns the readers of its targets for the duration of the run,
 * and the history is still written by the sampler thread alone, after engine_pool_run has
 * returned. A run is one generation: the caller publishes it under the pool's mutex, does part
 * 0 itself, and waits until every helper has finished its part, so each reader passes from
 * one thread to another only through that mutex. Helpers are started on first need and live
 * until engine_pool_free; a helper that cannot be started leaves its part to the caller.
 * Threads: the sampler (engine_pool_run, engine_pool_free) and the helpers. */
#include "engine_priv.h"

#include "ranktop/base/util.h"

#include <pthread.h>
#include <stdlib.h>

struct engine_pool {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    pthread_t th[ENGINE_POOL_MAX];
    int nth;      /* helpers started: part i + 1 runs on th[i] */
    uint64_t gen; /* the current run */
    int nparts;   /* parts of the current run */
    int pending;  /* helper parts of the current run not finished */
    bool quit;
    engine_pool_fn fn;
    void *ctx;
};

struct helper_arg {
    struct engine_pool *p;
    int part;
};

static void *helper_main(void *arg)
{
    struct helper_arg a = *(struct helper_arg *)arg;
    struct engine_pool *p = a.p;
    uint64_t seen = 0;

    free(arg);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->gen == seen)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->quit)
            break;
        seen = p->gen;
        if (a.part >= p->nparts)
            continue;
        pthread_mutex_unlock(&p->mu);
        p->fn(p->ctx, a.part, p->nparts);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

struct engine_pool *engine_pool_new(void)
{
    struct engine_pool *p = x_calloc(1, sizeof(*p));

    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    return p;
}

/* Starts helpers until nparts - 1 run; returns how many parts can run in parallel. */
static int pool_grow(struct engine_pool *p, int nparts)
{
    while (p->nth < nparts - 1 && p->nth < ENGINE_POOL_MAX - 1) {
        struct helper_arg *a = x_malloc(sizeof(*a));

        *a = (struct helper_arg){p, p->nth + 1};
        if (pthread_create(&p->th[p->nth], NULL, helper_main, a) != 0) {
            free(a);
            break;
        }
        p->nth++;
    }
    return p->nth + 1;
}

void engine_pool_run(struct engine_pool *p, int nparts, engine_pool_fn fn, void *ctx)
{
    int threads = nparts > 1 ? pool_grow(p, nparts) : 1;

    if (threads > nparts)
        threads = nparts;
    if (threads <= 1) {
        for (int i = 0; i < nparts; i++)
            fn(ctx, i, nparts);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->nparts = threads;
    p->pending = threads - 1;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, threads);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void engine_pool_free(struct engine_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nth; i++)
        pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
