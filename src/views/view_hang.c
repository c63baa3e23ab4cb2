/* The hang verdict: a job hangs when no live rank's main-thread stack has changed for the
 * hang-after interval and its devices have been idle or busy at a steady level meanwhile (a
 * rank stuck in a collective keeps its GPU flat, often at 100 % with NCCL spinning, while a
 * working job's utilisation moves). The verdict names the frame most ranks wait in and the
 * odd ranks out, since "N-1 ranks in the all-reduce, one elsewhere" is the usual story.
 *
 * Ranks are grouped by their stack of functions (view_stack_fkey: function and file of every
 * frame, lines left out): two all-reduces called from different functions are different
 * stacks and a classic cause of a deadlock, while a rank spinning in one function changes
 * line every sample and must still read as stuck there, or the banner would flicker. A live rank
 * that was never sampled (no main thread yet) cannot change, so it does not hold off the verdict;
 * it is listed with the odd ranks. Exited ranks do not count as live but are named, unless a
 * live process has taken over their rank number (an elastic restart).
 *
 * asyncio (record --async, the monitor's `a`): a main thread that only shows its event loop
 * waiting (BaseEventLoop._run_once in a selector's select) tells nothing of the work. When the
 * rank's tasks were read, the rank is judged by them instead: it has kept still only as long
 * as its main thread and every task of that loop have (a task whose await chain moved is
 * progress), and it waits where the innermost coroutine of its deepest await chain awaits
 * (a task awaiting another task or a gather() has the shorter chain). */
#include "ranktop/views/view.h"
#include "view_priv.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ranktop/base/util.h"

#define DEFAULT_FLAT_PTS 5.0

struct live {
    int rank, pid;
    uint32_t stack;
    uint64_t fkey; /* view_stack_fkey(stack) */
    bool sampled;  /* has a main thread */
    uint64_t since;
};

static int cmp_live_stack(const void *a, const void *b)
{
    const struct live *x = a, *y = b;

    if (x->fkey != y->fkey)
        return x->fkey < y->fkey ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* A rank whose main thread t only shows its loop waiting, judged by the tasks of that loop
 * (task pseudo-threads on t's thread, or on an unknown one): v's since becomes the least of
 * its own and theirs, its stack the longest await chain among them (of equal ones, the task
 * still the longest, then the first in history order). Without tasks, or when the last read
 * left some without a lane, v is left as it is. */
static void judge_tasks(const struct history *h, const struct hrank *r, const struct hthread *t,
                        uint64_t now, struct live *v)
{
    const struct hthread *still = NULL;
    uint64_t still_for = 0, least = v->since;
    uint32_t still_depth = 0;

    /* Tasks beyond the engine's lane cap were read but have no lane: whether they moved is
     * not known, so the tasks cannot say the rank kept still. */
    if (!view_loop_waiting(h, v->stack, NULL) || r->tasks_unlaned)
        return;
    for (size_t i = 0; i < r->nthreads; i++) {
        const struct hthread *k = &r->threads[i];
        uint32_t stack = view_thread_stack(h, k), depth;
        uint64_t since;

        if (!view_task_on(r, t, k, h))
            continue;
        since = view_since_fchange(h, k, now);
        depth = h->stacks[stack].nframes;
        least = since < least ? since : least;
        /* The longest chain: a task awaiting a task (or a gather) has the shorter one, and the
         * deepest await is where the wait is; then the task still the longest. */
        if (!still || depth > still_depth || (depth == still_depth && since > still_for)) {
            still = k;
            still_for = since;
            still_depth = depth;
        }
    }
    if (!still)
        return;
    v->since = least;
    v->stack = view_thread_stack(h, still);
}

static size_t collect_live(const struct history *h, uint64_t now, struct live *v)
{
    size_t n = 0;

    for (size_t i = 0; i < h->nranks; i++) {
        const struct hrank *r = &h->ranks[i];
        const struct hthread *t;

        if (r->exited)
            continue;
        t = view_main_thread(r);
        v[n] = (struct live){view_rank_id(r),
                             r->pid,
                             view_thread_stack(h, t),
                             0,
                             t != NULL,
                             view_since_fchange(h, t, now)};
        if (t)
            judge_tasks(h, r, t, now, &v[n]);
        v[n].fkey = view_stack_fkey(h, v[n].stack);
        n++;
    }
    return n;
}

/* Whether a group (n ranks, with a real stack or not, lowest rank lo) beats the best so far:
 * more ranks first, then a real stack over none, then the lower rank. */
static bool group_better(size_t n, bool real, int lo, size_t bn, bool breal, int blo)
{
    if (n != bn)
        return n > bn;
    if (real != breal)
        return real;
    return lo < blo;
}

/* The most common function stack among v (sorted by fkey, then rank): its key and the stack
 * of its lowest rank as the one to show; returns how many share it. */
static size_t majority(const struct live *v, size_t n, uint64_t *fkey, uint32_t *stack)
{
    size_t best = 0;
    int best_lo = 0;

    *stack = HSTACK_NONE;
    *fkey = 0;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i; j < n && v[j].fkey == v[i].fkey; j++)
            ;
        /* Sorted by rank within a group, so v[i] holds its lowest rank. */
        if (group_better(j - i, v[i].stack != HSTACK_NONE, v[i].rank, best, *stack != HSTACK_NONE,
                         best_lo)) {
            best = j - i;
            best_lo = v[i].rank;
            *stack = v[i].stack;
            *fkey = v[i].fkey;
        }
    }
    return best;
}

static void stack_where(const struct history *h, uint32_t stack, char *buf, size_t len)
{
    const uint32_t *ids;

    if (stack == HSTACK_NONE) {
        snprintf(buf, len, "<no stack>");
        return;
    }
    ids = history_stack_frames(h, stack);
    view_frame_format(&h->frames[ids[h->stacks[stack].nframes - 1]], buf, len);
}

static int cmp_odd(const void *a, const void *b)
{
    const struct view_hang_rank *x = a, *y = b;

    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

/* Ranks and live figures by pid, and the waits asked so far: list_odd looks each odd rank up
 * (most ranks can be odd when a job's ranks are spread over a few stacks). */
struct odd_idx {
    struct view_by_pid *ranks, *live;
    size_t nlive;
    struct view_wait_memo waits;
};

static void odd_idx_init(struct odd_idx *x, const struct history *h, const struct view_hang_in *in)
{
    size_t nl = in && in->live ? in->nlive : 0;

    x->ranks = x_malloc((h->nranks ? h->nranks : 1) * sizeof(*x->ranks));
    x->live = view_live_index(in ? in->live : NULL, nl);
    x->nlive = nl;
    for (size_t k = 0; k < h->nranks; k++)
        x->ranks[k] = (struct view_by_pid){h->ranks[k].pid, k};
    view_by_pid_sort(x->ranks, h->nranks);
    view_wait_memo_init(&x->waits, h->nranks);
}

static void odd_idx_fini(struct odd_idx *x)
{
    free(x->ranks);
    free(x->live);
    view_wait_memo_fini(&x->waits);
}

static void list_odd(const struct history *h, const struct live *v, size_t n,
                     const struct view_hang_in *in, struct view_hang *out)
{
    struct odd_idx x;

    odd_idx_init(&x, h, in);
    out->odd = x_calloc(n ? n : 1, sizeof(*out->odd));
    for (size_t i = 0; i < n; i++) {
        const struct view_by_pid *lp = view_by_pid_find(x.live, x.nlive, v[i].pid);
        const struct engine_rank_live *l = lp ? &in->live[lp->at] : NULL;
        const struct view_by_pid *p = view_by_pid_find(x.ranks, h->nranks, v[i].pid);
        struct view_hang_rank *o;

        if (v[i].fkey == out->fkey && v[i].sampled)
            continue;
        o = &out->odd[out->nodd++];
        o->rank = v[i].rank;
        o->pid = v[i].pid;
        o->stack = v[i].stack;
        o->fkey = v[i].fkey;
        stack_where(h, v[i].stack, o->where, sizeof(o->where));
        /* Every rank of that pid in history order, as a scan would meet them. */
        for (; p && p < x.ranks + h->nranks && p->pid == v[i].pid; p++) {
            const struct hrank *r = &h->ranks[p->at];

            if (r->host[0] && strcmp(r->host, h->host)) /* where to go next, when another node */
                snprintf(o->host, sizeof(o->host), "%s", r->host);
            o->wait =
                view_wait_memo_get(&x.waits, h, r, v[i].stack, l, in ? in->waits : NULL, NULL, 0);
        }
    }
    odd_idx_fini(&x);
    x_qsort(out->odd, out->nodd, sizeof(*out->odd), cmp_odd);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return (x > y) - (x < y);
}

/* Exited ranks whose number no live rank carries, sorted and distinct. */
static void list_exited(const struct history *h, const struct live *v, size_t n,
                        struct view_hang *out)
{
    size_t m = 0;

    out->exited = x_malloc((h->nranks ? h->nranks : 1) * sizeof(*out->exited));
    for (size_t i = 0; i < h->nranks; i++) {
        int id = view_rank_id(&h->ranks[i]);
        bool taken = false;

        for (size_t k = 0; k < n && !taken; k++)
            taken = v[k].rank == id;
        if (h->ranks[i].exited && !taken)
            out->exited[out->nexited++] = id;
    }
    x_qsort(out->exited, out->nexited, sizeof(*out->exited), cmp_int);
    for (size_t i = 0; i < out->nexited; i++)
        if (!m || out->exited[m - 1] != out->exited[i])
            out->exited[m++] = out->exited[i];
    out->nexited = m;
}

/* "gpu 3" and "gpu3" name the same device; so do "npu 2" and "npu2.0". */
static bool device_match(const char *series, const char *device)
{
    char a[56], b[48];
    size_t n = 0;

    for (const char *p = device; *p && n + 3 < sizeof(b); p++)
        if (*p != ' ')
            b[n++] = *p;
    b[n] = '\0';
    snprintf(a, sizeof(a), "%s.0", b);
    return !strcmp(series, b) || (!strncmp(b, "npu", 3) && !strchr(b, '.') && !strcmp(series, a));
}

/* Whether series s is a device utilisation series that belongs to the judgement: any device
 * when no live rank names its device, else only the ranks' devices. */
static bool device_relevant(const struct history *h, const struct hseries *s)
{
    bool named = false;

    if (s->id != SERIES_DEV_UTIL && s->id != SERIES_NPU_AICORE)
        return false;
    for (size_t i = 0; i < h->nranks; i++) {
        const struct hrank *r = &h->ranks[i];

        if (r->exited || !r->device[0])
            continue;
        named = true;
        if (device_match(s->name, r->device))
            return true;
    }
    return !named;
}

static void judge_devices(const struct history *h, uint64_t now, uint64_t span,
                          const struct view_hang_in *dev, struct view_hang *out)
{
    double flat = dev && dev->flat_pts > 0 ? dev->flat_pts : DEFAULT_FLAT_PTS;
    uint64_t from = now > span ? now - span : 0;

    if (dev && dev->ignore_devices)
        return;
    for (size_t i = 0; i < h->nseries; i++) {
        const struct hseries *s = &h->series[i];
        double lo = 0, hi = 0;
        size_t n = 0;

        if (!device_relevant(h, s))
            continue;
        for (size_t k = 0; k < s->n; k++) {
            double v = s->pts[k].v;

            if (s->pts[k].t < from || s->pts[k].t > now)
                continue;
            lo = n && lo < v ? lo : v;
            hi = n && hi > v ? hi : v;
            n++;
        }
        /* No point in the interval: nothing is known, so nothing speaks against a hang. */
        if (!n)
            continue;
        out->ndevices++;
        if (hi - lo > flat && !(hi == 0 && lo == 0))
            out->nvarying++;
    }
}

/* A bounded text builder: appends until full, then remembers it was cut. */
struct tbuf {
    char p[2048];
    size_t w;
    bool cut;
};

static void tb_printf(struct tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tb_printf(struct tbuf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->cut)
        return;
    va_start(ap, fmt);
    n = vsnprintf(b->p + b->w, sizeof(b->p) - b->w, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(b->p) - b->w) {
        b->cut = true;
        b->p[b->w] = '\0';
        return;
    }
    b->w += (size_t)n;
}

/* Copies s into dst, cut on a UTF-8 boundary with "…" when it does not fit (or was cut). */
static void fit_copy(char *dst, size_t len, const char *s, bool cut)
{
    size_t n = strlen(s);

    if (n < len && !cut) {
        memcpy(dst, s, n + 1);
        return;
    }
    n = n < len - 4 ? n : len - 4;
    while (n && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    memcpy(dst, s, n);
    memcpy(dst + n, "\u2026", 4);
}

static void tb_duration(struct tbuf *b, uint64_t ns)
{
    unsigned long long s = ns / 1000000000u;

    if (s < 120)
        tb_printf(b, "%llus", s);
    else if (s < 3600)
        tb_printf(b, "%llum%02llus", s / 60, s % 60);
    else
        tb_printf(b, "%lluh%02llum", s / 3600, s / 60 % 60);
}

/* "rank 3", "pid 812" (a lone unknown rank), "ranks 0-2,pid 812". */
static void tb_ranks(struct tbuf *b, const int *ranks, size_t n)
{
    char set[96];

    if (n == 1) {
        view_rank_id_label(ranks[0], set, sizeof(set));
        tb_printf(b, "%s", set);
        return;
    }
    view_rankset_format(ranks, n, set, sizeof(set));
    tb_printf(b, "ranks %s", set);
}

/* "; odd: rank 3 in f (a.py:1), ranks 5,7 in g (b.py:2)": odd ranks grouped by stack, groups
 * in the order of their lowest rank. */
static void tb_odd(struct tbuf *b, const struct view_hang *out)
{
    bool *done = x_calloc(out->nodd ? out->nodd : 1, sizeof(*done));
    int *ranks = x_malloc((out->nodd ? out->nodd : 1) * sizeof(*ranks));

    for (size_t i = 0; i < out->nodd; i++) {
        size_t n = 0;

        if (done[i])
            continue;
        for (size_t k = i; k < out->nodd; k++)
            if (!done[k] && out->odd[k].fkey == out->odd[i].fkey) {
                done[k] = true;
                ranks[n++] = out->odd[k].rank;
            }
        tb_printf(b, "%s", i ? ", " : "; odd: ");
        tb_ranks(b, ranks, n);
        if (n == 1 && out->odd[i].host[0]) /* "rank 3 on node-b": where to go next */
            tb_printf(b, " on %s", out->odd[i].host);
        tb_printf(b, " in %s", out->odd[i].where);
        if (out->odd[i].wait != WAIT_UNKNOWN) /* what it waits on: where to look next */
            tb_printf(b, " [%s]", wait_kind_name(out->odd[i].wait));
    }
    free(ranks);
    free(done);
}

/* "rank 3 exited (SIGSEGV) 12s ago; " for each exited rank, the latest first: the usual
 * reason the others wait. */
static void tb_exited(struct tbuf *b, const struct history *h, uint64_t now,
                      const struct view_hang *out)
{
    for (size_t i = h->nranks; i-- > 0;) {
        const struct hrank *r = &h->ranks[i];
        char who[32], how[32 + sizeof(r->core)];
        bool named = false;

        for (size_t k = 0; k < out->nexited && !named; k++)
            named = out->exited[k] == view_rank_id(r);
        if (!r->exited || !named)
            continue;
        history_rank_label(r, who, sizeof(who));
        if (r->exit_signal > 0 || r->exit_code >= 0)
            view_exit_text(r, how, sizeof(how));
        else
            snprintf(how, sizeof(how), "status unknown");
        if (r->core[0]) /* where to look first after a crash */
            snprintf(how + strlen(how), sizeof(how) - strlen(how), " core: %s", r->core);
        tb_printf(b, "%s exited (%s) ", who, how);
        tb_duration(b, now > r->end ? now - r->end : 0);
        tb_printf(b, " ago; ");
    }
}

static void write_text(const struct history *h, uint64_t now, struct view_hang *out)
{
    struct tbuf *b = x_calloc(1, sizeof(*b));

    tb_printf(b, "HANG ");
    tb_duration(b, out->since);
    tb_printf(b, ": ");
    tb_exited(b, h, now, out);
    tb_printf(b, "%zu %s in %s", out->nmajority, out->nmajority == 1 ? "rank" : "ranks",
              out->where);
    tb_odd(b, out);
    fit_copy(out->text, sizeof(out->text), b->p, b->cut);
    free(b);
}

void view_hang(const struct history *h, uint64_t now, uint64_t hang_after_ns,
               const struct view_hang_in *dev, struct view_hang *out)
{
    struct live *v = x_malloc((h->nranks ? h->nranks : 1) * sizeof(*v));
    size_t n = collect_live(h, now, v);
    bool sampled = false;

    memset(out, 0, sizeof(*out));
    out->nlive = n;
    out->since = UINT64_MAX;
    for (size_t i = 0; i < n; i++)
        if (v[i].sampled) {
            sampled = true;
            out->since = v[i].since < out->since ? v[i].since : out->since;
        }
    if (!sampled)
        out->since = 0;
    x_qsort(v, n, sizeof(*v), cmp_live_stack);
    out->nmajority = majority(v, n, &out->fkey, &out->stack);
    stack_where(h, out->stack, out->where, sizeof(out->where));
    list_odd(h, v, n, dev, out);
    list_exited(h, v, n, out);
    judge_devices(h, now, hang_after_ns, dev, out);
    out->hang =
        sampled && out->stack != HSTACK_NONE && out->since >= hang_after_ns && !out->nvarying;
    if (out->hang)
        write_text(h, now, out);
    free(v);
}

void view_hang_fini(struct view_hang *out)
{
    free(out->odd);
    free(out->exited);
    memset(out, 0, sizeof(*out));
}
