/* Status codes and the caller-provided error buffer shared by every module.
 *
 * Functions that can fail return 0 on success or a negative enum app_status, and write one
 * human-readable line into a struct app_err the caller owns. Nothing here is global state, so
 * any thread may use it. */
#ifndef RANKTOP_STATUS_H
#define RANKTOP_STATUS_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_BASE)
#error "ranktop/base/status.h belongs to src/base/, a layer this one may not use"
#endif

#include <stdarg.h>

enum app_status {
    APP_OK = 0,
    APP_E_NOTFOUND = -1,   /* no such process, file or symbol */
    APP_E_PERM = -2,       /* permission denied (ptrace rules) */
    APP_E_TIMEOUT = -3,    /* an external tool missed its deadline */
    APP_E_PARSE = -4,      /* malformed input */
    APP_E_GONE = -5,       /* the process exited while we looked at it */
    APP_E_STALE = -6,      /* a remote pointer went stale (torn read) */
    APP_E_IO = -7,         /* other I/O failure */
    APP_E_VERSION = -8,    /* unsupported Python version */
    APP_E_NOTPY = -9,      /* not a Python process */
    APP_E_STARTING = -10,  /* interpreter not initialised yet */
    APP_E_EXITING = -11,   /* interpreter shutting down */
    APP_E_ARCH = -12,      /* foreign architecture or ELF class */
    APP_E_USAGE = -13,     /* bad command-line input */
    APP_E_LIMIT = -14,     /* a bound was hit (too many frames, threads...) */
    APP_E_CANCELLED = -15, /* stopped on request (the engine is stopping) */
    APP_E_NOTREG = -16,    /* a path that must be a regular file is a FIFO, device, directory... */
};

struct app_err {
    int code;
    char msg[512];
};

/* Fills err (when not NULL) with code and a formatted message; returns code so callers can
 * write `return app_err_set(err, APP_E_IO, "...")`. */
int app_err_set(struct app_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Short English name of a status ("permission denied"); never NULL. */
const char *app_status_str(int code);

#endif
