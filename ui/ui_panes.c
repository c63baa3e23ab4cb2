/* Drawing the monitor: header and banner, device meters, rank table, the six lower views,
 * key bar and help. Presentation only: every figure, filter, sort and delta comes from the
 * view models (src/views) over the engine view the UI holds (u->v: history, live figures,
 * mapping growth, errors, rate, native state), so drawing does no I/O, takes no lock and
 * never calls the engine. Layout comes from layout.c, text shaping from draw.c, keys from
 * keys.c. What a draw lays out (rectangles, lower-pane lines) is kept in struct ui for the
 * key handlers. UI thread only. */
#include "ui_priv.h"

#include "draw.h"
#include "ranktop/base/util.h"

#include <curses.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOP_WINDOW_NS 60000000000ull

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
    return u->nlines;
}

int ui_table_rows(const struct ui *u)
{
    return u->lay.rank_rows > 0 ? u->lay.rank_rows : 1;
}

uint64_t ui_lower_node(const struct ui *u)
{
    if (u->lsel < 0 || u->lsel >= u->nlines)
        return 0;
    return u->lines[u->lsel].node;
}

void ui_build_rows(struct ui *u)
{
    struct view_table_in in = {.filter = u->filter,
                               .sort = u->sort,
                               .base = &u->base,
                               .live = u->v->live,
                               .nlive = u->v->nlive,
                               .stuck_after_ns = (uint64_t)(u->o->hang_after_s * 1e9),
                               .waits = u->o->waits};

    /* A rank the user's baseline (m) does not cover counts from its first reading. */
    view_baseline_extend(&u->base, &u->v->hist);
    view_table_fini(&u->table);
    view_table(&u->v->hist, clock_mono_ns(), &in, &u->table);
    if (u->sel >= (int)u->table.n)
        u->sel = u->table.n ? (int)u->table.n - 1 : 0;
}

/* The rank-table column a sort orders by. */
static enum layout_col sort_col(enum view_sort s)
{
    return s == VIEW_SORT_CPU     ? LCOL_CPU
           : s == VIEW_SORT_RSS   ? LCOL_RSS
           : s == VIEW_SORT_SINCE ? LCOL_SINCE
           : s == VIEW_SORT_GIL   ? LCOL_GIL
                                  : LCOL_RANK;
}

/* "  hosts 3/4 lag 0.4s node-c down": other nodes at a glance; "" on one node. */
static void hosts_text(const struct ui *u, char *buf, size_t len)
{
    size_t up = 0, at;
    double lag = 0;
    const char *down = NULL;

    buf[0] = '\0';
    if (!u->v->nhosts)
        return;
    for (size_t i = 0; i < u->v->nhosts; i++) {
        const struct engine_host *h = &u->v->hosts[i];

        if (h->state == ENGINE_HOST_UP || h->state == ENGINE_HOST_LAGGING) {
            up++;
            lag = h->age_s > lag ? h->age_s : lag;
        } else if (!down && h->state == ENGINE_HOST_DOWN) {
            down = h->name;
        }
    }
    at = (size_t)snprintf(buf, len, "  hosts %zu/%zu lag %.1fs", up, u->v->nhosts, lag);
    if (down && at < len)
        snprintf(buf + at, len - at, "  %.40s down (6)", down);
}

/* The first host that is not up and says why (a down one before one still connecting), for
 * the header's last row: "ghost down: ssh exited with status 255: Permission denied
 * (publickey)."; false when every host is up or silent about it. */
static bool hosts_trouble(const struct ui *u, char *buf, size_t len)
{
    const struct engine_host *first = NULL;
    size_t more = 0;
    char others[40] = "";

    for (size_t i = 0; i < u->v->nhosts; i++) {
        const struct engine_host *h = &u->v->hosts[i];

        if (h->state == ENGINE_HOST_UP || h->state == ENGINE_HOST_LAGGING || !h->error[0])
            continue;
        more += first != NULL;
        if (!first || (h->state == ENGINE_HOST_DOWN && first->state != ENGINE_HOST_DOWN))
            first = h;
    }
    if (!first)
        return false;
    if (more)
        snprintf(others, sizeof(others), " (and %zu more: 6)", more);
    snprintf(buf, len, "%.40s %s%s: %s", first->name,
             first->state == ENGINE_HOST_DOWN ? "down" : "connecting", others, first->error);
    return true;
}

/* s without its frames' line numbers (each ":N)" becomes ")") under -F / --nolineno, in buf;
 * else s itself. For the texts the views format whole: the top frame, the HANG banner. */
static const char *no_lines(const struct ui *u, const char *s, char *buf, size_t len)
{
    size_t k = 0;

    if (!u->o->no_lines)
        return s;
    for (const char *p = s; *p && k + 1 < len; p++) {
        if (*p == ':') {
            const char *q = p + 1;

            while (*q >= '0' && *q <= '9')
                q++;
            if (q > p + 1 && *q == ')')
                p = q; /* the ')' is copied below */
        }
        buf[k++] = *p;
    }
    buf[k] = '\0';
    return buf;
}

static void draw_header(struct ui *u)
{
    const struct layout_rect *r = &u->lay.header;
    const struct history *h = &u->v->hist;
    const struct engine_stats *st = &u->v->stats;
    size_t live = 0;
    char prompt[200], hist[16], hosts[96], hz[32] = "--", flags[192], tags[32] = "", sort[32] = "";
    char reader[128] = "", trouble[400], banner[sizeof(u->hang.text)];
    double rate = u->v->rate_hz, got = view_rate_hz(&u->rate, view_rate_window(rate));

    for (size_t i = 0; i < h->nranks; i++)
        live += !h->ranks[i].exited;
    draw_bytes(hist, sizeof(hist), (int64_t)(st->history_bytes / 1024));
    hosts_text(u, hosts, sizeof(hosts));
    /* "--" until a full window of passes has been measured: no bogus first-frame rate. */
    if (!isnan(got))
        snprintf(hz, sizeof(hz), "%.1f", got);
    /* Pause, sort, filter and tags early in the line, where a narrow terminal still shows
     * them; the rank order is the default and goes without saying (its title is marked). */
    if (u->sort != VIEW_SORT_RANK)
        snprintf(sort, sizeof(sort), "  [sort %s]", layout_col_title(sort_col(u->sort), u->utf8));
    if (u->ntags)
        snprintf(tags, sizeof(tags), "  [%d tagged]", u->ntags);
    snprintf(flags, sizeof(flags), "%s%s%s%.40s%s%s%s%s%s", u->paused ? "  [PAUSED]" : "", sort,
             u->filter[0] ? "  [filter '" : "", u->filter, u->filter[0] ? "']" : "", tags,
             u->all_threads ? "  [all threads]" : "", u->oncpu ? "  [on-CPU]" : "",
             u->o->gil_only ? "  [GIL only]" : "");
    if (st->reader_why) /* the memory reader, when not process_vm_readv */
        snprintf(reader, sizeof(reader), "  reader %s (%s)", st->reader, st->reader_why);
    putf(u, r->y, r->x, r->w, ROLE_TITLE, true,
         "ranktop  %s  %s  ranks %zu/%zu%s  %s/%.4g Hz%s  lag %.1f ms  errors %.2f%%  torn lost "
         "%.2f%%  hist %s%s",
         h->host, u->o->title ? u->o->title : "", live, h->nranks, hosts, hz, rate, flags,
         st->lag_ms,
         st->stacks + st->errors ? 100.0 * (double)st->errors / (double)(st->stacks + st->errors)
                                 : 0.0,
         st->stacks + st->lost ? 100.0 * (double)st->lost / (double)(st->stacks + st->lost) : 0.0,
         hist, reader);
    if (u->lay.banner_lines > 0)
        put(u, r->y + 1, r->x, r->w, ROLE_BANNER, true,
            no_lines(u, u->hang.text, banner, sizeof(banner)));
    if (u->input != INPUT_NONE) {
        snprintf(prompt, sizeof(prompt), "%s%s_%s",
                 u->input == INPUT_SEARCH ? "search: "
                 : u->input == INPUT_STOP_JOB
                     ? "quit: stop the job too (SIGTERM, then SIGKILL)? y)es n)o, leave it "
                       "running  Esc) keep watching"
                 : u->input == INPUT_FILTER
                     ? "filter ranks: "
                     : "export format: c)hrome s)peedscope f)olded g)flamegraph p)erfetto",
                 u->input == INPUT_FORMAT || u->input == INPUT_STOP_JOB ? "" : u->edit,
                 u->input == INPUT_SEARCH && u->search_miss ? "   (no match)"
                 : u->input == INPUT_SEARCH && u->search[0] ? "   (F3: next, Shift-F3: previous)"
                                                            : "");
        put(u, r->y + r->h - 1, r->x, r->w, ROLE_STATUS, true, prompt);
    } else if (u->status[0] && clock_mono_ns() < u->status_until) {
        put(u, r->y + r->h - 1, r->x, r->w, ROLE_STATUS, true, u->status);
    } else if (u->search[0] || u->filter[0]) {
        putf(u, r->y + r->h - 1, r->x, r->w, ROLE_DIM, true, "search '%s'%s  filter '%s'",
             u->search, u->search_miss ? " (no match)" : "", u->filter);
    } else if (hosts_trouble(u, trouble, sizeof(trouble))) {
        put(u, r->y + r->h - 1, r->x, r->w, ROLE_BAR_WARN, true, trouble);
    }
}

const char *ui_file(const struct ui *u, const char *file)
{
    return u->o->full_filenames || !file ? file : path_short(file);
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
    if (d->host[0]) { /* another node's: the end of its name tells hosts like gpu01, gpu02 apart */
        size_t hl = strcspn(d->host, ".");

        snprintf(name, sizeof(name), "%.*s/%d", (int)(hl > 4 ? 4 : hl),
                 d->host + (hl > 4 ? hl - 4 : 0), d->index);
    } else if (d->kind == SMI_KIND_NPU)
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
    const struct layout_rect *r = &u->lay.devices;

    if (r->h <= 0)
        return;
    for (int i = 0; i < u->lay.dev_shown && i < (int)u->v->ndevs; i++) {
        int row = i / u->lay.dev_per_row, col = i % u->lay.dev_per_row;

        device_cell(u, r->y + row, r->x + col * (u->lay.dev_cell_w + 1), u->lay.dev_cell_w,
                    &u->v->devs[i]);
    }
    if (u->lay.dev_more > 0) {
        int i = u->lay.dev_shown, row = i / u->lay.dev_per_row, col = i % u->lay.dev_per_row;

        putf(u, r->y + row, r->x + col * (u->lay.dev_cell_w + 1), u->lay.dev_cell_w, ROLE_DIM,
             false, "+%d more", u->lay.dev_more);
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

/* A rank number for a column beside the pid: "-" when unknown (the pid is next to it). */
static void rank_text(char *buf, size_t len, int rank)
{
    if (rank >= 0)
        snprintf(buf, len, "%d", rank);
    else
        snprintf(buf, len, "-");
}

/* "29", or "97 tokenizer" when another thread than the main one holds the GIL most. */
static void gil_cell(char *buf, size_t len, const struct view_table_row *r)
{
    char pct[16];

    if (isnan(r->gil) || r->gil < 0) {
        snprintf(buf, len, "-");
        return;
    }
    draw_pct(pct, sizeof(pct), r->gil);
    if (r->gil_holder[0]) /* whole percents: room for the name */
        snprintf(buf, len, "%.0f %s", r->gil, r->gil_holder);
    else
        snprintf(buf, len, "%s", pct);
}

static void rank_row(struct ui *u, const struct rank_cols *c, int y, int x0, int w,
                     const struct view_table_row *r, bool selected)
{
    const struct hrank *hr = &u->v->hist.ranks[r->hrank];
    enum theme_role role = selected               ? ROLE_SELECTED
                           : is_odd(u, r->pid)    ? ROLE_ODD
                           : r->exited            ? ROLE_DIM
                           : is_tagged(u, r->pid) ? ROLE_TAGGED
                                                  : ROLE_NORMAL;
    char b[64], gil[96], top[sizeof(r->top)];

    put(u, y, x0, w, role, true, "");
    /* An unknown rank shows its pid's place as "-": never a pid where a rank belongs. */
    snprintf(b, sizeof(b), "%s%d", is_tagged(u, r->pid) ? "*" : "", r->rank);
    cell(u, c, y, x0, LCOL_RANK, role, r->rank >= 0 ? b : is_tagged(u, r->pid) ? "*-" : "-");
    snprintf(b, sizeof(b), "%d", history_key_pid(r->pid));
    cell(u, c, y, x0, LCOL_PID, role, b);
    cell(u, c, y, x0, LCOL_HOST, role, hr->host);
    cell(u, c, y, x0, LCOL_DEVICE, role, hr->device[0] ? hr->device : "-");
    cell(u, c, y, x0, LCOL_STATE, role, r->state);
    cell(u, c, y, x0, LCOL_WAIT, role, r->wait != WAIT_UNKNOWN ? wait_kind_name(r->wait) : "-");
    draw_pct(b, sizeof(b), r->cpu);
    cell(u, c, y, x0, LCOL_CPU, role, isnan(r->cpu) ? "-" : b);
    fmt_mib(b, sizeof(b), r->rss_mib, false);
    cell(u, c, y, x0, LCOL_RSS, role, b);
    fmt_mib(b, sizeof(b), r->drss_mib, true);
    cell(u, c, y, x0, LCOL_DRSS, role, b);
    fmt_mib(b, sizeof(b), r->dev_mem_mb >= 0 ? (double)r->dev_mem_mb : NAN, false);
    cell(u, c, y, x0, LCOL_DMEM, role, b);
    gil_cell(gil, sizeof(gil), r);
    cell(u, c, y, x0, LCOL_GIL, role, gil);
    draw_pct(b, sizeof(b), r->gc);
    cell(u, c, y, x0, LCOL_GC, role, b); /* "-" when unknown */
    cell(u, c, y, x0, LCOL_FRAME, role, r->top[0] ? no_lines(u, r->top, top, sizeof(top)) : "-");
    draw_duration(b, sizeof(b), (uint64_t)(r->since_s * 1e9));
    cell(u, c, y, x0, LCOL_SINCE, role, b);
    attrset(A_NORMAL);
}

/* Processes named that cannot be read get a line each under the table, where there is room:
 * a rank must not vanish without a word. */
static void draw_unreadable(struct ui *u, int y, int x, int w, int room)
{
    const struct engine_unread *un = u->v->unread;

    for (size_t i = 0; i < u->v->nunread && i < 8 && (int)i < room; i++)
        putf(u, y + (int)i, x, w, ROLE_DIM, true, " pid %d not sampled: %s", un[i].pid, un[i].why);
}

static void draw_ranks(struct ui *u)
{
    const struct layout_rect *r = &u->lay.ranks;
    struct rank_cols c;

    if (r->h <= 0)
        return;
    layout_rank_columns(r->w, &c);
    put(u, r->y, r->x, r->w, ROLE_HEADER, true, "");
    /* The column the table is sorted by has its title highlighted, as in htop. */
    for (int k = 0; k < LCOL_COUNT; k++)
        cell(u, &c, r->y, r->x, (enum layout_col)k,
             k == (int)sort_col(u->sort) ? ROLE_SORTED : ROLE_HEADER,
             layout_col_title((enum layout_col)k, u->utf8));
    u->table_y = r->y + 1;
    u->table_h = u->lay.rank_rows;
    if (u->table.n == 0) {
        const char *why = u->v->last_errors;

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
    if (u->sel >= u->scroll + u->lay.rank_rows)
        u->scroll = u->sel - u->lay.rank_rows + 1;
    for (int i = 0; i < u->lay.rank_rows && u->scroll + i < (int)u->table.n; i++)
        rank_row(u, &c, r->y + 1 + i, r->x, r->w, &u->table.rows[u->scroll + i],
                 u->scroll + i == u->sel);
    draw_unreadable(u, r->y + 1 + ((int)u->table.n - u->scroll), r->x, r->w,
                    u->lay.rank_rows - ((int)u->table.n - u->scroll));
}

/* The lower pane is built as lines first (text, role, node id), then drawn with scrolling;
 * the lines stay in u->lines so the keys can find the node under the cursor. */
static void add_line(struct ui *u, enum theme_role role, uint64_t node, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void add_line(struct ui *u, enum theme_role role, uint64_t node, const char *fmt, ...)
{
    struct ui_line *l;
    va_list ap;

    if (u->nlines >= UI_MAX_LINES)
        return;
    if (!u->lines) /* allocated once, at the cap: the pane never keeps more */
        u->lines = x_calloc(UI_MAX_LINES, sizeof(*u->lines));
    l = &u->lines[u->nlines++];
    va_start(ap, fmt);
    vsnprintf(l->text, sizeof(l->text), fmt, ap);
    va_end(ap);
    /* Titles, column headers and notes are not searched; a Rank view's thread line is. */
    l->hit = u->search[0] && role != ROLE_TITLE && role != ROLE_DIM &&
             (role != ROLE_HEADER || node) && strcasestr(l->text, u->search);
    l->role = l->hit ? ROLE_STATUS : role;
    l->node = node;
    l->frame = false;
    l->tdepth = 0;
}

/* A line shown shortened for the pane's width (shown), searched over its whole text (full),
 * so that a search finds a function whose name the line had to cut. */
static void add_line_fitted(struct ui *u, enum theme_role role, uint64_t node, const char *shown,
                            const char *full)
{
    int before = u->nlines;

    add_line(u, role, node, "%s", full);
    if (u->nlines > before) /* not dropped at the cap */
        snprintf(u->lines[before].text, sizeof(u->lines[before].text), "%s", shown);
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

/* The ranks the merged tree shows: the table's (a filter narrows it), and of those only the
 * tagged ones when any rank is tagged; NULL with *n 0 for every rank. */
static int *table_pids(const struct ui *u, size_t *n)
{
    int *v;

    *n = 0;
    if (!u->filter[0] && !u->ntags)
        return NULL;
    v = x_calloc(u->table.n ? u->table.n : 1, sizeof(*v));
    for (size_t i = 0; i < u->table.n; i++)
        if (!u->ntags || is_tagged(u, u->table.rows[i].pid))
            v[(*n)++] = u->table.rows[i].pid;
    return v;
}

/* Bytes a node's rank set may take: a third of the pane (at least 16), so that a long set is
 * cut with its "…(+N)" count before it crowds out the frame. */
static size_t rankset_len(const struct ui *u)
{
    int w = u->lay.lower.w / 3;

    return (size_t)(w < 16 ? 16 : w > 95 ? 95 : w) + 1;
}

static void lines_merged(struct ui *u)
{
    struct view_merge_opts mo = {
        .all_threads = u->all_threads, .collapsed = u->collapsed, .ncollapsed = u->ncollapsed};
    struct view_tree t;
    uint64_t now = clock_mono_ns();
    size_t npids;
    int *pids = table_pids(u, &npids), rc;

    /* The filter and the tags narrow the tree to the ranks they leave. */
    mo.pids = pids;
    mo.npids = npids;
    rc = view_merge(&u->v->hist, now, &mo, &t);
    free(pids);

    /* APP_E_LIMIT: cut at the node cap but still drawable (t.truncated says so). */
    if ((rc < 0 && rc != APP_E_LIMIT) || t.nvisible == 0) {
        add_line(u, ROLE_DIM, 0, "no stacks yet");
        view_merge_fini(&t);
        return;
    }
    for (size_t i = 0; i < t.nvisible; i++) {
        const struct view_node *n = &t.nodes[t.visible[i]];
        char pre[256], set[96], ranks[112], fn[256], where[256] = "", age[16] = "";
        char text[512], full[768];

        tree_prefix(u, &t, t.visible[i], pre, sizeof(pre));
        if (n->collapsed)
            snprintf(pre + strlen(pre), sizeof(pre) - strlen(pre), "+ ");
        view_rankset_format_ex(n->ranks, n->nranks, set, rankset_len(u),
                               u->utf8 ? "\xe2\x80\xa6" : "...");
        snprintf(ranks, sizeof(ranks), "[%s] x%zu", set, n->nranks);
        snprintf(fn, sizeof(fn), "%s%s", n->kind == VIEW_NODE_THREAD ? "Thread " : "", n->function);
        if (n->kind != VIEW_NODE_THREAD && n->line > 0 && !u->o->no_lines)
            snprintf(where, sizeof(where), "(%s:%d)", ui_file(u, n->file), n->line);
        else if (n->kind != VIEW_NODE_THREAD && n->line > 0)
            snprintf(where, sizeof(where), "(%s)", ui_file(u, n->file));
        if (n->nend)
            draw_duration(age, sizeof(age), n->unchanged_min);
        /* At 80 columns the rank set and count stay; the function name, its location and
         * the age give way (draw_tree_line). */
        draw_tree_line(text, sizeof(text), u->lay.lower.w,
                       &(struct draw_tree_line){pre, fn, where, ranks, age}, u->utf8);
        snprintf(full, sizeof(full), "%s%s %s  %s", pre, fn, where, ranks);
        add_line_fitted(u, n->odd || n->end_odd ? ROLE_ODD : ROLE_NORMAL, n->id, text, full);
        if (u->nlines > 0 && u->lines[u->nlines - 1].node == n->id)
            u->lines[u->nlines - 1].tdepth = n->depth;
    }
    if (t.truncated)
        add_line(u, ROLE_DIM, 0, "(tree truncated)");
    view_merge_fini(&t);
}

/* Under the Rank view's title: whether its samples carry native frames, or why they cannot. */
static void rank_native_note(struct ui *u, int pid)
{
    const char *why = engine_view_native_error(u->v, pid);

    if (!engine_view_native_on(u->v, pid))
        return;
    if (why)
        add_line(u, ROLE_STATUS, 0, "native frames: %s", why);
    else
        add_line(u, ROLE_DIM, 0,
                 "native frames on: %d samples/s, native frames marked [native] (n: off)",
                 ENGINE_NATIVE_HZ);
}

/* The rank the Rank view shows: the one drilled into, else the selected row's. */
static int rank_pid(const struct ui *u)
{
    return u->drill_pid ? u->drill_pid : u->table.n ? u->table.rows[u->sel].pid : 0;
}

/* A thread's or task's stack under its header line, innermost frame first; a thread's frame
 * lines (th not NULL) say which frame they are, for Enter (the locals pane). */
static void lines_stack(struct ui *u, uint64_t id, uint32_t stack, int indent,
                        const struct hthread *th, int pid)
{
    if (stack == HSTACK_NONE)
        return;
    for (uint32_t k = u->v->hist.stacks[stack].nframes; k-- > 0;) {
        const struct hframe *f = &u->v->hist.frames[history_stack_frames(&u->v->hist, stack)[k]];

        if (f->native)
            add_line(u, ROLE_NORMAL, id, "%*s%s (%s) [native]", indent, "", f->function,
                     ui_file(u, f->file));
        else if (u->o->no_lines) /* -F, --nolineno */
            add_line(u, ROLE_NORMAL, id, "%*s%s (%s)", indent, "", f->function,
                     ui_file(u, f->file));
        else
            add_line(u, ROLE_NORMAL, id, "%*s%s (%s:%d)", indent, "", f->function,
                     ui_file(u, f->file), f->line);
        if (th && !f->native && u->nlines > 0 && u->lines[u->nlines - 1].node == id) {
            struct ui_line *l = &u->lines[u->nlines - 1];
            l->frame = true, l->fpid = pid, l->fworker = th->worker, l->fident = th->ident;
            l->fstack = stack, l->fk = k;
        }
    }
}

static void lines_rank(struct ui *u)
{
    int pid = rank_pid(u);
    struct view_rank v;

    view_rank_tasks(&u->v->hist, pid, u->all_threads, u->tasks, clock_mono_ns(), &v);
    if (!v.r) {
        add_line(u, ROLE_DIM, 0, "no rank selected");
        return;
    }
    add_line(u, ROLE_TITLE, 0, "%s", v.title);
    rank_native_note(u, pid);
    if (u->tasks)
        add_line(u, ROLE_DIM, 0, "asyncio tasks on: read %d times a second (a: off)",
                 ENGINE_ASYNC_HZ);
    for (size_t i = 0; i < v.n; i++) {
        const struct view_rank_thread *t = &v.threads[i];
        /* A forked worker's main thread keeps its parent's ident: the tid tells them apart. */
        uint64_t id = (t->t->ident ^ 0x5bd1e995u) + ((uint64_t)(unsigned)t->t->tid << 40);
        char age[16], where[32] = "";

        draw_duration(age, sizeof(age), t->since);
        if (t->task) {
            add_line(u, ROLE_HEADER, id, "%s   Task \"%s\"  unchanged %s",
                     ui_is_collapsed(u, id) ? "+" : "-", t->name, age);
            lines_stack(u, id, t->stack, 8, NULL, pid);
            continue;
        }
        if (t->worker)
            snprintf(where, sizeof(where), "Worker pid %d ", t->worker);
        add_line(u, ROLE_HEADER, id, "%s %sThread %s (tid %d)%s  unchanged %s",
                 ui_is_collapsed(u, id) ? "+" : "-", where, t->name, t->t->tid,
                 t->t->main ? " main" : "", age);
        if (!ui_is_collapsed(u, id))
            lines_stack(u, id, t->stack, 4, t->t, pid);
    }
    view_rank_fini(&v);
}

/* Top functions of pid's rank (0: every rank); flat tells the Merged or Rank view's flat
 * form (F5) from the Top view. */
static void lines_top(struct ui *u, int pid, bool flat)
{
    struct view_top t;

    if (view_top(&u->v->hist, clock_mono_ns(), TOP_WINDOW_NS, pid, u->all_threads, &t) < 0) {
        add_line(u, ROLE_DIM, 0, "no samples");
        return;
    }
    add_line(u, ROLE_HEADER, 0, "%6s %6s  FUNCTION (FILE)   last 60 s, %s%s", "OWN%", "TOTAL%",
             pid ? "selected rank" : "all ranks", flat ? ", flat (F5: tree)" : "");
    for (size_t i = 0; i < t.nrows; i++)
        add_line(u, ROLE_NORMAL, 0, "%6.1f %6.1f  %s (%s)", t.rows[i].own_pct, t.rows[i].total_pct,
                 t.rows[i].function, ui_file(u, t.rows[i].file));
    view_top_fini(&t);
}

static void lines_gil(struct ui *u)
{
    struct view_gil g;

    view_gil(&u->v->hist, &u->table, u->v->live, u->v->nlive, &g);
    /* WAITING: threads waiting for the GIL, averaged over the last second. */
    add_line(u, ROLE_HEADER, 0, "%-6s %-8s %7s %10s %12s %6s  holder share per thread", "RANK",
             "PID", "BUSY%", "SWITCH/s", "WAITING thr", "GC%");
    for (size_t i = 0; i < g.n; i++) {
        const struct view_gil_row *r = &g.rows[i];
        char rank[16];

        rank_text(rank, sizeof(rank), r->rank);
        if (!r->known)
            add_line(u, ROLE_DIM, 0, "%-6s %-8d %7s", rank, history_key_pid(r->pid), "-");
        else if (r->gc_pct >= 0)
            add_line(u, r->warn ? ROLE_BAR_WARN : ROLE_NORMAL, 0,
                     "%-6s %-8d %7.1f %10.1f %12.2f %6.1f  %s", rank, history_key_pid(r->pid),
                     r->busy_pct, r->switches_per_s, r->waiters, r->gc_pct, r->shares);
        else
            add_line(u, r->warn ? ROLE_BAR_WARN : ROLE_NORMAL, 0,
                     "%-6s %-8d %7.1f %10.1f %12.2f %6s  %s", rank, history_key_pid(r->pid),
                     r->busy_pct, r->switches_per_s, r->waiters, "-", r->shares);
    }
    view_gil_fini(&g);
}

/* The optional memory columns c shows, formatted as the header or a row gives them. */
static void mem_optional(char *buf, size_t len, const struct mem_cols *c, const char *d60,
                         const char *uss, const char *swap)
{
    snprintf(buf, len, "%s%*s%s%*s%s%*s", c->d60 ? " " : "", c->d60 ? 8 : 0, c->d60 ? d60 : "",
             c->uss ? " " : "", c->uss ? 7 : 0, c->uss ? uss : "", c->swap ? " " : "",
             c->swap ? 7 : 0, c->swap ? swap : "");
}

/* RSS, ΔRSS since the baseline and the last minute, USS, swap and a sparkline per rank. At
 * 80 columns the optional columns give way (layout_memory_columns) so that the sparkline
 * keeps its newest values. */
static void lines_memory(struct ui *u)
{
    struct view_memory m;
    struct mem_cols c;
    char opt[64];

    layout_memory_columns(u->lay.lower.w, &c);
    view_memory(&u->v->hist, &u->table, &m);
    mem_optional(opt, sizeof(opt), &c, "d60s", "USS", "SWAP");
    add_line(u, ROLE_HEADER, 0, "%-6s %-8s %7s %8s%s  RSS history", "RANK", "PID", "RSS", "dBASE",
             opt);
    for (size_t i = 0; i < m.n; i++) {
        const struct view_mem_row *r = &m.rows[i];
        char rss[16], d[16], d60[16], uss[16], sw[16], spark[256] = "", rank[16];

        fmt_mib(rss, sizeof(rss), r->rss_mib, false);
        fmt_mib(d, sizeof(d), r->drss_mib, true);
        fmt_mib(d60, sizeof(d60), r->d60_mib, true);
        fmt_mib(uss, sizeof(uss), r->uss_mib, false);
        fmt_mib(sw, sizeof(sw), r->swap_mib, false);
        draw_sparkline(spark, sizeof(spark), r->spark, r->nspark, c.spark, u->utf8);
        rank_text(rank, sizeof(rank), r->rank);
        mem_optional(opt, sizeof(opt), &c, d60, uss, sw);
        add_line(u, r->warn ? ROLE_BAR_WARN : ROLE_NORMAL, 0, "%-6s %-8d %7s %8s%s  %s", rank,
                 r->pid, rss, d, opt, spark);
    }
    view_memory_fini(&m);
    if (u->v->growth_pid)
        add_line(u, ROLE_TITLE, 0,
                 "mappings that grew most since the baseline (m) for pid %d:", u->v->growth_pid);
    else
        add_line(u, ROLE_TITLE, 0,
                 "mappings that grew most since the baseline (m): no baseline yet");
    if (!u->v->ngrowth)
        add_line(u, ROLE_DIM, 0, "  (press m to take a baseline of the selected rank)");
    for (size_t i = 0; i < u->v->ngrowth; i++) {
        char d[16];

        draw_delta(d, sizeof(d), u->v->growth[i].delta_kb);
        add_line(u, ROLE_NORMAL, 0, "  %8s  %s", d, u->v->growth[i].label);
    }
}

static const char *const host_states[] = {
    [ENGINE_HOST_CONNECTING] = "connecting",
    [ENGINE_HOST_UP] = "up",
    [ENGINE_HOST_LAGGING] = "lagging",
    [ENGINE_HOST_DOWN] = "down",
};

/* A host as the Hosts view names it: a pod with its node, "w-0 (node-a)", else the host. */
static void host_label(const struct engine_host *h, char *buf, size_t len)
{
    if (h->node[0])
        snprintf(buf, len, "%s (%s)", h->name, h->node);
    else
        snprintf(buf, len, "%s", h->agent_host[0] ? h->agent_host : h->name);
}

/* The Hosts view: each other node's agent link, and why it is not up. */
static void lines_hosts(struct ui *u)
{
    char label[160];
    int w = 20;

    if (!u->v->nhosts) {
        add_line(u, ROLE_DIM, 0,
                 "this node only (--hosts, --hostfile or a Slurm allocation "
                 "name other nodes)");
        return;
    }
    /* The HOST column fits the longest name, 20 to 40 columns: a pod and its node. */
    for (size_t i = 0; i < u->v->nhosts; i++) {
        host_label(&u->v->hosts[i], label, sizeof(label));
        w = (int)strlen(label) > w ? (int)strlen(label) : w;
    }
    w = w > 40 ? 40 : w;
    add_line(u, ROLE_HEADER, 0, "%-*s %-10s %-8s %5s %7s %9s %9s %13s  %s", w, "HOST", "STATE",
             "AGENT", "RANKS", "AGE", "BYTES/s", "CLOCK ms", "SHIPPED", "LAST ERROR");
    for (size_t i = 0; i < u->v->nhosts; i++) {
        const struct engine_host *h = &u->v->hosts[i];
        char age[16] = "-", off[24] = "-", ship[32] = "-";
        bool bad = h->state == ENGINE_HOST_DOWN || h->state == ENGINE_HOST_LAGGING;

        if (h->age_s >= 0)
            snprintf(age, sizeof(age), "%.1fs", h->age_s);
        if (h->offset_err_ms >= 0)
            snprintf(off, sizeof(off), "%+.1f~%.1f", h->offset_ms, h->offset_err_ms);
        if (h->ship_bytes) /* --ship: the binary's size and how long sending it took */
            snprintf(ship, sizeof(ship), "%.1fMB %.2fs", (double)h->ship_bytes / 1e6, h->ship_s);
        host_label(h, label, sizeof(label));
        add_line(u, bad ? ROLE_BAR_WARN : ROLE_NORMAL, 0,
                 "%-*.*s %-10s %-8.8s %5d %7s %9.0f %9s %13.13s  %s", w, w, label,
                 host_states[h->state], h->version[0] ? h->version : "-", h->ranks, age,
                 h->bytes_per_s, off, ship, h->error);
    }
}

/* Makes the pending search move over the lines just built: from the cursor's line (itself
 * included for SEARCH_HERE, so typing more keeps a match that still matches) to the next or
 * previous matching line, wrapping around. The lines are rebuilt every frame from live
 * stacks, and a function the ranks only pass through (a collective between steps) is there
 * in one frame and gone in the next; so a search that finds nothing stays pending, goes to
 * the first match that appears, and "no match" is told only while no line matches. */
static void search_jump(struct ui *u)
{
    int n = u->nlines, dir = u->jump == SEARCH_PREV ? -1 : 1;
    int from = u->lsel < n ? u->lsel : 0;

    if (!u->search[0])
        return;
    if (u->jump == SEARCH_STAY) {
        for (int i = 0; i < n; i++)
            if (u->lines[i].hit) {
                u->search_miss = false;
                return;
            }
    } else {
        for (int k = u->jump == SEARCH_HERE ? 0 : 1; n > 0 && k <= n; k++) {
            int i = ((from + dir * k) % n + n) % n;

            if (u->lines[i].hit) {
                u->lsel = i;
                u->jump = SEARCH_STAY;
                u->search_miss = false;
                return;
            }
        }
    }
    u->jump = SEARCH_HERE;
    u->search_miss = true;
}

static void draw_lower(struct ui *u)
{
    const struct layout_rect *r = &u->lay.lower;
    static const char *tabs[] = {"", "1 Merged", "2 Rank", "3 Top", "4 GIL", "5 Memory", "6 Hosts"};
    int x = r->x, rows = r->h - 1, at;

    if (r->h <= 0)
        return;
    for (int v = 1; v <= UI_VIEWS; v++) {
        putf(u, r->y, x, 10, v == (int)u->view ? ROLE_SELECTED : ROLE_HEADER, true, " %s", tabs[v]);
        x += 10;
    }
    /* Which pane the Merged view's arrows move, after the tabs (w switches). */
    if (x < r->x + r->w)
        put(u, r->y, x, r->x + r->w - x, ROLE_HEADER, true,
            u->view != VIEW_MERGED || u->flat ? ""
            : u->tree_focus                   ? "  arrows: tree (w: ranks)"
                                              : "  arrows: ranks (w: tree)");
    u->nlines = 0;
    if (u->loc_on)
        for (int i = 0; i < u->nloc; i++)
            add_line(u, u->loc[i].role, 0, "%s", u->loc[i].text);
    else if (u->view == VIEW_MERGED && u->flat)
        lines_top(u, 0, true);
    else if (u->view == VIEW_MERGED)
        lines_merged(u);
    else if (u->view == VIEW_RANK && u->flat)
        lines_top(u, rank_pid(u), true);
    else if (u->view == VIEW_RANK)
        lines_rank(u);
    else if (u->view == VIEW_TOP)
        lines_top(u, u->drill_pid, false);
    else if (u->view == VIEW_GIL)
        lines_gil(u);
    else if (u->view == VIEW_HOSTS)
        lines_hosts(u);
    else
        lines_memory(u);
    ui_tree_restore(u); /* the Merged view's cursor stays on its node */
    at = u->lsel;
    search_jump(u);
    if (u->lsel != at)
        ui_tree_anchor(u);
    if (u->lsel < u->lscroll)
        u->lscroll = u->lsel;
    if (u->lsel >= u->lscroll + rows)
        u->lscroll = u->lsel - rows + 1;
    for (int i = 0; i < rows && u->lscroll + i < u->nlines; i++) {
        const struct ui_line *l = &u->lines[u->lscroll + i];
        /* The cursor: the Rank view's or the Merged tree's (w), or the search match it moved
         * to in any view. */
        bool cur = u->lscroll + i == u->lsel && (ui_tree_owns_arrows(u) || l->hit);

        put(u, r->y + 1 + i, r->x, r->w, cur ? ROLE_SELECTED : l->role, cur, l->text);
    }
}

static void keybar_item(struct ui *u, int y, int x, const struct ui_key *k)
{
    int kw = (int)strlen(k->bar_key);

    put(u, y, x, kw, ROLE_KEY, false, k->bar_key);
    put(u, y, x + kw, (int)strlen(k->bar_text), ROLE_KEYTEXT, false, k->bar_text);
}

/* The key table's entry shown at bar position pos; NULL when none is. */
static const struct ui_key *bar_at(const struct ui_key *keys, size_t n, int pos)
{
    for (size_t i = 0; i < n; i++)
        if (keys[i].bar_pos == pos)
            return &keys[i];
    return NULL;
}

/* The key bar, from the key table in bar_pos order, as many as fit; the UI_BAR_RIGHT key
 * (Quit) is always drawn at the right end, whatever the width. */
static void draw_keybar(struct ui *u)
{
    const struct layout_rect *r = &u->lay.keybar;
    int x = r->x, end = r->x + r->w - 8; /* "F10Quit" always fits at the right */
    size_t n;
    const struct ui_key *keys = ui_keys(&n), *k;

    for (int pos = 1; (k = bar_at(keys, n, pos)) != NULL; pos++) {
        int w = (int)(strlen(k->bar_key) + strlen(k->bar_text));

        if (x + w > end)
            break;
        keybar_item(u, r->y, x, k);
        x += w + 1;
    }
    k = bar_at(keys, n, UI_BAR_RIGHT);
    if (k)
        keybar_item(u, r->y, end + 1, k);
}

static const char *const help_intro[] = {"ranktop: a top for distributed PyTorch jobs", ""};
static const char *const help_outro[] = {
    "",
    "q, Esc or F1 close this help.",
    "HANG: every rank's stack unchanged for --hang-after seconds (and device utilisation",
    "flat where known); the banner names the frame most ranks wait in and the odd ranks.",
};

/* The help screen: a title, the key table's lines, and what a HANG means. */
static void draw_help(struct ui *u)
{
    char lines[64][UI_HELP_W];
    int n = 0, nkeys;
    const struct layout_rect *r = &u->lay.help;

    for (size_t i = 0; i < sizeof(help_intro) / sizeof(*help_intro); i++)
        snprintf(lines[n++], UI_HELP_W, "%s", help_intro[i]);
    nkeys = ui_keys_help(lines + n, 64 - 8);
    n += nkeys;
    for (size_t i = 0; i < sizeof(help_outro) / sizeof(*help_outro); i++)
        snprintf(lines[n++], UI_HELP_W, "%s", help_outro[i]);
    for (int i = 0; i < r->h && i < n; i++)
        put(u, r->y + i, r->x, r->w, i == 0 ? ROLE_TITLE : ROLE_NORMAL, true, lines[i]);
}

void ui_draw(struct ui *u)
{
    size_t unread = u->v->nunread;
    /* Rows for the ranks, and for a line each about processes that cannot be read. */
    struct layout_in in = {.n_devices = (int)u->v->ndevs,
                           .n_ranks = (int)u->table.n + (int)(unread < 8 ? unread : 8),
                           .banner = u->hang.hang,
                           .help = u->help,
                           .view = (enum layout_view)u->view};
    int rows, cols;

    getmaxyx(stdscr, rows, cols);
    erase();
    if (layout_compute(rows, cols, &in, &u->lay) != 0) {
        put(u, u->lay.message.y, u->lay.message.x, u->lay.message.w, ROLE_BANNER, false,
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
