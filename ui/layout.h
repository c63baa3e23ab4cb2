/* Screen layout of the live monitor: terminal size and content counts in, pane rectangles out.
 *
 * Pure arithmetic with no curses, no I/O and no global state, so any thread may call it; the
 * UI thread calls layout_compute on start-up, on KEY_RESIZE and whenever a count that changes
 * the layout (devices, ranks, banner, help, view) changes. Rectangles are in screen cells with
 * the origin at the top left; a hidden pane has the all-zero rectangle. */
#ifndef RANKTOP_LAYOUT_H
#define RANKTOP_LAYOUT_H

#include <stdbool.h>

/* Smallest usable terminal; below it only the "terminal too small" message is shown. */
#define LAYOUT_MIN_COLS 60
#define LAYOUT_MIN_ROWS 16

/* More devices than this always use the compact meters (2-4 devices per row). */
#define LAYOUT_DEV_FULL_MAX 8
/* A compact device cell is at least this wide, plus one blank column between cells. */
#define LAYOUT_DEV_CELL_MIN 26

/* Fewest rows of the lower pane when shown: its tab line and two lines of content. */
#define LAYOUT_LOWER_MIN 3

/* The lower pane's views, numbered as their keys 1-6. */
enum layout_view {
    LAYOUT_VIEW_MERGED = 1,
    LAYOUT_VIEW_RANK,
    LAYOUT_VIEW_TOP,
    LAYOUT_VIEW_GIL,
    LAYOUT_VIEW_MEMORY,
    LAYOUT_VIEW_HOSTS,
};

struct layout_rect {
    int y, x; /* top-left cell */
    int h, w; /* rows and columns; both 0 when hidden */
};

struct layout_in {
    int n_devices; /* GPUs/NPUs with meters; negative counts as 0 */
    int n_ranks;   /* rows the rank table could show (after filtering) */
    bool banner;   /* the HANG banner is shown */
    bool help;     /* the help overlay is open */
    enum layout_view view;
};

struct layout {
    bool too_small; /* only `message` is set: "terminal too small (need 60x16)" */
    struct layout_rect message;
    /* Header, top rows: line 0 the job summary, lines 1..banner_lines the HANG banner, the
     * last line the status line (messages, export path or error). */
    struct layout_rect header;
    int banner_lines; /* 0 without a banner, else 1 or 2 (frame, then odd ranks out) */
    /* Device meters: dev_rows rows of dev_per_row cells, each dev_cell_w wide and separated by
     * one blank column. dev_per_row is 1 in full mode (util and memory bars on one row per
     * device). dev_shown devices get a cell; when dev_more > 0 the cell after them says
     * "+N more" (dev_shown + 1 cells in all). */
    struct layout_rect devices;
    bool dev_compact;
    int dev_per_row, dev_rows, dev_cell_w, dev_shown, dev_more;
    /* Rank table: one column-header row, then rank_rows data rows; the caller scrolls. When
     * there are no ranks rank_rows is 1, a row for the "no ranks" message. */
    struct layout_rect ranks;
    int rank_rows;
    /* Lower pane: row 0 is the tab line of the six views, the rest the selected view. */
    struct layout_rect lower;
    /* Help: replaces devices, rank table and lower pane (then hidden) while open. */
    struct layout_rect help;
    struct layout_rect keybar; /* always the last row when not too_small */
};

/* Fills *out for a rows x cols terminal showing *in. Returns 0 with a full layout, 1 when
 * the terminal is smaller than LAYOUT_MIN_COLS x LAYOUT_MIN_ROWS (out->too_small, only
 * out->message set, covering the screen), -1 when rows or cols is not positive or a pointer
 * is NULL (*out, when given, then all hidden). Rectangles never overlap and lie inside the
 * screen; every shown pane has at least its minimum size. */
int layout_compute(int rows, int cols, const struct layout_in *in, struct layout *out);

/* Columns of the rank table, in display order. */
enum layout_col {
    LCOL_RANK,
    LCOL_PID,
    LCOL_HOST,
    LCOL_DEVICE,
    LCOL_STATE,
    LCOL_WAIT, /* the kind of wait: "collective", "data", ... */
    LCOL_CPU,
    LCOL_RSS,
    LCOL_DRSS,
    LCOL_DMEM,
    LCOL_GIL,
    LCOL_GC,    /* % of the last second in garbage collection */
    LCOL_FRAME, /* current top frame: gets the width left over */
    LCOL_SINCE, /* time since the rank's stack last changed */
    LCOL_COUNT,
};

struct rank_cols {
    int n;                  /* columns shown */
    int x[LCOL_COUNT];      /* start column relative to the table; -1 when hidden */
    int w[LCOL_COUNT];      /* width; 0 when hidden */
    bool right[LCOL_COUNT]; /* right-aligned (numbers) */
};

/* Chooses the rank-table columns that fit in width cells, one blank column between columns.
 * All are shown from 90 columns up, the top frame taking what the others leave (at least 16).
 * Dropped first when narrow: host, ΔRSS, device memory, GIL %, device, RSS, CPU %, since;
 * rank, pid, state and the top frame (at 16) stay down to 36 columns; below that the frame
 * shrinks, then goes, then state, then pid. The total never exceeds width; width <= 0 shows
 * nothing. Pure. */
void layout_rank_columns(int width, struct rank_cols *out);

/* The Memory view's rows: RANK PID RSS dBASE always, then d60s, USS and SWAP where they fit,
 * and the RSS sparkline, whose newest values are what a reader looks for. */
#define LAYOUT_SPARK_MAX 40  /* sparkline cells at most */
#define LAYOUT_SPARK_WANT 32 /* columns go before the sparkline gets fewer cells than this */

struct mem_cols {
    bool d60, uss, swap; /* shown */
    int spark;           /* sparkline cells, 0 when not even one fits */
};

/* The Memory view's columns for a pane width cols wide: optional columns are dropped (SWAP,
 * then USS, then d60s) while the sparkline would get fewer than LAYOUT_SPARK_WANT cells; the
 * sparkline then takes what is left, up to LAYOUT_SPARK_MAX. The row never exceeds width
 * when it is at least the fixed columns' width. Pure. */
void layout_memory_columns(int width, struct mem_cols *out);

/* Columns a memory row of c takes before its sparkline (separators included). */
int layout_memory_fixed(const struct mem_cols *c);

/* Column title ("RANK", "ΔRSS" or with !utf8 "dRSS"); static storage, never NULL. */
const char *layout_col_title(enum layout_col c, bool utf8);

#endif
