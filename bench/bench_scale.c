/* bench_scale: the head at scale with readers beside the local sampler (issue 26's figures).
 *
 * The job: HOSTS simulated hosts (default 128) x RANKS_PER_HOST ranks (8) x 8 threads at
 * 10 Hz, each host a bench/agent_replay process started as the remote shell and speaking the
 * agent protocol to the head's remote collector, as bench_head does; each host first writes a
 * backlog of BACKLOG runs per main thread (default 7200: an hour at 10 Hz of a stack that
 * changes every 5 samples), so the history holds about an hour's worth of runs when the
 * measuring starts (packed into its first seconds: the head clamps older times to its start).
 * Beside it, this node's LOCAL real Python targets (default 64, bench/targets/threads8.py, 8
 * threads each, all sampled) at 100 Hz by the same engine.
 *
 * Readers, as the monitor has them: a frame every 0.5 s (as ui.c's refresh_data and the panes
 * do it: give the last view back, take the published one with engine_acquire and hold it until
 * the next frame, then the rank table, hang verdict and merged tree the monitor draws from) and
 * an autosave every 5 s (engine_acquire_fresh; its export is left out: it reads its view, off
 * every lock). Each reader is its own thread, like the monitor's UI and autosave threads. Their
 * figures count the passes that began inside the measured window: the monitor's first frame
 * waits for the first view by design, before any view exists.
 *
 * The sampler's period error: PROBES of the local targets (default 4) run threads8.py `flip`
 * (the main thread sleeps on eight lines in turn), so most consecutive samples of their main
 * thread see two stacks and the history keeps both sample times (a run's t1, the next run's
 * t0): their difference is one period as the sampler kept it. Error = |interval - 10 ms|.
 *
 * Phases: (1) the local targets alone at 100 Hz, no readers: CPU and the period error the
 * machine gives without a head; (2) everything at once with the readers: period error, copy and
 * frame times, engine CPU (head CPU at 1024 ranks is this less phase 1), history bytes and RSS;
 * (3) for each ranktop binary given (--ranktop, at most 2; default the build's), the figures
 * to compare old and new side by side: `ranktop agent` bytes per rank per second on 8 local
 * targets, `ranktop record` CPU on the local targets at 100 Hz, and `ranktop record` CPU and
 * RSS over the simulated hosts with the backlog.
 *
 * Only engine.h's public calls are used, and the readers' one read is reader_pass: the
 * monitor takes the published view (engine_acquire: the recorder thread copies the history,
 * off the collectors' path; the reader waits only for the first), the autosave one as fresh as
 * the period (engine_acquire_fresh: it waits for the recorder's copy). Its "copy" figures are
 * the readers' waits. To compare two builds of the in-process figures, build each (a git
 * worktree at the old commit, whose reader_pass copied the history itself under the engine
 * lock) and run both runners one after the other; phase 3 compares binaries itself.
 *
 * Usage: bench_scale [--quick] [--local N] [--probes N] [--hosts N] [--ranks-per-host N]
 *        [--backlog RUNS] [--measure S] [--ranktop PATH]... [--no-bin | --bin-only] [PYTHON]
 * --quick: 16 hosts, 16 local targets, backlog 900, 10 s windows (phase 3: half of each
 * window); --no-bin: phases 1 and 2 only; --bin-only: phase 3 only. PYTHON defaults to pyenv's
 * 3.12. The full run takes about 3 minutes, more on a busy machine. Not a test. */
#include "ranktop/engine/engine.h"
#include "ranktop/base/util.h"
#include "ranktop/views/view.h"

#include "bench_support.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_LOCAL 64
#define PERIOD_NS 10000000ull /* the local sampler at 100 Hz */
#define HANG_AFTER_NS 5000000000ull
#define MAX_BINS 2

struct cfg {
    const char *python;
    int nlocal, nprobes, nhosts, per;
    long backlog;
    double warm_s, measure_s, load_max_s;
    const char *bins[MAX_BINS];
    int nbins;
    bool no_bin, bin_only;
};

/* A reader thread: every period_s a copy (and, for the monitor, the views it draws from). */
struct reader {
    struct engine *e;
    double period_s;
    bool views;
    const struct engine_view *held; /* the monitor's view, held until its next frame */
    atomic_bool stop;
    pthread_t th;
    double *copy_ms, *frame_ms, *cpu_ms; /* cpu: the frame's thread CPU time */
    uint64_t *copy_at;                   /* when each copy began */
    size_t n, cap;
    double cpu_s;
};

/* The engine's figures over one measured window. */
struct figures {
    double cpu_pct, hz, lag_ms, lag_max_ms;
    size_t history_bytes;
};

static double thread_cpu_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* What the monitor takes before a frame (the published view: engine_acquire) and the autosave
 * before a save (a view as fresh as the period: engine_acquire_fresh); returns the ms the
 * reader waited for it (the acquire alone), the frame's in *frame_ms (giving the last view
 * back, the acquire, then the models) and its thread CPU time in *cpu_ms. */
static double reader_pass(struct reader *r, double *frame_ms, double *cpu_ms, uint64_t *at)
{
    double c0 = thread_cpu_s();
    uint64_t t0 = *at = clock_mono_ns(), ta, t1, now;
    const struct engine_view *v;

    engine_release_later(r->e, r->held); /* first, as the monitor does: the recorder frees it */
    r->held = NULL;
    ta = clock_mono_ns();
    v = r->views ? engine_acquire(r->e) : engine_acquire_fresh(r->e);
    t1 = clock_mono_ns();
    if (r->views) {
        struct view_hang hang;
        struct view_table table;
        struct view_table_in in = {.live = v->live, .nlive = v->nlive};
        struct view_tree tree;

        now = clock_mono_ns();
        view_hang(&v->hist, now, HANG_AFTER_NS, NULL, &hang);
        view_table(&v->hist, now, &in, &table);
        view_merge(&v->hist, now, NULL, &tree);
        view_merge_fini(&tree);
        view_table_fini(&table);
        view_hang_fini(&hang);
    }
    *frame_ms = (double)(clock_mono_ns() - t0) / 1e6;
    *cpu_ms = (thread_cpu_s() - c0) * 1e3;
    if (r->views)
        r->held = v;
    else
        engine_release(v);
    return (double)(t1 - ta) / 1e6;
}

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    double c0 = thread_cpu_s();

    while (!atomic_load(&r->stop)) {
        uint64_t at;
        double frame, cpu, copy = reader_pass(r, &frame, &cpu, &at);

        if (r->n == r->cap) {
            r->cap = r->cap ? r->cap * 2 : 64;
            r->copy_ms = x_reallocarray(r->copy_ms, r->cap, sizeof(double));
            r->frame_ms = x_reallocarray(r->frame_ms, r->cap, sizeof(double));
            r->cpu_ms = x_reallocarray(r->cpu_ms, r->cap, sizeof(double));
            r->copy_at = x_reallocarray(r->copy_at, r->cap, sizeof(uint64_t));
        }
        r->copy_at[r->n] = at;
        r->copy_ms[r->n] = copy;
        r->cpu_ms[r->n] = cpu;
        r->frame_ms[r->n++] = frame;
        for (double s = 0; s < r->period_s && !atomic_load(&r->stop); s += 0.05)
            bench_sleep_s(0.05);
    }
    r->cpu_s = thread_cpu_s() - c0;
    return NULL;
}

static void reader_start(struct reader *r, struct engine *e, double period_s, bool views)
{
    *r = (struct reader){.e = e, .period_s = period_s, .views = views};
    atomic_init(&r->stop, false);
    if (pthread_create(&r->th, NULL, reader_main, r) != 0) {
        fprintf(stderr, "bench_scale: cannot start a reader thread\n");
        exit(1);
    }
}

static void reader_stop(struct reader *r)
{
    atomic_store(&r->stop, true);
    pthread_join(r->th, NULL);
    engine_release(r->held);
    r->held = NULL;
}

/* p (0-100) of n sorted values. */
static double pct(const double *v, size_t n, double p)
{
    size_t i = (size_t)(p / 100 * (double)n);

    return n ? v[i < n ? i : n - 1] : 0;
}

static void print_times(const char *what, double *v, size_t n)
{
    qsort(v, n, sizeof(double), bench_cmp_double);
    printf("  %-28s p50 %7.2f ms  p95 %7.2f ms  max %7.2f ms  (%zu)\n", what, pct(v, n, 50),
           pct(v, n, 95), n ? v[n - 1] : 0, n);
}

static void reader_print(struct reader *r, const char *name, uint64_t t0, uint64_t t1)
{
    double wall_s = (double)(t1 - t0) / 1e9;
    char what[64];
    size_t n = 0;

    /* The passes that began inside the window (the arrays are done with otherwise). */
    for (size_t i = 0; i < r->n; i++)
        if (r->copy_at[i] >= t0 && r->copy_at[i] < t1) {
            r->copy_ms[n] = r->copy_ms[i];
            r->cpu_ms[n] = r->cpu_ms[i];
            r->frame_ms[n++] = r->frame_ms[i];
        }
    r->n = n;

    snprintf(what, sizeof(what), "%s copy", name);
    print_times(what, r->copy_ms, r->n);
    if (r->views) {
        snprintf(what, sizeof(what), "%s frame models", name);
        print_times(what, r->frame_ms, r->n);
        /* What the frame costs whatever the load: a busy machine stretches the wall time. */
        snprintf(what, sizeof(what), "%s frame CPU", name);
        print_times(what, r->cpu_ms, r->n);
    }
    printf("  %-28s %.1f %% of a core\n", "reader CPU", r->cpu_s / wall_s * 100);
    free(r->copy_ms);
    free(r->frame_ms);
    free(r->cpu_ms);
    free(r->copy_at);
}

static bool is_probe(int key, const int *probes, int n)
{
    for (int i = 0; i < n; i++)
        if (probes[i] == key)
            return true;
    return false;
}

/* Whether [a, b] overlaps a copy of one of the nr readers (the copies' spans, before the
 * readers' times are sorted). */
static bool during_copy(const struct reader *rd, int nr, uint64_t a, uint64_t b)
{
    for (int i = 0; i < nr; i++)
        for (size_t k = 0; k < rd[i].n; k++) {
            uint64_t s = rd[i].copy_at[k], e = s + (uint64_t)(rd[i].copy_ms[k] * 1e6);

            if (s < b && e > a)
                return true;
        }
    return false;
}

struct errors {
    double *v[2]; /* [0]: intervals clear of any copy, [1]: overlapping one */
    size_t n[2], cap[2];
};

static void errors_add(struct errors *er, int k, double ms)
{
    if (er->n[k] == er->cap[k]) {
        er->cap[k] = er->cap[k] ? er->cap[k] * 2 : 1024;
        er->v[k] = x_reallocarray(er->v[k], er->cap[k], sizeof(double));
    }
    er->v[k][er->n[k]++] = ms;
}

/* The sampling intervals of a probe's main thread within [from, to]: run j's last sample and
 * run j+1's first are consecutive samples. Adds |interval - period| in ms. */
static void thread_errors(const struct hthread *t, uint64_t from, uint64_t to,
                          const struct reader *rd, int nr, struct errors *er)
{
    for (size_t j = 0; j + 1 < t->nruns; j++) {
        uint64_t a = history_run(t, j)->t1, b = history_run(t, j + 1)->t0, d;

        if (a < from || b > to || b < a)
            continue;
        d = b - a > PERIOD_NS ? b - a - PERIOD_NS : PERIOD_NS - (b - a);
        errors_add(er, during_copy(rd, nr, a, b), (double)d / 1e6);
    }
}

static void probe_errors(const struct history *h, const int *probes, int nprobes, uint64_t from,
                         uint64_t to, const struct reader *rd, int nr, struct errors *er)
{
    for (size_t i = 0; i < h->nranks; i++) {
        const struct hrank *r = &h->ranks[i];

        if (!is_probe(r->pid, probes, nprobes))
            continue;
        for (size_t k = 0; k < r->nthreads; k++)
            if (r->threads[k].main && !r->threads[k].worker && !r->threads[k].task)
                thread_errors(&r->threads[k], from, to, rd, nr, er);
    }
}

static void print_errors(const char *what, double *v, size_t n)
{
    qsort(v, n, sizeof(double), bench_cmp_double);
    printf("  %-30s p50 %.3f ms  p99 %.3f ms  p99.9 %.3f ms  max %.3f ms  (%zu)\n", what,
           pct(v, n, 50), pct(v, n, 99), pct(v, n, 99.9), n ? v[n - 1] : 0, n);
}

/* The period error of the probes over [from, to], all intervals and, with readers, split into
 * those that overlap a reader's copy and the others. */
static void print_period_error(struct engine *e, const int *probes, int nprobes, uint64_t from,
                               uint64_t to, const struct reader *rd, int nr)
{
    struct history h;
    struct errors er = {0};
    double *all;
    size_t n;

    engine_clone_history(e, &h);
    probe_errors(&h, probes, nprobes, from, to, rd, nr, &er);
    history_fini(&h);
    n = er.n[0] + er.n[1];
    all = x_calloc(n + 1, sizeof(double));
    if (er.n[0])
        memcpy(all, er.v[0], er.n[0] * sizeof(double));
    if (er.n[1])
        memcpy(all + er.n[0], er.v[1], er.n[1] * sizeof(double));
    printf("  sampler period error at 100 Hz (intervals of %d probes' main threads):\n", nprobes);
    print_errors("all intervals", all, n);
    if (nr) {
        print_errors("intervals during a copy", er.v[1], er.n[1]);
        print_errors("intervals clear of copies", er.v[0], er.n[0]);
    }
    free(all);
    free(er.v[0]);
    free(er.v[1]);
}

static double rss_mb(pid_t pid)
{
    char path[64], line[256];
    double kb = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = strtod(line + 6, NULL);
    fclose(f);
    return kb / 1024;
}

/* Engine figures over [a, b]. */
static void window_figures(const struct engine_stats *a, const struct engine_stats *b, uint64_t t0,
                           uint64_t t1, struct figures *f)
{
    double wall = (double)(t1 - t0) / 1e9;

    f->cpu_pct = (double)(b->cpu_ns - a->cpu_ns) / 1e9 / wall * 100;
    f->hz = (double)(b->samples - a->samples) / wall;
    f->lag_ms = b->samples > a->samples ? b->lag_ms : 0;
    f->lag_max_ms = b->lag_max_ms;
    f->history_bytes = b->history_bytes;
}

/* ---- Targets ---- */

static bool start_targets(const struct cfg *c, struct bench_target *t, int *pids)
{
    for (int i = 0; i < c->nlocal; i++) {
        const char *argv[] = {c->python, "-S", BENCH_TARGET, i < c->nprobes ? "flip" : "idle",
                              "20",      NULL};

        if (bench_target_spawn(&t[i], argv) < 0)
            return false;
        pids[i] = t[i].pid;
    }
    for (int i = 0; i < c->nlocal; i++)
        if (!bench_target_ready(&t[i]))
            return false;
    return true;
}

/* ---- Phase 1: the local targets alone ---- */

static double phase_local(const struct cfg *c, int *pids)
{
    struct engine_opts o = {.rate_hz = 100, .all_threads = true};
    struct engine_stats a, b;
    struct figures f;
    struct app_err err = {0};
    struct engine *e;
    uint64_t t0, t1;

    o.disc.pids = pids;
    o.disc.npids = (size_t)c->nlocal;
    if (engine_start(&o, &e, &err) < 0) {
        fprintf(stderr, "bench_scale: %s\n", err.msg);
        exit(1);
    }
    bench_sleep_s(c->warm_s);
    engine_get_stats(e, &a);
    t0 = clock_mono_ns();
    bench_sleep_s(c->measure_s);
    t1 = clock_mono_ns();
    engine_get_stats(e, &b);
    window_figures(&a, &b, t0, t1, &f);
    printf("\n(1) %d local targets x 8 threads at 100 Hz alone, %.0f s:\n", c->nlocal,
           c->measure_s);
    printf("  engine CPU %.1f %% of a core, %.1f Hz achieved, lag mean %.2f ms max %.2f ms\n",
           f.cpu_pct, f.hz, f.lag_ms, f.lag_max_ms);
    print_period_error(e, pids, c->nprobes, t0, t1, NULL, 0);
    engine_stop(e);
    engine_free(e);
    return f.cpu_pct;
}

/* ---- Phase 2: the hosts and the local targets, with readers ---- */

static void replay_env(const struct cfg *c, uint64_t stall)
{
    char v[64];

    snprintf(v, sizeof(v), "%d", c->per);
    setenv("REPLAY_RANKS", v, 1);
    snprintf(v, sizeof(v), "%ld", c->backlog);
    setenv("REPLAY_BACKLOG", v, 1);
    snprintf(v, sizeof(v), "%llu", (unsigned long long)stall);
    setenv("REPLAY_STALL_AT", v, 1);
    setenv("REPLAY_ODD_HOST", "sim000", 1);
}

static char **host_names(int n)
{
    char **hosts = x_calloc((size_t)n + 1, sizeof(char *));

    for (int i = 0; i < n; i++) {
        hosts[i] = x_calloc(16, 1);
        snprintf(hosts[i], 16, "sim%03d", i);
    }
    return hosts;
}

static void free_names(char **hosts, int n)
{
    for (int i = 0; i < n; i++)
        free(hosts[i]);
    free(hosts);
}

/* The history's runs, and in *remote those of other hosts' ranks (keys above a pid's bits). */
static size_t count_runs(struct engine *e, int *nranks, size_t *remote)
{
    struct history h;
    size_t n = 0;

    engine_clone_history(e, &h);
    *nranks = (int)h.nranks;
    *remote = 0;
    for (size_t i = 0; i < h.nranks; i++)
        for (size_t k = 0; k < h.ranks[i].nthreads; k++) {
            n += h.ranks[i].threads[k].nruns;
            if (history_key_pid(h.ranks[i].pid) != h.ranks[i].pid)
                *remote += h.ranks[i].threads[k].nruns;
        }
    history_fini(&h);
    return n;
}

/* Waits until every host is up and the history holds every backlog's runs; returns the
 * seconds it took. */
static double wait_loaded(const struct cfg *c, struct engine *e)
{
    uint64_t t0 = clock_mono_ns();
    size_t want = (size_t)c->nhosts * (size_t)c->per * (size_t)c->backlog;

    for (;;) {
        struct engine_host *h;
        size_t n, up = 0, runs;
        int nranks;
        double s;

        bench_sleep_s(1);
        s = (double)(clock_mono_ns() - t0) / 1e9;
        engine_hosts(e, &h, &n);
        for (size_t i = 0; i < n; i++)
            up += h[i].state == ENGINE_HOST_UP;
        free(h);
        count_runs(e, &nranks, &runs);
        if (up == n && runs >= want)
            return s;
        if (s > c->load_max_s) {
            printf("  (still loading after %.0f s: %zu/%zu hosts up, %zu of %zu runs)\n", s, up, n,
                   runs, want);
            return s;
        }
    }
}

static double stream_bps(struct engine *e, int *ranks)
{
    struct engine_host *h;
    size_t n;
    double bps = 0;

    engine_hosts(e, &h, &n);
    *ranks = 0;
    for (size_t i = 0; i < n; i++) {
        bps += h[i].bytes_per_s;
        *ranks += h[i].ranks;
    }
    free(h);
    return bps;
}

static struct engine *start_head(const struct cfg *c, int *pids, char **hosts)
{
    static char *rsh[] = {(char *)BENCH_REPLAY};
    struct engine_opts o = {.rate_hz = 100,
                            .all_threads = true,
                            .history_ns = 3600ull * 1000000000u,
                            .mem_cap = 2048u << 20};
    struct app_err err = {0};
    struct engine *e;

    replay_env(c, 0);
    o.disc.pids = pids;
    o.disc.npids = (size_t)c->nlocal;
    o.remote = (struct engine_remote_opts){
        .hosts = hosts, .nhosts = (size_t)c->nhosts, .rsh = rsh, .nrsh = 1, .local = true};
    if (engine_start(&o, &e, &err) < 0) {
        fprintf(stderr, "bench_scale: %s\n", err.msg);
        exit(1);
    }
    return e;
}

/* Bytes malloc hands out, large blocks included (mallinfo2 from glibc 2.33; before it,
 * mallinfo's int fields). */
static double heap_bytes(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 m = mallinfo2();

    return (double)m.uordblks + (double)m.hblkhd;
#else
    struct mallinfo m = mallinfo();

    return (double)(unsigned)m.uordblks + (double)(unsigned)m.hblkhd;
#endif
}

/* What a reader's copy of the history costs: history_clone of the engine's history under the
 * engine lock (what view_build does for every view), three times; with the heap it takes. */
static void clone_print(struct engine *e)
{
    double ms[3], mb = 0;

    for (int i = 0; i < 3; i++) {
        struct history h;
        double b0 = heap_bytes();
        uint64_t t0 = clock_mono_ns();

        engine_clone_history(e, &h);
        ms[i] = (double)(clock_mono_ns() - t0) / 1e6;
        mb = (heap_bytes() - b0) / 1048576;
        history_fini(&h);
    }
    qsort(ms, 3, sizeof(double), bench_cmp_double);
    printf("  history_clone (a view's history) %.1f ms (%.1f-%.1f), %.1f MB of heap\n", ms[1],
           ms[0], ms[2], mb);
}

/* The engine's and the stream's figures of phase 2's window. */
static void print_head(const struct cfg *c, struct engine *e, const struct figures *f,
                       double local_cpu)
{
    int rranks;
    double bps = stream_bps(e, &rranks);

    printf("  engine CPU %.1f %% of a core (head's remote collector + local sampler), %.1f Hz "
           "achieved, lag mean %.2f ms max %.2f ms\n",
           f->cpu_pct, f->hz, f->lag_ms, f->lag_max_ms);
    printf("  head CPU at %d ranks (less phase 1's local sampler) %.1f %% of a core\n",
           c->nhosts * c->per, f->cpu_pct - local_cpu);
    printf("  replayed stream %.0f KB/s in, %.0f B per rank per s (%d remote ranks)\n", bps / 1024,
           rranks ? bps / rranks : 0, rranks);
    printf("  history at the end %.1f MB, RSS %.0f MB\n", (double)f->history_bytes / 1048576,
           rss_mb(getpid()));
    clone_print(e);
}

static void phase_head(const struct cfg *c, int *pids, double local_cpu)
{
    char **hosts = host_names(c->nhosts);
    struct engine *e = start_head(c, pids, hosts);
    struct reader rd[2];
    struct engine_stats a, b;
    struct figures f;
    uint64_t t0, t1;
    double load_s = wait_loaded(c, e);
    int nranks;
    size_t remote, runs = count_runs(e, &nranks, &remote);

    engine_get_stats(e, &a);
    printf("\n(2) %d hosts x %d ranks x 8 threads at 10 Hz (backlog %ld runs per main thread, "
           "loaded in %.0f s) + %d local targets at 100 Hz, monitor frame every 0.5 s, autosave "
           "copy every 5 s, %.0f s:\n",
           c->nhosts, c->per, c->backlog, load_s, c->nlocal, c->measure_s);
    printf("  history: %d ranks, %zu runs (%zu of the hosts), %.1f MB (engine's count), RSS %.0f "
           "MB\n",
           nranks, runs, remote, (double)a.history_bytes / 1048576, rss_mb(getpid()));
    reader_start(&rd[0], e, 0.5, true);
    reader_start(&rd[1], e, 5, false);
    bench_sleep_s(c->warm_s);
    engine_get_stats(e, &a);
    t0 = clock_mono_ns();
    bench_sleep_s(c->measure_s);
    t1 = clock_mono_ns();
    engine_get_stats(e, &b);
    reader_stop(&rd[0]);
    reader_stop(&rd[1]);
    window_figures(&a, &b, t0, t1, &f);
    print_period_error(e, pids, c->nprobes, t0, t1, rd, 2);
    reader_print(&rd[0], "monitor", t0, t1);
    reader_print(&rd[1], "autosave", t0, t1);
    print_head(c, e, &f, local_cpu);
    engine_stop(e);
    engine_free(e);
    free_names(hosts, c->nhosts);
}

/* ---- Phase 3: ranktop binaries side by side ---- */

/* utime + stime of pid in seconds, -1 when gone. */
static double proc_cpu_s(pid_t pid)
{
    char path[64], buf[1024], *p;
    unsigned long long ut = 0, st = 0;
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    p = strrchr(buf, ')'); /* the name may hold spaces */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Reads (and drops) what fd gives until s seconds passed; returns the bytes. */
static size_t drain_for(int fd, double s)
{
    uint64_t end = clock_mono_ns() + (uint64_t)(s * 1e9);
    size_t total = 0;
    char buf[65536];

    for (uint64_t now; (now = clock_mono_ns()) < end;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t n;

        if (poll(&p, 1, (int)((end - now) / 1000000) + 1) <= 0)
            continue;
        n = read(fd, buf, sizeof(buf));
        if (n <= 0)
            break;
        total += (size_t)n;
    }
    return total;
}

static void pid_list(const int *pids, int n, char *buf, size_t len)
{
    size_t k = 0;

    buf[0] = 0;
    for (int i = 0; i < n && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%d", i ? "," : "", pids[i]);
}

static void stop_bin(struct bench_target *t)
{
    pid_t pid = t->pid;

    bench_targets_kill(t, 1);
    bench_untrack(pid);
}

/* `ranktop agent` over 8 idle local targets: bytes per rank per second after its first 3 s. */
static void bin_agent(const struct cfg *c, const char *bin, const int *pids)
{
    int first = c->nlocal >= c->nprobes + 8 ? c->nprobes : 0, n = c->nlocal < 8 ? c->nlocal : 8;
    char list[1024];
    const char *argv[] = {bin,           "agent", "-r", "10", "--all-threads",
                          "--heartbeat", "0",     "-p", list, NULL};
    struct bench_target t = {0};
    double s = c->measure_s / 2;
    size_t bytes;

    pid_list(pids + first, n, list, sizeof(list));
    if (bench_target_spawn(&t, argv) < 0)
        return;
    drain_for(fileno(t.out), 3);
    bytes = drain_for(fileno(t.out), s);
    printf("  agent, %d %s ranks x 8 threads at 10 Hz: %.0f B per rank per s\n", n,
           first ? "idle" : "local", (double)bytes / s / n);
    stop_bin(&t);
}

/* CPU % of t's process over s seconds after warm_s. */
static double bin_cpu(const struct bench_target *t, double warm_s, double s)
{
    double a, b;

    bench_sleep_s(warm_s);
    a = proc_cpu_s(t->pid);
    bench_sleep_s(s);
    b = proc_cpu_s(t->pid);
    return a < 0 || b < 0 ? -1 : (b - a) / s * 100;
}

static void bin_record_local(const struct cfg *c, const char *bin, const int *pids)
{
    char list[1024], out[64];
    const char *argv[] = {bin, "record", "--all-threads", "-r", "100", "--autosave-interval",
                          "0", "-d",     "3600",          "-p", list,  "-o",
                          out, NULL};
    struct bench_target t = {0};

    pid_list(pids, c->nlocal, list, sizeof(list));
    snprintf(out, sizeof(out), "/tmp/bench_scale.%d.collapsed", (int)getpid());
    if (bench_target_spawn(&t, argv) < 0)
        return;
    printf("  record, %d local targets x 8 threads at 100 Hz: %.1f %% of a core\n", c->nlocal,
           bin_cpu(&t, c->warm_s, c->measure_s / 2));
    stop_bin(&t);
    unlink(out);
}

/* Waits until t's RSS stops growing and it uses less than half a core (the backlogs are in);
 * returns the seconds. */
static double bin_loaded(const struct cfg *c, const struct bench_target *t)
{
    uint64_t t0 = clock_mono_ns();
    double last = -1, cpu = proc_cpu_s(t->pid);

    for (;;) {
        double rss, s, was = cpu;

        bench_sleep_s(1);
        rss = rss_mb(t->pid);
        cpu = proc_cpu_s(t->pid);
        s = (double)(clock_mono_ns() - t0) / 1e9;
        if ((s >= 3 && rss > 0 && rss < last * 1.005 + 0.5 && cpu - was < 0.5) ||
            s > c->load_max_s || rss < 0)
            return s;
        last = rss;
    }
}

static void bin_record_head(const struct cfg *c, const char *bin)
{
    size_t len = (size_t)c->nhosts * 16, k = 0;
    char *hosts = x_calloc(len, 1), out[64];
    const char *argv[] = {bin,     "record",     "--hosts",       hosts,
                          "--rsh", BENCH_REPLAY, "--all-threads", "-r",
                          "10",    "--history",  "3600",          "--autosave-interval",
                          "5",     "-d",         "3600",          "-o",
                          out,     NULL};
    struct bench_target t = {0};
    double load_s, cpu;

    for (int i = 0; i < c->nhosts; i++)
        k += (size_t)snprintf(hosts + k, len - k, "%ssim%03d", i ? "," : "", i);
    snprintf(out, sizeof(out), "/tmp/bench_scale.%d.collapsed", (int)getpid());
    replay_env(c, 0);
    if (bench_target_spawn(&t, argv) < 0)
        return;
    load_s = bin_loaded(c, &t);
    cpu = bin_cpu(&t, 2, c->measure_s / 2);
    printf("  record --hosts, %d x %d ranks x 8 threads at 10 Hz, autosave every 5 s "
           "(collapsed): %.1f %% of a core, RSS %.0f MB with the backlog (loaded in %.0f s)\n",
           c->nhosts, c->per, cpu, rss_mb(t.pid), load_s);
    stop_bin(&t);
    unlink(out);
    free(hosts);
}

static void phase_bins(const struct cfg *c, const int *pids)
{
    for (int i = 0; i < c->nbins; i++) {
        printf("\n(3%c) %s:\n", 'a' + i, c->bins[i]);
        bin_agent(c, c->bins[i], pids);
        bin_record_local(c, c->bins[i], pids);
        bin_record_head(c, c->bins[i]);
    }
}

/* ---- main ---- */

static int usage(void)
{
    fprintf(stderr,
            "usage: bench_scale [--quick] [--local N (1-%d)] [--probes N] [--hosts N] "
            "[--ranks-per-host N] [--backlog RUNS] [--measure S] [--ranktop PATH]... "
            "[--no-bin | --bin-only] [PYTHON]\n",
            MAX_LOCAL);
    return 2;
}

static int parse(int argc, char **argv, struct cfg *c)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (!strcmp(a, "--quick")) {
            c->nhosts = 16, c->nlocal = 16, c->backlog = 900, c->measure_s = 10;
            c->warm_s = 2, c->load_max_s = 30;
        } else if (!strcmp(a, "--no-bin")) {
            c->no_bin = true;
        } else if (!strcmp(a, "--bin-only")) {
            c->bin_only = true;
        } else if (a[0] != '-') {
            c->python = a;
        } else if (!v) {
            return -1;
        } else if (!strcmp(a, "--local")) {
            c->nlocal = atoi(v), i++;
        } else if (!strcmp(a, "--probes")) {
            c->nprobes = atoi(v), i++;
        } else if (!strcmp(a, "--hosts")) {
            c->nhosts = atoi(v), i++;
        } else if (!strcmp(a, "--ranks-per-host")) {
            c->per = atoi(v), i++;
        } else if (!strcmp(a, "--backlog")) {
            c->backlog = atol(v), i++;
        } else if (!strcmp(a, "--measure")) {
            c->measure_s = atof(v), i++;
        } else if (!strcmp(a, "--ranktop") && c->nbins < MAX_BINS) {
            c->bins[c->nbins++] = v, i++;
        } else {
            return -1;
        }
    }
    if (c->nlocal < 1 || c->nlocal > MAX_LOCAL || c->nprobes < 1 || c->nprobes > c->nlocal ||
        c->nhosts < 1 || c->nhosts > ENGINE_MAX_HOSTS || c->per < 1 || c->backlog < 0 ||
        c->measure_s <= 0)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    struct cfg c = {.nlocal = 64,
                    .nprobes = 4,
                    .nhosts = 128,
                    .per = 8,
                    .backlog = 7200,
                    .warm_s = 3,
                    .measure_s = 30,
                    .load_max_s = 90};
    struct bench_target t[MAX_LOCAL];
    int pids[MAX_LOCAL];

    if (parse(argc, argv, &c) < 0)
        return usage();
    if (!c.python)
        c.python = bench_python(12);
    if (!c.nbins && !c.no_bin)
        c.bins[c.nbins++] = BENCH_RANKTOP;
    if (c.no_bin)
        c.nbins = 0;
    bench_handlers_install();
    memset(t, 0, sizeof(t));
    bench_print_load("start");
    printf("python %s, %d local targets (%d probes), %d hosts x %d ranks, backlog %ld runs\n",
           c.python, c.nlocal, c.nprobes, c.nhosts, c.per, c.backlog);
    if (!start_targets(&c, t, pids)) {
        fprintf(stderr, "bench_scale: a target did not start\n");
        bench_kill_tracked();
        return 1;
    }
    if (!c.bin_only)
        phase_head(&c, pids, phase_local(&c, pids));
    phase_bins(&c, pids);
    bench_targets_kill(t, c.nlocal);
    bench_print_load("end");
    return 0;
}
