/* Text helpers for the smi parsers (see smi_text.h).
 *
 * Owns the rules every table parser shares: what counts as a border, a row, a cell, a header
 * column, an unknown value ("N/A", "[N/A]", "NA", "-", blank), and how the values of a cell
 * are matched to the column names above them. All functions take explicit lengths and never
 * read past them, so the parsers can be fed any bytes (the fuzzers do). Stateless; any
 * thread. */
#include "smi_text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define TOK_MAX 64

struct tok {
    size_t s, e; /* [s, e) relative to the cell */
};

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

struct smi_span smi_text_span(const char *p, size_t n)
{
    struct smi_span s = {p, n};

    return s;
}

struct smi_span smi_text_trim(struct smi_span s)
{
    while (s.n && (is_blank(s.p[0]) || s.p[0] == '\r'))
        s.p++, s.n--;
    while (s.n && (is_blank(s.p[s.n - 1]) || s.p[s.n - 1] == '\r'))
        s.n--;
    return s;
}

void smi_text_lines_init(struct smi_lines *it, const char *buf, size_t len)
{
    it->p = buf;
    it->end = buf + len;
    it->lineno = 0;
}

bool smi_text_next_line(struct smi_lines *it, struct smi_span *line)
{
    const char *nl;

    if (!it->p || it->p >= it->end)
        return false;
    nl = memchr(it->p, '\n', (size_t)(it->end - it->p));
    line->p = it->p;
    line->n = (size_t)((nl ? nl : it->end) - it->p);
    if (line->n && line->p[line->n - 1] == '\r')
        line->n--;
    it->p = nl ? nl + 1 : it->end;
    it->lineno++;
    return true;
}

enum smi_line_kind smi_text_line_kind(struct smi_span line)
{
    size_t dash = 0, eq = 0, other = 0;

    line = smi_text_trim(line);
    if (!line.n)
        return SMI_LINE_BLANK;
    if (line.p[0] != '|' && line.p[0] != '+')
        return SMI_LINE_TEXT;
    for (size_t i = 0; i < line.n; i++) {
        char c = line.p[i];

        if (c == '-')
            dash++;
        else if (c == '=')
            eq++;
        else if (c != '+' && c != '|' && !is_blank(c))
            other++;
    }
    if (!other && dash + eq >= 3)
        return eq > dash ? SMI_LINE_BORDER_EQ : SMI_LINE_BORDER;
    return line.p[0] == '|' ? SMI_LINE_ROW : SMI_LINE_TEXT;
}

size_t smi_text_cells(struct smi_span line, struct smi_span *cells, size_t max, bool *closed)
{
    const char *bar = memchr(line.p, '|', line.n);
    const char *end = line.p + line.n;
    size_t n = 0;

    *closed = false;
    if (!bar)
        return 0;
    for (;;) {
        const char *start = bar + 1;
        const char *next = start < end ? memchr(start, '|', (size_t)(end - start)) : NULL;

        if (!next) {
            *closed = smi_text_trim(smi_text_span(start, (size_t)(end - start))).n == 0;
            return n;
        }
        if (n < max)
            cells[n++] = smi_text_span(start, (size_t)(next - start));
        bar = next;
    }
}

void smi_text_cols_split(struct smi_span cell, struct smi_cols *cols)
{
    size_t i = 0;

    cols->n = 0;
    while (i < cell.n && cols->n < SMI_TEXT_MAX_COLS) {
        size_t start, last;

        while (i < cell.n && is_blank(cell.p[i]))
            i++;
        if (i >= cell.n)
            break;
        start = last = i;
        while (i < cell.n) {
            size_t run = 0;

            while (i + run < cell.n && is_blank(cell.p[i + run]))
                run++;
            if (run >= 2 || i + run >= cell.n)
                break;
            i += run;
            last = i;
            i++;
        }
        cols->name[cols->n] = smi_text_span(cell.p + start, last + 1 - start);
        cols->start[cols->n++] = start;
        i = last + 1;
    }
}

/* Whitespace tokens of a cell, with "a / b", "a/ b" and "a /b" joined into one token. */
static size_t cell_tokens(struct smi_span cell, struct tok *t)
{
    size_t n = 0, i = 0;

    while (i < cell.n) {
        size_t s;

        while (i < cell.n && is_blank(cell.p[i]))
            i++;
        if (i >= cell.n)
            break;
        s = i;
        while (i < cell.n && !is_blank(cell.p[i]))
            i++;
        if (n && (cell.p[t[n - 1].e - 1] == '/' || cell.p[s] == '/' || n == TOK_MAX))
            t[n - 1].e = i;
        else
            t[n++] = (struct tok){s, i};
    }
    return n;
}

/* Joins tokens separated by exactly one blank ("GeForce GTX 108...", "E. Process"). */
static size_t cell_fields(const struct tok *t, size_t nt, struct tok *f)
{
    size_t n = 0;

    for (size_t i = 0; i < nt; i++) {
        if (n && t[i].s == f[n - 1].e + 1)
            f[n - 1].e = t[i].e;
        else
            f[n++] = t[i];
    }
    return n;
}

static void put_value(struct smi_span cell, struct smi_span *v, const struct tok *t)
{
    if (!v->n)
        *v = smi_text_span(cell.p + t->s, t->e - t->s);
    else
        v->n = t->e - (size_t)(v->p - cell.p);
}

void smi_text_cols_assign(struct smi_span cell, const struct smi_cols *cols, struct smi_span *vals)
{
    struct tok t[TOK_MAX], f[TOK_MAX];
    size_t nt, nf;

    for (size_t i = 0; i < cols->n; i++)
        vals[i] = smi_text_span(cell.p, 0);
    if (cols->n == 1) {
        vals[0] = smi_text_trim(cell);
        return;
    }
    nt = cell_tokens(cell, t);
    nf = cell_fields(t, nt, f);
    if (nf == cols->n || nt == cols->n) {
        const struct tok *src = nf == cols->n ? f : t;

        for (size_t i = 0; i < cols->n; i++)
            put_value(cell, &vals[i], &src[i]);
        return;
    }
    for (size_t i = 0; i < nf; i++) {
        size_t c = 0;

        while (c + 1 < cols->n && cols->start[c + 1] <= f[i].s)
            c++;
        put_value(cell, &vals[c], &f[i]);
    }
}

void smi_text_hdr_reset(struct smi_hdr *h)
{
    h->nrows = 0;
}

bool smi_text_hdr_add(struct smi_hdr *h, struct smi_span line)
{
    struct smi_hrow *row;
    struct smi_span cells[SMI_TEXT_MAX_CELLS];
    bool closed;

    if (h->nrows >= SMI_TEXT_MAX_HROWS)
        return false;
    row = &h->rows[h->nrows++];
    row->line = line;
    row->ncells = smi_text_cells(line, cells, SMI_TEXT_MAX_CELLS, &closed);
    for (size_t c = 0; c < row->ncells; c++)
        smi_text_cols_split(cells[c], &row->cols[c]);
    return true;
}

bool smi_text_hdr_has(const struct smi_hdr *h, const char *key)
{
    for (size_t i = 0; i < h->nrows; i++)
        for (size_t c = 0; c < h->rows[i].ncells; c++)
            for (size_t j = 0; j < h->rows[i].cols[c].n; j++)
                if (smi_text_eq(smi_text_key(h->rows[i].cols[c].name[j]), key))
                    return true;
    return false;
}

bool smi_text_hdr_visit(const struct smi_hdr *h, size_t k, struct smi_span line, smi_field_fn fn,
                        void *ctx)
{
    struct smi_span cells[SMI_TEXT_MAX_CELLS], vals[SMI_TEXT_MAX_COLS];
    const struct smi_hrow *row;
    size_t n;
    bool closed;

    n = smi_text_cells(line, cells, SMI_TEXT_MAX_CELLS, &closed);
    if (!closed)
        return false;
    if (k >= h->nrows)
        return true;
    row = &h->rows[k];
    for (size_t c = 0; c < n && c < row->ncells; c++) {
        smi_text_cols_assign(cells[c], &row->cols[c], vals);
        for (size_t j = 0; j < row->cols[c].n; j++)
            fn(ctx, smi_text_key(row->cols[c].name[j]), smi_text_trim(vals[j]));
    }
    return true;
}

struct smi_span smi_text_key(struct smi_span s)
{
    s = smi_text_trim(s);
    if (s.n && (s.p[s.n - 1] == ')' || s.p[s.n - 1] == ']')) {
        char open = s.p[s.n - 1] == ')' ? '(' : '[';
        size_t i = s.n - 1;

        while (i > 0 && s.p[i] != open)
            i--;
        if (s.p[i] == open && i > 0)
            s.n = i;
    }
    return smi_text_trim(s);
}

bool smi_text_eq(struct smi_span s, const char *lit)
{
    size_t n = strlen(lit);

    s = smi_text_trim(s);
    if (s.n != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower(s.p[i]) != lower(lit[i]))
            return false;
    return true;
}

bool smi_text_starts(struct smi_span s, const char *lit)
{
    size_t n = strlen(lit);

    s = smi_text_trim(s);
    if (s.n < n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower(s.p[i]) != lower(lit[i]))
            return false;
    return true;
}

bool smi_text_find(struct smi_span s, const char *lit, size_t *at)
{
    size_t n = strlen(lit);

    for (size_t i = 0; n && i + n <= s.n; i++) {
        if (s.p[i] == lit[0] && memcmp(s.p + i, lit, n) == 0) {
            if (at)
                *at = i;
            return true;
        }
    }
    return false;
}

bool smi_text_unknown(struct smi_span s)
{
    s = smi_text_trim(s);
    if (!s.n)
        return true;
    if (s.p[0] == '[' && s.p[s.n - 1] == ']')
        return true;
    return smi_text_eq(s, "N/A") || smi_text_eq(s, "NA") || smi_text_eq(s, "-") ||
           smi_text_eq(s, "--") || smi_text_eq(s, "ERR!");
}

/* Checks that what follows the number is nothing, or the unit. */
static bool unit_ok(struct smi_span rest, const char *unit)
{
    rest = smi_text_trim(rest);
    return !rest.n || (unit && smi_text_eq(rest, unit));
}

/* Digits at the start of s: value, count of digits, and false on overflow. */
static bool digits(struct smi_span s, size_t *i, int64_t *v, size_t *nd)
{
    *v = 0;
    *nd = 0;
    while (*i < s.n && s.p[*i] >= '0' && s.p[*i] <= '9') {
        int d = s.p[*i] - '0';

        if (*v > (INT64_MAX - d) / 10)
            return false;
        *v = *v * 10 + d;
        (*i)++;
        (*nd)++;
    }
    return true;
}

bool smi_text_double(struct smi_span s, const char *unit, double *out)
{
    int64_t ip = 0, fp = 0;
    size_t i = 0, nd = 0, nf = 0;
    double scale = 1.0;

    s = smi_text_trim(s);
    if (smi_text_unknown(s) || !digits(s, &i, &ip, &nd) || !nd || ip > 1000000000000000)
        return false;
    if (i < s.n && s.p[i] == '.') {
        size_t j = ++i;

        while (i < s.n && s.p[i] >= '0' && s.p[i] <= '9')
            i++;
        for (size_t k = j; k < i && k < j + 9; k++, nf++)
            fp = fp * 10 + (s.p[k] - '0');
    }
    if (!unit_ok(smi_text_span(s.p + i, s.n - i), unit))
        return false;
    for (size_t k = 0; k < nf; k++)
        scale *= 10.0;
    *out = (double)ip + (double)fp / scale;
    return true;
}

bool smi_text_int(struct smi_span s, const char *unit, int64_t *out)
{
    double d;

    if (!smi_text_double(s, unit, &d))
        return false;
    *out = (int64_t)(d + 0.5);
    return true;
}

bool smi_text_pair(struct smi_span s, struct smi_span *a, struct smi_span *b)
{
    const char *slash = memchr(s.p, '/', s.n);

    if (!slash)
        return false;
    *a = smi_text_trim(smi_text_span(s.p, (size_t)(slash - s.p)));
    *b = smi_text_trim(smi_text_span(slash + 1, s.n - (size_t)(slash + 1 - s.p)));
    return true;
}

void smi_text_copy(struct smi_span s, char *dst, size_t cap)
{
    size_t n;

    s = smi_text_trim(s);
    n = s.n < cap - 1 ? s.n : cap - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s.p[i];

        dst[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    dst[n] = '\0';
}

bool smi_text_word_after(struct smi_span s, const char *lit, struct smi_span *word)
{
    size_t at, i;

    if (!smi_text_find(s, lit, &at))
        return false;
    i = at + strlen(lit);
    while (i < s.n && is_blank(s.p[i]))
        i++;
    word->p = s.p + i;
    while (i < s.n && !is_blank(s.p[i]) && s.p[i] != '|')
        i++;
    word->n = (size_t)(s.p + i - word->p);
    return word->n > 0;
}

void smi_text_skip(struct smi_result *r, unsigned lineno)
{
    if (!r->skipped++)
        r->skipped_line = lineno;
}

int smi_text_fail(struct smi_result *r, struct app_err *err, int code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
    va_end(ap);
    r->status = code;
    return app_err_set(err, code, "%s", r->msg);
}

int smi_text_done(struct smi_result *r, struct app_err *err, const char *tool)
{
    r->status = 0;
    r->msg[0] = '\0';
    if (r->skipped)
        snprintf(r->msg, sizeof(r->msg),
                 "%s: ignored %u malformed or cut-off line(s), the first at line %u", tool,
                 r->skipped, r->skipped_line);
    app_err_set(err, 0, "%s", r->msg);
    return 0;
}
