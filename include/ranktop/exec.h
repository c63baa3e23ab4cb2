/* Running an external tool with a deadline. */
#ifndef RANKTOP_EXEC_H
#define RANKTOP_EXEC_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_DEVICES)
#error "ranktop/exec.h belongs to collectors/devices/, a layer this one may not use"
#endif

#include <stddef.h>

#include "ranktop/status.h"

struct exec_result {
    char *out; /* stdout, NUL-terminated (heap; may hold NULs from the tool) */
    size_t out_len;
    char *err; /* stderr, NUL-terminated (heap) */
    size_t err_len;
    int status; /* exit code, or 128 + signal */
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

void exec_result_fini(struct exec_result *res);

/* Makes exec_run on the calling thread give up at once (kill the tool, start no other) while
 * fd is readable, e.g. an eventfd the thread's owner writes to stop it; fd is only polled,
 * never read. -1 removes it. The setting belongs to the calling thread only. */
void exec_cancel_on(int fd);

#endif
