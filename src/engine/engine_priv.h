/* Engine internals shared by engine.c (lifecycle, discovery) and engine_sampler.c. */
#ifndef RANKTOP_ENGINE_PRIV_H
#define RANKTOP_ENGINE_PRIV_H

#include <pthread.h>
#include <stdbool.h>

#include "ranktop/engine/engine.h"
#include "ranktop/model/recorder.h"

struct rlink; /* a host's agent stream (engine_remote_priv.h) */

/* A process the sampler reads: a rank (owner 0), or a DataLoader-style worker of the rank
 * whose pid is owner. Only the sampler reads workers; GIL and memory figures are per rank. */
struct target {
    int pid;
    int rank;
    int owner;
    char device[32];
};

#define ENGINE_MAX_NATIVE 16  /* ranks with native frames toggled on at once */
#define ENGINE_NATIVE_NAME 96 /* "OBJECT+0xOFFSET" of a native frame without a symbol */

#define ENGINE_MAX_UNREAD 32

/* A batch of record events a collector builds for one pass and hands over at once
 * (engine_emit_buf); the buffer is reused from pass to pass. Its events are packed, each
 * record_event_size bytes: a pass of 64 ranks x 8 threads is 512 runs, 16 KiB packed and
 * 270 KiB as whole events, which the sampler would write and the recorder read at every pass.
 * engine_evbuf_add hands out a whole staging event, packed at the next add or when the batch
 * is handed over or read (engine_evbuf_seal); readers walk it with engine_evbuf_next. */
struct engine_evbuf {
    unsigned char *buf;
    size_t len, cap; /* bytes */
    size_t n;        /* events, the staged one included */
    bool staged;
    struct record_event stage;
};

/* The collectors of this node, each the one producer of its queue (engine_queue.c). */
enum engine_qid {
    ENGINE_Q_DISCOVERY,
    ENGINE_Q_SAMPLER,
    ENGINE_Q_MEM,
    ENGINE_Q_GIL,
    ENGINE_Q_EXIT,
    ENGINE_NQ
};

/* The remote collector's batch: events of several hosts, each tagged with its link (the
 * index of the host), or a marker (ENGINE_RLINK_RESET: that host's agent is starting anew). */
#define ENGINE_RLINK_RESET 0x80000000u
struct engine_rbatch {
    struct record_event *ev;
    uint32_t *link;
    size_t n, cap;
};

/* What one collector handed over and the recorder (or the agent's writer) has not taken yet.
 * Its lock is held only to append or to swap buffers, never across I/O or a history write. */
struct engine_queue {
    pthread_mutex_t lock;
    struct engine_evbuf full;
};

/* One source's devices (engine_live.c). */
struct engine_devlist {
    struct smi_device *d;
    size_t n, cap;
};

struct engine {
    struct engine_opts o;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* broadcast on stop and on new targets */
    bool stop;
    int stop_fd;     /* eventfd, readable once stopping: polled by threads that block in I/O */
    bool discovered; /* the first discovery pass has published */
    struct history hist;
    /* This node's collectors as a record source (slot 0, the history's own clock): what they
     * find goes through the recorder as another host's agent's does. They hand their events
     * over through their queues (q); the recorder thread alone applies them to the history
     * (engine_queue.c), or, in an agent (engine_opts.wire), the agent's writer takes them
     * for the wire and nothing writes the history. */
    struct rsource local;
    struct engine_queue q[ENGINE_NQ];
    int wake_fd;              /* eventfd: a queue went from empty to full, or a view is wanted */
    bool rec_running;         /* the recorder thread runs (under view_lock) */
    bool view_want;           /* a reader waits for a new view (under view_lock) */
    pthread_cond_t view_cond; /* a view was published, or the recorder ended */
    /* Other hosts' streams (engine_remote.c): the remote collector hands their events over
     * through rq; the links (one per host, with each host's record source) live as long as
     * the engine, since the recorder applies what was handed over last after the remote
     * collector has ended. Under the engine lock: rl's sources (the recorder's,
     * written while it applies), nrl. */
    pthread_mutex_t rq_lock;
    struct engine_rbatch rq;
    struct rlink *rl;
    size_t nrl;
    struct rclaims rclaims;
    _Atomic unsigned long wake_fails; /* writes to wake_fd refused (a full counter wakes too) */
    struct rclaims local_claims;
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
    int sampler_threads;             /* threads the last sampling pass was split over */
    const char *reader, *reader_why; /* engine_stats.reader: static strings */
    struct engine_unread unread[ENGINE_MAX_UNREAD]; /* targets the sampler cannot read */
    size_t nunread;
    pthread_t th[8];
    int nth;
    uint64_t th_grace_ns[8]; /* how long engine_stop waits for each */
    int abandoned;           /* threads engine_stop left running (stuck): never freed then */
    /* Live figures and devices as the recorder applied them (engine_live.c), every source's:
     * the recorder thread's, written while it applies under the lock. */
    struct engine_rank_live *live;
    size_t nlive;
    struct engine_devlist *devs; /* by source slot: this node (0), then each host */
    size_t ndevlists;
    /* the mem thread's growth rows for the UI, under lock */
    int focus_pid;
    bool focus_reset;
    int growth_pid;
    struct engine_growth growth[16];
    size_t ngrowth;
    /* exit statuses (engine_exit.c), under lock */
    bool exit_started;   /* the exit thread has tried to subscribe */
    bool exit_listening; /* ... and the kernel accepted */
    char exit_err[160];  /* why statuses stay unknown, "" when listening */
    /* other nodes (engine_remote.c), under lock */
    struct engine_host *hosts; /* one per --hosts entry */
    size_t nhosts;
    uint64_t rpasses;                 /* the most sampling passes one agent made */
    uint64_t rstacks, rerrors, rlost; /* the agents' totals */
    /* native frames (engine_native.c), under lock: ranks the monitor toggled, the last error */
    int native_keys[ENGINE_MAX_NATIVE];
    size_t nnative;
    char native_err[512];
    int native_err_key;
    struct {
        int key;
        bool on;
    } rnative[ENGINE_MAX_NATIVE]; /* toggles for other hosts' ranks, for the remote thread */
    size_t nrnative;
    /* the view readers share (engine_view.c), under view_lock, taken before lock */
    pthread_mutex_t view_lock;
    struct engine_view *view;
    uint64_t steady_at; /* the last engine_acquire (under view_lock): e->view outlives builds */
    const struct engine_view *dead[4]; /* engine_release_later's, for the recorder (view_lock) */
    size_t ndead;
};

/* Live figures and devices (engine_live.c), on the recorder thread while it applies: the
 * parts of key's live record that m carries; source slot's device m (host: "" for this node). */
void engine_live_apply(struct engine *e, int key, const struct record_live *m);
/* A live record of key with every figure unknown; the parts m carries, set into v. */
void engine_live_init(struct engine_rank_live *l, int key);
void engine_live_merge(struct engine_rank_live *v, const struct record_live *m);
void engine_devs_apply(struct engine *e, int slot, const char *host, const struct record_device *m);
/* Applies a batch of this node's collectors (source 0) to the history, their live figures and
 * devices to the tables above; the recorder thread, engine lock held. */
void engine_local_apply_locked(struct engine *e, const struct engine_evbuf *b, uint64_t now);
/* Copies the live figures and devices into v: with no lock on the recorder thread (unlocked),
 * else under the engine lock. */
void engine_live_view(struct engine *e, struct engine_view *v, bool unlocked);
void engine_live_free(struct engine *e);

/* Hands n events of this node's collector q (source 0, times on the history's clock) to the
 * recorder: copied, so ev may be reused. Any lock but a queue's may be held. */
void engine_emit(struct engine *e, enum engine_qid q, const struct record_event *ev, size_t n);
/* The same for a collector's pass buffer: handed over whole when the recorder has taken the
 * last one (buffers are swapped, nothing copied), else appended; b is empty after. */
void engine_emit_buf(struct engine *e, enum engine_qid q, struct engine_evbuf *b);
/* Every event handed over and not taken yet, appended to out in queue order (the agent's
 * writer; no recorder runs there). */
void engine_take(struct engine *e, struct engine_evbuf *out);
/* Hands the remote collector's batch to the recorder (swapped or appended; b empty after). */
void engine_remote_emit(struct engine *e, struct engine_rbatch *b);
/* Applies a remote batch to the history (engine_rapply.c); engine lock held. */
void engine_remote_apply_locked(struct engine *e, const struct engine_rbatch *b, uint64_t now);
/* Frees the links and what their sources hold (engine_free). */
void engine_remote_free(struct engine *e);

/* Whether queue q (engine_rqueue_full: the remote collector's) holds ENGINE_QUEUE_MAX events
 * or more: its producer then skips its next pass (the sampler) or read (the remote
 * collector), so that a taker that falls behind bounds what waits for it. */
#define ENGINE_QUEUE_MAX 65536
bool engine_queue_full(struct engine *e, enum engine_qid q);
bool engine_rqueue_full(struct engine *e);

/* Wakes the recorder thread (a view is wanted). */
void engine_wake(struct engine *e);
void engine_queues_init(struct engine *e);
void engine_queues_fini(struct engine *e);
/* The recorder thread (started by engine_start unless engine_opts.wire), and what engine_stop
 * does once every collector is joined: applies what they handed over last. */
void *engine_recorder_main(void *arg);
void engine_recorder_drain(struct engine *e);
/* Builds and publishes a view on the recorder thread, unless a fresh one is published. */
void engine_view_publish(struct engine *e, bool unlocked_clone);

/* The sampler's read helpers (engine_pool.c). engine_pool_run calls fn(ctx, part, nparts)
 * once for every part, part 0 on the calling thread and the others on helper threads, and
 * returns when all are done; with fewer threads than asked for, nparts is what fn is told. */
#define ENGINE_POOL_MAX 4 /* sampling threads at most, the sampler included */
typedef void (*engine_pool_fn)(void *ctx, int part, int nparts);
struct engine_pool;
struct engine_pool *engine_pool_new(void);
void engine_pool_run(struct engine_pool *p, int nparts, engine_pool_fn fn, void *ctx);
void engine_pool_free(struct engine_pool *p);

/* Notes that pid cannot be read, and why (why NULL: it is read now); with the lock held. */
void engine_unread_locked(struct engine *e, int pid, const char *why);

/* Sleeps until abs_ns or stop; true when stopping. */
bool engine_wait(struct engine *e, uint64_t abs_ns);
/* The same for the sampler, in one system call a wait (ppoll on stop_fd). */
bool engine_sleep(struct engine *e, uint64_t abs_ns);
/* Returns once the first discovery has published its targets, or on stop. */
void engine_wait_discovered(struct engine *e);

void *engine_sampler_main(void *arg);

/* Drops the published view, so that the next engine_acquire builds one (engine_stop, once
 * every thread is joined: their last records are then in it; engine_free). */
void engine_view_expire(struct engine *e);

/* One thread of a rank sample as the history records it, kept apart from the reader's
 * borrowed sample (a native sample reads each thread again). */
struct engine_tview {
    uint64_t ident;
    int tid;
    char name[64]; /* "" unknown */
    int status;    /* 0, or why the stack was dropped (< 0), or ENGINE_TV_SKIPPED */
    bool gc;       /* its stack got the <gc> frame on top (engine_gc_stack): a merged one too */
    /* Where name was read from and its generation (pysample.names_gen); NULL when it came
     * from elsewhere, or was left unread ("": the name is as the thread was last defined). */
    const char *src;
    uint64_t src_gen;
};
/* engine_tview.status of a thread left out on purpose, not an error: with gil_only, a thread
 * that does not hold the GIL at that sample. */
#define ENGINE_TV_SKIPPED 1

/* A new event of type at the end of b (its payload not cleared: the caller sets it before
 * the next call on b). */
struct record_event *engine_evbuf_add(struct engine_evbuf *b, enum record_type type);
/* Packs the staged event, if any. */
void engine_evbuf_seal(struct engine_evbuf *b);
/* Appends a copy of ev. */
void engine_evbuf_push(struct engine_evbuf *b, const struct record_event *ev);
/* The event at byte *off of a sealed batch, *off moved past it; NULL at the end. Only its
 * type and its type's member may be read. */
const struct record_event *engine_evbuf_next(const struct engine_evbuf *b, size_t *off);
/* Empties b; its memory goes back when it grew past what a usual pass needs. */
void engine_evbuf_clear(struct engine_evbuf *b);
void engine_evbuf_free(struct engine_evbuf *b);

/* The sampler's frame and stack ids as source 0 of the recorder (engine_sintern.c): what it
 * sees is interned here, on the sampler thread with no lock, and a frame or stack met for
 * the first time appends its definition to the pass's events. Ids are dense from 0; once the
 * tables hold more than ENGINE_SINTERN_MAX bytes they are forgotten between two passes
 * (engine_sintern_trim, at most once a second below 8 times that) and numbered anew, with a
 * RECORD_FORGET to the recorder, so that they, and what the recorder keeps of them, stay
 * small beside the history however many stacks a long run shows, while a large set of
 * stacks in use is not defined again at every pass. */
#define ENGINE_SINTERN_MAX (1u << 20)
struct sintern_frame;
struct sintern_stack;
struct engine_sintern {
    struct sintern_frame *frames;
    struct sintern_stack *stacks;
    uint32_t nframes, cap_frames, nstacks, cap_stacks;
    uint32_t *fhash, *shash; /* open addressing: id + 1, 0 empty */
    size_t fslots, sslots;
    size_t bytes;      /* what the recorder holds for these ids, about */
    uint32_t *scratch; /* engine_sintern_stack's frame ids */
    uint32_t cap_scratch;
    uint64_t gen;     /* steps at each trim: ids kept from an older one are stale */
    uint64_t trim_at; /* the earliest next trim below 8 x ENGINE_SINTERN_MAX */
};

/* The id of the frame (fn, file, line, native); NULL strings are "". */
uint32_t engine_sintern_frame(struct engine_sintern *si, struct engine_evbuf *out, const char *fn,
                              const char *file, int line, bool native);
/* The id of the stack of n frame ids, outermost first. */
uint32_t engine_sintern_ids(struct engine_sintern *si, struct engine_evbuf *out,
                            const uint32_t *outer_first, uint32_t n);
/* The id of the stack of n frames, innermost first (as history_intern_stack takes them). */
uint32_t engine_sintern_stack(struct engine_sintern *si, struct engine_evbuf *out,
                              const struct hframe *inner_first, uint32_t n);
/* Forgets every id when the tables passed ENGINE_SINTERN_MAX (see above) and appends a
 * RECORD_FORGET to out, before anything defined anew; true when it did. Only between two
 * passes' events. */
bool engine_sintern_trim(struct engine_sintern *si, struct engine_evbuf *out, uint64_t now);
void engine_sintern_fini(struct engine_sintern *si);

/* A slot's native sampling state; owned by the sampler thread. */
struct native_ctx;
struct pyproc;
struct engine_native {
    struct native_ctx *ctx; /* open while native frames are wanted */
    uint64_t retry_at;      /* after a refusal (cannot trace) */
    uint64_t next_at;       /* next sample of a toggled rank (ENGINE_NATIVE_HZ) */
    struct hframe *scratch;
    char *names;
};

/* Turns key's native toggle on or off (the error said for it is cleared); lock held. */
void engine_native_toggle_locked(struct engine *e, int key, bool on);

/* Whether key's samples carry native frames (engine_opts.native, or toggled); lock held. */
bool engine_native_wanted_locked(const struct engine *e, int key);

/* Replaces ids[i] (the Python-only stacks already interned, as source-0 ids of si) by merged
 * stacks, thread by thread, reading each thread's Python stack again while it is stopped;
 * threads that cannot be unwound keep theirs. New frames and stacks go to out. On the sampler
 * thread; takes the lock only to say errors. */
void engine_native_sample(struct engine *e, struct engine_native *n, int key, int pid,
                          struct pyproc *py, const struct engine_tview *tv, uint32_t *ids,
                          size_t nthreads, uint64_t now, struct engine_sintern *si,
                          struct engine_evbuf *out);
void engine_native_close(struct engine_native *n);

/* The threads of pid without a Python thread state (those of tv[0..nthreads) left out), at
 * most max: each unwound natively through ctx (NULL: none) and interned (engine_natall.c).
 * Fills others[k] (ident ENGINE_NATALL_IDENT | tid, name its comm) and ids[k]; returns k. */
#define ENGINE_NATALL_IDENT (1ull << 63)
#define ENGINE_NATALL_MAX 64
size_t engine_natall_sample(struct native_ctx *ctx, int pid, const struct engine_tview *tv,
                            size_t nthreads, struct engine_tview *others, uint32_t *ids, size_t max,
                            struct engine_sintern *si, struct engine_evbuf *out);
void engine_native_fini(struct engine_native *n);

/* engine_set_native for a rank on another host: forwarded to its agent (engine_remote.c). */
int engine_remote_native(struct engine *e, int key, bool on, struct app_err *err);
/* Garbage-collection marks of the sampler (engine_gc.c). A probe per slot and reader (fini
 * it when the reader goes); engine_gc_probe returns 1 when the interpreter was collecting at
 * sample s, 0 not, -1 unknown (also kept in last). engine_gc_stack interns the stack of n frame ids
 * (outermost first) with the ENGINE_GC_FRAME frame on top, through the caller's buffer (*buf,
 * *cap). */
#define ENGINE_GC_FRAME "<gc>"
struct pysample;
struct engine_gcprobe {
    uint64_t addr; /* gc.collecting, watched by the slot's reader; 0 not found yet */
    uint64_t retry_at;
    int last;
};
int engine_gc_probe(struct engine_gcprobe *g, struct pyproc *py, const struct pysample *s);
void engine_gc_fini(struct engine_gcprobe *g);
uint32_t engine_gc_stack(struct engine_sintern *si, struct engine_evbuf *out,
                         const uint32_t *outer_first, uint32_t n, uint32_t **buf, uint32_t *cap);

void *engine_mem_main(void *arg);
/* engine_procwait.c: rank pid's main thread's state and syscall, as a live event in out. */
void engine_procwait_read(int pid, struct engine_evbuf *out);
void *engine_gil_main(void *arg);
void *engine_exit_main(void *arg);
void *engine_remote_main(void *arg);

#endif
