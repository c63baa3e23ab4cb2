/* bench_motion: how many thread stacks come out torn or empty when a fast-moving training loop
 * is sampled at 1 kHz.
 *
 * Starts tests/py/torch_loop.py (a CPU torch loop: nn.Module call chains, autograd, SGD) under
 * the given interpreter (default Debian's /usr/bin/python3.11 with python3-torch), waits for
 * its ready file, then samples its main thread on a 1 ms schedule for the given seconds
 * (default 10), as the engine does (main thread only, no /proc state). Every sample is judged:
 * whole (bottom frame `<module>` of torch_loop.py), lost (status < 0 after the reader's
 * retries: reported as an error, not a sample), empty or partial returned as a sample (must
 * be 0). Prints one line of counts, the torn-or-empty rate per thread stack and the mean CPU
 * per sample. Not a test: it asserts nothing. Main thread only. */
#include "ranktop/python/pystack.h"
#include "ranktop/base/util.h"

#include "bench_support.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RATE_HZ 1000
#define READY_WAIT_S 120

struct motion_counts {
    uint64_t samples, whole, lost, empty, partial, torn;
};

static bool wait_ready(const char *path, pid_t pid)
{
    for (int i = 0; i < READY_WAIT_S * 10; i++) {
        if (access(path, F_OK) == 0)
            return true;
        if (kill(pid, 0) < 0)
            return false;
        bench_sleep_s(0.1);
    }
    return false;
}

static void judge(const struct pysample *s, struct motion_counts *c)
{
    const struct pythread *t = s->nthreads ? &s->threads[0] : NULL;
    const char *file;

    c->torn += s->torn;
    if (!t || t->status < 0) {
        c->lost++;
        return;
    }
    if (!t->nframes) {
        c->empty++;
        return;
    }
    file = t->frames[t->nframes - 1].file;
    if (strcmp(t->frames[t->nframes - 1].function, "<module>") != 0 || strlen(file) < 13 ||
        strcmp(file + strlen(file) - 13, "torch_loop.py") != 0)
        c->partial++;
    else
        c->whole++;
}

/* Samples p every 1 ms until `seconds` have passed; returns the CPU ns spent sampling. */
static uint64_t run(struct pyproc *p, double seconds, struct motion_counts *c)
{
    uint64_t period = 1000000000ull / RATE_HZ, next = clock_mono_ns(), cpu = 0;
    uint64_t end = next + (uint64_t)(seconds * 1e9);
    const struct pysample *s;
    struct app_err err;

    while (next < end) {
        uint64_t c0 = clock_thread_cpu_ns();
        int rc = pyproc_sample(p, &s, &err);
        struct timespec ts;

        cpu += clock_thread_cpu_ns() - c0;
        c->samples++;
        if (rc == 0)
            judge(s, c);
        else
            c->lost++; /* a torn thread list (twice): nothing returned as a sample */
        next += period;
        ts = (struct timespec){(time_t)(next / 1000000000ull), (long)(next % 1000000000ull)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    }
    return cpu;
}

static void report(const char *python, double seconds, const struct motion_counts *c, uint64_t cpu)
{
    uint64_t bad = c->lost + c->empty + c->partial;

    printf("%s, torch CPU loop, %.0f s at %d Hz: %llu samples, %llu whole, %llu lost as torn, "
           "%llu empty, %llu partial (returned as samples), %llu torn reads retried\n",
           python, seconds, RATE_HZ, (unsigned long long)c->samples, (unsigned long long)c->whole,
           (unsigned long long)c->lost, (unsigned long long)c->empty,
           (unsigned long long)c->partial, (unsigned long long)c->torn);
    printf("torn or empty per thread stack: %.3f %%; CPU per sample %.1f us\n",
           c->samples ? 100.0 * (double)bad / (double)c->samples : 0.0,
           c->samples ? (double)cpu / 1000.0 / (double)c->samples : 0.0);
}

int main(int argc, char **argv)
{
    const char *python = argc > 1 ? argv[1] : "/usr/bin/python3.11";
    double seconds = argc > 2 ? atof(argv[2]) : 10.0;
    char dir[] = "/tmp/bench_motion.XXXXXX", ready[64];
    struct pyproc_opts po = {.main_only = true, .no_state = true};
    struct motion_counts c = {0};
    struct bench_target t = {0};
    struct pyproc *p = NULL;
    struct app_err err = {0};
    int rc = -1;

    bench_handlers_install();
    if (!mkdtemp(dir))
        return 1;
    snprintf(ready, sizeof(ready), "%s/ready", dir);
    const char *const av[] = {python, BENCH_TARGET, ready, NULL};
    if (bench_target_spawn(&t, av) < 0 || !wait_ready(ready, t.pid)) {
        fprintf(stderr, "bench_motion: %s %s did not start (is python3-torch installed?)\n", python,
                BENCH_TARGET);
        goto out;
    }
    for (int i = 0; i < 5 && rc != 0; i++)
        rc = pyproc_open(t.pid, &po, &p, &err);
    if (rc != 0) {
        fprintf(stderr, "bench_motion: %s\n", err.msg);
        goto out;
    }
    bench_print_load("before");
    report(python, seconds, &c, run(p, seconds, &c));
    bench_print_load("after");
    pyproc_free(p);
out:
    bench_targets_kill(&t, 1);
    unlink(ready);
    rmdir(dir);
    return rc == 0 ? 0 : 1;
}
