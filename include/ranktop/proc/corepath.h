/* Where the kernel wrote a process's core: kernel.core_pattern expanded for one exit. */
#ifndef RANKTOP_COREPATH_H
#define RANKTOP_COREPATH_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_PROC)
#error "ranktop/proc/corepath.h belongs to collectors/proc/, a layer this one may not use"
#endif

#include <stddef.h>
#include <stdint.h>

#define COREPATH_SYSTEMD_TEXT "systemd-coredump (coredumpctl)"

/* What is known of the process that dumped. Empty strings and -1 are unknown; a pattern that
 * needs an unknown field cannot be expanded. */
struct corepath_info {
    int pid;             /* thread-group id, also used for %i / %I (the leader's thread) */
    long uid, gid;       /* -1 unknown */
    int signal;          /* the killing signal */
    int64_t time;        /* seconds since the epoch of the dump */
    uint64_t core_limit; /* RLIMIT_CORE's soft limit (%c), UINT64_MAX unlimited */
    const char *comm;    /* %e */
    const char *exe;     /* %E: the executable's path */
    const char *host;    /* %h */
    const char *cwd;     /* the process's working directory, for a relative pattern */
    int core_uses_pid;   /* kernel.core_uses_pid */
};

enum corepath_kind {
    COREPATH_UNKNOWN = 0, /* a pipe to another helper, or a field that is not known */
    COREPATH_FILE = 1,    /* out holds the file's path */
    COREPATH_SYSTEMD = 2, /* out holds COREPATH_SYSTEMD_TEXT */
};

/* Pure: expands pattern (plen bytes, the text of /proc/sys/kernel/core_pattern, a trailing
 * newline ignored) as the kernel does for the process described by in, into out (len bytes,
 * always terminated). A relative pattern is joined to in->cwd when that is known and stays
 * relative otherwise. Returns an enum corepath_kind; out is "" for COREPATH_UNKNOWN. */
int corepath_expand(const char *pattern, size_t plen, const struct corepath_info *in, char *out,
                    size_t len);

/* Where the core of pid, which the kernel just reported as dumped on signal sig, went: reads
 * core_pattern, core_uses_pid and what /proc/PID still shows (its name, ids, working directory
 * and executable; an exited process may already be gone). Returns as corepath_expand. */
int corepath_locate(int pid, int sig, char *out, size_t len);

#endif
