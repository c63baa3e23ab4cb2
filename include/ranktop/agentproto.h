/* The agent stream: what `ranktop agent` writes on stdout and the head reads, one JSON object
 * per line. The encoder lives with the engine (it reads the history); this contract holds the
 * message shapes, the limits and the head's parser, which takes one line and does no I/O.
 *
 * Version 1. The first line is a hello (protocol major and minor, ranktop version, host, boot
 * id, the agent's clocks). Then, per tick, only what changed: a frame or a stack is defined
 * once with an id and referred to by id afterwards; a thread is defined once and its runs are
 * sent as "this thread showed stack S from time T on"; a tick line says every live thread
 * still showed its stack at that time. Figures (counters, GIL, devices) come at their own
 * rates. A head refuses another major and ignores fields and message types it does not know.
 * Every line is shorter than AGENTPROTO_LINE_MAX bytes with its newline, because srun forwards
 * output in 1 KiB messages and splits longer lines: a stack too deep for one line is sent in
 * chunks. Agent output is untrusted: the parser bounds and validates every field. */
#ifndef RANKTOP_AGENTPROTO_H
#define RANKTOP_AGENTPROTO_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_REMOTE)
#error "ranktop/agentproto.h belongs to collectors/remote/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/status.h"

#define AGENTPROTO_MAJOR 1
#define AGENTPROTO_MINOR 0
#define AGENTPROTO_LINE_MAX 1024  /* bytes of a line with its newline, exclusive */
#define AGENTPROTO_ID_MAX 1048576 /* frame, stack and thread ids are below this */
#define AGENTPROTO_CHUNK 60       /* frame ids per stack line */
#define AGENTPROTO_SHARES 16      /* GIL holder shares per rank */
#define AGENTPROTO_TEXT 256       /* bytes kept of a function, file or error text */

enum agentproto_type {
    AGENTPROTO_UNKNOWN = 0, /* a type this head does not know: ignored */
    AGENTPROTO_HELLO,       /* "hello" */
    AGENTPROTO_FRAME,       /* "f": a frame definition */
    AGENTPROTO_STACK,       /* "s": a stack definition, or one chunk of it */
    AGENTPROTO_RANK,        /* "r": a rank and its identity, on change */
    AGENTPROTO_THREAD,      /* "th": a thread definition, or its new name */
    AGENTPROTO_RUN,         /* "o": a thread's stack from time ts on */
    AGENTPROTO_GONE,        /* "g": a thread ended */
    AGENTPROTO_TICK,        /* "k": every live thread still shows its stack at ts */
    AGENTPROTO_COUNTER,     /* "c": one point of a counter series */
    AGENTPROTO_LIVE,        /* "l": a rank's live GIL and device-memory figures */
    AGENTPROTO_DEVICE,      /* "d": a GPU or NPU and its counters */
    AGENTPROTO_PONG,        /* "pong": the answer to a head's ping */
    AGENTPROTO_ERROR,       /* "err": the agent's current error lines (discovery, attach) */
    AGENTPROTO_BYE,         /* "bye": the agent is leaving, and why */
};

struct agentproto_hello {
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

struct agentproto_frame {
    uint32_t id;
    char function[AGENTPROTO_TEXT];
    char file[AGENTPROTO_TEXT];
    int line;
    bool native; /* "nat": true: a native frame (agent --native), file is the object */
};

/* A stack with n frames, outermost first; frames[0..nchunk) are this line's part of them,
 * starting at frame `at` (0 on the first line of a stack; chunks follow in order). */
struct agentproto_stack {
    uint32_t id;
    uint32_t n, at, nchunk;
    uint32_t frames[AGENTPROTO_CHUNK];
};

struct agentproto_rank {
    int pid;
    int rank, local_rank, world_size; /* -1 unknown */
    char device[32];
    char python[24];
    bool exited;
    int exit_code, exit_signal; /* -1 / 0 unknown */
    int64_t ts;                 /* agent clock of the exit, when exited */
};

struct agentproto_thread {
    uint32_t id;
    int pid;        /* the rank's pid */
    int worker;     /* 0, or the pid of the rank's worker process it lives in */
    uint64_t ident; /* Python thread ident */
    int tid;
    bool main;
    char name[64];
};

struct agentproto_run {
    uint32_t thread;
    int64_t stack; /* -1: no stack (gone, or unreadable) */
    int64_t ts;
};

struct agentproto_counter {
    int pid; /* 0: node-wide (devices) */
    int id;  /* enum series_id of the agent's build; the head checks the range */
    char name[48];
    double v;
    int64_t ts;
};

struct agentproto_live {
    int pid;
    int64_t dev_mem_mb;
    double gil_busy_pct, gil_switches, gil_waiters;
    size_t nshares;
    struct {
        uint64_t ident;
        double pct;
    } shares[AGENTPROTO_SHARES];
};

struct agentproto_device {
    bool npu;
    int index, chip;
    char name[96];
    int64_t util_pct, mem_used_mb, mem_total_mb, temp_c; /* -1 unknown */
    double power_w;                                      /* < 0 unknown */
};

struct agentproto_msg {
    enum agentproto_type type;
    union {
        struct agentproto_hello hello;
        struct agentproto_frame frame;
        struct agentproto_stack stack;
        struct agentproto_rank rank;
        struct agentproto_thread thread;
        struct agentproto_run run;
        struct agentproto_counter counter;
        struct agentproto_live live;
        struct agentproto_device device;
        struct {
            uint64_t seq;
            int64_t ts;
            /* the agent's totals so far: sampling passes, thread stacks, errors, stacks lost */
            uint64_t passes, stacks, errors, lost;
        } tick;
        struct {
            int64_t head_ns, agent_ns;
        } pong;
        char text[AGENTPROTO_TEXT]; /* ERROR, BYE */
    } u;
};

/* Parses one line (without its newline). Returns 0 with *m filled, or APP_E_PARSE with the
 * reason in err: not JSON, not an object, no type, a field missing, of the wrong type or out
 * of range. A message of an unknown type is 0 with m->type AGENTPROTO_UNKNOWN. */
int agentproto_parse(const char *line, size_t len, struct agentproto_msg *m, struct app_err *err);

/* Splits a byte stream into lines. Bytes go in as they arrive; complete lines come out
 * without their newline (a trailing '\r' dropped). A line longer than max is discarded whole
 * and counted, and reading resumes at the next newline. */
struct agentproto_lines {
    char *buf;
    size_t off, len, cap, max; /* unread bytes are buf[off..len) */
    size_t pending;            /* bytes of the line last returned, consumed on the next call */
    bool skipping;             /* inside an oversized line */
    uint64_t oversized;        /* lines discarded for their length */
};

void agentproto_lines_init(struct agentproto_lines *l, size_t max);
void agentproto_lines_fini(struct agentproto_lines *l);
/* Appends n bytes. */
void agentproto_lines_feed(struct agentproto_lines *l, const char *data, size_t n);
/* The next complete line: returns its length and points *line at it (valid until the next
 * feed or next call), or -1 when no complete line is buffered. */
long agentproto_lines_next(struct agentproto_lines *l, const char **line);

/* Formats text as a JSON string (quotes included) into buf, escaping as RFC 8259 requires and
 * cutting the text (never an escape or a UTF-8 sequence) so that the result fits in len - 1
 * bytes. Returns the bytes written (without the NUL). */
size_t agentproto_json_str(char *buf, size_t len, const char *text);

#endif
