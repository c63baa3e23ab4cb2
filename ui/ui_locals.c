/* The locals pane: Enter on a frame of the Rank view shows that frame's arguments and locals
 * for that rank; Enter on a tree node of the Merged view (w: the tree cursor, or a search)
 * shows them for every rank in the node's set side by side, and marks the ranks whose value
 * differs from the one most ranks hold. The values are read at the key press through the
 * engine (engine_locals_read: a one-shot reader per rank), never by sampling; the pane keeps
 * what was read then until Enter, Esc or Backspace closes it. Objects other than built-in
 * values are compared by type, since their addresses differ between processes. UI thread. */
#include "ui_priv.h"

#include "ranktop/base/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOC_MAX_LINES 512
#define LOC_COLS 8 /* ranks side by side; the differences below the table name them all */
#define NAME_W 16

static void loc_add(struct ui *u, enum theme_role role, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void loc_add(struct ui *u, enum theme_role role, const char *fmt, ...)
{
    struct ui_line *l;
    va_list ap;

    if (u->nloc >= LOC_MAX_LINES)
        return;
    if (!u->loc)
        u->loc = x_calloc(LOC_MAX_LINES, sizeof(*u->loc));
    l = &u->loc[u->nloc++];
    memset(l, 0, sizeof(*l));
    va_start(ap, fmt);
    vsnprintf(l->text, sizeof(l->text), fmt, ap);
    va_end(ap);
    l->role = role;
}

static const char *kind_word(char k)
{
    return k == 'a' ? "arg" : k == 'c' ? "cell" : "local";
}

static const struct hrank *rank_of_pid(const struct history *h, int pid)
{
    for (size_t i = 0; i < h->nranks; i++)
        if (h->ranks[i].pid == pid)
            return &h->ranks[i];
    return NULL;
}

void ui_locals_close(struct ui *u)
{
    u->loc_on = false;
    u->nloc = 0;
    u->lsel = u->lscroll = 0;
}

/* Python frames inner to frame k of a stack (outermost first): the reader's index. */
static int py_index(const struct history *h, uint32_t stack, uint32_t k)
{
    const uint32_t *fr = history_stack_frames(h, stack);
    int n = 0;

    for (uint32_t i = k + 1; i < h->stacks[stack].nframes; i++)
        n += !h->frames[fr[i]].native;
    return n;
}

void ui_locals_rank(struct ui *u, const struct ui_line *l)
{
    const struct history *h = &u->v->hist;
    const struct hframe *f = &h->frames[history_stack_frames(h, l->fstack)[l->fk]];
    const struct hrank *r = rank_of_pid(h, l->fpid);
    struct engine_locals out;
    struct app_err err = {0};
    char label[32];

    if (f->native)
        return;
    ui_locals_close(u);
    u->loc_on = true;
    view_rank_id_label(r ? view_rank_id(r) : -l->fpid, label, sizeof(label));
    loc_add(u, ROLE_TITLE, "locals of %s (%s), %s, read now   Esc: back", f->function, f->file,
            label);
    if (engine_locals_read(r ? r->host : "", l->fworker ? l->fworker : l->fpid, l->fident,
                           f->function, f->file, py_index(h, l->fstack, l->fk), &out, &err) < 0) {
        loc_add(u, ROLE_STATUS, "  not read: %s", err.msg);
        return;
    }
    loc_add(u, ROLE_DIM, "  line %d now", out.line);
    if (!out.n)
        loc_add(u, ROLE_DIM, "  (no arguments or locals)");
    for (int i = 0; i < out.n; i++)
        loc_add(u, ROLE_NORMAL, "  %-5s %s = %s   (%s)", kind_word(out.v[i].kind), out.v[i].name,
                out.v[i].repr, out.v[i].type);
    engine_locals_fini(&out);
}

/* --- the Merged view: one frame across ranks ------------------------------------------ */

struct rank_read {
    int id;
    struct engine_locals l;
    char why[512]; /* not read: why */
};

/* A value as compared across ranks: objects by type (their addresses differ). */
static void cmp_key(const struct engine_local *v, char *buf, size_t len)
{
    if (v->repr[0] == '<' && strstr(v->repr, " at 0x"))
        snprintf(buf, len, "<%s>", v->type);
    else
        snprintf(buf, len, "%s", v->repr);
}

static const struct engine_local *find_local(const struct engine_locals *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].name, name))
            return &l->v[i];
    return NULL;
}

/* The path of FRAME nodes from the top down to node idx: its length, nodes in p. */
static int node_path(const struct view_tree *t, int idx, const struct view_node **p, int cap)
{
    int n = 0;

    for (int i = idx; i >= 0; i = t->nodes[i].parent)
        if (t->nodes[i].kind == VIEW_NODE_FRAME)
            n++;
    if (n > cap)
        return -1;
    for (int i = idx, k = n; i >= 0; i = t->nodes[i].parent)
        if (t->nodes[i].kind == VIEW_NODE_FRAME)
            p[--k] = &t->nodes[i];
    return n;
}

/* The first thread of r whose stack runs through the path: its ident, stack, the path's last
 * frame index. */
static const struct hthread *thread_on_path(const struct history *h, const struct hrank *r,
                                            const struct view_node **p, int n, uint32_t *stack)
{
    for (size_t i = 0; i < r->nthreads; i++) {
        const struct hthread *t = &r->threads[i];
        uint32_t s;
        const uint32_t *fr;
        int k;

        if (t->gone || t->worker || t->task || (s = view_thread_stack(h, t)) == HSTACK_NONE ||
            h->stacks[s].nframes < (uint32_t)n)
            continue;
        fr = history_stack_frames(h, s);
        for (k = 0; k < n; k++)
            if (strcmp(h->frames[fr[k]].function, p[k]->function) ||
                strcmp(h->frames[fr[k]].file, p[k]->file))
                break;
        if (k == n) {
            *stack = s;
            return t;
        }
    }
    return NULL;
}

static void read_rank(struct ui *u, int id, const struct view_node **p, int n, struct rank_read *rr)
{
    const struct history *h = &u->v->hist;
    const struct hrank *r = NULL;
    const struct hthread *t;
    struct app_err err = {0};
    uint32_t stack;

    rr->id = id;
    for (size_t i = 0; i < h->nranks && !r; i++)
        if (view_rank_id(&h->ranks[i]) == id && !h->ranks[i].exited)
            r = &h->ranks[i];
    if (!r || !(t = thread_on_path(h, r, p, n, &stack))) {
        snprintf(rr->why, sizeof(rr->why), "no thread there now");
        return;
    }
    if (engine_locals_read(r->host, r->pid, t->ident, p[n - 1]->function, p[n - 1]->file,
                           py_index(h, stack, (uint32_t)n - 1), &rr->l, &err) < 0)
        snprintf(rr->why, sizeof(rr->why), "%s", err.msg);
}

/* How many ranks hold v's value for name (compared as cmp_key). */
static int holders(const struct rank_read *rr, int nr, const char *name, const char *key)
{
    char k2[300];
    int c = 0;

    for (int i = 0; i < nr; i++) {
        const struct engine_local *v = rr[i].why[0] ? NULL : find_local(&rr[i].l, name);
        if (v) {
            cmp_key(v, k2, sizeof(k2));
            c += !strcmp(k2, key);
        }
    }
    return c;
}

/* The table: one row per name, one column per rank (the first LOC_COLS), then a line per
 * rank whose value differs from the one most ranks hold. */
static void merged_table(struct ui *u, struct rank_read *rr, int nr)
{
    int cols = nr < LOC_COLS ? nr : LOC_COLS,
        cw = (u->lay.lower.w - NAME_W - 2) / (cols ? cols : 1);
    char row[512], key[300], label[32];
    const char *names[256];
    int nn = 0;

    cw = cw < 10 ? 10 : cw > 40 ? 40 : cw;
    for (int i = 0; i < nr; i++)
        for (int k = 0; !rr[i].why[0] && k < rr[i].l.n && nn < 256; k++) {
            bool seen = false;
            for (int m = 0; m < nn && !seen; m++)
                seen = !strcmp(names[m], rr[i].l.v[k].name);
            if (!seen)
                names[nn++] = rr[i].l.v[k].name;
        }
    snprintf(row, sizeof(row), "  %-*s", NAME_W, "NAME");
    for (int c = 0; c < cols; c++) {
        view_rank_id_label(rr[c].id, label, sizeof(label));
        snprintf(row + strlen(row), sizeof(row) - strlen(row), " %-*.*s", cw - 1, cw - 1, label);
    }
    loc_add(u, ROLE_HEADER, "%s", row);
    for (int m = 0; m < nn; m++) {
        int best = 0, differ = 0;
        const char *common = NULL;
        char ckey[300] = "";

        /* The value most ranks hold; ties go to the lowest rank's. */
        for (int i = 0; i < nr; i++) {
            const struct engine_local *v = rr[i].why[0] ? NULL : find_local(&rr[i].l, names[m]);
            int c;
            if (!v)
                continue;
            cmp_key(v, key, sizeof(key));
            if ((c = holders(rr, nr, names[m], key)) > best)
                best = c, common = v->repr, snprintf(ckey, sizeof(ckey), "%s", key);
        }
        snprintf(row, sizeof(row), "  %-*.*s", NAME_W, NAME_W, names[m]);
        for (int i = 0; i < nr; i++) {
            const struct engine_local *v = rr[i].why[0] ? NULL : find_local(&rr[i].l, names[m]);
            bool odd = v && (cmp_key(v, key, sizeof(key)), strcmp(key, ckey));
            differ += odd;
            if (i < cols)
                snprintf(row + strlen(row), sizeof(row) - strlen(row), " %s%-*.*s", odd ? "*" : " ",
                         cw - 2, cw - 2, v ? v->repr : "-");
        }
        loc_add(u, differ ? ROLE_ODD : ROLE_NORMAL, "%s", row);
        for (int i = 0; differ && i < nr; i++) {
            const struct engine_local *v = rr[i].why[0] ? NULL : find_local(&rr[i].l, names[m]);
            if (!v || (cmp_key(v, key, sizeof(key)), !strcmp(key, ckey)))
                continue;
            view_rank_id_label(rr[i].id, label, sizeof(label));
            loc_add(u, ROLE_ODD, "  * %s differs: %s = %s (%d ranks hold %s)", label, names[m],
                    v->repr, best, common ? common : "-");
        }
    }
}

int ui_locals_merged(struct ui *u, uint64_t node)
{
    struct view_merge_opts mo = {
        .all_threads = u->all_threads, .collapsed = u->collapsed, .ncollapsed = u->ncollapsed};
    const struct view_node *path[256];
    struct rank_read *rr;
    struct view_tree t;
    int idx = -1, n = -1, nr;

    if (view_merge(&u->v->hist, clock_mono_ns(), &mo, &t) < 0 && !t.nnodes) {
        view_merge_fini(&t);
        return -1;
    }
    for (size_t i = 0; i < t.nnodes && idx < 0; i++)
        if (t.nodes[i].id == node)
            idx = (int)i;
    if (idx < 0 || (n = node_path(&t, idx, path, 256)) <= 0) {
        view_merge_fini(&t);
        return n == 0 ? 0 : -1;
    }
    ui_locals_close(u);
    u->loc_on = true;
    nr = (int)t.nodes[idx].nranks;
    loc_add(u, ROLE_TITLE, "locals of %s (%s) in %d ranks, read now   Esc: back",
            path[n - 1]->function, path[n - 1]->file, nr);
    rr = x_calloc((size_t)nr + 1, sizeof(*rr));
    for (int i = 0; i < nr; i++)
        read_rank(u, t.nodes[idx].ranks[i], path, n, &rr[i]);
    merged_table(u, rr, nr);
    for (int i = 0; i < nr; i++) {
        char label[32];
        if (!rr[i].why[0])
            continue;
        view_rank_id_label(rr[i].id, label, sizeof(label));
        loc_add(u, ROLE_DIM, "  %s: not read: %s", label, rr[i].why);
    }
    for (int i = 0; i < nr; i++)
        engine_locals_fini(&rr[i].l);
    free(rr);
    view_merge_fini(&t);
    return 1;
}
