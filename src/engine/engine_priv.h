/* Engine internals shared by engine.c (lifecycle, discovery) and engine_sampler.c. */
#ifndef RANKTOP_ENGINE_PRIV_H
#define RANKTOP_ENGINE_PRIV_H

#include <pthread.h>
#include <stdbool.h>

#include "ranktop/engine.h"

/* A process the sampler reads: a rank (owner 0), or a DataLoader-style worker of the rank
 * whose pid is owner. Only the sampler reads workers; GIL and memory figures are per rank. */
struct target {
    int pid;
    int rank;
    int owner;
    char device[32];
};

struct engine {
    struct engine_opts o;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* broadcast on stop and on new targets */
    bool stop;
    int stop_fd;     /* eventfd, readable once stopping: polled by threads that block in I/O */
    bool discovered; /* the first discovery pass has published */
    struct history hist;
    struct target *targets;
    size_t ntargets;
    uint64_t targets_gen;
    char errors[1024];
    char attach_err[512]; /* the sampler's last failure to attach to a target */
    uint64_t period_ns;   /* sampler period */
    uint64_t t_start;
    /* statistics, under lock */
    uint64_t samples, stacks, errs, lag_sum_ns, lag_max_ns;
    uint64_t torn, lost; /* torn thread walks, thread stacks lost (engine_stats) */
    int ranks_now, ranks_seen;
    pthread_t th[8];
    int nth;
    /* live figures for the UI, under lock */
    struct smi_device *devs;
    size_t ndevs;
    struct engine_rank_live *live;
    size_t nlive;
    int focus_pid;
    bool focus_reset;
    int growth_pid;
    struct engine_growth growth[16];
    size_t ngrowth;
    /* exit statuses (engine_exit.c), under lock */
    bool exit_started;   /* the exit thread has tried to subscribe */
    bool exit_listening; /* ... and the kernel accepted */
    char exit_err[160];  /* why statuses stay unknown, "" when listening */
    uint64_t exits_known;
    /* other nodes (engine_remote.c), under lock */
    struct engine_host *hosts; /* one per --hosts entry */
    size_t nhosts;
    struct smi_device *rdevs; /* their devices (smi_device.host set) */
    size_t nrdevs;
    uint64_t rpasses;                 /* the most sampling passes one agent made */
    uint64_t rstacks, rerrors, rlost; /* the agents' totals */
};

/* The live record of pid (created on first use); call with the lock held. */
struct engine_rank_live *engine_live_locked(struct engine *e, int pid);

/* Sleeps until abs_ns or stop; true when stopping. */
bool engine_wait(struct engine *e, uint64_t abs_ns);

void *engine_sampler_main(void *arg);
void *engine_mem_main(void *arg);
void *engine_gil_main(void *arg);
void *engine_exit_main(void *arg);
void *engine_remote_main(void *arg);

#endif
