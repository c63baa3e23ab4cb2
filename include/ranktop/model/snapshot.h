/* What the engine publishes for its readers: a view, the state of the whole engine at one
 * moment (the history and everything the monitor, the recorder's saves and the exports read
 * beside it: statistics, devices, live per-rank figures, other hosts, mapping growth,
 * errors, the sampling rate, native and asyncio state), and the record types it carries.
 *
 * A view is immutable once published and reference-counted: engine_acquire() (ranktop/
 * engine.h) hands out a reference, engine_release() gives it back, and the last release frees
 * it. Any thread may read a view it holds, for as long as it holds it, without a lock: no
 * one writes it. This header belongs to the model so that the layers that only read (the
 * view models of src/views) need not see the engine. Devices are the device layer's records
 * (ranktop/devices/devices.h): here only a pointer, for readers that see that layer. */
#ifndef RANKTOP_SNAPSHOT_H
#define RANKTOP_SNAPSHOT_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_MODEL)
#error "ranktop/model/snapshot.h belongs to src/model/, a layer this one may not use"
#endif

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/model/history.h"

struct smi_device; /* ranktop/devices/devices.h */

struct engine_stats {
    uint64_t samples; /* sampling passes over all ranks */
    uint64_t stacks;  /* thread stacks recorded */
    uint64_t errors;  /* failed rank samples and dropped thread stacks */
    /* Thread stacks the sampler could not read whole: the reader retries a torn walk a few
     * times from a fresh thread state; what still fails is lost (and counted in errors too).
     * Each rank's losses also go into the history as SERIES_STACKS_LOST. */
    uint64_t torn;      /* torn walks seen, each retried */
    uint64_t lost;      /* thread stacks dropped after every retry, plus torn thread lists */
    double achieved_hz; /* passes per second since the start */
    double lag_ms;      /* mean lateness of a pass behind its schedule */
    double lag_max_ms;
    uint64_t cpu_ns; /* CPU time of the engine's threads */
    size_t history_bytes;
    int ranks;           /* ranks currently sampled */
    int ranks_seen;      /* ranks ever sampled */
    int sampler_threads; /* threads the last sampling pass was split over */
    /* Task lanes (engine_opts.task_lanes): ended lanes folded away, and the most live tasks
     * one read left without a lane, in any rank; task_lane_cap is 0 until tasks were read. */
    size_t task_lane_cap;
    uint64_t tasks_folded;
    uint32_t tasks_unlaned_max;
    /* How the sampler reads the ranks' memory (pyproc_stats.reader, reader_why): NULL until a
     * rank was attached; /proc/PID/mem, with why, as soon as any rank is read through it. */
    const char *reader, *reader_why;
};

struct engine_unread {
    int pid;
    char why[200];
};

/* Live per-rank figures that are not time series: the UI's rank table and GIL view. */
struct engine_rank_live {
    int pid;
    int64_t dev_mem_mb;  /* device memory of this process, -1 unknown */
    double gil_busy_pct; /* over the last second, -1 unknown */
    double gil_switches; /* per second */
    double gil_waiters;  /* average, -1 unknown */
    double gc_pct;       /* GIL probes inside a garbage collection, last second; -1 unknown */
    bool stopped;        /* every thread stopped (SIGSTOP, a debugger): the sampler saw it */
    /* The main thread's wait as the kernel shows it, once a second (engine_procwait.c), and
     * whether the interpreter collected garbage most of the last second (the GIL thread). */
    char state;  /* /proc state letter, 0 unknown */
    int syscall; /* the syscall it sleeps in, -1 none or unknown */
    bool no_fds; /* that syscall is a select or poll over no descriptor (a sleep) */
    int in_gc;   /* 1, 0, -1 unknown */
    size_t nshares;
    struct {
        uint64_t ident;
        double pct;
    } shares[16]; /* GIL holder share per thread, largest first */
};

struct engine_growth {
    char label[96];
    int64_t before_kb, after_kb, delta_kb;
};

/* ---- Other nodes ---- */

enum engine_host_state {
    ENGINE_HOST_CONNECTING, /* the remote shell runs, no hello yet */
    ENGINE_HOST_UP,         /* ticks arrive */
    ENGINE_HOST_LAGGING,    /* up, but no tick for ENGINE_LAG_NS */
    ENGINE_HOST_DOWN,       /* gone: reconnecting with capped backoff */
};
#define ENGINE_LAG_NS 3000000000ull

struct engine_host {
    char name[64];       /* as given (--hosts), or the task label until the hello names it */
    char agent_host[64]; /* the host name the agent reported */
    char node[64];       /* a pod's node (kubectl), "" when not known or not a pod */
    enum engine_host_state state;
    char version[32]; /* the agent's ranktop version */
    int ranks;
    double age_s;                    /* since the last message; -1 never */
    double bytes_per_s;              /* received, over the last few seconds */
    double offset_ms, offset_err_ms; /* agent clock minus ours, and its bound */
    unsigned connects;               /* remote shells started */
    char error[256];                 /* last error line, "" none */
    size_t ship_bytes;               /* --ship: the binary's bytes last sent (0: none yet) */
    double ship_s;                   /* --ship: seconds from the node's request to the last byte */
};

/* The engine publishes at most one view per ENGINE_VIEW_PERIOD_NS: readers that ask sooner
 * share the last one. */
#define ENGINE_VIEW_PERIOD_NS 100000000ull
#define ENGINE_VIEW_GROWTH 16 /* mapping growth rows a view carries */

struct engine_view {
    atomic_int refs; /* references held (engine_acquire / engine_release only) */
    uint64_t t;      /* when it was built, CLOCK_MONOTONIC ns */
    struct history hist;
    struct engine_stats stats;
    double rate_hz; /* stack samples per second per rank, as set */
    bool async_on;  /* asyncio task reads on (engine_set_async) */
    /* Native frames: every rank's (record --native), else the ranks toggled on (native_keys);
     * the last reason they could not be had, and for which rank (native_err_key). */
    bool native_all;
    int *native_keys;
    size_t nnative;
    char native_err[512];
    int native_err_key;
    struct smi_device *devs; /* this node's devices, then other hosts' */
    size_t ndevs;
    struct engine_rank_live *live;
    size_t nlive;
    struct engine_host *hosts; /* other nodes (multi-node); none on one node */
    size_t nhosts;
    int growth_pid; /* the pid growth compares, 0 none */
    struct engine_growth growth[ENGINE_VIEW_GROWTH];
    size_t ngrowth;
    struct engine_unread *unread; /* targets the sampler cannot read */
    size_t nunread;
    char attach_err[512];   /* the sampler's last failure to attach to a target, "" none */
    char last_errors[1600]; /* that and the discovery errors, joined by "; " ("" none) */
};

/* Whether key's samples carry native frames in v. */
static inline bool engine_view_native_on(const struct engine_view *v, int key)
{
    if (v->native_all)
        return true;
    for (size_t i = 0; i < v->nnative; i++)
        if (v->native_keys[i] == key)
            return true;
    return false;
}

/* The last reason native frames could not be had for key (0: any rank); NULL when none.
 * Borrowed from v. */
static inline const char *engine_view_native_error(const struct engine_view *v, int key)
{
    return v->native_err[0] && (!key || v->native_err_key == key) ? v->native_err : NULL;
}

#endif
