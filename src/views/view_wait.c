/* A rank's kind of wait for the monitor's table and HANG banner: its main thread's current
 * stack classified by the rules (ranktop/model/waits.h), with what the history and the live figures
 * add: the rank's exit, every thread stopped, the main thread's /proc state and syscall, the
 * interpreter collecting garbage. The rank table asks it for every rank each frame, and ranks
 * mostly wait alike, so view_wait_memo classifies each (stack, facts) once per table. Pure,
 * like every view; a memo belongs to one caller. */
#include "ranktop/views/view.h"
#include "view_priv.h"

#include <stdlib.h>
#include <string.h>

#include "ranktop/base/hash.h"
#include "ranktop/base/util.h"

static void facts_of(const struct hrank *hr, const struct engine_rank_live *l, struct wait_facts *f)
{
    wait_facts_init(f);
    f->exited = hr->exited;
    f->exit_code = hr->exit_code;
    f->exit_signal = hr->exit_signal;
    if (l) {
        /* A zeroed record (no reading yet) knows no state, and then no syscall either. */
        f->state = l->stopped ? 'T' : l->state;
        f->syscall = l->state ? l->syscall : -1;
        f->no_fds = l->no_fds;
        f->in_gc = l->in_gc;
    }
}

enum wait_kind view_rank_wait(const struct history *h, const struct hrank *hr, uint32_t stack,
                              const struct engine_rank_live *l, const struct waits *w, char *why,
                              size_t whylen)
{
    struct wait_facts f;

    facts_of(hr, l, &f);
    return waits_classify_stack(w, h, stack, &f, why, whylen);
}

/* Every field facts_of sets (and the ones it leaves as wait_facts_init has them). */
static bool facts_same(const struct wait_facts *a, const struct wait_facts *b)
{
    return a->in_gc == b->in_gc && a->holds_gil == b->holds_gil && a->state == b->state &&
           a->syscall == b->syscall && a->wchan == b->wchan && a->no_fds == b->no_fds &&
           a->exited == b->exited && a->exit_code == b->exit_code &&
           a->exit_signal == b->exit_signal;
}

static uint64_t facts_hash(uint32_t stack, const struct wait_facts *f)
{
    uint64_t k = hash_mix(stack, (uint64_t)(uint32_t)f->in_gc);

    k = hash_mix(k, (uint64_t)(unsigned char)f->state | (uint64_t)f->no_fds << 8 |
                        (uint64_t)f->exited << 9);
    k = hash_mix(k, (uint64_t)(uint32_t)f->syscall);
    return hash_mix(k, (uint64_t)(uint32_t)f->exit_code << 32 | (uint32_t)f->exit_signal);
}

void view_wait_memo_init(struct view_wait_memo *m, size_t n)
{
    size_t nslot = 16;

    while (nslot < 2 * n)
        nslot *= 2;
    memset(m, 0, sizeof(*m));
    m->slot = x_calloc(nslot, sizeof(*m->slot));
    m->mask = nslot - 1;
    m->cap = n ? n : 1;
    m->e = x_malloc(m->cap * sizeof(*m->e));
}

void view_wait_memo_fini(struct view_wait_memo *m)
{
    free(m->slot);
    free(m->e);
    memset(m, 0, sizeof(*m));
}

enum wait_kind view_wait_memo_get(struct view_wait_memo *m, const struct history *h,
                                  const struct hrank *hr, uint32_t stack,
                                  const struct engine_rank_live *l, const struct waits *w,
                                  char *why, size_t whylen)
{
    struct view_wait_memo_entry *e;
    struct wait_facts f;
    size_t j;

    facts_of(hr, l, &f);
    /* Only the table's reasons are kept (one length; the kind alone for NULL, which does not
     * depend on the reason's room), and no more than it was sized for. */
    if ((why && whylen != sizeof(e->why)) || m->n == m->cap)
        return waits_classify_stack(w, h, stack, &f, why, whylen);
    for (j = facts_hash(stack, &f) & m->mask; m->slot[j]; j = (j + 1) & m->mask) {
        e = &m->e[m->slot[j] - 1];
        if (e->stack == stack && facts_same(&e->f, &f)) {
            if (why)
                memcpy(why, e->why, strlen(e->why) + 1);
            return e->kind;
        }
    }
    e = &m->e[m->n++];
    m->slot[j] = m->n;
    e->stack = stack;
    e->f = f;
    e->kind = waits_classify_stack(w, h, stack, &f, e->why, sizeof(e->why));
    if (why)
        memcpy(why, e->why, strlen(e->why) + 1);
    return e->kind;
}
