/* Files a target process controls: objects it maps, paths under its root (/proc/PID/root),
 * debug files found for its objects. Whoever controls a target (a container's root, say) can
 * put a FIFO, a device, a symbolic link or a huge sparse file where ranktop expects an ELF
 * object; every such file is opened here, so none can block ranktop, take its terminal or
 * make it read without bound. */
#ifndef RANKTOP_TFILE_H
#define RANKTOP_TFILE_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_PROC)
#error "ranktop/proc/tfile.h belongs to collectors/proc/, a layer this one may not use"
#endif

#include <stddef.h>
#include <stdint.h>

#include "ranktop/base/status.h"

#define TFILE_NOFOLLOW 1u /* the last component must not be a symbolic link */

/* Opens root + path for reading: O_NONBLOCK (a FIFO or device never waits), O_NOCTTY,
 * O_CLOEXEC, and the open descriptor must be a regular file of at most max bytes. root is
 * NULL (path is opened as it is: /proc/PID/exe, /proc/PID/map_files/...) or a directory such
 * as /proc/PID/root that path, absolute, is resolved inside: its symbolic links stay in that
 * root (openat2 RESOLVE_IN_ROOT, no magic links; a kernel without openat2 opens root + path).
 * Returns the descriptor (*size its length), or a negative status with err saying why:
 * APP_E_NOTREG (not a regular file), APP_E_LIMIT (over max), APP_E_NOTFOUND, APP_E_PERM,
 * APP_E_IO. */
int tfile_open(const char *root, const char *path, unsigned flags, uint64_t max, uint64_t *size,
               struct app_err *err);

/* A read-only private mapping of a file tfile_open accepted (its whole length). */
struct tfile_map {
    const uint8_t *p;
    size_t len;
};

/* tfile_open, then maps the file; 0 or the negative status of tfile_open (APP_E_IO when the
 * file is empty or cannot be mapped). */
int tfile_map(const char *root, const char *path, unsigned flags, uint64_t max, struct tfile_map *m,
              struct app_err *err);
void tfile_unmap(struct tfile_map *m);

/* Runs fn(arg) on a mapping that whoever controls the file may shrink meanwhile: a read of a
 * page that is no longer backed raises SIGBUS, which would end ranktop. Here it ends fn at
 * once instead, and this returns APP_E_IO with err saying the file changed under the read;
 * else fn's return value. fn must keep what it builds reachable from arg (it may be cut short
 * anywhere) and take no lock. Any thread; fn may call tfile_guard for another mapping. A SIGBUS
 * that is no such read goes to the handler there was before (the crash report, or the default). */
int tfile_guard(const struct tfile_map *m, int (*fn)(void *arg), void *arg, const char *path,
                struct app_err *err);

#endif
