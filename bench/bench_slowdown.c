/* bench_slowdown: how much sampling slows a CPU-bound target (issue 12's goal: < 1 % at
 * 100 Hz), with a confidence interval.
 *
 * One long-lived target (bench/targets/spin_rate.py: a main thread 20 frames deep running fixed
 * units of pure-Python work, about 0.5 ms each, without pause; 7 helper threads parked at the
 * same depth) notes the end time and its main thread's own CPU time of every unit, and hands
 * them over at the end. One sampler (`ranktop record --all-threads -r HZ -p PID`) is attached
 * to it for the whole run and stopped (SIGSTOP) or let run (SIGCONT) in turn: phases of PHASE
 * seconds (default 0.1), PAIRS pairs of adjacent phases (default 1000), one untouched and one
 * sampled, their order alternating (ABBA) against drift. A stopped sampler does nothing (its
 * loop skips missed ticks rather than bursting when continued), so an untouched phase is one
 * without sampling, and phases can be this short: on this shared 2-vCPU VM a phase's speed
 * varies by about 20 % whatever its length (the other vCPU's and the host's load), so the
 * interval narrows only with the number of pairs. Units that start less than SETTLE_S into a
 * phase are left out. Each pair gives the ratio of its two phases' time per unit, in CPU
 * seconds and in wall seconds; the figure is the median ratio minus one, with a
 * distribution-free 95 % interval for the median (order statistics of the pair ratios, from
 * the binomial distribution). The CPU figure leaves out steal and waiting for a CPU, so it is
 * what sampling costs the target itself (cache and memory traffic, the kernel's side of the
 * remote reads); the wall figure adds the competition for the CPUs. A control compares the
 * adjacent phases of the same kind that the ABBA order puts between pairs: its interval should
 * hold 0. ranktop's CPU share and its rate over the sampled phases are printed beside them.
 * Not a test: it asserts nothing. Main thread only.
 *
 * --runs: the former design, pairs of separate runs (threads8.py work, about 1 s each), one
 * untouched and one sampled by a ranktop of its own; its intervals are as wide as the target's
 * run-to-run variation (about 45 points here).
 *
 * Usage: bench_slowdown [--pairs N] [--rate HZ] [--phase S] [--runs] [PYTHON] */
#include "bench_support.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SETTLE_S 0.005
#define MAX_PAIRS 100000
#define MAX_RUNS 200 /* pairs in --runs */

struct opts {
    int pairs;
    double hz, phase_s;
    const char *python;
};

/* Temporary files: the target's notes, the sampler's output and its stderr (its summary). */
struct tmpfiles {
    char rates[32], out[32], log[32];
};

struct phase {
    double t0, t1; /* CLOCK_MONOTONIC seconds */
    bool sampled;
    double units, cpu, wall; /* over the units kept */
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Starts ranktop record on pid in the background, its stderr to log (when given); its pid, or
 * -1. */
static pid_t sampler_start(int pid, double hz, const char *out, const char *log)
{
    char p[16], r[32];
    pid_t s;

    snprintf(p, sizeof(p), "%d", pid);
    snprintf(r, sizeof(r), "%g", hz);
    fflush(stdout);
    s = fork();
    if (s == 0) {
        const char *argv[] = {BENCH_RANKTOP, "record", "--all-threads", "-r",        r,
                              "-p",          p,        "--format",      "collapsed", "-o",
                              out,           NULL};

        if (!freopen(log ? log : "/dev/null", "w", stderr))
            _exit(127);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    bench_track(s);
    return s;
}

/* Stops the sampler (continued first, should it be stopped) and reaps it; its CPU seconds. */
static double sampler_stop(pid_t s)
{
    struct rusage ru;

    if (s <= 0)
        return 0;
    kill(s, SIGTERM);
    kill(s, SIGCONT);
    memset(&ru, 0, sizeof(ru));
    wait4(s, NULL, 0, &ru);
    bench_untrack(s);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* The sample count from the sampler's summary line, or 0. */
static double sampler_samples(const char *log)
{
    FILE *f = fopen(log, "r");
    char line[512];
    double n = 0;

    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "ranktop: %lf samples,", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

/* The 95 % interval of the median of n sorted values: ranks lo and hi (0-based) such that
 * P(Bin(n, 1/2) < lo + 1) <= 2.5 %. The terms are summed from their logarithms: 0.5^n
 * underflows past about 1070 pairs. */
static void median_ci(int n, int *lo, int *hi)
{
    double cum = 0, lc = 0; /* lc = log binomial(n, k) */
    int k = 0;

    while (k < n) {
        double p = exp(lc + n * log(0.5));

        if (cum + p > 0.025)
            break;
        cum += p;
        lc += log((double)(n - k) / (k + 1));
        k++;
    }
    *lo = k > 0 ? k - 1 : 0;
    *hi = n - 1 - *lo;
}

static double median(const double *v, int n)
{
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Sorts the n ratios and prints the median slowdown with its interval. */
static void report(const char *what, double *r, int n, const char *unit)
{
    int lo, hi;

    qsort(r, (size_t)n, sizeof(double), bench_cmp_double);
    median_ci(n, &lo, &hi);
    printf("  %s: median %+.2f %%, 95 %% interval [%+.2f %%, %+.2f %%] over %d %s\n", what,
           (median(r, n) - 1) * 100, (r[lo] - 1) * 100, (r[hi] - 1) * 100, n, unit);
}

/* Runs the 2 * pairs phases, the sampler s continued in the sampled ones; pair k's phases are
 * 2k and 2k + 1, the sampled one second in even pairs and first in odd ones. */
static void phases_run(const struct opts *o, pid_t s, struct phase *ph)
{
    for (int i = 0; i < 2 * o->pairs; i++) {
        ph[i].sampled = ((i / 2) % 2) ^ (i % 2);
        if (ph[i].sampled)
            kill(s, SIGCONT);
        ph[i].t0 = now_s();
        bench_sleep_s(o->phase_s);
        ph[i].t1 = now_s();
        if (ph[i].sampled)
            kill(s, SIGSTOP);
    }
}

/* First index in the sorted t[0..n) at or after x. */
static size_t lower_bound(const double *t, size_t n, double x)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (t[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Reads the target's notes (n unit end times, then n CPU times) and gives each phase the units
 * that start SETTLE_S or more into it and end in it; the number of units kept, or -1. */
static long units_assign(const char *path, struct phase *ph, int nph)
{
    FILE *f = fopen(path, "rb");
    double *t = NULL;
    long size = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1, kept = 0;
    size_t n = size > 0 ? (size_t)size / (2 * sizeof(double)) : 0;

    if (n > 0 && (t = malloc(2 * n * sizeof(double))) != NULL) {
        rewind(f);
        if (fread(t, sizeof(double), 2 * n, f) != 2 * n)
            n = 0;
    }
    for (int k = 0; k < nph && t && n > 0; k++) {
        size_t i = lower_bound(t, n, ph[k].t0 + SETTLE_S), j = lower_bound(t, n, ph[k].t1);

        if (j > i + 1) { /* units i+1 .. j-1: from the end of unit i to the end of unit j-1 */
            ph[k].units = (double)(j - 1 - i);
            ph[k].wall = t[j - 1] - t[i];
            ph[k].cpu = t[n + j - 1] - t[n + i];
            kept += (long)(j - 1 - i);
        }
    }
    if (f)
        fclose(f);
    free(t);
    return n > 0 ? kept : -1;
}

/* Time per unit of phase b over phase a, in CPU (cpu true) or wall seconds; 0 if either phase
 * kept no unit. */
static double ratio(const struct phase *a, const struct phase *b, bool cpu)
{
    if (a->units <= 0 || b->units <= 0 || a->cpu <= 0 || a->wall <= 0)
        return 0;
    return ((cpu ? b->cpu : b->wall) / b->units) / ((cpu ? a->cpu : a->wall) / a->units);
}

/* Sampled over untouched for each pair, and later over earlier for the same-kind phases
 * between pairs (ratio arrays of o->pairs entries). */
static void phases_report(const struct opts *o, const struct phase *ph, double *rc, double *rw,
                          double *nc, double *nw)
{
    int n = 0, nn = 0;

    for (int k = 0; k < o->pairs; k++) {
        const struct phase *a = &ph[2 * k], *b = &ph[2 * k + 1];
        const struct phase *u = a->sampled ? b : a, *s = a->sampled ? a : b;

        if (ratio(u, s, true) > 0) {
            rc[n] = ratio(u, s, true);
            rw[n++] = ratio(u, s, false);
        }
        if (k + 1 < o->pairs && ratio(b, &ph[2 * k + 2], true) > 0) {
            nc[nn] = ratio(b, &ph[2 * k + 2], true);
            nw[nn++] = ratio(b, &ph[2 * k + 2], false);
        }
    }
    if (n < 6 || nn < 5) {
        printf("  too few phases kept a unit (%d pairs, %d controls)\n", n, nn);
        return;
    }
    report("slowdown, CPU time per unit ", rc, n, "pairs");
    report("slowdown, wall time per unit", rw, n, "pairs");
    report("control,  CPU time per unit ", nc, nn, "same-kind phase pairs");
    report("control,  wall time per unit", nw, nn, "same-kind phase pairs");
}

static bool tmpfiles_make(struct tmpfiles *tf)
{
    char *names[] = {tf->rates, tf->out, tf->log};
    bool ok = true;

    for (int i = 0; i < 3; i++) {
        int fd;

        snprintf(names[i], sizeof(tf->rates), "/tmp/bench_slowdown.XXXXXX");
        fd = mkstemp(names[i]);
        if (fd >= 0) {
            close(fd);
        } else {
            names[i][0] = '\0';
            ok = false;
        }
    }
    return ok;
}

static void tmpfiles_remove(struct tmpfiles *tf)
{
    const char *names[] = {tf->rates, tf->out, tf->log};

    for (int i = 0; i < 3; i++)
        if (names[i][0])
            unlink(names[i]);
}

/* Starts the sampler, runs the phases, then ends it and has the target write its notes
 * (true when it said "done"); sampled_s and the sampler's CPU seconds and samples returned. */
static bool phased_run(const struct opts *o, struct bench_target *t, const struct tmpfiles *tf,
                       struct phase *ph, double sampler[2])
{
    pid_t s = sampler_start(t->pid, o->hz, tf->out, tf->log);
    char line[16];

    if (s <= 0) /* never kill(-1, ...) */
        return false;
    /* Stopped at once, so that every sample it takes falls in a sampled phase: it attaches in
     * the first one (one pair of many). */
    kill(s, SIGSTOP);
    bench_sleep_s(1.5); /* the target warm */
    phases_run(o, s, ph);
    sampler[0] = sampler_stop(s);
    sampler[1] = sampler_samples(tf->log);
    fclose(t->in); /* EOF: the target writes its notes */
    t->in = NULL;
    return fgets(line, sizeof(line), t->out) && strncmp(line, "done", 4) == 0;
}

/* The phased design (see the head comment). */
static int phased(const struct opts *o)
{
    const char *targv[] = {o->python, "-S", BENCH_SPIN, NULL, "20", NULL};
    struct phase *ph = calloc((size_t)(2 * o->pairs), sizeof(*ph));
    double *r = calloc((size_t)(4 * o->pairs), sizeof(double)), sampler[2], sampled_s = 0;
    struct tmpfiles tf;
    struct bench_target t = {0};
    long kept = -1;

    targv[3] = tf.rates;
    if (!tmpfiles_make(&tf) || !ph || !r || bench_target_spawn(&t, targv) < 0 ||
        !bench_target_ready(&t)) {
        printf("could not start the target\n");
    } else {
        bench_print_load("start");
        if (phased_run(o, &t, &tf, ph, sampler))
            kept = units_assign(tf.rates, ph, 2 * o->pairs);
    }
    bench_targets_kill(&t, 1);
    tmpfiles_remove(&tf);
    for (int i = 0; i < 2 * o->pairs; i++)
        sampled_s += ph && ph[i].sampled ? ph[i].t1 - ph[i].t0 : 0;
    if (kept >= 0) {
        printf("%s, spin_rate.py (main thread 20 deep running 0.5 ms units, 7 threads parked), "
               "%d pairs of %g s phases, one untouched and one sampled by ranktop record "
               "--all-threads -r %g; %ld units kept:\n",
               o->python, o->pairs, o->phase_s, o->hz, kept);
        phases_report(o, ph, r, r + o->pairs, r + 2 * o->pairs, r + 3 * o->pairs);
        printf("  ranktop: %.2f %% of a core over the sampled phases (attach included), "
               "%.1f Hz in them\n",
               sampler[0] / sampled_s * 100, sampler[1] / sampled_s);
        bench_print_load("end");
    } else if (ph && r) {
        printf("could not start ranktop, or read the target's notes\n");
    }
    free(ph);
    free(r);
    return kept >= 0 ? 0 : 1;
}

/* One run of the workload: its wall and CPU seconds as the target measured them. */
static bool run_work(struct bench_target *t, double *wall, double *cpu)
{
    char line[64];

    return fputs("go\n", t->in) != EOF && fflush(t->in) != EOF &&
           fgets(line, sizeof(line), t->out) && sscanf(line, "%lf %lf", wall, cpu) == 2;
}

/* Fills rw and rc with the pairs' sampled-over-untouched wall and CPU ratios; how many. */
static int runs_pairs(const struct opts *o, struct bench_target *t, const char *out, double *rw,
                      double *rc)
{
    int n = 0;

    for (int k = 0; k < o->pairs; k++) {
        double w[2], c[2]; /* [0] untouched, [1] sampled */
        bool ok = true;

        for (int j = 0; j < 2 && ok; j++) {
            int sampled = (k % 2) ^ j; /* ABBA: the order alternates per pair */
            pid_t s = sampled ? sampler_start(t->pid, o->hz, out, NULL) : 0;

            if (sampled)
                bench_sleep_s(0.5); /* attached and sampling before the run starts */
            ok = run_work(t, &w[sampled], &c[sampled]);
            sampler_stop(s);
        }
        if (ok && w[0] > 0 && c[0] > 0) {
            rw[n] = w[1] / w[0];
            rc[n++] = c[1] / c[0];
        }
    }
    return n;
}

/* --runs: the former design, separate runs of the workload (see the head comment). */
static int separate_runs(const struct opts *o)
{
    const char *targv[] = {o->python, "-S", BENCH_TARGET, "work", "20", "8000000", NULL};
    struct tmpfiles tf;
    struct bench_target t = {0};
    double rw[MAX_RUNS], rc[MAX_RUNS], w, c;
    int n;

    if (!tmpfiles_make(&tf) || bench_target_spawn(&t, targv) < 0 || !bench_target_ready(&t)) {
        printf("could not start the target\n");
        bench_targets_kill(&t, 1);
        tmpfiles_remove(&tf);
        return 1;
    }
    bench_print_load("start");
    run_work(&t, &w, &c); /* warm-up */
    n = runs_pairs(o, &t, tf.out, rw, rc);
    bench_targets_kill(&t, 1);
    tmpfiles_remove(&tf);
    printf("%s, threads8.py work (main thread 20 deep, 7 threads blocked), separate runs, "
           "sampled by ranktop record --all-threads -r %g:\n",
           o->python, o->hz);
    if (n < 6) {
        printf("  too few pairs completed (%d)\n", n);
        return 1;
    }
    report("wall-time slowdown", rw, n, "pairs");
    report("CPU-time slowdown ", rc, n, "pairs");
    bench_print_load("end");
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o = {.pairs = 0, .hz = 100, .phase_s = 0.1};
    bool runs = false;
    int i = 1, max;

    bench_handlers_install();
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--runs"))
            runs = true;
        else if (i + 1 < argc && !strcmp(argv[i], "--pairs"))
            o.pairs = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--rate"))
            o.hz = atof(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--phase"))
            o.phase_s = atof(argv[++i]);
    }
    o.python = i < argc ? argv[i] : bench_python(12);
    if (o.pairs <= 0) /* the defaults: 1000 phase pairs, 12 pairs of runs */
        o.pairs = runs ? 12 : 1000;
    max = runs ? MAX_RUNS : MAX_PAIRS;
    o.pairs = o.pairs < 8 ? 8 : o.pairs > max ? max : o.pairs;
    o.phase_s = o.phase_s < 0.02 ? 0.02 : o.phase_s;
    return runs ? separate_runs(&o) : phased(&o);
}
