/* Process memory from /proc: smaps_rollup, status and smaps parsers, the readers around them,
 * and the "which mappings grew" comparison.
 *
 * Owns no state: the procps library's fallback reader (procps.h, one file per variant) keeps
 * and serialises its own. The parsers and memstat_top_growth are pure: they see only the
 * buffer or records they are given, allocate only what they return, and accept lines of the
 * kernel's exact shape ("Key:   123 kB"), ignoring keys they do not know. Every parsed record
 * is complete or the call fails: a file cut short mid-line or mid-mapping is APP_E_PARSE, never
 * a silently low figure. Any thread may call any function here; the engine's
 * memory thread calls memstat_read once a second per rank, memstat_read_maps only on request. */
#include "ranktop/proc/memstat.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "procps.h"
#include "ranktop/base/util.h"

#define ROLLUP_MAX_BYTES (64u << 10)
#define STATUS_MAX_BYTES (64u << 10)

/* ---- line and value scanning ----------------------------------------------------------- */

struct lines {
    const char *buf;
    size_t len, pos;
    unsigned lineno; /* 1-based number of the line last returned */
};

/* Returns the next line (without its '\n') or false at the end. *whole is false for a last
 * line with no newline, i.e. input cut short. */
static bool lines_next(struct lines *it, const char **line, size_t *ll, bool *whole)
{
    const char *nl;

    if (it->pos >= it->len)
        return false;
    *line = it->buf + it->pos;
    nl = memchr(*line, '\n', it->len - it->pos);
    *ll = nl ? (size_t)(nl - *line) : it->len - it->pos;
    *whole = nl != NULL;
    it->pos += *ll + 1;
    it->lineno++;
    return true;
}

static bool is_key_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

/* Splits "Key:<value>"; false unless the line starts with a non-empty key of [A-Za-z0-9_]. */
static bool kv_split(const char *line, size_t ll, size_t *klen, const char **val, size_t *vlen)
{
    size_t i = 0;

    while (i < ll && is_key_char(line[i]))
        i++;
    if (i == 0 || i == ll || line[i] != ':')
        return false;
    *klen = i;
    *val = line + i + 1;
    *vlen = ll - i - 1;
    return true;
}

static bool key_is(const char *line, size_t klen, const char *name)
{
    return strlen(name) == klen && memcmp(line, name, klen) == 0;
}

/* Parses "   123 kB" (blanks, decimal digits, optional " kB", blanks). */
static bool parse_kb(const char *v, size_t n, int64_t *kb)
{
    size_t i = 0;
    int64_t x = 0;

    while (i < n && (v[i] == ' ' || v[i] == '\t'))
        i++;
    if (i == n || v[i] < '0' || v[i] > '9')
        return false;
    for (; i < n && v[i] >= '0' && v[i] <= '9'; i++) {
        if (x > (INT64_MAX - 9) / 10)
            return false;
        x = x * 10 + (v[i] - '0');
    }
    while (i < n && v[i] == ' ')
        i++;
    if (i + 1 < n && v[i] == 'k' && v[i + 1] == 'B')
        i += 2;
    while (i < n && (v[i] == ' ' || v[i] == '\t'))
        i++;
    *kb = x;
    return i == n;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Reads lower-case hex digits at *p (at least one, at most 16) and advances *p. */
static bool take_hex(const char **p, const char *end, uint64_t *v)
{
    const char *s = *p;
    uint64_t x = 0;

    while (s < end && hexval(*s) >= 0 && s - *p < 16)
        x = x << 4 | (uint64_t)hexval(*s++);
    if (s == *p || (s < end && hexval(*s) >= 0))
        return false;
    *v = x;
    *p = s;
    return true;
}

static bool take_char(const char **p, const char *end, char c)
{
    if (*p >= end || **p != c)
        return false;
    (*p)++;
    return true;
}

/* True for a mapping header line: lower-case hex digits, then '-'. */
static bool is_map_header(const char *line, size_t ll)
{
    size_t i = 0;

    while (i < ll && hexval(line[i]) >= 0)
        i++;
    return i > 0 && i < ll && line[i] == '-';
}

/* ---- smaps_rollup and status ------------------------------------------------------------ */

enum rollup_slot { R_RSS, R_PSS, R_PCLEAN, R_PDIRTY, R_PHUGE, R_SWAP, R_ANON, R_NSLOTS };

static const char *const rollup_keys[R_NSLOTS] = {
    "Rss", "Pss", "Private_Clean", "Private_Dirty", "Private_Hugetlb", "Swap", "Anonymous",
};

static void rollup_store(const int64_t *v, unsigned seen, struct memstat *out)
{
    memset(out, 0, sizeof(*out));
    out->rss_kb = v[R_RSS];
    out->pss_kb = v[R_PSS];
    out->valid = MEMSTAT_RSS | MEMSTAT_PSS;
    if ((seen & (1u << R_PCLEAN)) && (seen & (1u << R_PDIRTY))) {
        out->uss_kb = v[R_PCLEAN] + v[R_PDIRTY] + v[R_PHUGE];
        out->valid |= MEMSTAT_USS;
    }
    if (seen & (1u << R_SWAP)) {
        out->swap_kb = v[R_SWAP];
        out->valid |= MEMSTAT_SWAP;
    }
    if (seen & (1u << R_ANON)) {
        out->anon_kb = v[R_ANON];
        out->valid |= MEMSTAT_ANON;
    }
}

int memstat_parse_rollup(const char *buf, size_t len, struct memstat *out, struct app_err *err)
{
    struct lines it = {buf, len, 0, 0};
    int64_t v[R_NSLOTS] = {0};
    unsigned seen = 0;
    const char *line, *val;
    size_t ll, klen, vlen;
    bool whole;

    memset(out, 0, sizeof(*out));
    while (lines_next(&it, &line, &ll, &whole)) {
        if (!whole)
            return app_err_set(err, APP_E_PARSE, "smaps_rollup line %u: cut short", it.lineno);
        if (is_map_header(line, ll) || !kv_split(line, ll, &klen, &val, &vlen))
            continue; /* the "[rollup]" header, or text of no interest */
        for (int s = 0; s < R_NSLOTS; s++) {
            if (!key_is(line, klen, rollup_keys[s]))
                continue;
            if (!parse_kb(val, vlen, &v[s]))
                return app_err_set(err, APP_E_PARSE, "smaps_rollup line %u: bad %s value",
                                   it.lineno, rollup_keys[s]);
            seen |= 1u << s;
        }
    }
    if (!(seen & (1u << R_RSS)) || !(seen & (1u << R_PSS)))
        return app_err_set(err, APP_E_PARSE, "smaps_rollup: no Rss or Pss (%u lines)", it.lineno);
    rollup_store(v, seen, out);
    return 0;
}

/* Stores one status value; returns false when its text is malformed. */
static bool status_field(const char *line, size_t klen, const char *val, size_t vlen,
                         struct memstat *out)
{
    static const struct {
        const char *key;
        uint32_t bit;
        size_t off;
    } keys[] = {
        {"VmRSS", MEMSTAT_RSS, offsetof(struct memstat, rss_kb)},
        {"VmSwap", MEMSTAT_SWAP, offsetof(struct memstat, swap_kb)},
        {"RssAnon", MEMSTAT_ANON, offsetof(struct memstat, anon_kb)},
    };

    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        int64_t kb;

        if (!key_is(line, klen, keys[i].key))
            continue;
        if (!parse_kb(val, vlen, &kb))
            return false;
        memcpy((char *)out + keys[i].off, &kb, sizeof(kb));
        out->valid |= keys[i].bit;
    }
    return true;
}

int memstat_parse_status(const char *buf, size_t len, struct memstat *out, struct app_err *err)
{
    struct lines it = {buf, len, 0, 0};
    const char *line, *val;
    size_t ll, klen, vlen;
    bool whole;

    memset(out, 0, sizeof(*out));
    while (lines_next(&it, &line, &ll, &whole)) {
        if (!whole)
            return app_err_set(err, APP_E_PARSE, "status line %u: cut short", it.lineno);
        if (ll == 0)
            continue;
        if (!kv_split(line, ll, &klen, &val, &vlen))
            return app_err_set(err, APP_E_PARSE, "status line %u: no 'Key:'", it.lineno);
        if (!status_field(line, klen, val, vlen, out))
            return app_err_set(err, APP_E_PARSE, "status line %u: bad %.*s value", it.lineno,
                               (int)klen, line);
    }
    return 0;
}

/* The State letter of a status text ('R', 'S', 'Z'...), or 0 when there is none. */
static char status_state(const char *buf, size_t len)
{
    const char *p = buf, *end = buf + len;

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);

        if (ll > 7 && memcmp(p, "State:", 6) == 0) {
            for (size_t i = 6; i < ll; i++)
                if (p[i] != ' ' && p[i] != '\t')
                    return p[i];
            return 0;
        }
        p += ll + 1;
    }
    return 0;
}

/* ---- smaps ------------------------------------------------------------------------------ */

/* Parses "start-end perms offset dev:dev inode   path". */
static bool smaps_header(const char *line, size_t ll, struct memmap *m)
{
    const char *p = line, *end = line + ll;
    uint64_t off, dev, inode = 0;

    memset(m, 0, sizeof(*m));
    if (!take_hex(&p, end, &m->start) || !take_char(&p, end, '-') || !take_hex(&p, end, &m->end) ||
        !take_char(&p, end, ' ') || end - p < 5 || m->end < m->start)
        return false;
    memcpy(m->perms, p, 4);
    p += 4;
    if (!take_char(&p, end, ' ') || !take_hex(&p, end, &off) || !take_char(&p, end, ' ') ||
        !take_hex(&p, end, &dev) || !take_char(&p, end, ':') || !take_hex(&p, end, &dev) ||
        !take_char(&p, end, ' '))
        return false;
    if (p == end || *p < '0' || *p > '9')
        return false;
    while (p < end && *p >= '0' && *p <= '9')
        inode = inode * 10 + (uint64_t)(*p++ - '0');
    if (p < end && *p != ' ')
        return false;
    while (p < end && *p == ' ')
        p++;
    snprintf(m->path, sizeof(m->path), "%.*s", (int)(end - p), p);
    return true;
}

struct smaps_state {
    struct memmap *v;
    size_t n, cap;
    unsigned have; /* bit 0: Rss seen, bit 1: Pss seen, for v[n - 1] */
};

static int smaps_new_map(struct smaps_state *st, const struct memmap *m, unsigned lineno,
                         struct app_err *err)
{
    if (st->n > 0 && st->have != 3)
        return app_err_set(err, APP_E_PARSE, "smaps line %u: previous mapping has no Rss/Pss",
                           lineno);
    if (st->n == MEMSTAT_MAPS_MAX)
        return app_err_set(err, APP_E_LIMIT, "smaps: more than %u mappings", MEMSTAT_MAPS_MAX);
    if (st->n == st->cap) {
        st->cap = st->cap ? st->cap * 2 : 256;
        st->v = x_reallocarray(st->v, st->cap, sizeof(*st->v));
    }
    st->v[st->n++] = *m;
    st->have = 0;
    return 0;
}

static int smaps_field(struct smaps_state *st, const char *line, size_t ll, unsigned lineno,
                       struct app_err *err)
{
    const char *val;
    size_t klen, vlen;
    int64_t *dst = NULL;
    unsigned bit = 0;

    if (!kv_split(line, ll, &klen, &val, &vlen))
        return app_err_set(err, APP_E_PARSE, "smaps line %u: neither a mapping nor 'Key:'", lineno);
    if (st->n == 0)
        return app_err_set(err, APP_E_PARSE, "smaps line %u: field before any mapping", lineno);
    if (key_is(line, klen, "Rss")) {
        dst = &st->v[st->n - 1].rss_kb;
        bit = 1;
    } else if (key_is(line, klen, "Pss")) {
        dst = &st->v[st->n - 1].pss_kb;
        bit = 2;
    }
    if (dst && !parse_kb(val, vlen, dst))
        return app_err_set(err, APP_E_PARSE, "smaps line %u: bad %.*s value", lineno, (int)klen,
                           line);
    st->have |= bit;
    return 0;
}

static int smaps_line(struct smaps_state *st, const char *line, size_t ll, unsigned lineno,
                      struct app_err *err)
{
    struct memmap m;

    if (!is_map_header(line, ll))
        return smaps_field(st, line, ll, lineno, err);
    if (!smaps_header(line, ll, &m))
        return app_err_set(err, APP_E_PARSE, "smaps line %u: malformed mapping header", lineno);
    return smaps_new_map(st, &m, lineno, err);
}

int memstat_parse_smaps(const char *buf, size_t len, struct memmap **out, size_t *n,
                        struct app_err *err)
{
    struct lines it = {buf, len, 0, 0};
    struct smaps_state st = {NULL, 0, 0, 0};
    const char *line;
    size_t ll;
    bool whole;
    int rc = 0;

    while (rc == 0 && lines_next(&it, &line, &ll, &whole))
        rc = whole ? smaps_line(&st, line, ll, it.lineno, err)
                   : app_err_set(err, APP_E_PARSE, "smaps line %u: cut short", it.lineno);
    if (rc == 0 && st.n > 0 && st.have != 3)
        rc = app_err_set(err, APP_E_PARSE, "smaps: last mapping has no Rss/Pss");
    if (rc < 0) {
        free(st.v);
        st.v = NULL;
        st.n = 0;
    }
    *out = st.v;
    *n = st.n;
    return rc;
}

/* ---- readers ---------------------------------------------------------------------------- */

static bool proc_exists(int pid)
{
    char path[32];

    snprintf(path, sizeof(path), "/proc/%d", pid);
    return access(path, F_OK) == 0;
}

const char *memstat_procps(void)
{
    return RANKTOP_PROCPS;
}

/* True when pid is a zombie (its smaps is then empty, like a kernel thread's). */
static bool proc_is_zombie(int pid)
{
    char path[64], *buf;
    size_t len;
    bool z;

    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    if (file_read_all(path, STATUS_MAX_BYTES, &buf, &len) < 0)
        return !proc_exists(pid);
    z = status_state(buf, len) == 'Z';
    free(buf);
    return z;
}

int memstat_read_status(int pid, struct memstat *out, struct app_err *err)
{
    char path[64], *buf;
    size_t len;
    int rc;

    memset(out, 0, sizeof(*out));
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    rc = file_read_all(path, STATUS_MAX_BYTES, &buf, &len);
    if (rc == APP_E_NOTFOUND || rc == APP_E_GONE)
        return app_err_set(err, APP_E_GONE, "process %d is gone", pid);
    if (rc < 0)
        return app_err_set(err, rc, "cannot read %s: %s", path, app_status_str(rc));
    if (status_state(buf, len) == 'Z')
        rc = app_err_set(err, APP_E_GONE, "process %d is a zombie", pid);
    else
        rc = memstat_parse_status(buf, len, out, err);
    free(buf);
    return rc;
}

int memstat_read(int pid, struct memstat *out, struct app_err *err)
{
    char path[64], *buf;
    size_t len;
    int rc;

    snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
    rc = file_read_all(path, ROLLUP_MAX_BYTES, &buf, &len);
    if (rc == 0) {
        rc = memstat_parse_rollup(buf, len, out, err);
        free(buf);
        if (rc == 0)
            return 0;
    }
    /* Unreadable (permissions, no smaps_rollup before Linux 4.14, a zombie or kernel thread,
     * or a process that has just exited): the status figures say which, and are better than
     * nothing. */
    rc = procps_read(pid, out, err);
    if (rc != APP_E_IO)
        return rc;
    return memstat_read_status(pid, out, err);
}

int memstat_read_maps(int pid, struct memmap **out, size_t *n, struct app_err *err)
{
    char path[64], *buf;
    size_t len;
    int rc;

    *out = NULL;
    *n = 0;
    snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
    rc = file_read_all(path, MEMSTAT_SMAPS_MAX_BYTES, &buf, &len);
    if (rc == APP_E_NOTFOUND || rc == APP_E_GONE)
        return app_err_set(err, APP_E_GONE, "process %d is gone", pid);
    if (rc == APP_E_PERM)
        return app_err_set(err, rc,
                           "cannot read %s: permission denied (needs the same user "
                           "or CAP_SYS_PTRACE)",
                           path);
    if (rc < 0)
        return app_err_set(err, rc, "cannot read %s: %s", path, app_status_str(rc));
    if (len == 0 && proc_is_zombie(pid))
        rc = app_err_set(err, APP_E_GONE, "process %d has exited", pid);
    else if (len >= MEMSTAT_SMAPS_MAX_BYTES)
        rc = app_err_set(err, APP_E_LIMIT, "%s: larger than %u bytes", path,
                         MEMSTAT_SMAPS_MAX_BYTES);
    else
        rc = memstat_parse_smaps(buf, len, out, n, err);
    free(buf);
    return rc;
}

/* ---- growth ----------------------------------------------------------------------------- */

/* A named mapping group (all mappings of one path) or an anonymous run. */
struct group {
    const char *path; /* "" for an anonymous run */
    uint64_t start, end;
    int64_t rss_kb;
};

static int group_cmp_path(const void *a, const void *b)
{
    return strcmp(((const struct group *)a)->path, ((const struct group *)b)->path);
}

/* Splits maps into named groups (sorted by path, one per path) and anonymous runs (address
 * order, adjacent anonymous mappings merged). Both arrays must hold n entries. */
static void groups_build(const struct memmap *m, size_t n, struct group *named, size_t *nn,
                         struct group *anon, size_t *na)
{
    size_t k = 0;

    *nn = *na = 0;
    for (size_t i = 0; i < n; i++) {
        struct group g = {m[i].path, m[i].start, m[i].end, m[i].rss_kb};

        if (m[i].path[0])
            named[(*nn)++] = g;
        else if (*na > 0 && anon[*na - 1].end == g.start) {
            anon[*na - 1].end = g.end;
            anon[*na - 1].rss_kb += g.rss_kb;
        } else
            anon[(*na)++] = g;
    }
    if (*nn > 1)
        x_qsort(named, *nn, sizeof(*named), group_cmp_path);
    for (size_t i = 0; i < *nn; i++) {
        if (k > 0 && strcmp(named[k - 1].path, named[i].path) == 0)
            named[k - 1].rss_kb += named[i].rss_kb;
        else
            named[k++] = named[i];
    }
    *nn = k;
}

static void growth_add(struct memgrowth *c, size_t *nc, const struct group *g, int64_t before)
{
    struct memgrowth *r;

    if (g->rss_kb - before <= 0)
        return;
    r = &c[(*nc)++];
    if (g->path[0])
        snprintf(r->label, sizeof(r->label), "%s", g->path);
    else
        snprintf(r->label, sizeof(r->label), "anon 0x%" PRIx64 "-0x%" PRIx64, g->start, g->end);
    r->before_kb = before;
    r->after_kb = g->rss_kb;
    r->delta_kb = g->rss_kb - before;
}

/* Named groups: a merge walk over the two path-sorted lists. */
static void growth_named(const struct group *b, size_t nb, const struct group *a, size_t na,
                         struct memgrowth *c, size_t *nc)
{
    size_t i = 0;

    for (size_t j = 0; j < na; j++) {
        int cmp = 1;

        while (i < nb && (cmp = strcmp(b[i].path, a[j].path)) < 0)
            i++;
        growth_add(c, nc, &a[j], i < nb && cmp == 0 ? b[i].rss_kb : 0);
    }
}

/* Anonymous runs: each after-run against the before-runs it overlaps; a before-run is counted
 * with the first after-run it overlaps only. */
static void growth_anon(const struct group *b, size_t nb, const struct group *a, size_t na,
                        struct memgrowth *c, size_t *nc)
{
    size_t i = 0;

    for (size_t j = 0; j < na; j++) {
        int64_t before = 0;

        while (i < nb && b[i].end <= a[j].start)
            i++;
        while (i < nb && b[i].start < a[j].end)
            before += b[i++].rss_kb;
        growth_add(c, nc, &a[j], before);
    }
}

static int growth_cmp(const void *x, const void *y)
{
    const struct memgrowth *a = x, *b = y;

    if (a->delta_kb != b->delta_kb)
        return a->delta_kb > b->delta_kb ? -1 : 1;
    return strcmp(a->label, b->label);
}

size_t memstat_top_growth(const struct memmap *before, size_t nb, const struct memmap *after,
                          size_t na, struct memgrowth *out, size_t n)
{
    struct group *bn, *ba, *an, *aa;
    size_t nbn, nba, nan, naa, nc = 0;
    struct memgrowth *c;

    if (n == 0 || na == 0)
        return 0;
    bn = x_calloc(nb ? nb : 1, sizeof(*bn));
    ba = x_calloc(nb ? nb : 1, sizeof(*ba));
    an = x_calloc(na, sizeof(*an));
    aa = x_calloc(na, sizeof(*aa));
    c = x_calloc(na, sizeof(*c));
    groups_build(before, nb, bn, &nbn, ba, &nba);
    groups_build(after, na, an, &nan, aa, &naa);
    growth_named(bn, nbn, an, nan, c, &nc);
    growth_anon(ba, nba, aa, naa, c, &nc);
    x_qsort(c, nc, sizeof(*c), growth_cmp);
    if (nc > n)
        nc = n;
    memcpy(out, c, nc * sizeof(*c));
    free(bn);
    free(ba);
    free(an);
    free(aa);
    free(c);
    return nc;
}
