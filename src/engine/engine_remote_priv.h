/* Private to the head's remote collector: engine_remote.c runs the remote shells and reads
 * their output; engine_rapply.c applies each host's agent stream to the history. Both run on
 * the remote collector's thread; rlink_apply is called with the engine lock held. */
#ifndef RANKTOP_ENGINE_REMOTE_PRIV_H
#define RANKTOP_ENGINE_REMOTE_PRIV_H

#include "engine_priv.h"

#include "ranktop/agentproto.h"

#include <stdbool.h>
#include <stdint.h>

#define BACKOFF_MIN_NS 1000000000ull
#define BACKOFF_MAX_NS 30000000000ull

struct rframe {
    char *fn, *file;
    int line;
    bool native;
};

struct rstack {
    uint32_t head; /* the history's stack id; HSTACK_NONE while incomplete */
    uint32_t n, got;
    uint32_t *ids;
};

struct rthread {
    bool defined, gone;
    int key, worker, tid;
    uint64_t ident;
    bool main;
    char name[64];
    uint32_t cur;     /* current head stack */
    int64_t cur_wire; /* ... as the agent numbers it (-1: none) */
    size_t ri, ti;    /* cached indexes into the history, checked on use */
};

/* One host's agent stream: its identity, what its agent defined, its clock and its state.
 * The process that carries it (one per host, or one srun or pdsh for all) is a struct rproc
 * of engine_remote.c; proc is its index. */
struct rlink {
    char name[64];
    uint64_t hist_gen; /* the head history's generation its stack ids are of */
    int slot;
    size_t proc;
    enum engine_host_state state;
    bool hello, refused;
    char version[32], agent_host[64], error[256];
    int64_t offset_ns, rtt_ns;
    uint64_t last_msg;
    uint64_t up_since; /* its hello */
    uint64_t win_t0, win_bytes;
    double bps;
    unsigned connects;
    uint64_t passes, nstack, errors, lost; /* the agent's totals (this connection) */
    uint64_t base[4];                      /* totals of earlier connections */
    struct rframe *frames;
    size_t nframes;
    struct rstack *stacks;
    size_t nstacks;
    struct rthread *threads;
    size_t nthreads;
    struct smi_device *devs;
    size_t ndevs;
    int *keys; /* rank keys this host has defined */
    size_t nkeys;
};

void rlink_set_error(struct rlink *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Forgets what a previous agent on this link defined: a new agent numbers anew. */
void rlink_reset_ids(struct rlink *l);

/* Keeps what an agent counted when its connection ends: a new agent counts from 0. */
void rlink_keep_totals(struct rlink *l);

/* Applies one message of the host's stream to the history; engine lock held. Returns true
 * when the message was a tick (the host is alive and sampling). */
bool rlink_apply(struct engine *e, struct rlink *l, const struct agentproto_msg *m, uint64_t now);

#endif
