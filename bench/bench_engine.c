/* bench_engine: what the sampling engine costs the monitor and what it costs the job.
 *
 * Part 1, monitor CPU: starts 8, 32 or 64 targets (bench/targets/threads8.py: a main thread and
 * 7 helpers, each about 20 frames deep, blocked in Event.wait), runs the engine on them at 10
 * or 100 Hz sampling every thread, and after a warm-up measures this process's CPU time over
 * wall time (% of one core) with the engine's achieved rate, mean lag and stacks per pass
 * over the same window. Rows with busy mains have that many targets' main thread busy in a
 * Python loop; the others are idle (every thread blocked: the reader's cheapest case, a still
 * process) or tick (the main thread wakes every 5 ms for a little Python, so every process
 * moves between samples while its helpers stay parked, as in a training job). Few targets are
 * busy so that they do not starve the monitor on a small machine.
 *
 * Part 2, target slowdown: one threads8.py target runs a fixed pure-Python workload (about
 * 2 s) on request and reports its own wall time; runs alternate between unsampled and sampled
 * by the engine at 100 Hz (all threads, ABBA order against drift). Prints the medians and the
 * slowdown (goal < 1 %, issue 4).
 *
 * History memory and export time for an hour of 64 ranks at 10 Hz: see bench_export.
 *
 * Usage: bench_engine [--quick] [PYTHON]; PYTHON defaults to pyenv's 3.12, else
 * /usr/bin/python3. Every target is killed at the end, on SIGINT / SIGTERM, and (through
 * PR_SET_PDEATHSIG) if this process dies. Not a test: it asserts nothing. */
#include "ranktop/engine/engine.h"
#include "ranktop/base/util.h"

#include "bench_support.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TARGETS 64
#define DEPTH "20"
#define MAX_RUNS 5

struct cfg {
    const char *python;
    const char *script;
    double warm_s, measure_s; /* part 1 */
    int runs;                 /* part 2, per side */
    const char *iters;        /* part 2 workload size */
};

/* Forks one target: python -S SCRIPT MODE DEPTH ITERS. */
static int spawn_target(const struct cfg *c, const char *mode, struct bench_target *t)
{
    const char *argv[] = {c->python, "-S", c->script, mode, DEPTH, c->iters, NULL};

    return bench_target_spawn(t, argv);
}

/* Starts n targets (the first nbusy with a busy main thread, the others in mode `rest`);
 * false when one fails. */
static bool start_targets(const struct cfg *c, struct bench_target *t, int n, int nbusy,
                          const char *rest)
{
    memset(t, 0, sizeof(*t) * (size_t)n);
    for (int i = 0; i < n; i++)
        if (spawn_target(c, i < nbusy ? "busy" : rest, &t[i]) < 0)
            return false;
    for (int i = 0; i < n; i++)
        if (!bench_target_ready(&t[i]))
            return false;
    return true;
}

static int start_engine(struct bench_target *t, int n, double hz, int *pids, struct engine **e)
{
    struct engine_opts o = {.rate_hz = hz, .all_threads = true};
    struct app_err err = {0};
    int rc;

    for (int i = 0; i < n; i++)
        pids[i] = t[i].pid;
    o.disc.pids = pids;
    o.disc.npids = n;
    o.disc.dev.nvidia_smi = "/nonexistent";
    o.disc.dev.npu_smi = "/nonexistent";
    o.disc.dev.no_nvml = true;
    o.disc.dev.no_dcmi = true;
    rc = engine_start(&o, e, &err);
    if (rc < 0)
        fprintf(stderr, "bench_engine: engine_start: %s\n", err.msg);
    return rc;
}

/* Part 1: one row of monitor cost. */
static void cpu_row(const struct cfg *c, int n, int nbusy, const char *rest, double hz)
{
    struct bench_target t[MAX_TARGETS];
    int pids[MAX_TARGETS];
    struct engine *e;
    struct bench_window w;
    double ds;

    if (!start_targets(c, t, n, nbusy, rest) || start_engine(t, n, hz, pids, &e) < 0) {
        printf("%7d %5d %5s %6.0f  (could not start)\n", n, nbusy, rest, hz);
        bench_targets_kill(t, n);
        return;
    }
    bench_engine_window(e, c->warm_s, c->measure_s, &w);
    bench_targets_kill(t, n);
    ds = (double)(w.b.samples - w.a.samples);
    printf("%7d %5d %5s %6.0f %7.2f %9.1f %8.2f %8.1f %7.1f %6d %6llu\n", n, nbusy, rest, hz,
           w.cpu_pct, w.passes_s, w.lag_ms, w.b.lag_max_ms,
           ds > 0 ? (double)(w.b.stacks - w.a.stacks) / ds : 0, w.b.ranks,
           (unsigned long long)(w.b.errors - w.a.errors));
}

/* Runs the workload once; *wall and *cpu get its times in seconds as the target measured
 * them (its main thread's CPU time). Returns 0 or -1. */
static int run_work(struct bench_target *t, double *wall, double *cpu)
{
    char line[64];

    if (fputs("go\n", t->in) == EOF || fflush(t->in) == EOF || !fgets(line, sizeof(line), t->out))
        return -1;
    return sscanf(line, "%lf %lf", wall, cpu) == 2 ? 0 : -1;
}

/* Waits until the engine has attached to the target and recorded its stacks. */
static bool engine_attached(struct engine *e)
{
    struct engine_stats st;

    for (int i = 0; i < 500; i++) {
        engine_get_stats(e, &st);
        if (st.ranks > 0 && st.stacks > 0)
            return true;
        bench_sleep_s(0.01);
    }
    return false;
}

/* One sampled run (times as run_work); *hz and *mon accumulate the engine's rate and the
 * monitor's CPU share. */
static void run_sampled(struct bench_target *t, double *wall, double *cpu, double *hz, double *mon)
{
    int pid;
    struct engine *e;
    struct engine_stats a, b;
    double dt;
    uint64_t t0;

    *wall = *cpu = -1;
    if (start_engine(t, 1, 100, &pid, &e) < 0)
        return;
    if (engine_attached(e)) {
        engine_get_stats(e, &a);
        t0 = clock_mono_ns();
        run_work(t, wall, cpu);
        engine_get_stats(e, &b);
        dt = (double)(clock_mono_ns() - t0) / 1e9;
        *hz += (double)(b.samples - a.samples) / dt;
        *mon += (double)(b.cpu_ns - a.cpu_ns) / 1e9 / dt * 100;
    }
    engine_stop(e);
    engine_free(e);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Prints the runs in their order, then sorts them. */
static void print_side(const char *name, double *v, int n)
{
    double m;

    printf("%-10s", name);
    for (int i = 0; i < n; i++)
        printf(" %7.3f", v[i]);
    m = median(v, n);
    printf("   median %7.3f  min %7.3f\n", m, v[0]);
}

/* Prints both sides of one measure (wall or CPU) and the slowdown three ways: of the
 * medians, of the minima, and the median of the adjacent pairs' ratios (least drift). */
static void print_measure(const char *name, double *u, double *s, int n)
{
    double pair[MAX_RUNS], mu, ms, mp;

    for (int i = 0; i < n; i++)
        pair[i] = u[i] > 0 ? s[i] / u[i] : 0;
    mp = median(pair, n);
    print_side(name, u, n);
    print_side("  sampled", s, n);
    mu = median(u, n);
    ms = median(s, n);
    printf("  slowdown %+.2f %% (medians), %+.2f %% (minima), %+.2f %% (pairs)\n",
           (ms / mu - 1) * 100, (s[0] / u[0] - 1) * 100, (mp - 1) * 100);
}

/* Steal and total CPU time of the machine (jiffies, /proc/stat), to show a noisy host. */
static void cpu_jiffies(unsigned long long *steal, unsigned long long *total)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");

    *steal = *total = 0;
    if (!f)
        return;
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7]) == 8) {
        for (int i = 0; i < 8; i++)
            *total += v[i];
        *steal = v[7];
    }
    fclose(f);
}

/* Part 2: alternating unsampled (u) and sampled (s) runs in the order u s s u u s ... */
static void slowdown(const struct cfg *c)
{
    struct bench_target t;
    double uw[MAX_RUNS], uc[MAX_RUNS], sw[MAX_RUNS], sc[MAX_RUNS], hz = 0, mon = 0;

    unsigned long long st0, tot0, st1, tot1;

    memset(&t, 0, sizeof(t));
    cpu_jiffies(&st0, &tot0);
    if (spawn_target(c, "work", &t) < 0 || !bench_target_ready(&t) ||
        run_work(&t, uw, uc) < 0) { /* the first run warms the interpreter */
        printf("(the workload target failed)\n");
        bench_targets_kill(&t, 1);
        return;
    }
    for (int i = 0; i < c->runs; i++) {
        bool sampled_first = i % 2;

        if (sampled_first)
            run_sampled(&t, &sw[i], &sc[i], &hz, &mon);
        if (run_work(&t, &uw[i], &uc[i]) < 0)
            uw[i] = uc[i] = -1;
        if (!sampled_first)
            run_sampled(&t, &sw[i], &sc[i], &hz, &mon);
    }
    bench_targets_kill(&t, 1);
    cpu_jiffies(&st1, &tot1);
    print_measure("wall", uw, sw, c->runs);
    print_measure("cpu", uc, sc, c->runs);
    printf("engine %.1f Hz, monitor CPU %.2f %% of one core; host steal %.1f %%\n", hz / c->runs,
           mon / c->runs, tot1 > tot0 ? (double)(st1 - st0) * 100 / (double)(tot1 - tot0) : 0);
}

static void monitor_cpu(const struct cfg *c)
{
    /* 64 x 8 at 100 Hz: issue 12's goal, with every process still (idle) and with every
     * main thread moving between samples while its helpers stay parked (tick). */
    static const struct {
        int n, nbusy;
        const char *rest;
        double hz;
    } rows[] = {{8, 0, "idle", 10},   {8, 0, "idle", 100},  {32, 0, "idle", 10},
                {32, 0, "idle", 100}, {8, 1, "idle", 100},  {32, 1, "idle", 100},
                {64, 0, "idle", 100}, {64, 0, "tick", 100}, {64, 0, "tick", 10}};

    printf("\nmonitor CPU, 8 threads per target at depth %s, all threads sampled "
           "(%.0f s after %.0f s warm-up)\n",
           DEPTH, c->measure_s, c->warm_s);
    printf("%7s %5s %5s %6s %7s %9s %8s %8s %7s %6s %6s\n", "targets", "busy", "rest", "Hz",
           "cpu %", "achieved", "lag ms", "lag max", "stacks", "ranks", "errors");
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        cpu_row(c, rows[i].n, rows[i].nbusy, rows[i].rest, rows[i].hz);
}

int main(int argc, char **argv)
{
    struct cfg c = {.warm_s = 2, .measure_s = 8, .runs = 5, .iters = "15000000"};

    c.script = getenv("RANKTOP_BENCH_TARGET") ? getenv("RANKTOP_BENCH_TARGET") : BENCH_TARGET;
    c.python = bench_python(12);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            c = (struct cfg){.python = c.python,
                             .script = c.script,
                             .warm_s = 1,
                             .measure_s = 2,
                             .runs = 3,
                             .iters = "4000000"};
        } else {
            c.python = argv[i];
        }
    }
    bench_handlers_install();
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("python %s, target %s\n", c.python, c.script);
    bench_print_load("start");
    monitor_cpu(&c);
    printf("\nslowdown of a CPU-bound target (main thread busy, 7 idle) sampled at 100 Hz, "
           "%d runs per side, seconds; the first row of each is unsampled\n",
           c.runs);
    slowdown(&c);
    printf("\nhistory memory and export time for 64 ranks x 10 Hz x 1 h: run bench_export\n");
    bench_print_load("end");
    return 0;
}
