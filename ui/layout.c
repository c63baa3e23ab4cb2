/* Layout arithmetic for the live monitor: where each pane goes for a given terminal size.
 *
 * Owns nothing: every function maps its arguments to its output and keeps no state. The screen
 * is tiled top to bottom as header, device meters, rank table, lower pane and key bar, each
 * pane taking the full width; the help overlay, while open, takes the rows of the middle three.
 * Invariants (checked by tests/unit/check_layout.c over every size from 60x16 to 250x80): the
 * rectangles never overlap and lie inside the screen, the key bar is the last row, each shown
 * pane has at least its minimum height, and with ranks on a screen of 24 rows or more the rank
 * table shows at least 3 of them. Any thread may call it; the UI thread does, on each resize. */
#include "layout.h"

#include <stddef.h>
#include <string.h>

/* Rank-table rows (column header included) kept at the least when there are ranks. */
#define RANKS_MIN_SMALL 2 /* below 24 rows */
#define RANKS_MIN 4       /* from 24 rows: header and 3 ranks */
#define RANKS_MIN_ROWS 24
#define BANNER2_ROWS 30 /* the banner gets its second line from this many rows */
#define FRAME_MIN 16

static struct layout_rect rect(int y, int x, int h, int w)
{
    struct layout_rect r = {y, x, h, w};

    return r;
}

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

static int max_int(int a, int b)
{
    return a > b ? a : b;
}

/* ---- device meters ---------------------------------------------------------------------- */

/* Full mode: one row per device, only when they are few and all fit in budget rows. */
static int devices_full(struct layout *out, int cols, int n)
{
    out->dev_compact = false;
    out->dev_per_row = 1;
    out->dev_rows = n;
    out->dev_cell_w = cols;
    out->dev_shown = n;
    out->dev_more = 0;
    return n;
}

/* Compact mode: 2-4 cells of at least LAYOUT_DEV_CELL_MIN columns per row, at most budget
 * rows; devices that do not fit are counted in a last "+N more" cell. */
static int devices_compact(struct layout *out, int cols, int n, int budget)
{
    int per_row = (cols - LAYOUT_DEV_CELL_MIN) / (LAYOUT_DEV_CELL_MIN + 1) + 1;
    int need, cap;

    per_row = max_int(2, min_int(4, per_row));
    need = n / per_row + (n % per_row != 0);
    out->dev_compact = true;
    out->dev_per_row = per_row;
    out->dev_rows = min_int(need, budget);
    out->dev_cell_w = (cols - (per_row - 1)) / per_row;
    cap = out->dev_rows * per_row;
    out->dev_shown = n <= cap ? n : cap - 1;
    out->dev_more = n - out->dev_shown;
    return out->dev_rows;
}

/* Rows given to the device meters, at most budget; 0 hides them. */
static int devices_place(struct layout *out, int cols, int n, int budget)
{
    if (n <= 0 || budget < 1)
        return 0;
    if (n <= LAYOUT_DEV_FULL_MAX && n <= budget)
        return devices_full(out, cols, n);
    return devices_compact(out, cols, n, budget);
}

/* ---- vertical split --------------------------------------------------------------------- */

static int ranks_min(int rows, int n_ranks)
{
    return n_ranks > 0 && rows >= RANKS_MIN_ROWS ? RANKS_MIN : RANKS_MIN_SMALL;
}

/* Rank-table height in rem rows shared with the lower pane: all ranks if they fit in the
 * table's share (a half, or a third when the view itself lists ranks or threads), never below
 * its minimum, never leaving the lower pane less than its own. */
static int ranks_height(int rem, int rows, const struct layout_in *in)
{
    int n = in->n_ranks > 0 ? in->n_ranks : 1; /* 1: the "no ranks" row */
    int want = n < rem ? n + 1 : rem;
    bool lower_first = in->view == LAYOUT_VIEW_RANK || in->view == LAYOUT_VIEW_GIL ||
                       in->view == LAYOUT_VIEW_MEMORY;
    int share = lower_first ? rem / 3 : rem / 2;
    int h = min_int(want, max_int(ranks_min(rows, in->n_ranks), share));

    return min_int(h, rem - LAYOUT_LOWER_MIN);
}

/* Devices, rank table and lower pane in body rows starting at row y. */
static void body_place(struct layout *out, int y, int body, int rows, int cols,
                       const struct layout_in *in)
{
    int fixed = ranks_min(rows, in->n_ranks) + LAYOUT_LOWER_MIN;
    int dev_h =
        devices_place(out, cols, in->n_devices, min_int(max_int(1, body / 4), body - fixed));
    int rem = body - dev_h;
    int ranks_h = ranks_height(rem, rows, in);

    if (dev_h > 0)
        out->devices = rect(y, 0, dev_h, cols);
    out->ranks = rect(y + dev_h, 0, ranks_h, cols);
    out->rank_rows = ranks_h - 1;
    out->lower = rect(y + dev_h + ranks_h, 0, rem - ranks_h, cols);
}

int layout_compute(int rows, int cols, const struct layout_in *in, struct layout *out)
{
    int head, body;

    if (out)
        memset(out, 0, sizeof(*out));
    if (!in || !out || rows <= 0 || cols <= 0)
        return -1;
    if (rows < LAYOUT_MIN_ROWS || cols < LAYOUT_MIN_COLS) {
        out->too_small = true;
        out->message = rect(0, 0, rows, cols);
        return 1;
    }
    out->banner_lines = in->banner ? (rows >= BANNER2_ROWS ? 2 : 1) : 0;
    head = 2 + out->banner_lines;
    body = rows - head - 1;
    out->header = rect(0, 0, head, cols);
    out->keybar = rect(rows - 1, 0, 1, cols);
    if (in->help)
        out->help = rect(head, 0, body, cols);
    else
        body_place(out, head, body, rows, cols, in);
    return 0;
}

/* ---- rank-table columns ----------------------------------------------------------------- */

static const struct {
    int w; /* FRAME: its minimum */
    bool right;
    const char *title, *ascii;
} COLS[LCOL_COUNT] = {
    [LCOL_RANK] = {5, true, "RANK", "RANK"},
    [LCOL_PID] = {7, true, "PID", "PID"},
    [LCOL_HOST] = {12, false, "HOST", "HOST"},
    [LCOL_DEVICE] = {5, false, "DEV", "DEV"},
    [LCOL_STATE] = {7, false, "STATE", "STATE"}, /* "SIGSEGV", "exit 1" */
    [LCOL_WAIT] = {10, false, "WAIT", "WAIT"},   /* "collective" */
    [LCOL_CPU] = {5, true, "CPU%", "CPU%"},
    [LCOL_RSS] = {5, true, "RSS", "RSS"},
    [LCOL_DRSS] = {5, true, "ΔRSS", "dRSS"},
    [LCOL_DMEM] = {5, true, "DMEM", "DMEM"},
    [LCOL_GIL] = {13, false, "GIL%", "GIL%"}, /* "97 tokenizer": the holder when not main */
    [LCOL_GC] = {4, true, "GC%", "GC%"},
    [LCOL_FRAME] = {FRAME_MIN, false, "TOP FRAME", "TOP FRAME"},
    [LCOL_SINCE] = {5, true, "SINCE", "SINCE"},
};

/* Dropped in this order when the table is too narrow, then FRAME, STATE, PID. */
static const enum layout_col DROP_ORDER[] = {
    LCOL_GC,  LCOL_HOST, LCOL_DRSS,  LCOL_DMEM,  LCOL_GIL,   LCOL_DEVICE, LCOL_RSS,
    LCOL_CPU, LCOL_WAIT, LCOL_SINCE, LCOL_FRAME, LCOL_STATE, LCOL_PID,
};

/* Width of the shown columns with the frame frame_w wide, separators included. */
static int cols_total(const bool *on, int frame_w)
{
    int total = 0, n = 0;

    for (int c = 0; c < LCOL_COUNT; c++) {
        if (!on[c])
            continue;
        total += c == LCOL_FRAME ? frame_w : COLS[c].w;
        n++;
    }
    return n ? total + n - 1 : 0;
}

static void cols_assign(const bool *on, int frame_w, int width, struct rank_cols *out)
{
    int x = 0;

    for (int c = 0; c < LCOL_COUNT; c++) {
        out->x[c] = -1;
        out->w[c] = 0;
        out->right[c] = COLS[c].right;
        if (!on[c])
            continue;
        out->x[c] = x;
        out->w[c] = c == LCOL_FRAME ? frame_w : min_int(COLS[c].w, width - x);
        x += out->w[c] + 1;
        out->n++;
    }
}

void layout_rank_columns(int width, struct rank_cols *out)
{
    bool on[LCOL_COUNT];
    size_t i = 0;
    int frame_w;

    memset(out, 0, sizeof(*out));
    for (int c = 0; c < LCOL_COUNT; c++)
        on[c] = width > 0;
    /* Optional columns go while the frame would get less than its minimum. */
    while (i < sizeof(DROP_ORDER) / sizeof(DROP_ORDER[0]) && DROP_ORDER[i] != LCOL_FRAME &&
           cols_total(on, FRAME_MIN) > width)
        on[DROP_ORDER[i++]] = false;
    /* Below the core's width the frame shrinks, then the core goes column by column. */
    frame_w = width - cols_total(on, 0);
    if (frame_w < 1 && i < sizeof(DROP_ORDER) / sizeof(DROP_ORDER[0]))
        on[DROP_ORDER[i++]] = false;
    while (i < sizeof(DROP_ORDER) / sizeof(DROP_ORDER[0]) && cols_total(on, 0) > width)
        on[DROP_ORDER[i++]] = false;
    cols_assign(on, on[LCOL_FRAME] ? frame_w : 0, width, out);
}

const char *layout_col_title(enum layout_col c, bool utf8)
{
    if ((int)c < 0 || c >= LCOL_COUNT)
        return "";
    return utf8 ? COLS[c].title : COLS[c].ascii;
}

/* ---- memory view columns ---------------------------------------------------------------- */

/* "%-6s %-8s %7s %8s" (RANK PID RSS dBASE), then " %8s" d60s, " %7s" USS, " %7s" SWAP, then
 * two blanks before the sparkline. */
#define MEM_BASE_W (6 + 1 + 8 + 1 + 7 + 1 + 8)
#define MEM_D60_W 9
#define MEM_USS_W 8
#define MEM_SWAP_W 8
#define MEM_GAP_W 2

int layout_memory_fixed(const struct mem_cols *c)
{
    return MEM_BASE_W + (c->d60 ? MEM_D60_W : 0) + (c->uss ? MEM_USS_W : 0) +
           (c->swap ? MEM_SWAP_W : 0) + MEM_GAP_W;
}

void layout_memory_columns(int width, struct mem_cols *out)
{
    bool *drop[] = {&out->swap, &out->uss, &out->d60};

    *out = (struct mem_cols){true, true, true, 0};
    for (size_t i = 0; i < sizeof(drop) / sizeof(*drop); i++) {
        if (width - layout_memory_fixed(out) >= LAYOUT_SPARK_WANT)
            break;
        *drop[i] = false;
    }
    out->spark = width - layout_memory_fixed(out);
    out->spark = out->spark > LAYOUT_SPARK_MAX ? LAYOUT_SPARK_MAX : out->spark < 0 ? 0 : out->spark;
}
