/* py-spy's --nolineno and -F/--function for every export format: frames are named by function
 * and file only, and the frames of one function at different lines become one (a flame graph
 * then aggregates by function). Done on a shallow copy of the history whose frame table has no
 * lines and whose stacks point at one frame per (function, file, kind), so that no writer needs
 * to know. The history itself is never changed. Runs on the exporting thread. */
#include "export_priv.h"

#include "ranktop/base/hash.h"
#include "ranktop/base/util.h"

#include <stdlib.h>
#include <string.h>

/* The key of the table from (function, file, kind) to the first frame id that has them. By
 * content: a history interns its strings, but nothing here needs to rely on it. */
static uint64_t key_hash(const struct hframe *f)
{
    return hash_mix(hash_mix(hash_str(xframe_fn(f)), hash_str(xframe_file(f))), f->native);
}

static bool key_same(const struct hframe *a, const struct hframe *b)
{
    return a->native == b->native && !strcmp(xframe_fn(a), xframe_fn(b)) &&
           !strcmp(xframe_file(a), xframe_file(b));
}

const struct history *xhist_nolines(const struct history *h, struct history *copy)
{
    size_t cap = 16, mask;
    uint32_t *slot, *canon;

    *copy = *h;
    while (cap < h->nframes * 2)
        cap *= 2;
    mask = cap - 1;
    slot = x_calloc(cap, sizeof(*slot)); /* frame id + 1; 0 empty */
    canon = x_calloc(h->nframes ? h->nframes : 1, sizeof(*canon));
    copy->frames = x_calloc(h->nframes ? h->nframes : 1, sizeof(*copy->frames));
    for (size_t i = 0; i < h->nframes; i++) {
        size_t j = key_hash(&h->frames[i]) & mask;

        copy->frames[i] = h->frames[i];
        copy->frames[i].line = 0;
        while (slot[j] && !key_same(&h->frames[slot[j] - 1], &h->frames[i]))
            j = (j + 1) & mask;
        if (!slot[j])
            slot[j] = (uint32_t)i + 1;
        canon[i] = slot[j] - 1;
    }
    copy->stack_frames = x_calloc(h->nstack_frames ? h->nstack_frames : 1, sizeof(uint32_t));
    for (size_t i = 0; i < h->nstack_frames; i++)
        copy->stack_frames[i] =
            h->stack_frames[i] < h->nframes ? canon[h->stack_frames[i]] : h->stack_frames[i];
    copy->frames_cap = h->nframes;
    copy->stack_frames_cap = h->nstack_frames;
    free(slot);
    free(canon);
    return copy;
}

void xhist_nolines_fini(struct history *copy)
{
    free(copy->frames);
    free(copy->stack_frames);
    memset(copy, 0, sizeof(*copy));
}
