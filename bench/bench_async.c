/* bench_async: what record --async costs: the engine on one target holding N asyncio tasks
 * (bench/targets/tasks.py: each pending three coroutines deep in Event.wait) at 10 Hz, main
 * thread only, with the task reads off and on (ENGINE_ASYNC_HZ = 10, so one task read per
 * pass). After a warm-up, the engine threads' CPU over wall time (% of one core), the passes
 * per second and the mean lag behind schedule; the difference on - off per pass is the cost of
 * one task read.
 *
 * Usage: bench_async [--quick] [PYTHON...]; PYTHON defaults to pyenv's 3.11 and 3.13 (else
 * /usr/bin/python3). Targets die with this process. Not a test: it asserts nothing. */
#include "ranktop/engine/engine.h"
#include "ranktop/base/util.h"

#include "bench_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cfg {
    double warm_s, measure_s;
};

struct row {
    double cpu_pct, passes_s, lag_ms, ms_per_pass;
    bool ok;
};

static struct row measure(const struct cfg *c, const char *python, const char *ntasks, bool on)
{
    const char *argv[] = {python, "-S", BENCH_TARGET, ntasks, NULL};
    struct bench_target t = {0};
    struct engine_opts o = {.rate_hz = 10, .async = on};
    struct app_err err = {0};
    struct bench_window w;
    struct engine *e;
    struct row r = {0};
    int pid;
    double ds;

    if (bench_target_spawn(&t, argv) < 0 || !bench_target_ready(&t)) {
        bench_targets_kill(&t, 1);
        return r;
    }
    pid = t.pid;
    o.disc.pids = &pid;
    o.disc.npids = 1;
    o.disc.dev.nvidia_smi = "/nonexistent";
    o.disc.dev.npu_smi = "/nonexistent";
    o.disc.dev.no_nvml = true;
    o.disc.dev.no_dcmi = true;
    if (engine_start(&o, &e, &err) < 0) {
        fprintf(stderr, "bench_async: engine_start: %s\n", err.msg);
        bench_targets_kill(&t, 1);
        return r;
    }
    bench_engine_window(e, c->warm_s, c->measure_s, &w);
    bench_targets_kill(&t, 1);
    ds = (double)(w.b.samples - w.a.samples);
    r.cpu_pct = w.cpu_pct;
    r.passes_s = w.passes_s;
    r.lag_ms = w.lag_ms;
    r.ms_per_pass = ds > 0 ? (double)(w.b.cpu_ns - w.a.cpu_ns) / 1e6 / ds : 0;
    r.ok = ds > 0;
    return r;
}

static void rows(const struct cfg *c, const char *python)
{
    static const char *const counts[] = {"10", "100", "1000"};

    printf("\npython %s\n%7s %6s %7s %8s %8s %10s %14s\n", python, "tasks", "async", "cpu%",
           "passes/s", "lag ms", "ms/pass", "ms/task read");
    for (size_t i = 0; i < sizeof(counts) / sizeof(*counts); i++) {
        struct row off = measure(c, python, counts[i], false);
        struct row on = measure(c, python, counts[i], true);

        if (!off.ok || !on.ok) {
            printf("%7s  (could not start or sample)\n", counts[i]);
            continue;
        }
        printf("%7s %6s %7.2f %8.1f %8.2f %10.3f\n", counts[i], "off", off.cpu_pct, off.passes_s,
               off.lag_ms, off.ms_per_pass);
        printf("%7s %6s %7.2f %8.1f %8.2f %10.3f %14.3f\n", counts[i], "on", on.cpu_pct,
               on.passes_s, on.lag_ms, on.ms_per_pass, on.ms_per_pass - off.ms_per_pass);
    }
}

int main(int argc, char **argv)
{
    struct cfg c = {.warm_s = 2, .measure_s = 8};
    const char *pythons[8];
    int np = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            c = (struct cfg){.warm_s = 1, .measure_s = 3};
        else if (np < 8)
            pythons[np++] = argv[i];
    }
    if (!np) {
        pythons[np++] = x_strdup(bench_python(11));
        pythons[np++] = x_strdup(bench_python(13));
    }
    bench_handlers_install();
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("record --async cost: one target, 10 Hz, main thread, task reads at %d Hz\n",
           ENGINE_ASYNC_HZ);
    bench_print_load("start");
    for (int i = 0; i < np; i++)
        rows(&c, pythons[i]);
    bench_print_load("end");
    return 0;
}
