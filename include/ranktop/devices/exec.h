/* Running an external tool with a deadline. */
#ifndef RANKTOP_EXEC_H
#define RANKTOP_EXEC_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_DEVICES)
#error "ranktop/devices/exec.h belongs to collectors/devices/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/base/status.h"

struct exec_result {
    char *out; /* stdout, NUL-terminated (heap; may hold NULs from the tool) */
    size_t out_len;
    char *err; /* stderr, NUL-terminated (heap) */
    size_t err_len;
    int status;      /* exit code, or 128 + signal */
    uint64_t fed_ns; /* exec_run_fed: when the answer was all written (clock_mono_ns), else 0 */
};

/* Runs argv[0] (searched on PATH when it has no '/') with stdin from /dev/null, reading stdout
 * and stderr until EOF or until timeout_ms passes; then kills its process group and reaps it.
 * Output beyond 16 MiB is dropped. Returns 0 (whatever the exit status) with *res filled, or
 * APP_E_NOTFOUND (no such program), APP_E_TIMEOUT (killed at the deadline; output so far in
 * *res), APP_E_CANCELLED (the thread's cancel descriptor became readable: the tool was killed at
 * once or never started), APP_E_IO. Callable from any thread; never blocks longer than the
 * deadline, nor more than about a millisecond after a cancel. */
int exec_run(const char *const argv[], int timeout_ms, struct exec_result *res,
             struct app_err *err);

/* A short conversation over the tool's stdin (exec_run_fed): answer is called with all the
 * tool wrote on stdout so far, each time more arrives, until it returns true; by then it may
 * have set up to two pieces of bytes in *send (borrowed; they must live until exec_run_fed
 * returns), which are written to the tool's stdin without blocking the reading, after which
 * the stdin is closed. Before that the tool's stdin stays open and empty. */
struct exec_send {
    const char *p[2];
    size_t n[2];
};
struct exec_feed {
    bool (*answer)(void *ctx, const char *out, size_t len, struct exec_send *send);
    void *ctx;
};

/* exec_run with stdin from a pipe that feed answers into (NULL feed: exec_run). A tool that
 * stops reading makes the unwritten rest moot: the deadline still holds. SIGPIPE must be
 * ignored by the caller's process. */
int exec_run_fed(const char *const argv[], int timeout_ms, const struct exec_feed *feed,
                 struct exec_result *res, struct app_err *err);

void exec_result_fini(struct exec_result *res);

/* Makes exec_run on the calling thread give up at once (kill the tool, start no other) while
 * fd is readable, e.g. an eventfd the thread's owner writes to stop it; fd is only polled,
 * never read. -1 removes it. The setting belongs to the calling thread only. */
void exec_cancel_on(int fd);

#endif
