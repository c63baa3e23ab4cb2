/* Text the panes draw: bars, sparklines, numbers, durations, width-bounded strings and tree
 * glyphs, formatted into caller buffers. No curses here, so all of it is unit-tested.
 *
 * Every function writes a NUL-terminated string of whole characters into buf (or out) of len
 * bytes, never more, and returns the display width of what it wrote (0 when len is 0). utf8
 * selects UTF-8 glyphs (block elements, "…", box drawing) or their ASCII fallbacks for LANG=C;
 * ASCII output is pure 7-bit. Only draw_fit and draw_width with utf8 depend on the calling
 * thread's LC_CTYPE, which must then be a UTF-8 locale (the UI calls setlocale(LC_ALL, "")
 * and uses utf8 only when nl_langinfo(CODESET) is "UTF-8"). UI thread, or any thread. */
#ifndef RANKTOP_DRAW_H
#define RANKTOP_DRAW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes that always hold a result of width columns from the fixed-glyph functions (bar,
 * sparkline, tree prefix): 3 bytes per column in UTF-8, plus the NUL. */
#define DRAW_BUFSZ(width) (3 * (size_t)(width) + 1)

/* A bar of exactly width columns filled to frac (clamped to 0..1; NaN is 0). UTF-8: full
 * blocks '█' and one partial eighth block ('▏'..'▉') for the remainder, rounded to the
 * nearest eighth. ASCII: '#' per full cell, '|' for a remainder of half a cell or more. Then
 * spaces. No brackets. */
int draw_bar(char *buf, size_t len, int width, double frac, bool utf8);

/* The last width values of v[0..n) (oldest first) as a sparkline, right-aligned (leading
 * spaces when n < width), scaled from their minimum to their maximum: "▁▂▃▄▅▆▇█", or in ASCII
 * "_.-=^". All equal: the lowest glyph. NaN or infinite values show as a space. */
int draw_sparkline(char *buf, size_t len, const double *v, size_t n, int width, bool utf8);

/* A size given in KiB with binary units K M G T P E Z and at most 3 significant figures:
 * "0K", "512K", "812M", "1.2G", "10G", "999M"; one decimal below 10, none from 10 up;
 * whole K. Negative sizes get a '-'. */
int draw_bytes(char *buf, size_t len, int64_t kb);

/* A change in KiB as draw_bytes with an explicit sign: "+12M", "-3.4G"; zero is "0". */
int draw_delta(char *buf, size_t len, int64_t kb);

/* A percentage without the '%': "0.0", "4.5", "45.2" below 100, then "100", "399", "1234";
 * "-" for NaN or negative values. */
int draw_pct(char *buf, size_t len, double pct);

/* A duration, rounded down: "0s", "59s", "2m05s", "1h02m", "4d03h", "123d". At most 5
 * characters below 1000 days. */
int draw_duration(char *buf, size_t len, uint64_t ns);

/* Copies the UTF-8 string s into out, cut to at most width display columns. When s is wider,
 * the cut is marked with an ellipsis, "…" (UTF-8) or ".." (ASCII), at the end, or at the
 * start when left_ellipsis (keeping the end of a path). Wide characters (CJK, emoji) count 2
 * columns and are never split; combining marks stay with their base. Control characters are
 * shown as '?'; invalid bytes as U+FFFD (UTF-8) or '?'. In ASCII mode each non-ASCII character
 * becomes one '?'. A buffer too small stops the copy at a character boundary. */
int draw_fit(const char *s, int width, char *out, size_t len, bool left_ellipsis, bool utf8);

/* Display width of s as draw_fit would show it uncut. */
int draw_width(const char *s, bool utf8);

/* Tree lines of the merged tree and the rank view, 2 columns each. */
enum draw_tree {
    DRAW_TREE_BRANCH, /* "├─" or "|-": a child with siblings below it */
    DRAW_TREE_LAST,   /* "└─" or "\-": the last child */
    DRAW_TREE_PIPE,   /* "│ " or "| ": an ancestor's line continuing down */
    DRAW_TREE_BLANK,  /* "  ": below an ancestor that was the last child */
};

/* The glyph pair for g; static storage, never NULL. */
const char *draw_tree_glyph(enum draw_tree g, bool utf8);

/* The prefix of a node at depth (0: a root, no prefix): last[i] tells whether the node's
 * ancestor at depth i+1 (i < depth-1), and last[depth-1] whether the node itself, is the
 * last child of its parent. 2 * depth columns. */
int draw_tree_prefix(char *buf, size_t len, const bool *last, int depth, bool utf8);

/* A line of the merged tree: the tree prefix (glyphs, fold mark), the frame's function and
 * location ("(train.py:12)", "" none), its rank set and count ("[0-1,3] x3") and how long its
 * stacks have been unchanged ("5s", "" when none ends there). */
struct draw_tree_line {
    const char *prefix, *function, *where, *ranks, *age;
};

#define DRAW_FUNC_MIN 16 /* columns a function name keeps before the location goes */

/* Writes "PREFIX FUNCTION (LOCATION)  [RANKS] xN  unchanged AGE" fitted to width columns,
 * giving way in this order: "unchanged " before the age, then the function name (shortened
 * with an ellipsis down to DRAW_FUNC_MIN columns), then the location, then the age; the rank
 * set and count stay, so a line is cut only when even the barest form is too wide. Returns
 * the display width written. */
int draw_tree_line(char *out, size_t len, int width, const struct draw_tree_line *l, bool utf8);

#endif
