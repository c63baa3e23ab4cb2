/* The local sampler's frame and stack ids as source 0 of the recorder, and the event batches
 * collectors build.
 *
 * The sampler speaks to the history as an agent does: it defines each frame and stack once
 * with an id of its own (RECORD_FRAME, RECORD_STACK) and names the stack by id in every run
 * afterwards. This file owns those ids: two open-addressing tables keyed by content (a frame's
 * function, file, line and kind; a stack's frame ids), so that the steady state, where every
 * stack was seen before, allocates nothing. Ids are dense from 0. The tables keep their own
 * copies of the texts (the reader's strings live in its code cache, which an exec drops).
 *
 * Invariant: an id handed out was defined, by an event appended to the batch of the same
 * pass, before any event that uses it. engine_sintern_trim forgets everything between two
 * passes once the tables pass ENGINE_SINTERN_MAX: the next definitions reuse ids from 0, which
 * the recorder takes as redefinitions, so what it holds for source 0 stays bounded too.
 *
 * Thread: the sampler thread only (the native merge runs on it too); no lock. */
#include "engine_priv.h"

#include "ranktop/base/hash.h"
#include "ranktop/base/util.h"

#include <stdlib.h>
#include <string.h>

struct sintern_frame {
    uint64_t h;
    char *fn, *file;
    int line;
    bool native;
};

struct sintern_stack {
    uint64_t h;
    uint32_t n;
    uint32_t *ids; /* outermost first */
};

/* Copies at most RECORD_TEXT - 1 bytes of src (NULL: "") into dst, as the event carries it. */
static void text_copy(char *dst, const char *src)
{
    size_t n = src ? strnlen(src, RECORD_TEXT - 1) : 0;

    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
}

/* Doubles a table of id + 1 entries (0 empty) keyed by key(ctx, id), to keep it at most half
 * full. */
static void rehash(uint32_t **slots, size_t *nslots, uint32_t used, const void *items, size_t size)
{
    size_t n = *nslots ? *nslots : 1024;
    uint32_t *t;

    while (n < (size_t)used * 2 + 2)
        n *= 2;
    t = x_calloc(n, sizeof(*t));
    for (uint32_t id = 0; id < used; id++) {
        uint64_t h = *(const uint64_t *)((const char *)items + (size_t)id * size);
        size_t i = h & (n - 1);

        while (t[i])
            i = (i + 1) & (n - 1);
        t[i] = id + 1;
    }
    free(*slots);
    *slots = t;
    *nslots = n;
}

static uint64_t frame_hash(const char *fn, const char *file, int line, bool native)
{
    return hash_mix(hash_mix(hash_mix(hash_str(fn), hash_str(file)), (uint64_t)line), native);
}

/* A new frame: kept, and its definition appended to out. */
static uint32_t frame_add(struct engine_sintern *si, struct engine_evbuf *out, uint64_t h,
                          const char *fn, const char *file, int line, bool native)
{
    uint32_t id = si->nframes++;
    struct record_event *ev = engine_evbuf_add(out, RECORD_FRAME);
    struct record_frame *f = &ev->u.frame;

    if (id == si->cap_frames) {
        si->cap_frames = si->cap_frames ? si->cap_frames * 2 : 256;
        si->frames = x_reallocarray(si->frames, si->cap_frames, sizeof(*si->frames));
    }
    f->id = id;
    text_copy(f->function, fn);
    text_copy(f->file, file);
    f->line = line;
    f->native = native;
    /* The event's (possibly shortened) texts are what the table compares with. */
    si->frames[id] =
        (struct sintern_frame){h, x_strdup(f->function), x_strdup(f->file), line, native};
    si->bytes += sizeof(struct sintern_frame) + strlen(f->function) + strlen(f->file) + 2;
    return id;
}

uint32_t engine_sintern_frame(struct engine_sintern *si, struct engine_evbuf *out, const char *fn,
                              const char *file, int line, bool native)
{
    uint64_t h = frame_hash(fn ? fn : "", file ? file : "", line, native);
    size_t i;

    if (si->fslots < (size_t)si->nframes * 2 + 2)
        rehash(&si->fhash, &si->fslots, si->nframes, si->frames, sizeof(*si->frames));
    for (i = h & (si->fslots - 1); si->fhash[i]; i = (i + 1) & (si->fslots - 1)) {
        const struct sintern_frame *f = &si->frames[si->fhash[i] - 1];

        if (f->h == h && f->line == line && f->native == native &&
            !strncmp(f->fn, fn ? fn : "", RECORD_TEXT - 1) &&
            !strncmp(f->file, file ? file : "", RECORD_TEXT - 1))
            return si->fhash[i] - 1;
    }
    si->fhash[i] = frame_add(si, out, h, fn, file, line, native) + 1;
    return si->fhash[i] - 1;
}

/* A new stack: kept, and its definition appended to out in chunks of RECORD_CHUNK ids. */
static uint32_t stack_add(struct engine_sintern *si, struct engine_evbuf *out, uint64_t h,
                          const uint32_t *ids, uint32_t n)
{
    uint32_t id = si->nstacks++, at = 0;

    if (id == si->cap_stacks) {
        si->cap_stacks = si->cap_stacks ? si->cap_stacks * 2 : 256;
        si->stacks = x_reallocarray(si->stacks, si->cap_stacks, sizeof(*si->stacks));
    }
    si->stacks[id] = (struct sintern_stack){h, n, x_reallocarray(NULL, n ? n : 1, sizeof(*ids))};
    if (n)
        memcpy(si->stacks[id].ids, ids, n * sizeof(*ids));
    si->bytes += sizeof(struct sintern_stack) + (size_t)n * sizeof(*ids);
    do { /* an empty stack (a thread with no frame yet) is one event too */
        struct record_stack *m = &engine_evbuf_add(out, RECORD_STACK)->u.stack;

        m->id = id;
        m->n = n;
        m->at = at;
        m->nchunk = n - at < RECORD_CHUNK ? n - at : RECORD_CHUNK;
        if (m->nchunk)
            memcpy(m->frames, ids + at, m->nchunk * sizeof(*ids));
        at += RECORD_CHUNK;
    } while (at < n);
    return id;
}

uint32_t engine_sintern_ids(struct engine_sintern *si, struct engine_evbuf *out,
                            const uint32_t *outer_first, uint32_t n)
{
    uint64_t h = hash_mix(0, n);
    size_t i;

    for (uint32_t k = 0; k < n; k++)
        h = hash_mix(h, outer_first[k]);
    if (si->sslots < (size_t)si->nstacks * 2 + 2)
        rehash(&si->shash, &si->sslots, si->nstacks, si->stacks, sizeof(*si->stacks));
    for (i = h & (si->sslots - 1); si->shash[i]; i = (i + 1) & (si->sslots - 1)) {
        const struct sintern_stack *s = &si->stacks[si->shash[i] - 1];

        if (s->h == h && s->n == n && (!n || !memcmp(s->ids, outer_first, n * sizeof(*s->ids))))
            return si->shash[i] - 1;
    }
    si->shash[i] = stack_add(si, out, h, outer_first, n) + 1;
    return si->shash[i] - 1;
}

uint32_t engine_sintern_stack(struct engine_sintern *si, struct engine_evbuf *out,
                              const struct hframe *inner_first, uint32_t n)
{
    uint32_t *ids;

    if (n > si->cap_scratch) {
        si->cap_scratch = n;
        si->scratch = x_reallocarray(si->scratch, n, sizeof(*si->scratch));
    }
    ids = si->scratch;
    for (uint32_t i = 0; i < n; i++) {
        const struct hframe *f = &inner_first[n - 1 - i];

        ids[i] = engine_sintern_frame(si, out, f->function, f->file, f->line, f->native);
    }
    return engine_sintern_ids(si, out, ids, n);
}

static void forget(struct engine_sintern *si)
{
    for (uint32_t i = 0; i < si->nframes; i++) {
        free(si->frames[i].fn);
        free(si->frames[i].file);
    }
    for (uint32_t i = 0; i < si->nstacks; i++)
        free(si->stacks[i].ids);
    si->nframes = si->nstacks = 0;
    si->bytes = 0;
    if (si->fhash)
        memset(si->fhash, 0, si->fslots * sizeof(*si->fhash));
    if (si->shash)
        memset(si->shash, 0, si->sslots * sizeof(*si->shash));
    si->gen++;
}

bool engine_sintern_trim(struct engine_sintern *si, struct engine_evbuf *out, uint64_t now)
{
    /* Ids must also stay below the recorder's RECORD_ID_MAX. */
    bool over = si->bytes > 8 * (size_t)ENGINE_SINTERN_MAX || si->nframes >= RECORD_ID_MAX / 2 ||
                si->nstacks >= RECORD_ID_MAX / 2;

    if (!over && (si->bytes <= ENGINE_SINTERN_MAX || now < si->trim_at))
        return false;
    forget(si);
    si->trim_at = now + 1000000000ull;
    engine_evbuf_add(out, RECORD_FORGET);
    return true;
}

void engine_sintern_fini(struct engine_sintern *si)
{
    forget(si);
    free(si->frames);
    free(si->stacks);
    free(si->fhash);
    free(si->shash);
    free(si->scratch);
    memset(si, 0, sizeof(*si));
}
