/* Record events: the vocabulary in which a collector tells the model what it saw. A source (a
 * host's agent, or a collector of this node) defines each frame, stack and thread once with an
 * id of its own and refers to it by id afterwards; a thread's runs are "this thread showed stack
 * S from time T on"; a tick says every live thread still showed its stack at T; counters, live
 * figures and devices come at their own rates. Times are the source's clock (its monotonic
 * nanoseconds); the recorder (ranktop/model/recorder.h) maps ids and times onto the history's.
 *
 * The agent stream (ranktop/remote/agentproto.h) is these events, one JSON object a line: its
 * parser fills a struct record_event and the head applies it. Events from another node are
 * untrusted: the parser bounds every field, and the recorder checks every reference and every time.
 */
#ifndef RANKTOP_RECORD_H
#define RANKTOP_RECORD_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_MODEL)
#error "ranktop/model/record.h belongs to src/model/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RECORD_ID_MAX 1048576 /* frame, stack and thread ids are below this */
#define RECORD_CHUNK 60       /* frame ids per stack event */
#define RECORD_SHARES 16      /* GIL holder shares per rank */
#define RECORD_TEXT 256       /* bytes kept of a function, file or error text */

enum record_type {
    RECORD_UNKNOWN = 0, /* a type this head does not know: ignored */
    RECORD_HELLO,       /* "hello" */
    RECORD_FRAME,       /* "f": a frame definition */
    RECORD_STACK,       /* "s": a stack definition, or one chunk of it */
    RECORD_RANK,        /* "r": a rank and its identity, on change */
    RECORD_THREAD,      /* "th": a thread definition, or its new name */
    RECORD_RUN,         /* "o": a thread's stack from time ts on */
    RECORD_GONE,        /* "g": a thread ended */
    RECORD_TICK,        /* "k": every live thread still shows its stack at ts */
    RECORD_COUNTER,     /* "c": one point of a counter series */
    RECORD_LIVE,        /* "l": a part of a rank's live figures (GIL, device memory, wait) */
    RECORD_DEVICE,      /* "d": a GPU or NPU and its counters */
    RECORD_PONG,        /* "pong": the answer to a head's ping */
    RECORD_ERROR,       /* "err": the agent's current error lines (discovery, attach) */
    RECORD_BYE,         /* "bye": the agent is leaving, and why */
    RECORD_EXIT,        /* "x": how a process ended (the exit collector) */
    RECORD_FORGET,      /* "fg": the source forgets every frame and stack id it defined, and
                         * may define them anew (the sampler, when its tables grow too big) */
    RECORD_TASKS,       /* a rank's asyncio task read: live tasks, those without a lane, and
                         * the lane cap (this node's sampler; agents read no tasks: no wire
                         * form) */
};

struct record_hello {
    int major, minor;
    char version[32];
    char host[64];
    char node[64]; /* the scheduler's name for the node (SLURMD_NODENAME), "" outside one */
    char boot_id[40];
    int pid;
    int64_t mono_ns; /* the agent's CLOCK_MONOTONIC when it wrote the line */
    int64_t wall_us; /* its wall clock then */
    double rate_hz;
};

struct record_frame {
    uint32_t id;
    char function[RECORD_TEXT];
    char file[RECORD_TEXT];
    int line;
    bool native; /* "nat": true: a native frame (agent --native), file is the object */
};

/* A stack with n frames, outermost first; frames[0..nchunk) are this line's part of them,
 * starting at frame `at` (0 on the first line of a stack; chunks follow in order). */
struct record_stack {
    uint32_t id;
    uint32_t n, at, nchunk;
    uint32_t frames[RECORD_CHUNK];
};

struct record_rank {
    int pid;
    int rank, local_rank, world_size; /* -1 unknown */
    char device[32];
    char python[24];
    bool exited;
    int exit_code, exit_signal; /* -1 / 0 unknown */
    int64_t ts;                 /* agent clock of the exit, when exited */
};

struct record_thread {
    uint32_t id;
    int pid;        /* the rank's pid */
    int worker;     /* 0, or the pid of the rank's worker process it lives in */
    uint64_t ident; /* Python thread ident; for a task lane, the ident of the thread running
                     * its loop */
    int tid;
    bool main;
    char name[64]; /* for a task lane, the task's name */
    /* An asyncio task's lane (a pseudo-thread whose runs are the task's await chains): the
     * task object's address. Only this node's sampler defines lanes (no wire form). */
    bool task;
    uint64_t task_addr;
};

struct record_run {
    uint32_t thread;
    int64_t stack; /* -1: no stack (gone, or unreadable) */
    int64_t ts;
};

struct record_counter {
    int pid; /* 0: node-wide (devices) */
    int id;  /* enum series_id of the agent's build; the head checks the range */
    char name[48];
    double v;
    int64_t ts;
};

/* The parts of a rank's live figures (record_live.set): each collector sends its own part,
 * and the recorder keeps the others as they were. A wire line ("l") carries DEVMEM and GIL,
 * and GC when it has "gc"; the other parts are this node's only (no wire form). */
enum record_live_part {
    RECORD_LIVE_DEVMEM = 1u << 0,  /* dev_mem_mb (discovery) */
    RECORD_LIVE_GIL = 1u << 1,     /* gil_busy_pct, gil_switches, gil_waiters, shares (GIL) */
    RECORD_LIVE_GC = 1u << 2,      /* gc_pct, in_gc (GIL) */
    RECORD_LIVE_WAIT = 1u << 3,    /* state, syscall, no_fds (memory thread) */
    RECORD_LIVE_STOPPED = 1u << 4, /* stopped (sampler) */
};

struct record_live {
    int pid;
    int64_t dev_mem_mb;
    double gil_busy_pct, gil_switches, gil_waiters;
    size_t nshares;
    struct {
        uint64_t ident;
        double pct;
    } shares[RECORD_SHARES];
    double gc_pct; /* GIL probes inside a garbage collection; -1 unknown (an older agent) */
    uint32_t set;  /* enum record_live_part: what this event carries */
    int in_gc;     /* collecting most of the last second: 1, 0, -1 unknown */
    char state;    /* the main thread's /proc state letter, 0 unknown */
    int syscall;   /* the system call it sleeps in, -1 none or unknown */
    bool no_fds;   /* that call is a select or poll over no descriptor (a sleep) */
    bool stopped;  /* every thread stopped (SIGSTOP, a debugger) */
};

struct record_device {
    bool npu;
    int index, chip;
    char name[96];
    int64_t util_pct, mem_used_mb, mem_total_mb, temp_c; /* -1 unknown */
    double power_w;                                      /* < 0 unknown */
    /* This node's discovery sends its whole device list each pass: the list's first device
     * has `first` set, and the source's devices before it are dropped; a pass that found no
     * device sends one event with `first` and `none`. The wire has neither: a host's devices
     * are updated one at a time, and kept. */
    bool first, none;
};

/* How a process of the source ended: its exit code, or the signal that killed it. It does not
 * say the rank exited (the sampler does, when its reads fail): the two come in either order. */
struct record_exit {
    int pid;
    int code;   /* exit code, or -1: killed by a signal */
    int signal; /* the killing signal, or 0: a normal exit */
    /* where its core went: a file's path, "systemd-coredump (coredumpctl)", or "": no core
     * dumped, or a place that cannot be known (another pipe helper) */
    char core[RECORD_TEXT];
};

/* One asyncio task read of a rank (RECORD_TASKS): its live tasks (SERIES_TASKS; -1: the
 * reads were turned off, the lanes ended), those left without a lane, and the per-rank lane
 * cap, beyond which the recorder folds ended lanes away. */
struct record_tasks {
    int pid;
    int64_t live;
    uint32_t unlaned;
    uint32_t cap;
    int64_t ts;
};

struct record_tick {
    uint64_t seq;
    int64_t ts;
    /* the source's totals so far: sampling passes, thread stacks, errors, stacks lost */
    uint64_t passes, stacks, errors, lost;
};

/* The answer to a ping: the head's clock it carried, the source's clock when it answered. */
struct record_pong {
    int64_t head_ns, agent_ns;
};

struct record_event {
    enum record_type type;
    union {
        struct record_hello hello;
        struct record_frame frame;
        struct record_stack stack;
        struct record_rank rank;
        struct record_thread thread;
        struct record_run run;
        struct record_counter counter;
        struct record_live live;
        struct record_device device;
        struct record_exit exit;
        struct record_tasks tasks;
        struct record_tick tick;
        struct record_pong pong;
        char text[RECORD_TEXT]; /* ERROR, BYE */
    } u;
};

/* The bytes of an event of type t up to the end of its member, rounded up to the event's
 * alignment: what a packed batch keeps of it (a run is 32 bytes of a 536-byte event). Reading
 * such an event touches its type and that member only. */
static inline size_t record_event_size(enum record_type t)
{
    size_t m;

    switch (t) {
    case RECORD_HELLO:
        m = sizeof(struct record_hello);
        break;
    case RECORD_FRAME:
        m = sizeof(struct record_frame);
        break;
    case RECORD_STACK:
        m = sizeof(struct record_stack);
        break;
    case RECORD_RANK:
        m = sizeof(struct record_rank);
        break;
    case RECORD_THREAD:
        m = sizeof(struct record_thread);
        break;
    case RECORD_RUN:
    case RECORD_GONE:
        m = sizeof(struct record_run);
        break;
    case RECORD_TICK:
        m = sizeof(struct record_tick);
        break;
    case RECORD_COUNTER:
        m = sizeof(struct record_counter);
        break;
    case RECORD_LIVE:
        m = sizeof(struct record_live);
        break;
    case RECORD_DEVICE:
        m = sizeof(struct record_device);
        break;
    case RECORD_PONG:
        m = sizeof(struct record_pong);
        break;
    case RECORD_EXIT:
        m = sizeof(struct record_exit);
        break;
    case RECORD_TASKS:
        m = sizeof(struct record_tasks);
        break;
    case RECORD_ERROR:
    case RECORD_BYE:
        m = RECORD_TEXT;
        break;
    case RECORD_FORGET:
    case RECORD_UNKNOWN:
        m = 0;
        break;
    default:
        return sizeof(struct record_event);
    }
    m += offsetof(struct record_event, u);
    return (m + _Alignof(struct record_event) - 1) & ~(_Alignof(struct record_event) - 1);
}

/* A counter event: point (ts, v) of series id (enum series_id) of the rank with pid. */
static inline struct record_event record_counter_event(int id, int pid, int64_t ts, double v)
{
    struct record_event m = {.type = RECORD_COUNTER};

    m.u.counter.id = id;
    m.u.counter.pid = pid;
    m.u.counter.ts = ts;
    m.u.counter.v = v;
    return m;
}

#endif
