/* Helpers shared by the view models, and the rank table's rows: which thread is a rank's main
 * thread and what its current stack is, how long it has kept it, and the compact text forms
 * of rank sets ("0-6,8-15") and frames ("all_reduce (distributed_c10d.py:1541)").
 *
 * Pure functions over a history the caller does not let change meanwhile; any thread. */
#include "ranktop/views/view.h"
#include "view_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ranktop/base/hash.h"
#include "ranktop/base/util.h"

int view_rank_id(const struct hrank *r)
{
    return r->rank >= 0 ? r->rank : -r->pid;
}

int view_rank_id_label(int id, char *buf, size_t len)
{
    return id >= 0 ? snprintf(buf, len, "rank %d", id)
                   : snprintf(buf, len, "pid %d", history_key_pid(-id));
}

/* True when a is a better main-thread candidate than b. */
static bool main_better(const struct hthread *a, const struct hthread *b)
{
    if (!b)
        return true;
    if (a->gone != b->gone)
        return !a->gone;
    return a->last > b->last;
}

const struct hthread *view_main_thread(const struct hrank *r)
{
    const struct hthread *best = NULL;

    for (size_t i = 0; i < r->nthreads; i++)
        if (r->threads[i].main && main_better(&r->threads[i], best))
            best = &r->threads[i];
    return best;
}

const char *view_thread_name(const struct history *h, int pid, uint64_t ident)
{
    for (size_t i = h->nranks; i-- > 0;)
        for (size_t k = 0; h->ranks[i].pid == pid && k < h->ranks[i].nthreads; k++) {
            const struct hthread *t = &h->ranks[i].threads[k];

            if (!t->worker && t->ident == ident && (t->name[0] || t->main))
                return t->name[0] ? t->name : "MainThread";
        }
    return "?";
}

const struct engine_rank_live *view_live_of(const struct engine_rank_live *live, size_t n, int pid)
{
    for (size_t i = 0; live && i < n; i++)
        if (live[i].pid == pid)
            return &live[i];
    return NULL;
}

uint32_t view_thread_stack(const struct history *h, const struct hthread *t)
{
    uint32_t s;

    if (!t || t->gone || !t->nruns)
        return HSTACK_NONE;
    s = history_run(t, t->nruns - 1)->stack;
    if (s == HSTACK_NONE || s >= h->nstacks || !h->stacks[s].nframes)
        return HSTACK_NONE;
    return s;
}

uint64_t view_since_change(const struct hthread *t, uint64_t now)
{
    uint64_t t0;

    if (!t || !t->nruns)
        return 0;
    t0 = history_run(t, t->nruns - 1)->t0;
    return now > t0 ? now - t0 : 0;
}

uint64_t view_stack_fkey(const struct history *h, uint32_t stack)
{
    uint64_t k = 0x9e3779b97f4a7c15ull;
    const uint32_t *ids;

    if (stack == HSTACK_NONE || stack >= h->nstacks)
        return 0;
    ids = history_stack_frames(h, stack);
    /* Strings are interned (one pointer per text, in a clone too), so pointers compare. */
    for (uint32_t i = 0; i < h->stacks[stack].nframes; i++)
        k = hash_mix(hash_mix(k, (uint64_t)(uintptr_t)h->frames[ids[i]].function),
                     (uint64_t)(uintptr_t)h->frames[ids[i]].file);
    return k;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);

    return n >= m && !strcmp(s + n - m, tail);
}

bool view_loop_waiting(const struct history *h, uint32_t stack, uint32_t *outer)
{
    const uint32_t *ids;
    uint32_t i;

    if (stack == HSTACK_NONE || stack >= h->nstacks)
        return false;
    ids = history_stack_frames(h, stack);
    i = h->stacks[stack].nframes;
    while (i > 0 && ends_with(h->frames[ids[i - 1]].file, "/selectors.py"))
        i--;
    if (i == 0 || i == h->stacks[stack].nframes ||
        !ends_with(h->frames[ids[i - 1]].function, "_run_once") ||
        !ends_with(h->frames[ids[i - 1]].file, "/asyncio/base_events.py"))
        return false;
    if (outer)
        *outer = i;
    return true;
}

bool view_task_on(const struct hrank *r, const struct hthread *t, const struct hthread *task,
                  const struct history *h)
{
    if (!task->task || view_thread_stack(h, task) == HSTACK_NONE || t->worker)
        return false;
    return task->task_thread ? task->task_thread == t->ident : t == view_main_thread(r);
}

/* The function keys of the few stacks a thread moves between (a loop changing lines), kept
 * for one walk so that each is hashed once, not once per run. Direct-mapped by stack id. */
#define FKEY_MEMO 16

struct fkey_memo {
    bool set[FKEY_MEMO];
    uint32_t stack[FKEY_MEMO];
    uint64_t key[FKEY_MEMO];
};

static uint64_t fkey_of(const struct history *h, struct fkey_memo *m, uint32_t stack)
{
    size_t j = stack % FKEY_MEMO;

    if (!m->set[j] || m->stack[j] != stack) {
        m->set[j] = true;
        m->stack[j] = stack;
        m->key[j] = view_stack_fkey(h, stack);
    }
    return m->key[j];
}

uint64_t view_since_fchange(const struct history *h, const struct hthread *t, uint64_t now)
{
    struct fkey_memo m;
    uint64_t key, t0;
    size_t i;

    if (!t || !t->nruns)
        return 0;
    memset(m.set, 0, sizeof(m.set));
    i = t->nruns - 1;
    key = fkey_of(h, &m, history_run(t, i)->stack);
    /* Bounded: a thread spinning at 1 kHz for hours has millions of runs; 100000 runs back
     * is long past any hang-after interval at the rates the engine allows. */
    for (size_t steps = 0; i > 0 && steps < 100000; i--, steps++)
        if (fkey_of(h, &m, history_run(t, i - 1)->stack) != key)
            break;
    t0 = history_run(t, i)->t0;
    return now > t0 ? now - t0 : 0;
}

int view_exit_text(const struct hrank *r, char *buf, size_t len)
{
    const char *sig = app_signal_name(r->exit_signal); /* others are "signal N" */

    if (r->exit_signal > 0)
        return sig ? snprintf(buf, len, "%s", sig)
                   : snprintf(buf, len, "signal %d", r->exit_signal);
    if (r->exit_code >= 0)
        return snprintf(buf, len, "exit %d", r->exit_code);
    return snprintf(buf, len, "exited");
}

int view_frame_format(const struct hframe *f, char *buf, size_t len)
{
    const char *fn = f->function && f->function[0] ? f->function : "?";
    const char *file = f->file ? f->file : "";
    const char *base = strrchr(file, '/');

    base = base ? base + 1 : file;
    if (f->native) /* marked wherever frames are shown: Rank view, merged tree, Top */
        return base[0] ? snprintf(buf, len, "%s (%s) [native]", fn, base)
                       : snprintf(buf, len, "%s [native]", fn);
    if (!base[0])
        return snprintf(buf, len, "%s", fn);
    if (f->line > 0)
        return snprintf(buf, len, "%s (%s:%d)", fn, base, f->line);
    return snprintf(buf, len, "%s (%s)", fn, base);
}

/* Known ranks ascending, then unknown ones (-pid) by pid. */
static int cmp_id(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    if ((x < 0) != (y < 0))
        return x < 0 ? 1 : -1;
    if (x < 0) {
        x = -x;
        y = -y;
    }
    return (x > y) - (x < y);
}

/* Sorted, distinct copy of ranks; returns its length. */
static size_t sorted_distinct(const int *ranks, size_t n, int **out)
{
    int *v = x_malloc(n * sizeof(*v));
    size_t m = 0;

    memcpy(v, ranks, n * sizeof(*v));
    x_qsort(v, n, sizeof(*v), cmp_id);
    for (size_t i = 0; i < n; i++)
        if (!m || v[m - 1] != v[i])
            v[m++] = v[i];
    *out = v;
    return m;
}

/* Item i of a rank set: v[a..b] are consecutive ranks, written "a" or "a-b". */
struct span {
    size_t a, b;
};

static size_t spans_of(const int *v, size_t n, struct span *sp)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++) {
        if (k && v[i] >= 0 && (long long)v[i] == (long long)v[sp[k - 1].b] + 1)
            sp[k - 1].b = i;
        else
            sp[k++] = (struct span){i, i};
    }
    return k;
}

static size_t span_put(const int *v, struct span s, char *buf, size_t len)
{
    int w = v[s.a] < 0   ? snprintf(buf, len, "pid %d", history_key_pid(-v[s.a]))
            : s.a == s.b ? snprintf(buf, len, "%d", v[s.a])
                         : snprintf(buf, len, "%d-%d", v[s.a], v[s.b]);

    return w > 0 ? (size_t)w : 0;
}

/* The largest k such that k items, a comma, the ellipsis and "(+N)" fit in len bytes with the
 * NUL, N the ranks after them; -1 when not even zero items do. */
static long fitting_items(const int *v, const struct span *sp, size_t nsp, size_t n, size_t len,
                          size_t ell)
{
    char tmp[32];
    size_t used = 0;
    long best = -1;

    for (size_t k = 0; k < nsp; k++) {
        size_t left = n - (k ? sp[k - 1].b + 1 : 0);
        size_t tail = (size_t)snprintf(tmp, sizeof(tmp), "(+%zu)", left);

        if (used + (k ? 1 : 0) + ell + tail < len)
            best = (long)k;
        used += (k ? 1 : 0) + span_put(v, sp[k], tmp, sizeof(tmp));
        if (used >= len)
            break;
    }
    return best;
}

/* Writes items [0, k) comma-separated; buf has room for them. Returns the length. */
static size_t put_items(const int *v, const struct span *sp, size_t k, char *buf, size_t len)
{
    size_t w = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < k && w < len; i++) {
        if (i)
            buf[w++] = ',';
        w += span_put(v, sp[i], buf + w, len - w);
    }
    return w;
}

size_t view_rankset_format_ex(const int *ranks, size_t n, char *buf, size_t len,
                              const char *ellipsis)
{
    int *v;
    struct span *sp;
    size_t m, nsp, full = 0, w = 0;
    long k;
    char tmp[32];

    if (!len)
        return 0;
    buf[0] = '\0';
    if (!n)
        return 0;
    m = sorted_distinct(ranks, n, &v);
    sp = x_malloc(m * sizeof(*sp));
    nsp = spans_of(v, m, sp);
    for (size_t i = 0; i < nsp; i++)
        full += (i ? 1 : 0) + span_put(v, sp[i], tmp, sizeof(tmp));
    if (full < len) {
        w = put_items(v, sp, nsp, buf, len);
    } else if ((k = fitting_items(v, sp, nsp, m, len, strlen(ellipsis))) >= 0) {
        size_t left = m - (k ? sp[k - 1].b + 1 : 0);

        w = put_items(v, sp, (size_t)k, buf, len);
        w += (size_t)snprintf(buf + w, len - w, "%s%s(+%zu)", k ? "," : "", ellipsis, left);
    }
    free(sp);
    free(v);
    return w;
}

size_t view_rankset_format(const int *ranks, size_t n, char *buf, size_t len)
{
    return view_rankset_format_ex(ranks, n, buf, len, "\u2026");
}

static int cmp_row(const void *a, const void *b)
{
    const struct view_rank_row *x = a, *y = b;
    bool ux = x->rank < 0, uy = y->rank < 0;

    if (ux != uy)
        return ux - uy;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->exited != y->exited)
        return x->exited - y->exited;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

void view_ranks(const struct history *h, uint64_t now, struct view_ranks *out)
{
    memset(out, 0, sizeof(*out));
    if (!h->nranks)
        return;
    out->rows = x_calloc(h->nranks, sizeof(*out->rows));
    for (size_t i = 0; i < h->nranks; i++) {
        const struct hrank *r = &h->ranks[i];
        const struct hthread *t = view_main_thread(r);
        struct view_rank_row *row = &out->rows[out->n++];

        row->idx = i;
        row->pid = r->pid;
        row->rank = r->rank;
        row->host = r->host;
        row->device = r->device;
        row->exited = r->exited;
        row->stack = view_thread_stack(h, t);
        if (row->stack != HSTACK_NONE) {
            const struct hstack *s = &h->stacks[row->stack];

            row->top = &h->frames[history_stack_frames(h, row->stack)[s->nframes - 1]];
        }
        row->since = view_since_fchange(h, t, now);
    }
    x_qsort(out->rows, out->n, sizeof(*out->rows), cmp_row);
}

void view_ranks_fini(struct view_ranks *out)
{
    free(out->rows);
    memset(out, 0, sizeof(*out));
}

static int cmp_by_pid(const void *a, const void *b)
{
    const struct view_by_pid *x = a, *y = b;

    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return (x->at > y->at) - (x->at < y->at);
}

void view_by_pid_sort(struct view_by_pid *v, size_t n)
{
    x_qsort(v, n, sizeof(*v), cmp_by_pid);
}

struct view_by_pid *view_live_index(const struct engine_rank_live *live, size_t n)
{
    struct view_by_pid *v = x_malloc((n ? n : 1) * sizeof(*v));

    for (size_t i = 0; i < n; i++)
        v[i] = (struct view_by_pid){live[i].pid, i};
    view_by_pid_sort(v, n);
    return v;
}

const struct view_by_pid *view_by_pid_find(const struct view_by_pid *v, size_t n, int pid)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (v[mid].pid < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo].pid == pid ? &v[lo] : NULL;
}
