/* The merged tree (STAT's prefix tree of equivalence classes): the ranks' current stacks
 * merged frame by frame from the outermost, so N-1 ranks waiting in one collective form one
 * branch and the rank that went elsewhere stands out as a thin one.
 *
 * Frames merge by function and file; lines differ between ranks that sit in the same function
 * on different lines, so a node keeps their range and the most common one. A node's id hashes
 * the (function, file) path from the top, so it names "the same place" across rebuilds and the
 * UI can keep its collapsed set as ids while the tree is rebuilt every frame.
 *
 * The build has three passes: insert each stack (creating nodes through an open-addressed
 * table keyed by id, up to the node cap), count stacks and ages along each path, then fill
 * the per-node rank arrays from one pool and order siblings by descending count. Nodes are
 * created parent first, so one pass in index order sees every parent before its children.
 *
 * asyncio: a thread whose stack only shows its event loop waiting (view_loop_waiting), when
 * its loop's tasks were read (record --async, the monitor's `a`), takes part once per task
 * instead: its frames down to BaseEventLoop._run_once, then the task's await chain, so ranks
 * waiting in the same await merge into one branch that ends at the innermost coroutine. */
#include "ranktop/views/view.h"

#include <stdlib.h>
#include <string.h>

#include "ranktop/base/status.h"
#include "ranktop/base/hash.h"
#include "ranktop/base/util.h"

#define NOSTACK_NAME "<no stack>"
#define EXITED_NAME "<exited>"
#define TOP_SEED 0x6a09e667f3bcc908ull

/* One stack taking part: a rank's main thread, or any live thread in all-threads mode. */
struct contrib {
    int rank;
    const char *thread; /* all-threads mode: the thread's name, its stack goes under it */
    enum view_node_kind kind;
    uint32_t stack; /* VIEW_NODE_FRAME only */
    uint64_t age;   /* ns unchanged */
    int end;        /* node it ends at; -1 when the cap left no room for it */
    /* A task's part: the outer `outer` frames of stack (its loop), then the frames of `task`
     * (its await chain); HSTACK_NONE for a plain stack. */
    uint32_t outer, task;
};

struct builder {
    const struct history *h;
    struct view_tree *t;
    size_t cap, nodes_cap;
    int *slot; /* node index + 1, 0 = empty */
    size_t mask;
    struct contrib *c;
    size_t nc, ccap;
};

static void add_contrib(struct builder *b, int rank, enum view_node_kind kind, uint32_t stack,
                        uint64_t age)
{
    if (b->nc == b->ccap) {
        b->ccap = b->ccap ? b->ccap * 2 : 64;
        b->c = x_reallocarray(b->c, b->ccap, sizeof(*b->c));
    }
    b->c[b->nc++] = (struct contrib){rank, NULL, kind, stack, age, -1, 0, HSTACK_NONE};
}

/* The frames of a contribution: depth d from the outermost; how many there are. */
static const struct hframe *contrib_frame(const struct history *h, const struct contrib *c,
                                          uint32_t d)
{
    if (c->task != HSTACK_NONE && d >= c->outer)
        return &h->frames[history_stack_frames(h, c->task)[d - c->outer]];
    return &h->frames[history_stack_frames(h, c->stack)[d]];
}

static uint32_t contrib_depth(const struct history *h, const struct contrib *c)
{
    if (c->task != HSTACK_NONE)
        return c->outer + h->stacks[c->task].nframes;
    return h->stacks[c->stack].nframes;
}

/* The name a thread is merged under: threads of one name across ranks share a subtree. */
static const char *thread_label(const struct hthread *t)
{
    return t->name[0] ? t->name : t->main ? "MainThread" : "(unnamed thread)";
}

/* A thread whose stack is its loop waiting: one part per task of that loop, aged by the
 * later change of the two; false when the loop has no task read. */
static bool add_tasks(struct builder *b, int rank, const struct hrank *r, const struct hthread *t,
                      uint64_t now, bool all)
{
    uint32_t s = view_thread_stack(b->h, t), outer;
    uint64_t age = view_since_fchange(b->h, t, now);
    size_t before = b->nc;

    if (!view_loop_waiting(b->h, s, &outer))
        return false;
    for (size_t i = 0; i < r->nthreads; i++) {
        const struct hthread *k = &r->threads[i];
        uint64_t kage;

        if (!view_task_on(r, t, k, b->h))
            continue;
        kage = view_since_fchange(b->h, k, now);
        add_contrib(b, rank, VIEW_NODE_FRAME, s, kage < age ? kage : age);
        b->c[b->nc - 1].outer = outer;
        b->c[b->nc - 1].task = view_thread_stack(b->h, k);
        if (all)
            b->c[b->nc - 1].thread = thread_label(t);
    }
    return b->nc > before;
}

static void add_thread(struct builder *b, int rank, const struct hrank *r, const struct hthread *t,
                       uint64_t now, bool all)
{
    uint32_t s = view_thread_stack(b->h, t);

    if (t && add_tasks(b, rank, r, t, now, all))
        return;
    add_contrib(b, rank, s == HSTACK_NONE ? VIEW_NODE_NOSTACK : VIEW_NODE_FRAME, s,
                view_since_fchange(b->h, t, now));
    if (all && t)
        b->c[b->nc - 1].thread = thread_label(t);
}

static bool rank_wanted(const struct hrank *r, const struct view_merge_opts *o)
{
    if (!o || !o->pids)
        return true;
    for (size_t i = 0; i < o->npids; i++)
        if (o->pids[i] == r->pid)
            return true;
    return false;
}

static void collect_rank(struct builder *b, const struct hrank *r, uint64_t now, bool all)
{
    int id = view_rank_id(r);
    size_t before = b->nc;

    if (r->exited) {
        add_contrib(b, id, VIEW_NODE_EXITED, HSTACK_NONE, now > r->end ? now - r->end : 0);
        return;
    }
    if (!all) {
        add_thread(b, id, r, view_main_thread(r), now, false);
        return;
    }
    /* The tree compares ranks: a worker's threads are shown under its rank, not merged here. */
    for (size_t i = 0; i < r->nthreads; i++)
        if (!r->threads[i].gone && !r->threads[i].worker && !r->threads[i].task)
            add_thread(b, id, r, &r->threads[i], now, true);
    /* A live rank with no live thread still shows up, as having no stack. */
    if (b->nc == before)
        add_contrib(b, id, VIEW_NODE_NOSTACK, HSTACK_NONE, 0);
}

static int node_new(struct builder *b, uint64_t id, int parent, enum view_node_kind kind,
                    const char *fn, const char *file)
{
    struct view_tree *t = b->t;
    struct view_node *n;

    if (t->nnodes == b->nodes_cap) {
        b->nodes_cap = b->nodes_cap ? b->nodes_cap * 2 : 256;
        t->nodes = x_reallocarray(t->nodes, b->nodes_cap, sizeof(*t->nodes));
    }
    n = memset(&t->nodes[t->nnodes], 0, sizeof(*n));
    n->id = id;
    n->parent = parent;
    n->child = n->next = -1;
    n->depth = parent < 0 ? 0 : t->nodes[parent].depth + 1;
    n->kind = kind;
    n->function = fn;
    n->file = file;
    n->unchanged_min = UINT64_MAX;
    return (int)t->nnodes++;
}

/* The child of parent (-1: the top) for (kind, function, file), created when missing; -1
 * when the node cap is reached. */
static int node_get(struct builder *b, int parent, enum view_node_kind kind, const char *fn,
                    const char *file)
{
    const struct view_node *nodes = b->t->nodes;
    uint64_t pid = parent < 0 ? TOP_SEED : nodes[parent].id;
    uint64_t id = hash_mix(pid, hash_mix(hash_str(fn), hash_str(file)) ^ (uint64_t)kind);
    size_t j;

    for (j = id & b->mask; b->slot[j]; j = (j + 1) & b->mask) {
        const struct view_node *n = &nodes[b->slot[j] - 1];

        if (n->id == id && n->parent == parent && n->kind == kind &&
            hash_str_same(n->function, fn) && hash_str_same(n->file, file))
            return b->slot[j] - 1;
    }
    if (b->t->nnodes >= b->cap) {
        b->t->truncated = true;
        return -1;
    }
    b->slot[j] = node_new(b, id, parent, kind, fn, file) + 1;
    return b->slot[j] - 1;
}

static void insert(struct builder *b, struct contrib *c)
{
    const struct history *h = b->h;
    uint32_t nf;
    int at = -1;

    if (c->thread && (at = node_get(b, -1, VIEW_NODE_THREAD, c->thread, "")) < 0)
        return;
    if (c->kind != VIEW_NODE_FRAME) {
        c->end =
            node_get(b, at, c->kind, c->kind == VIEW_NODE_EXITED ? EXITED_NAME : NOSTACK_NAME, "");
        return;
    }
    nf = contrib_depth(h, c);
    for (uint32_t d = 0; d < nf; d++) {
        const struct hframe *f = contrib_frame(h, c, d);
        int n = node_get(b, at, VIEW_NODE_FRAME, f->function, f->file);

        /* At the cap the stack stops at the deepest node it still has. */
        if (n < 0)
            break;
        at = n;
    }
    c->end = at;
}

/* Stack counts and unchanged ages along each stack's path. */
static void count_paths(struct builder *b)
{
    struct view_node *nodes = b->t->nodes;

    for (size_t i = 0; i < b->nc; i++) {
        const struct contrib *c = &b->c[i];

        if (c->end < 0)
            continue;
        b->t->nstacks++;
        nodes[c->end].nend++;
        for (int n = c->end; n >= 0; n = nodes[n].parent) {
            nodes[n].count++;
            if (c->age < nodes[n].unchanged_min)
                nodes[n].unchanged_min = c->age;
            if (c->age > nodes[n].unchanged_max)
                nodes[n].unchanged_max = c->age;
        }
    }
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return (x > y) - (x < y);
}

/* Sorts v[0..n) and drops repeats; returns the distinct count. */
static size_t sort_distinct(int *v, size_t n)
{
    size_t m = 0;

    x_qsort(v, n, sizeof(*v), cmp_int);
    for (size_t i = 0; i < n; i++)
        if (!m || v[m - 1] != v[i])
            v[m++] = v[i];
    return m;
}

/* Most common known line and the range of known lines in lines[0..n) (sorted here). */
static void line_stats(struct view_node *n, int *lines, size_t n_lines)
{
    size_t best = 0;

    x_qsort(lines, n_lines, sizeof(*lines), cmp_int);
    for (size_t i = 0, j; i < n_lines; i = j) {
        for (j = i; j < n_lines && lines[j] == lines[i]; j++)
            ;
        if (lines[i] <= 0)
            continue;
        if (!n->line_min)
            n->line_min = lines[i];
        n->line_max = lines[i];
        if (j - i > best) {
            best = j - i;
            n->line = lines[i];
        }
    }
}

/* Slices of the pool for each node: ranks through it, then ranks ending at it. */
static size_t *pool_offsets(struct view_tree *t)
{
    size_t *off = x_malloc((2 * t->nnodes + 1) * sizeof(*off));
    size_t at = 0;

    for (size_t i = 0; i < t->nnodes; i++) {
        off[2 * i] = at;
        at += t->nodes[i].count;
        off[2 * i + 1] = at;
        at += t->nodes[i].nend;
    }
    off[2 * t->nnodes] = at;
    return off;
}

/* Fills node->ranks, end_ranks and the line figures from the stacks' paths. */
static void fill_ranks(struct builder *b)
{
    struct view_tree *t = b->t;
    size_t *off = pool_offsets(t), total = off[2 * t->nnodes];
    size_t *fill = x_calloc(2 * t->nnodes + 1, sizeof(*fill));
    int *lines = x_malloc((total ? total : 1) * sizeof(*lines));

    t->pool = x_malloc((total ? total : 1) * sizeof(*t->pool));
    for (size_t i = 0; i < b->nc; i++) {
        const struct contrib *c = &b->c[i];
        bool frames = c->kind == VIEW_NODE_FRAME;

        if (c->end < 0)
            continue;
        t->pool[off[2 * c->end + 1] + fill[2 * c->end + 1]++] = c->rank;
        for (int n = c->end; n >= 0; n = t->nodes[n].parent) {
            size_t k = off[2 * n] + fill[2 * n]++;
            /* A frame node's depth counts the thread node above it, when there is one. */
            uint32_t d = (uint32_t)t->nodes[n].depth - (c->thread ? 1 : 0);

            t->pool[k] = c->rank;
            lines[k] =
                frames && t->nodes[n].kind == VIEW_NODE_FRAME ? contrib_frame(b->h, c, d)->line : 0;
        }
    }
    for (size_t i = 0; i < t->nnodes; i++) {
        struct view_node *n = &t->nodes[i];

        line_stats(n, lines + off[2 * i], n->count);
        n->ranks = t->pool + off[2 * i];
        n->nranks = sort_distinct(t->pool + off[2 * i], n->count);
        n->end_ranks = t->pool + off[2 * i + 1];
        n->nend_ranks = sort_distinct(t->pool + off[2 * i + 1], n->nend);
    }
    free(lines);
    free(fill);
    free(off);
}

static int cmp_sibling(const void *a, const void *b)
{
    const struct view_node *x = *(const struct view_node *const *)a;
    const struct view_node *y = *(const struct view_node *const *)b;
    int c;

    if (x->parent != y->parent)
        return x->parent < y->parent ? -1 : 1;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    if ((c = strcmp(x->function ? x->function : "", y->function ? y->function : "")))
        return c;
    return strcmp(x->file ? x->file : "", y->file ? y->file : "");
}

/* Links every parent's children (and the top-level nodes) in descending count order. */
static void link_siblings(struct view_tree *t)
{
    struct view_node **v = x_malloc(t->nnodes * sizeof(*v));

    for (size_t i = 0; i < t->nnodes; i++)
        v[i] = &t->nodes[i];
    x_qsort(v, t->nnodes, sizeof(*v), cmp_sibling);
    for (size_t i = 0; i < t->nnodes; i++) {
        int idx = (int)(v[i] - t->nodes);

        if (i + 1 < t->nnodes && v[i + 1]->parent == v[i]->parent)
            v[i]->next = (int)(v[i + 1] - t->nodes);
        if (i && v[i - 1]->parent == v[i]->parent)
            continue;
        if (v[i]->parent < 0)
            t->root = idx;
        else
            t->nodes[v[i]->parent].child = idx;
    }
    free(v);
}

/* A branch is odd when fewer stacks take it than take the biggest branch at the same parent
 * (siblings are sorted, so that is the first child); everything below an odd node is odd. */
static void mark_odd(struct view_tree *t)
{
    for (size_t i = 0; i < t->nnodes; i++) {
        struct view_node *n = &t->nodes[i];
        size_t top =
            n->parent < 0 ? t->nodes[t->root].count : t->nodes[t->nodes[n->parent].child].count;
        size_t first = n->child >= 0 ? t->nodes[n->child].count : 0;

        if (n->parent >= 0 && t->nodes[n->parent].nend > top)
            top = t->nodes[n->parent].nend;
        n->odd = (n->parent >= 0 && t->nodes[n->parent].odd) || n->count < top;
        n->end_odd = n->nend && (n->odd || n->nend < first);
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

/* Marks collapsed nodes and lists the visible ones depth first, walking the sibling links
 * without a stack: down into children unless collapsed, else on to the next sibling of the
 * nearest ancestor that has one. */
static void list_visible(struct view_tree *t, const struct view_merge_opts *o)
{
    uint64_t *set = NULL;
    size_t nset = o ? o->ncollapsed : 0;
    int n = t->root;

    if (nset) {
        set = x_malloc(nset * sizeof(*set));
        memcpy(set, o->collapsed, nset * sizeof(*set));
        x_qsort(set, nset, sizeof(*set), cmp_u64);
    }
    t->visible = x_malloc((t->nnodes ? t->nnodes : 1) * sizeof(*t->visible));
    while (n >= 0) {
        struct view_node *v = &t->nodes[n];

        t->visible[t->nvisible++] = n;
        v->collapsed = v->child >= 0 && set && bsearch(&v->id, set, nset, sizeof(*set), cmp_u64);
        if (v->child >= 0 && !v->collapsed) {
            n = v->child;
            continue;
        }
        while (n >= 0 && t->nodes[n].next < 0)
            n = t->nodes[n].parent;
        if (n >= 0)
            n = t->nodes[n].next;
    }
    free(set);
}

static void builder_init(struct builder *b, const struct history *h,
                         const struct view_merge_opts *o, struct view_tree *out)
{
    size_t nslot = 16;

    memset(b, 0, sizeof(*b));
    b->h = h;
    b->t = out;
    b->cap = o && o->max_nodes ? o->max_nodes : VIEW_MAX_NODES;
    while (nslot < 2 * b->cap)
        nslot *= 2;
    b->slot = x_calloc(nslot, sizeof(*b->slot));
    b->mask = nslot - 1;
}

int view_merge(const struct history *h, uint64_t now, const struct view_merge_opts *o,
               struct view_tree *out)
{
    struct builder b;

    memset(out, 0, sizeof(*out));
    out->root = -1;
    builder_init(&b, h, o, out);
    for (size_t i = 0; i < h->nranks; i++)
        if (rank_wanted(&h->ranks[i], o))
            collect_rank(&b, &h->ranks[i], now, o && o->all_threads);
    for (size_t i = 0; i < b.nc; i++)
        insert(&b, &b.c[i]);
    count_paths(&b);
    fill_ranks(&b);
    if (out->nnodes) {
        link_siblings(out);
        mark_odd(out);
    }
    list_visible(out, o);
    free(b.slot);
    free(b.c);
    return out->truncated ? APP_E_LIMIT : 0;
}

void view_merge_fini(struct view_tree *out)
{
    free(out->nodes);
    free(out->visible);
    free(out->pool);
    memset(out, 0, sizeof(*out));
    out->root = -1;
}
