/* The head's per-host bounds and hashed lookups for agent streams: each host's set of rank
 * keys (with the history index of each, cached), its memory budget, and the head-wide index of
 * rank numbers that finds a rank number claimed twice without scanning every rank.
 *
 * Invariants: a host's tables (engine_rapply.c) never hold more than RLINK_MEM_MAX bytes; the
 * host that would pass it is cut off, never the head. Cached history indexes are hints, checked
 * against the rank's key on every use, because the history drops exited ranks and moves the
 * others. Runs on the remote collector's thread with the engine lock held. */
#include "engine_remote_priv.h"

#include "ranktop/hash.h"
#include "ranktop/util.h"

#include <stdlib.h>
#include <string.h>

/* ---- the host's budget ---- */

bool rlink_budget(struct rlink *l, size_t n, const char *what)
{
    if (l->mem + n <= RLINK_MEM_MAX) {
        l->mem += n;
        return true;
    }
    rlink_set_error(l,
                    "agent stream: its %s would take the head's tables for this host past %u "
                    "MiB: host cut off",
                    what, RLINK_MEM_MAX >> 20);
    rlink_cut(l);
    return false;
}

void rlink_cut(struct rlink *l)
{
    rlink_reset_ids(l);
    l->refused = l->cut = true;
    l->state = ENGINE_HOST_DOWN;
}

/* ---- rank keys: open addressing, key 0 = empty (a host's keys have a slot >= 1) ---- */

static size_t key_home(int key, size_t cap)
{
    return (size_t)hash_fmix((uint64_t)(unsigned)key) & (cap - 1);
}

struct rkey *rlink_key_find(const struct rlink *l, int key)
{
    if (!l->kcap)
        return NULL;
    for (size_t i = key_home(key, l->kcap);; i = (i + 1) & (l->kcap - 1)) {
        if (l->keys[i].key == key)
            return &l->keys[i];
        if (!l->keys[i].key)
            return NULL;
    }
}

static void keys_grow(struct rlink *l, size_t cap)
{
    struct rkey *old = l->keys;
    size_t ocap = l->kcap;

    l->keys = x_calloc(cap, sizeof(*l->keys));
    l->kcap = cap;
    for (size_t i = 0; i < ocap; i++) {
        size_t k;

        if (!old[i].key)
            continue;
        for (k = key_home(old[i].key, cap); l->keys[k].key; k = (k + 1) & (cap - 1))
            ;
        l->keys[k] = old[i];
    }
    free(old);
}

struct rkey *rlink_key_add(struct rlink *l, int key)
{
    size_t k;

    if ((l->nkeys + 1) * 2 > l->kcap) {
        size_t cap = l->kcap ? l->kcap * 2 : 64;

        if (!rlink_budget(l, (cap - l->kcap) * sizeof(*l->keys), "rank keys"))
            return NULL;
        keys_grow(l, cap);
    }
    for (k = key_home(key, l->kcap); l->keys[k].key; k = (k + 1) & (l->kcap - 1))
        ;
    l->keys[k] = (struct rkey){.key = key, .ri = SIZE_MAX};
    l->nkeys++;
    return &l->keys[k];
}

void rlink_keys_free(struct rlink *l)
{
    free(l->keys);
    free(l->series);
    l->keys = NULL;
    l->series = NULL;
    l->nkeys = l->kcap = l->nlive = l->nseries = 0;
}

/* ---- rank numbers claimed by live ranks ---- */

static size_t claim_home(int rank, size_t cap)
{
    return (size_t)hash_fmix((uint64_t)(unsigned)rank) & (cap - 1);
}

static void claims_put(struct rclaims *c, int rank, int key, size_t ri)
{
    size_t i;

    for (i = claim_home(rank, c->cap); c->slot[i].rank >= 0; i = (i + 1) & (c->cap - 1))
        ;
    c->slot[i].rank = rank;
    c->slot[i].key = key;
    c->slot[i].ri = ri;
    c->used++;
}

/* Indexes every live rank with a number afresh: drops entries of ranks that moved, exited or
 * were renumbered. The table is kept at most a quarter full. */
static void claims_rebuild(struct rclaims *c, const struct history *h)
{
    size_t cap = 64;

    while (cap < (h->nranks + 16) * 4)
        cap *= 2;
    free(c->slot);
    c->slot = x_calloc(cap, sizeof(*c->slot));
    for (size_t i = 0; i < cap; i++)
        c->slot[i].rank = -1;
    c->cap = cap;
    c->used = 0;
    for (c->scanned = 0; c->scanned < h->nranks; c->scanned++) {
        const struct hrank *r = &h->ranks[c->scanned];

        if (r->rank >= 0 && !r->exited)
            claims_put(c, r->rank, r->pid, c->scanned);
    }
}

static void claims_add(struct rclaims *c, const struct history *h, int rank, int key, size_t ri)
{
    if (!c->cap || (c->used + 1) * 2 > c->cap)
        claims_rebuild(c, h); /* also indexes ri */
    else
        claims_put(c, rank, key, ri);
}

/* Brings the index up to the history's rank table: ranks appended since are indexed. */
static void claims_catch_up(struct rclaims *c, const struct history *h)
{
    if (!c->cap || c->scanned > h->nranks) {
        claims_rebuild(c, h);
        return;
    }
    for (; c->scanned < h->nranks; c->scanned++) {
        const struct hrank *r = &h->ranks[c->scanned];

        if (r->rank >= 0 && !r->exited)
            claims_add(c, h, r->rank, r->pid, c->scanned);
    }
}

size_t rclaims_find(struct rclaims *c, const struct history *h, int rank, int key)
{
    if (rank < 0)
        return SIZE_MAX;
    claims_catch_up(c, h);
    for (int pass = 0; pass < 2; pass++) {
        bool stale = false;

        for (size_t i = claim_home(rank, c->cap); c->slot[i].rank >= 0;
             i = (i + 1) & (c->cap - 1)) {
            const struct hrank *r;

            if (c->slot[i].rank != rank)
                continue;
            if (c->slot[i].ri >= h->nranks || h->ranks[c->slot[i].ri].pid != c->slot[i].key) {
                stale = true; /* the history moved its ranks */
                continue;
            }
            r = &h->ranks[c->slot[i].ri];
            if (r->rank == rank && !r->exited && r->pid != key)
                return c->slot[i].ri;
        }
        if (!stale)
            break;
        claims_rebuild(c, h);
    }
    return SIZE_MAX;
}

void rclaims_note(struct rclaims *c, const struct history *h, size_t ri)
{
    if (ri < c->scanned && h->ranks[ri].rank >= 0)
        claims_add(c, h, h->ranks[ri].rank, h->ranks[ri].pid, ri);
}

void rclaims_free(struct rclaims *c)
{
    free(c->slot);
    memset(c, 0, sizeof(*c));
}
