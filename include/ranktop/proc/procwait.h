/* What the kernel says one thread is doing: its state letter, the syscall it sleeps in and the
 * kernel function it waits in (/proc/PID/task/TID/stat, syscall, wchan), for the kind of wait
 * (ranktop/model/waits.h). Parsers take a buffer and do no I/O; procwait_read reads the three
 * files, each bounded to a small buffer. Any thread may call any of these. */
#ifndef RANKTOP_PROCWAIT_H
#define RANKTOP_PROCWAIT_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_PROC)
#error "ranktop/proc/procwait.h belongs to collectors/proc/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>

#include "ranktop/base/status.h"

struct procwait {
    char state;     /* R S D T t Z X I ...; 0 unknown */
    int syscall;    /* the syscall it is blocked in; -1 none (running, not in one) or unknown */
    char wchan[64]; /* the kernel function it sleeps in; "" unknown or none */
    /* The syscall is a select or poll over no descriptor at all: a plain sleep, not I/O
     * (time.sleep before Python 3.11 is a select(0, NULL, NULL, NULL, timeout)). */
    bool no_fds;
};

/* The state letter of a stat line ("TID (comm) S ..."; comm may hold ')' and spaces). Returns
 * 0 and *state, or APP_E_PARSE. */
int procwait_parse_stat(const char *buf, size_t len, char *state);

/* A syscall file: "running" (-1), "-1 SP PC" (blocked, not in a syscall: -1) or
 * "NR ARG1..ARG6 SP PC" (NR). Returns 0 and *nr, or APP_E_PARSE; *no_fds (may be NULL) tells
 * a select or poll over no descriptor (struct procwait). */
int procwait_parse_syscall(const char *buf, size_t len, int *nr, bool *no_fds);

/* A wchan file: the symbol, or "0" / "" for none (out ""). Never fails: a name that is not a
 * plain symbol is left out. */
void procwait_parse_wchan(const char *buf, size_t len, char *out, size_t outlen);

/* Reads thread tid of process pid. The state is required: APP_E_GONE when the thread is gone,
 * APP_E_PERM, APP_E_IO, APP_E_PARSE. The syscall and wchan are best effort (reading them needs
 * the right to ptrace the process; without it they stay unknown). */
int procwait_read(int pid, int tid, struct procwait *out, struct app_err *err);

#endif
