/* Python thread names, read from threading._active of another process. */
#ifndef RANKTOP_PYNAMES_H
#define RANKTOP_PYNAMES_H

#include <stddef.h>
#include <stdint.h>

#include "abi/pyabi.h"
#include "ranktop/status.h"
#include "ranktop/rmem.h"

/* Most threads one call reports; further entries of _active are ignored. */
#define PYNAMES_MAX_THREADS 4096

struct pyname {
    uint64_t ident; /* threading.get_ident() = pthread_t = tstate->thread_id */
    char *name;     /* Thread._name as UTF-8, owned by the array */
};

/* Reads threading._active of the interpreter at `interp` (remote address of its
 * PyInterpreterState) and returns one record per entry in *out (heap array of *n records,
 * free with pynames_free; *out is NULL when *n is 0). Borrows m and L; runs on the thread
 * that owns m. Every remote pointer is validated and every loop bounded, so a torn read
 * costs at most one failed call. Returns 0, APP_E_NOTFOUND when threading is not imported
 * (yet), APP_E_STALE on torn or implausible data (retry later), APP_E_VERSION for minors
 * whose descriptor has no names part, or an rmem status (APP_E_GONE, APP_E_PERM). */
int pynames_read(struct rmem *m, const struct py_layout *L, uint64_t interp, struct pyname **out,
                 size_t *n, struct app_err *err);

/* Frees an array returned by pynames_read; NULL is a no-op. */
void pynames_free(struct pyname *v, size_t n);

#endif
