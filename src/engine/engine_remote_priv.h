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

/* Per-host bounds: what one agent stream may make the head hold outside the history (whose
 * own cap is the memory cap). A stream past RLINK_MEM_MAX is cut off with an error line; a
 * rank past RLINK_MAX_RANKS live ranks, or a device series past RLINK_MAX_SERIES, is dropped
 * and said. */
#define RLINK_MEM_MAX (32u << 20)     /* frame, stack, thread and rank tables of one host */
#define RLINK_MAX_RANKS 1024          /* live ranks of one host */
#define RLINK_MAX_THREADS 16384       /* live threads of one host */
#define RLINK_MAX_SERIES 256          /* device counter series of one host */
#define RLINK_FUTURE_NS 10000000000ll /* how far past the agent's clock a time may lie */

struct rframe {
    char *fn, *file;
    int line;
    bool native;
};

struct rstack {
    uint32_t head; /* the history's stack id; HSTACK_NONE while incomplete */
    uint32_t n, got;
    uint32_t cap; /* ids allocated: grows with the chunks received, never to n up front */
    uint32_t *ids;
};

/* A rank key this host defined and where the history holds it (a cached index, checked on
 * use: the history moves ranks when it drops exited ones). Open addressing, key 0 = empty. */
struct rkey {
    int key;
    bool live; /* defined and not exited: counts against RLINK_MAX_RANKS */
    size_t ri;
};

/* Rank numbers of the history's live ranks, for the "claimed twice" check of a new rank:
 * (rank number, key, index) triples with repeats, appended as the history's rank table grows
 * and rebuilt whenever an entry no longer matches its rank. Shared by every link. */
struct rclaims {
    struct {
        int rank, key; /* rank -1: empty */
        size_t ri;
    } * slot;
    size_t cap, used, scanned;
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
    bool cut;         /* cut off for good: a bound or the protocol broken (refused stays set) */
    bool silent_said; /* the no-hello-yet line was set for this connection */
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
    struct rkey *keys; /* rank keys this host has defined: a hash set of kcap slots */
    size_t nkeys, kcap, nlive;
    size_t nlive_threads;                       /* defined threads not gone (RLINK_MAX_THREADS) */
    size_t def_frames, def_stacks, def_threads; /* ids defined on this connection */
    bool ranks_said, threads_said;              /* a cap was said on this connection */
    uint64_t *series; /* hashes of the device series names this host has fed */
    size_t nseries;
    size_t mem;             /* bytes held by the tables above (RLINK_MEM_MAX) */
    int64_t hello_mono;     /* the agent's clock at its hello */
    int64_t last_tick;      /* the agent's clock of the last tick applied; -1: none yet */
    uint64_t now;           /* the head's clock for the message being applied */
    struct rclaims *claims; /* the head's, shared */
};

void rlink_set_error(struct rlink *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Forgets what a previous agent on this link defined: a new agent numbers anew. */
void rlink_reset_ids(struct rlink *l);

/* Keeps what an agent counted when its connection ends: a new agent counts from 0. */
void rlink_keep_totals(struct rlink *l);

/* The host's rank key set: the entry of key, or NULL. */
struct rkey *rlink_key_find(const struct rlink *l, int key);
/* Adds key (not present); NULL when the host's tables would pass RLINK_MEM_MAX. */
struct rkey *rlink_key_add(struct rlink *l, int key);
void rlink_keys_free(struct rlink *l);

/* Whether n more bytes fit the host's budget; when not, the host is cut off (rlink_cut). */
bool rlink_budget(struct rlink *l, size_t n, const char *what);

/* Cuts the host off for the rest of the run: its tables are freed, its lines dropped, its
 * state is down and its launcher is not started again for it; the error line (set by the
 * caller) says why. The other hosts go on. */
void rlink_cut(struct rlink *l);

/* Another live rank of the history (not key) with this rank number: its index, or SIZE_MAX. */
size_t rclaims_find(struct rclaims *c, const struct history *h, int rank, int key);
/* The history's rank ri now has rank number rank (set by this collector). */
void rclaims_note(struct rclaims *c, const struct history *h, size_t ri);
void rclaims_free(struct rclaims *c);

/* Applies one message of the host's stream to the history; engine lock held. Returns true
 * when the message was a tick (the host is alive and sampling). */
bool rlink_apply(struct engine *e, struct rlink *l, const struct record_event *m, uint64_t now);

#endif
