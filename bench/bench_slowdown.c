/* bench_slowdown: how much sampling slows a CPU-bound target (issue 12's goal: < 1 % at
 * 100 Hz), with a confidence interval.
 *
 * The target (bench/targets/threads8.py work: a main thread 20 frames deep running a fixed
 * pure-Python workload on request, 7 helper threads blocked) runs the workload in PAIRS pairs
 * (default 12): one run untouched, one while the real binary samples it
 * (`ranktop record --all-threads -r HZ -p PID`, default 100 Hz), their order alternating (ABBA)
 * against drift. Each pair gives a ratio of the target's own wall times; the figure is the
 * median ratio minus one, with a distribution-free 95 % interval for the median (order
 * statistics of the pair ratios, from the binomial distribution). The target's CPU times are
 * compared the same way. Not a test: it asserts nothing.
 *
 * Usage: bench_slowdown [--pairs N] [--rate HZ] [PYTHON] */
#include "bench_support.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Starts ranktop record on pid in the background; its pid, or -1. */
static pid_t sampler_start(int pid, double hz, const char *out)
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

        if (!freopen("/dev/null", "w", stderr))
            _exit(127);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    if (s > 0) {
        bench_track(s);
        bench_sleep_s(0.5); /* attached and sampling before the run starts */
    }
    return s;
}

static void sampler_stop(pid_t s)
{
    if (s > 0) {
        kill(s, SIGTERM);
        waitpid(s, NULL, 0);
    }
}

/* One run of the workload: its wall and CPU seconds as the target measured them. */
static bool run_work(struct bench_target *t, double *wall, double *cpu)
{
    char line[64];

    return fputs("go\n", t->in) != EOF && fflush(t->in) != EOF &&
           fgets(line, sizeof(line), t->out) && sscanf(line, "%lf %lf", wall, cpu) == 2;
}

/* The 95 % interval of the median of n sorted values: ranks lo and hi (0-based) such that
 * P(Bin(n, 1/2) < lo + 1) <= 2.5 %. */
static void median_ci(int n, int *lo, int *hi)
{
    double p = pow(0.5, n), cum = 0, c = 1; /* c = binomial(n, k) */
    int k = 0;

    while (k < n) {
        if (cum + c * p > 0.025)
            break;
        cum += c * p;
        c = c * (n - k) / (k + 1);
        k++;
    }
    *lo = k > 0 ? k - 1 : 0;
    *hi = n - 1 - *lo;
}

static double median(const double *v, int n)
{
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void report(const char *what, double *r, int n)
{
    int lo, hi;

    qsort(r, (size_t)n, sizeof(double), bench_cmp_double);
    median_ci(n, &lo, &hi);
    printf("  %s: median %+.2f %%, 95 %% interval [%+.2f %%, %+.2f %%] over %d pairs\n", what,
           (median(r, n) - 1) * 100, (r[lo] - 1) * 100, (r[hi] - 1) * 100, n);
}

int main(int argc, char **argv)
{
    int pairs = 12, n = 0, i = 1;
    double hz = 100;
    const char *python = NULL;
    char out[] = "/tmp/bench_slowdown.XXXXXX";
    struct bench_target t = {0};
    double *rw, *rc;

    bench_handlers_install();
    for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
        if (!strcmp(argv[i], "--pairs"))
            pairs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rate"))
            hz = atof(argv[i + 1]);
    }
    python = i < argc ? argv[i] : bench_python(12);
    pairs = pairs < 6 ? 6 : pairs;
    rw = calloc((size_t)pairs, sizeof(double));
    rc = calloc((size_t)pairs, sizeof(double));
    {
        const char *targv[] = {python, "-S", BENCH_TARGET, "work", "20", "8000000", NULL};
        int fd = mkstemp(out);

        if (fd >= 0)
            close(fd);
        if (fd < 0 || !rw || !rc || bench_target_spawn(&t, targv) < 0 || !bench_target_ready(&t)) {
            printf("could not start the target\n");
            bench_targets_kill(&t, 1);
            return 1;
        }
    }
    bench_print_load("start");
    {
        double w, c;

        run_work(&t, &w, &c); /* warm-up */
    }
    for (int k = 0; k < pairs; k++) {
        double w[2], c[2]; /* [0] untouched, [1] sampled */
        bool ok = true;

        for (int j = 0; j < 2 && ok; j++) {
            int sampled = (k % 2) ^ j; /* ABBA: the order alternates per pair */
            pid_t s = sampled ? sampler_start(t.pid, hz, out) : 0;

            ok = run_work(&t, &w[sampled], &c[sampled]);
            sampler_stop(s);
        }
        if (ok && w[0] > 0 && c[0] > 0) {
            rw[n] = w[1] / w[0];
            rc[n++] = c[1] / c[0];
        }
    }
    bench_targets_kill(&t, 1);
    unlink(out);
    printf("%s, threads8.py work (main thread 20 deep, 7 threads blocked), sampled by "
           "ranktop record --all-threads -r %g:\n",
           python, hz);
    if (n < 6) {
        printf("  too few pairs completed (%d)\n", n);
        return 1;
    }
    report("wall-time slowdown", rw, n);
    report("CPU-time slowdown ", rc, n);
    bench_print_load("end");
    return 0;
}
