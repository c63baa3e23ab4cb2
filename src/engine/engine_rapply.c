/* The head's side of one agent stream: the remote collector notes what a host's connection
 * learns from each message as it parses it (rlink_note: the protocol's version, the host's
 * state and totals), and hands the messages over to the recorder thread (engine_remote_emit),
 * which gives each to the recorder (src/model/recorder.c) with the host's source (l->src: its id
 * maps, rank keys and clock), turning it into history records as the local collectors'
 * findings are; its rank's live figures and its devices go to the engine.
 *
 * Invariants: messages are validated by the parser already, and the recorder checks every
 * reference, time and bound; a host whose source is cut off (a bound or the protocol broken)
 * is cut off for the rest of the run. A host is named by the head (its --hosts entry), never by
 * its agent. Threads: rlink_note on the remote collector's; engine_remote_apply_locked on the
 * recorder's, with the engine lock held, which also guards l->src and l->devs wherever the
 * remote collector reads or writes them (rlink_set_error takes it). */
#include "engine_remote_priv.h"

#include "ranktop/util.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_error_v(struct rlink *l, const char *fmt, va_list ap)
{
    vsnprintf(l->src.error, sizeof(l->src.error), fmt, ap);
}

void rlink_set_error_locked(struct rlink *l, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    set_error_v(l, fmt, ap);
    va_end(ap);
}

void rlink_set_error(struct rlink *l, const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&l->e->lock);
    va_start(ap, fmt);
    set_error_v(l, fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&l->e->lock);
}

void rlink_cut(struct rlink *l)
{
    l->refused = l->cut = true;
    l->state = ENGINE_HOST_DOWN;
}

void engine_remote_free(struct engine *e)
{
    for (size_t i = 0; i < e->nrl; i++) {
        rsource_fini(&e->rl[i].src);
        free(e->rl[i].devs);
    }
    free(e->rl);
    e->rl = NULL;
    e->nrl = 0;
    rclaims_free(&e->rclaims);
}

void rlink_keep_totals(struct rlink *l)
{
    l->base[0] += l->passes;
    l->base[1] += l->nstack;
    l->base[2] += l->errors;
    l->base[3] += l->lost;
    l->passes = l->nstack = l->errors = l->lost = 0;
}

/* ---- what the recorder hands on (engine lock held) ---- */

static void on_live(void *ctx, int key, const struct record_live *m)
{
    struct engine_rank_live *v = engine_live_locked(ctx, key);

    v->dev_mem_mb = m->dev_mem_mb;
    v->gil_busy_pct = m->gil_busy_pct;
    v->gil_switches = m->gil_switches;
    v->gil_waiters = m->gil_waiters;
    if (m->gc_pct >= 0) /* sent when it changes (engine_wire.c): the last one holds */
        v->gc_pct = m->gc_pct;
    v->nshares = m->nshares < 16 ? m->nshares : 16;
    for (size_t i = 0; i < v->nshares; i++) {
        v->shares[i].ident = m->shares[i].ident;
        v->shares[i].pct = m->shares[i].pct;
    }
}

static void on_device(void *ctx, const struct record_device *m)
{
    struct rlink *l = ctx;
    struct smi_device *d = NULL;

    for (size_t i = 0; i < l->ndevs && !d; i++)
        if ((l->devs[i].kind == SMI_KIND_NPU) == m->npu && l->devs[i].index == m->index &&
            l->devs[i].chip == m->chip)
            d = &l->devs[i];
    if (!d) {
        if (l->ndevs >= 256)
            return;
        /* The capacity is the next power of two (at least 4): grown by doubling. */
        if (l->ndevs >= 4 && !(l->ndevs & (l->ndevs - 1)))
            l->devs = x_reallocarray(l->devs, l->ndevs * 2, sizeof(*l->devs));
        else if (!l->devs)
            l->devs = x_reallocarray(NULL, 4, sizeof(*l->devs));
        d = &l->devs[l->ndevs++];
    }
    memset(d, 0, sizeof(*d));
    d->kind = m->npu ? SMI_KIND_NPU : SMI_KIND_GPU;
    d->index = m->index;
    d->chip = m->chip;
    d->valid = SMI_DEV_INDEX | SMI_DEV_NAME | (m->npu ? SMI_DEV_CHIP : 0);
    snprintf(d->name, sizeof(d->name), "%s", m->name);
    snprintf(d->host, sizeof(d->host), "%s", l->src.host);
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

struct sink_ctx {
    struct engine *e;
    struct rlink *l;
};

static void sink_live(void *ctx, int key, const struct record_live *m)
{
    on_live(((struct sink_ctx *)ctx)->e, key, m);
}

static void sink_device(void *ctx, const struct record_device *m)
{
    on_device(((struct sink_ctx *)ctx)->l, m);
}

/* A hello of another protocol major: the host is refused (its launcher is not restarted). */
static bool refuse(struct rlink *l, const struct record_hello *m)
{
    if (l->hello || m->major == AGENTPROTO_MAJOR)
        return false;
    rlink_set_error(l,
                    "agent speaks protocol %d.%d (ranktop %s); this head speaks %d: install the "
                    "same ranktop on every node",
                    m->major, m->minor, m->version, AGENTPROTO_MAJOR);
    l->refused = true;
    return true;
}

bool rlink_note(struct rlink *l, const struct record_event *m, bool *tick)
{
    *tick = false;
    if (m->type == RECORD_HELLO) {
        if (refuse(l, &m->u.hello))
            return false;
        if (!l->hello) { /* a second one is the recorder's to refuse */
            l->hello = true;
            snprintf(l->version, sizeof(l->version), "%.31s", m->u.hello.version);
            l->state = ENGINE_HOST_UP;
        }
    } else if (m->type == RECORD_TICK && l->hello) {
        l->passes = m->u.tick.passes;
        l->nstack = m->u.tick.stacks;
        l->errors = m->u.tick.errors;
        l->lost = m->u.tick.lost;
        *tick = true;
    }
    return true;
}

void engine_remote_apply_locked(struct engine *e, const struct engine_rbatch *b, uint64_t now)
{
    for (size_t i = 0; i < b->n; i++) {
        uint32_t li = b->link[i] & ~ENGINE_RLINK_RESET;
        struct rlink *l;
        struct sink_ctx ctx;
        struct recorder_sink sink = {&ctx, sink_live, sink_device};

        if (li >= e->nrl)
            continue;
        l = &e->rl[li];
        ctx = (struct sink_ctx){e, l};
        if (b->link[i] & ENGINE_RLINK_RESET) { /* a new agent numbers anew */
            rsource_reset_ids(&l->src);
            l->src_cut = false;
            continue;
        }
        if (l->src_cut)
            continue;
        recorder_apply(&e->hist, &l->src, &b->ev[i], 1, now, &sink);
        if (l->src.cut) /* the remote collector cuts the host off (rlink_cut) */
            l->src_cut = true;
    }
}
