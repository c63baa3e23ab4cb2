/* What the bench/ runners share: Python targets that die with the runner (PR_SET_PDEATHSIG,
 * and a SIGINT/SIGTERM/SIGHUP handler that kills every tracked child), the interpreter to use,
 * sleeping and the load line printed with each figure. Main thread only. */
#ifndef RANKTOP_BENCH_SUPPORT_H
#define RANKTOP_BENCH_SUPPORT_H

#include "ranktop/engine/engine.h"

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

struct bench_target {
    pid_t pid;
    FILE *in, *out; /* the target's stdin and stdout */
};

/* Kills every tracked child on SIGINT, SIGTERM and SIGHUP, then dies of the signal; ignores
 * SIGPIPE. */
void bench_handlers_install(void);
/* Tracks a child started elsewhere (at most 128 are tracked). */
void bench_track(pid_t pid);
/* Forgets a tracked child the caller has reaped, so that its pid, once reused, is never killed. */
void bench_untrack(pid_t pid);
/* Kills (SIGKILL) and reaps every tracked child, and forgets them. */
void bench_kill_tracked(void);

/* Starts argv (argv[0] a path) with pipes on its stdin and stdout; tracked before it can run.
 * Returns 0 or -1. */
int bench_target_spawn(struct bench_target *t, const char *const argv[]);
/* Reads the target's first line; true when it starts with "ready". */
bool bench_target_ready(struct bench_target *t);
/* Kills and reaps n targets and closes their pipes. */
void bench_targets_kill(struct bench_target *t, int n);

/* The first of pyenv's 3.MINOR.* interpreters, else /usr/bin/python3 (a static buffer). */
const char *bench_python(int minor);
/* Sleeps s seconds, resuming after signals. */
void bench_sleep_s(double s);
/* One measured window of a running engine: its stats before and after, the wall seconds
 * between, passes a second, monitor CPU % of one core and mean lag over the window. */
struct bench_window {
    struct engine_stats a, b;
    double wall, passes_s, cpu_pct, lag_ms;
};
/* Lets e run warm_s, then measures measure_s into *w; stops and frees e. */
void bench_engine_window(struct engine *e, double warm_s, double measure_s, struct bench_window *w);
/* qsort comparator for doubles, ascending (medians and percentiles). */
int bench_cmp_double(const void *a, const void *b);
/* "WHEN: load average a b c on N CPUs". */
void bench_print_load(const char *when);

#endif
