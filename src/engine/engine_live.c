/* Live figures and devices: what the collectors find that is state now rather than history (a
 * rank's GIL busy %, device memory, main-thread wait, GC, whether it is stopped; each source's
 * devices). The recorder applies every source's RECORD_LIVE and RECORD_DEVICE events here
 * through its sink, this node's collectors (source 0) exactly as another host's agent, and the
 * views copy the result.
 *
 * Invariants: a live event sets only the parts it carries (record_live.set); the others keep
 * what they had. Ranks are keyed by their history key (a pid on this node). Devices are kept
 * per source slot (0: this node, whose discovery replaces its list each pass; another host's
 * are updated one at a time and kept), at most LIVE_DEVS a source, in the order first seen;
 * a view lists this node's, then each host's in slot order.
 *
 * Threads: written by the recorder thread alone, while it applies (under the engine lock, so
 * that engine_snapshot_live may read them under it); copied into a view on that thread with no
 * lock, or under the lock where no recorder runs (after engine_stop). An agent applies nothing:
 * its tables stay empty. */
#include "engine_priv.h"

#include "ranktop/base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIVE_DEVS 256 /* devices kept per source */

void engine_live_init(struct engine_rank_live *l, int key)
{
    memset(l, 0, sizeof(*l));
    l->pid = key;
    l->dev_mem_mb = -1;
    l->gil_busy_pct = -1;
    l->gil_waiters = -1;
    l->syscall = -1;
    l->in_gc = -1;
    l->gc_pct = -1;
}

/* The live record of key, created unknown on first use. */
static struct engine_rank_live *live_of(struct engine *e, int key)
{
    for (size_t i = 0; i < e->nlive; i++)
        if (e->live[i].pid == key)
            return &e->live[i];
    e->live = x_reallocarray(e->live, e->nlive + 1, sizeof(*e->live));
    engine_live_init(&e->live[e->nlive], key);
    return &e->live[e->nlive++];
}

void engine_live_apply(struct engine *e, int key, const struct record_live *m)
{
    engine_live_merge(live_of(e, key), m);
}

void engine_live_merge(struct engine_rank_live *v, const struct record_live *m)
{
    if (m->set & RECORD_LIVE_DEVMEM)
        v->dev_mem_mb = m->dev_mem_mb;
    if (m->set & RECORD_LIVE_GIL) {
        v->gil_busy_pct = m->gil_busy_pct;
        v->gil_switches = m->gil_switches;
        v->gil_waiters = m->gil_waiters;
        v->nshares = m->nshares < RECORD_SHARES ? m->nshares : RECORD_SHARES;
        for (size_t i = 0; i < v->nshares; i++) {
            v->shares[i].ident = m->shares[i].ident;
            v->shares[i].pct = m->shares[i].pct;
        }
    }
    if (m->set & RECORD_LIVE_GC) {
        v->gc_pct = m->gc_pct;
        v->in_gc = m->in_gc;
    }
    if (m->set & RECORD_LIVE_WAIT) {
        v->state = m->state;
        v->syscall = m->syscall;
        v->no_fds = m->no_fds;
    }
    if (m->set & RECORD_LIVE_STOPPED)
        v->stopped = m->stopped;
}

/* The device list of source slot, created empty. */
static struct engine_devlist *devs_of(struct engine *e, int slot)
{
    if ((size_t)slot >= e->ndevlists) {
        size_t n = (size_t)slot + 1;

        e->devs = x_reallocarray(e->devs, n, sizeof(*e->devs));
        memset(e->devs + e->ndevlists, 0, (n - e->ndevlists) * sizeof(*e->devs));
        e->ndevlists = n;
    }
    return &e->devs[slot];
}

/* The device m names in l (a device without an index is never the same as another), or a new
 * one at its end; NULL past LIVE_DEVS. */
static struct smi_device *device_of(struct engine_devlist *l, const struct record_device *m)
{
    for (size_t i = 0; i < l->n && m->index >= 0; i++)
        if ((l->d[i].kind == SMI_KIND_NPU) == m->npu && l->d[i].index == m->index &&
            l->d[i].chip == m->chip)
            return &l->d[i];
    if (l->n >= LIVE_DEVS)
        return NULL;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 4;
        l->d = x_reallocarray(l->d, l->cap, sizeof(*l->d));
    }
    return &l->d[l->n++];
}

void engine_devs_apply(struct engine *e, int slot, const char *host, const struct record_device *m)
{
    struct engine_devlist *l;
    struct smi_device *d;

    if (slot < 0)
        return;
    l = devs_of(e, slot);
    if (m->first)
        l->n = 0;
    if (m->none || !(d = device_of(l, m)))
        return;
    memset(d, 0, sizeof(*d));
    d->kind = m->npu ? SMI_KIND_NPU : SMI_KIND_GPU;
    d->index = m->index;
    d->chip = m->chip;
    d->valid = (m->index >= 0 ? SMI_DEV_INDEX : 0) | SMI_DEV_NAME | (m->npu ? SMI_DEV_CHIP : 0);
    snprintf(d->name, sizeof(d->name), "%s", m->name);
    snprintf(d->host, sizeof(d->host), "%s", host);
#define DEV_FIELD(bit, field, v)                                                                   \
    if ((v) >= 0) {                                                                                \
        d->valid |= (bit);                                                                         \
        d->field = (v);                                                                            \
    }
    DEV_FIELD(SMI_DEV_UTIL, util_pct, m->util_pct)
    DEV_FIELD(SMI_DEV_MEM_USED, mem_used_mb, m->mem_used_mb)
    DEV_FIELD(SMI_DEV_MEM_TOTAL, mem_total_mb, m->mem_total_mb)
    DEV_FIELD(SMI_DEV_TEMP, temp_c, m->temp_c)
    DEV_FIELD(SMI_DEV_POWER, power_w, m->power_w)
#undef DEV_FIELD
}

static void local_live(void *ctx, int key, const struct record_live *m)
{
    engine_live_apply(ctx, key, m);
}

/* This node's devices carry no host name (a view names other hosts' only). */
static void local_device(void *ctx, const struct record_device *m)
{
    engine_devs_apply(ctx, 0, "", m);
}

void engine_local_apply_locked(struct engine *e, const struct engine_evbuf *b, uint64_t now)
{
    struct recorder_sink sink = {e, local_live, local_device};
    const struct record_event *ev;
    size_t off = 0;

    while ((ev = engine_evbuf_next(b, &off)))
        recorder_apply(&e->hist, &e->local, ev, 1, now, &sink);
}

/* Copies of the devices (this node's first) and the live records. */
static void copy_live(const struct engine *e, struct smi_device **devs, size_t *ndevs,
                      struct engine_rank_live **ranks, size_t *nranks)
{
    size_t nd = 0;

    for (size_t i = 0; i < e->ndevlists; i++)
        nd += e->devs[i].n;
    *devs = x_calloc(nd ? nd : 1, sizeof(**devs));
    *ndevs = 0;
    for (size_t i = 0; i < e->ndevlists; i++) {
        if (e->devs[i].n)
            memcpy(*devs + *ndevs, e->devs[i].d, e->devs[i].n * sizeof(**devs));
        *ndevs += e->devs[i].n;
    }
    *nranks = e->nlive;
    *ranks = x_calloc(e->nlive ? e->nlive : 1, sizeof(**ranks));
    if (e->nlive)
        memcpy(*ranks, e->live, e->nlive * sizeof(**ranks));
}

void engine_live_view(struct engine *e, struct engine_view *v, bool unlocked)
{
    if (!unlocked)
        pthread_mutex_lock(&e->lock);
    copy_live(e, &v->devs, &v->ndevs, &v->live, &v->nlive);
    if (!unlocked)
        pthread_mutex_unlock(&e->lock);
}

void engine_snapshot_live(struct engine *e, struct smi_device **devs, size_t *ndevs,
                          struct engine_rank_live **ranks, size_t *nranks)
{
    pthread_mutex_lock(&e->lock);
    copy_live(e, devs, ndevs, ranks, nranks);
    pthread_mutex_unlock(&e->lock);
}

void engine_live_free(struct engine *e)
{
    for (size_t i = 0; i < e->ndevlists; i++)
        free(e->devs[i].d);
    free(e->devs);
    free(e->live);
    e->devs = NULL;
    e->live = NULL;
    e->ndevlists = e->nlive = 0;
}
