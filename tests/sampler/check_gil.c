/* GIL probes (collectors/python/pygil.c) against real CPython children, a 3.14 memory image, and
 * the pure figure arithmetic.
 *
 * Live targets are tests/py/gil_threads.py, forked as children of this test process (ptrace
 * rules, Yama scope 1 included), each with PR_SET_PDEATHSIG(SIGKILL) so that a failed
 * assertion (Check _exits the forked test) cannot leave a spinner behind; the normal path
 * kills and reaps them. Each scenario is probed at ~1 kHz for a fixed time after the target's
 * OUTDIR/ready appeared. Interpreters: pyenv's 3.11, 3.12 and 3.13 get the full matrix and are
 * required (a missing one fails); pyenv's 3.8-3.10 and Debian's /usr/bin/python3.11 get a
 * sanity subset when present. RANKTOP_PYTHONS replaces the list (the matrix then follows
 * each interpreter's version). Failures are collected, printed in full on stderr together
 * with the measured table, and summarised in one final assertion.
 *
 * Tolerances, for a 2-vCPU VM that may carry foreign load (busy % and switches/s are held to
 * the values below only while the workers waited for a CPU at most LOADED_WAIT of the window,
 * as the kernel's schedstat says; beyond that the scheduler decides them, and the run says so):
 * - busy >= 95 %: CPU-bound threads hold the GIL except for the microseconds of a hand-over
 *   (99-100 % measured; the reference measured 99.0-99.3 % with 3 threads); >= 85 % next to
 *   an I/O thread, whose ~300 hand-overs a second each leave the GIL free until the woken
 *   thread gets a CPU (96.9-99.7 % measured).
 * - holder share: each CPU-bound worker's share of the probes against its share of the workers'
 *   CPU time over the same window (the kernel's schedstat: a CPU-bound thread runs only while
 *   it holds the GIL), +- 0.1 plus the workers' runqueue wait over the window (a preempted
 *   holder holds without running); a fair 1/N is not assumed, since a loaded machine is not.
 * - switches/s < 2 with one thread (nothing else runs Python), > 20 from two threads (10 % of
 *   the nominal 1/interval = 200/s; 99-160/s measured under load).
 * - waiters: exactly 0 with one thread; with N threads N-1 reached, N at most and only in as
 *   many probes as the workers waited for a CPU (at least 1 %: glibc counts a woken waiter
 *   until it has run, while the thread that dropped the GIL may wait again; 4 probes of 999
 *   once in CI), and an average >= 0.2 (N-1): a non-holder leaves the condvar while it takes
 *   over and while it is runnable but waiting for a CPU after handing the GIL back, which on a
 *   loaded 2-vCPU VM is a sizeable part of the time (0.64-0.75 of N-1 measured at load 4, 0.34
 *   at load 12, 0.95 without load).
 * - I/O thread share < 5 % (0.1-0.2 % measured). A thread spinning in a 3.12+ subinterpreter
 *   with its own GIL holds the main interpreter's GIL < 1 % (0 measured). Drop requests pending >=
 * 20 % of the time behind a thread holding the GIL in 36 ms C calls (48-67 % measured); in_gc >= 50
 * % in a gc.collect() loop (99.8 % measured) and <= 1 % for allocation-free spinners. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ranktop/python/gil.h"
#include "pyproc_priv.h"
#include "ranktop/python/pystack.h"
#include "ranktop/base/status.h"
#include "ranktop/base/util.h"
#include "tsupport.h"

#define MAX_WORKERS 8
#define MAX_PROBES 4096
#define PROBE_PERIOD_NS 1000000ull /* 1 kHz */
#define SETTLE_US 100000 /* after ready: the main thread retakes the GIL once more, then blocks */
#define WATCHDOG_S 240
#define LOADED_WAIT 0.2 /* runqueue wait fraction beyond which scheduling decides busy/switches */

/* ---- the target ---------------------------------------------------------------------------- */

static struct ts_child *child; /* the running gil_threads.py, or NULL */

/* python -E -S gil_threads.py MODE N OUTDIR */
static void child_start(const char *python, const char *mode, int n)
{
    char count[16];
    const char *args[] = {mode, count, NULL};

    snprintf(count, sizeof(count), "%d", n);
    child = ts_target_start(python, "gil_threads.py", args);
}

struct worker {
    char role[8];
    uint64_t ident;
    int tid;
    uint64_t cpu0, cpu1;   /* its CPU time (schedstat, ns) when probing started and ended */
    uint64_t wait0, wait1; /* its time runnable but waiting for a CPU (schedstat), likewise */
};

/* OUTDIR/idents: one "ROLE IDENT TID" line per worker thread. */
static int idents_load(struct worker *w, const char *label)
{
    char path[PATH_MAX], role[8];
    unsigned long long ident;
    int n = 0, tid;
    FILE *f;

    snprintf(path, sizeof(path), "%s/idents", child->dir);
    f = fopen(path, "r");
    if (!f) {
        ts_fail("%s: cannot open %s", label, path);
        return 0;
    }
    while (n < MAX_WORKERS && fscanf(f, "%7s %llu %d", role, &ident, &tid) == 3) {
        snprintf(w[n].role, sizeof(w[n].role), "%s", role);
        w[n].tid = tid;
        w[n++].ident = ident;
    }
    fclose(f);
    return n;
}

/* ---- probing --------------------------------------------------------------------------- */

struct run {
    const char *python;
    const char *mode;
    int n;
    double seconds;
    char label[PATH_MAX + 64];
    char version[24];
    int minor;
    struct worker workers[MAX_WORKERS];
    int nworkers;
    /* results */
    struct gilfigures fig;
    size_t nprobes, nerrors;
    int waiters_max, waiters_over; /* largest count seen; probes above N-1 */
    double stranger_pct;           /* held by a thread that is not a worker */
    double reads_per_probe, us_per_probe;
    /* The workers' time runnable but without a CPU, over the window and per worker (0..1): the
     * share of the window in which the machine, not the GIL, decided who ran. */
    double wait_frac;
    int gone_rc; /* the probe's status once the target was killed */
};

/* A thread's CPU time and runqueue wait so far from /proc/PID/task/TID/schedstat (ns); zeros
 * when unreadable. */
static void thread_sched_ns(int pid, int tid, uint64_t *cpu, uint64_t *wait)
{
    char path[96];
    unsigned long long c = 0, w = 0;
    FILE *f;

    *cpu = *wait = 0;
    snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", pid, tid);
    f = fopen(path, "r");
    if (!f)
        return;
    if (fscanf(f, "%llu %llu", &c, &w) == 2)
        *cpu = c, *wait = w;
    fclose(f);
}

static void workers_cpu(struct run *r, bool end)
{
    for (int i = 0; i < r->nworkers; i++) {
        struct worker *w = &r->workers[i];

        if (end)
            thread_sched_ns(child->pid, w->tid, &w->cpu1, &w->wait1);
        else
            thread_sched_ns(child->pid, w->tid, &w->cpu0, &w->wait0);
    }
}

static void sleep_until(uint64_t t_ns)
{
    struct timespec ts = {(time_t)(t_ns / 1000000000ull), (long)(t_ns % 1000000000ull)};

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static bool is_worker(const struct run *r, uint64_t ident)
{
    for (int i = 0; i < r->nworkers; i++)
        if (r->workers[i].ident == ident)
            return true;
    return false;
}

static void note_probe(struct run *r, const struct pygil_sample *s, size_t *stranger)
{
    int expect_max = r->n - 1 + (strcmp(r->mode, "io") == 0 || strcmp(r->mode, "hog") == 0);

    if (s->waiters > r->waiters_max)
        r->waiters_max = s->waiters;
    r->waiters_over += s->waiters > expect_max;
    *stranger += s->locked && s->holder_ident && !is_worker(r, s->holder_ident);
}

/* Probes at 1 kHz for r->seconds into the figures of r. */
static void probe_for(struct run *r, struct pygil *g)
{
    struct gilstats st;
    struct pygil_stats s0, s1;
    struct app_err err = {0};
    uint64_t t0 = clock_mono_ns(), end = t0 + (uint64_t)(r->seconds * 1e9), next = t0, busy = 0;
    size_t stranger = 0;

    gilstats_init(&st);
    pygil_get_stats(g, &s0);
    workers_cpu(r, false);
    while ((next += PROBE_PERIOD_NS) < end && r->nprobes < MAX_PROBES) {
        struct pygil_sample s;
        uint64_t a = clock_mono_ns();
        int rc = pygil_sample(g, &s, &err);

        busy += clock_mono_ns() - a;
        r->nprobes++;
        if (rc < 0 && ++r->nerrors <= 3)
            ts_info("%s: probe error: %s", r->label, err.msg);
        gilstats_add(&st, &s);
        if (rc == 0)
            note_probe(r, &s, &stranger);
        sleep_until(next);
    }
    workers_cpu(r, true);
    for (int i = 0; i < r->nworkers; i++)
        r->wait_frac += (double)(r->workers[i].wait1 - r->workers[i].wait0);
    r->wait_frac /= (double)(r->nworkers ? r->nworkers : 1) * r->seconds * 1e9;
    pygil_get_stats(g, &s1);
    gilstats_figures(&st, 0, &r->fig);
    r->stranger_pct = r->fig.probes ? 100.0 * (double)stranger / (double)r->fig.probes : 0;
    r->reads_per_probe = (double)(s1.reads - s0.reads) / (double)(s1.probes - s0.probes);
    r->us_per_probe = (double)busy / 1e3 / (double)r->nprobes;
}

/* Starts the target, probes it, kills it, and checks that a probe then reports GONE. */
static bool run_scenario(struct run *r)
{
    struct pyproc *p = NULL;
    struct pygil *g;
    struct app_err err = {0};
    struct pygil_sample s;

    snprintf(r->label, sizeof(r->label), "%s %s %d", r->python, r->mode, r->n);
    ts_watchdog_arm(r->label, WATCHDOG_S);
    child_start(r->python, r->mode, r->n);
    if (!ts_child_wait_ready(child, r->label) ||
        !(r->nworkers = idents_load(r->workers, r->label))) {
        ts_child_kill(child);
        return false;
    }
    usleep(SETTLE_US);
    if (pyproc_open(child->pid, NULL, &p, &err) < 0) {
        ts_fail("%s: pyproc_open: %s", r->label, err.msg);
        ts_child_kill(child);
        return false;
    }
    snprintf(r->version, sizeof(r->version), "%s", pyproc_version(p));
    r->minor = (int)((pyproc_version_hex(p) >> 16) & 0xFF);
    g = pygil_new(p);
    pyproc_free(p); /* the prober has its own reader */
    if (!g) {
        ts_fail("%s: no GIL prober for Python %s", r->label, r->version);
        ts_child_kill(child);
        return false;
    }
    probe_for(r, g);
    ts_child_kill(child);
    r->gone_rc = pygil_sample(g, &s, &err);
    pygil_free(g);
    return true;
}

/* ---- checks ------------------------------------------------------------------------------- */

static double share_of(const struct run *r, uint64_t ident)
{
    for (size_t i = 0; i < r->fig.nthreads; i++)
        if (r->fig.threads[i].ident == ident)
            return r->fig.threads[i].holder_pct / 100.0;
    return 0.0;
}

static void check_common(const struct run *r)
{
    const struct gilfigures *f = &r->fig;

    if (r->nerrors * 100 > r->nprobes)
        ts_fail("%s: %zu of %zu probes failed", r->label, r->nerrors, r->nprobes);
    double busy_min = strcmp(r->mode, "io") == 0 ? 85.0 : 95.0;

    if ((double)f->probes < r->seconds * 500)
        ts_fail("%s: only %zu good probes in %.2f s", r->label, f->probes, r->seconds);
    /* How busy the GIL is and how often it changes hands depend on the scheduler once the
     * workers wait for CPUs much of the time (a woken waiter that gets no CPU leaves the GIL
     * free; a preempted holder switches nothing): those two figures are held to the nominal
     * values only on a machine that gives the workers their CPUs. */
    if (r->wait_frac > LOADED_WAIT)
        ts_info("%s: workers waited for a CPU %.0f %% of the time: busy %% and switches/s not "
                "held to nominal values",
                r->label, r->wait_frac * 100);
    else if (f->busy_pct < busy_min)
        ts_fail("%s: GIL busy %.1f %%, expected >= %.0f %%", r->label, f->busy_pct, busy_min);
    if (r->stranger_pct > 1.0)
        ts_fail("%s: %.1f %% of probes name a holder that is no worker thread", r->label,
                r->stranger_pct);
    if (r->reads_per_probe > 3.0)
        ts_fail("%s: %.2f reads per probe, expected <= 3", r->label, r->reads_per_probe);
    if (f->waiters_avg < 0)
        ts_fail("%s: waiter count unknown on a glibc target", r->label);
    if (r->gone_rc != APP_E_GONE)
        ts_fail("%s: probe of the killed target returned %d (%s), expected GONE", r->label,
                r->gone_rc, app_status_str(r->gone_rc));
}

static void check_cpu(const struct run *r)
{
    const struct gilfigures *f = &r->fig;
    int want = r->n - 1;

    uint64_t total = 0, waited = 0;
    double tol, over_ok;

    /* The truth: a CPU-bound thread runs only while it holds the GIL, so its share of the
     * workers' CPU time over the probing is its share of the GIL, however unfairly a loaded
     * machine schedules them. The one gap: a holder preempted by other work holds the GIL
     * without running; the kernel counts that time as runqueue wait, which widens the
     * tolerance by as much (nothing on a quiet machine). */
    for (int i = 0; i < r->nworkers; i++) {
        total += r->workers[i].cpu1 - r->workers[i].cpu0;
        waited += r->workers[i].wait1 - r->workers[i].wait0;
    }
    tol = 0.1 + (double)waited / (r->seconds * 1e9);
    for (int i = 0; i < r->nworkers && total; i++) {
        double sh = share_of(r, r->workers[i].ident),
               truth = (double)(r->workers[i].cpu1 - r->workers[i].cpu0) / (double)total;

        if (sh < truth - tol || sh > truth + tol)
            ts_fail("%s: thread %d holds %.3f of the probes, its CPU time says %.3f (+- %.3f "
                    "with the runqueue wait)",
                    r->label, i, sh, truth, tol);
    }
    if (!total)
        ts_fail("%s: no CPU time of the workers could be read", r->label);
    if (r->n == 1 && f->switches_per_s >= 2.0)
        ts_fail("%s: %.1f switches/s with one thread", r->label, f->switches_per_s);
    if (r->n > 1 && f->switches_per_s <= 20.0 && r->wait_frac <= LOADED_WAIT)
        ts_fail("%s: %.1f switches/s, expected > 20", r->label, f->switches_per_s);
    /* One more waiter than N - 1 is real but passing: glibc counts a woken waiter until it
     * has run, and the thread that just dropped the GIL may already wait again. It lasts as
     * long as the woken one waits for a CPU, so it may show in as many probes as the workers
     * waited for one (the runqueue truth), or 1 % of them on a quiet machine. */
    over_ok = (r->wait_frac > 0.01 ? r->wait_frac : 0.01) * (double)r->nprobes;
    if (r->waiters_max < want || r->waiters_max > want + 1 || r->waiters_over > over_ok)
        ts_fail("%s: waiters peaked at %d (%d probes above %d, at most %.0f allowed), expected "
                "%d",
                r->label, r->waiters_max, r->waiters_over, want, over_ok, want);
    if (f->waiters_avg > want + over_ok / (double)(r->nprobes ? r->nprobes : 1) ||
        f->waiters_avg < 0.2 * want || (want == 0 && f->waiters_avg))
        ts_fail("%s: waiters avg %.2f, expected within [%.2f, %d]", r->label, f->waiters_avg,
                0.2 * want, want);
    if (r->n == 1 && f->drop_pending_pct != 0.0)
        ts_fail("%s: drop requests pending %.2f %% with no waiter", r->label, f->drop_pending_pct);
    if (f->gc_pct < 0 || f->gc_pct > 1.0)
        ts_fail("%s: in GC %.1f %% in an allocation-free loop", r->label, f->gc_pct);
}

static uint64_t ident_of(const struct run *r, const char *role)
{
    for (int i = 0; i < r->nworkers; i++)
        if (strcmp(r->workers[i].role, role) == 0)
            return r->workers[i].ident;
    return 0;
}

static void check_io(const struct run *r)
{
    double io = share_of(r, ident_of(r, "io")), cpu = share_of(r, ident_of(r, "cpu"));

    if (io >= 0.05)
        ts_fail("%s: the I/O thread holds %.3f, expected < 0.05", r->label, io);
    if (cpu < 0.8)
        ts_fail("%s: the CPU thread holds %.3f, expected >= 0.8", r->label, cpu);
    if (r->fig.switches_per_s <= 20.0 && r->wait_frac <= LOADED_WAIT)
        ts_fail("%s: %.1f switches/s, expected > 20", r->label, r->fig.switches_per_s);
}

static void check_hog(const struct run *r)
{
    if (r->fig.drop_pending_pct < 20.0 || r->fig.drop_requests_per_s <= 0)
        ts_fail("%s: drop request pending %.1f %% (%.1f/s), expected >= 20 %%", r->label,
                r->fig.drop_pending_pct, r->fig.drop_requests_per_s);
}

/* 3.12+: a thread spinning in a subinterpreter with its own GIL never holds the main one. */
static void check_sub(const struct run *r)
{
    double sub = share_of(r, ident_of(r, "sub")), cpu = share_of(r, ident_of(r, "cpu"));

    if (sub >= 0.01 || cpu < 0.95)
        ts_fail("%s: main GIL held %.3f by the subinterpreter thread and %.3f by the CPU "
                "thread, expected < 0.01 and >= 0.95",
                r->label, sub, cpu);
    if (r->waiters_max != 0 || r->fig.switches_per_s >= 2.0)
        ts_fail("%s: %d waiters, %.1f switches/s on a GIL with one user", r->label, r->waiters_max,
                r->fig.switches_per_s);
}

static void check_gc(const struct run *r)
{
    if (r->fig.gc_pct < 50.0)
        ts_fail("%s: in GC %.1f %% in a gc.collect() loop, expected >= 50 %%", r->label,
                r->fig.gc_pct);
}

static void check_run(const struct run *r)
{
    check_common(r);
    if (strcmp(r->mode, "cpu") == 0)
        check_cpu(r);
    else if (strcmp(r->mode, "io") == 0)
        check_io(r);
    else if (strcmp(r->mode, "hog") == 0)
        check_hog(r);
    else if (strcmp(r->mode, "sub") == 0)
        check_sub(r);
    else
        check_gc(r);
}

static void print_run(const struct run *r)
{
    const struct gilfigures *f = &r->fig;
    char shares[256] = "";
    size_t len = 0;

    for (size_t i = 0; i < f->nthreads && len < sizeof(shares) - 16; i++)
        len += (size_t)snprintf(shares + len, sizeof(shares) - len, "%s%.1f", i ? "/" : "",
                                f->threads[i].holder_pct);
    ts_info("| %-7s | %-3s %d | %5zu | %5.1f | %6.1f | %4.2f (max %d) | %5.1f %% %5.1f/s | %5.1f "
            "| %-22s | %.2f | %5.1f |",
            r->version, r->mode, r->n, f->probes, f->busy_pct, f->switches_per_s, f->waiters_avg,
            r->waiters_max, f->drop_pending_pct, f->drop_requests_per_s, f->gc_pct, shares,
            r->reads_per_probe, r->us_per_probe);
}

/* ---- live test ---------------------------------------------------------------------------- */

struct scenario {
    const char *mode;
    int n;
    double seconds;
    bool full_only; /* only for interpreters that get the full matrix */
    int min_minor;  /* 3.<min_minor> and later */
};

static const struct scenario scenarios[] = {
    {"cpu", 1, 1.0, false, 8}, {"cpu", 2, 2.0, false, 8}, {"cpu", 4, 2.0, true, 8},
    {"io", 1, 2.0, true, 8},   {"sub", 1, 1.0, true, 12}, {"hog", 1, 1.0, false, 8},
    {"gc", 1, 0.5, false, 8},
};

static void python_runs(const struct ts_python *py)
{
    bool full = true;
    int minor = 99;

    for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
        const struct scenario *sc = &scenarios[i];
        struct run r = {.python = py->path, .mode = sc->mode, .n = sc->n};

        if ((sc->full_only && !full) || minor < sc->min_minor)
            continue;
        r.seconds = full || i == 0 ? sc->seconds : sc->seconds / 2;
        if (!run_scenario(&r))
            continue;
        /* The first run tells the version: 3.11+ required interpreters get everything. */
        minor = r.minor;
        full = py->required && r.minor >= 11;
        print_run(&r);
        check_run(&r);
    }
}

START_TEST(test_live)
{
    struct ts_pylist l;

    ts_pythons_discover(&l, 11, false);
    ts_info("| python  | run   | probes | busy%% | sw/s   | waiters       | drop pending, /s | "
            "gc%%   | holder %% per thread  | rd/pr | us/pr |");
    for (int i = 0; i < l.n; i++)
        python_runs(&l.v[i]);
    ts_pylist_free(&l);
    ts_assert_clean();
}
END_TEST

/* ---- a 3.14 image ------------------------------------------------------------------------- */

enum {
    RUNTIME = 0x100000,
    INTERP = 0x200000,
    TS1 = 0x300000,
    TS2 = 0x310000,
    GIL_AT = 7760, /* interp->_gil (3.14.0) */
    GIL_MOVED = 6000,
    GC_AT = 7400, /* interp->gc */
    GC_COLLECTING = 200,
};

#define IDENT1 0x7f0000001000ull
#define IDENT2 0x7f0000002000ull

static void put64(uint8_t *b, size_t off, uint64_t v)
{
    memcpy(b + off, &v, 8);
}

static void put32(uint8_t *b, size_t off, uint32_t v)
{
    memcpy(b + off, &v, 4);
}

/* _Py_DebugOffsets of 3.14.0 (the values of tests/unit/check_pyimage.c) plus the gc slots. */
static void put_debug_offsets(uint8_t *rt)
{
    static const uint16_t off[] = {24,  32,  40,  48,  56,  64,  72,  80,  96,  120, 128, 144,
                                   152, 160, 176, 192, 200, 208, 216, 224, 232, 240, 248, 256,
                                   264, 272, 288, 312, 320, 328, 336, 344, 352, 384, 400, 408,
                                   592, 600, 608, 616, 624, 632, 640, 88,  648, 656};
    static const uint64_t val[] = {
        1 << 20, 784,  808, 225808, 7280, 7272, 7344, 7360,  7664, 16,           GIL_AT, 7776,
        7768,    7968, 824, 8,      16,   72,   152,  160,   232,  32,           88,     8,
        0,       56,   74,  216,    112,  120,  128,  136,   68,   208,          16,     8,
        40,      16,   32,  64,     32,   16,   40,   GC_AT, 400,  GC_COLLECTING};

    memcpy(rt, "xdebugpy", 8);
    put64(rt, 8, 0x030e00f0);
    for (size_t i = 0; i < sizeof(off) / sizeof(*off); i++)
        put64(rt, off[i], val[i]);
}

/* A GIL struct at interp + at: 3.14 offsets last_holder 8, locked 16, switch 24, cond 32. */
static void put_gil(uint8_t *interp, size_t at, int locked, uint64_t holder, uint64_t sw,
                    uint32_t wrefs)
{
    put64(interp, at + 8, holder);
    put32(interp, at + 16, (uint32_t)locked);
    put64(interp, at + 24, sw);
    put32(interp, at + 32 + 36, wrefs);
}

static void put_tstate(uint8_t *ts, uint64_t ident, uint64_t eval_breaker)
{
    put64(ts, 16, INTERP);
    put64(ts, 24, eval_breaker);
    put64(ts, 152, ident);
}

struct image {
    struct pyproc *p;
    struct pygil *g;
    struct rmem *m; /* borrowed from p */
};

static void image_open(struct image *im)
{
    static uint8_t rt[4096], interp[8192], ts1[512], ts2[512];
    struct app_err err = {0};
    struct rmem *m = rmem_new_image();

    memset(rt, 0, sizeof(rt));
    memset(interp, 0, sizeof(interp));
    put_debug_offsets(rt);
    put64(rt, 808, INTERP); /* interpreters.head */
    put64(rt, 816, INTERP); /* interpreters.main */
    put64(interp, 16, INTERP + GIL_AT);
    put_gil(interp, GIL_AT, 1, TS1, 41, 2 << 3 | 2);
    put32(interp, GC_AT + GC_COLLECTING, 1);
    put_tstate(ts1, IDENT1, 0x100 | 1); /* instrumentation version bits + drop request */
    put_tstate(ts2, IDENT2, 0x100);
    rmem_image_add(m, RUNTIME, rt, sizeof(rt));
    rmem_image_add(m, INTERP, interp, sizeof(interp));
    rmem_image_add(m, TS1, ts1, sizeof(ts1));
    rmem_image_add(m, TS2, ts2, sizeof(ts2));
    ck_assert_msg(pyproc_open_mem(m, 0, RUNTIME, 0, 0x030e00f0, NULL, &im->p, &err) == 0,
                  "open: %s", err.msg);
    im->m = im->p->mem;
    im->g = pygil_new(im->p);
    ck_assert_ptr_nonnull(im->g);
}

static void image_close(struct image *im)
{
    pygil_free(im->g);
    pyproc_free(im->p);
}

/* One probe; returns the process_vm_readv calls it took. */
static uint64_t image_probe(struct image *im, struct pygil_sample *s, int want_rc)
{
    struct pygil_stats a, b;
    struct app_err err = {0};
    int rc;

    pygil_get_stats(im->g, &a);
    rc = pygil_sample(im->g, s, &err);
    ck_assert_msg(rc == want_rc, "probe returned %d (%s), expected %d", rc, err.msg, want_rc);
    pygil_get_stats(im->g, &b);
    return b.reads - a.reads;
}

static void image_gil(struct image *im, size_t at, int locked, uint64_t holder, uint64_t sw)
{
    uint8_t gil[72] = {0};

    put_gil(gil, 0, locked, holder, sw, 1 << 3 | 2);
    ck_assert_int_eq(rmem_image_write(im->m, INTERP + at, gil, sizeof(gil)), 0);
}

START_TEST(test_image_314)
{
    struct image im;
    struct pygil_sample s;
    uint64_t v;

    image_open(&im);
    image_probe(&im, &s, 0);
    ck_assert(s.known && s.locked);
    ck_assert_uint_eq(s.holder_ident, IDENT1);
    ck_assert_uint_eq(s.switch_number, 41);
    ck_assert_int_eq(s.waiters, 2);
    ck_assert(s.drop_known && s.drop_request);
    ck_assert_int_eq(s.in_gc, 1);
    /* Same holder: one read, the speculative tstate range included. */
    ck_assert_uint_eq(image_probe(&im, &s, 0), 1);
    ck_assert_uint_eq(s.holder_ident, IDENT1);
    /* A new holder (3.14 needs its eval_breaker: a second read). */
    image_gil(&im, GIL_AT, 1, TS2, 42);
    ck_assert_uint_eq(image_probe(&im, &s, 0), 2);
    ck_assert_uint_eq(s.holder_ident, IDENT2);
    ck_assert(s.drop_known && !s.drop_request);
    ck_assert_int_eq(s.waiters, 1);
    /* Released: no holder, nothing to drop. */
    image_gil(&im, GIL_AT, 0, TS2, 42);
    image_probe(&im, &s, 0);
    ck_assert(s.known && !s.locked && s.holder_ident == 0 && s.drop_known && !s.drop_request);
    /* The GIL pointer moves: the probe notices, re-resolves and reads the new struct. */
    image_gil(&im, GIL_MOVED, 1, TS1, 77);
    v = INTERP + GIL_MOVED;
    ck_assert_int_eq(rmem_image_write(im.m, INTERP + 16, &v, 8), 0);
    image_probe(&im, &s, 0);
    ck_assert(s.locked && s.holder_ident == IDENT1 && s.switch_number == 77);
    /* Not created / destroyed, then finalizing. */
    image_gil(&im, GIL_MOVED, -1, 0, 0);
    image_probe(&im, &s, APP_E_STARTING);
    ck_assert(!s.known);
    v = 1;
    ck_assert_int_eq(rmem_image_write(im.m, RUNTIME + 784, &v, 8), 0);
    image_probe(&im, &s, APP_E_EXITING);
    image_close(&im);
}
END_TEST

/* ---- figures ------------------------------------------------------------------------------ */

static struct pygil_sample mk(uint64_t t_ms, bool locked, uint64_t holder, uint64_t sw, int waiters,
                              int drop, int in_gc)
{
    return (struct pygil_sample){.t_ns = t_ms * 1000000ull,
                                 .known = true,
                                 .locked = locked,
                                 .holder_ident = holder,
                                 .switch_number = sw,
                                 .waiters = waiters,
                                 .drop_known = drop >= 0,
                                 .drop_request = drop > 0,
                                 .in_gc = in_gc};
}

START_TEST(test_figures)
{
    const struct pygil_sample s[] = {
        mk(0, true, 1, 100, 1, 0, 0),
        mk(1, true, 1, 100, 1, 1, 0),
        mk(2, true, 2, 101, 1, 1, 1),
        mk(3, false, 0, 101, 0, 0, 1),
        mk(4, true, 2, 103, 2, 1, -1),
        mk(5, true, 0, 104, -1, -1, 0),
        {.t_ns = 6000000, .known = false, .waiters = -1, .in_gc = -1},
        mk(10, true, 1, 104, 1, 0, 0),
    };
    struct gilstats st;
    struct gilfigures f;

    gilstats_init(&st);
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
        gilstats_add(&st, &s[i]);
    gilstats_figures(&st, 0, &f);
    ck_assert_uint_eq(f.probes, 7);
    ck_assert_double_eq_tol(f.busy_pct, 600.0 / 7, 1e-9);
    ck_assert_double_eq_tol(f.switches_per_s, 4 / 0.010, 1e-6); /* 100 -> 104 over 10 ms */
    ck_assert_double_eq_tol(f.waiters_avg, 6.0 / 6, 1e-9);
    ck_assert_double_eq_tol(f.drop_pending_pct, 300.0 / 6, 1e-9);
    ck_assert_double_eq_tol(f.drop_requests_per_s, 2 / 0.010, 1e-6); /* two rising edges */
    ck_assert_double_eq_tol(f.gc_pct, 200.0 / 6, 1e-9);
    ck_assert_double_eq_tol(f.unattributed_pct, 100.0 / 7, 1e-9);
    ck_assert_uint_eq(f.nthreads, 2);
    ck_assert_uint_eq(f.threads[0].ident, 1); /* 3 probes, sorted first */
    ck_assert_double_eq_tol(f.threads[0].holder_pct, 300.0 / 7, 1e-9);
    ck_assert_double_eq_tol(f.threads[1].holder_pct, 200.0 / 7, 1e-9);
    gilstats_figures(&st, 1000000000ull, &f);
    ck_assert_double_eq_tol(f.switches_per_s, 4.0, 1e-9);

    /* The next window starts from the last probe: 104 -> 110 over 10 ms. */
    gilstats_next(&st);
    const struct pygil_sample t = mk(20, true, 3, 110, 0, -1, -1);
    gilstats_add(&st, &t);
    gilstats_figures(&st, 0, &f);
    ck_assert_uint_eq(f.probes, 1);
    ck_assert_double_eq_tol(f.switches_per_s, 6 / 0.010, 1e-6);
    ck_assert_double_eq_tol(f.drop_requests_per_s, -1.0, 1e-12);
    ck_assert_double_eq_tol(f.gc_pct, -1.0, 1e-12);
}
END_TEST

START_TEST(test_figures_many_threads)
{
    struct gilstats st;
    struct gilfigures f;

    gilstats_init(&st);
    for (uint64_t i = 0; i < GILSTATS_MAX_THREADS + 6; i++) {
        const struct pygil_sample s = mk(i, true, 1000 + i, 0, 0, 0, 0);

        gilstats_add(&st, &s);
    }
    gilstats_figures(&st, 0, &f);
    ck_assert_uint_eq(f.nthreads, GILSTATS_MAX_THREADS);
    ck_assert_double_eq_tol(f.unattributed_pct, 600.0 / (GILSTATS_MAX_THREADS + 6), 1e-9);
    ck_assert_double_eq_tol(f.switches_per_s, 0.0, 1e-12);

    gilstats_init(&st);
    gilstats_figures(&st, 0, &f);
    ck_assert_uint_eq(f.probes, 0);
    ck_assert_double_eq_tol(f.waiters_avg, -1.0, 1e-12);
}
END_TEST

/* ---- suite -------------------------------------------------------------------------------- */

int main(void)
{
    Suite *s = suite_create("gil");

    ts_add_case(s, "figures", test_figures, 300);
    ts_add_case(s, "figures_many_threads", test_figures_many_threads, 300);
    ts_add_case(s, "image_314", test_image_314, 300);
    ts_add_case(s, "live", test_live, 300);
    return ts_run(s);
}
