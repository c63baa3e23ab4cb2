/* Unit tests of ui/draw.c and of the key table (ui/keys.c): exact strings for bars, sparklines,
 * sizes, deltas, percentages, durations, width-bounded truncation of ASCII, Latin-1, CJK (2
 * columns), emoji, combining marks, control and invalid bytes, and tree glyphs, each in UTF-8 and
 * ASCII mode, plus short buffers. main() selects the C.UTF-8 locale, as the UI does with
 * setlocale(LC_ALL, "") in a UTF-8 terminal, since draw_fit measures with mbrtowc and wcwidth. The
 * key table must give the help screen's lines and the key bar's labels as they were before it
 * existed, and no key code twice. Pure: no files, no tty. */
#include <check.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "draw.h"
#include "tsupport.h"
#include "ui_priv.h"

#define KIB 1LL
#define MIB (1024 * KIB)
#define GIB (1024 * MIB)
#define NS 1000000000ull

static char buf[256];

/* ---- bars ------------------------------------------------------------------------------- */

static void expect_bar(int width, double frac, bool utf8, const char *want)
{
    int w = draw_bar(buf, sizeof(buf), width, frac, utf8);

    ck_assert_msg(strcmp(buf, want) == 0, "bar(%d, %g, %d) = \"%s\", want \"%s\"", width, frac,
                  utf8, buf, want);
    ck_assert_int_eq(w, width > 0 ? width : 0);
}

START_TEST(bar_utf8)
{
    expect_bar(10, 0.5, true, "█████     ");
    expect_bar(10, 0.55, true, "█████▌    ");
    expect_bar(8, 1.0 / 64, true, "▏       ");
    expect_bar(8, 7.0 / 64, true, "▉       ");
    expect_bar(4, 0.999, true, "████");
    expect_bar(4, 0.0, true, "    ");
    expect_bar(4, 1.0, true, "████");
    expect_bar(4, 1.5, true, "████");
    expect_bar(4, -0.3, true, "    ");
    expect_bar(4, NAN, true, "    ");
    expect_bar(0, 0.5, true, "");
    expect_bar(-3, 0.5, true, "");
}
END_TEST

START_TEST(bar_ascii)
{
    expect_bar(10, 0.5, false, "#####     ");
    expect_bar(10, 0.55, false, "#####|    ");
    expect_bar(10, 0.53, false, "#####     ");
    expect_bar(10, 0.04, false, "          ");
    expect_bar(10, 0.05, false, "|         ");
    expect_bar(3, 1.0, false, "###");
    expect_bar(3, NAN, false, "   ");
}
END_TEST

START_TEST(bar_short_buffer)
{
    char small[8];

    /* Two blocks (6 bytes) and the NUL fit; the third block would not. */
    ck_assert_int_eq(draw_bar(small, sizeof(small) - 1, 10, 1.0, true), 2);
    ck_assert_str_eq(small, "██");
    ck_assert_int_eq(draw_bar(small, 4, 10, 0.0, false), 3);
    ck_assert_str_eq(small, "   ");
    ck_assert_int_eq(draw_bar(small, 0, 10, 0.0, false), 0);
    ck_assert_int_eq(draw_bar(buf, DRAW_BUFSZ(20), 20, 0.99, true), 20);
}
END_TEST

/* ---- sparklines ------------------------------------------------------------------------- */

static void expect_spark(const double *v, size_t n, int width, bool utf8, const char *want)
{
    draw_sparkline(buf, sizeof(buf), v, n, width, utf8);
    ck_assert_msg(strcmp(buf, want) == 0, "sparkline(%zu, %d, %d) = \"%s\", want \"%s\"", n, width,
                  utf8, buf, want);
}

START_TEST(sparkline)
{
    static const double RAMP[] = {9, 0, 1, 2, 3, 4, 5, 6, 7};
    static const double FIVE[] = {10, 20, 30, 40, 50};
    static const double FLAT[] = {5, 5, 5};
    static const double GAP[] = {0, NAN, 1, INFINITY};
    static const double TWO[] = {1, 2};

    expect_spark(RAMP + 1, 8, 8, true, "▁▂▃▄▅▆▇█");
    expect_spark(RAMP, 9, 8, true, "▁▂▃▄▅▆▇█"); /* only the last 8 */
    expect_spark(FIVE, 5, 5, false, "_.-=^");
    expect_spark(FIVE, 5, 5, true, "▁▃▅▆█");
    expect_spark(TWO, 2, 4, true, "  ▁█");
    expect_spark(TWO, 2, 4, false, "  _^");
    expect_spark(FLAT, 3, 3, true, "▁▁▁");
    expect_spark(GAP, 4, 4, true, "▁ █ ");
    expect_spark(GAP, 4, 4, false, "_ ^ ");
    expect_spark(NULL, 0, 3, true, "   ");
    expect_spark(TWO, 2, 0, true, "");
    ck_assert_int_eq(draw_sparkline(buf, sizeof(buf), RAMP, 9, 6, true), 6);
}
END_TEST

/* ---- numbers ---------------------------------------------------------------------------- */

static void expect_bytes(int64_t kb, const char *want)
{
    int w = draw_bytes(buf, sizeof(buf), kb);

    ck_assert_msg(strcmp(buf, want) == 0, "bytes(%lld) = \"%s\", want \"%s\"", (long long)kb, buf,
                  want);
    ck_assert_int_eq(w, (int)strlen(want));
}

START_TEST(bytes)
{
    expect_bytes(0, "0K");
    expect_bytes(5, "5K");
    expect_bytes(512, "512K");
    expect_bytes(999, "999K");
    expect_bytes(1000, "1.0M");
    expect_bytes(1536, "1.5M");
    expect_bytes(812 * MIB, "812M");
    expect_bytes(1023385, "999M");
    expect_bytes(1023 * MIB, "1.0G");
    expect_bytes(1258291, "1.2G"); /* 1.2 GiB */
    expect_bytes(10 * GIB, "10G");
    expect_bytes(10433331, "9.9G");
    expect_bytes(10443817, "10G"); /* 9.96 GiB rounds up to 10 */
    expect_bytes(80 * GIB, "80G");
    expect_bytes(1024 * GIB, "1.0T");
    expect_bytes(-3565158, "-3.4G");
    expect_bytes(-512, "-512K");
    expect_bytes(INT64_MAX, "8.0Z");
    expect_bytes(INT64_MIN, "-8.0Z");
}
END_TEST

static void expect_delta(int64_t kb, const char *want)
{
    draw_delta(buf, sizeof(buf), kb);
    ck_assert_msg(strcmp(buf, want) == 0, "delta(%lld) = \"%s\", want \"%s\"", (long long)kb, buf,
                  want);
}

START_TEST(delta)
{
    expect_delta(0, "0");
    expect_delta(5, "+5K");
    expect_delta(12 * MIB, "+12M");
    expect_delta(-3565158, "-3.4G");
    expect_delta(-1, "-1K");
    expect_delta(INT64_MIN, "-8.0Z");
}
END_TEST

static void expect_pct(double pct, const char *want)
{
    draw_pct(buf, sizeof(buf), pct);
    ck_assert_msg(strcmp(buf, want) == 0, "pct(%g) = \"%s\", want \"%s\"", pct, buf, want);
}

START_TEST(pct)
{
    expect_pct(0, "0.0");
    expect_pct(4.54, "4.5");
    expect_pct(45.24, "45.2");
    expect_pct(99.94, "99.9");
    expect_pct(99.96, "100");
    expect_pct(100, "100");
    expect_pct(399.4, "399");
    expect_pct(1234, "1234");
    expect_pct(-1, "-");
    expect_pct(NAN, "-");
    expect_pct(INFINITY, "-");
}
END_TEST

static void expect_duration(uint64_t ns, const char *want)
{
    int w = draw_duration(buf, sizeof(buf), ns);

    ck_assert_msg(strcmp(buf, want) == 0, "duration(%llu) = \"%s\", want \"%s\"",
                  (unsigned long long)ns, buf, want);
    ck_assert_int_eq(w, (int)strlen(want));
}

START_TEST(duration)
{
    expect_duration(0, "0s");
    expect_duration(NS - 1, "0s");
    expect_duration(3 * NS, "3s");
    expect_duration(59 * NS + NS / 2, "59s");
    expect_duration(60 * NS, "1m00s");
    expect_duration(125 * NS, "2m05s");
    expect_duration(599 * NS, "9m59s");
    expect_duration(600 * NS, "10m");
    expect_duration(3599 * NS, "59m");
    expect_duration(3600 * NS, "1h00m");
    expect_duration(3720 * NS, "1h02m");
    expect_duration(35999 * NS, "9h59m");
    expect_duration(36000 * NS, "10h");
    expect_duration(359999 * NS, "99h");
    expect_duration(360000 * NS, "4d04h");
    expect_duration(10 * 86400 * NS, "10d");
    expect_duration(1000ull * 86400 * NS, "1000d");
    expect_duration(UINT64_MAX, "213503d");
}
END_TEST

START_TEST(numbers_short_buffer)
{
    char small[4];

    ck_assert_int_eq(draw_bytes(small, sizeof(small), -3565158), 3);
    ck_assert_str_eq(small, "-3.");
    ck_assert_int_eq(draw_duration(small, 1, 125 * NS), 0);
    ck_assert_str_eq(small, "");
    ck_assert_int_eq(draw_pct(small, 0, 5), 0);
}
END_TEST

/* ---- truncation ------------------------------------------------------------------------- */

static void expect_fit(const char *s, int width, bool left, bool utf8, const char *want, int want_w)
{
    int w = draw_fit(s, width, buf, sizeof(buf), left, utf8);

    ck_assert_msg(strcmp(buf, want) == 0, "fit(\"%s\", %d, left %d, utf8 %d) = \"%s\", want \"%s\"",
                  s, width, left, utf8, buf, want);
    ck_assert_msg(w == want_w, "fit(\"%s\", %d, left %d, utf8 %d): width %d, want %d", s, width,
                  left, utf8, w, want_w);
}

START_TEST(fit_ascii)
{
    expect_fit("hello", 10, false, true, "hello", 5);
    expect_fit("hello", 5, false, true, "hello", 5);
    expect_fit("hello", 4, false, true, "hel…", 4);
    expect_fit("hello", 4, true, true, "…llo", 4);
    expect_fit("hello", 4, false, false, "he..", 4);
    expect_fit("hello", 4, true, false, "..lo", 4);
    expect_fit("hello", 1, false, true, "…", 1);
    expect_fit("hello", 1, false, false, ".", 1);
    expect_fit("hello", 2, true, false, "..", 2);
    expect_fit("hello", 0, false, true, "", 0);
    expect_fit("hello", -4, false, true, "", 0);
    expect_fit("", 5, false, true, "", 0);
    expect_fit(NULL, 5, false, false, "", 0);
    expect_fit("/usr/lib/python3.12/site-packages/torch/distributed/c10d.py", 24, true, true,
               "…rch/distributed/c10d.py", 24);
}
END_TEST

START_TEST(fit_latin1)
{
    expect_fit("naïve_résumé", 12, false, true, "naïve_résumé", 12);
    expect_fit("naïve_résumé", 8, false, true, "naïve_r…", 8);
    expect_fit("naïve_résumé", 8, true, true, "…_résumé", 8);
    /* ASCII mode: every non-ASCII character is one '?'. */
    expect_fit("naïve_résumé", 12, false, false, "na?ve_r?sum?", 12);
    expect_fit("naïve_résumé", 8, false, false, "na?ve_..", 8);
    expect_fit("naïve_résumé", 8, true, false, "..r?sum?", 8);
    ck_assert_int_eq(draw_width("café", true), 4);
    ck_assert_int_eq(draw_width("café", false), 4);
}
END_TEST

START_TEST(fit_cjk)
{
    const char *s = "数据加载器"; /* 5 characters, 10 columns */

    ck_assert_int_eq(draw_width(s, true), 10);
    expect_fit(s, 10, false, true, s, 10);
    expect_fit(s, 9, false, true, "数据加载…", 9);
    expect_fit(s, 8, false, true, "数据加…", 7); /* a wide character is never split */
    expect_fit(s, 8, true, true, "…加载器", 7);
    expect_fit(s, 2, false, true, "…", 1);
    expect_fit("load_数据", 8, false, true, "load_数…", 8);
    expect_fit("load_数据", 8, true, true, "…ad_数据", 8);
    expect_fit(s, 10, false, false, "?????", 5);
    expect_fit(s, 4, false, false, "??..", 4);
    expect_fit("load_数据", 7, false, false, "load_??", 7);
}
END_TEST

START_TEST(fit_emoji)
{
    ck_assert_int_eq(draw_width("🚀go", true), 4);
    expect_fit("🚀go", 4, false, true, "🚀go", 4);
    expect_fit("🚀go", 3, false, true, "🚀…", 3);
    expect_fit("🚀go", 3, true, true, "…go", 3);
    expect_fit("🚀go", 2, false, true, "…", 1);
    expect_fit("step 😀😀😀", 9, false, true, "step 😀…", 8);
    expect_fit("🚀go", 3, false, false, "?go", 3);
    expect_fit("🚀🚀🚀go", 4, false, false, "??..", 4);
}
END_TEST

START_TEST(fit_combining_control_invalid)
{
    /* "é" as e + U+0301: the mark adds no width and stays with its base. */
    expect_fit("ree\xcc\x81l", 4, false, true, "ree\xcc\x81l", 4);
    expect_fit("ree\xcc\x81ls", 4, false, true, "ree\xcc\x81…", 4);
    expect_fit("e\xcc\x81xyz", 3, true, true, "…yz", 3);
    expect_fit("a\tb\x7f", 8, false, true, "a?b?", 4);
    expect_fit("a\tb", 8, false, false, "a?b", 3);
    expect_fit("a\xff"
               "b",
               8, false, true,
               "a\xEF\xBF\xBD"
               "b",
               3);
    expect_fit("a\xff"
               "b",
               8, false, false, "a?b", 3);
    expect_fit("a\xe6\x95", 8, false, true, "a\xEF\xBF\xBD\xEF\xBF\xBD", 3); /* cut short */
    expect_fit("a\xe6\x95", 8, false, false, "a??", 3);
}
END_TEST

START_TEST(fit_short_buffer)
{
    char small[7];

    /* Two CJK characters (6 bytes) fit with the NUL; never half of a third. */
    ck_assert_int_eq(draw_fit("数据加载器", 10, small, sizeof(small), false, true), 4);
    ck_assert_str_eq(small, "数据");
    ck_assert_int_eq(draw_fit("数据加载器", 10, small, 6, false, true), 2);
    ck_assert_str_eq(small, "数");
    ck_assert_int_eq(draw_fit("hello", 10, small, 1, false, true), 0);
    ck_assert_str_eq(small, "");
    ck_assert_int_eq(draw_fit("hello", 10, small, 0, false, true), 0);
}
END_TEST

/* ---- tree lines ------------------------------------------------------------------------- */

START_TEST(tree)
{
    static const bool LAST[] = {false, true, true};
    static const bool MID[] = {true, false};

    ck_assert_str_eq(draw_tree_glyph(DRAW_TREE_BRANCH, true), "├─");
    ck_assert_str_eq(draw_tree_glyph(DRAW_TREE_LAST, true), "└─");
    ck_assert_str_eq(draw_tree_glyph(DRAW_TREE_PIPE, true), "│ ");
    ck_assert_str_eq(draw_tree_glyph(DRAW_TREE_BRANCH, false), "|-");
    ck_assert_str_eq(draw_tree_glyph(DRAW_TREE_LAST, false), "\\-");
    ck_assert_str_eq(draw_tree_glyph(DRAW_TREE_PIPE, false), "| ");
    ck_assert_str_eq(draw_tree_glyph(DRAW_TREE_BLANK, false), "  ");
    ck_assert_int_eq(draw_tree_prefix(buf, sizeof(buf), LAST, 0, true), 0);
    ck_assert_str_eq(buf, "");
    ck_assert_int_eq(draw_tree_prefix(buf, sizeof(buf), LAST, 1, true), 2);
    ck_assert_str_eq(buf, "├─");
    ck_assert_int_eq(draw_tree_prefix(buf, sizeof(buf), LAST, 3, true), 6);
    ck_assert_str_eq(buf, "│   └─");
    draw_tree_prefix(buf, sizeof(buf), LAST, 3, false);
    ck_assert_str_eq(buf, "|   \\-");
    draw_tree_prefix(buf, sizeof(buf), MID, 2, true);
    ck_assert_str_eq(buf, "  ├─");
    ck_assert_int_eq(draw_tree_prefix(buf, 6, LAST, 3, true), 2); /* "│ " is 4 bytes */
    ck_assert_str_eq(buf, "│ ");
}
END_TEST

/* A merged-tree line at 80 columns keeps its rank set and count: "unchanged " goes first, then
 * the function name shortens, then the location goes, then the age. */
START_TEST(tree_line_forms)
{
    static const struct {
        int width;
        const char *want;
    } forms[] = {
        {100, "│ └─wait_for_the_batch_of_this_step (loader.py:120)  [0-1,3] x3  unchanged 1m05s"},
        {80, "│ └─wait_for_the_batch_of_this_step (loader.py:120)  [0-1,3] x3  unchanged 1m05s"},
        {79, "│ └─wait_for_the_batch_of_this_step (loader.py:120)  [0-1,3] x3  1m05s"},
        {70, "│ └─wait_for_the_batch_of_this_step (loader.py:120)  [0-1,3] x3  1m05s"},
        {69, "│ └─wait_for_the_batch_of_this_st… (loader.py:120)  [0-1,3] x3  1m05s"},
        {55, "│ └─wait_for_the_ba… (loader.py:120)  [0-1,3] x3  1m05s"},
        {54, "│ └─wait_for_the_batch_of_this_step  [0-1,3] x3  1m05s"},
        {53, "│ └─wait_for_the_batch_of_this_st…  [0-1,3] x3  1m05s"},
        {39, "│ └─wait_for_the_ba…  [0-1,3] x3  1m05s"},
        {38, "│ └─wait_for_the_batch_of…  [0-1,3] x3"},
        {32, "│ └─wait_for_the_ba…  [0-1,3] x3"},
        {31, "│ └─wait_for_the_b…  [0-1,3] x3"},
        {20, "│ └─wai…  [0-1,3] x3"},
        {10, "│ └─…  [0-1,3] x3"},
    };
    const struct draw_tree_line l = {"│ └─", "wait_for_the_batch_of_this_step", "(loader.py:120)",
                                     "[0-1,3] x3", "1m05s"};

    for (size_t i = 0; i < sizeof(forms) / sizeof(*forms); i++) {
        int w = draw_tree_line(buf, sizeof(buf), forms[i].width, &l, true);

        ck_assert_msg(!strcmp(buf, forms[i].want), "width %d: \"%s\", want \"%s\"", forms[i].width,
                      buf, forms[i].want);
        ck_assert_int_eq(w, draw_width(forms[i].want, true));
        if (forms[i].width >= 17) /* prefix, ellipsis and rank set: the barest form */
            ck_assert_int_le(w, forms[i].width);
    }
    /* No location, no age (the stacks go on below), ASCII. */
    draw_tree_line(buf, sizeof(buf), 30,
                   &(struct draw_tree_line){"|-", "main", "", "[0-15] x16", ""}, false);
    ck_assert_str_eq(buf, "|-main  [0-15] x16");
    draw_tree_line(
        buf, sizeof(buf), 24,
        &(struct draw_tree_line){"\\-", "forward_pass_of_the_model", "(m.py:7)", "[2] x1", "3s"},
        false);
    ck_assert_str_eq(buf, "\\-forward_pass..  [2] x1");
}
END_TEST

/* ---- key table ---- */

START_TEST(keys_help_lines)
{
    /* One literal per line: clang warns of string concatenation in an array of strings. */
    // clang-format off
    static const char *want[] = {
        "Arrows, j/k, PgUp/PgDn, Home/End   move in the rank table (the tree in the Rank view, and after w)",
        "Enter / Right      drill into the selected rank; on a frame: its locals",
        "w                  Merged view: arrows to the tree (Enter: a frame's locals, all ranks) / ranks",
        "Esc / Backspace    back to the merged view, clear search and filter",
        "1-6 / Tab          views: Merged, Rank, Top, GIL, Memory, Hosts",
        "F3 or /            search as you type (Esc cancels); F3/Shift-F3: next/previous",
        "F4 or \\            filter ranks as you type (rank, pid, frame); Esc clears",
        "F5                 tree / flat (top functions) in the Merged and Rank views",
        "s / F6             sort: rank, CPU, RSS, stuck time, GIL (shown in the header)",
        "Space              tag a rank (*): merged tree and exports show only tagged ones",
        "U                  untag all ranks        p / Z  pause the display (sampling continues)",
        "m                  memory baseline (and mapping growth of the selected rank)",
        "t                  main thread / all threads c  dump --core of a dead rank's core",
        "n                  native (C/C++) frames of the selected rank on/off (2 samples/s)",
        "a                  asyncio tasks under their threads in the Rank view on/off",
        "o                  on-CPU samples only (idle threads leave gaps) on/off",
        "+ / -              double / halve the sampling rate",
        "e                  export the history window as a Chrome trace to --export-dir",
        "E                  export in a format the prompt asks for (5 formats: c s f g p)",
        "q / F10            quit                   ? / F1  this help",
    };
    // clang-format on
    char lines[32][UI_HELP_W];
    int n = ui_keys_help(lines, 32);

    ck_assert_int_eq(n, (int)(sizeof(want) / sizeof(*want)));
    for (int i = 0; i < n; i++)
        ck_assert_str_eq(lines[i], want[i]);
    ck_assert_int_eq(ui_keys_help(lines, 2), 2);
}
END_TEST

START_TEST(keys_bar_and_codes)
{
    static const char *bar[] = {"F1Help", "F3Search", "F4Filter", "F5Tree", "F6Sort", "SpcTag",
                                "ZPause", "mBase",    "tThreads", "+-Rate", "eExport"};
    int seen[32], nseen = 0, right = 0;
    size_t n;
    const struct ui_key *k = ui_keys(&n);

    for (size_t i = 0; i < n; i++) {
        char label[32];

        if (k[i].bar_pos == UI_BAR_RIGHT) {
            snprintf(label, sizeof(label), "%s%s", k[i].bar_key, k[i].bar_text);
            ck_assert_str_eq(label, "F10Quit");
            right++;
        } else if (k[i].bar_pos > 0) {
            ck_assert_int_le(k[i].bar_pos, 11);
            snprintf(label, sizeof(label), "%s%s", k[i].bar_key, k[i].bar_text);
            ck_assert_str_eq(label, bar[k[i].bar_pos - 1]);
            seen[nseen++] = k[i].bar_pos;
        }
        for (size_t c = 0; c < UI_KEY_CODES && k[i].codes[c]; c++)
            for (size_t j = i + 1; j < n; j++)
                for (size_t d = 0; d < UI_KEY_CODES && k[j].codes[d]; d++)
                    ck_assert_int_ne(k[i].codes[c], k[j].codes[d]);
    }
    ck_assert_int_eq(right, 1);
    ck_assert_int_eq(nseen, 11);
    for (int a = 0; a < nseen; a++) /* each position once */
        for (int b = a + 1; b < nseen; b++)
            ck_assert_int_ne(seen[a], seen[b]);
}
END_TEST

static Suite *draw_suite(void)
{
    Suite *s = suite_create("draw");
    TCase *g = tcase_create("glyphs"), *n = tcase_create("numbers"), *f = tcase_create("fit"),
          *k = tcase_create("keys");

    tcase_add_test(g, bar_utf8);
    tcase_add_test(g, bar_ascii);
    tcase_add_test(g, bar_short_buffer);
    tcase_add_test(g, sparkline);
    tcase_add_test(g, tree);
    tcase_add_test(g, tree_line_forms);
    tcase_add_test(n, bytes);
    tcase_add_test(n, delta);
    tcase_add_test(n, pct);
    tcase_add_test(n, duration);
    tcase_add_test(n, numbers_short_buffer);
    tcase_add_test(f, fit_ascii);
    tcase_add_test(f, fit_latin1);
    tcase_add_test(f, fit_cjk);
    tcase_add_test(f, fit_emoji);
    tcase_add_test(f, fit_combining_control_invalid);
    tcase_add_test(f, fit_short_buffer);
    tcase_add_test(k, keys_help_lines);
    tcase_add_test(k, keys_bar_and_codes);
    suite_add_tcase(s, g);
    suite_add_tcase(s, n);
    suite_add_tcase(s, f);
    suite_add_tcase(s, k);
    return s;
}

int main(void)
{
    if (!setlocale(LC_ALL, "C.UTF-8")) {
        fprintf(stderr, "check_draw: the C.UTF-8 locale is missing\n");
        return EXIT_FAILURE;
    }
    return ts_run(draw_suite());
}
