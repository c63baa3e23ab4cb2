/* Export plumbing shared by the three formats: the buffered JSON writer, the export plan
 * (lanes in rank order, small pids and tids, thread selection, runs clipped to the window),
 * and the atomic file replacement behind export_write.
 *
 * Invariants: lanes are in rank order (unknown ranks last); a lane's pid is the rank's real
 * pid unless another lane has it already, then an id no other lane has (xplan_init in
 * export_priv.h); the main thread comes first with tid == the lane's pid, other threads follow
 * in the order the history holds them with their kernel tids; ids are unique in a trace; a
 * thread's clipped runs are contiguous and in time order, so consumers only ever see time
 * move forward. export_write never leaves anything but the old or the complete new file at
 * the path. Runs on whichever thread calls it, on a history nobody else writes. */
#include "export_priv.h"

#include "ranktop/base/hash.h"
#include "ranktop/base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#define XB_CHUNK (1u << 20) /* bytes handed to fwrite at a time */

void xb_init(struct xbuf *b, FILE *f)
{
    memset(b, 0, sizeof(*b));
    b->f = f;
    b->cap = f ? XB_CHUNK : 4096;
    b->p = x_malloc(b->cap);
}

void xb_fini(struct xbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

int xb_flush(struct xbuf *b)
{
    errno = 0;
    if (b->f && b->len && !b->err && fwrite(b->p, 1, b->len, b->f) != b->len)
        b->err = errno ? errno : EIO;
    if (b->f)
        b->len = 0;
    return b->err;
}

void xb_put_slow(struct xbuf *b, const char *s, size_t n)
{
    if (!b->f) {
        while (b->len + n > b->cap)
            b->cap *= 2;
        b->p = x_reallocarray(b->p, b->cap, 1);
    } else {
        xb_flush(b);
        if (n > b->cap) {
            /* Larger than a chunk: hand it over directly rather than in pieces. */
            errno = 0;
            if (!b->err && fwrite(s, 1, n, b->f) != n)
                b->err = errno ? errno : EIO;
            return;
        }
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

void xb_u64(struct xbuf *b, uint64_t v)
{
    char tmp[24];
    size_t i = sizeof(tmp);

    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    xb_put(b, tmp + i, sizeof(tmp) - i);
}

void xb_i64(struct xbuf *b, int64_t v)
{
    if (v < 0) {
        xb_put(b, "-", 1);
        xb_u64(b, (uint64_t)0 - (uint64_t)v);
        return;
    }
    xb_u64(b, (uint64_t)v);
}

void xb_us(struct xbuf *b, uint64_t ns)
{
    unsigned frac = (unsigned)(ns % 1000);
    char d[4];
    size_t n = 3;

    xb_u64(b, ns / 1000);
    if (!frac)
        return;
    d[0] = '.';
    d[1] = (char)('0' + frac / 100);
    d[2] = (char)('0' + frac / 10 % 10);
    d[3] = (char)('0' + frac % 10);
    while (d[n] == '0')
        n--;
    xb_put(b, d, n + 1);
}

void xb_dbl(struct xbuf *b, double v)
{
    char tmp[40];
    int n;

    /* Integral values (counts, MiB) print as integers; the rest keep 15 significant digits,
     * which round-trips every value the collectors produce without "0.30000000000000004". */
    if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        xb_i64(b, (int64_t)v);
        return;
    }
    n = snprintf(tmp, sizeof(tmp), "%.15g", v);
    xb_put(b, tmp, (size_t)n);
}

static void xb_jesc_byte(struct xbuf *b, unsigned char c)
{
    static const char hex[] = "0123456789abcdef";
    char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};

    switch (c) {
    case '"':
        xb_put(b, "\\\"", 2);
        return;
    case '\\':
        xb_put(b, "\\\\", 2);
        return;
    case '\n':
        xb_put(b, "\\n", 2);
        return;
    case '\r':
        xb_put(b, "\\r", 2);
        return;
    case '\t':
        xb_put(b, "\\t", 2);
        return;
    default:
        xb_put(b, u, sizeof(u));
    }
}

void xb_jesc(struct xbuf *b, const char *str)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");

    while (*s) {
        const unsigned char *run = s;
        size_t n;

        while (*s >= 0x20 && *s < 0x80 && *s != '"' && *s != '\\')
            s++;
        xb_put(b, (const char *)run, (size_t)(s - run));
        if (!*s)
            break;
        if (*s < 0x80) {
            xb_jesc_byte(b, *s++);
        } else if ((n = utf8_valid_len(s))) {
            xb_put(b, (const char *)s, n);
            s += n;
        } else {
            xb_put(b, "\xEF\xBF\xBD", 3);
            s++;
        }
    }
}

void xb_jstr(struct xbuf *b, const char *s)
{
    xb_put(b, "\"", 1);
    xb_jesc(b, s);
    xb_put(b, "\"", 1);
}

const char *xframe_fn(const struct hframe *f)
{
    return f->function && f->function[0] ? f->function : "<unknown>";
}

const char *xframe_file(const struct hframe *f)
{
    return f->file ? f->file : "";
}

bool xframe_same(const struct history *h, uint32_t a, uint32_t b)
{
    const struct hframe *x = &h->frames[a], *y = &h->frames[b];

    return a == b || (x->line == y->line && x->native == y->native &&
                      hash_str_same(xframe_fn(x), xframe_fn(y)) &&
                      hash_str_same(xframe_file(x), xframe_file(y)));
}

void xopen_move(struct xopen *o, const struct history *h, uint32_t stack, uint64_t t,
                void (*slice)(void *ctx, bool begin, uint32_t frame, uint64_t t), void *ctx)
{
    const uint32_t *f = NULL;
    size_t n = 0, k = 0;

    if (stack != HSTACK_NONE) {
        f = history_stack_frames(h, stack);
        n = h->stacks[stack].nframes;
    }
    while (k < o->n && k < n && xframe_same(h, o->f[k], f[k]))
        k++;
    while (o->n > k)
        slice(ctx, false, o->f[--o->n], t);
    if (n > o->cap) {
        o->cap = n * 2;
        o->f = x_reallocarray(o->f, o->cap, sizeof(*o->f));
    }
    for (; k < n; k++) {
        slice(ctx, true, f[k], t);
        o->f[o->n++] = f[k];
    }
}

void xframe_label(struct xbuf *out, const struct hframe *f)
{
    const char *file = xframe_file(f);

    xb_puts(out, xframe_fn(f));
    if (!file[0] && f->line <= 0)
        return;
    xb_put(out, " (", 2);
    xb_puts(out, file);
    if (f->line > 0) {
        xb_put(out, ":", 1);
        xb_i64(out, f->line);
    }
    xb_put(out, ")", 1);
}

/* The first sample of a rank: its own record, else the earliest of its threads. */
static uint64_t rank_start(const struct hrank *r)
{
    uint64_t s = r->start;

    for (size_t i = 0; !r->start && i < r->nthreads; i++) {
        const struct hthread *t = &r->threads[i];
        uint64_t f = t->first ? t->first : (t->nruns ? history_run(t, 0)->t0 : 0);

        if (f && (!s || f < s))
            s = f;
    }
    return s;
}

static bool rank_in_window(const struct hrank *r, uint64_t start, const struct export_opts *o)
{
    if (o->to && start && start > o->to)
        return false;
    return !(o->from && r->exited && r->end < o->from);
}

/* "rank 3 (pid 5263, node01, gpu 3)"; the unknown parts are left out. */
static void lane_names(struct xlane *l)
{
    const struct hrank *r = l->r;
    char parts[160] = "";
    size_t n = 0;

    if (r->rank >= 0 || r->pid > 0)
        history_rank_label(r, l->label, sizeof(l->label));
    else
        snprintf(l->label, sizeof(l->label), "unknown");
    if (r->rank >= 0 && r->pid > 0)
        n += (size_t)snprintf(parts + n, sizeof(parts) - n, "pid %d", history_key_pid(r->pid));
    if (r->host[0] && n < sizeof(parts))
        n += (size_t)snprintf(parts + n, sizeof(parts) - n, "%s%.64s", n ? ", " : "", r->host);
    if (r->device[0] && n < sizeof(parts))
        n += (size_t)snprintf(parts + n, sizeof(parts) - n, "%s%.32s", n ? ", " : "", r->device);
    /* Last, so that "rank 3 (pid 5263, node02" still reads as everywhere else. */
    if (l->pid != history_key_pid(r->pid) && n < sizeof(parts))
        snprintf(parts + n, sizeof(parts) - n, "%sshown as %d", n ? ", " : "", l->pid);
    if (parts[0])
        snprintf(l->name, sizeof(l->name), "%s (%s)", l->label, parts);
    else
        snprintf(l->name, sizeof(l->name), "%s", l->label);
}

/* Ids claimed so far (all positive): an open-addressed set sized for `most` of them, so that
 * a lane of many threads without a kernel tid costs linear time, not cubic; synthetic ids are
 * handed out from `synth` up. */
struct ids {
    int *slot; /* 0 = empty */
    size_t cap;
    int synth;
};

static void ids_init(struct ids *s, size_t most)
{
    for (s->cap = 16; s->cap < 2 * most + 2;)
        s->cap *= 2;
    s->slot = x_calloc(s->cap, sizeof(*s->slot));
    s->synth = XPLAN_SYNTH_ID;
}

/* The slot of id, or the empty slot where it would go. */
static int *ids_at(const struct ids *s, int id)
{
    size_t j = ((uint32_t)id * 0x9e3779b1u) & (s->cap - 1);

    while (s->slot[j] && s->slot[j] != id)
        j = (j + 1) & (s->cap - 1);
    return &s->slot[j];
}

/* The first of the wanted ids (0: none) not claimed yet, else a synthetic one; claimed. */
static int id_claim(struct ids *s, int want1, int want2)
{
    int id = want1;

    if (id <= 0 || *ids_at(s, id))
        id = want2;
    if (id <= 0 || *ids_at(s, id)) {
        while (*ids_at(s, s->synth))
            s->synth++;
        id = s->synth++;
    }
    *ids_at(s, id) = id;
    return id;
}

/* tids holds the lane's tids so far, first the lane's pid, kept for the main thread (the
 * process's own thread, tid == pid) even in a lane that shows none. */
static void thread_add(struct xlane *l, const struct hthread *t, bool is_main, struct ids *tids)
{
    struct xthread *x = &l->th[l->nth];

    x->t = t;
    x->order = (int)l->nth++;
    x->tid = is_main ? l->pid : id_claim(tids, t->tid, 0);
    if (t->task) /* an asyncio task (record --async): a lane of its own, named by the task */
        snprintf(x->name, sizeof(x->name), "task %.58s", t->name);
    else if (t->worker) /* a DataLoader-style worker's thread, shown in its rank's process */
        snprintf(x->name, sizeof(x->name), "worker %d %.40s", t->worker,
                 t->name[0] ? t->name : "thread");
    else if (t->name[0])
        snprintf(x->name, sizeof(x->name), "%s", t->name);
    else if (t->main)
        snprintf(x->name, sizeof(x->name), "MainThread");
    else
        snprintf(x->name, sizeof(x->name), "thread %d", t->tid > 0 ? t->tid : x->order);
}

/* Threads shown for a lane: the main thread first, then (with all_threads) the others in
 * history order. Threads that never produced a run are left out. A lane without a main
 * thread still reserves tid == pid, so no other thread looks like the process's own. */
static void lane_threads(struct xlane *l, const struct export_opts *o)
{
    const struct hrank *r = l->r;
    size_t main_i = r->nthreads;
    struct ids tids;

    l->th = x_calloc(r->nthreads ? r->nthreads : 1, sizeof(*l->th));
    for (size_t i = 0; i < r->nthreads && main_i == r->nthreads; i++)
        if (r->threads[i].main && r->threads[i].nruns)
            main_i = i;
    ids_init(&tids, r->nthreads + 1);
    id_claim(&tids, l->pid, 0);
    if (main_i < r->nthreads)
        thread_add(l, &r->threads[main_i], true, &tids);
    for (size_t i = 0; i < r->nthreads; i++) {
        const struct hthread *t = &r->threads[i];

        if (i == main_i || !t->nruns || !(o->all_threads || t->main || t->task))
            continue;
        thread_add(l, t, false, &tids);
    }
    free(tids.slot);
}

static int lane_cmp(const void *a, const void *b)
{
    const struct xlane *x = a, *y = b;
    int xr = x->r->rank, yr = y->r->rank;

    if ((xr < 0) != (yr < 0))
        return xr < 0 ? 1 : -1;
    if (xr != yr)
        return xr < yr ? -1 : 1;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->r->pid != y->r->pid)
        return x->r->pid < y->r->pid ? -1 : 1;
    return x->r < y->r ? -1 : x->r > y->r;
}

void xplan_init(struct xplan *p, const struct history *h, const struct export_opts *o)
{
    struct ids pids;

    memset(p, 0, sizeof(*p));
    p->h = h;
    p->o = o;
    p->lane = x_calloc(h->nranks ? h->nranks : 1, sizeof(*p->lane));
    for (size_t i = 0; i < h->nranks; i++) {
        const struct hrank *r = &h->ranks[i];
        uint64_t start = rank_start(r);

        if (rank_in_window(r, start, o)) {
            p->lane[p->nlane].r = r;
            p->lane[p->nlane++].start = start;
        }
    }
    x_qsort(p->lane, p->nlane, sizeof(*p->lane), lane_cmp);
    ids_init(&pids, p->nlane + 1);
    for (size_t i = 0; i < p->nlane; i++) {
        struct xlane *l = &p->lane[i];

        l->order = (int)i + 1;
        l->pid = id_claim(&pids, history_key_pid(l->r->pid), l->r->pid);
        lane_names(l);
        lane_threads(l, o);
    }
    p->dev_pid = id_claim(&pids, 0, 0);
    free(pids.slot);
}

void xplan_fini(struct xplan *p)
{
    for (size_t i = 0; i < p->nlane; i++)
        free(p->lane[i].th);
    free(p->lane);
    memset(p, 0, sizeof(*p));
}

long xplan_series_lane(const struct xplan *p, const struct hseries *s)
{
    long found = -1;

    if (s->pid <= 0)
        return -1;
    /* A pid that came back after an exit has two records: a live one wins, else the latest. */
    for (size_t i = 0; i < p->nlane; i++) {
        if (p->lane[i].r->pid != s->pid)
            continue;
        if (!p->lane[i].r->exited)
            return (long)i;
        found = (long)i;
    }
    return found;
}

/* When the last run of a thread stops: one interval after its last sample (the sample that
 * would have seen it again), or at the rank's exit if that came first. */
static uint64_t thread_end(const struct export_opts *o, const struct hrank *r,
                           const struct hthread *t)
{
    const struct hrun *last = history_run(t, t->nruns - 1);
    uint64_t end = last->t1 + o->interval_ns;

    if (r->exited && (!o->interval_ns || r->end < end))
        end = r->end;
    return end < last->t1 ? last->t1 : end;
}

void xiter_init(struct xiter *it, const struct xplan *p, const struct hrank *r,
                const struct hthread *t)
{
    it->p = p;
    it->r = r;
    it->t = t;
    it->i = 0;
    it->last = 0;
}

bool xiter_next(struct xiter *it, struct xseg *seg)
{
    const struct export_opts *o = it->p->o;
    const struct hthread *t = it->t;

    while (it->i < t->nruns) {
        size_t i = it->i++;
        uint64_t s = history_run(t, i)->t0;
        uint64_t e = i + 1 < t->nruns ? history_run(t, i + 1)->t0 : thread_end(o, it->r, t);

        if (o->to && s >= o->to) {
            it->i = t->nruns;
            break;
        }
        if (o->from && s < o->from)
            s = o->from;
        if (o->to && e > o->to)
            e = o->to;
        /* Runs out of order would make time run backwards; the later one loses its overlap. */
        if (s < it->last)
            s = it->last;
        if (e <= s)
            continue;
        it->last = e;
        seg->stack = history_run(t, i)->stack;
        if (seg->stack >= it->p->h->nstacks)
            seg->stack = HSTACK_NONE;
        seg->s = s;
        seg->e = e;
        return true;
    }
    return false;
}

/* The names -f takes and the suffixes that choose a format, the only lists of them: the
 * parsers below read them, and so do record's --help (export_format_name/_suffix). */
static const struct {
    const char *name;
    enum export_format fmt;
} format_names[] = {
    {"chrome", EXPORT_CHROME},         {"chrometrace", EXPORT_CHROME}, /* py-spy's */
    {"speedscope", EXPORT_SPEEDSCOPE}, {"collapsed", EXPORT_COLLAPSED},
    {"raw", EXPORT_COLLAPSED}, /* py-spy's */
    {"flamegraph", EXPORT_FLAMEGRAPH}, {"perfetto", EXPORT_PERFETTO},
};

/* Longer suffixes first: ".speedscope.json" before ".json". */
static const struct {
    const char *suffix;
    enum export_format fmt;
} format_suffixes[] = {
    {".perfetto-trace", EXPORT_PERFETTO},
    {".pftrace", EXPORT_PERFETTO},
    {".speedscope.json", EXPORT_SPEEDSCOPE},
    {".json", EXPORT_CHROME},
    {".folded", EXPORT_COLLAPSED},
    {".collapsed", EXPORT_COLLAPSED},
    {".svg", EXPORT_FLAMEGRAPH},
};

int export_format_parse(const char *name)
{
    for (size_t i = 0; name && i < sizeof(format_names) / sizeof(format_names[0]); i++)
        if (!strcmp(name, format_names[i].name))
            return (int)format_names[i].fmt;
    return -1;
}

const char *export_format_name(size_t i, int *fmt)
{
    if (i >= sizeof(format_names) / sizeof(format_names[0]))
        return NULL;
    if (fmt)
        *fmt = (int)format_names[i].fmt;
    return format_names[i].name;
}

const char *export_format_suffix(size_t i, int *fmt)
{
    if (i >= sizeof(format_suffixes) / sizeof(format_suffixes[0]))
        return NULL;
    if (fmt)
        *fmt = (int)format_suffixes[i].fmt;
    return format_suffixes[i].suffix;
}

const char *export_format_ext(enum export_format fmt)
{
    switch (fmt) {
    case EXPORT_SPEEDSCOPE:
        return ".speedscope.json";
    case EXPORT_COLLAPSED:
        return ".folded";
    case EXPORT_FLAMEGRAPH:
        return ".svg";
    case EXPORT_PERFETTO:
        return ".perfetto-trace";
    case EXPORT_CHROME:
    default:
        return ".json";
    }
}

/* True when s[0..n) ends with suffix. */
static bool ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);

    return n >= k && !memcmp(s + n - k, suffix, k);
}

int export_format_from_name(const char *path)
{
    size_t n = path ? strlen(path) : 0;

    if (ends_with(path, n, ".gz"))
        n -= 3;
    for (size_t i = 0; i < sizeof(format_suffixes) / sizeof(format_suffixes[0]); i++)
        if (ends_with(path, n, format_suffixes[i].suffix))
            return (int)format_suffixes[i].fmt;
    return -1;
}

/* Writes the whole export to f and flushes it; returns 0 or the errno of the first failure. */
static int stream_errno(const struct history *h, const struct export_opts *o, FILE *f)
{
    struct xbuf b;
    struct xplan p;
    struct history nolines;
    int e;

    if (o->no_lines)
        h = xhist_nolines(h, &nolines);
    xb_init(&b, f);
    xplan_init(&p, h, o);
    if (o->format == EXPORT_SPEEDSCOPE)
        export_speedscope(&b, &p);
    else if (o->format == EXPORT_COLLAPSED)
        export_collapsed(&b, &p);
    else if (o->format == EXPORT_PERFETTO)
        export_perfetto_stream(&b, &p);
    else if (o->format == EXPORT_FLAMEGRAPH)
        export_flamegraph_stream(&b, &p);
    else
        export_chrome(&b, &p);
    e = xb_flush(&b);
    errno = 0;
    if (!e && fflush(f))
        e = errno ? errno : EIO;
    if (!e && ferror(f))
        e = EIO;
    xplan_fini(&p);
    xb_fini(&b);
    if (o->no_lines)
        xhist_nolines_fini(&nolines);
    return e;
}

int export_stream(const struct history *h, const struct export_opts *o, FILE *f,
                  struct app_err *err)
{
    char buf[128];
    int e;

    if ((unsigned)o->format >= EXPORT_NFORMATS)
        return app_err_set(err, APP_E_USAGE, "unknown export format %d", (int)o->format);
    e = stream_errno(h, o, f);
    if (e)
        return app_err_set(err, APP_E_IO, "write error: %s", strerror_r(e, buf, sizeof(buf)));
    return 0;
}

/* fsyncs the directory holding path so the rename itself survives a crash. Best effort: the
 * new file is already in place, and some file systems refuse fsync on directories. */
static void sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? x_strndup(path, slash == path ? 1 : (size_t)(slash - path)) : x_strdup(".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

/* True for an output name ending in ".gz": written gzipped, in the format chosen as usual. */
static bool gz_name(const char *path)
{
    size_t n = strlen(path);

    return n > 3 && !strcmp(path + n - 3, ".gz");
}

/* Streams into the open temp file (gzipped when gz), then makes it durable; returns 0 or an
 * errno value. Closes fd in every case. */
static int write_temp(const struct history *h, const struct export_opts *o, int fd, bool gz)
{
    FILE *f = gz ? xgz_fdopen(fd) : fdopen(fd, "w");
    int e;

    if (!f) {
        e = errno;
        close(fd);
        return e;
    }
    e = stream_errno(h, o, f);
    if (!e && !gz && fsync(fileno(f))) /* the gzip stream's fclose fsyncs */
        e = errno;
    if (fclose(f) && !e)
        e = errno ? errno : EIO;
    return e;
}

int export_write(const struct history *h, const struct export_opts *o, const char *path,
                 struct app_err *err)
{
    size_t n = strlen(path) + 32;
    char *tmp = x_malloc(n);
    char buf[128];
    struct stat st;
    int fd, e;

    if ((unsigned)o->format >= EXPORT_NFORMATS) {
        free(tmp);
        return app_err_set(err, APP_E_USAGE, "unknown export format %d", (int)o->format);
    }
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        free(tmp);
        return export_check_path(path, err); /* says what the node is */
    }
    export_temp_name(path, (long)getpid(), tmp, n);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        e = errno;
        goto fail;
    }
    e = write_temp(h, o, fd, gz_name(path));
    if (!e && rename(tmp, path))
        e = errno;
    if (e) {
        unlink(tmp);
        goto fail;
    }
    sync_dir(path);
    free(tmp);
    return 0;
fail:
    free(tmp);
    return app_err_set(err, APP_E_IO, "cannot write %s: %s", path, strerror_r(e, buf, sizeof(buf)));
}
