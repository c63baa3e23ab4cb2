/* The head's side of one agent stream: the remote collector notes what a host's connection
 * learns from each message as it parses it (rlink_note: the protocol's version, the host's
 * state and totals), and hands the messages over to the recorder thread (engine_remote_emit),
 * which gives each to the recorder (src/model/recorder.c) with the host's source (l->src: its id
 * maps, rank keys and clock), turning it into history records as the local collectors'
 * findings are; its ranks' live figures and its devices go where this node's go
 * (engine_live.c).
 *
 * Invariants: messages are validated by the parser already, and the recorder checks every
 * reference, time and bound; a host whose source is cut off (a bound or the protocol broken)
 * is cut off for the rest of the run. A host is named by the head (its --hosts entry), never by
 * its agent. Threads: rlink_note on the remote collector's; engine_remote_apply_locked on the
 * recorder's, with the engine lock held, which also guards l->src wherever the remote
 * collector reads or writes it (rlink_set_error takes it). */
#include "engine_remote_priv.h"

#include "ranktop/base/util.h"

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

/* ---- what the recorder hands on (engine lock held): live figures and devices go to the
 * tables this node's own go to (engine_live.c), the devices under the host's slot ---- */

struct sink_ctx {
    struct engine *e;
    struct rlink *l;
};

static void sink_live(void *ctx, int key, const struct record_live *m)
{
    engine_live_apply(((struct sink_ctx *)ctx)->e, key, m);
}

static void sink_device(void *ctx, const struct record_device *m)
{
    struct sink_ctx *c = ctx;

    engine_devs_apply(c->e, c->l->src.slot, c->l->src.host, m);
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
