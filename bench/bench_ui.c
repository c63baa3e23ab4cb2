/* Benchmark of the live monitor (issue 5): frame render time with 64 ranks x 8 threads, and
 * the real monitor's idle CPU at default settings. Figures go in the README.
 *
 * Part 1, frame render time: a synthetic history of 64 ranks x 8 Python threads over 3
 * minutes at 10 Hz (stacks of about 30 frames; the ranks step through data / forward /
 * backward / all-reduce, then hang for the last 40 s with 61 ranks in the all-reduce and 3
 * odd ones out; 7 helper threads per rank in their usual waits; 1 Hz CPU, RSS, USS, swap and
 * GPU series; 8 GPUs). curses runs on a fake terminal (newterm on /dev/null, xterm-256color,
 * resized to 200x60 and 80x24), so no tty is needed; the struct ui is filled by hand with an
 * engine view built by hand (engine_view_new), so no engine runs (ui_draw reads only the view).
 * Each frame is what the monitor does with fresh data: view_hang + ui_build_rows (the
 * "model" column) and ui_draw (erase, build the pane's view, draw, refresh to /dev/null: the
 * "draw" column). The history copy in the view the monitor takes every 500 ms is timed on its
 * own, and the
 * UI thread's share is estimated from ui_run's cadence (a draw per 100 ms tick, a refresh per
 * 500 ms).
 *
 * Part 2, idle CPU: 4 threads8.py targets in `idle` mode (8 threads each, all blocked) and
 * the real `ranktop -p PIDS` binary with default settings in a detached 200x60 tmux session;
 * after a warm-up, the monitor's utime + stime from /proc over the measuring window, split
 * into the UI (main) thread and the others (collectors).
 *
 * Usage: bench_ui [--quick] [--no-live] [--dump] [PYTHON]; PYTHON defaults to pyenv's 3.12,
 * else /usr/bin/python3; --dump writes each row's last screen to stderr. RANKTOP_BENCH_BIN
 * overrides the ranktop binary. Targets and the monitor are killed at the end, on SIGINT /
 * SIGTERM, and (PR_SET_PDEATHSIG) if this process dies. Not a test: it asserts nothing. */
#include "ranktop/engine/engine.h"
#include "ranktop/model/history.h"
#include "ranktop/base/util.h"
#include "theme.h"
#include "ui_priv.h"

#include "bench_support.h"

#include <curses.h>
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#define NRANKS 64
#define NTHREADS 8
#define NGPUS 8
#define SPAN_S 180
#define HANG_S 40
#define HZ 10
#define MAX_ITERS 1000
#define NTARGETS 4

struct cfg {
    const char *python, *script, *ranktop;
    int iters;                /* part 1, frames per row */
    double warm_s, measure_s; /* part 2 */
    bool live, dump;
};

/* ---- Part 1: the synthetic job ---- */

struct fstack { /* frames outermost first */
    struct hframe f[64];
    uint32_t n;
};

static void push(struct fstack *s, const char *fn, const char *file, int line)
{
    if (s->n < 64)
        s->f[s->n++] = (struct hframe){fn, file, line, false};
}

static uint32_t intern(struct history *h, const struct fstack *s)
{
    struct hframe inner[64];

    for (uint32_t i = 0; i < s->n; i++)
        inner[i] = s->f[s->n - 1 - i];
    return history_intern_stack(h, inner, s->n);
}

/* The 20 frames every main thread shares: launcher, trainer and loop layers. */
static void main_prefix(struct fstack *s)
{
    static const struct hframe pre[] = {
        {"<module>", "/opt/job/train.py", 412, false},
        {"main", "/opt/job/train.py", 398, false},
        {"wrapper", "/usr/lib/python3/torch/distributed/elastic/multiprocessing/errors/__init__.py",
         346, false},
        {"run", "/opt/job/trainer.py", 160, false},
        {"fit", "/opt/job/trainer.py", 201, false},
        {"_run_stage", "/opt/job/trainer.py", 240, false},
        {"run", "/opt/job/loops/fit_loop.py", 118, false},
        {"advance", "/opt/job/loops/fit_loop.py", 140, false},
        {"run", "/opt/job/loops/epoch_loop.py", 150, false},
        {"advance", "/opt/job/loops/epoch_loop.py", 185, false},
        {"_run_batch", "/opt/job/loops/epoch_loop.py", 211, false},
        {"run", "/opt/job/loops/optimization.py", 95, false},
        {"_optimizer_step", "/opt/job/loops/optimization.py", 133, false},
        {"step", "/opt/job/strategy.py", 77, false},
        {"optimizer_step", "/opt/job/precision.py", 64, false},
        {"step", "/usr/lib/python3/torch/optim/optimizer.py", 385, false},
        {"wrapper", "/usr/lib/python3/torch/optim/optimizer.py", 74, false},
        {"_use_grad", "/usr/lib/python3/torch/optim/optimizer.py", 76, false},
        {"closure", "/opt/job/loops/optimization.py", 160, false},
        {"training_step", "/opt/job/model.py", 212, false},
    };

    s->n = 0;
    for (size_t i = 0; i < sizeof(pre) / sizeof(*pre); i++)
        push(s, pre[i].function, pre[i].file, pre[i].line);
}

enum phase { PH_DATA, PH_FWD, PH_BWD, PH_REDUCE, PH_CKPT };

/* A main-thread stack of about 30 frames for a phase; `var` picks the layer or line. */
static uint32_t main_stack(struct history *h, enum phase p, int var)
{
    static const char *mod = "/usr/lib/python3/torch/nn/modules/module.py";
    struct fstack s;

    main_prefix(&s);
    switch (p) {
    case PH_DATA:
        push(&s, "__next__", "/usr/lib/python3/torch/utils/data/dataloader.py", 631);
        push(&s, "_next_data", "/usr/lib/python3/torch/utils/data/dataloader.py", 1329);
        push(&s, "_get_data", "/usr/lib/python3/torch/utils/data/dataloader.py", 1295);
        push(&s, "_try_get_data", "/usr/lib/python3/torch/utils/data/dataloader.py", 1133);
        push(&s, "get", "/usr/lib/python3.12/multiprocessing/queues.py", 113);
        push(&s, "poll", "/usr/lib/python3.12/multiprocessing/connection.py", 257);
        push(&s, "_poll", "/usr/lib/python3.12/multiprocessing/connection.py", 440);
        push(&s, "wait", "/usr/lib/python3.12/multiprocessing/connection.py", 1136);
        push(&s, "select", "/usr/lib/python3.12/selectors.py", 415);
        break;
    case PH_FWD:
        push(&s, "_wrapped_call_impl", mod, 1511);
        push(&s, "_call_impl", mod, 1520);
        push(&s, "forward", "/usr/lib/python3/torch/nn/parallel/distributed.py", 1523);
        push(&s, "_run_ddp_forward", "/usr/lib/python3/torch/nn/parallel/distributed.py", 1359);
        push(&s, "_wrapped_call_impl", mod, 1511);
        push(&s, "_call_impl", mod, 1520);
        push(&s, "forward", "/opt/job/model.py", 88 + var % 3);
        push(&s, "_wrapped_call_impl", mod, 1511);
        push(&s, "_call_impl", mod, 1520);
        push(&s, "forward", "/opt/job/layers.py", 40 + 7 * (var % 4));
        break;
    case PH_BWD:
        push(&s, "backward", "/usr/lib/python3/torch/_tensor.py", 522);
        push(&s, "backward", "/usr/lib/python3/torch/autograd/__init__.py", 266);
        push(&s, "_engine_run_backward", "/usr/lib/python3/torch/autograd/graph.py", 744);
        push(&s, "_hook", "/usr/lib/python3/torch/nn/parallel/distributed.py", 1688 + var % 2);
        break;
    case PH_REDUCE:
        push(&s, "sync_metrics", "/opt/job/metrics.py", 52);
        push(&s, "reduce_mean", "/opt/job/dist_utils.py", 41);
        push(&s, "wrapper", "/usr/lib/python3/torch/distributed/c10d_logger.py", 75);
        push(&s, "all_reduce", "/usr/lib/python3/torch/distributed/distributed_c10d.py", 2050);
        break;
    case PH_CKPT:
        push(&s, "save_checkpoint", "/opt/job/checkpoint.py", 55);
        push(&s, "save", "/usr/lib/python3/torch/serialization.py", 628);
        push(&s, "_save", "/usr/lib/python3/torch/serialization.py", 862);
        push(&s, "persistent_id", "/usr/lib/python3/torch/serialization.py", 801);
        push(&s, "write", "/opt/job/storage.py", 19);
        break;
    }
    return intern(h, &s);
}

/* Helper thread k's stack (k = 1..7): threading bootstrap, then its blocking wait. */
static uint32_t helper_stack(struct history *h, int k, int var)
{
    static const char *thr = "/usr/lib/python3.12/threading.py";
    struct fstack s = {.n = 0};

    push(&s, "_bootstrap", thr, 1030);
    push(&s, "_bootstrap_inner", thr, 1073);
    push(&s, "run", thr, 1010);
    switch (k) {
    case 1: /* pin memory */
        push(&s, "_pin_memory_loop", "/usr/lib/python3/torch/utils/data/_utils/pin_memory.py", 53);
        push(&s, "do_one_step", "/usr/lib/python3/torch/utils/data/_utils/pin_memory.py",
             var ? 35 : 30);
        if (var) {
            push(&s, "pin_memory", "/usr/lib/python3/torch/utils/data/_utils/pin_memory.py", 61);
            break;
        }
        push(&s, "get", "/usr/lib/python3.12/multiprocessing/queues.py", 113);
        push(&s, "poll", "/usr/lib/python3.12/multiprocessing/connection.py", 257);
        push(&s, "_poll", "/usr/lib/python3.12/multiprocessing/connection.py", 440);
        push(&s, "wait", "/usr/lib/python3.12/multiprocessing/connection.py", 1136);
        push(&s, "select", "/usr/lib/python3.12/selectors.py", 415);
        break;
    case 2:
    case 3: /* queue feeders */
        push(&s, "_feed", "/usr/lib/python3.12/multiprocessing/queues.py", 231);
        push(&s, "wait", thr, 355);
        break;
    case 4: /* event writer */
        push(&s, "run", "/usr/lib/python3/torch/utils/tensorboard/event_file_writer.py", 244);
        push(&s, "_run", "/usr/lib/python3/torch/utils/tensorboard/event_file_writer.py", 269);
        push(&s, "get", "/usr/lib/python3.12/queue.py", 180);
        push(&s, "wait", thr, 359);
        break;
    default: /* heartbeat / watchdog threads, a few levels of the job's own code */
        for (int d = 0; d < 10; d++)
            push(&s, d % 2 ? "tick" : "loop", "/opt/job/monitor.py", 30 + d + k);
        push(&s, "wait", thr, 655);
        push(&s, "wait", thr, 359);
        break;
    }
    return intern(h, &s);
}

/* Phase of a stepping main thread at sample i: 10 samples per step. */
static enum phase step_phase(int i)
{
    int k = i % 10;

    return k == 0 ? PH_DATA : k < 4 ? PH_FWD : k < 8 ? PH_BWD : PH_REDUCE;
}

/* The hang: most ranks wait in the all-reduce, three are elsewhere. */
static uint32_t hang_stack(struct history *h, int rank)
{
    if (rank == 3)
        return main_stack(h, PH_DATA, 0);
    if (rank == 17)
        return main_stack(h, PH_CKPT, 0);
    if (rank == 42)
        return main_stack(h, PH_FWD, 2);
    return main_stack(h, PH_REDUCE, 0);
}

static void add_series(struct history *h, int r, int pid, uint64_t t, bool hung)
{
    double s = (double)(t - h->t0) / 1e9;

    history_counter(h, SERIES_CPU, NULL, pid, t, hung ? 1.0 + (r % 3) : 97.0 + (r % 5) * 0.5);
    history_counter(h, SERIES_RSS, NULL, pid, t, 2100.0 + r * 3 + (r == 5 ? s * 0.5 : 0));
    history_counter(h, SERIES_PSS, NULL, pid, t, 1800.0 + r * 3);
    history_counter(h, SERIES_USS, NULL, pid, t, 1500.0 + r * 3 + (r == 5 ? s * 0.5 : 0));
    history_counter(h, SERIES_SWAP, NULL, pid, t, 0);
    history_counter(h, SERIES_GIL_BUSY, NULL, pid, t, hung ? 2.0 : 60.0 + r % 7);
    history_counter(h, SERIES_GIL_SWITCHES, NULL, pid, t, hung ? 1.0 : 180.0);
    history_counter(h, SERIES_GIL_WAITERS, NULL, pid, t, hung ? 0.0 : 0.4);
}

static void add_gpu_series(struct history *h, uint64_t t, bool hung)
{
    for (int g = 0; g < NGPUS; g++) {
        char name[16], mem[24];

        snprintf(name, sizeof(name), "gpu%d", g);
        snprintf(mem, sizeof(mem), "gpu%d mem", g);
        history_counter(h, SERIES_DEV_UTIL, name, 0, t,
                        hung ? 0.0 : 85.0 + (g * 7 + (int)(t >> 30)) % 15);
        history_counter(h, SERIES_DEV_MEM, mem, 0, t, 61000.0 + g * 100);
    }
}

/* 64 ranks x 8 threads, SPAN_S seconds at HZ ending now; the last HANG_S seconds hang. */
static void build_history(struct history *h)
{
    uint64_t now = clock_mono_ns(), t0 = now - (uint64_t)SPAN_S * 1000000000ull;
    struct hthread *th[NRANKS][NTHREADS];
    int nsamples = SPAN_S * HZ, hang_from = (SPAN_S - HANG_S) * HZ;
    struct timespec wall;

    clock_gettime(CLOCK_REALTIME, &wall);
    history_init(h, t0, (int64_t)wall.tv_sec * 1000000 - SPAN_S * 1000000ll, "node-a17");
    for (int r = 0; r < NRANKS; r++) {
        char dev[16];
        struct hrank *hr;

        snprintf(dev, sizeof(dev), "gpu %d", r % NGPUS);
        hr = history_rank(h, 200000 + r, r, dev);
        snprintf(hr->python, sizeof(hr->python), "3.12.3");
        hr->start = t0;
        for (int k = 0; k < NTHREADS; k++) {
            static const char *names[NTHREADS] = {
                "MainThread",          "Thread-1 (_pin_memory_loop)",
                "QueueFeederThread",   "QueueFeederThread",
                "EventFileWriter",     "Thread-4 (heartbeat)",
                "Thread-5 (watchdog)", "Thread-6 (progress)"};

            th[r][k] = history_thread(
                hr, 0x7f3a00000000ull + (uint64_t)r * 0x100000 + (uint64_t)k * 0x1000,
                200000 + r * 16 + k, names[k], k == 0);
        }
    }
    for (int i = 0; i < nsamples; i++) {
        uint64_t t = t0 + (uint64_t)i * (1000000000ull / HZ);
        bool hung = i >= hang_from;

        for (int r = 0; r < NRANKS; r++) {
            int j = i + r % 3; /* ranks are a sample or two apart */

            history_observe(th[r][0],
                            hung ? hang_stack(h, r) : main_stack(h, step_phase(j), j / 10), t);
            for (int k = 1; k < NTHREADS; k++)
                history_observe(th[r][k], helper_stack(h, k, k == 1 && !hung && (j / 7) % 2), t);
            if (i % HZ == 0)
                add_series(h, r, 200000 + r, t, hung);
        }
        if (i % HZ == 0)
            add_gpu_series(h, t, hung);
    }
}

static void fill_live(struct engine_view *v)
{
    v->ndevs = NGPUS;
    v->devs = x_calloc(NGPUS, sizeof(*v->devs));
    for (int g = 0; g < NGPUS; g++)
        v->devs[g] = (struct smi_device){.kind = SMI_KIND_GPU,
                                         .valid = SMI_DEV_INDEX | SMI_DEV_UTIL | SMI_DEV_MEM_USED |
                                                  SMI_DEV_MEM_TOTAL,
                                         .index = g,
                                         .chip = -1,
                                         .util_pct = 0,
                                         .mem_used_mb = 61000 + g * 100,
                                         .mem_total_mb = 81559};
    v->nlive = NRANKS;
    v->live = x_calloc(NRANKS, sizeof(*v->live));
    for (int r = 0; r < NRANKS; r++) {
        struct engine_rank_live *l = &v->live[r];

        *l = (struct engine_rank_live){.pid = 200000 + r,
                                       .dev_mem_mb = 7600 + r,
                                       .gil_busy_pct = 2.0,
                                       .gil_switches = 1.0,
                                       .gil_waiters = 0.0,
                                       .nshares = NTHREADS};
        for (int k = 0; k < NTHREADS; k++) {
            l->shares[k].ident = 0x7f3a00000000ull + (uint64_t)r * 0x100000 + (uint64_t)k * 0x1000;
            l->shares[k].pct = 100.0 / (1 << (k + 1));
        }
    }
    v->rate_hz = HZ;
    v->t = clock_mono_ns();
    v->stats = (struct engine_stats){.samples = SPAN_S * HZ,
                                     .stacks = (uint64_t)SPAN_S * HZ * NRANKS * NTHREADS,
                                     .achieved_hz = HZ,
                                     .lag_ms = 0.4,
                                     .lag_max_ms = 3.1,
                                     .history_bytes = history_memory(&v->hist),
                                     .ranks = NRANKS,
                                     .ranks_seen = NRANKS};
}

struct stat3 {
    double mean, p95, max;
};

struct frame_cost { /* means, ms */
    double model, draw;
};

static struct stat3 stats_of(double *v, int n)
{
    struct stat3 s = {0, 0, 0};

    for (int i = 0; i < n; i++)
        s.mean += v[i] / n;
    qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
    s.p95 = v[(int)ceil(0.95 * n) - 1];
    s.max = v[n - 1];
    return s;
}

static double ms_since(uint64_t t0)
{
    return (double)(clock_mono_ns() - t0) / 1e6;
}

/* Writes the last frame's screen to stderr (--dump: to check what was drawn). */
static void dump_screen(const char *size, const char *view)
{
    int rows, cols;

    getmaxyx(stdscr, rows, cols);
    fprintf(stderr, "---- %s %s\n", size, view);
    for (int y = 0; y < rows; y++) {
        wchar_t line[512];

        if (mvinnwstr(y, 0, line, cols < 511 ? cols : 511) == ERR)
            line[0] = L'\0';
        fprintf(stderr, "%ls\n", line);
    }
}

/* One row: n frames of (view_hang + ui_build_rows, then ui_draw) in one view. */
static struct frame_cost frame_row(struct ui *u, const char *size, const char *view, int iters)
{
    static double model[MAX_ITERS], draw[MAX_ITERS], total[MAX_ITERS];
    struct stat3 sm, sd, st;

    for (int i = -5; i < iters; i++) { /* 5 warm-up frames */
        uint64_t a = clock_mono_ns(), b;

        view_hang_fini(&u->hang);
        view_hang(&u->v->hist, clock_mono_ns(), (uint64_t)(u->o->hang_after_s * 1e9), NULL,
                  &u->hang);
        ui_build_rows(u);
        b = clock_mono_ns();
        ui_draw(u);
        if (i >= 0) {
            model[i] = (double)(b - a) / 1e6;
            draw[i] = ms_since(b);
            total[i] = model[i] + draw[i];
        }
    }
    sm = stats_of(model, iters);
    sd = stats_of(draw, iters);
    st = stats_of(total, iters);
    printf("%-7s %-15s %8.3f %8.3f %8.3f %9.3f %8.3f %6d\n", size, view, st.mean, st.p95, st.max,
           sm.mean, sd.mean, ui_lower_rows(u));
    return (struct frame_cost){sm.mean, sd.mean};
}

/* The history copy in the view refresh_data takes every 500 ms, timed alone. */
static double clone_ms(const struct history *h, int iters)
{
    double v[MAX_ITERS];

    for (int i = 0; i < iters; i++) {
        struct history c;
        uint64_t t0 = clock_mono_ns();

        history_clone(h, &c);
        history_fini(&c);
        v[i] = ms_since(t0);
    }
    return stats_of(v, iters).mean;
}

static bool utf8_locale(void)
{
    const char *cs;

    setlocale(LC_ALL, "");
    cs = nl_langinfo(CODESET);
    if (cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8")))
        return true;
    if (!setlocale(LC_ALL, "C.UTF-8"))
        return false;
    cs = nl_langinfo(CODESET);
    return cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));
}

static void render_bench(const struct cfg *c)
{
    static const struct {
        int rows, cols;
    } sizes[] = {{60, 200}, {24, 80}};
    static const char *views[] = {"", "1 merged", "2 rank", "3 top", "4 gil", "5 memory"};
    struct ui_opts uo = {.hang_after_s = 30, .export_dir = "/tmp", .title = "given pids"};
    struct ui u = {.o = &uo, .view = VIEW_MERGED};
    FILE *out = fopen("/dev/null", "w"), *in = fopen("/dev/null", "r");
    SCREEN *scr;
    uint64_t t0;
    double build, copy;
    struct frame_cost first = {0, 0};
    struct engine_view *ev = engine_view_new();

    u.utf8 = utf8_locale();
    t0 = clock_mono_ns();
    build_history(&ev->hist);
    build = ms_since(t0);
    u.v = ev;
    if (!out || !in || !(scr = newterm("xterm-256color", out, in))) {
        printf("(cannot set up the fake terminal)\n");
        engine_release(ev);
        return;
    }
    set_term(scr);
    theme_init();
    fill_live(ev);
    pthread_mutex_init(&u.export_lock, NULL);
    printf("synthetic history: %d ranks x %d threads, %d s at %d Hz (last %d s hung), %zu "
           "stacks, %zu frames, %.1f MiB; built in %.0f ms\n",
           NRANKS, NTHREADS, SPAN_S, HZ, HANG_S, ev->hist.nstacks, ev->hist.nframes,
           (double)history_memory(&ev->hist) / 1048576.0, build);
    printf("terminal: xterm-256color on /dev/null, %s, %s; %d frames per row after 5 warm-up\n",
           u.utf8 ? "UTF-8" : "ASCII", theme_is_mono() ? "monochrome" : "colour", c->iters);
    printf("\n%-7s %-15s %8s %8s %8s %9s %8s %6s\n", "size", "view", "mean ms", "p95 ms", "max ms",
           "model ms", "draw ms", "lines");
    for (size_t s = 0; s < sizeof(sizes) / sizeof(*sizes); s++) {
        char label[16];

        resizeterm(sizes[s].rows, sizes[s].cols);
        snprintf(label, sizeof(label), "%dx%d", sizes[s].cols, sizes[s].rows);
        for (int v = VIEW_MERGED; v <= VIEW_MEMORY + 1; v++) { /* the last: merged, all threads */
            const char *name = v <= VIEW_MEMORY ? views[v] : "1 merged, all t";
            struct frame_cost f;

            u.view = v <= VIEW_MEMORY ? (enum ui_view)v : VIEW_MERGED;
            u.all_threads = v > VIEW_MEMORY;
            u.lsel = u.lscroll = 0;
            f = frame_row(&u, label, name, c->iters);
            if (s == 0 && v == VIEW_MERGED)
                first = f;
            if (c->dump)
                dump_screen(label, name);
        }
    }
    copy = clone_ms(&ev->hist, 20);
    printf("history copy (refresh_data, every 500 ms): %.3f ms mean\n", copy);
    /* ui_run: a draw every 100 ms tick, a refresh (copy, hang, rows) every 500 ms */
    printf("UI thread estimate, 200x60 merged: 10 draws + 2 refreshes per s = %.2f %% of a core\n",
           (10 * first.draw + 2 * (copy + first.model)) / 10.0);
    endwin();
    delscreen(scr);
    fclose(out);
    fclose(in);
    ui_fini(&u); /* gives the view back */
}

/* ---- Part 2: the real monitor's idle CPU ---- */

/* Starts one idle threads8.py target and waits for its "ready"; returns its pid or -1. */
static pid_t start_target(const struct cfg *c)
{
    const char *argv[] = {c->python, "-S", c->script, "idle", "20", NULL};
    struct bench_target t;
    bool ready = bench_target_spawn(&t, argv) == 0 && bench_target_ready(&t);

    /* The target writes nothing after "ready"; it keeps running with its pipes closed. */
    if (t.in)
        fclose(t.in);
    if (t.out)
        fclose(t.out);
    return ready ? t.pid : -1;
}

/* Runs a shell command and returns the first line of its output ("" on failure). */
static void run_line(const char *cmd, char *buf, size_t len)
{
    FILE *p = popen(cmd, "r");

    buf[0] = '\0';
    if (!p)
        return;
    if (!fgets(buf, (int)len, p))
        buf[0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    pclose(p);
}

/* utime + stime in clock ticks of a process (/proc/PID/stat) or thread (.../task/TID/stat). */
static long long cpu_ticks(const char *path)
{
    char buf[1024], *p;
    unsigned long long ut, st;
    FILE *f = fopen(path, "r");
    size_t n;

    if (!f)
        return -1;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (long long)(ut + st);
}

static void proc_ticks(pid_t pid, long long *total, long long *ui)
{
    char path[64];

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    *total = cpu_ticks(path);
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)pid);
    *ui = cpu_ticks(path);
}

static void stop_all(const char *sock, pid_t mon)
{
    char cmd[4200], line[8];

    if (mon > 0)
        kill(mon, SIGTERM);
    bench_sleep_s(0.3);
    snprintf(cmd, sizeof(cmd), "tmux -L %s kill-server 2>/dev/null", sock);
    run_line(cmd, line, sizeof(line));
    /* the server leaves its socket behind when it exits with the last session */
    snprintf(cmd, sizeof(cmd), "%s/tmux-%d/%s",
             getenv("TMUX_TMPDIR") ? getenv("TMUX_TMPDIR") : "/tmp", (int)getuid(), sock);
    unlink(cmd);
    bench_kill_tracked();
}

static void idle_cpu(const struct cfg *c)
{
    char pids[128] = "", sock[32], cmd[1024], line[512];
    pid_t mon = -1;
    long long a_tot, a_ui, b_tot, b_ui;
    uint64_t t0, t1;
    double hz = (double)sysconf(_SC_CLK_TCK), wall;
    int n = 0;

    snprintf(sock, sizeof(sock), "b%d", (int)getpid());
    for (; n < NTARGETS; n++) {
        pid_t p = start_target(c);
        size_t at = strlen(pids);

        if (p < 0) {
            printf("(a target failed to start: %s %s)\n", c->python, c->script);
            stop_all(sock, -1);
            return;
        }
        snprintf(pids + at, sizeof(pids) - at, "%s%d", n ? "," : "", (int)p);
    }
    snprintf(cmd, sizeof(cmd),
             "tmux -L %s -f /dev/null new-session -d -x 200 -y 60 'exec %s -p %s' && "
             "tmux -L %s list-panes -F '#{pane_pid}'",
             sock, c->ranktop, pids, sock);
    run_line(cmd, line, sizeof(line));
    mon = (pid_t)atoi(line);
    if (mon <= 0) {
        printf("(could not start `%s` in tmux)\n", c->ranktop);
        stop_all(sock, -1);
        return;
    }
    bench_track(mon);
    bench_sleep_s(c->warm_s);
    proc_ticks(mon, &a_tot, &a_ui);
    t0 = clock_mono_ns();
    bench_sleep_s(c->measure_s);
    proc_ticks(mon, &b_tot, &b_ui);
    t1 = clock_mono_ns();
    snprintf(cmd, sizeof(cmd), "tmux -L %s capture-pane -p -t 0 | head -1", sock);
    run_line(cmd, line, sizeof(line));
    stop_all(sock, mon);
    if (a_tot < 0 || b_tot < 0) {
        printf("(the monitor exited during the measurement)\n");
        return;
    }
    wall = (double)(t1 - t0) / 1e9;
    printf("\n%-28s %8s %8s %8s\n", "idle CPU, % of one core", "total", "UI thr", "others");
    printf("%-28s %8.2f %8.2f %8.2f\n", "ranktop -p (4 x 8 thr idle)",
           (double)(b_tot - a_tot) / hz / wall * 100, (double)(b_ui - a_ui) / hz / wall * 100,
           (double)((b_tot - a_tot) - (b_ui - a_ui)) / hz / wall * 100);
    printf("  %.0f s after %.0f s warm-up, 200x60 tmux; header: %.150s\n", wall, c->warm_s, line);
}

int main(int argc, char **argv)
{
    struct cfg c = {.iters = 200, .warm_s = 5, .measure_s = 20, .live = true};

    c.script = getenv("RANKTOP_BENCH_TARGET") ? getenv("RANKTOP_BENCH_TARGET") : BENCH_TARGET;
    c.ranktop = getenv("RANKTOP_BENCH_BIN") ? getenv("RANKTOP_BENCH_BIN") : BENCH_RANKTOP;
    c.python = bench_python(12);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            c.iters = 30;
            c.warm_s = 2;
            c.measure_s = 5;
        } else if (!strcmp(argv[i], "--dump")) {
            c.dump = true;
        } else if (!strcmp(argv[i], "--no-live")) {
            c.live = false;
        } else {
            c.python = argv[i];
        }
    }
    bench_handlers_install();
    setvbuf(stdout, NULL, _IOLBF, 0);
    bench_print_load("start");
    render_bench(&c);
    if (c.live) {
        printf("\nmonitor: %s (defaults: 10 Hz, GIL, memory, devices); python %s\n", c.ranktop,
               c.python);
        idle_cpu(&c);
    }
    bench_print_load("end");
    return 0;
}
