/* The sampling engine shared by `ranktop record` and the live monitor: collector threads for
 * discovery, stack sampling, GIL probing and memory, writing into one history under one short
 * lock. Readers (the monitor, the recorder's saves, exports) never wait on a collector, a
 * tool or a process: they take a published view (engine_acquire, ranktop/model/snapshot.h) and read
 * it without any lock. */
#ifndef RANKTOP_ENGINE_H
#define RANKTOP_ENGINE_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_ENGINE)
#error "ranktop/engine/engine.h belongs to src/engine/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/discovery/discovery.h"
#include "ranktop/model/history.h"
#include "ranktop/remote/ship.h"
#include "ranktop/model/snapshot.h"
#include "ranktop/base/status.h"

/* How the head reaches other nodes (README, "Multi-node"): every host runs `ranktop agent`,
 * started with the remote shell; the engine turns each agent stream into history records of
 * its own, with a HOST and a rank key that tells hosts apart. */
enum engine_launcher {
    ENGINE_LAUNCH_RSH = 0, /* one remote shell per host: RSH... HOST RANKTOP agent ARGS */
    ENGINE_LAUNCH_SRUN,    /* one srun step, one agent per node, output labelled by task */
    ENGINE_LAUNCH_PDSH,    /* one pdsh, output lines "host: ..." */
    /* one kubectl exec per host, a host being a pod: KUBECTL... POD [-n NS] [-c C] -- RANKTOP
     * agent ARGS (ranktop/remote/kube.h), argv as is */
    ENGINE_LAUNCH_KUBECTL,
};

/* Whether a launcher runs one process per host (with its stdin) rather than one for all. */
static inline bool engine_launch_per_host(int how)
{
    return how == ENGINE_LAUNCH_RSH || how == ENGINE_LAUNCH_KUBECTL;
}

struct engine_remote_opts {
    char **hosts; /* other nodes to start agents on (borrowed); none: this node only */
    size_t nhosts;
    /* The remote shell's words, a parsed --rsh template (ranktop/remote/rsh.h: struct rsh_tmpl's w,
     * n and has_host), e.g. {"ssh", "-o", "BatchMode=yes"} (borrowed). */
    char **rsh;
    size_t nrsh;
    bool rsh_has_host;   /* a word holds the host mark (%h) */
    const char *ranktop; /* ranktop on the hosts (default "ranktop") */
    enum engine_launcher launcher;
    const char *slurm_job; /* srun: --jobid */
    /* kubectl: the pods' namespace and container (NULL: kubectl's defaults), and the node each
     * pod runs on (parallel to hosts; NULL, or an entry NULL, when not known), shown beside
     * the pod (borrowed). */
    const char *kube_ns, *kube_container;
    char **nodes;
    bool local; /* also sample this node in-process */
    /* --ship: the remote command is ship.h's script and the binary goes through the remote
     * shell's stdin, from this cache (borrowed; NULL: no shipping). */
    struct ship_cache *ship;
};

/* Rank keys: a rank on this node is keyed by its pid; a rank on another host by its pid and
 * the host's slot (1..ENGINE_MAX_HOSTS), so two hosts' equal pids stay two ranks. Every place
 * that takes a "pid" of a rank takes this key; people are shown history_key_pid(key). */
#define ENGINE_MAX_HOSTS 511
static inline int engine_key(int slot, int pid)
{
    return (int)(((unsigned)slot << HISTORY_KEY_PID_BITS) | (unsigned)pid);
}

struct engine_opts {
    struct discovery_opts disc; /* borrowed for the engine's life */
    struct engine_remote_opts remote;
    double rate_hz;   /* stack samples per second per rank (default 10) */
    bool all_threads; /* every Python thread, else the main thread only */
    bool gil;         /* GIL counters */
    bool gil_only;    /* keep only the stacks of threads holding the GIL (record --gil) */
    /* Keep only the stacks of threads running at the sample (R in /proc: record --oncpu, the
     * monitor's `o`), as austin -c; the others leave gaps. Off by default: a rank waiting
     * (in a collective, on I/O) is what a distributed job's user looks for. */
    bool oncpu;
    bool mem; /* host memory counters (RSS, PSS, USS, swap) */
    /* With mem: RSS and swap only, never PSS and USS, whose smaps_rollup read walks every
     * page table of every rank (watch: its reports show RSS, and it must cost next to nothing). */
    bool mem_rss_only;
    /* Milliseconds between two rounds of the memory collector (RSS, CPU %, the main thread's
     * wait state); 0: 1000. */
    int mem_period_ms;
    /* With mem: each rank's main thread's /proc state and syscall in the live figures (the
     * monitor's WAIT column, watch); a recorder does without (its traces judge waits by
     * stacks). */
    bool wait_states;
    bool gpu, npu;       /* device counters */
    uint64_t history_ns; /* window kept; 0 = everything */
    size_t mem_cap;      /* bytes of history; 0 = no cap */
    int discovery_ms;    /* period of the /proc + tool scan (default 2000) */
    /* Native (C/C++) frames merged into every sample of every rank (record and agent
     * --native): each thread is stopped briefly at every sample (collectors/native). */
    bool native;
    /* asyncio tasks (record --async, the monitor's `a`): each rank's tasks are read at most
     * ENGINE_ASYNC_HZ times a second (a read walks every task, much more than a stack sample)
     * and recorded as task pseudo-threads of the rank (hthread.task), each task's await chain
     * its stack; a task that finished or vanished ends its lane. */
    bool async;
    /* Task lanes kept per rank (0: ENGINE_TASK_LANES): at most this many live tasks have a
     * lane (a task gets one when it is first read while there is room, and keeps it), and
     * this many ended lanes stay, the oldest-ended beyond them folded away and counted. */
    size_t task_lanes;
    /* Threads that read the ranks' stacks, 1 to 4; 0: as many as keep the rate, from 1 up to
     * 4 and no more than the CPUs online. */
    int sampler_threads;
    /* An agent's engine: no history is kept; what the collectors find is taken for the wire
     * (engine_wire_tick) instead of a recorder applying it. */
    bool wire;
};

struct engine;

/* Starts the collector threads. Returns 0, or a negative status with err filled. */
int engine_start(const struct engine_opts *o, struct engine **out, struct app_err *err);

/* Stops and joins every thread; the history stays readable until engine_free. Returns without
 * waiting on a device tool: a tool the discovery thread is running is killed at once; nor on a
 * thread stuck in a system call: one not back in time (0.5 s, the remote collector 2.5 s) is
 * left running (said on stderr), and that engine is never freed. */
void engine_stop(struct engine *e);
void engine_free(struct engine *e);

/* Whether engine_stop left a thread running in this process: then the process must end with
 * _exit, not exit -- exit handlers would run beside that thread (a leak checker stops every
 * thread first, and that one cannot stop). */
bool engine_left_threads(void);

/* The engine's state for a reader: a reference to the published view (ranktop/model/snapshot.h).
 * The recorder thread builds views, at most one per ENGINE_VIEW_PERIOD_NS, off every
 * collector's path. engine_acquire hands out the published one whatever its age, and asks
 * for a new one when it is a period old or older, which the next call gets: a reader waits
 * only for the very first view (the monitor shows what was published at most a frame ago).
 * engine_acquire_fresh waits, when the published view is a period old, for one built after
 * the call began (exports and saves: what was recorded up to now). After engine_stop the
 * caller builds it, with the last samples. The view stays valid and unchanged until the
 * caller's engine_release, even after engine_free. Any thread. */
const struct engine_view *engine_acquire(struct engine *e);
const struct engine_view *engine_acquire_fresh(struct engine *e);

/* Gives back a reference from engine_acquire (or engine_view_new); the last one frees the
 * view. NULL is a no-op. Any thread; takes no engine lock. */
void engine_release(const struct engine_view *v);

/* engine_release, the freeing left to the recorder thread while it runs (at its next build,
 * before it copies): the monitor gives its last view back each frame, and freeing a large
 * history is milliseconds its frame need not spend. e must still be allocated. */
void engine_release_later(struct engine *e, const struct engine_view *v);

/* A zeroed view holding one reference, for a caller that fills it by hand (tests, benches):
 * engine_release frees what it points to (hist with history_fini, the arrays with free). */
struct engine_view *engine_view_new(void);

/* Views of this process not freed yet, engines' published ones included (tests). */
size_t engine_view_count(void);

/* Single copies, each under its own short lock: for the controller (key handlers), tests and
 * benches. Readers that draw or save take a view instead.
 *
 * A private copy of the history (short lock). Release with history_fini. */
void engine_clone_history(struct engine *e, struct history *out);

void engine_get_stats(struct engine *e, struct engine_stats *st);

/* Changes the stack sampling rate (Hz, clamped to 0.1..1000); engine_scale_rate multiplies
 * it (the monitor's + and -) and returns the rate set. engine_rate is the engine's own
 * (its remote collector forwards it); readers take the view's rate_hz. */
void engine_set_rate(struct engine *e, double hz);
double engine_scale_rate(struct engine *e, double factor);
double engine_rate(struct engine *e);

/* Turns the asyncio task reads (engine_opts.async) on or off while running. */
#define ENGINE_ASYNC_HZ 10
#define ENGINE_TASK_LANES 256
void engine_set_async(struct engine *e, bool on);

/* Turns on-CPU sampling (engine_opts.oncpu) on or off while running, for this node's ranks
 * (agents keep what they were started with). */
void engine_set_oncpu(struct engine *e, bool on);

/* Native frames for one rank (the monitor's `n`): its samples, taken at a low rate while on,
 * merge each thread's native stack with its Python stack. A rank on another host is
 * forwarded to its agent. Returns 0, or a negative status with err filled. */
#define ENGINE_NATIVE_HZ 2 /* toggled ranks' rate: each sample stops every thread briefly */
int engine_set_native(struct engine *e, int key, bool on, struct app_err *err);
/* Turns key's native frames on when off, off when on (*on: the new state); as
 * engine_set_native. */
int engine_toggle_native(struct engine *e, int key, bool *on, struct app_err *err);

/* The last discovery error lines, joined by "; " (empty when none). */
void engine_last_errors(struct engine *e, char *buf, size_t len);
/* Targets the sampler cannot read (a process of another user, not Python...), each with the
 * reason it last gave; a target leaves the list once it is read. Copies at most max into out
 * (short lock) and returns how many there are. */
size_t engine_unreadable(struct engine *e, struct engine_unread *out, size_t max);

/* The sampler's last failure to attach to a target alone ("" when none). */
void engine_attach_error(struct engine *e, char *buf, size_t len);

/* Copies of the device list and per-rank live figures as the recorder applied them, this
 * node's devices first (short lock; caller frees *devs, *ranks). */
void engine_snapshot_live(struct engine *e, struct smi_device **devs, size_t *ndevs,
                          struct engine_rank_live **ranks, size_t *nranks);

/* Memory growth by mapping for one rank: the mem thread takes a baseline of pid's mappings
 * when asked (or when pid changes) and compares every few seconds. pid 0 stops. */
void engine_mem_focus(struct engine *e, int pid, bool new_baseline);

/* Copies the latest comparison for the focused pid (a short copy under the engine lock; the
 * UI takes it with its other snapshots, never while drawing); returns how many rows. */
size_t engine_mem_growth(struct engine *e, int *pid, struct engine_growth *out, size_t n);

/* ---- Other nodes ---- */

/* A copy of every remote host's state; caller frees *out. */
void engine_hosts(struct engine *e, struct engine_host **out, size_t *n);

/* ---- The agent's side: the stream ranktop agent writes ---- */

/* A growing output buffer of stream lines. */
struct engine_out {
    char *buf;
    size_t len, cap;
};
void engine_out_fini(struct engine_out *o);

struct engine_wire;
struct engine_wire *engine_wire_new(void);
void engine_wire_free(struct engine_wire *w);

/* Appends to o the agent stream lines for what the collectors found since the last call (an
 * engine started with engine_opts.wire), then a tick line. Takes the engine lock only to
 * read the error lines and totals. */
void engine_wire_tick(struct engine *e, struct engine_wire *w, struct engine_out *o);

/* How ranks ended: the engine learns each watched rank's exit code or killing signal from the
 * kernel's process-event connector and writes it into the rank's history record (exit_code,
 * exit_signal). Waits at most timeout_ms for the subscription to be decided; returns true
 * when statuses are being learnt, false with the reason in why (no CAP_NET_ADMIN, not in the
 * initial namespaces, not decided yet): then every status stays unknown. */
bool engine_exit_listening(struct engine *e, int timeout_ms, char *why, size_t len);

/* One frame's arguments and locals, read on request (the monitor's Enter on a frame) with a
 * one-shot reader of its own: sampling never reads them (engine_locals.c). */
struct engine_local {
    char name[64], type[48], repr[256];
    char kind; /* 'a' argument, 'l' local, 'c' cell or free variable */
};
struct engine_locals {
    int line, n; /* the frame's line now; n locals in v */
    struct engine_local *v;
};
/* The locals of thread ident of process pid (on host `host`, "" or this one), in the frame
 * running function in file that is the pyindex-th Python frame from the innermost (the one of
 * that function nearest to it when the stack moved). Returns 0, or a negative status with why
 * in err (another host, no such thread or frame now, an unknown layout). */
int engine_locals_read(const char *host, int pid, uint64_t ident, const char *function,
                       const char *file, int pyindex, struct engine_locals *out,
                       struct app_err *err);
void engine_locals_fini(struct engine_locals *l);

#endif
