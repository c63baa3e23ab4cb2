/* Drawing the monitor: header and banner, device meters, rank table, the five lower views,
 * key bar and help. Pure presentation over the UI's copies (history clone, live figures):
 * no I/O, no locks. Layout comes from layout.c, text shaping from draw.c, view models from
 * src/view_*.c. UI thread only. */
#include "ui_priv.h"

#include "draw.h"
#include "layout.h"
#include "ranktop/util.h"
#include "theme.h"

#include <curses.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOP_WINDOW_NS 60000000000ull

static struct layout g_lay;
static int g_lower_rows;
static uint64_t g_lower_node[4096];

/* Writes text fitted to w columns at (y, x) in a role; pads with spaces when pad. */
static void put(struct ui *u, int y, int x, int w, enum theme_role role, bool pad, const char *text)
{
    char buf[2048];
    int used;

    if (w <= 0)
        return;
    used = draw_fit(text, w, buf, sizeof(buf), false, u->utf8);
    attrset(theme_attr(role));
    mvaddstr(y, x, buf);
    for (; pad && used < w; used++)
        addch(' ');
    attrset(A_NORMAL);
}

static void putf(struct ui *u, int y, int x, int w, enum theme_role role, bool pad, const char *fmt,
                 ...) __attribute__((format(printf, 7, 8)));

static void putf(struct ui *u, int y, int x, int w, enum theme_role role, bool pad, const char *fmt,
                 ...)
{
    char buf[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    put(u, y, x, w, role, pad, buf);
}

/* Latest value of a counter series of pid, NAN when there is none. */
static double series_last(const struct history *h, enum series_id id, int pid)
{
    const struct hseries *s = history_series(h, id, pid);

    return s && s->n ? s->pts[s->n - 1].v : NAN;
}

static const struct engine_rank_live *live_of(const struct ui *u, int pid)
{
    for (size_t i = 0; i < u->nlive; i++)
        if (u->live[i].pid == pid)
            return &u->live[i];
    return NULL;
}

static bool is_tagged(const struct ui *u, int pid)
{
    for (int i = 0; i < u->ntags; i++)
        if (u->tags[i] == pid)
            return true;
    return false;
}

static bool is_odd(const struct ui *u, int pid)
{
    for (size_t i = 0; u->hang.hang && i < u->hang.nodd; i++)
        if (u->hang.odd[i].pid == pid)
            return true;
    return false;
}

bool ui_is_collapsed(const struct ui *u, uint64_t id)
{
    for (size_t i = 0; i < u->ncollapsed; i++)
        if (u->collapsed[i] == id)
            return true;
    return false;
}

void ui_toggle_collapsed(struct ui *u, uint64_t id)
{
    for (size_t i = 0; i < u->ncollapsed; i++)
        if (u->collapsed[i] == id) {
            u->collapsed[i] = u->collapsed[--u->ncollapsed];
            return;
        }
    u->collapsed = x_reallocarray(u->collapsed, u->ncollapsed + 1, sizeof(uint64_t));
    u->collapsed[u->ncollapsed++] = id;
}

int ui_lower_rows(const struct ui *u)
{
    (void)u;
    return g_lower_rows;
}

int ui_table_rows(const struct ui *u)
{
    (void)u;
    return g_lay.rank_rows > 0 ? g_lay.rank_rows : 1;
}

uint64_t ui_lower_node(const struct ui *u)
{
    if (u->lsel < 0 || u->lsel >= g_lower_rows || u->lsel >= 4096)
        return 0;
    return g_lower_node[u->lsel];
}

static double baseline_of(const struct ui *u, int pid)
{
    for (size_t i = 0; i < u->nbase; i++)
        if (u->base_pid[i] == pid)
            return u->base_rss[i];
    return NAN;
}

static bool row_matches(const struct ui_row *r, const char *filter)
{
    char buf[512];

    if (!filter[0])
        return true;
    snprintf(buf, sizeof(buf), "rank %d pid %d %s", r->rank, r->pid, r->top ? r->top : "");
    return strstr(buf, filter) != NULL;
}

static int cmp_rows(const void *a, const void *b, void *arg)
{
    const struct ui_row *x = a, *y = b;
    enum ui_sort s = *(const enum ui_sort *)arg;
    double dx = 0, dy = 0;

    switch (s) {
    case SORT_CPU:
        dx = y->cpu, dy = x->cpu;
        break;
    case SORT_RSS:
        dx = y->rss_mib, dy = x->rss_mib;
        break;
    case SORT_SINCE:
        dx = y->since_s, dy = x->since_s;
        break;
    case SORT_GIL:
        dx = y->gil, dy = x->gil;
        break;
    default:
        dx = x->rank < 0 ? 1e9 : x->rank, dy = y->rank < 0 ? 1e9 : y->rank;
    }
    if (isnan(dx))
        dx = -1e18;
    if (isnan(dy))
        dy = -1e18;
    if (dx != dy)
        return dx < dy ? -1 : 1;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

static char g_tops[4096][192];

void ui_build_rows(struct ui *u)
{
    struct view_ranks vr;
    uint64_t now = clock_mono_ns();

    view_ranks(&u->hist, now, &vr);
    free(u->rows);
    u->rows = x_calloc(vr.n ? vr.n : 1, sizeof(*u->rows));
    u->nrows = 0;
    for (size_t i = 0; i < vr.n && u->nrows < 4096; i++) {
        const struct view_rank_row *v = &vr.rows[i];
        const struct engine_rank_live *l = live_of(u, v->pid);
        struct ui_row *r = &u->rows[u->nrows];
        double base = baseline_of(u, v->pid);

        *r = (struct ui_row){.pid = v->pid, .rank = v->rank, .hrank = v->idx, .exited = v->exited};
        r->cpu = series_last(&u->hist, SERIES_CPU, v->pid);
        r->rss_mib = series_last(&u->hist, SERIES_RSS, v->pid);
        r->drss_mib = isnan(base) ? NAN : r->rss_mib - base;
        r->dev_mem = l ? l->dev_mem_mb : -1;
        r->gil = l ? l->gil_busy_pct : NAN;
        r->since_s = (double)v->since / 1e9;
        g_tops[u->nrows][0] = '\0';
        if (v->top)
            view_frame_format(v->top, g_tops[u->nrows], sizeof(g_tops[0]));
        r->top = g_tops[u->nrows];
        if (row_matches(r, u->filter))
            u->nrows++;
    }
    view_ranks_fini(&vr);
    /* Sorting reorders rows whose `top` points into g_tops: that is fine, the pointers move. */
    qsort_r(u->rows, u->nrows, sizeof(*u->rows), cmp_rows, &u->sort);
    if (u->sel >= (int)u->nrows)
        u->sel = u->nrows ? (int)u->nrows - 1 : 0;
}

static void draw_header(struct ui *u)
{
    const struct layout_rect *r = &g_lay.header;
    size_t live = 0;
    char prompt[160], hist[16];

    for (size_t i = 0; i < u->hist.nranks; i++)
        live += !u->hist.ranks[i].exited;
    draw_bytes(hist, sizeof(hist), (int64_t)(u->stats.history_bytes / 1024));
    putf(u, r->y, r->x, r->w, ROLE_TITLE, true,
         "ranktop  %s  %s  ranks %zu/%zu  %.1f/%.3g Hz  lag %.1f ms  errors %.2f%%  hist %s%s%s",
         u->hist.host, u->o->title ? u->o->title : "", live, u->hist.nranks, u->stats.achieved_hz,
         engine_rate(u->e), u->stats.lag_ms,
         u->stats.stacks + u->stats.errors
             ? 100.0 * (double)u->stats.errors / (double)(u->stats.stacks + u->stats.errors)
             : 0.0,
         hist, u->paused ? "  [PAUSED]" : "", u->all_threads ? "  [all threads]" : "");
    if (g_lay.banner_lines > 0)
        put(u, r->y + 1, r->x, r->w, ROLE_BANNER, true, u->hang.text);
    if (u->input != INPUT_NONE) {
        snprintf(prompt, sizeof(prompt), "%s%s_",
                 u->input == INPUT_SEARCH   ? "search: "
                 : u->input == INPUT_FILTER ? "filter ranks: "
                                            : "export format: c)hrome s)peedscope f)olded",
                 u->input == INPUT_FORMAT ? "" : u->edit);
        put(u, r->y + r->h - 1, r->x, r->w, ROLE_STATUS, true, prompt);
    } else if (u->status[0] && clock_mono_ns() < u->status_until) {
        put(u, r->y + r->h - 1, r->x, r->w, ROLE_STATUS, true, u->status);
    } else if (u->search[0] || u->filter[0]) {
        putf(u, r->y + r->h - 1, r->x, r->w, ROLE_DIM, true, "search '%s'  filter '%s'", u->search,
             u->filter);
    }
}

static void device_cell(struct ui *u, int y, int x, int w, const struct smi_device *d)
{
    char name[24], ubar[256], mbar[256], used[16], total[16];
    int bw = (w - 30) / 2;
    double util = (d->valid & SMI_DEV_UTIL) ? (double)d->util_pct : NAN;
    double mfrac =
        (d->valid & SMI_DEV_MEM_USED) && (d->valid & SMI_DEV_MEM_TOTAL) && d->mem_total_mb > 0
            ? (double)d->mem_used_mb / (double)d->mem_total_mb
            : NAN;

    if (bw < 3)
        bw = 3;
    if (d->kind == SMI_KIND_NPU)
        snprintf(name, sizeof(name), "npu%d.%d", d->index, d->chip < 0 ? 0 : d->chip);
    else
        snprintf(name, sizeof(name), "gpu%d", d->index);
    draw_bar(ubar, sizeof(ubar), bw, isnan(util) ? 0 : util / 100.0, u->utf8);
    draw_bar(mbar, sizeof(mbar), bw, isnan(mfrac) ? 0 : mfrac, u->utf8);
    draw_bytes(used, sizeof(used), (d->valid & SMI_DEV_MEM_USED) ? d->mem_used_mb * 1024 : 0);
    draw_bytes(total, sizeof(total), (d->valid & SMI_DEV_MEM_TOTAL) ? d->mem_total_mb * 1024 : 0);
    putf(u, y, x, 7, ROLE_TITLE, true, "%s", name);
    putf(u, y, x + 7, bw + 6, util >= 90 ? ROLE_BAR_WARN : ROLE_BAR_OK, false, "%s%4s%%", ubar,
         isnan(util) ? "-" : (snprintf(name, sizeof(name), "%.0f", util), name));
    putf(u, y, x + 8 + bw + 5, w - (8 + bw + 5), mfrac > 0.9 ? ROLE_BAR_CRIT : ROLE_BAR_OK, false,
         "%s %s/%s", mbar, used, total);
}

static void draw_devices(struct ui *u)
{
    const struct layout_rect *r = &g_lay.devices;

    if (r->h <= 0)
        return;
    for (int i = 0; i < g_lay.dev_shown && i < (int)u->ndevs; i++) {
        int row = i / g_lay.dev_per_row, col = i % g_lay.dev_per_row;

        device_cell(u, r->y + row, r->x + col * (g_lay.dev_cell_w + 1), g_lay.dev_cell_w,
                    &u->devs[i]);
    }
    if (g_lay.dev_more > 0) {
        int i = g_lay.dev_shown, row = i / g_lay.dev_per_row, col = i % g_lay.dev_per_row;

        putf(u, r->y + row, r->x + col * (g_lay.dev_cell_w + 1), g_lay.dev_cell_w, ROLE_DIM, false,
             "+%d more", g_lay.dev_more);
    }
}

static void cell(struct ui *u, const struct rank_cols *c, int y, int x0, enum layout_col col,
                 enum theme_role role, const char *text)
{
    char buf[512];
    int w;

    if (c->w[col] <= 0)
        return;
    w = draw_fit(text, c->w[col], buf, sizeof(buf), col == LCOL_HOST, u->utf8);
    attrset(theme_attr(role));
    mvaddstr(y, x0 + c->x[col] + (c->right[col] ? c->w[col] - w : 0), buf);
}

static void fmt_mib(char *buf, size_t len, double mib, bool delta)
{
    if (isnan(mib))
        snprintf(buf, len, "-");
    else if (delta)
        draw_delta(buf, len, (int64_t)(mib * 1024));
    else
        draw_bytes(buf, len, (int64_t)(mib * 1024));
}

static void rank_row(struct ui *u, const struct rank_cols *c, int y, int x0, int w,
                     const struct ui_row *r, bool selected)
{
    const struct hrank *hr = &u->hist.ranks[r->hrank];
    enum theme_role role = selected               ? ROLE_SELECTED
                           : is_odd(u, r->pid)    ? ROLE_ODD
                           : r->exited            ? ROLE_DIM
                           : is_tagged(u, r->pid) ? ROLE_TAGGED
                                                  : ROLE_NORMAL;
    char b[64];

    put(u, y, x0, w, role, true, "");
    snprintf(b, sizeof(b), "%s%d", is_tagged(u, r->pid) ? "*" : "", r->rank);
    cell(u, c, y, x0, LCOL_RANK, role, r->rank >= 0 ? b : "?");
    snprintf(b, sizeof(b), "%d", r->pid);
    cell(u, c, y, x0, LCOL_PID, role, b);
    cell(u, c, y, x0, LCOL_HOST, role, hr->host);
    cell(u, c, y, x0, LCOL_DEVICE, role, hr->device[0] ? hr->device : "-");
    cell(u, c, y, x0, LCOL_STATE, role,
         r->exited                          ? "exit"
         : r->since_s >= u->o->hang_after_s ? "stuck"
                                            : "run");
    draw_pct(b, sizeof(b), r->cpu);
    cell(u, c, y, x0, LCOL_CPU, role, isnan(r->cpu) ? "-" : b);
    fmt_mib(b, sizeof(b), r->rss_mib, false);
    cell(u, c, y, x0, LCOL_RSS, role, b);
    fmt_mib(b, sizeof(b), r->drss_mib, true);
    cell(u, c, y, x0, LCOL_DRSS, role, b);
    fmt_mib(b, sizeof(b), r->dev_mem >= 0 ? (double)r->dev_mem : NAN, false);
    cell(u, c, y, x0, LCOL_DMEM, role, b);
    draw_pct(b, sizeof(b), r->gil);
    cell(u, c, y, x0, LCOL_GIL, role, isnan(r->gil) || r->gil < 0 ? "-" : b);
    cell(u, c, y, x0, LCOL_FRAME, role, r->top && r->top[0] ? r->top : "-");
    draw_duration(b, sizeof(b), (uint64_t)(r->since_s * 1e9));
    cell(u, c, y, x0, LCOL_SINCE, role, b);
    attrset(A_NORMAL);
}

static void draw_ranks(struct ui *u)
{
    const struct layout_rect *r = &g_lay.ranks;
    struct rank_cols c;

    if (r->h <= 0)
        return;
    layout_rank_columns(r->w, &c);
    put(u, r->y, r->x, r->w, ROLE_HEADER, true, "");
    for (int k = 0; k < LCOL_COUNT; k++)
        cell(u, &c, r->y, r->x, (enum layout_col)k, ROLE_HEADER,
             layout_col_title((enum layout_col)k, u->utf8));
    u->table_y = r->y + 1;
    u->table_h = g_lay.rank_rows;
    if (u->nrows == 0) {
        char why[1024];

        engine_last_errors(u->e, why, sizeof(why));
        if (u->filter[0])
            put(u, r->y + 1, r->x, r->w, ROLE_DIM, true,
                "no rank matches the filter (Esc clears it)");
        else
            putf(u, r->y + 1, r->x, r->w, ROLE_DIM, true, "no ranks yet%s%s", why[0] ? ": " : "",
                 why[0] ? why : " (waiting for discovery)");
        return;
    }
    if (u->sel < u->scroll)
        u->scroll = u->sel;
    if (u->sel >= u->scroll + g_lay.rank_rows)
        u->scroll = u->sel - g_lay.rank_rows + 1;
    for (int i = 0; i < g_lay.rank_rows && u->scroll + i < (int)u->nrows; i++)
        rank_row(u, &c, r->y + 1 + i, r->x, r->w, &u->rows[u->scroll + i], u->scroll + i == u->sel);
}

/* The lower pane is built as lines first (text, role, node id), then drawn with scrolling. */
struct line {
    char text[512];
    enum theme_role role;
    uint64_t node;
};

static struct line g_lines[4096];
static int g_nlines;

static void add_line(enum theme_role role, uint64_t node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add_line(enum theme_role role, uint64_t node, const char *fmt, ...)
{
    va_list ap;

    if (g_nlines >= 4096)
        return;
    va_start(ap, fmt);
    vsnprintf(g_lines[g_nlines].text, sizeof(g_lines[0].text), fmt, ap);
    va_end(ap);
    g_lines[g_nlines].role = role;
    g_lines[g_nlines++].node = node;
}

static void tree_prefix(struct ui *u, const struct view_tree *t, int idx, char *buf, size_t len)
{
    bool last[64];
    int depth = t->nodes[idx].depth < 63 ? t->nodes[idx].depth : 63;

    /* last[i]: the ancestor at depth i+1 (or the node itself) has no next sibling. */
    for (int n = idx, d = t->nodes[idx].depth; n >= 0 && d > 0; n = t->nodes[n].parent, d--)
        if (d - 1 < depth)
            last[d - 1] = t->nodes[n].next < 0;
    draw_tree_prefix(buf, len, last, depth, u->utf8);
}

static void lines_merged(struct ui *u)
{
    struct view_merge_opts mo = {
        .all_threads = u->all_threads, .collapsed = u->collapsed, .ncollapsed = u->ncollapsed};
    struct view_tree t;
    uint64_t now = clock_mono_ns();

    int rc = view_merge(&u->hist, now, &mo, &t);

    /* APP_E_LIMIT: cut at the node cap but still drawable (t.truncated says so). */
    if ((rc < 0 && rc != APP_E_LIMIT) || t.nvisible == 0) {
        add_line(ROLE_DIM, 0, "no stacks yet");
        view_merge_fini(&t);
        return;
    }
    for (size_t i = 0; i < t.nvisible; i++) {
        const struct view_node *n = &t.nodes[t.visible[i]];
        char pre[256], ranks[96], fr[256], age[16];
        bool hit = u->search[0] && n->function && strstr(n->function, u->search);

        tree_prefix(u, &t, t.visible[i], pre, sizeof(pre));
        view_rankset_format_ex(n->ranks, n->nranks, ranks, sizeof(ranks),
                               u->utf8 ? "\xe2\x80\xa6" : "...");
        if (n->line > 0)
            snprintf(fr, sizeof(fr), "%s (%s:%d)", n->function, n->file, n->line);
        else
            snprintf(fr, sizeof(fr), "%s", n->function);
        draw_duration(age, sizeof(age), n->unchanged_min);
        add_line(hit                    ? ROLE_STATUS
                 : n->odd || n->end_odd ? ROLE_ODD
                                        : ROLE_NORMAL,
                 n->id, "%s%s%s  [%s] x%zu%s%s", pre, n->collapsed ? "+ " : "", fr, ranks,
                 n->nranks, n->nend ? "  unchanged " : "", n->nend ? age : "");
    }
    if (t.truncated)
        add_line(ROLE_DIM, 0, "(tree truncated)");
    view_merge_fini(&t);
}

static const struct hrank *focus_rank(const struct ui *u)
{
    int pid = u->drill_pid ? u->drill_pid : u->nrows ? u->rows[u->sel].pid : 0;

    for (size_t i = u->hist.nranks; i-- > 0;)
        if (u->hist.ranks[i].pid == pid)
            return &u->hist.ranks[i];
    return NULL;
}

static void lines_rank(struct ui *u)
{
    const struct hrank *r = focus_rank(u);

    if (!r) {
        add_line(ROLE_DIM, 0, "no rank selected");
        return;
    }
    add_line(ROLE_TITLE, 0, "rank %d  pid %d  %s  Python %s%s", r->rank, r->pid, r->device,
             r->python, r->exited ? "  (exited)" : "");
    for (size_t i = 0; i < r->nthreads; i++) {
        const struct hthread *t = &r->threads[i];
        uint32_t st = view_thread_stack(&u->hist, t);
        uint64_t id = t->ident ^ 0x5bd1e995u;
        char age[16];

        if (t->gone)
            continue;
        draw_duration(age, sizeof(age), view_since_change(t, clock_mono_ns()));
        add_line(ROLE_HEADER, id, "%s Thread %s (tid %d)%s  unchanged %s",
                 ui_is_collapsed(u, id) ? "+" : "-", t->name[0] ? t->name : "?", t->tid,
                 t->main ? " main" : "", age);
        if (ui_is_collapsed(u, id) || st == HSTACK_NONE)
            continue;
        for (uint32_t k = u->hist.stacks[st].nframes; k-- > 0;) {
            const struct hframe *f = &u->hist.frames[history_stack_frames(&u->hist, st)[k]];
            bool hit = u->search[0] && strstr(f->function, u->search);

            add_line(hit ? ROLE_STATUS : ROLE_NORMAL, id, "    %s (%s:%d)", f->function, f->file,
                     f->line);
        }
    }
}

static void lines_top(struct ui *u)
{
    struct view_top t;
    int pid = u->drill_pid;

    if (view_top(&u->hist, clock_mono_ns(), TOP_WINDOW_NS, pid, u->all_threads, &t) < 0) {
        add_line(ROLE_DIM, 0, "no samples");
        return;
    }
    add_line(ROLE_HEADER, 0, "%6s %6s  FUNCTION (FILE)   last 60 s, %s", "OWN%", "TOTAL%",
             pid ? "selected rank" : "all ranks");
    for (size_t i = 0; i < t.nrows; i++) {
        bool hit = u->search[0] && strstr(t.rows[i].function, u->search);

        add_line(hit ? ROLE_STATUS : ROLE_NORMAL, 0, "%6.1f %6.1f  %s (%s)", t.rows[i].own_pct,
                 t.rows[i].total_pct, t.rows[i].function, t.rows[i].file);
    }
    view_top_fini(&t);
}

static const char *thread_name(const struct ui *u, int pid, uint64_t ident)
{
    for (size_t i = 0; i < u->hist.nranks; i++)
        for (size_t k = 0; u->hist.ranks[i].pid == pid && k < u->hist.ranks[i].nthreads; k++)
            if (u->hist.ranks[i].threads[k].ident == ident)
                return u->hist.ranks[i].threads[k].name;
    return "?";
}

static void lines_gil(struct ui *u)
{
    add_line(ROLE_HEADER, 0, "%-6s %-8s %7s %10s %8s  holder share per thread", "RANK", "PID",
             "BUSY%", "SWITCH/s", "WAITERS");
    for (size_t i = 0; i < u->nrows; i++) {
        const struct engine_rank_live *l = live_of(u, u->rows[i].pid);
        char shares[400] = "";
        size_t at = 0;

        if (!l || l->gil_busy_pct < 0) {
            add_line(ROLE_DIM, 0, "%-6d %-8d %7s", u->rows[i].rank, u->rows[i].pid, "-");
            continue;
        }
        for (size_t k = 0; k < l->nshares && at < sizeof(shares) - 1; k++)
            at += (size_t)snprintf(shares + at, sizeof(shares) - at, "%s%s %.0f%%", k ? ", " : "",
                                   thread_name(u, l->pid, l->shares[k].ident), l->shares[k].pct);
        add_line(l->gil_busy_pct > 90 && l->gil_waiters >= 1 ? ROLE_BAR_WARN : ROLE_NORMAL, 0,
                 "%-6d %-8d %7.1f %10.1f %8.2f  %s", u->rows[i].rank, l->pid, l->gil_busy_pct,
                 l->gil_switches, l->gil_waiters, shares);
    }
}

/* Change of a series over the last `span` ns (newest minus the oldest point inside it). */
static double delta_over(const struct hseries *s, uint64_t span)
{
    size_t k;

    if (!s || s->n < 2)
        return NAN;
    for (k = s->n - 1; k > 0 && s->pts[s->n - 1].t - s->pts[k - 1].t <= span; k--)
        ;
    return s->pts[s->n - 1].v - s->pts[k].v;
}

static void lines_memory(struct ui *u)
{
    struct engine_growth g[16];
    int gpid = 0;
    size_t ng;

    add_line(ROLE_HEADER, 0, "%-6s %-8s %7s %8s %8s %7s %7s  RSS history", "RANK", "PID", "RSS",
             "dBASE", "d60s", "USS", "SWAP");
    for (size_t i = 0; i < u->nrows; i++) {
        const struct ui_row *r = &u->rows[i];
        const struct hseries *s = history_series(&u->hist, SERIES_RSS, r->pid);
        char rss[16], d[16], d60[16], uss[16], sw[16], spark[256] = "";
        double v[512];
        size_t n = 0;

        fmt_mib(rss, sizeof(rss), r->rss_mib, false);
        fmt_mib(d, sizeof(d), r->drss_mib, true);
        fmt_mib(d60, sizeof(d60), delta_over(s, 60000000000ull), true);
        fmt_mib(uss, sizeof(uss), series_last(&u->hist, SERIES_USS, r->pid), false);
        fmt_mib(sw, sizeof(sw), series_last(&u->hist, SERIES_SWAP, r->pid), false);
        for (size_t k = s && s->n > 512 ? s->n - 512 : 0; s && k < s->n; k++)
            v[n++] = s->pts[k].v;
        draw_sparkline(spark, sizeof(spark), v, n, 40, u->utf8);
        add_line(r->drss_mib > 100 ? ROLE_BAR_WARN : ROLE_NORMAL, 0,
                 "%-6d %-8d %7s %8s %8s %7s %7s  %s", r->rank, r->pid, rss, d, d60, uss, sw, spark);
    }
    ng = engine_mem_growth(u->e, &gpid, g, 16);
    add_line(ROLE_TITLE, 0, "mappings that grew most since the baseline (m) for pid %d:", gpid);
    if (!ng)
        add_line(ROLE_DIM, 0, "  (press m to take a baseline of the selected rank)");
    for (size_t i = 0; i < ng; i++) {
        char d[16];

        draw_delta(d, sizeof(d), g[i].delta_kb);
        add_line(ROLE_NORMAL, 0, "  %8s  %s", d, g[i].label);
    }
}

static void draw_lower(struct ui *u)
{
    const struct layout_rect *r = &g_lay.lower;
    static const char *tabs[] = {"", "1 Merged", "2 Rank", "3 Top", "4 GIL", "5 Memory"};
    int x = r->x, rows = r->h - 1;

    if (r->h <= 0)
        return;
    for (int v = 1; v <= 5; v++) {
        putf(u, r->y, x, 10, v == (int)u->view ? ROLE_SELECTED : ROLE_HEADER, true, " %s", tabs[v]);
        x += 10;
    }
    if (x < r->x + r->w)
        put(u, r->y, x, r->x + r->w - x, ROLE_HEADER, true, "");
    g_nlines = 0;
    if (u->view == VIEW_MERGED)
        lines_merged(u);
    else if (u->view == VIEW_RANK)
        lines_rank(u);
    else if (u->view == VIEW_TOP)
        lines_top(u);
    else if (u->view == VIEW_GIL)
        lines_gil(u);
    else
        lines_memory(u);
    g_lower_rows = g_nlines;
    for (int i = 0; i < g_nlines; i++)
        g_lower_node[i] = g_lines[i].node;
    if (u->lsel < u->lscroll)
        u->lscroll = u->lsel;
    if (u->lsel >= u->lscroll + rows)
        u->lscroll = u->lsel - rows + 1;
    for (int i = 0; i < rows && u->lscroll + i < g_nlines; i++) {
        const struct line *l = &g_lines[u->lscroll + i];
        bool cur = u->view == VIEW_RANK && u->lscroll + i == u->lsel;

        put(u, r->y + 1 + i, r->x, r->w, cur ? ROLE_SELECTED : l->role, cur, l->text);
    }
}

static void draw_keybar(struct ui *u)
{
    static const char *keys[][2] = {
        {"F1", "Help"}, {"/", "Search"}, {"\\", "Filter"}, {"F6", "Sort"}, {"Spc", "Tag"},
        {"p", "Pause"}, {"m", "Base"},   {"t", "Threads"}, {"+-", "Rate"}, {"e", "Export"},
    };
    const struct layout_rect *r = &g_lay.keybar;
    int x = r->x, end = r->x + r->w - 8; /* "F10Quit" always fits at the right */

    for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++) {
        int kw = (int)strlen(keys[i][0]), tw = (int)strlen(keys[i][1]);

        if (x + kw + tw > end)
            break;
        put(u, r->y, x, kw, ROLE_KEY, false, keys[i][0]);
        put(u, r->y, x + kw, tw, ROLE_KEYTEXT, false, keys[i][1]);
        x += kw + tw + 1;
    }
    put(u, r->y, end + 1, 3, ROLE_KEY, false, "F10");
    put(u, r->y, end + 4, 4, ROLE_KEYTEXT, false, "Quit");
}

static void draw_help(struct ui *u)
{
    static const char *lines[] = {
        "ranktop: a top for distributed PyTorch jobs",
        "",
        "Arrows, j/k, PgUp/PgDn, Home/End   move in the rank table (tree in the Rank view)",
        "Enter / Right      drill into the selected rank; in the Rank view fold a thread",
        "Esc / Backspace    back to the merged view, clear search and filter",
        "1-5 / Tab          views: Merged, Rank, Top, GIL, Memory",
        "/                  search frames          \\  filter ranks (rank, pid, frame)",
        "s / F6             sort: rank, CPU, RSS, stuck time, GIL",
        "Space              tag a rank             p  pause the display (sampling continues)",
        "m                  memory baseline (and mapping growth of the selected rank)",
        "t                  main thread / all threads",
        "+ / -              double / halve the sampling rate",
        "e                  export the history window as a Chrome trace to --export-dir",
        "E                  export, asking for the format (chrome, speedscope, collapsed)",
        "q / F10            quit                   ? / F1  this help",
        "",
        "HANG: every rank's stack unchanged for --hang-after seconds (and device utilisation",
        "flat where known); the banner names the frame most ranks wait in and the odd ranks.",
    };
    const struct layout_rect *r = &g_lay.help;

    for (int i = 0; i < r->h && i < (int)(sizeof(lines) / sizeof(*lines)); i++)
        put(u, r->y + i, r->x, r->w, i == 0 ? ROLE_TITLE : ROLE_NORMAL, true, lines[i]);
}

void ui_draw(struct ui *u)
{
    struct layout_in in = {.n_devices = (int)u->ndevs,
                           .n_ranks = (int)u->nrows,
                           .banner = u->hang.hang,
                           .help = u->help,
                           .view = (enum layout_view)u->view};
    int rows, cols;

    getmaxyx(stdscr, rows, cols);
    erase();
    if (layout_compute(rows, cols, &in, &g_lay) != 0) {
        put(u, g_lay.message.y, g_lay.message.x, g_lay.message.w, ROLE_BANNER, false,
            "terminal too small (need 60x16)");
        refresh();
        return;
    }
    draw_header(u);
    if (u->help) {
        draw_help(u);
    } else {
        draw_devices(u);
        draw_ranks(u);
        draw_lower(u);
    }
    draw_keybar(u);
    refresh();
}
