/* bench_native: what native frames cost (issue 11's goals: a thread stopped at most 200 us
 * median and 2 ms at worst for a ~30-frame native stack).
 *
 * Part 1: one target (bench/targets/native30.py, its main thread about 30 native frames deep
 * through list(map(...)) at every level, then blocked) is unwound N times: the time each
 * unwind kept the thread stopped (PTRACE_INTERRUPT to detach), the CPU this process spent per
 * native sample (unwinding and naming), and the frames found.
 *
 * Part 2: the same target runs a fixed pure-Python workload (about 2 s) on request at that
 * depth; runs alternate between untouched and unwound at 10 Hz (ABBA order against drift).
 * Prints the medians and the slowdown.
 *
 * Usage: bench_native [--quick] [PYTHON]. Not a test: it asserts nothing. */
#include "ranktop/native/native.h"
#include "ranktop/python/pystack.h"
#include "ranktop/base/util.h"

#include "bench_support.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

/* The engine's hook: the stopped thread's Python stack, read while it is stopped. */
struct py_read {
    struct pyproc *py;
    uint64_t ident;
};

static void read_py(void *arg, int tid)
{
    struct py_read *r = arg;

    (void)tid;
    pyproc_sample_thread(r->py, r->ident);
}

static void part1(const char *python, int n, bool with_py)
{
    const char *argv[] = {python, "-S", BENCH_TARGET, "idle", NULL};
    struct bench_target t = {0};
    struct native_ctx *c;
    struct app_err err = {0};
    uint64_t *stop = x_calloc((size_t)n, sizeof(uint64_t)), cpu = 0;
    size_t frames = 0;
    int ok = 0;
    struct pyproc *py = NULL;
    struct py_read rd = {NULL, 0};
    struct native_hook hook = {read_py, &rd};
    const struct pysample *s0;

    if (bench_target_spawn(&t, argv) < 0 || !bench_target_ready(&t) ||
        native_open(t.pid, &c, &err) < 0 || (with_py && pyproc_open(t.pid, NULL, &py, &err) < 0)) {
        printf("part 1: could not start or open the target: %s\n", err.msg);
        pyproc_free(py);
        bench_targets_kill(&t, 1);
        free(stop);
        return;
    }
    if (py && pyproc_sample(py, &s0, &err) == 0 && s0->nthreads) { /* the main thread's ident */
        rd.py = py;
        rd.ident = s0->threads[s0->nthreads - 1].ident;
    }
    for (int i = 0; i < n; i++) {
        struct native_stack st;
        uint64_t c0 = clock_thread_cpu_ns();

        if (native_unwind(c, t.pid, with_py ? &hook : NULL, &st, &err) == 0) {
            cpu += clock_thread_cpu_ns() - c0;
            stop[ok++] = st.stopped_ns;
            frames = st.n;
        }
        native_stack_fini(&st);
        bench_sleep_s(0.01);
    }
    native_close(c);
    pyproc_free(py);
    bench_targets_kill(&t, 1);
    qsort(stop, (size_t)ok, sizeof(*stop), cmp_u64);
    if (ok)
        printf("%d unwinds of a %zu-frame native stack%s: thread stopped %.0f us median, %.0f us "
               "p99, %.0f us max; CPU %.0f us per native sample (unwind and names)\n",
               ok, frames, with_py ? ", its Python stack read while stopped" : "",
               (double)stop[ok / 2] / 1e3, (double)stop[ok * 99 / 100] / 1e3,
               (double)stop[ok - 1] / 1e3, (double)cpu / ok / 1e3);
    else
        printf("part 1: no unwind succeeded: %s\n", err.msg);
    free(stop);
}

struct sampler {
    int pid;
    volatile int stop; /* set by the main thread, read by the sampler (a benchmark's flag) */
    unsigned samples;
};

static void *sample_10hz(void *arg)
{
    struct sampler *s = arg;
    struct native_ctx *c;
    struct app_err err = {0};

    if (native_open(s->pid, &c, &err) < 0)
        return NULL;
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        struct native_stack st;

        if (native_unwind(c, s->pid, NULL, &st, &err) == 0)
            s->samples++;
        native_stack_fini(&st);
        bench_sleep_s(0.1);
    }
    native_close(c);
    return NULL;
}

/* One run of the workload; its wall time as the target measured it, or -1. */
static double run_work(struct bench_target *t, bool sampled)
{
    struct sampler s = {.pid = t->pid};
    pthread_t th;
    char line[64];
    double wall = -1, cpu;

    if (sampled && pthread_create(&th, NULL, sample_10hz, &s) != 0)
        return -1;
    if (fputs("go\n", t->in) != EOF && fflush(t->in) != EOF && fgets(line, sizeof(line), t->out))
        if (sscanf(line, "%lf %lf", &wall, &cpu) != 2)
            wall = -1;
    if (sampled) {
        __atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
        pthread_join(th, NULL);
    }
    return wall;
}

static void part2(const char *python, int runs)
{
    const char *argv[] = {python, "-S", BENCH_TARGET, "work", NULL};
    struct bench_target t = {0};
    double *a = x_calloc((size_t)runs, sizeof(double)), *b = x_calloc((size_t)runs, sizeof(double));
    int na = 0, nb = 0;

    if (bench_target_spawn(&t, argv) < 0 || !bench_target_ready(&t)) {
        printf("part 2: could not start the target\n");
        bench_targets_kill(&t, 1);
        return;
    }
    run_work(&t, false);             /* warm-up */
    for (int i = 0; i < runs; i++) { /* ABBA */
        bool first_sampled = i % 2;
        double x = run_work(&t, first_sampled), y = run_work(&t, !first_sampled);

        if (x > 0)
            (first_sampled ? b : a)[first_sampled ? nb++ : na++] = x;
        if (y > 0)
            (first_sampled ? a : b)[first_sampled ? na++ : nb++] = y;
    }
    bench_targets_kill(&t, 1);
    qsort(a, (size_t)na, sizeof(double), bench_cmp_double);
    qsort(b, (size_t)nb, sizeof(double), bench_cmp_double);
    if (na && nb)
        printf("workload %d runs each: %.3f s untouched, %.3f s with native unwinds at 10 Hz "
               "(medians): %+.2f %%\n",
               runs, a[na / 2], b[nb / 2], (b[nb / 2] / a[na / 2] - 1) * 100);
    free(a);
    free(b);
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    const char *python = argc > 1 + quick ? argv[1 + quick] : bench_python(12);

    bench_handlers_install();
    bench_print_load("start");
    printf("native frames, %s\n", python);
    part1(python, quick ? 200 : 1000, false);
    part1(python, quick ? 200 : 1000, true);
    part2(python, quick ? 2 : 6);
    bench_print_load("end");
    return 0;
}
