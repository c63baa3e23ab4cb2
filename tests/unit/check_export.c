/* Tests for the exporters (src/export*.c).
 *
 * One hand-built history serves most cases: two ranks and a rank of unknown number, a main
 * thread whose stack changes (sharing prefixes, moving between lines of one function, going
 * empty for a sample), a worker thread that goes away, a rank that exits, counters on rank
 * and node pids, and names with non-ASCII text, quotes, a backslash and a newline. Each format
 * is written to a temp dir and read back: Chrome JSON with json-c (lanes with real pids and
 * tids, repeated pids disambiguated, sort indexes, the exact B/E sequence with timestamps and
 * one slice per line run, names without args, counters, instants, otherData) and then through
 * tests/tools/trace_check.py; speedscope JSON likewise; collapsed stacks compared line for
 * line. The atomic writer is driven into failures: a missing and a read-only directory, a
 * full tmpfs (when mount(2) is permitted) and RLIMIT_FSIZE in a child, each leaving the old
 * file byte-identical and no temp file behind. The checker is itself checked: every rule it
 * enforces rejects a small trace breaking it. Histories are filled in by hand (the structs
 * are transparent), so nothing here depends on history.c. RANKTOP_SRCDIR (set by meson)
 * locates the checker; python3 must be on PATH. Single-threaded. */
#include "ranktop/export/export.h"
#include "export_priv.h"

#include "ranktop/model/history.h"
#include "tsupport.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define T0 1000000000000ull /* history start, CLOCK_MONOTONIC ns */
#define OFF 1500ull         /* first sample 1.5 µs after the start */
#define IVAL 100000000ull   /* 100 ms sampling interval */
#define T(k) (T0 + OFF + (uint64_t)(k)*IVAL)
#define WALL0 1700000000123456ll /* wall clock at T0, µs */
#define WORKER_NAME "data \"loader\"\\\n"
#define QUOTE_FN "say \"hi\"\\\n"
#define NONASCII_FN                                                                                \
    "l\xC3\xA4"                                                                                    \
    "dt_\xE6\x95\xB0\xE6\x8D\xAE" /* "lädt_数据" */

/* Trace pids and tids (export_priv.h, xplan_init): real pids, main thread tid == pid. */
#define P0 6000         /* rank 0 */
#define P1 5263         /* rank 1 */
#define P7 7000         /* rank unknown */
#define PDEV 0x7f000000 /* the devices lane: the first synthetic id */
#define MAIN_L "main (train.py:10)"
#define TRAIN_L "train (train.py:20)"
#define STEP30 "step (train.py:30)"
#define STEP31 "step (train.py:31)"
#define SAVE_L "save (io.py:5)"

struct stacks {
    uint32_t s1, s2, s3, w, s4, s5;
};

static char tmpdir[64];

/* Histories are filled in by hand (the structs are transparent), so these tests depend on
 * nothing but the data model. Rank and thread arrays have a fixed capacity so the pointers
 * handed out stay valid. */
#define TB_RANKS 8
#define TB_THREADS 8

static void tb_init(struct history *h, const char *host)
{
    memset(h, 0, sizeof(*h));
    h->t0 = T0;
    h->wall_t0_us = WALL0;
    snprintf(h->host, sizeof(h->host), "%s", host);
    h->ranks = calloc(TB_RANKS, sizeof(*h->ranks));
    ck_assert_ptr_nonnull(h->ranks);
    h->ranks_cap = TB_RANKS;
}

static void tb_free(struct history *h)
{
    for (size_t i = 0; i < h->nranks; i++) {
        for (size_t k = 0; k < h->ranks[i].nthreads; k++)
            history_thread_free_runs(&h->ranks[i].threads[k]);
        free(h->ranks[i].threads);
    }
    for (size_t i = 0; i < h->nseries; i++)
        free(h->series[i].pts);
    free(h->ranks);
    free(h->series);
    free(h->frames);
    free(h->stacks);
    free(h->stack_frames);
    memset(h, 0, sizeof(*h));
}

static void *tb_grow(void *p, size_t n, size_t size)
{
    p = realloc(p, (n + 1) * size);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* A frame id, reusing an equal frame as interning would. */
static uint32_t tb_frame(struct history *h, const struct hframe *f)
{
    for (size_t i = 0; i < h->nframes; i++)
        if (!strcmp(h->frames[i].function, f->function) && !strcmp(h->frames[i].file, f->file) &&
            h->frames[i].line == f->line)
            return (uint32_t)i;
    h->frames = tb_grow(h->frames, h->nframes, sizeof(*h->frames));
    h->frames[h->nframes] = *f;
    return (uint32_t)h->nframes++;
}

/* A new stack from frames given outermost first. */
static uint32_t tb_stack(struct history *h, const struct hframe *outer_first, uint32_t n)
{
    h->stacks = tb_grow(h->stacks, h->nstacks, sizeof(*h->stacks));
    h->stacks[h->nstacks] = (struct hstack){n, (uint32_t)h->nstack_frames, 0};
    for (uint32_t i = 0; i < n; i++) {
        h->stack_frames = tb_grow(h->stack_frames, h->nstack_frames, sizeof(uint32_t));
        h->stack_frames[h->nstack_frames++] = tb_frame(h, &outer_first[i]);
    }
    return (uint32_t)h->nstacks++;
}

static struct hrank *tb_rank(struct history *h, int pid, int rank, const char *host,
                             const char *device, uint64_t start)
{
    struct hrank *r = &h->ranks[h->nranks++];

    ck_assert_uint_le(h->nranks, TB_RANKS);
    r->pid = pid;
    r->rank = rank;
    snprintf(r->host, sizeof(r->host), "%s", host);
    snprintf(r->device, sizeof(r->device), "%s", device);
    r->start = start;
    r->threads = calloc(TB_THREADS, sizeof(*r->threads));
    ck_assert_ptr_nonnull(r->threads);
    r->cap = TB_THREADS;
    return r;
}

static struct hthread *tb_thread(struct hrank *r, uint64_t ident, int tid, const char *name,
                                 bool main)
{
    struct hthread *t = &r->threads[r->nthreads++];

    ck_assert_uint_le(r->nthreads, TB_THREADS);
    t->ident = ident;
    t->tid = tid;
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->main = main;
    return t;
}

/* The thread showed `stack` in samples k0..k1. */
static void tb_run(struct hthread *t, uint32_t stack, int k0, int k1)
{
    history_run_append(t, stack, T(k0), T(k1));
    if (!t->first)
        t->first = T(k0);
    t->last = T(k1);
}

static void tb_counter(struct history *h, const char *name, const char *key, int pid, uint64_t t,
                       double v)
{
    struct hseries *s = NULL;

    for (size_t i = 0; i < h->nseries && !s; i++)
        if (!strcmp(h->series[i].name, name) && h->series[i].pid == pid)
            s = &h->series[i];
    if (!s) {
        h->series = tb_grow(h->series, h->nseries, sizeof(*h->series));
        s = memset(&h->series[h->nseries++], 0, sizeof(*s));
        snprintf(s->name, sizeof(s->name), "%s", name);
        snprintf(s->key, sizeof(s->key), "%s", key);
        s->pid = pid;
    }
    s->pts = tb_grow(s->pts, s->n, sizeof(*s->pts));
    s->pts[s->n++] = (struct hpoint){t, v};
}

static struct hframe fr(const char *fn, const char *file, int line)
{
    struct hframe f = {fn, file, line, false};

    return f;
}

static void build_stacks(struct history *h, struct stacks *s)
{
    const struct hframe s1[] = {fr("main", "train.py", 10), fr("train", "train.py", 20),
                                fr("step", "train.py", 30)};
    const struct hframe s2[] = {fr("main", "train.py", 10), fr("train", "train.py", 20),
                                fr("step", "train.py", 31)};
    const struct hframe s3[] = {fr("main", "train.py", 10), fr("train", "train.py", 20),
                                fr("save", "io.py", 5)};
    const struct hframe w[] = {fr("run", "threading.py", 1), fr(NONASCII_FN, "data.py", 7),
                               fr(QUOTE_FN, "we\"ird.py", 3)};
    const struct hframe s4[] = {fr("main", "eval.py", 1), fr("evaluate", "eval.py", 2)};
    const struct hframe s5[] = {fr("main", "x.py", 1)};

    s->s1 = tb_stack(h, s1, 3);
    s->s2 = tb_stack(h, s2, 3);
    s->s3 = tb_stack(h, s3, 3);
    s->w = tb_stack(h, w, 3);
    s->s4 = tb_stack(h, s4, 2);
    s->s5 = tb_stack(h, s5, 1);
}

/* The shared scenario; see the file comment. Times are samples k = 0..7, 100 ms apart. */
static void build(struct history *h, struct stacks *s)
{
    struct hrank *r;
    struct hthread *t;

    tb_init(h, "node01");
    build_stacks(h, s);
    r = tb_rank(h, 5263, 1, "node01", "gpu 1", T(0));
    t = tb_thread(r, 1, 5263, "MainThread", true);
    tb_run(t, s->s1, 0, 2);
    tb_run(t, s->s2, 3, 4);
    tb_run(t, s->s3, 5, 5);
    tb_run(t, HSTACK_NONE, 6, 6);
    tb_run(t, s->s1, 7, 7);
    t = tb_thread(r, 2, 5270, WORKER_NAME, false);
    tb_run(t, s->w, 0, 3);
    t->gone = true;

    r = tb_rank(h, 6000, 0, "node01", "gpu 0", T(0));
    t = tb_thread(r, 1, 6000, "MainThread", true);
    tb_run(t, s->s4, 0, 4);
    t->gone = true;
    r->exited = true;
    r->end = T(4) + IVAL / 2;

    r = tb_rank(h, 7000, -1, "", "", T(2));
    tb_run(tb_thread(r, 9, 0, "", true), s->s5, 2, 2);

    tb_counter(h, "gpu1", "util_pct", 5263, T(0), 10);
    tb_counter(h, "gpu1", "util_pct", 5263, T(1), 20.5);
    tb_counter(h, "gpu1", "util_pct", 5263, T(2), 30);
    tb_counter(h, "gpu7", "util_pct", 0, T(0) + IVAL / 2, 99);
    tb_counter(h, "gpu7", "util_pct", 0, T(1) + IVAL / 2, 98);
    tb_counter(h, "rank 0 mem", "rss_mib", 6000, T(1), 1024);
}

static struct export_opts opts(enum export_format fmt, bool all)
{
    struct export_opts o = {
        .format = fmt, .all_threads = all, .interval_ns = IVAL, .version = "9.9-test"};

    return o;
}

static void setup(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_export.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    const char *mounts[] = {"tiny", "ro"};
    char cmd[128];

    /* A failed test may leave its tmpfs mounted; detach it so the tree can go. */
    for (size_t i = 0; i < sizeof(mounts) / sizeof(*mounts); i++) {
        snprintf(cmd, sizeof(cmd), "%s/%s", tmpdir, mounts[i]);
        (void)umount2(cmd, MNT_DETACH);
    }

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static void path_in(char *out, size_t n, const char *dir, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    rewind(f);
    buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return buf;
}

/* Number of entries in dir other than . and .. */
static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

/* Runs tests/tools/trace_check.py with extra arguments; returns its exit status. */
static int run_checker(const char *file, const char *extra)
{
    const char *src = getenv("RANKTOP_SRCDIR");
    char cmd[1024];
    int st;

    ck_assert_msg(src != NULL, "RANKTOP_SRCDIR is not set (run through meson test)");
    snprintf(cmd, sizeof(cmd), "python3 '%s/tests/tools/trace_check.py' -q '%s' %s", src, file,
             extra);
    st = system(cmd);
    ck_assert_msg(st != -1 && WIFEXITED(st), "cannot run: %s", cmd);
    ck_assert_msg(WEXITSTATUS(st) != 127, "python3 not found for: %s", cmd);
    return WEXITSTATUS(st);
}

static json_object *export_parse(const struct history *h, const struct export_opts *o,
                                 const char *name, char *path, size_t pathlen)
{
    struct app_err err = {0};
    json_object *doc;

    path_in(path, pathlen, tmpdir, name);
    ck_assert_msg(export_write(h, o, path, &err) == 0, "export: %s", err.msg);
    doc = json_object_from_file(path);
    ck_assert_msg(doc != NULL, "%s is not JSON: %s", path, json_util_get_last_err());
    return doc;
}

static json_object *get(json_object *o, const char *key)
{
    json_object *v = NULL;

    ck_assert_msg(json_object_object_get_ex(o, key, &v), "no key %s in %s", key,
                  json_object_to_json_string(o));
    return v;
}

static const char *gets(json_object *o, const char *key)
{
    return json_object_get_string(get(o, key));
}

static int geti(json_object *o, const char *key)
{
    return json_object_get_int(get(o, key));
}

static bool has(json_object *o, const char *key)
{
    return json_object_object_get_ex(o, key, NULL);
}

static bool is_ph(json_object *ev, const char *ph)
{
    return !strcmp(gets(ev, "ph"), ph);
}

/* The B/E events of one (pid, tid) as "B name ts|E name ts|..." (ts in µs, 1 decimal). */
static void slice_seq(json_object *events, int pid, int tid, char *out, size_t n)
{
    size_t len = 0;

    out[0] = '\0';
    for (size_t i = 0; i < json_object_array_length(events); i++) {
        json_object *ev = json_object_array_get_idx(events, i);

        if (!(is_ph(ev, "B") || is_ph(ev, "E")) || geti(ev, "pid") != pid || geti(ev, "tid") != tid)
            continue;
        len += (size_t)snprintf(out + len, n - len, "%s%s %s %.1f", len ? "|" : "", gets(ev, "ph"),
                                gets(ev, "name"), json_object_get_double(get(ev, "ts")));
        ck_assert_uint_lt(len, n);
    }
}

/* The process-scoped events (C and i) of pid in file order, as "name key=value ts|...". */
static void process_seq(json_object *events, int pid, char *out, size_t n)
{
    size_t len = 0;

    out[0] = '\0';
    for (size_t i = 0; i < json_object_array_length(events); i++) {
        json_object *ev = json_object_array_get_idx(events, i);
        double ts;

        if (!(is_ph(ev, "C") || is_ph(ev, "i")) || geti(ev, "pid") != pid)
            continue;
        ck_assert(!has(ev, "tid"));
        ts = json_object_get_double(get(ev, "ts"));
        if (is_ph(ev, "i")) {
            ck_assert_str_eq(gets(ev, "s"), "p");
            len += (size_t)snprintf(out + len, n - len, "%s%s %.1f", len ? "|" : "",
                                    gets(ev, "name"), ts);
        } else {
            json_object_object_foreach(get(ev, "args"), k, v)
            {
                ck_assert(json_object_is_type(v, json_type_int) ||
                          json_object_is_type(v, json_type_double));
                len += (size_t)snprintf(out + len, n - len, "%s%s %s=%g %.1f", len ? "|" : "",
                                        gets(ev, "name"), k, json_object_get_double(v), ts);
            }
        }
        ck_assert_uint_lt(len, n);
    }
}

/* The args.name (or args.sort_index as text) of the M event `what` for pid/tid (-1: none). */
static const char *meta(json_object *events, const char *what, int pid, int tid)
{
    static char buf[32];

    for (size_t i = 0; i < json_object_array_length(events); i++) {
        json_object *ev = json_object_array_get_idx(events, i);

        if (!is_ph(ev, "M") || strcmp(gets(ev, "name"), what) || geti(ev, "pid") != pid)
            continue;
        if (tid >= 0 && (!has(ev, "tid") || geti(ev, "tid") != tid))
            continue;
        if (has(get(ev, "args"), "name"))
            return gets(get(ev, "args"), "name");
        snprintf(buf, sizeof(buf), "%d", geti(get(ev, "args"), "sort_index"));
        return buf;
    }
    return NULL;
}

static int count_meta(json_object *events, const char *what)
{
    int n = 0;

    for (size_t i = 0; i < json_object_array_length(events); i++) {
        json_object *ev = json_object_array_get_idx(events, i);

        n += is_ph(ev, "M") && !strcmp(gets(ev, "name"), what);
    }
    return n;
}

START_TEST(test_chrome_lanes)
{
    struct history h;
    struct stacks s;
    struct export_opts o = opts(EXPORT_CHROME, true);
    char path[256];
    json_object *doc, *ev;

    build(&h, &s);
    doc = export_parse(&h, &o, "lanes.json", path, sizeof(path));
    ck_assert_str_eq(gets(doc, "displayTimeUnit"), "ms");
    ev = get(doc, "traceEvents");
    ck_assert_int_eq(count_meta(ev, "process_name"), 4);
    ck_assert_str_eq(meta(ev, "process_name", P0, -1), "rank 0 (pid 6000, node01, gpu 0)");
    ck_assert_str_eq(meta(ev, "process_name", P1, -1), "rank 1 (pid 5263, node01, gpu 1)");
    ck_assert_str_eq(meta(ev, "process_name", P7, -1), "pid 7000");
    ck_assert_str_eq(meta(ev, "process_name", PDEV, -1), "node01 devices");
    ck_assert_str_eq(meta(ev, "process_sort_index", P0, -1), "1");
    ck_assert_str_eq(meta(ev, "process_sort_index", P1, -1), "2");
    ck_assert_str_eq(meta(ev, "process_sort_index", P7, -1), "3");
    ck_assert_str_eq(meta(ev, "process_sort_index", PDEV, -1), "4");
    /* Real tids: the main thread's is the pid, also where the history did not know it. */
    ck_assert_str_eq(meta(ev, "thread_name", P1, P1), "MainThread (tid 5263)");
    ck_assert_str_eq(meta(ev, "thread_name", P1, 5270), WORKER_NAME " (tid 5270)");
    ck_assert_str_eq(meta(ev, "thread_name", P7, P7), "MainThread");
    ck_assert_str_eq(meta(ev, "thread_sort_index", P1, P1), "0");
    ck_assert_str_eq(meta(ev, "thread_sort_index", P1, 5270), "1");
    ck_assert_int_eq(count_meta(ev, "thread_name"), 4);
    json_object_put(doc);
    ck_assert_int_eq(run_checker(path, "--lanes 4 --threads 4 --lane-name-regex '^rank 1 '"), 0);
    tb_free(&h);
}
END_TEST

/* Ids that repeat: the same pid on two nodes (the second node's key has its host slot above
 * the pid's 22 bits) and again on the first node after a restart; a thread whose tid is
 * unknown and one whose tid repeats the main thread's. The first lane keeps the real pid, the
 * second gets its key, the third a synthetic id; names say "shown as". */
START_TEST(test_chrome_ids)
{
    struct history h;
    struct stacks s;
    struct export_opts o = opts(EXPORT_CHROME, true);
    const int key_b = (1 << HISTORY_KEY_PID_BITS) | 4242;
    struct hrank *r;
    char path[256];
    json_object *doc, *ev;

    tb_init(&h, "node01");
    build_stacks(&h, &s);
    r = tb_rank(&h, 4242, 0, "node01", "", T(0));
    tb_run(tb_thread(r, 1, 4242, "MainThread", true), s.s1, 0, 1);
    tb_run(tb_thread(r, 2, 0, "nameless", false), s.w, 0, 1);
    tb_run(tb_thread(r, 3, 4242, "twin", false), s.w, 0, 1);
    r = tb_rank(&h, key_b, 1, "node02", "", T(0));
    tb_run(tb_thread(r, 1, 4242, "MainThread", true), s.s1, 0, 1);
    tb_run(tb_thread(r, 2, 4300, "loader", false), s.w, 0, 1);
    r = tb_rank(&h, 4242, 2, "node01", "", T(0));
    tb_run(tb_thread(r, 1, 4242, "MainThread", true), s.s4, 0, 1);
    doc = export_parse(&h, &o, "ids.json", path, sizeof(path));
    ev = get(doc, "traceEvents");
    ck_assert_str_eq(meta(ev, "process_name", 4242, -1), "rank 0 (pid 4242, node01)");
    ck_assert_str_eq(meta(ev, "process_name", key_b, -1),
                     "rank 1 (pid 4242, node02, shown as 4198546)");
    ck_assert_str_eq(meta(ev, "process_name", PDEV, -1),
                     "rank 2 (pid 4242, node01, shown as 2130706432)");
    ck_assert_str_eq(meta(ev, "thread_name", 4242, 4242), "MainThread (tid 4242)");
    ck_assert_str_eq(meta(ev, "thread_name", 4242, PDEV), "nameless");
    ck_assert_str_eq(meta(ev, "thread_name", 4242, PDEV + 1), "twin (tid 4242)");
    ck_assert_str_eq(meta(ev, "thread_name", key_b, key_b), "MainThread (tid 4242)");
    ck_assert_str_eq(meta(ev, "thread_name", key_b, 4300), "loader (tid 4300)");
    ck_assert_str_eq(meta(ev, "thread_name", PDEV, PDEV), "MainThread (tid 4242)");
    ck_assert_int_eq(count_meta(ev, "thread_name"), 6);
    json_object_put(doc);
    ck_assert_int_eq(run_checker(path, "--lanes 3 --threads 6"), 0);
    tb_free(&h);
}
END_TEST

START_TEST(test_chrome_slices)
{
    struct history h;
    struct stacks s;
    struct export_opts o = opts(EXPORT_CHROME, true);
    char path[256], seq[2048];
    json_object *doc, *ev;

    build(&h, &s);
    doc = export_parse(&h, &o, "slices.json", path, sizeof(path));
    ev = get(doc, "traceEvents");
    /* The line move 30 -> 31 at sample 3 ends step's slice at line 30 and begins one at line
     * 31 (a slice is one line's run); the empty sample 6 closes all; the last run lasts one
     * interval. */
    slice_seq(ev, P1, P1, seq, sizeof(seq));
    ck_assert_str_eq(seq, "B " MAIN_L " 1.5|B " TRAIN_L " 1.5|B " STEP30 " 1.5|E " STEP30
                          " 300001.5|B " STEP31 " 300001.5|E " STEP31 " 500001.5|B " SAVE_L
                          " 500001.5|E " SAVE_L " 600001.5|E " TRAIN_L " 600001.5|E " MAIN_L
                          " 600001.5|B " MAIN_L " 700001.5|B " TRAIN_L " 700001.5|B " STEP30
                          " 700001.5|E " STEP30 " 800001.5|E " TRAIN_L " 800001.5|E " MAIN_L
                          " 800001.5");
    /* The worker went away after sample 3: closed one interval later. */
    slice_seq(ev, P1, 5270, seq, sizeof(seq));
    ck_assert_str_eq(seq,
                     "B run (threading.py:1) 1.5|B " NONASCII_FN " (data.py:7) 1.5|B " QUOTE_FN
                     " (we\"ird.py:3) 1.5|E " QUOTE_FN " (we\"ird.py:3) 400001.5|E " NONASCII_FN
                     " (data.py:7) 400001.5|E run (threading.py:1) 400001.5");
    /* Rank 0 exited half an interval after its last sample: closed at the exit. */
    slice_seq(ev, P0, P0, seq, sizeof(seq));
    ck_assert_str_eq(seq, "B main (eval.py:1) 1.5|B evaluate (eval.py:2) 1.5|"
                          "E evaluate (eval.py:2) 450001.5|E main (eval.py:1) 450001.5");
    slice_seq(ev, P7, P7, seq, sizeof(seq));
    ck_assert_str_eq(seq, "B main (x.py:1) 200001.5|E main (x.py:1) 300001.5");
    json_object_put(doc);
    /* The checker takes a function's name for its slices' "function (file:line)". */
    ck_assert_int_eq(run_checker(path, "--slice step --slice '" STEP31 "' --slice " NONASCII_FN
                                       " --order main,train,step,save"),
                     0);
    ck_assert_int_eq(run_checker(path, "--order save,step"), 1);
    ck_assert_int_eq(run_checker(path, "--slice 'step (train.py:32)'"), 1);
    tb_free(&h);
}
END_TEST

/* B carries its name and cat and no args (speedscope keys a frame by name plus args, so the
 * name is the whole key); E carries no args either. */
START_TEST(test_chrome_args)
{
    struct history h;
    struct stacks s;
    struct export_opts o = opts(EXPORT_CHROME, true);
    char path[256];
    json_object *doc, *ev;
    int nb = 0, ne = 0;

    build(&h, &s);
    doc = export_parse(&h, &o, "args.json", path, sizeof(path));
    ev = get(doc, "traceEvents");
    for (size_t i = 0; i < json_object_array_length(ev); i++) {
        json_object *e = json_object_array_get_idx(ev, i);

        if (is_ph(e, "E")) {
            ck_assert(!has(e, "args"));
            ne++;
        } else if (is_ph(e, "B")) {
            ck_assert_str_eq(gets(e, "cat"), "sampled");
            ck_assert(!has(e, "args"));
            nb++;
        }
    }
    ck_assert_int_eq(nb, 14);
    ck_assert_int_eq(nb, ne);
    json_object_put(doc);
    tb_free(&h);
}
END_TEST

START_TEST(test_chrome_counters_instants)
{
    struct history h;
    struct stacks s;
    struct export_opts o = opts(EXPORT_CHROME, false);
    char path[256], seq[1024];
    json_object *doc, *ev, *other;

    static const char *const unavailable[] = {"gpu", "nvidia-smi: not found on PATH", "npu",
                                              "no \"NPU\" found", NULL};

    build(&h, &s);
    o.unavailable = unavailable;
    doc = export_parse(&h, &o, "counters.json", path, sizeof(path));
    ev = get(doc, "traceEvents");
    process_seq(ev, P0, seq, sizeof(seq));
    /* Its main thread's kind of wait (no rule matches the fixture's frames: host) from the
     * first run on: one instant, the kind never changing. */
    ck_assert_str_eq(seq, "rank 0 started 1.5|rank 0 wait: host 1.5|rank 0 mem rss_mib=1024 "
                          "100001.5|rank 0 exited 450001.5");
    process_seq(ev, P1, seq, sizeof(seq));
    /* A gap in its stacks (600001.5 on) is no change of kind. */
    ck_assert_str_eq(seq, "rank 1 started 1.5|rank 1 wait: host 1.5|gpu1 util_pct=10 1.5|gpu1 "
                          "util_pct=20.5 100001.5|gpu1 util_pct=30 200001.5");
    process_seq(ev, P7, seq, sizeof(seq));
    ck_assert_str_eq(seq, "pid 7000 started 200001.5|pid 7000 wait: host 200001.5");
    process_seq(ev, PDEV, seq, sizeof(seq));
    ck_assert_str_eq(seq, "gpu7 util_pct=99 50001.5|gpu7 util_pct=98 150001.5");
    /* Main threads only: no worker lane. */
    ck_assert_ptr_null(meta(ev, "thread_name", P1, 5270));
    other = get(doc, "otherData");
    ck_assert(json_object_get_int64(get(other, "wall_clock_start_us")) == WALL0);
    ck_assert_str_eq(gets(other, "host"), "node01");
    ck_assert_str_eq(gets(other, "tool"), "ranktop");
    ck_assert_str_eq(gets(other, "version"), "9.9-test");
    /* Requested counters that could not be had, each with why. */
    ck_assert_str_eq(gets(get(other, "counters_unavailable"), "gpu"),
                     "nvidia-smi: not found on PATH");
    ck_assert_str_eq(gets(get(other, "counters_unavailable"), "npu"), "no \"NPU\" found");
    ck_assert_int_eq(json_object_object_length(get(other, "counters_unavailable")), 2);
    json_object_put(doc);
    o.unavailable = NULL;
    doc = export_parse(&h, &o, "counters2.json", path, sizeof(path));
    ck_assert(!has(get(doc, "otherData"), "counters_unavailable"));
    json_object_put(doc);
    ck_assert_int_eq(run_checker(path, "--threads 3 --counter gpu7 --instant 'rank 0 exited'"), 0);
    tb_free(&h);
}
END_TEST

/* A window cuts runs at its edges and keeps only what happens inside. */
START_TEST(test_chrome_window)
{
    struct history h;
    struct stacks s;
    struct export_opts o = opts(EXPORT_CHROME, false);
    char path[256], seq[1024];
    json_object *doc, *ev;

    build(&h, &s);
    o.from = T(1) + IVAL / 2;
    o.to = T(6) + IVAL / 5;
    doc = export_parse(&h, &o, "window.json", path, sizeof(path));
    ev = get(doc, "traceEvents");
    slice_seq(ev, P1, P1, seq, sizeof(seq));
    ck_assert_str_eq(seq, "B " MAIN_L " 150001.5|B " TRAIN_L " 150001.5|B " STEP30
                          " 150001.5|E " STEP30 " 300001.5|B " STEP31 " 300001.5|E " STEP31
                          " 500001.5|B " SAVE_L " 500001.5|E " SAVE_L " 600001.5|E " TRAIN_L
                          " 600001.5|E " MAIN_L " 600001.5");
    process_seq(ev, P0, seq, sizeof(seq));
    ck_assert_str_eq(seq, "rank 0 wait: host 150001.5|rank 0 exited 450001.5");
    process_seq(ev, P1, seq, sizeof(seq));
    ck_assert_str_eq(seq, "rank 1 wait: host 150001.5|gpu1 util_pct=30 200001.5");
    process_seq(ev, PDEV, seq, sizeof(seq));
    ck_assert_str_eq(seq, "gpu7 util_pct=98 150001.5");
    json_object_put(doc);
    ck_assert_int_eq(run_checker(path, ""), 0);

    /* A window after rank 0's exit leaves it out; the sort indexes renumber. */
    o.from = T(5);
    o.to = 0;
    doc = export_parse(&h, &o, "window2.json", path, sizeof(path));
    ev = get(doc, "traceEvents");
    ck_assert_str_eq(meta(ev, "process_name", P1, -1), "rank 1 (pid 5263, node01, gpu 1)");
    ck_assert_str_eq(meta(ev, "process_sort_index", P1, -1), "1");
    ck_assert_int_eq(count_meta(ev, "process_name"), 2);
    slice_seq(ev, P1, P1, seq, sizeof(seq));
    ck_assert_str_eq(seq,
                     "B " MAIN_L " 500001.5|B " TRAIN_L " 500001.5|B " SAVE_L " 500001.5|E " SAVE_L
                     " 600001.5|E " TRAIN_L " 600001.5|E " MAIN_L " 600001.5|B " MAIN_L
                     " 700001.5|B " TRAIN_L " 700001.5|B " STEP30 " 700001.5|E " STEP30
                     " 800001.5|E " TRAIN_L " 800001.5|E " MAIN_L " 800001.5");
    json_object_put(doc);
    ck_assert_int_eq(run_checker(path, "--lanes 2"), 0);
    tb_free(&h);
}
END_TEST

static void check_profile(json_object *p, const char *name, double start, double end,
                          size_t nsamples)
{
    json_object *samples = get(p, "samples"), *weights = get(p, "weights");
    double sum = 0;

    ck_assert_str_eq(gets(p, "type"), "sampled");
    ck_assert_str_eq(gets(p, "unit"), "microseconds");
    ck_assert_str_eq(gets(p, "name"), name);
    ck_assert_double_eq_tol(json_object_get_double(get(p, "startValue")), start, 1e-6);
    ck_assert_double_eq_tol(json_object_get_double(get(p, "endValue")), end, 1e-6);
    ck_assert_uint_eq(json_object_array_length(samples), nsamples);
    ck_assert_uint_eq(json_object_array_length(weights), nsamples);
    for (size_t i = 0; i < nsamples; i++)
        sum += json_object_get_double(json_object_array_get_idx(weights, i));
    ck_assert_double_eq_tol(sum, end - start, 1e-6);
}

static void check_sample(const struct history *h, json_object *sample, uint32_t stack)
{
    const uint32_t *f = history_stack_frames(h, stack);

    ck_assert_uint_eq(json_object_array_length(sample), h->stacks[stack].nframes);
    for (uint32_t i = 0; i < h->stacks[stack].nframes; i++)
        ck_assert_int_eq(json_object_get_int(json_object_array_get_idx(sample, i)), (int)f[i]);
}

START_TEST(test_speedscope)
{
    struct history h;
    struct stacks s;
    struct export_opts o = opts(EXPORT_SPEEDSCOPE, true);
    char path[256];
    json_object *doc, *frames, *prof, *p, *samples, *w;

    build(&h, &s);
    doc = export_parse(&h, &o, "p.speedscope.json", path, sizeof(path));
    ck_assert_str_eq(gets(doc, "$schema"), "https://www.speedscope.app/file-format-schema.json");
    frames = get(get(doc, "shared"), "frames");
    ck_assert_uint_eq(json_object_array_length(frames), h.nframes);
    for (size_t i = 0; i < h.nframes; i++) {
        json_object *f = json_object_array_get_idx(frames, i);

        ck_assert_str_eq(gets(f, "name"), h.frames[i].function);
        ck_assert_str_eq(gets(f, "file"), h.frames[i].file);
        ck_assert_int_eq(geti(f, "line"), h.frames[i].line);
    }
    prof = get(doc, "profiles");
    ck_assert_uint_eq(json_object_array_length(prof), 4);
    check_profile(json_object_array_get_idx(prof, 0), "rank 0 (pid 6000, node01, gpu 0) MainThread",
                  1.5, 450001.5, 1);
    p = json_object_array_get_idx(prof, 1);
    check_profile(p, "rank 1 (pid 5263, node01, gpu 1) MainThread", 1.5, 800001.5, 5);
    samples = get(p, "samples");
    w = get(p, "weights");
    check_sample(&h, json_object_array_get_idx(samples, 0), s.s1);
    check_sample(&h, json_object_array_get_idx(samples, 1), s.s2);
    check_sample(&h, json_object_array_get_idx(samples, 2), s.s3);
    ck_assert_uint_eq(json_object_array_length(json_object_array_get_idx(samples, 3)), 0);
    check_sample(&h, json_object_array_get_idx(samples, 4), s.s1);
    ck_assert_double_eq_tol(json_object_get_double(json_object_array_get_idx(w, 0)), 300000, 1e-6);
    ck_assert_double_eq_tol(json_object_get_double(json_object_array_get_idx(w, 1)), 200000, 1e-6);
    check_profile(json_object_array_get_idx(prof, 2),
                  "rank 1 (pid 5263, node01, gpu 1) " WORKER_NAME, 1.5, 400001.5, 1);
    check_profile(json_object_array_get_idx(prof, 3), "pid 7000 MainThread", 200001.5, 300001.5, 1);
    json_object_put(doc);
    ck_assert_int_eq(run_checker(path, "--speedscope --profiles 4 --exact-weights"), 0);
    tb_free(&h);
}
END_TEST

START_TEST(test_collapsed)
{
    struct history h;
    struct stacks s;
    struct export_opts o = opts(EXPORT_COLLAPSED, false);
    struct app_err err = {0};
    char path[256], *text;

    build(&h, &s);
    path_in(path, sizeof(path), tmpdir, "p.folded");
    ck_assert_int_eq(export_write(&h, &o, path, &err), 0);
    text = slurp(path, NULL);
    /* Rank 0's run lasts 4.5 intervals (rounded to 5); S1 is seen 3 + 1 times. */
    ck_assert_str_eq(text, "rank 0;MainThread;main (eval.py:1);evaluate (eval.py:2) 5\n"
                           "rank 1;MainThread;main (train.py:10);train (train.py:20);"
                           "step (train.py:30) 4\n"
                           "rank 1;MainThread;main (train.py:10);train (train.py:20);"
                           "step (train.py:31) 2\n"
                           "rank 1;MainThread;main (train.py:10);train (train.py:20);"
                           "save (io.py:5) 1\n"
                           "pid 7000;MainThread;main (x.py:1) 1\n");
    free(text);
    o.all_threads = true;
    ck_assert_int_eq(export_write(&h, &o, path, &err), 0);
    text = slurp(path, NULL);
    ck_assert_ptr_nonnull(strstr(text, "rank 1;data \"loader\"\\ ;run (threading.py:1);" NONASCII_FN
                                       " (data.py:7);say \"hi\"\\  (we\"ird.py:3) 4\n"));
    free(text);
    tb_free(&h);
}
END_TEST

/* py-spy's -F / --nolineno: the lines of one function are one frame, named without a line,
 * and the stacks that become equal are one line of the collapsed stacks; the history itself
 * keeps its lines (a second export without the option has them). */
START_TEST(test_collapsed_nolines)
{
    struct history h;
    struct stacks s;
    struct export_opts o = opts(EXPORT_COLLAPSED, false);
    struct app_err err = {0};
    char path[256], *text;

    build(&h, &s);
    path_in(path, sizeof(path), tmpdir, "n.folded");
    o.no_lines = true;
    ck_assert_int_eq(export_write(&h, &o, path, &err), 0);
    text = slurp(path, NULL);
    ck_assert_str_eq(text, "rank 0;MainThread;main (eval.py);evaluate (eval.py) 5\n"
                           "rank 1;MainThread;main (train.py);train (train.py);"
                           "step (train.py) 6\n"
                           "rank 1;MainThread;main (train.py);train (train.py);"
                           "save (io.py) 1\n"
                           "pid 7000;MainThread;main (x.py) 1\n");
    free(text);
    o.format = EXPORT_CHROME;
    path_in(path, sizeof(path), tmpdir, "n.json");
    ck_assert_int_eq(export_write(&h, &o, path, &err), 0);
    text = slurp(path, NULL);
    ck_assert_ptr_nonnull(strstr(text, "\"step (train.py)\""));
    ck_assert_ptr_null(strstr(text, "train.py:"));
    free(text);
    o.no_lines = false;
    ck_assert_int_eq(export_write(&h, &o, path, &err), 0);
    text = slurp(path, NULL);
    ck_assert_ptr_nonnull(strstr(text, "step (train.py:31)"));
    free(text);
    tb_free(&h);
}
END_TEST

START_TEST(test_writer_helpers)
{
    struct xbuf b;

    xb_init(&b, NULL);
    xb_jesc(&b, "a\"b\\c\nd\x01\t\xC3\xA9\xFF|\xE6\x95|\xED\xA0\x80|\xF0\x9F\x98\x80");
    xb_put(&b, "", 1);
    ck_assert_str_eq(b.p, "a\\\"b\\\\c\\nd\\u0001\\t\xC3\xA9\xEF\xBF\xBD|\xEF\xBF\xBD\xEF\xBF\xBD"
                          "|\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD|\xF0\x9F\x98\x80");
    b.len = 0;
    xb_us(&b, 0);
    xb_put(&b, " ", 1);
    xb_us(&b, 1500);
    xb_put(&b, " ", 1);
    xb_us(&b, 1000);
    xb_put(&b, " ", 1);
    xb_us(&b, 123456789);
    xb_put(&b, " ", 1);
    xb_us(&b, 1010);
    xb_put(&b, " ", 1);
    xb_dbl(&b, 20.5);
    xb_put(&b, " ", 1);
    xb_dbl(&b, -3);
    xb_put(&b, " ", 1);
    xb_dbl(&b, 0.1);
    xb_put(&b, "", 1);
    ck_assert_str_eq(b.p, "0 1.5 1 123456.789 1.01 20.5 -3 0.1");
    xb_fini(&b);
    ck_assert_int_eq(export_format_parse("chrome"), EXPORT_CHROME);
    ck_assert_int_eq(export_format_parse("speedscope"), EXPORT_SPEEDSCOPE);
    ck_assert_int_eq(export_format_parse("collapsed"), EXPORT_COLLAPSED);
    ck_assert_int_eq(export_format_parse("json"), -1);
    ck_assert_int_eq(export_format_parse(NULL), -1);
    ck_assert_str_eq(export_format_ext(EXPORT_CHROME), ".json");
    ck_assert_str_eq(export_format_ext(EXPORT_SPEEDSCOPE), ".speedscope.json");
    ck_assert_str_eq(export_format_ext(EXPORT_COLLAPSED), ".folded");
}
END_TEST

/* An empty history still gives a well-formed file in every format. */
START_TEST(test_empty)
{
    struct history h;
    struct export_opts o = opts(EXPORT_CHROME, true);
    char path[256];
    json_object *doc;

    tb_init(&h, "");
    doc = export_parse(&h, &o, "empty.json", path, sizeof(path));
    ck_assert_uint_eq(json_object_array_length(get(doc, "traceEvents")), 0);
    json_object_put(doc);
    o.format = EXPORT_SPEEDSCOPE;
    doc = export_parse(&h, &o, "empty.speedscope.json", path, sizeof(path));
    ck_assert_uint_eq(json_object_array_length(get(doc, "profiles")), 0);
    json_object_put(doc);
    tb_free(&h);
}
END_TEST

/* A history big enough to overflow a 16 KiB file system: 3000 runs of long names. */
static void build_big(struct history *h)
{
    static char fn[2][200];
    struct hframe f;
    struct hthread *t;
    uint32_t st[2];

    tb_init(h, "node01");
    for (int i = 0; i < 2; i++) {
        memset(fn[i], 'a' + i, sizeof(fn[i]) - 1);
        fn[i][sizeof(fn[i]) - 1] = '\0';
        f = fr(fn[i], "big.py", i + 1);
        st[i] = tb_stack(h, &f, 1);
    }
    t = tb_thread(tb_rank(h, 100, 0, "node01", "", T(0)), 1, 100, "MainThread", true);
    for (int k = 0; k < 3000; k++)
        tb_run(t, st[k % 2], k, k);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* The file at path still holds `old`, and nothing else is in its directory. */
static void assert_untouched(const char *dir, const char *path, const char *old)
{
    char *now = slurp(path, NULL);

    ck_assert_str_eq(now, old);
    free(now);
    ck_assert_int_eq(dir_entries(dir), 1);
}

START_TEST(test_atomic_replace)
{
    struct history h;
    struct export_opts o = opts(EXPORT_CHROME, true);
    struct app_err err = {0};
    char path[256];
    size_t len;
    char *text;

    build_big(&h);
    path_in(path, sizeof(path), tmpdir, "out.json");
    write_file(path, "previous");
    ck_assert_int_eq(export_write(&h, &o, path, &err), 0);
    text = slurp(path, &len);
    ck_assert_uint_gt(len, 100000);
    ck_assert_ptr_nonnull(strstr(text, "\"otherData\""));
    free(text);
    ck_assert_int_eq(dir_entries(tmpdir), 1);
    ck_assert_int_eq(run_checker(path, "--lanes 1"), 0);
    tb_free(&h);
}
END_TEST

START_TEST(test_missing_dir)
{
    struct history h;
    struct export_opts o = opts(EXPORT_CHROME, true);
    struct app_err err = {0};
    char path[256], want[300];

    build_big(&h);
    path_in(path, sizeof(path), tmpdir, "no/such/dir/out.json");
    ck_assert_int_eq(export_write(&h, &o, path, &err), APP_E_IO);
    ck_assert_int_eq(err.code, APP_E_IO);
    snprintf(want, sizeof(want), "cannot write %s: No such file or directory", path);
    ck_assert_str_eq(err.msg, want);
    ck_assert_int_eq(dir_entries(tmpdir), 0);
    tb_free(&h);
}
END_TEST

/* A directory we may not write into: read-only tmpfs as root (root ignores modes), else a
 * 0555 directory. */
START_TEST(test_readonly_dir)
{
    struct history h;
    struct export_opts o = opts(EXPORT_CHROME, true);
    struct app_err err = {0};
    char dir[256], path[300], want[400];
    bool mounted = false;

    build_big(&h);
    path_in(dir, sizeof(dir), tmpdir, "ro");
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    if (geteuid() == 0) {
        if (mount("tmpfs", dir, "tmpfs", MS_RDONLY, "size=16k")) {
            printf("check_export: mount(2) refused (%s); read-only case skipped\n",
                   strerror(errno));
            tb_free(&h);
            return;
        }
        mounted = true;
    } else {
        ck_assert_int_eq(chmod(dir, 0555), 0);
    }
    path_in(path, sizeof(path), dir, "out.json");
    ck_assert_int_eq(export_write(&h, &o, path, &err), APP_E_IO);
    snprintf(want, sizeof(want), "cannot write %s: %s", path,
             mounted ? "Read-only file system" : "Permission denied");
    ck_assert_str_eq(err.msg, want);
    ck_assert_int_eq(dir_entries(dir), 0);
    if (mounted)
        ck_assert_int_eq(umount2(dir, MNT_DETACH), 0);
    else
        chmod(dir, 0755);
    tb_free(&h);
}
END_TEST

/* A 16 KiB tmpfs fills up mid-export: ENOSPC, old file intact, no temp file. */
START_TEST(test_full_disk)
{
    struct history h;
    struct export_opts o = opts(EXPORT_CHROME, true);
    struct app_err err = {0};
    char dir[256], path[300], want[400];

    path_in(dir, sizeof(dir), tmpdir, "tiny");
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    if (mount("tmpfs", dir, "tmpfs", 0, "size=16k")) {
        printf("check_export: mount(2) refused (%s); tmpfs case skipped, RLIMIT_FSIZE case "
               "covers the write failure\n",
               strerror(errno));
        return;
    }
    build_big(&h);
    path_in(path, sizeof(path), dir, "out.json");
    write_file(path, "previous export");
    for (enum export_format f = EXPORT_CHROME; f <= EXPORT_SPEEDSCOPE; f++) {
        o.format = f;
        ck_assert_int_eq(export_write(&h, &o, path, &err), APP_E_IO);
        snprintf(want, sizeof(want), "cannot write %s: No space left on device", path);
        ck_assert_str_eq(err.msg, want);
        assert_untouched(dir, path, "previous export");
    }
    ck_assert_int_eq(umount2(dir, MNT_DETACH), 0);
    tb_free(&h);
}
END_TEST

/* The file size limit makes write(2) fail with EFBIG; run in a child so the limit dies with
 * it. */
START_TEST(test_file_size_limit)
{
    struct history h;
    struct export_opts o = opts(EXPORT_CHROME, true);
    char path[256];
    pid_t pid;
    int st;

    build_big(&h);
    path_in(path, sizeof(path), tmpdir, "out.json");
    write_file(path, "previous export");
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct rlimit rl = {16384, 16384};
        struct app_err err = {0};
        char want[400];

        signal(SIGXFSZ, SIG_IGN);
        if (setrlimit(RLIMIT_FSIZE, &rl))
            _exit(3);
        snprintf(want, sizeof(want), "cannot write %s: File too large", path);
        if (export_write(&h, &o, path, &err) != APP_E_IO)
            _exit(1);
        _exit(strcmp(err.msg, want) ? 2 : 0);
    }
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 0);
    assert_untouched(tmpdir, path, "previous export");
    tb_free(&h);
}
END_TEST

START_TEST(test_stream_dev_full)
{
    struct history h;
    struct export_opts o = opts(EXPORT_CHROME, true);
    struct app_err err = {0};
    FILE *f = fopen("/dev/full", "w");

    if (!f) {
        printf("check_export: no /dev/full; case skipped\n");
        return;
    }
    build_big(&h);
    ck_assert_int_eq(export_stream(&h, &o, f, &err), APP_E_IO);
    ck_assert_str_eq(err.msg, "write error: No space left on device");
    fclose(f);
    o.format = (enum export_format)7;
    ck_assert_int_eq(export_write(&h, &o, "/nonexistent/x", &err), APP_E_USAGE);
    tb_free(&h);
}
END_TEST

/* The checker itself: each rule it enforces rejects a small trace that breaks it. */
static const struct {
    const char *json, *args;
    int rc;
} checker_cases[] = {
    {"[{\"ph\":\"B\",\"pid\":1,\"tid\":0,\"ts\":1,\"name\":\"a\"},"
     "{\"ph\":\"E\",\"pid\":1,\"tid\":0,\"ts\":2}]",
     "", 0},
    {"[]", "", 1},
    {"[{\"ph\":\"B\",\"pid\":1,\"tid\":0,\"ts\":1,\"name\":\"a\"}", "", 1},
    {"{\"traceEvents\":[{\"ph\":\"B\",\"pid\":1,\"tid\":0,\"ts\":1,\"name\":\"a\"}]}", "", 1},
    {"[{\"ph\":\"B\",\"pid\":1,\"tid\":0,\"ts\":1,\"name\":\"a\"},"
     "{\"ph\":\"E\",\"pid\":1,\"tid\":0,\"ts\":2,\"name\":\"b\"}]",
     "", 1},
    {"[{\"ph\":\"B\",\"pid\":1,\"tid\":0,\"ts\":5,\"name\":\"a\"},"
     "{\"ph\":\"E\",\"pid\":1,\"tid\":0,\"ts\":4}]",
     "", 1},
    {"[{\"ph\":\"B\",\"pid\":1,\"tid\":0,\"ts\":1,\"name\":\"a\"},"
     "{\"ph\":\"E\",\"pid\":1,\"tid\":0,\"ts\":2,\"args\":{\"x\":1}}]",
     "", 1},
    {"[{\"ph\":\"E\",\"pid\":1,\"tid\":0,\"ts\":2}]", "", 1},
    {"[{\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":2,\"dur\":-1,\"name\":\"x\"}]", "", 1},
    {"[{\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":0,\"dur\":10,\"name\":\"a\"},"
     "{\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":5,\"dur\":10,\"name\":\"b\"}]",
     "", 1},
    {"[{\"ph\":\"C\",\"pid\":1,\"ts\":0,\"name\":\"c\",\"args\":{\"v\":\"12\"}}]", "", 1},
    {"[{\"ph\":\"C\",\"pid\":1,\"ts\":0,\"name\":\"c\",\"args\":{}}]", "", 1},
    {"[{\"ph\":\"i\",\"s\":\"p\",\"pid\":4294967296,\"ts\":0,\"name\":\"c\"}]", "", 1},
    {"[{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"thread_name\",\"args\":{}}]", "", 1},
    {"[{\"ph\":\"i\",\"s\":\"x\",\"pid\":1,\"ts\":0,\"name\":\"c\"}]", "", 1},
    {"{\"traceEvents\":[{\"ph\":\"i\",\"s\":\"g\",\"ts\":0,\"name\":\"c\"}],"
     "\"displayTimeUnit\":\"us\"}",
     "", 1},
    {"[{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":\"rank 0\"}}]",
     "--lanes 2", 1},
    {"{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"shared\":{"
     "\"frames\":[{\"name\":\"a\"}]},\"profiles\":[{\"type\":\"sampled\",\"name\":\"p\","
     "\"unit\":\"microseconds\",\"startValue\":0,\"endValue\":3,\"samples\":[[0],[1]],"
     "\"weights\":[1]}]}",
     "--speedscope", 1},
};

START_TEST(test_checker_rejects)
{
    char path[256];

    path_in(path, sizeof(path), tmpdir, "case.json");
    for (size_t i = 0; i < sizeof(checker_cases) / sizeof(*checker_cases); i++) {
        write_file(path, checker_cases[i].json);
        ck_assert_msg(run_checker(path, checker_cases[i].args) == checker_cases[i].rc,
                      "case %zu: %s", i, checker_cases[i].json);
    }
}
END_TEST

/* --- flame graph ------------------------------------------------------------------------- */

#define FG_SPAN 1180.0 /* px the frames span: 1200 less two 10 px margins */
#define UFFFD "\xEF\xBF\xBD"

/* Writes the flame graph of h and reads it back through tests/tools/flamegraph_dump.py, whose
 * XML parser (expat) refuses anything not well-formed; also runs xmllint --noout on it. */
static json_object *flame_parse(const struct history *h, const struct export_opts *o,
                                const char *name, char *path, size_t pathlen)
{
    const char *src = getenv("RANKTOP_SRCDIR");
    struct app_err err = {0};
    char cmd[1024], out[300];
    json_object *doc;
    int st;

    ck_assert_msg(src != NULL, "RANKTOP_SRCDIR is not set (run through meson test)");
    path_in(path, pathlen, tmpdir, name);
    ck_assert_msg(export_write(h, o, path, &err) == 0, "export: %s", err.msg);
    snprintf(cmd, sizeof(cmd), "xmllint --noout '%s'", path);
    st = system(cmd);
    ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 127,
                  "xmllint not found (Debian package libxml2-utils)");
    ck_assert_msg(WEXITSTATUS(st) == 0, "xmllint rejects %s", path);
    snprintf(out, sizeof(out), "%s.dump", path);
    snprintf(cmd, sizeof(cmd), "python3 '%s/tests/tools/flamegraph_dump.py' '%s' > '%s'", src, path,
             out);
    st = system(cmd);
    ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "cannot read back: %s", cmd);
    doc = json_object_from_file(out);
    ck_assert_msg(doc != NULL, "%s: %s", out, json_util_get_last_err());
    return doc;
}

/* The n-th frame (0 first) labelled `label` at depth, or NULL. */
static json_object *flame_frame(json_object *frames, int depth, const char *label, int n)
{
    for (size_t i = 0; i < json_object_array_length(frames); i++) {
        json_object *f = json_object_array_get_idx(frames, i);

        if (geti(f, "depth") == depth && !strcmp(gets(f, "label"), label) && n-- == 0)
            return f;
    }
    return NULL;
}

static void flame_expect(json_object *frames, int depth, const char *label, int x, int w,
                         const char *count)
{
    json_object *f = flame_frame(frames, depth, label, 0);

    ck_assert_msg(f != NULL, "no frame '%s' at depth %d", label, depth);
    ck_assert_int_eq(geti(f, "x"), x);
    ck_assert_int_eq(geti(f, "w"), w);
    if (count)
        ck_assert_str_eq(gets(f, "count"), count);
}

/* Every frame is drawn in proportion to its samples (total samples span FG_SPAN px), lies on
 * a frame one level down that spans it, and shows its label or a cut of it. */
static void flame_geometry(json_object *frames, int total)
{
    for (size_t i = 0; i < json_object_array_length(frames); i++) {
        json_object *f = json_object_array_get_idx(frames, i);
        int x = geti(f, "x"), w = geti(f, "w"), d = geti(f, "depth");
        const char *text = gets(f, "text"), *label = gets(f, "label");
        bool under = d == 0;

        ck_assert_double_eq_tol(json_object_get_double(get(f, "rw")), w * FG_SPAN / total, 0.01);
        ck_assert_double_eq_tol(json_object_get_double(get(f, "rx")), 10 + x * FG_SPAN / total,
                                0.01);
        for (size_t k = 0; k < json_object_array_length(frames) && !under; k++) {
            json_object *p = json_object_array_get_idx(frames, k);

            under = geti(p, "depth") == d - 1 && geti(p, "x") <= x &&
                    x + w <= geti(p, "x") + geti(p, "w");
        }
        ck_assert_msg(under, "frame '%s' stands on nothing", label);
        if (!strstr(text, ".."))
            ck_assert_msg(!text[0] || !strcmp(text, label), "'%s' shows '%s'", label, text);
        else
            ck_assert_msg(!strncmp(text, label, strlen(text) - 2), "'%s' shows '%s'", label, text);
    }
}

/* A warm fill: red the largest component, blue the smallest (hues 0-60°). */
static void flame_warm(json_object *f)
{
    unsigned r, g, b;

    ck_assert_int_eq(sscanf(gets(f, "fill"), "#%2x%2x%2x", &r, &g, &b), 3);
    ck_assert_msg(r >= g && g >= b && r > b, "%s: fill %s", gets(f, "label"), gets(f, "fill"));
}

START_TEST(test_flamegraph)
{
    struct history h;
    struct stacks s;
    struct export_opts o = opts(EXPORT_FLAMEGRAPH, false);
    char path[256];
    json_object *doc, *fs;

    build(&h, &s);
    doc = flame_parse(&h, &o, "p.svg", path, sizeof(path));
    ck_assert(json_object_get_boolean(get(doc, "script")));
    ck_assert_uint_eq(json_object_array_length(get(doc, "external")), 0);
    fs = get(doc, "frames");
    /* The counts of test_collapsed: rank 0 has 5 samples, rank 1 4 + 2 + 1, pid 7000 1. */
    flame_expect(fs, 0, "all", 0, 13, "13 samples (100.00%)");
    ck_assert_str_eq(gets(json_object_array_get_idx(fs, 0), "where"), "3 ranks");
    flame_expect(fs, 1, "rank 0", 0, 5, "5 samples (38.46%)");
    flame_expect(fs, 1, "rank 1", 5, 7, NULL);
    flame_expect(fs, 1, "pid 7000", 12, 1, "1 sample (7.69%)");
    ck_assert_str_eq(gets(flame_frame(fs, 1, "rank 1", 0), "where"),
                     "rank 1 (pid 5263, node01, gpu 1)");
    flame_expect(fs, 2, "MainThread", 0, 5, NULL);
    flame_expect(fs, 3, "main (eval.py:1)", 0, 5, NULL);
    flame_expect(fs, 4, "evaluate (eval.py:2)", 0, 5, NULL);
    flame_expect(fs, 3, MAIN_L, 5, 7, NULL);
    flame_expect(fs, 4, TRAIN_L, 5, 7, NULL);
    /* Callees in name order from their caller's left edge. */
    flame_expect(fs, 5, SAVE_L, 5, 1, NULL);
    flame_expect(fs, 5, STEP30, 6, 4, "4 samples (30.77%)");
    flame_expect(fs, 5, STEP31, 10, 2, NULL);
    ck_assert_str_eq(gets(flame_frame(fs, 5, STEP30, 0), "where"), "train.py:30");
    ck_assert_ptr_null(flame_frame(fs, 2, WORKER_NAME, 0));
    flame_geometry(fs, 13);
    /* One function, one colour, whatever its file and line; every function in warm hues. */
    ck_assert_str_eq(gets(flame_frame(fs, 3, MAIN_L, 0), "fill"),
                     gets(flame_frame(fs, 3, "main (x.py:1)", 0), "fill"));
    ck_assert_str_eq(gets(flame_frame(fs, 5, STEP30, 0), "fill"),
                     gets(flame_frame(fs, 5, STEP31, 0), "fill"));
    for (size_t i = 0; i < json_object_array_length(fs); i++)
        if (geti(json_object_array_get_idx(fs, i), "depth") >= 3)
            flame_warm(json_object_array_get_idx(fs, i));
    json_object_put(doc);

    /* All threads: the worker's frames, their names made XML-safe (the newline is no text). */
    o.all_threads = true;
    doc = flame_parse(&h, &o, "all.svg", path, sizeof(path));
    fs = get(doc, "frames");
    flame_expect(fs, 0, "all", 0, 17, NULL);
    flame_expect(fs, 2, "data \"loader\"\\" UFFFD, 12, 4, NULL);
    flame_expect(fs, 4, NONASCII_FN " (data.py:7)", 12, 4, NULL);
    flame_expect(fs, 5, "say \"hi\"\\" UFFFD " (we\"ird.py:3)", 12, 4, NULL);
    flame_geometry(fs, 17);
    json_object_put(doc);
    tb_free(&h);
}
END_TEST

#define LONG_E 300 /* "é" repeated: a name too long for any frame */

/* Names a target controls cannot break the XML: markup, a CDATA end, quotes, controls, bytes
 * that are not UTF-8, U+FFFE; a long name is cut at a character, with the whole of it in the
 * tooltip. */
START_TEST(test_flamegraph_hostile)
{
    static char long_fn[LONG_E * 2 + 1];
    const struct hframe f[] = {
        fr("<script>alert(1)</script>", "a&b.py", 1),
        fr("]]><x y='1'>", "\"q\".py", 2),
        fr("bad\xFF\xFE utf8 \x01\x1B[31m \xEF\xBF\xBE \xC2\x9B end\xE6\x95", "c.py", 3),
        fr(long_fn, "d.py", 4),
    };
    const char *want[] = {
        "<script>alert(1)</script> (a&b.py:1)",
        "]]><x y='1'> (\"q\".py:2)",
        "bad" UFFFD UFFFD " utf8 " UFFFD UFFFD "[31m " UFFFD " " UFFFD " end" UFFFD UFFFD
        " (c.py:3)",
    };
    struct history h;
    struct export_opts o = opts(EXPORT_FLAMEGRAPH, true);
    struct hthread *t;
    char path[256], *raw;
    json_object *doc, *fs, *lf;
    const char *text;

    for (int i = 0; i < LONG_E; i++)
        memcpy(long_fn + 2 * i, "\xC3\xA9", 2);
    tb_init(&h, "node<&>");
    t = tb_thread(tb_rank(&h, 100, 0, "node<&>", "", T(0)), 1, 100, "T\x07<'&'>", true);
    tb_run(t, tb_stack(&h, f, 4), 0, 9);
    doc = flame_parse(&h, &o, "hostile.svg", path, sizeof(path));
    fs = get(doc, "frames");
    flame_expect(fs, 2, "T" UFFFD "<'&'>", 0, 10, NULL);
    for (int i = 0; i < 3; i++)
        flame_expect(fs, 3 + i, want[i], 0, 10, NULL);
    /* 1180 px hold (1180 - 6) / 7.2 = 163 glyphs: 161 of the name and "..". */
    lf = json_object_array_get_idx(fs, 6);
    ck_assert_int_eq(geti(lf, "depth"), 6);
    ck_assert_uint_eq(strlen(gets(lf, "label")), LONG_E * 2 + strlen(" (d.py:4)"));
    text = gets(lf, "text");
    ck_assert_uint_eq(strlen(text), 161 * 2 + 2);
    ck_assert(!strncmp(text, long_fn, 161 * 2) && !strcmp(text + 161 * 2, ".."));
    flame_geometry(fs, 10);
    json_object_put(doc);
    raw = slurp(path, NULL);
    ck_assert_ptr_null(strstr(raw, "<script>alert"));
    ck_assert_ptr_null(strstr(raw, "\x1B"));
    ck_assert_ptr_nonnull(strstr(raw, "node&lt;&amp;&gt;"));
    free(raw);
    tb_free(&h);
}
END_TEST

#define TINY 5000 /* one-sample stacks, each 0.01 % of the total */

/* Frames under 0.1 % of all samples are left out, their samples still counted below: a
 * thread of 5000 one-sample stacks and one 5000-sample stack draws 4 frames. */
START_TEST(test_flamegraph_bound)
{
    static char names[TINY][16];
    struct history h;
    struct export_opts o = opts(EXPORT_FLAMEGRAPH, false);
    struct hthread *t;
    struct hframe f;
    char path[256];
    json_object *doc, *fs;
    size_t len;

    tb_init(&h, "node01");
    t = tb_thread(tb_rank(&h, 100, 0, "node01", "", T(0)), 1, 100, "MainThread", true);
    for (int i = 0; i < TINY; i++) {
        snprintf(names[i], sizeof(names[i]), "tiny%d", i);
        f = fr(names[i], "t.py", 1);
        tb_run(t, tb_stack(&h, &f, 1), i, i);
    }
    f = fr("big", "t.py", 2);
    tb_run(t, tb_stack(&h, &f, 1), TINY, 2 * TINY - 1);
    doc = flame_parse(&h, &o, "bound.svg", path, sizeof(path));
    fs = get(doc, "frames");
    ck_assert_uint_eq(json_object_array_length(fs), 4);
    flame_expect(fs, 0, "all", 0, 2 * TINY, NULL);
    flame_expect(fs, 2, "MainThread", 0, 2 * TINY, NULL);
    flame_expect(fs, 3, "big (t.py:2)", 0, TINY, "5000 samples (50.00%)");
    json_object_put(doc);
    free(slurp(path, &len));
    ck_assert_uint_lt(len, 16 * 1024);
    tb_free(&h);
}
END_TEST

/* No samples: still an SVG, with the "all" frame alone. */
START_TEST(test_flamegraph_empty)
{
    struct history h;
    struct export_opts o = opts(EXPORT_FLAMEGRAPH, true);
    char path[256];
    json_object *doc, *fs;

    tb_init(&h, "");
    doc = flame_parse(&h, &o, "empty.svg", path, sizeof(path));
    fs = get(doc, "frames");
    ck_assert_uint_eq(json_object_array_length(fs), 1);
    flame_expect(fs, 0, "all", 0, 0, "0 samples (0.00%)");
    json_object_put(doc);
    tb_free(&h);
}
END_TEST

static Suite *export_suite(void)
{
    Suite *s = suite_create("export");
    TCase *tc = tcase_create("formats");
    TCase *io = tcase_create("atomic");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_writer_helpers);
    tcase_add_test(tc, test_chrome_lanes);
    tcase_add_test(tc, test_chrome_ids);
    tcase_add_test(tc, test_chrome_slices);
    tcase_add_test(tc, test_chrome_args);
    tcase_add_test(tc, test_chrome_counters_instants);
    tcase_add_test(tc, test_chrome_window);
    tcase_add_test(tc, test_speedscope);
    tcase_add_test(tc, test_collapsed);
    tcase_add_test(tc, test_collapsed_nolines);
    tcase_add_test(tc, test_flamegraph);
    tcase_add_test(tc, test_flamegraph_hostile);
    tcase_add_test(tc, test_flamegraph_bound);
    tcase_add_test(tc, test_flamegraph_empty);
    tcase_add_test(tc, test_empty);
    tcase_add_test(tc, test_checker_rejects);
    suite_add_tcase(s, tc);
    tcase_add_checked_fixture(io, setup, teardown);
    tcase_add_test(io, test_atomic_replace);
    tcase_add_test(io, test_missing_dir);
    tcase_add_test(io, test_readonly_dir);
    tcase_add_test(io, test_full_disk);
    tcase_add_test(io, test_file_size_limit);
    tcase_add_test(io, test_stream_dev_full);
    suite_add_tcase(s, io);
    return s;
}

int main(void)
{
    return ts_run(export_suite());
}
