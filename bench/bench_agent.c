/* bench_agent: what `ranktop agent` sends at steady state (issue 10's goal: at most 1 KB/s
 * per rank for 8 ranks x 8 threads at 10 Hz).
 *
 * Starts 8 targets (bench/targets/threads8.py: a main thread and 7 helpers about 20 frames
 * deep), runs the engine on them as the agent does (every thread, GIL and memory figures) and
 * calls the agent's encoder every 100 ms, as its loop does, counting the bytes and lines it
 * would write. The first seconds (every frame, stack and thread defined once) are reported
 * apart from the steady state that follows. Rows: every thread idle (stacks unchanged), and
 * every main thread busy in a Python loop (its line, so its stack, changes at every sample).
 *
 * Usage: bench_agent [--quick] [PYTHON]. Not a test: it asserts nothing. */
#include "ranktop/engine/engine.h"
#include "ranktop/base/util.h"

#include "bench_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTARGETS 8

static size_t count_lines(const struct engine_out *o)
{
    size_t n = 0;

    for (size_t i = 0; i < o->len; i++)
        n += o->buf[i] == '\n';
    return n;
}

/* Ticks the encoder every 100 ms for s seconds; adds the bytes and lines written. */
static void ticks(struct engine *e, struct engine_wire *w, double s, size_t *bytes, size_t *lines)
{
    uint64_t end = clock_mono_ns() + (uint64_t)(s * 1e9);

    while (clock_mono_ns() < end) {
        struct engine_out o = {0};

        engine_wire_tick(e, w, &o);
        *bytes += o.len;
        *lines += count_lines(&o);
        engine_out_fini(&o);
        bench_sleep_s(0.1);
    }
}

static void row(const char *python, const char *mode, double warm_s, double measure_s)
{
    struct bench_target t[NTARGETS];
    int pids[NTARGETS];
    struct engine_opts o = {
        .rate_hz = 10, .all_threads = true, .gil = true, .mem = true, .wire = true};
    struct engine *e;
    struct engine_wire *w;
    struct app_err err = {0};
    size_t warm_b = 0, warm_l = 0, b = 0, l = 0;

    memset(t, 0, sizeof(t));
    for (int i = 0; i < NTARGETS; i++) {
        const char *argv[] = {python, "-S", BENCH_TARGET, mode, "20", NULL};

        if (bench_target_spawn(&t[i], argv) < 0 || !bench_target_ready(&t[i])) {
            printf("%-5s (could not start the targets)\n", mode);
            bench_targets_kill(t, NTARGETS);
            return;
        }
        pids[i] = t[i].pid;
    }
    o.disc.pids = pids;
    o.disc.npids = NTARGETS;
    o.disc.dev.nvidia_smi = o.disc.dev.npu_smi = "/nonexistent";
    o.disc.dev.no_nvml = o.disc.dev.no_dcmi = true;
    if (engine_start(&o, &e, &err) < 0) {
        printf("%-5s engine_start: %s\n", mode, err.msg);
        bench_targets_kill(t, NTARGETS);
        return;
    }
    w = engine_wire_new();
    ticks(e, w, warm_s, &warm_b, &warm_l);
    ticks(e, w, measure_s, &b, &l);
    engine_wire_free(w);
    engine_stop(e);
    engine_free(e);
    bench_targets_kill(t, NTARGETS);
    printf("%-5s %6d %8.0f %11.0f %11.1f %14.1f\n", mode, NTARGETS, (double)warm_b,
           (double)b / measure_s, (double)b / measure_s / NTARGETS, (double)l / measure_s);
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    const char *python = argc > 1 + quick ? argv[1 + quick] : bench_python(12);

    bench_handlers_install();
    bench_print_load("start");
    printf("agent stream at 10 Hz, every thread (8 per rank), figures once a second; %s\n", python);
    printf("%-5s %6s %8s %11s %11s %14s\n", "mode", "ranks", "warm B", "steady B/s", "B/s/rank",
           "lines/s");
    row(python, "idle", quick ? 2 : 3, quick ? 5 : 20);
    row(python, "busy", quick ? 2 : 3, quick ? 5 : 20);
    bench_print_load("end");
    return 0;
}
