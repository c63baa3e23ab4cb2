/* Rank discovery: which processes of this node belong to the job, which rank each one is, and
 * which GPUs / NPUs they use. Produced by collectors/discovery/discovery.c, read by `ranktop ls`,
 * the engine and the UI. A struct discovery is filled by one thread and then only read. */
#ifndef RANKTOP_DISCOVERY_H
#define RANKTOP_DISCOVERY_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_DISCOVERY)
#error                                                                                             \
    "ranktop/discovery/discovery.h belongs to collectors/discovery/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/devices/devices.h"
#include "ranktop/devices/devsrc.h"
#include "ranktop/proc/procenv.h"
#include "ranktop/base/status.h"

struct proc_dev {
    enum smi_kind kind;
    int index;      /* GPU index or NPU card id */
    int chip;       /* NPU chip; -1 for GPUs */
    int64_t mem_mb; /* -1 unknown */
};

struct proc_rec {
    int pid;        /* in our PID namespace when alive; else as the device tool printed it */
    int ppid;       /* 0 unknown */
    char name[256]; /* executable path, else the tool's process name */
    bool alive;     /* the process exists in our /proc */
    bool python;    /* runs CPython (executable or libpython mapping) */
    /* Its environment and mappings cannot be read (another user's process, without the
     * privilege): python and id say nothing; discovery adds an error line saying so. */
    bool unreadable;
    struct rank_ident id;
    struct proc_dev *devs;
    size_t ndevs;
    int *children; /* DataLoader-style workers grouped under this rank */
    size_t nchildren;
};

struct discovery {
    char host[64];
    struct smi_result devs; /* devices (GPUs and NPUs) and the tools' process rows */
    struct proc_rec *procs; /* sorted by rank (unknown last), then pid */
    size_t nprocs;
    char **errors; /* one line each: "npu-smi: not found on PATH" */
    size_t nerrors;
    bool any_tool; /* some device source answered */
};

struct discovery_opts {
    struct devsrc_opts dev; /* which device sources, tools and recordings */
    int *pids;              /* -p (owned by the caller) */
    int npids;
    int *children_of; /* --children-of */
    int nchildren_of;
    const char *match; /* --match REGEX on the command line */
    /* `ranktop -- CMD`: the pid of the job ranktop started (0: none). Its ranks are the Python
     * processes of its tree (itself included) that carry a launcher's rank; while none does,
     * every Python process of the tree except a torchrun launcher. */
    int job;
};

void discovery_init(struct discovery *d);
void discovery_fini(struct discovery *d);

/* Runs the device sources and the /proc scan and joins them. Returns 0 (even when nothing was
 * found; errors go to d->errors), or APP_E_USAGE for a bad --match expression (message in
 * err). Callable from any one thread; external tools run under the deadline. */
int discovery_run(const struct discovery_opts *o, struct discovery *d, struct app_err *err);

#endif
