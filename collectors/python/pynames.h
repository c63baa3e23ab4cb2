/* Python thread names, read from threading._active of another process. */
#ifndef RANKTOP_PYNAMES_H
#define RANKTOP_PYNAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "abi/pyabi.h"
#include "ranktop/base/status.h"
#include "ranktop/proc/rmem.h"

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

/* The object walk behind pynames_read, for other readers of Python objects (pyasync.c): dict
 * lookups by str key, instance attributes, ints. Same rules: every pointer validated, every
 * loop bounded, APP_E_STALE for torn data, APP_E_NOTFOUND only for a key really missing. The
 * first dict a walk opens must be a real dict (the modules dict): it teaches PyDict_Type. */
#define PYNAMES_ATTRS_MAX 8
#define PYNAMES_MEMO 4

/* Where each name of one attribute list (pynames_attrs) sits in one shared keys object, as of
 * its nentries: entries of a keys object are only ever appended, so a name found stays at its
 * index, and one not found is still absent while nentries has not moved. */
struct pynames_memo {
    uint64_t keys, nentries;
    const char *const *attrs;
    size_t ix[PYNAMES_ATTRS_MAX]; /* SIZE_MAX: absent */
};

struct pynames_walk {
    struct rmem *m;
    const struct py_layout *L;
    const struct py_names_offsets *N; /* &L->names */
    uint64_t dict_type; /* ob_type of the modules dict, i.e. &PyDict_Type in the target */
    const char *attr;   /* the instance attribute names_locate looks up ("_name") */
    /* pynames_attrs' memo: good for one read of the target (a keys object freed and another
     * made at its address would mislead it), so whoever starts a new read clears nmemo. */
    struct pynames_memo memo[PYNAMES_MEMO];
    size_t nmemo;
};

/* Sets up w; APP_E_VERSION when the layout has no object part. */
int pynames_walk_init(struct pynames_walk *w, struct rmem *m, const struct py_layout *L,
                      struct app_err *err);
/* sys.modules[module].name (both ASCII, at most 24 characters) of the interpreter at interp. */
int pynames_module_get(struct pynames_walk *w, uint64_t interp, const char *module,
                       const char *name, uint64_t *val);
/* The instance attribute attr (ASCII, <= 24 characters) of the object at obj, whose type must
 * be a heap type (a Python class). */
int pynames_attr(struct pynames_walk *w, uint64_t obj, const char *attr, uint64_t *val);
/* The instance attributes attrs[0..n) (n <= PYNAMES_ATTRS_MAX, each as for pynames_attr) of the
 * object at obj into vals, 0 for one the object does not have: the object, its type and its
 * attribute storage are read once for all of them, and where the class's shared keys hold
 * them, their places are remembered (w->memo, keyed by the keys object and the attrs array,
 * which must be a static array), so that the next object of the class costs a read of its
 * values. */
int pynames_attrs(struct pynames_walk *w, uint64_t obj, const char *const *attrs, size_t n,
                  uint64_t *vals);
/* The live (key, value) pairs of the combined dict at dict, at most max; with recheck, checks
 * afterwards that the dict did not change meanwhile (any mutation, even of another entry, is
 * then APP_E_STALE); without, each pair is as some moment of the read left it and the caller
 * validates what the values point to. */
int pynames_dict_items(struct pynames_walk *w, uint64_t dict, uint64_t *keys, uint64_t *vals,
                       size_t max, size_t *n, bool recheck);
/* A non-negative int object below 2^64 (at most three 30-bit digits, the last one small). */
int pynames_long(struct pynames_walk *w, uint64_t obj, uint64_t *val);

#endif
