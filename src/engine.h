/* The sampling engine shared by `ranktop record` and the live monitor: collector threads for
 * discovery, stack sampling, GIL probing and memory, writing into one history under one short
 * lock. Readers (recorder, UI) never wait on a collector, a tool or a process: they take the
 * lock only to copy what they need. */
#ifndef RANKTOP_ENGINE_H
#define RANKTOP_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/discovery.h"
#include "ranktop/history.h"
#include "ranktop/status.h"

struct engine_opts {
    struct discovery_opts disc; /* borrowed for the engine's life */
    double rate_hz;             /* stack samples per second per rank (default 10) */
    bool all_threads;           /* every Python thread, else the main thread only */
    bool gil;                   /* GIL counters */
    bool mem;                   /* host memory counters (RSS, PSS, USS, swap) */
    bool gpu, npu;              /* device counters */
    uint64_t history_ns;        /* window kept; 0 = everything */
    size_t mem_cap;             /* bytes of history; 0 = no cap */
    int discovery_ms;           /* period of the /proc + tool scan (default 2000) */
};

struct engine_stats {
    uint64_t samples;   /* sampling passes over all ranks */
    uint64_t stacks;    /* thread stacks recorded */
    uint64_t errors;    /* failed rank samples and dropped thread stacks */
    double achieved_hz; /* passes per second since the start */
    double lag_ms;      /* mean lateness of a pass behind its schedule */
    double lag_max_ms;
    uint64_t cpu_ns; /* CPU time of the engine's threads */
    size_t history_bytes;
    int ranks;      /* ranks currently sampled */
    int ranks_seen; /* ranks ever sampled */
};

struct engine;

/* Starts the collector threads. Returns 0, or a negative status with err filled. */
int engine_start(const struct engine_opts *o, struct engine **out, struct app_err *err);

/* Stops and joins every thread; the history stays readable until engine_free. */
void engine_stop(struct engine *e);
void engine_free(struct engine *e);

/* A private copy of the history (short lock). Release with history_fini. */
void engine_clone_history(struct engine *e, struct history *out);

void engine_get_stats(struct engine *e, struct engine_stats *st);

/* Changes the stack sampling rate (Hz, clamped to 0.1..1000). */
void engine_set_rate(struct engine *e, double hz);

/* The last discovery error lines, joined by "; " (empty when none). */
void engine_last_errors(struct engine *e, char *buf, size_t len);

#endif
