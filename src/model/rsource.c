/* A record source's state, bounds and hashed lookups: its life (init, reset when a new agent
 * numbers anew, fini), its error line, its set of rank keys (with the history index of each,
 * cached), its memory budget, and the history-wide index of rank numbers that finds a rank
 * number claimed twice without scanning every rank.
 *
 * Invariants: a source's tables (recorder.c) never hold more than RSOURCE_MEM_MAX bytes; the
 * source that would pass it is cut off, never the history's owner. Cached history indexes are
 * hints, checked against the rank's key on every use, because the history drops exited ranks
 * and moves the others. Runs on the history's writer (recorder.h). */
#include "recorder_priv.h"

#include "ranktop/base/hash.h"
#include "ranktop/base/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- life ---- */

void rsource_init(struct rsource *s, int slot, const char *host, struct rclaims *claims)
{
    memset(s, 0, sizeof(*s));
    s->slot = slot;
    snprintf(s->host, sizeof(s->host), "%s", host);
    s->claims = claims;
    s->rtt_ns = INT64_MAX;
    s->last_tick = -1;
}

void rsource_set_error(struct rsource *s, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(s->error, sizeof(s->error), fmt, ap);
    va_end(ap);
}

void rsource_reset_ids(struct rsource *s)
{
    for (size_t i = 0; i < s->nframes; i++) {
        free(s->frames[i].fn);
        free(s->frames[i].file);
    }
    for (size_t i = 0; i < s->nstacks; i++)
        free(s->stacks[i].ids);
    free(s->frames);
    free(s->stacks);
    free(s->threads);
    s->frames = NULL;
    s->stacks = NULL;
    s->threads = NULL;
    s->nframes = s->nstacks = s->nthreads = s->nlive_threads = 0;
    s->def_frames = s->def_stacks = s->def_threads = 0;
    s->ranks_said = s->threads_said = false;
    s->hello = false;
    s->rtt_ns = INT64_MAX;
    s->last_tick = -1;
    s->mem = s->kcap * sizeof(*s->keys) + (s->series ? RSOURCE_MAX_SERIES * sizeof(*s->series) : 0);
}

void rsource_forget_defs(struct rsource *s)
{
    for (size_t i = 0; i < s->nframes; i++) {
        if (s->frames[i].fn)
            s->mem -= strlen(s->frames[i].fn) + strlen(s->frames[i].file) + 2;
        free(s->frames[i].fn);
        free(s->frames[i].file);
    }
    for (size_t i = 0; i < s->nstacks; i++) {
        s->mem -= s->stacks[i].cap * sizeof(*s->stacks[i].ids);
        free(s->stacks[i].ids);
    }
    s->mem -= s->nframes * sizeof(*s->frames) + s->nstacks * sizeof(*s->stacks);
    free(s->frames);
    free(s->stacks);
    s->frames = NULL;
    s->stacks = NULL;
    s->nframes = s->nstacks = 0;
    s->def_frames = s->def_stacks = 0;
    for (size_t i = 0; i < s->nthreads; i++) /* what they show stays: cur */
        s->threads[i].cur_wire = -1;
}

void rsource_fini(struct rsource *s)
{
    rsource_reset_ids(s);
    free(s->keys);
    free(s->series);
    s->keys = NULL;
    s->series = NULL;
    s->nkeys = s->kcap = s->nlive = s->nseries = 0;
}

/* ---- the host's budget ---- */

bool rsource_budget(struct rsource *s, size_t n, const char *what)
{
    if (s->mem + n <= RSOURCE_MEM_MAX) {
        s->mem += n;
        return true;
    }
    rsource_set_error(s,
                      "agent stream: its %s would take the head's tables for this host past %u "
                      "MiB: host cut off",
                      what, RSOURCE_MEM_MAX >> 20);
    rsource_cut(s);
    return false;
}

void rsource_cut(struct rsource *s)
{
    rsource_reset_ids(s);
    s->cut = true;
}

/* ---- rank keys: open addressing, key 0 = empty (a source's keys are never 0) ---- */

static size_t key_home(int key, size_t cap)
{
    return (size_t)hash_fmix((uint64_t)(unsigned)key) & (cap - 1);
}

struct rsource_key *rsource_key_find(const struct rsource *s, int key)
{
    if (!s->kcap)
        return NULL;
    for (size_t i = key_home(key, s->kcap);; i = (i + 1) & (s->kcap - 1)) {
        if (s->keys[i].key == key)
            return &s->keys[i];
        if (!s->keys[i].key)
            return NULL;
    }
}

static void keys_grow(struct rsource *s, size_t cap)
{
    struct rsource_key *old = s->keys;
    size_t ocap = s->kcap;

    s->keys = x_calloc(cap, sizeof(*s->keys));
    s->kcap = cap;
    for (size_t i = 0; i < ocap; i++) {
        size_t k;

        if (!old[i].key)
            continue;
        for (k = key_home(old[i].key, cap); s->keys[k].key; k = (k + 1) & (cap - 1))
            ;
        s->keys[k] = old[i];
    }
    free(old);
}

struct rsource_key *rsource_key_add(struct rsource *s, int key)
{
    size_t k;

    if ((s->nkeys + 1) * 2 > s->kcap) {
        size_t cap = s->kcap ? s->kcap * 2 : 64;

        if (!rsource_budget(s, (cap - s->kcap) * sizeof(*s->keys), "rank keys"))
            return NULL;
        keys_grow(s, cap);
    }
    for (k = key_home(key, s->kcap); s->keys[k].key; k = (k + 1) & (s->kcap - 1))
        ;
    s->keys[k] = (struct rsource_key){.key = key, .ri = SIZE_MAX};
    s->nkeys++;
    return &s->keys[k];
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
