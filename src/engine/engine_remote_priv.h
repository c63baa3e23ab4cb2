/* Private to the head's remote collector: engine_remote.c runs the remote shells and reads
 * their output; engine_rapply.c hands each host's agent stream to the recorder (src/model/),
 * whose source (struct rsource) holds the host's id maps and clock. Both run on the remote
 * collector's thread; rlink_apply is called with the engine lock held. */
#ifndef RANKTOP_ENGINE_REMOTE_PRIV_H
#define RANKTOP_ENGINE_REMOTE_PRIV_H

#include "engine_priv.h"

#include "ranktop/agentproto.h"
#include "ranktop/recorder.h"
#include "ranktop/rsh.h"

#include <stdbool.h>
#include <stdint.h>

#define BACKOFF_MIN_NS 1000000000ull
#define BACKOFF_MAX_NS 30000000000ull

/* One host's agent stream: its identity, what its agent defined, its clock and its state.
 * The process that carries it (one per host, or one srun or pdsh for all) is a struct rproc
 * of engine_remote.c; proc is its index. */
struct rlink {
    char name[64];
    struct rsource src; /* what its agent defined, its clock, bounds and error line */
    size_t proc;
    enum engine_host_state state;
    bool refused;
    bool cut;         /* cut off for good: a bound or the protocol broken (refused stays set) */
    bool silent_said; /* the no-hello-yet line was set for this connection */

    struct rsh_tail said; /* the launcher's stderr lines that named this host (this connection) */
    char version[32];
    uint64_t last_msg;
    uint64_t win_t0, win_bytes;
    double bps;
    unsigned connects;
    uint64_t passes, nstack, errors, lost; /* the agent's totals (this connection) */
    uint64_t base[4];                      /* totals of earlier connections */
    struct smi_device *devs;
    size_t ndevs;
};

void rlink_set_error(struct rlink *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Forgets what a previous agent on this link defined: a new agent numbers anew. */
void rlink_reset_ids(struct rlink *l);

/* Keeps what an agent counted when its connection ends: a new agent counts from 0. */
void rlink_keep_totals(struct rlink *l);

/* Frees what the host's source holds (its rank keys included). */
void rlink_keys_free(struct rlink *l);

/* Cuts the host off for the rest of the run: its tables are freed, its lines dropped, its
 * state is down and its launcher is not started again for it; the error line (set by the
 * caller) says why. The other hosts go on. */
void rlink_cut(struct rlink *l);

/* Applies one message of the host's stream to the history through the recorder
 * (recorder_apply), its live figures and devices to the engine; engine lock held. Returns
 * true when the message was a tick (the host is alive and sampling). */
bool rlink_apply(struct engine *e, struct rlink *l, const struct record_event *m, uint64_t now);

#endif
