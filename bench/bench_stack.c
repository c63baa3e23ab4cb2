/* bench_stack: CPU cost and process_vm_readv calls of reading one 50-frame thread stack.
 *
 * For each interpreter given on the command line (default: pyenv's 3.9, 3.11, 3.12, 3.13) it
 * starts bench/targets/deep50.py, waits for "ready", then measures: cold = the first sample
 * of a freshly attached reader (empty code cache), repeated with new readers; warm = further
 * samples of one reader. CPU is this thread's CPU time (user + system). Prints one row per
 * interpreter. Not a test: it asserts nothing. */
#include "ranktop/python/pystack.h"
#include "ranktop/base/util.h"

#include "bench_support.h"

#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define COLD_RUNS 200
#define WARM_RUNS 20000

static void measure(struct pyproc *p, int runs, double *us, double *reads, unsigned *frames)
{
    const struct pysample *s;
    struct app_err err;
    uint64_t t0 = clock_thread_cpu_ns(), r = 0, n = 0;

    for (int i = 0; i < runs; i++) {
        if (pyproc_sample(p, &s, &err) < 0)
            continue;
        r += s->reads;
        n += s->nthreads;
        *frames = s->nthreads ? s->threads[0].nframes : 0;
    }
    *us = n ? (double)(clock_thread_cpu_ns() - t0) / 1000.0 / (double)n : 0;
    *reads = n ? (double)r / (double)n : 0;
}

static void bench_one(const char *python, const char *script)
{
    struct pyproc_opts o = {.main_only = true};
    struct app_err err;
    struct pyproc *p;
    double cold_us = 0, cold_reads = 0, us, reads, warm_us, warm_reads;
    unsigned frames = 0;
    const char *argv[] = {python, "-S", script, "50", NULL};
    struct bench_target t;
    pid_t pid;

    /* The pipes stay open until the end, so the target never sees EPIPE. */
    if (bench_target_spawn(&t, argv) < 0 || !bench_target_ready(&t)) {
        bench_targets_kill(&t, 1);
        printf("%-44s  (could not start)\n", python);
        return;
    }
    pid = t.pid;
    for (int i = 0; i < COLD_RUNS; i++) {
        if (pyproc_open(pid, &o, &p, &err) < 0) {
            printf("%-44s  %s\n", python, err.msg);
            goto out;
        }
        measure(p, 1, &us, &reads, &frames);
        cold_us += us / COLD_RUNS;
        cold_reads += reads / COLD_RUNS;
        pyproc_free(p);
    }
    pyproc_open(pid, &o, &p, &err);
    measure(p, 10, &us, &reads, &frames);
    measure(p, WARM_RUNS, &warm_us, &warm_reads, &frames);
    printf("%-8s %6u %12.1f %12.1f %12.1f %12.2f\n", pyproc_version(p), frames, cold_us, cold_reads,
           warm_us, warm_reads);
    pyproc_free(p);
out:
    bench_targets_kill(&t, 1);
}

int main(int argc, char **argv)
{
    const char *root = getenv("PYENV_ROOT") ? getenv("PYENV_ROOT") : "/root/.pyenv";
    const char *script =
        getenv("RANKTOP_BENCH_TARGET") ? getenv("RANKTOP_BENCH_TARGET") : BENCH_TARGET;
    static const char *minors[] = {"3.9", "3.11", "3.12", "3.13"};
    char path[512];

    printf("%-8s %6s %12s %12s %12s %12s\n", "python", "frames", "cold us", "cold reads", "warm us",
           "warm reads");
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            bench_one(argv[i], script);
        return 0;
    }
    for (size_t i = 0; i < sizeof(minors) / sizeof(*minors); i++) {
        glob_t g;

        snprintf(path, sizeof(path), "%s/versions/%s.*/bin/python3", root, minors[i]);
        if (glob(path, 0, NULL, &g) == 0)
            bench_one(g.gl_pathv[0], script);
        else
            printf("%-8s  (no interpreter matches %s)\n", minors[i], path);
        globfree(&g);
    }
    return 0;
}
