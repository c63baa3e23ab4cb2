/* Slurm / pdsh host-list expressions and hostfiles expanded into host names, and the check that
 * a name is safe as a remote-shell word (reference: shared multinode.md §1.1, §2).
 *
 * Invariants: every name appended passes hostlist_name_ok, so nothing that looks like an ssh
 * option or shell syntax ever reaches a remote shell; a list never holds more than
 * HOSTLIST_MAX names; on error the list is left exactly as the caller passed it, so a bad line
 * never leaves half a hostfile behind. Each token is validated and its hosts counted before
 * anything is allocated, so hostile input such as `n[0-999999999]` costs no memory. The
 * capacity of v is implied by n (the next power of two), which keeps struct hostlist two
 * fields wide. Pure: no I/O, no global state; any thread. */
#include "ranktop/remote/hostlist.h"

#include "ranktop/base/hash.h"
#include "ranktop/base/status.h"
#include "ranktop/base/util.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOST_MAX 253                           /* bytes of a DNS name */
#define USER_MAX 64                            /* bytes of the user in user@host */
#define NAME_BUF (USER_MAX + 1 + HOST_MAX + 1) /* one byte past the longest safe name */
#define NUM_MAX 1000000000UL /* a larger bound is a typo or an attack, never a cluster */
#define QUOTE_MAX 120        /* bytes of an expression quoted in a message */
#define SEPS "\t, \n"        /* Slurm's token separators (outside brackets) */

/* One token of an expression being expanded: [s, e) of expr, and where its hosts go. */
struct tok {
    const char *expr; /* the whole expression, quoted in messages */
    const char *s, *e;
    struct hostlist *out;
    struct app_err *err;
};

/* One bracket item, "LO" or "LO-HI"; width is the zero-padding width, LO's digits as written. */
struct item {
    unsigned long lo, hi;
    int width;
};

/* Copies s into dst (n > 4 bytes) with unprintable bytes as '?' and a long tail cut to "...",
 * so a message never carries terminal escapes from a hostile hostfile into the UI. */
static void hostlist_quote(char *dst, size_t n, const char *s, size_t len)
{
    size_t i = 0, k = 0;

    for (; k < len && i + 4 < n; k++) {
        unsigned char c = (unsigned char)s[k];

        dst[i++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (k < len) {
        memcpy(dst + i, "...", 3);
        i += 3;
    }
    dst[i] = '\0';
}

/* Sets err to "bad host list 'EXPR': DETAIL" and returns code. */
__attribute__((format(printf, 3, 4))) static int hostlist_fail(const struct tok *t, int code,
                                                               const char *fmt, ...)
{
    char q[QUOTE_MAX], detail[320]; /* fits err->msg with q and the prefix */
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    hostlist_quote(q, sizeof(q), t->expr, strlen(t->expr));
    return app_err_set(t->err, code, "bad host list '%s': %s", q, detail);
}

/* Fails on the unexpected byte c found `where`, shown printable or as hex. */
static int hostlist_fail_at(const struct tok *t, char c, const char *where)
{
    unsigned char u = (unsigned char)c;

    if (u >= 0x20 && u < 0x7f)
        return hostlist_fail(t, APP_E_USAGE, "unexpected '%c' %s", c, where);
    return hostlist_fail(t, APP_E_USAGE, "unexpected byte 0x%02x %s", u, where);
}

static bool hostlist_word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

/* True when [s, s+len) is 1..max word characters not starting with '-' (an option to ssh) or
 * '.' (a relative or hidden name). */
static bool hostlist_word_ok(const char *s, size_t len, size_t max)
{
    if (len == 0 || len > max || s[0] == '-' || s[0] == '.')
        return false;
    for (size_t i = 0; i < len; i++)
        if (!hostlist_word_char(s[i]))
            return false;
    return true;
}

bool hostlist_name_ok(const char *name)
{
    const char *at;

    if (!name)
        return false;
    at = strchr(name, '@');
    if (at) {
        if (!hostlist_word_ok(name, (size_t)(at - name), USER_MAX))
            return false;
        name = at + 1;
    }
    return hostlist_word_ok(name, strlen(name), HOST_MAX);
}

/* Parses the decimal bound at *p, moving *p past it; what names it in messages. Returns 0 or a
 * negative status. Values above 10^9 are refused while reading, so nothing overflows. */
static int hostlist_number(const struct tok *t, const char **p, unsigned long *val,
                           const char *what)
{
    const char *q = *p;
    unsigned long v = 0;

    for (; *q >= '0' && *q <= '9'; q++) {
        unsigned long d = (unsigned long)(*q - '0');

        if (v > (NUM_MAX - d) / 10)
            return hostlist_fail(t, APP_E_USAGE, "number larger than 10^9 in brackets");
        v = v * 10 + d;
        if (q - *p >= HOST_MAX)
            return hostlist_fail(t, APP_E_USAGE, "number longer than %d digits", HOST_MAX);
    }
    if (q == *p && (*q == ',' || *q == ']'))
        return hostlist_fail(t, APP_E_USAGE, "empty %s in brackets", what);
    if (q == *p)
        return hostlist_fail_at(t, *q, "in brackets, expected a number");
    *val = v;
    *p = q;
    return 0;
}

/* Parses the item "LO" or "LO-HI" at *p and moves *p to the ',' or ']' that ends it. The
 * token's brackets are known to balance, so a ']' ends every scan before the token does. */
static int hostlist_item(const struct tok *t, const char **p, struct item *it)
{
    const char *start = *p;
    int rc = hostlist_number(t, p, &it->lo, "item");

    if (rc < 0)
        return rc;
    it->width = (int)(*p - start);
    it->hi = it->lo;
    if (**p == '-') {
        (*p)++;
        rc = hostlist_number(t, p, &it->hi, "upper bound");
        if (rc < 0)
            return rc;
        if (it->hi < it->lo)
            return hostlist_fail(t, APP_E_USAGE, "range %lu-%lu runs backwards", it->lo, it->hi);
    }
    if (**p != ',' && **p != ']')
        return hostlist_fail_at(t, **p, "in brackets");
    return 0;
}

/* Finds the end of the token at t->s: the first separator outside brackets, or the string's
 * end. Checks that brackets balance and never nest, and that there is no '{' (a Slurm 25.05
 * hostlist function such as feature{gpu}, which only slurmctld can expand). */
static int hostlist_token_end(struct tok *t)
{
    bool open = false;
    const char *p = t->s;

    for (; *p && (open || !strchr(SEPS, *p)); p++) {
        if (*p == '[' && open)
            return hostlist_fail(t, APP_E_USAGE, "nested '['");
        if (*p == ']' && !open)
            return hostlist_fail(t, APP_E_USAGE, "']' without '['");
        if (*p == '{' || *p == '}')
            return hostlist_fail(t, APP_E_USAGE,
                                 "hostlist functions ('{') are not supported; expand the "
                                 "list with `scontrol show hostnames` first");
        if (*p == '[' || *p == ']')
            open = *p == '[';
    }
    if (open)
        return hostlist_fail(t, APP_E_USAGE, "'[' without ']'");
    t->e = p;
    return 0;
}

/* Validates every bracket group of the token and counts its hosts into *count; a count past
 * limit is held at limit + 1, so the product never overflows. */
static int hostlist_count(const struct tok *t, size_t limit, size_t *count)
{
    uint64_t total = 1; /* at most (limit + 1)^2 before it is held */

    for (const char *p = t->s; p < t->e; p++) {
        size_t n = 0;

        if (*p != '[')
            continue;
        for (p++;; p++) {
            struct item it;
            int rc = hostlist_item(t, &p, &it);

            if (rc < 0)
                return rc;
            n += it.hi - it.lo + 1;
            if (n > limit)
                n = limit + 1;
            if (*p == ']')
                break;
        }
        total *= n;
        if (total > limit)
            total = limit + 1;
    }
    *count = (size_t)total;
    return 0;
}

/* Appends name (len bytes) to the list, whose room was reserved, when it is a safe host word. */
static int hostlist_push(const struct tok *t, const char *name, size_t len)
{
    char q[QUOTE_MAX];

    if (!hostlist_name_ok(name)) {
        hostlist_quote(q, sizeof(q), name, len);
        return hostlist_fail(t, APP_E_USAGE,
                             "bad host name '%s' (want 1-253 bytes of A-Z a-z 0-9 . _ -, "
                             "an optional user@, no leading '-' or '.')",
                             q);
    }
    t->out->v[t->out->n++] = x_strdup(name);
    return 0;
}

/* Appends every name the token yields from p on, after the len bytes already in name (its
 * size is NAME_BUF + 1). Groups expand left to right, the left one varying slowest, as Slurm's
 * recursion does for two groups. A name that outgrows NAME_BUF bytes is cut there and refused
 * (no safe name is that long); each level adds at least one digit, so the recursion is at
 * most NAME_BUF deep. */
static int hostlist_gen(const struct tok *t, const char *p, char *name, size_t len)
{
    const char *b = memchr(p, '[', (size_t)(t->e - p));
    size_t lit = (size_t)((b ? b : t->e) - p);
    const char *q, *close;

    if (len + lit > NAME_BUF) {
        memcpy(name + len, p, NAME_BUF - len);
        name[NAME_BUF] = '\0';
        return hostlist_push(t, name, NAME_BUF);
    }
    memcpy(name + len, p, lit);
    len += lit;
    name[len] = '\0';
    if (!b)
        return hostlist_push(t, name, len);
    close = memchr(b, ']', (size_t)(t->e - b));
    for (q = b + 1;; q++) {
        struct item it;
        int rc = hostlist_item(t, &q, &it); /* validated by hostlist_count: cannot fail */

        for (unsigned long v = it.lo; rc == 0 && v <= it.hi; v++) {
            int w = snprintf(name + len, NAME_BUF + 1 - len, "%0*lu", it.width, v);

            if (w < 0 || (size_t)w > NAME_BUF - len)
                return hostlist_push(t, name, NAME_BUF);
            rc = hostlist_gen(t, close + 1, name, len + (size_t)w);
        }
        if (rc < 0 || *q == ']')
            return rc;
    }
}

/* The allocated length of a vector holding n names: 0, or the next power of two. */
static size_t hostlist_cap(size_t n)
{
    size_t c = 1;

    if (n == 0)
        return 0;
    while (c < n)
        c <<= 1;
    return c;
}

/* Makes room for extra more names (the total is at most HOSTLIST_MAX). */
static void hostlist_reserve(struct hostlist *l, size_t extra)
{
    size_t want = l->n + extra;

    if (extra && (l->n == 0 || want > hostlist_cap(l->n)))
        l->v = x_reallocarray(l->v, hostlist_cap(want), sizeof(*l->v));
}

/* Frees the names past the first n. */
static void hostlist_truncate(struct hostlist *l, size_t n)
{
    while (l->n > n)
        free(l->v[--l->n]);
}

/* Expands the token at t->s (not a separator) and moves t->s past it. */
static int hostlist_token(struct tok *t)
{
    char name[NAME_BUF + 1];
    size_t room = t->out->n < HOSTLIST_MAX ? HOSTLIST_MAX - t->out->n : 0;
    size_t count;
    int rc = hostlist_token_end(t);

    if (rc < 0)
        return rc;
    rc = hostlist_count(t, room, &count);
    if (rc < 0)
        return rc;
    if (count > room)
        return hostlist_fail(t, APP_E_LIMIT, "more than %d hosts", HOSTLIST_MAX);
    hostlist_reserve(t->out, count);
    rc = hostlist_gen(t, t->s, name, 0);
    t->s = t->e;
    return rc;
}

int hostlist_expand(const char *expr, struct hostlist *out, struct app_err *err)
{
    struct tok t = {.expr = expr ? expr : "", .out = out, .err = err};
    size_t start = out->n;
    int rc = 0;

    t.s = t.expr;
    while (rc == 0) {
        t.s += strspn(t.s, SEPS);
        if (!*t.s)
            break;
        rc = hostlist_token(&t);
    }
    if (rc < 0)
        hostlist_truncate(out, start);
    return rc;
}

static bool hostlist_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Expands one hostfile line [s, e), without its '\n', numbered lineno. */
static int hostlist_line(const char *s, const char *e, size_t lineno, struct hostlist *out,
                         struct app_err *err)
{
    const char *hash = memchr(s, '#', (size_t)(e - s));
    struct app_err sub = {0};
    char *line;
    int rc;

    if (hash)
        e = hash;
    while (s < e && hostlist_blank(*s))
        s++;
    while (e > s && hostlist_blank(e[-1]))
        e--;
    if (s == e)
        return 0;
    /* A NUL would silently cut the line short; a text hostfile never holds one. */
    if (memchr(s, '\0', (size_t)(e - s)))
        return app_err_set(err, APP_E_USAGE, "line %zu: NUL byte in a hostfile", lineno);
    line = x_strndup(s, (size_t)(e - s));
    rc = hostlist_expand(line, out, &sub);
    free(line);
    if (rc < 0)
        app_err_set(err, rc, "line %zu: %s", lineno, sub.msg);
    return rc;
}

int hostlist_parse_file(const char *buf, size_t len, struct hostlist *out, struct app_err *err)
{
    const char *p = buf, *end = buf + len;
    size_t start = out->n, lineno = 0;
    int rc = 0;

    if (len == 0)
        return 0;
    while (rc == 0 && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;

        rc = hostlist_line(p, le, ++lineno, out, err);
        p = nl ? nl + 1 : end;
    }
    if (rc < 0)
        hostlist_truncate(out, start);
    return rc;
}

void hostlist_dedup(struct hostlist *l)
{
    size_t cap = 16, kept = 0;
    const char **seen;

    while (cap < l->n * 2)
        cap *= 2;
    seen = x_calloc(cap, sizeof(*seen));
    for (size_t i = 0; i < l->n; i++) {
        size_t k = (size_t)hash_str(l->v[i]) & (cap - 1);

        while (seen[k] && strcmp(seen[k], l->v[i]))
            k = (k + 1) & (cap - 1);
        if (seen[k]) {
            free(l->v[i]);
            continue;
        }
        seen[k] = l->v[i];
        l->v[kept++] = l->v[i];
    }
    l->n = kept;
    free(seen);
}

void hostlist_free(struct hostlist *l)
{
    hostlist_truncate(l, 0);
    free(l->v);
    l->v = NULL;
}
