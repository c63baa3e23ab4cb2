/* bench_austin: CPU per thread stack of ranktop and of austin on the same target, in one run
 * (issue 12's comparison: a 5-thread target, its main thread 300 frames deep, every thread
 * sampled at 1 kHz).
 *
 * For each interpreter (default: pyenv's 3.9 and 3.12) it starts bench/targets/five300.py,
 * then runs, one after the other for SECONDS each (default 10), Debian's austin
 * (`austin -i 1000 -o FILE -p PID`, stopped with SIGINT; its thread stacks are the sample
 * lines it writes) and `ranktop record --all-threads -r 1000 -d SECONDS -p PID` RUNS times
 * (default 3: a host's speed moves one run by about 10 %; the median run by CPU per thread
 * stack is reported, with the range), its thread stacks and CPU from its summary line.
 * austin's CPU is its rusage as a child, which includes start-up; both rates are what each
 * achieved. Prints both figures and the ratio. Then the floor every 1 kHz sampler pays before
 * it reads anything: ranktop on the same target with every thread blocked (`five300.py still`:
 * the process's CPU clock stands, so nothing is read), and this process's own CPU for a bare
 * 1 kHz sleep loop, and ranktop's figure less its floor. Not a test: it asserts nothing.
 *
 * Usage: bench_austin [--seconds S] [--runs N] [PYTHON...] */
#include "bench_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

#define RUNS_MAX 15 /* ranktop runs per interpreter */

/* Runs argv with stdout and stderr into out, to its end or (stop_s > 0) until SIGINT after
 * stop_s seconds; the child's CPU seconds. */
static double run_child(const char *const argv[], const char *out, double stop_s)
{
    struct rusage ru;
    int st;
    pid_t pid;

    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        FILE *f = freopen(out, "w", stdout);

        if (!f || dup2(1, 2) < 0)
            _exit(127);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    if (pid < 0)
        return -1;
    bench_track(pid);
    if (stop_s > 0) {
        bench_sleep_s(stop_s);
        kill(pid, SIGINT);
    }
    if (wait4(pid, &st, 0, &ru) < 0)
        return -1;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

/* austin's sample lines, one per thread stack: "Thread ...;frames... <metric>" (1.0; later
 * versions start them with "P<pid>;T..."); comments start with '#'. */
static long austin_stacks(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[65536];
    long n = 0;

    while (f && fgets(line, sizeof(line), f))
        n += line[0] == 'P' || !strncmp(line, "Thread ", 7);
    if (f)
        fclose(f);
    return n;
}

/* ranktop record's summary: "... N thread stacks, ... X s CPU". */
static bool ranktop_summary(const char *path, long *stacks, double *cpu, long *samples_out)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    bool ok = false;

    while (f && fgets(line, sizeof(line), f)) {
        unsigned long long samples, st;
        const char *c = strstr(line, " Hz achieved, ");

        if (sscanf(line, "ranktop: %llu samples, %llu thread stacks", &samples, &st) == 2 && c &&
            sscanf(c, " Hz achieved, %lf s CPU", cpu) == 1) {
            *stacks = (long)st;
            *samples_out = (long)samples;
            ok = true;
        }
    }
    if (f)
        fclose(f);
    return ok;
}

/* ranktop recording pid at 1 kHz for secs: CPU and samples from its summary. */
static bool ranktop_run(const char *pid, const char *dur, const char *dir, const char *tag,
                        long *stacks, double *cpu, long *samples)
{
    char out[128], err[128];
    const char *rv[] = {BENCH_RANKTOP, "record",   "--all-threads", "-r", "1000", "-d",
                        dur,           "--format", "collapsed",     "-o", out,    "-p",
                        pid,           NULL};

    snprintf(out, sizeof(out), "%s/%s.txt", dir, tag);
    snprintf(err, sizeof(err), "%s/%s.err", dir, tag);
    run_child(rv, err, 0);
    return ranktop_summary(err, stacks, cpu, samples);
}

/* This thread's CPU per wake-up of a bare 1 kHz absolute-deadline sleep loop, in us: the
 * kernel's and the hypervisor's price of a timer wake-up, which any 1 kHz sampler pays. */
static double wake_floor_us(double secs)
{
    struct rusage a, b;
    struct timespec t;
    long n = (long)(secs * 1000);

    getrusage(RUSAGE_THREAD, &a);
    clock_gettime(CLOCK_MONOTONIC, &t);
    for (long i = 0; i < n; i++) {
        t.tv_nsec += 1000000;
        if (t.tv_nsec >= 1000000000) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
    }
    getrusage(RUSAGE_THREAD, &b);
    return ((double)(b.ru_utime.tv_sec - a.ru_utime.tv_sec + b.ru_stime.tv_sec -
                     a.ru_stime.tv_sec) *
                1e6 +
            (double)(b.ru_utime.tv_usec - a.ru_utime.tv_usec + b.ru_stime.tv_usec -
                     a.ru_stime.tv_usec)) /
           (double)(n ? n : 1);
}

/* ranktop's CPU per sample on five300 with every thread blocked; -1 when it could not run. */
static double still_floor_us(const char *python, const char *dur, const char *dir)
{
    const char *argv[] = {python, "-S", BENCH_TARGET, "still", NULL};
    struct bench_target t = {0};
    char pid[16];
    long stacks = 0, samples = 0;
    double cpu = 0;
    bool ok;

    if (bench_target_spawn(&t, argv) < 0 || !bench_target_ready(&t)) {
        bench_targets_kill(&t, 1);
        return -1;
    }
    snprintf(pid, sizeof(pid), "%d", (int)t.pid);
    ok = ranktop_run(pid, dur, dir, "still", &stacks, &cpu, &samples);
    bench_targets_kill(&t, 1);
    return ok && samples > 0 ? cpu * 1e6 / (double)samples : -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* ranktop's runs on the target, one after the other: the median run's CPU, stacks and samples
 * (by CPU per thread stack), with the lowest and highest CPU per thread stack. False when a run
 * gave no figures. */
static bool ranktop_runs(const char *pid, const char *dur, const char *dir, int runs, double *cpu,
                         long *stacks, long *samples, double *lo, double *hi)
{
    double us[RUNS_MAX], c[RUNS_MAX];
    long st[RUNS_MAX], sa[RUNS_MAX];
    int mid = 0;

    for (int i = 0; i < runs; i++) {
        c[i] = 0;
        st[i] = sa[i] = 0;
        if (!ranktop_run(pid, dur, dir, "ranktop", &st[i], &c[i], &sa[i]) || st[i] <= 0)
            return false;
        us[i] = c[i] * 1e6 / (double)st[i];
    }
    {
        double sorted[RUNS_MAX];

        memcpy(sorted, us, sizeof(double) * (size_t)runs);
        qsort(sorted, (size_t)runs, sizeof(double), cmp_double);
        *lo = sorted[0];
        *hi = sorted[runs - 1];
        for (int i = 0; i < runs; i++)
            if (us[i] == sorted[runs / 2])
                mid = i;
    }
    *cpu = c[mid];
    *stacks = st[mid];
    *samples = sa[mid];
    return true;
}

static void one(const char *python, double secs, int runs)
{
    const char *argv[] = {python, "-S", BENCH_TARGET, NULL};
    struct bench_target t = {0};
    char pid[16], dur[32], tmp[] = "/tmp/bench_austin.XXXXXX", a_out[96];
    double a_cpu, r_cpu = 0, still, wake, lo = 0, hi = 0;
    long a_n, r_n = 0, r_samples = 0;

    if (!mkdtemp(tmp) || bench_target_spawn(&t, argv) < 0 || !bench_target_ready(&t)) {
        printf("%s: could not start the target\n", python);
        bench_targets_kill(&t, 1);
        return;
    }
    snprintf(pid, sizeof(pid), "%d", (int)t.pid);
    snprintf(dur, sizeof(dur), "%g", secs);
    snprintf(a_out, sizeof(a_out), "%s/austin.txt", tmp);
    {
        const char *av[] = {"austin", "-i", "1000", "-o", a_out, "-p", pid, NULL};
        char log[128];

        snprintf(log, sizeof(log), "%s/austin.log", tmp);
        a_cpu = run_child(av, log, secs);
        a_n = austin_stacks(a_out);
    }
    if (!ranktop_runs(pid, dur, tmp, runs, &r_cpu, &r_n, &r_samples, &lo, &hi))
        r_n = 0;
    bench_targets_kill(&t, 1);
    if (a_cpu <= 0 || a_n <= 0 || r_n <= 0) {
        printf("%s: no figures (austin %ld stacks, %.2f s; ranktop %ld stacks); see %s\n", python,
               a_n, a_cpu, r_n, tmp);
        return;
    }
    printf("%s, %g s at 1 kHz, 5 threads (one 300 deep):\n"
           "  austin 1.0:  %8ld thread stacks, %.2f s CPU, %7.1f us per thread stack\n"
           "  ranktop:     %8ld thread stacks, %.3f s CPU, %7.1f us per thread stack"
           " (median of %d runs: %.1f to %.1f)\n"
           "  ranktop is %.1fx cheaper per thread stack\n",
           python, secs, a_n, a_cpu, a_cpu * 1e6 / (double)a_n, r_n, r_cpu,
           r_cpu * 1e6 / (double)r_n, runs, lo, hi, (a_cpu / (double)a_n) / (r_cpu / (double)r_n));
    still = still_floor_us(python, dur, tmp);
    wake = wake_floor_us(secs);
    if (still > 0 && r_samples > 0)
        printf("  floor: %.1f us per sample for ranktop on the same threads all blocked (nothing\n"
               "         read), %.1f us per wake-up of a bare 1 kHz sleep loop on this machine\n"
               "  ranktop less its floor: %.1f us per thread stack (%.1f per sample)\n",
               still, wake, (r_cpu * 1e6 - still * (double)r_samples) / (double)r_n,
               (r_cpu * 1e6 - still * (double)r_samples) / (double)r_samples);
    {
        char cmd[160];

        snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", tmp);
    }
}

int main(int argc, char **argv)
{
    double secs = 10;
    int first = 1, runs = 3;

    bench_handlers_install();
    while (first + 1 < argc && argv[first][0] == '-') {
        if (!strcmp(argv[first], "--seconds"))
            secs = atof(argv[first + 1]);
        else if (!strcmp(argv[first], "--runs"))
            runs = atoi(argv[first + 1]);
        else
            break;
        first += 2;
    }
    if (secs <= 0 || runs < 1 || runs > RUNS_MAX) {
        fprintf(stderr, "usage: bench_austin [--seconds S] [--runs 1..%d] [PYTHON...]\n", RUNS_MAX);
        return 2;
    }
    if (system("command -v austin > /dev/null 2>&1") != 0) {
        printf("austin is not installed (apt-get install austin): nothing to compare\n");
        return 0;
    }
    bench_print_load("start");
    if (first < argc) {
        for (int i = first; i < argc; i++)
            one(argv[i], secs, runs);
    } else {
        char p9[512];

        snprintf(p9, sizeof(p9), "%s", bench_python(9));
        one(p9, secs, runs);
        one(bench_python(12), secs, runs);
    }
    bench_print_load("end");
    return 0;
}
