/* Unit tests of ui/layout.c: layout_compute over every terminal size from 60x16 to 250x80 with
 * many content mixes (devices, ranks, banner, help, view), a few huge sizes and every size below
 * the minimum, plus hand-checked layouts at 80x24 and 60x16; layout_rank_columns over widths
 * -5..400. The sweeps check the invariants without Check's per-assertion bookkeeping (millions
 * of layouts) and abort with the size and mix on the first violation. Pure: no files, no tty. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "tsupport.h"

#define NPANES 6

static const int DEVICES[] = {0, 1, 8, 64};
static const int RANKS[] = {0, 4, 64, 1024};
#define NELEM(a) (int)(sizeof(a) / sizeof((a)[0]))

static char why[256]; /* the violated invariant */

#define REQUIRE(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            snprintf(why, sizeof(why), __VA_ARGS__);                                               \
            return false;                                                                          \
        }                                                                                          \
    } while (0)

static bool hidden(const struct layout_rect *r)
{
    return r->y == 0 && r->x == 0 && r->h == 0 && r->w == 0;
}

static bool inside(const struct layout_rect *r, int rows, int cols)
{
    return r->y >= 0 && r->x >= 0 && r->h > 0 && r->w > 0 && (long long)r->y + r->h <= rows &&
           (long long)r->x + r->w <= cols;
}

static bool overlap(const struct layout_rect *a, const struct layout_rect *b)
{
    return (long long)a->y < (long long)b->y + b->h && (long long)b->y < (long long)a->y + a->h &&
           (long long)a->x < (long long)b->x + b->w && (long long)b->x < (long long)a->x + a->w;
}

/* Panes inside the screen, pairwise disjoint, and tiling every row. */
static bool check_geometry(const struct layout *l, int rows, int cols)
{
    const struct layout_rect *p[NPANES] = {&l->header, &l->devices, &l->ranks,
                                           &l->lower,  &l->help,    &l->keybar};
    long long covered = 0;

    for (int i = 0; i < NPANES; i++) {
        if (hidden(p[i]))
            continue;
        REQUIRE(inside(p[i], rows, cols), "pane %d outside the screen", i);
        REQUIRE(p[i]->x == 0 && p[i]->w == cols, "pane %d not full width", i);
        covered += p[i]->h;
        for (int j = 0; j < i; j++)
            REQUIRE(hidden(p[j]) || !overlap(p[i], p[j]), "panes %d and %d overlap", j, i);
    }
    REQUIRE(covered == rows, "%lld of %d rows covered", covered, rows);
    REQUIRE(l->keybar.y == rows - 1 && l->keybar.h == 1, "key bar not on the last row");
    return true;
}

static bool check_header(const struct layout *l, const struct layout_in *in, int rows)
{
    int bl = in->banner ? (rows >= 30 ? 2 : 1) : 0;

    REQUIRE(l->banner_lines == bl, "banner_lines %d, want %d", l->banner_lines, bl);
    REQUIRE(l->header.y == 0 && l->header.h == 2 + bl, "header at %d height %d", l->header.y,
            l->header.h);
    return true;
}

static bool check_devices(const struct layout *l, const struct layout_in *in, int cols)
{
    int n = in->n_devices > 0 ? in->n_devices : 0;

    if (n == 0 || in->help)
        REQUIRE(hidden(&l->devices), "device meters shown with %d devices", n);
    if (hidden(&l->devices))
        return true;
    REQUIRE(l->dev_rows == l->devices.h, "dev_rows %d, pane %d", l->dev_rows, l->devices.h);
    REQUIRE(l->dev_shown + l->dev_more == n && l->dev_shown >= 1, "shown %d more %d of %d",
            l->dev_shown, l->dev_more, n);
    REQUIRE(l->dev_shown + (l->dev_more > 0) <= l->dev_rows * l->dev_per_row, "cells overflow");
    REQUIRE((long long)l->dev_per_row * ((long long)l->dev_cell_w + 1) - 1 <= cols,
            "cells wider than %d", cols);
    if (n > LAYOUT_DEV_FULL_MAX)
        REQUIRE(l->dev_compact, "%d devices not compact", n);
    if (l->dev_compact) {
        REQUIRE(l->dev_per_row >= 2 && l->dev_per_row <= 4, "%d per row", l->dev_per_row);
        REQUIRE(l->dev_cell_w >= LAYOUT_DEV_CELL_MIN, "cell width %d", l->dev_cell_w);
    } else {
        REQUIRE(l->dev_per_row == 1 && l->dev_rows == n && l->dev_more == 0, "full mode rows");
    }
    return true;
}

static bool check_tables(const struct layout *l, const struct layout_in *in, int rows)
{
    int n = in->n_ranks > 0 ? in->n_ranks : 0, want = n > 0 ? n : 1, shared;

    if (in->help) {
        REQUIRE(!hidden(&l->help) && hidden(&l->ranks) && hidden(&l->lower), "help layout");
        return true;
    }
    REQUIRE(hidden(&l->help), "help shown while closed");
    REQUIRE(!hidden(&l->ranks) && l->ranks.h >= 2, "rank table height %d", l->ranks.h);
    REQUIRE(l->rank_rows == l->ranks.h - 1, "rank_rows %d, pane %d", l->rank_rows, l->ranks.h);
    REQUIRE(l->rank_rows <= want, "%d rank rows for %d ranks", l->rank_rows, n);
    REQUIRE(!hidden(&l->lower) && l->lower.h >= LAYOUT_LOWER_MIN, "lower height %d", l->lower.h);
    if (n > 0 && rows >= 24)
        REQUIRE(l->rank_rows >= (n < 3 ? n : 3), "only %d rank rows", l->rank_rows);
    shared = l->ranks.h + l->lower.h;
    REQUIRE(l->ranks.h <= 4 || l->ranks.h <= shared / 2, "rank table %d of %d rows", l->ranks.h,
            shared);
    REQUIRE(l->ranks.y < l->lower.y, "lower pane above the rank table");
    return true;
}

static bool check_layout(int rows, int cols, const struct layout_in *in)
{
    struct layout l;
    int rc = layout_compute(rows, cols, in, &l);

    REQUIRE(rc == 0 && !l.too_small, "rc %d", rc);
    REQUIRE(hidden(&l.message), "message shown");
    return check_geometry(&l, rows, cols) && check_header(&l, in, rows) &&
           check_devices(&l, in, cols) && check_tables(&l, in, rows);
}

/* Every device count, rank count, banner, help and view at one size; aborts on a violation. */
static void sweep_mixes(int rows, int cols)
{
    for (int d = 0; d < NELEM(DEVICES); d++)
        for (int r = 0; r < NELEM(RANKS); r++)
            for (int bits = 0; bits < 4; bits++)
                for (int v = LAYOUT_VIEW_MERGED; v <= LAYOUT_VIEW_MEMORY; v++) {
                    struct layout_in in = {DEVICES[d], RANKS[r], bits & 1, bits & 2, v};

                    if (!check_layout(rows, cols, &in))
                        ck_abort_msg("%dx%d devices %d ranks %d banner %d help %d view %d: %s",
                                     cols, rows, in.n_devices, in.n_ranks, in.banner, in.help, v,
                                     why);
                }
}

START_TEST(sweep_sizes)
{
    for (int rows = LAYOUT_MIN_ROWS; rows <= 80; rows++)
        for (int cols = LAYOUT_MIN_COLS; cols <= 250; cols++)
            sweep_mixes(rows, cols);
}
END_TEST

START_TEST(huge_sizes)
{
    static const int SIZES[][2] = {{1000, 1000},     {81, 251},          {10000, 60},  {16, 100000},
                                   {100000, 100000}, {INT_MAX, INT_MAX}, {INT_MAX, 60}};

    for (int i = 0; i < NELEM(SIZES); i++)
        sweep_mixes(SIZES[i][0], SIZES[i][1]);
}
END_TEST

START_TEST(odd_counts)
{
    static const int COUNTS[] = {-7, 0, 1, 2, 3, 5, 9, 13, 100, 4096, INT_MAX};

    for (int rows = LAYOUT_MIN_ROWS; rows <= 40; rows++)
        for (int i = 0; i < NELEM(COUNTS); i++)
            for (int j = 0; j < NELEM(COUNTS); j++) {
                struct layout_in in = {COUNTS[i], COUNTS[j], true, false, LAYOUT_VIEW_MERGED};

                if (!check_layout(rows, 60 + rows, &in))
                    ck_abort_msg("%dx%d devices %d ranks %d: %s", 60 + rows, rows, COUNTS[i],
                                 COUNTS[j], why);
            }
}
END_TEST

START_TEST(too_small)
{
    struct layout_in in = {8, 64, true, false, LAYOUT_VIEW_MERGED};
    struct layout l;

    for (int rows = 1; rows <= 100; rows++)
        for (int cols = 1; cols <= 300; cols++) {
            if (rows >= LAYOUT_MIN_ROWS && cols >= LAYOUT_MIN_COLS)
                continue;
            if (layout_compute(rows, cols, &in, &l) != 1 || !l.too_small || l.message.y != 0 ||
                l.message.x != 0 || l.message.h != rows || l.message.w != cols ||
                !hidden(&l.header) || !hidden(&l.keybar) || !hidden(&l.ranks) ||
                !hidden(&l.lower) || !hidden(&l.devices))
                ck_abort_msg("%dx%d is not a lone 'too small' message", cols, rows);
        }
}
END_TEST

START_TEST(invalid_args)
{
    struct layout_in in = {0};
    struct layout l;

    ck_assert_int_eq(layout_compute(0, 80, &in, &l), -1);
    ck_assert(!l.too_small && hidden(&l.keybar) && hidden(&l.message));
    ck_assert_int_eq(layout_compute(24, -1, &in, &l), -1);
    ck_assert_int_eq(layout_compute(24, 80, NULL, &l), -1);
    ck_assert(hidden(&l.keybar));
    ck_assert_int_eq(layout_compute(24, 80, &in, NULL), -1);
}
END_TEST

/* 80x24, 8 devices, 64 ranks, no banner: three compact rows of three devices, the rank
 * table half of what the devices leave. */
START_TEST(exact_80x24)
{
    struct layout_in in = {8, 64, false, false, LAYOUT_VIEW_MERGED};
    struct layout l;

    ck_assert_int_eq(layout_compute(24, 80, &in, &l), 0);
    ck_assert_int_eq(l.header.h, 2);
    ck_assert(l.dev_compact);
    ck_assert_int_eq(l.dev_per_row, 3);
    ck_assert_int_eq(l.dev_cell_w, 26);
    ck_assert_int_eq(l.devices.y, 2);
    ck_assert_int_eq(l.devices.h, 3);
    ck_assert_int_eq(l.dev_shown, 8);
    ck_assert_int_eq(l.ranks.y, 5);
    ck_assert_int_eq(l.ranks.h, 9);
    ck_assert_int_eq(l.rank_rows, 8);
    ck_assert_int_eq(l.lower.y, 14);
    ck_assert_int_eq(l.lower.h, 9);
    ck_assert_int_eq(l.keybar.y, 23);
    /* Views that list ranks or threads themselves give the rank table a third. */
    in.view = LAYOUT_VIEW_MEMORY;
    ck_assert_int_eq(layout_compute(24, 80, &in, &l), 0);
    ck_assert_int_eq(l.ranks.h, 6);
    ck_assert_int_eq(l.lower.h, 12);
    /* Four devices fit in full mode, one row each; four ranks need five rows. */
    in = (struct layout_in){4, 4, false, false, LAYOUT_VIEW_MERGED};
    ck_assert_int_eq(layout_compute(24, 80, &in, &l), 0);
    ck_assert(!l.dev_compact);
    ck_assert_int_eq(l.devices.h, 4);
    ck_assert_int_eq(l.dev_cell_w, 80);
    ck_assert_int_eq(l.ranks.h, 5);
    ck_assert_int_eq(l.lower.h, 12);
}
END_TEST

/* 60x16 with a banner: two devices per row, three rows, the last cell "+3 more". */
START_TEST(exact_60x16)
{
    struct layout_in in = {8, 4, true, false, LAYOUT_VIEW_MERGED};
    struct layout l;

    ck_assert_int_eq(layout_compute(16, 60, &in, &l), 0);
    ck_assert_int_eq(l.header.h, 3);
    ck_assert_int_eq(l.banner_lines, 1);
    ck_assert_int_eq(l.dev_per_row, 2);
    ck_assert_int_eq(l.dev_cell_w, 29);
    ck_assert_int_eq(l.devices.h, 3);
    ck_assert_int_eq(l.dev_shown, 5);
    ck_assert_int_eq(l.dev_more, 3);
    ck_assert_int_eq(l.ranks.h, 4);
    ck_assert_int_eq(l.lower.h, 5);
    /* The help overlay takes everything between header and key bar. */
    in.help = true;
    ck_assert_int_eq(layout_compute(16, 60, &in, &l), 0);
    ck_assert_int_eq(l.help.y, 3);
    ck_assert_int_eq(l.help.h, 12);
}
END_TEST

START_TEST(many_devices_compact)
{
    struct layout_in in = {64, 1024, true, false, LAYOUT_VIEW_MERGED};
    struct layout l;

    ck_assert_int_eq(layout_compute(80, 250, &in, &l), 0);
    ck_assert(l.dev_compact);
    ck_assert_int_eq(l.dev_per_row, 4);
    ck_assert_int_eq(l.dev_shown + l.dev_more, 64);
    ck_assert_int_le(l.devices.h, (80 - 5) / 4);
}
END_TEST

/* ---- rank-table columns ----------------------------------------------------------------- */

static bool check_columns(int width, const struct rank_cols *c)
{
    int n = 0, end = 0;

    for (int i = 0; i < LCOL_COUNT; i++) {
        if (c->w[i] == 0) {
            REQUIRE(c->x[i] == -1, "hidden column %d at %d", i, c->x[i]);
            continue;
        }
        REQUIRE(c->w[i] > 0 && c->x[i] >= (n ? end + 1 : 0), "column %d at %d", i, c->x[i]);
        end = c->x[i] + c->w[i];
        n++;
    }
    REQUIRE(n == c->n, "n %d, counted %d", c->n, n);
    REQUIRE(end <= (width > 0 ? width : 0), "columns end at %d", end);
    if (width >= 38)
        REQUIRE(c->w[LCOL_RANK] && c->w[LCOL_PID] && c->w[LCOL_STATE] && c->w[LCOL_FRAME] >= 16 &&
                    end == width,
                "core columns or full width");
    if (width >= 117)
        REQUIRE(n == LCOL_COUNT && c->w[LCOL_FRAME] == width - 101, "all columns");
    return true;
}

START_TEST(columns_sweep)
{
    struct rank_cols prev, cur;

    layout_rank_columns(-6, &prev);
    for (int width = -5; width <= 400; width++) {
        layout_rank_columns(width, &cur);
        if (!check_columns(width, &cur))
            ck_abort_msg("width %d: %s", width, why);
        /* A column shown at some width stays shown when the table gets wider. */
        for (int i = 0; i < LCOL_COUNT; i++)
            if (prev.w[i] && !cur.w[i])
                ck_abort_msg("column %d dropped when widening to %d", i, width);
        prev = cur;
    }
}
END_TEST

/* The widths at which each optional column appears, in drop order reversed. */
START_TEST(columns_drop_order)
{
    static const struct {
        int width;
        enum layout_col gone;
    } STEPS[] = {{116, LCOL_GC},  {111, LCOL_HOST},  {98, LCOL_DRSS}, {92, LCOL_DMEM},
                 {86, LCOL_GIL},  {72, LCOL_DEVICE}, {66, LCOL_RSS},  {60, LCOL_CPU},
                 {54, LCOL_WAIT}, {43, LCOL_SINCE}};
    struct rank_cols c;

    for (int i = 0; i < NELEM(STEPS); i++) {
        layout_rank_columns(STEPS[i].width + 1, &c);
        ck_assert_msg(c.w[STEPS[i].gone] > 0, "column %d missing at %d", STEPS[i].gone,
                      STEPS[i].width + 1);
        layout_rank_columns(STEPS[i].width, &c);
        ck_assert_msg(c.w[STEPS[i].gone] == 0, "column %d still at %d", STEPS[i].gone,
                      STEPS[i].width);
    }
}
END_TEST

START_TEST(columns_exact)
{
    struct rank_cols c;

    /* 80 columns: the kind of wait (WAIT, "collective") stays; host, dRSS, device memory and
     * the GIL column (wide enough for "97 tokenizer", the holder thread when it is not the
     * main one) go. At 86 the GIL column is back. */
    layout_rank_columns(80, &c);
    ck_assert_int_eq(c.n, 9);
    ck_assert_int_eq(c.w[LCOL_HOST], 0);
    ck_assert_int_eq(c.w[LCOL_DMEM], 0);
    ck_assert_int_eq(c.w[LCOL_GIL], 0);
    ck_assert_int_eq(c.w[LCOL_WAIT], 10);
    ck_assert_int_eq(c.w[LCOL_STATE], 7);
    ck_assert_int_eq(c.x[LCOL_PID], 6);
    ck_assert_int_eq(c.w[LCOL_FRAME], 23);
    ck_assert_int_eq(c.x[LCOL_SINCE], 75);
    layout_rank_columns(87, &c);
    ck_assert_int_eq(c.w[LCOL_GIL], 13);
    ck_assert(c.right[LCOL_CPU] && !c.right[LCOL_FRAME] && !c.right[LCOL_GIL]);
    layout_rank_columns(60, &c);
    ck_assert_int_eq(c.n, 6);
    ck_assert_int_eq(c.w[LCOL_WAIT], 10);
    ck_assert(c.w[LCOL_RANK] && c.w[LCOL_PID] && c.w[LCOL_STATE] && c.w[LCOL_FRAME]);
    layout_rank_columns(3, &c);
    ck_assert_int_eq(c.n, 1);
    ck_assert_int_eq(c.w[LCOL_RANK], 3);
    layout_rank_columns(0, &c);
    ck_assert_int_eq(c.n, 0);
    ck_assert_str_eq(layout_col_title(LCOL_DRSS, true), "ΔRSS");
    ck_assert_str_eq(layout_col_title(LCOL_DRSS, false), "dRSS");
    ck_assert_str_eq(layout_col_title(LCOL_COUNT, false), "");
}
END_TEST

/* The Memory view at 80 columns drops SWAP and USS so that the sparkline keeps 37 of its 40
 * cells (the newest values, right-aligned); from 100 columns every column and 40 cells. */
START_TEST(memory_columns)
{
    struct mem_cols c;

    layout_memory_columns(80, &c);
    ck_assert(c.d60 && !c.uss && !c.swap);
    ck_assert_int_eq(c.spark, 37);
    ck_assert_int_eq(layout_memory_fixed(&c) + c.spark, 80);
    layout_memory_columns(200, &c);
    ck_assert(c.d60 && c.uss && c.swap);
    ck_assert_int_eq(c.spark, LAYOUT_SPARK_MAX);
    layout_memory_columns(60, &c);
    ck_assert(!c.d60 && !c.uss && !c.swap);
    ck_assert_int_eq(c.spark, 26);
    layout_memory_columns(10, &c);
    ck_assert_int_eq(c.spark, 0);
    for (int w = LAYOUT_MIN_COLS; w <= 250; w++) {
        layout_memory_columns(w, &c);
        ck_assert_int_le(layout_memory_fixed(&c) + c.spark, w);
        ck_assert_int_le(c.spark, LAYOUT_SPARK_MAX);
        /* Columns go until the sparkline has LAYOUT_SPARK_WANT cells, and no further: the
         * last one dropped would leave it short. */
        ck_assert(c.spark >= LAYOUT_SPARK_WANT || !c.d60);
        if (!c.swap) {
            struct mem_cols back = c;

            if (!c.d60)
                back.d60 = true;
            else if (!c.uss)
                back.uss = true;
            else
                back.swap = true;
            ck_assert_int_lt(w - layout_memory_fixed(&back), LAYOUT_SPARK_WANT);
        }
    }
}
END_TEST

static Suite *layout_suite(void)
{
    Suite *s = suite_create("layout");
    TCase *sw = tcase_create("sweep"), *ex = tcase_create("exact"), *co = tcase_create("columns");

    tcase_add_test(sw, sweep_sizes);
    tcase_add_test(sw, huge_sizes);
    tcase_add_test(sw, odd_counts);
    tcase_add_test(sw, too_small);
    tcase_add_test(ex, invalid_args);
    tcase_add_test(ex, exact_80x24);
    tcase_add_test(ex, exact_60x16);
    tcase_add_test(ex, many_devices_compact);
    tcase_add_test(co, columns_sweep);
    tcase_add_test(co, columns_drop_order);
    tcase_add_test(co, columns_exact);
    tcase_add_test(co, memory_columns);
    suite_add_tcase(s, sw);
    suite_add_tcase(s, ex);
    suite_add_tcase(s, co);
    return s;
}

int main(void)
{
    return ts_run(layout_suite());
}
