/* The recorder: the one function that turns record events (ranktop/model/record.h) into history
 * records. A source is where a batch of events comes from (another host's agent; this node's
 * collectors are source 0): it holds the ids the source defined mapped
 * to the history's own, the rank keys it made, its clock offset and its bounds, and the error
 * line of what it sent wrong.
 *
 * Events are validated by whoever built them (the agent stream's parser bounds every field);
 * the recorder checks every reference and time against the source: what refers to something
 * undefined, or an id beyond RECORD_ID_MAX or far past a table's end, is dropped and becomes
 * the source's error line, never a crash. Every table of a source is charged to its budget
 * (RSOURCE_MEM_MAX); a source past it is cut off (s->cut) and its later events ignored.
 *
 * Threads: a source and the history it feeds belong to the caller's thread, or to whoever
 * holds the lock that guards the history (the engine lock on the head today). */
#ifndef RANKTOP_RECORDER_H
#define RANKTOP_RECORDER_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_MODEL)
#error "ranktop/model/recorder.h belongs to src/model/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/model/history.h"
#include "ranktop/model/record.h"

/* Per-source bounds: what one source may make the recorder hold outside the history (whose
 * own cap is the memory cap). A source past RSOURCE_MEM_MAX is cut off with an error line; a
 * rank past RSOURCE_MAX_RANKS live ranks, a thread past RSOURCE_MAX_THREADS or a device
 * series past RSOURCE_MAX_SERIES is dropped and said. */
#define RSOURCE_MEM_MAX (32u << 20)     /* frame, stack, thread and rank tables of one source */
#define RSOURCE_MAX_RANKS 1024          /* live ranks of one source */
#define RSOURCE_MAX_THREADS 16384       /* live threads of one source */
#define RSOURCE_MAX_SERIES 256          /* device counter series of one source */
#define RSOURCE_FUTURE_NS 10000000000ll /* how far past the source's clock a time may lie */

struct rsource_frame;  /* a frame the source defined (private to src/model/) */
struct rsource_stack;  /* a stack, complete or still arriving in chunks */
struct rsource_thread; /* a thread and its current stack */
struct rsource_key;    /* a rank key the source made, and where the history holds it */

/* Rank numbers of the history's live ranks, for the "claimed twice" check of a new rank:
 * (rank number, key, index) triples with repeats, appended as the history's rank table grows
 * and rebuilt whenever an entry no longer matches its rank. Shared by every source of one
 * history; zero-initialised. */
struct rclaims {
    struct {
        int rank, key; /* rank -1: empty */
        size_t ri;
    } * slot;
    size_t cap, used, scanned;
};

/* One source. Set slot, host and claims (and zero the rest, rtt_ns = INT64_MAX and
 * last_tick = -1: rsource_init) before the first event. */
struct rsource {
    int slot;               /* its ranks' keys are (slot, pid): 0 is this node */
    char host[64];          /* the host named on its ranks and device series */
    char error[256];        /* the last thing it sent wrong, or its state */
    struct rclaims *claims; /* the history's, shared (borrowed) */
    uint64_t hist_gen;      /* the history's generation its stack ids are of */
    bool hello;             /* its clock is known (a hello was applied) */
    bool cut;               /* it passed its budget or broke the protocol: its events ignored */
    int64_t offset_ns;      /* history clock = source clock + offset_ns */
    int64_t rtt_ns;         /* the shortest ping's round trip (INT64_MAX: none yet) */
    int64_t hello_mono;     /* the source's clock at its hello */
    uint64_t up_since;      /* the history's clock at its hello */
    int64_t last_tick;      /* the source's clock of the last tick applied; -1: none yet */
    uint64_t now;           /* the history's clock for the batch being applied */
    struct rsource_frame *frames;
    size_t nframes;
    struct rsource_stack *stacks;
    size_t nstacks;
    struct rsource_thread *threads;
    size_t nthreads;
    struct rsource_key *keys; /* rank keys this source has defined: a hash set of kcap slots */
    size_t nkeys, kcap, nlive;
    size_t nlive_threads;                       /* defined threads not gone */
    size_t def_frames, def_stacks, def_threads; /* ids defined since the last reset */
    bool ranks_said, threads_said;              /* a cap was said since the last reset */
    uint64_t *series; /* hashes of the device series names this source has fed */
    size_t nseries;
    size_t mem; /* bytes held by the tables above (RSOURCE_MEM_MAX) */
};

/* What the recorder hands on instead of writing the history: a rank's live figures and a
 * device's state, which live outside it. Either may be NULL (dropped). */
struct recorder_sink {
    void *ctx;
    /* key: the rank's key; only for a live rank the source defined */
    void (*live)(void *ctx, int key, const struct record_live *m);
    void (*device)(void *ctx, const struct record_device *m);
};

/* Prepares s for a source of slot, named host, checking rank numbers against claims. */
void rsource_init(struct rsource *s, int slot, const char *host, struct rclaims *claims);
/* Frees everything s holds; s may be initialised again. */
void rsource_fini(struct rsource *s);
/* Forgets what the source defined (a new agent numbers anew) and its clock; keeps its rank
 * keys (the history still holds those ranks). */
void rsource_reset_ids(struct rsource *s);
/* Forgets the frames and stacks the source defined, and the memory they held (RECORD_FORGET);
 * threads keep the history's stack they show. */
void rsource_forget_defs(struct rsource *s);
/* Cuts the source off: its tables are freed and its later events ignored; the error line (set
 * by the caller) says why. */
void rsource_cut(struct rsource *s);
void rsource_set_error(struct rsource *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Applies n events of source s to h at the history's clock now, in order; sink takes what
 * is not the history's (may be NULL). Events before a hello are refused (error line), and a
 * source cut off (s->cut) ignores the rest. Returns the number of ticks applied (a tick says
 * the source is alive and sampling). */
size_t recorder_apply(struct history *h, struct rsource *s, const struct record_event *ev, size_t n,
                      uint64_t now, const struct recorder_sink *sink);

/* Another live rank of the history (not key) with this rank number: its index, or SIZE_MAX. */
size_t rclaims_find(struct rclaims *c, const struct history *h, int rank, int key);
/* The history's rank ri now has its rank number set. */
void rclaims_note(struct rclaims *c, const struct history *h, size_t ri);
void rclaims_free(struct rclaims *c);

#endif
