/* bench_export: history memory and export time for one hour of 64 ranks sampled at 10 Hz.
 *
 * Builds the history through the engine's own calls (history_intern_stack, history_observe)
 * from a synthetic training loop: each rank's main thread walks a cycle of a few hundred
 * distinct stacks 20-40 frames deep (data loading, forward through 24 transformer blocks,
 * backward, optimizer), holding each for 3-7 samples. It times the exports into /dev/null
 * (formatting alone), then writes the hour as Chrome JSON, speedscope JSON, collapsed stacks
 * and a flame graph SVG with export_write (temp file, fsync, rename: disk speed) and prints
 * wall time, size and throughput. Goals (issue 4): history <= 200 MB, export <= 10 s. For
 * traces that stay openable (issue 14) it also writes the hour as Perfetto's protobuf trace
 * and as gzipped Chrome JSON (an output name ending in .gz), and prints their sizes beside
 * the JSON's.
 *
 * Usage: bench_export [-k] [-r RANKS] [-s SECONDS] [OUTDIR]; -k keeps the files (to feed
 * tests/tools/trace_check.py); defaults 64 ranks, 3600 s, /tmp. Asserts nothing. */
#include "ranktop/export/export.h"
#include "ranktop/model/history.h"
#include "ranktop/base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RATE_HZ 10
#define IVAL_NS (1000000000ull / RATE_HZ)
#define MAX_DEPTH 48
#define MAX_STACKS 512
#define LAYERS 24

/* The loop's stacks in the order a step visits them. */
struct loop {
    uint32_t id[MAX_STACKS];
    size_t n;
};

static const struct hframe prefix[] = {
    {"<module>", "train.py", 212, false},
    {"main", "train.py", 198, false},
    {"run_training", "train.py", 150, false},
    {"fit", "lightning/trainer/trainer.py", 544, false},
    {"_run", "lightning/trainer/trainer.py", 981, false},
    {"_run_stage", "lightning/trainer/trainer.py", 1025, false},
    {"run", "lightning/loops/fit_loop.py", 205, false},
    {"advance", "lightning/loops/fit_loop.py", 363, false},
    {"run", "lightning/loops/training_epoch_loop.py", 140, false},
    {"advance", "lightning/loops/training_epoch_loop.py", 250, false},
    {"run", "lightning/loops/optimization/automatic.py", 190, false},
    {"_optimizer_step", "lightning/loops/optimization/automatic.py", 268, false},
};
#define NPREFIX (sizeof(prefix) / sizeof(prefix[0]))

/* Interns frames[0..n) (outermost first) as a stack and appends it to the loop. */
static void add(struct history *h, struct loop *l, const struct hframe *outer, size_t n)
{
    struct hframe inner[MAX_DEPTH];

    for (size_t i = 0; i < n; i++)
        inner[i] = outer[n - 1 - i];
    if (l->n < MAX_STACKS)
        l->id[l->n++] = history_intern_stack(h, inner, (uint32_t)n);
}

/* A chain of `n` module calls below `f[d]`, named after `what` and variant v. */
static size_t chain(struct hframe *f, size_t d, const char *what, int v, size_t n, char names[][48])
{
    for (size_t i = 0; i < n && d < MAX_DEPTH; i++, d++) {
        snprintf(names[d], 48, "%s_%zu_%d", what, i, v);
        f[d] =
            (struct hframe){names[d], "torch/nn/modules/module.py", 1500 + (int)i * 3 + v, false};
    }
    return d;
}

static void build_loop(struct history *h, struct loop *l)
{
    static char names[MAX_DEPTH][48];
    struct hframe f[MAX_DEPTH];
    size_t d;

    memcpy(f, prefix, sizeof(prefix));
    for (int v = 0; v < 12; v++) { /* data loading, 8 + v/2 frames below the prefix */
        d = chain(f, NPREFIX, "dataloader_next", v % 4, 8 + (size_t)v / 2, names);
        add(h, l, f, d);
    }
    for (int layer = 0; layer < LAYERS; layer++) { /* forward: attention then MLP */
        for (int part = 0; part < 2; part++) {
            for (int v = 0; v < 3; v++) {
                d = chain(f, NPREFIX, "forward", 0, 4, names);
                snprintf(names[d], 48, "block%d.forward", layer);
                f[d] = (struct hframe){names[d], "model/transformer.py", 300 + layer, false};
                d++;
                d = chain(f, d, part ? "mlp" : "attention", v, 4 + (size_t)(layer % 8) + v * 4,
                          names);
                add(h, l, f, d);
            }
        }
    }
    for (int v = 0; v < 60; v++) { /* backward, through autograd */
        d = chain(f, NPREFIX, "backward", v % 6, 8 + (size_t)(v % 20), names);
        add(h, l, f, d);
    }
    for (int v = 0; v < 40; v++) { /* optimizer step */
        d = chain(f, NPREFIX, "adamw_step", v % 5, 10 + (size_t)(v % 16), names);
        add(h, l, f, d);
    }
}

static int ranks = 64, seconds = 3600;

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void build_history(struct history *h, const struct loop *l, uint64_t t0)
{
    for (int r = 0; r < ranks; r++) {
        struct hrank *rank = history_rank(h, 10000 + r, r, "gpu");
        struct hthread *t = history_thread(rank, 1, 10000 + r, "MainThread", true);
        uint64_t seed = 0x9E3779B97F4A7C15ull ^ (uint64_t)(r + 1);
        size_t pos = (size_t)r * 7 % l->n, hold = 0;

        rank->start = t0;
        snprintf(rank->device, sizeof(rank->device), "gpu %d", r % 8);
        for (uint64_t k = 0; k < (uint64_t)seconds * RATE_HZ; k++) {
            if (!hold) {
                pos = (pos + 1) % l->n;
                hold = 3 + rng_next(&seed) % 5;
            }
            hold--;
            history_observe(t, l->id[pos], t0 + k * IVAL_NS);
        }
    }
}

static const char *fmt_name(enum export_format fmt)
{
    return fmt == EXPORT_CHROME       ? "chrome"
           : fmt == EXPORT_SPEEDSCOPE ? "speedscope"
           : fmt == EXPORT_PERFETTO   ? "perfetto"
           : fmt == EXPORT_FLAMEGRAPH ? "flamegraph"
                                      : "collapsed";
}

/* Writes the hour in fmt (gzipped when gz) and prints time and size; returns the size. */
static double run_export(const struct history *h, enum export_format fmt, bool gz, const char *dir,
                         bool keep)
{
    struct export_opts o = {.format = fmt, .interval_ns = IVAL_NS, .version = "bench"};
    struct app_err err = {0};
    char path[512];
    struct stat st;
    uint64_t a, b;
    double s, mb;
    int rc;

    snprintf(path, sizeof(path), "%s/bench_export%s%s", dir, export_format_ext(fmt),
             gz ? ".gz" : "");
    a = clock_mono_ns();
    rc = export_write(h, &o, path, &err);
    b = clock_mono_ns();
    if (rc) {
        printf("%-12s failed: %s\n", fmt_name(fmt), err.msg);
        return 0;
    }
    s = (double)(b - a) / 1e9;
    mb = stat(path, &st) ? 0 : (double)st.st_size / 1e6;
    printf("%-10s%-3s %7.2f s  %9.1f MB  %7.1f MB/s  %s\n", fmt_name(fmt), gz ? ".gz" : "", s, mb,
           s > 0 ? mb / s : 0, path);
    if (!keep)
        unlink(path);
    return mb;
}

/* The same export into /dev/null: the CPU cost alone, without the disk. */
static void run_null(const struct history *h, enum export_format fmt)
{
    struct export_opts o = {.format = fmt, .interval_ns = IVAL_NS, .version = "bench"};
    struct app_err err = {0};
    FILE *f = fopen("/dev/null", "w");
    uint64_t a;

    if (!f)
        return;
    a = clock_mono_ns();
    if (export_stream(h, &o, f, &err) == 0)
        printf("%-12s %7.2f s  (formatting only, into /dev/null)\n", fmt_name(fmt),
               (double)(clock_mono_ns() - a) / 1e9);
    fclose(f);
}

int main(int argc, char **argv)
{
    const char *dir = "/tmp";
    bool keep = false;
    struct history h;
    struct loop l = {0};
    uint64_t t0 = clock_mono_ns(), a, b;
    size_t runs = 0;
    double chrome_mb, perfetto_mb, gz_mb, pgz_mb;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-k"))
            keep = true;
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            ranks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc)
            seconds = atoi(argv[++i]);
        else
            dir = argv[i];
    }
    history_init(&h, t0, 0, "bench01");
    build_loop(&h, &l);
    a = clock_mono_ns();
    build_history(&h, &l, t0);
    b = clock_mono_ns();
    for (size_t i = 0; i < h.nranks; i++)
        runs += h.ranks[i].threads[0].nruns;
    printf("history: %d ranks x %d Hz x %d s, %zu distinct stacks, %zu frames, %zu runs\n", ranks,
           RATE_HZ, seconds, h.nstacks, h.nframes, runs);
    printf("history: built in %.2f s, %.1f MB (history_memory)\n", (double)(b - a) / 1e9,
           (double)history_memory(&h) / 1e6);
    run_null(&h, EXPORT_CHROME);
    run_null(&h, EXPORT_SPEEDSCOPE);
    run_null(&h, EXPORT_PERFETTO);
    chrome_mb = run_export(&h, EXPORT_CHROME, false, dir, keep);
    run_export(&h, EXPORT_SPEEDSCOPE, false, dir, keep);
    run_export(&h, EXPORT_COLLAPSED, false, dir, keep);
    run_export(&h, EXPORT_FLAMEGRAPH, false, dir, keep);
    perfetto_mb = run_export(&h, EXPORT_PERFETTO, false, dir, keep);
    gz_mb = run_export(&h, EXPORT_CHROME, true, dir, keep);
    pgz_mb = run_export(&h, EXPORT_PERFETTO, true, dir, keep);
    if (chrome_mb > 0 && perfetto_mb > 0 && gz_mb > 0 && pgz_mb > 0)
        printf("sizes: chrome json %.1f MB; perfetto %.1f MB (%.1fx smaller); chrome .gz %.1f MB "
               "(%.1fx); perfetto .gz %.1f MB (%.1fx)\n",
               chrome_mb, perfetto_mb, chrome_mb / perfetto_mb, gz_mb, chrome_mb / gz_mb, pgz_mb,
               chrome_mb / pgz_mb);
    history_fini(&h);
    return 0;
}
