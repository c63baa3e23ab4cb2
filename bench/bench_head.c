/* bench_head: the head watching a large job (issue 10's goals: 1024 ranks on 128 hosts at
 * 10 Hz cost at most 20 % of a core and 20 ms a frame, and the banner names a stalled rank
 * at most --hang-after + 2 s after the stall).
 *
 * Each host is an agent_replay process (bench/agent_replay.c) started as the remote shell
 * would be, writing in real time what an agent with 8 ranks x 8 threads writes: main threads
 * that change function every tick until the stall, then every rank in all_reduce but one in
 * load_batch_slowly. The engine reads the 128 streams as for real hosts. Every 100 ms this
 * runner does what the monitor does each frame before drawing (take the engine's view: the
 * history, the live figures and the host states; build the rank table, the hang verdict and
 * the merged tree) and times it; curses drawing is bench_ui's. CPU is this process's (the head's)
 * alone.
 *
 * Usage: bench_head [--quick] [HOSTS [RANKS_PER_HOST]] (default 128 8). Not a test. */
#include "ranktop/engine/engine.h"
#include "ranktop/base/util.h"
#include "ranktop/views/view.h"

#include "bench_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HANG_AFTER_S 5.0

struct frame_stats {
    double sum_ms, max_ms;
    double *all;
    size_t n;
};

/* One frame's models, as the monitor builds them; returns the hang text's odd part. */
static double frame(struct engine *e, char *hang_text, size_t len)
{
    uint64_t t0 = clock_mono_ns(), now;
    const struct engine_view *v = engine_acquire(e);
    struct view_hang hang;
    struct view_table table;
    struct view_table_in in = {.live = v->live, .nlive = v->nlive};
    struct view_tree tree;

    now = clock_mono_ns();
    view_hang(&v->hist, now, (uint64_t)(HANG_AFTER_S * 1e9), NULL, &hang);
    view_table(&v->hist, now, &in, &table);
    view_merge(&v->hist, now, NULL, &tree);
    snprintf(hang_text, len, "%s", hang.hang ? hang.text : "");
    view_merge_fini(&tree);
    view_table_fini(&table);
    view_hang_fini(&hang);
    engine_release(v);
    return (double)(clock_mono_ns() - t0) / 1e6;
}

static void hosts_up(struct engine *e, size_t *up, size_t *n, double *bps)
{
    struct engine_host *h;

    engine_hosts(e, &h, n);
    *up = 0;
    *bps = 0;
    for (size_t i = 0; i < *n; i++) {
        *up += h[i].state == ENGINE_HOST_UP;
        *bps += h[i].bytes_per_s;
    }
    free(h);
}

/* Frames every 100 ms for s seconds; stops early once the banner names the odd rank when
 * want_odd (its time since the stall goes to *named_s). */
static void frames(struct engine *e, double s, struct frame_stats *fs, uint64_t stall,
                   double *named_s)
{
    uint64_t end = clock_mono_ns() + (uint64_t)(s * 1e9);
    char text[512];

    while (clock_mono_ns() < end) {
        double ms = frame(e, text, sizeof(text));

        fs->all = x_reallocarray(fs->all, fs->n + 1, sizeof(double));
        fs->all[fs->n++] = ms;
        fs->sum_ms += ms;
        fs->max_ms = ms > fs->max_ms ? ms : fs->max_ms;
        if (named_s && strstr(text, "odd: rank 0 on sim000 in load_batch_slowly")) {
            *named_s = (double)(clock_mono_ns() - stall) / 1e9;
            return;
        }
        bench_sleep_s(0.1);
    }
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    int nhosts = argc > 1 + quick ? atoi(argv[1 + quick]) : 128;
    const char *per = argc > 2 + quick ? argv[2 + quick] : "8";
    char **hosts = x_calloc((size_t)nhosts + 1, sizeof(char *)), stall_env[64];
    char *rsh[] = {(char *)BENCH_REPLAY};
    struct engine_opts o = {.rate_hz = 10,
                            .all_threads = true,
                            .history_ns = 600ull * 1000000000u,
                            .mem_cap = 512u << 20};
    struct frame_stats fs = {0};
    struct engine_stats a, b;
    struct engine *e;
    struct app_err err = {0};
    double warm = quick ? 5 : 10, measure = quick ? 5 : 15, named = -1, bps;
    uint64_t t0, t1, stall;
    size_t up, n;

    bench_handlers_install();
    if (nhosts < 1 || nhosts > ENGINE_MAX_HOSTS || atoi(per) < 1) {
        fprintf(stderr, "usage: bench_head [--quick] [HOSTS (1-%d) [RANKS_PER_HOST]]\n",
                ENGINE_MAX_HOSTS);
        return 2;
    }
    for (int i = 0; i < nhosts; i++) {
        hosts[i] = x_calloc(16, 1);
        snprintf(hosts[i], 16, "sim%03d", i);
    }
    stall = clock_mono_ns() + (uint64_t)((warm + measure + 1) * 1e9);
    snprintf(stall_env, sizeof(stall_env), "%llu", (unsigned long long)stall);
    setenv("REPLAY_STALL_AT", stall_env, 1);
    setenv("REPLAY_ODD_HOST", "sim000", 1);
    setenv("REPLAY_RANKS", per, 1);
    o.remote = (struct engine_remote_opts){
        .hosts = hosts, .nhosts = (size_t)nhosts, .rsh = rsh, .nrsh = 1};
    bench_print_load("start");
    if (engine_start(&o, &e, &err) < 0) {
        fprintf(stderr, "bench_head: %s\n", err.msg);
        return 1;
    }
    bench_sleep_s(warm);
    hosts_up(e, &up, &n, &bps);
    engine_get_stats(e, &a);
    t0 = clock_mono_ns();
    frames(e, measure, &fs, 0, NULL);
    t1 = clock_mono_ns();
    engine_get_stats(e, &b);
    qsort(fs.all, fs.n, sizeof(double), bench_cmp_double);
    printf("%d hosts x %s ranks x 8 threads at 10 Hz: %zu/%zu hosts up, %.0f KB/s in\n", nhosts,
           per, up, n, bps / 1024);
    printf("head CPU %.1f %% of a core (engine and frames), frame %.2f ms mean, %.2f ms p95, "
           "%.2f ms max over %zu frames\n",
           (double)(b.cpu_ns - a.cpu_ns) / (double)(t1 - t0) * 100, fs.sum_ms / (double)fs.n,
           fs.all[fs.n * 95 / 100], fs.max_ms, fs.n);
    frames(e, (double)(stall - clock_mono_ns()) / 1e9 + HANG_AFTER_S + 10, &fs, stall, &named);
    if (named >= 0)
        printf("stall to a banner naming the odd rank: %.2f s (--hang-after %.0f s: +%.2f s)\n",
               named, HANG_AFTER_S, named - HANG_AFTER_S);
    else
        printf("stall to banner: the banner never named the odd rank\n");
    engine_stop(e);
    engine_free(e);
    bench_print_load("end");
    for (int i = 0; i < nhosts; i++)
        free(hosts[i]);
    free(hosts);
    free(fs.all);
    return 0;
}
