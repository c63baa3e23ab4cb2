/* Private to the head's remote collector: engine_remote.c runs the remote shells and reads
 * their output; engine_rapply.c notes what each message tells the connection and, on the
 * recorder thread, hands each host's agent stream to the recorder (src/model/), whose source
 * (struct rsource) holds the host's id maps and clock. */
#ifndef RANKTOP_ENGINE_REMOTE_PRIV_H
#define RANKTOP_ENGINE_REMOTE_PRIV_H

#include "engine_priv.h"

#include "ranktop/remote/agentproto.h"
#include "ranktop/model/recorder.h"
#include "ranktop/remote/rsh.h"

#include <stdbool.h>
#include <stdint.h>

#define BACKOFF_MIN_NS 1000000000ull
#define BACKOFF_MAX_NS 30000000000ull

/* One host's agent stream: its identity, what its agent defined, its clock and its state.
 * The process that carries it (one per host, or one srun or pdsh for all) is a struct rproc
 * of engine_remote.c; proc is its index. */
struct rlink {
    struct engine *e;
    char name[64];
    /* What its agent defined, its clock, bounds and error line: the recorder's, under the
     * engine lock; and whether the recorder cut the source off (the remote collector then
     * cuts the host off: rlink_cut). */
    struct rsource src;
    bool src_cut;
    /* The rest is the remote collector's own. */
    bool hello; /* this connection's agent said hello */
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
};

/* Sets the host's error line, under the engine lock (the _locked form: lock held). */
void rlink_set_error(struct rlink *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rlink_set_error_locked(struct rlink *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Keeps what an agent counted when its connection ends: a new agent counts from 0. */
void rlink_keep_totals(struct rlink *l);

/* Cuts the host off for the rest of the run: its state is down and its launcher is not
 * started again for it; the error line says why. The other hosts go on. */
void rlink_cut(struct rlink *l);

/* What the host's connection learns from message m as it is parsed, on the remote
 * collector's thread: the hello's version (the host is up) or a refusal (another protocol
 * major: false, the message is dropped), a tick's totals (*tick set). The history's part is
 * the recorder's (engine_remote_apply_locked). */
bool rlink_note(struct rlink *l, const struct record_event *m, bool *tick);

#endif
