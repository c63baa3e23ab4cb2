/* String formatting for the panes: bars, sparklines, sizes, percentages, durations, display-
 * width truncation, tree glyphs and merged-tree lines fitted to a width by priority.
 *
 * Owns no state. Every writer goes through struct sbuf, which appends whole characters and
 * refuses any that would not leave room for the NUL, so output is always terminated, never
 * overruns and never ends in a partial UTF-8 sequence. Display widths come from wcwidth() on
 * mbrtowc()'s result in the caller's LC_CTYPE (UTF-8 mode only); ASCII mode decodes UTF-8 by
 * hand and needs no locale. Runs on the UI thread (any thread would do). */
#include "draw.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>

/* ---- bounded output --------------------------------------------------------------------- */

struct sbuf {
    char *p;
    size_t len, pos;
    int cols;
    bool full; /* a character did not fit: nothing more is appended */
};

static void sbuf_init(struct sbuf *b, char *p, size_t len)
{
    b->p = p;
    b->len = len;
    b->pos = 0;
    b->cols = 0;
    b->full = len == 0;
    if (len)
        p[0] = '\0';
}

/* Appends n bytes that display as w columns; false (and nothing written) when they do not
 * fit with the NUL. */
static bool sbuf_put(struct sbuf *b, const char *s, size_t n, int w)
{
    if (b->full || n + 1 > b->len - b->pos) {
        b->full = true;
        return false;
    }
    memcpy(b->p + b->pos, s, n);
    b->pos += n;
    b->p[b->pos] = '\0';
    b->cols += w;
    return true;
}

static bool sbuf_puts(struct sbuf *b, const char *s, int w)
{
    return sbuf_put(b, s, strlen(s), w);
}

/* Copies an ASCII string; used for the numbers, whose snprintf output is ASCII. */
static int put_ascii(char *buf, size_t len, const char *s)
{
    struct sbuf b;

    sbuf_init(&b, buf, len);
    for (; *s && sbuf_put(&b, s, 1, 1); s++)
        ;
    return b.cols;
}

/* ---- bars and sparklines ---------------------------------------------------------------- */

/* Eighth blocks: [k] is k/8 of a cell, [8] the full block. */
static const char *const EIGHTHS[9] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉", "█"};

int draw_bar(char *buf, size_t len, int width, double frac, bool utf8)
{
    struct sbuf b;
    long long eighths, full, rem;

    sbuf_init(&b, buf, len);
    if (width <= 0)
        return 0;
    if (!(frac > 0))
        frac = 0;
    if (frac > 1)
        frac = 1;
    eighths = llround(frac * width * 8);
    full = eighths / 8;
    rem = eighths % 8;
    for (long long i = 0; i < full; i++)
        if (!sbuf_puts(&b, utf8 ? EIGHTHS[8] : "#", 1))
            return b.cols;
    if (utf8 && rem > 0)
        sbuf_puts(&b, EIGHTHS[rem], 1);
    else if (!utf8 && rem >= 4)
        sbuf_puts(&b, "|", 1);
    while (b.cols < width && sbuf_put(&b, " ", 1, 1))
        ;
    return b.cols;
}

static const char *const SPARK_UTF8[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
static const char *const SPARK_ASCII[] = {"_", ".", "-", "=", "^"};

/* Level 0..levels-1 of x on the scale lo..hi. */
static int spark_level(double x, double lo, double hi, int levels)
{
    double t = hi > lo ? (x - lo) / (hi - lo) : 0;

    if (!(t >= 0))
        t = 0;
    if (t > 1)
        t = 1;
    return (int)floor(t * (levels - 1) + 0.5);
}

int draw_sparkline(char *buf, size_t len, const double *v, size_t n, int width, bool utf8)
{
    struct sbuf b;
    size_t shown = width > 0 ? ((size_t)width < n ? (size_t)width : n) : 0;
    const double *w = shown ? v + (n - shown) : v;
    double lo = INFINITY, hi = -INFINITY;
    int levels = utf8 ? 8 : 5;

    sbuf_init(&b, buf, len);
    for (size_t i = 0; i < shown; i++) {
        if (isfinite(w[i])) {
            lo = w[i] < lo ? w[i] : lo;
            hi = w[i] > hi ? w[i] : hi;
        }
    }
    while (b.cols < width - (int)shown && sbuf_put(&b, " ", 1, 1))
        ;
    for (size_t i = 0; i < shown; i++) {
        int l = isfinite(w[i]) ? spark_level(w[i], lo, hi, levels) : -1;
        const char *g = l < 0 ? " " : utf8 ? SPARK_UTF8[l] : SPARK_ASCII[l];

        if (!sbuf_puts(&b, g, 1))
            break;
    }
    return b.cols;
}

/* ---- numbers ---------------------------------------------------------------------------- */

/* mag KiB as "512K", "1.2G", "812M" after sign into tmp. */
static void fmt_bytes(char *tmp, size_t len, uint64_t mag, const char *sign)
{
    static const char UNITS[] = "KMGTPEZ";
    double v = (double)mag;
    int unit = 0;

    if (mag < 1000) {
        snprintf(tmp, len, "%s%uK", sign, (unsigned)mag);
        return;
    }
    while (v >= 999.5 && unit < (int)sizeof(UNITS) - 2) {
        v /= 1024;
        unit++;
    }
    if (v < 9.95)
        snprintf(tmp, len, "%s%.1f%c", sign, v, UNITS[unit]);
    else
        snprintf(tmp, len, "%s%.0f%c", sign, v, UNITS[unit]);
}

static uint64_t magnitude(int64_t kb)
{
    return kb < 0 ? (uint64_t)0 - (uint64_t)kb : (uint64_t)kb;
}

int draw_bytes(char *buf, size_t len, int64_t kb)
{
    char tmp[32];

    fmt_bytes(tmp, sizeof(tmp), magnitude(kb), kb < 0 ? "-" : "");
    return put_ascii(buf, len, tmp);
}

int draw_delta(char *buf, size_t len, int64_t kb)
{
    char tmp[32];

    if (kb == 0)
        return put_ascii(buf, len, "0");
    fmt_bytes(tmp, sizeof(tmp), magnitude(kb), kb < 0 ? "-" : "+");
    return put_ascii(buf, len, tmp);
}

int draw_pct(char *buf, size_t len, double pct)
{
    char tmp[32];

    if (!(pct >= 0) || !isfinite(pct))
        return put_ascii(buf, len, "-");
    if (pct < 99.95)
        snprintf(tmp, sizeof(tmp), "%.1f", pct);
    else if (pct < 1e9)
        snprintf(tmp, sizeof(tmp), "%.0f", pct);
    else
        snprintf(tmp, sizeof(tmp), "%s", "1e9+");
    return put_ascii(buf, len, tmp);
}

int draw_duration(char *buf, size_t len, uint64_t ns)
{
    uint64_t s = ns / 1000000000u, m = s / 60, h = s / 3600, d = s / 86400;
    char tmp[32];

    if (s < 60)
        snprintf(tmp, sizeof(tmp), "%us", (unsigned)s);
    else if (s < 600)
        snprintf(tmp, sizeof(tmp), "%um%02us", (unsigned)m, (unsigned)(s % 60));
    else if (s < 3600)
        snprintf(tmp, sizeof(tmp), "%um", (unsigned)m);
    else if (s < 36000)
        snprintf(tmp, sizeof(tmp), "%uh%02um", (unsigned)h, (unsigned)(m % 60));
    else if (s < 100 * 3600)
        snprintf(tmp, sizeof(tmp), "%uh", (unsigned)h);
    else if (d < 10)
        snprintf(tmp, sizeof(tmp), "%ud%02uh", (unsigned)d, (unsigned)(h % 24));
    else
        snprintf(tmp, sizeof(tmp), "%llud", (unsigned long long)d);
    return put_ascii(buf, len, tmp);
}

/* ---- characters and display width ------------------------------------------------------- */

/* One character of the input as it will be shown. */
struct uchar {
    const char *src; /* bytes to copy: the input itself or a replacement */
    size_t n;        /* bytes to copy */
    size_t adv;      /* input bytes consumed */
    int w;           /* display columns */
};

struct ureader {
    const char *s;
    size_t pos, len;
    mbstate_t st;
    bool utf8;
};

static const char REPLACEMENT[] = "\xEF\xBF\xBD"; /* U+FFFD */

static void reader_init(struct ureader *r, const char *s, bool utf8)
{
    memset(r, 0, sizeof(*r));
    r->s = s ? s : "";
    r->len = strlen(r->s);
    r->utf8 = utf8;
}

/* Length of the UTF-8 sequence at p (at most avail bytes), 1 when it is malformed. */
static size_t utf8_seq_len(const unsigned char *p, size_t avail)
{
    size_t n = p[0] >= 0xF0 && p[0] <= 0xF4 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC2 ? 2 : 1;

    if (p[0] < 0x80 || n > avail)
        return 1;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 1;
    return n;
}

static void read_ascii(struct ureader *r, struct uchar *c)
{
    const unsigned char *p = (const unsigned char *)r->s + r->pos;

    c->n = 1;
    c->w = 1;
    if (p[0] >= 0x80) {
        c->src = "?";
        c->adv = utf8_seq_len(p, r->len - r->pos);
    } else {
        c->src = p[0] < 0x20 || p[0] == 0x7F ? "?" : r->s + r->pos;
        c->adv = 1;
    }
}

static void read_utf8(struct ureader *r, struct uchar *c)
{
    wchar_t wc;
    size_t k = mbrtowc(&wc, r->s + r->pos, r->len - r->pos, &r->st);

    if (k == (size_t)-1 || k == (size_t)-2 || k == 0) {
        memset(&r->st, 0, sizeof(r->st));
        *c = (struct uchar){REPLACEMENT, sizeof(REPLACEMENT) - 1, 1, 1};
        return;
    }
    c->w = wcwidth(wc);
    c->adv = k;
    if (c->w < 0) {
        c->src = "?";
        c->n = 1;
        c->w = 1;
    } else {
        c->src = r->s + r->pos;
        c->n = k;
    }
}

/* The next character, false at the end of the string. */
static bool reader_next(struct ureader *r, struct uchar *c)
{
    if (r->pos >= r->len)
        return false;
    if (r->utf8)
        read_utf8(r, c);
    else
        read_ascii(r, c);
    r->pos += c->adv;
    return true;
}

int draw_width(const char *s, bool utf8)
{
    struct ureader r;
    struct uchar c;
    int w = 0;

    reader_init(&r, s, utf8);
    while (reader_next(&r, &c))
        w += c.w;
    return w;
}

/* Copies the rest of r's input while it fits in max_cols columns (all when max_cols < 0). A
 * zero-width character joins the character before it. */
static void copy_chars(struct sbuf *b, struct ureader *r, int max_cols)
{
    struct uchar c;
    size_t save;

    for (;;) {
        save = r->pos;
        if (!reader_next(r, &c))
            return;
        if (max_cols >= 0 && b->cols + c.w > max_cols) {
            r->pos = save;
            return;
        }
        if (!sbuf_put(b, c.src, c.n, c.w))
            return;
    }
}

/* Skips characters worth at least cols columns, then any zero-width ones that followed. */
static void skip_cols(struct ureader *r, int cols)
{
    struct uchar c;
    size_t save;
    int done = 0;

    while (done < cols && reader_next(r, &c))
        done += c.w;
    for (;;) {
        save = r->pos;
        if (!reader_next(r, &c))
            return;
        if (c.w > 0) {
            r->pos = save;
            return;
        }
    }
}

int draw_fit(const char *s, int width, char *out, size_t len, bool left_ellipsis, bool utf8)
{
    struct sbuf b;
    struct ureader r;
    const char *ell = utf8 ? "…" : width >= 2 ? ".." : ".";
    int total = draw_width(s, utf8), ell_w = utf8 ? 1 : (int)strlen(ell);

    sbuf_init(&b, out, len);
    if (width <= 0)
        return 0;
    reader_init(&r, s, utf8);
    if (total <= width) {
        copy_chars(&b, &r, -1);
    } else if (left_ellipsis) {
        skip_cols(&r, total - (width - ell_w));
        if (sbuf_puts(&b, ell, ell_w))
            copy_chars(&b, &r, -1);
    } else {
        copy_chars(&b, &r, width - ell_w);
        sbuf_puts(&b, ell, ell_w);
    }
    return b.cols;
}

/* ---- tree lines ------------------------------------------------------------------------- */

static const char *const TREE_UTF8[] = {"├─", "└─", "│ ", "  "};
static const char *const TREE_ASCII[] = {"|-", "\\-", "| ", "  "};

const char *draw_tree_glyph(enum draw_tree g, bool utf8)
{
    if ((int)g < 0 || g > DRAW_TREE_BLANK)
        return "  ";
    return utf8 ? TREE_UTF8[g] : TREE_ASCII[g];
}

int draw_tree_prefix(char *buf, size_t len, const bool *last, int depth, bool utf8)
{
    struct sbuf b;

    sbuf_init(&b, buf, len);
    for (int i = 0; i < depth; i++) {
        enum draw_tree g = i < depth - 1 ? (last[i] ? DRAW_TREE_BLANK : DRAW_TREE_PIPE)
                                         : (last[i] ? DRAW_TREE_LAST : DRAW_TREE_BRANCH);

        if (!sbuf_puts(&b, draw_tree_glyph(g, utf8), 2))
            break;
    }
    return b.cols;
}

/* Appends s (characters shaped as draw_fit shapes them), cut with an ellipsis to its first
 * cols columns when it is wider; cols INT_MAX appends it whole. */
static void append_fit(struct sbuf *b, const char *s, int cols, bool utf8)
{
    char tmp[512];
    struct ureader r;

    if (cols < draw_width(s, utf8)) {
        draw_fit(s, cols, tmp, sizeof(tmp), false, utf8);
        s = tmp;
    }
    reader_init(&r, s, utf8);
    copy_chars(b, &r, -1);
}

#define UNCHANGED "unchanged "
#define UNCHANGED_W 10

/* What a tree line keeps, from the fullest form to the barest: whether UNCHANGED leads the
 * age, whether the location and the age are shown, and how narrow the function may become. */
static const struct {
    bool unchanged, where, age;
    int func_min; /* columns the function keeps at least; 0: all of it */
} TREE_FORMS[] = {
    {true, true, true, 0},
    {false, true, true, 0},
    {false, true, true, DRAW_FUNC_MIN},
    {false, false, true, DRAW_FUNC_MIN},
    {false, false, false, DRAW_FUNC_MIN},
    {false, false, false, 1},
};
#define TREE_NFORMS (sizeof(TREE_FORMS) / sizeof(*TREE_FORMS))

/* The fullest form of a line whose parts are this wide that fits width columns (the barest
 * when none does), and the function's columns in it. */
static size_t tree_form(int width, int fixed, int wf, int ww, int wa, int *fn_w)
{
    size_t f;

    for (f = 0; f < TREE_NFORMS; f++) {
        int rest = fixed + (TREE_FORMS[f].where ? ww : 0) +
                   (TREE_FORMS[f].age && wa ? wa + (TREE_FORMS[f].unchanged ? UNCHANGED_W : 0) : 0);
        int need =
            TREE_FORMS[f].func_min && TREE_FORMS[f].func_min < wf ? TREE_FORMS[f].func_min : wf;

        *fn_w = width - rest < wf ? width - rest : wf;
        if (*fn_w >= need || f == TREE_NFORMS - 1)
            break;
    }
    if (*fn_w < 1)
        *fn_w = 1;
    return f;
}

int draw_tree_line(char *out, size_t len, int width, const struct draw_tree_line *l, bool utf8)
{
    struct sbuf b;
    int fn_w;
    size_t f =
        tree_form(width, draw_width(l->prefix, utf8) + 2 + draw_width(l->ranks, utf8),
                  draw_width(l->function, utf8), l->where[0] ? 1 + draw_width(l->where, utf8) : 0,
                  l->age[0] ? 2 + draw_width(l->age, utf8) : 0, &fn_w);

    sbuf_init(&b, out, len);
    append_fit(&b, l->prefix, INT_MAX, utf8);
    append_fit(&b, l->function, fn_w, utf8);
    if (TREE_FORMS[f].where && l->where[0]) {
        sbuf_puts(&b, " ", 1);
        append_fit(&b, l->where, INT_MAX, utf8);
    }
    sbuf_puts(&b, "  ", 2);
    append_fit(&b, l->ranks, INT_MAX, utf8);
    if (TREE_FORMS[f].age && l->age[0]) {
        sbuf_puts(&b, "  ", 2);
        if (TREE_FORMS[f].unchanged)
            sbuf_puts(&b, UNCHANGED, UNCHANGED_W);
        append_fit(&b, l->age, INT_MAX, utf8);
    }
    return b.cols;
}
