/* Safe, bounded renderings of Python objects read from another process (pyrepr.c), for the
 * locals reader (pylocals.c). */
#ifndef RANKTOP_PYREPR_H
#define RANKTOP_PYREPR_H

#include <stdbool.h>
#include <stdint.h>

#include "abi/pyabi.h"
#include "pynames.h"
#include "ranktop/proc/rmem.h"

/* Longest rendering, in bytes, before it is cut with "...". */
#define PYREPR_MAX 240

struct pyrepr {
    struct rmem *m;
    const struct py_layout *L;
    uint32_t tuple_items; /* PyTupleObject.ob_item: 24, 32 from 3.14 (the cached hash) */
    struct pynames_walk nw;
    bool nw_ok;      /* dict entries can be read (the names part of the layout is on) */
    uint64_t interp; /* the interpreter of the frames read: where torch.__version__ is looked up */
    bool torch_checked, torch_ok; /* whether the target's torch version was checked, is known */
    char torch_version[32];
};

void pyrepr_init(struct pyrepr *r, struct rmem *m, const struct py_layout *L);

/* The object at obj as its type name and a bounded rendering (heap strings, caller frees).
 * Never fails: an object that cannot be read whole renders as "<unreadable: why>" with type
 * "?". Returns 0, or the status behind an unreadable rendering. */
int pyrepr_value(struct pyrepr *r, uint64_t obj, char **type, char **repr);

/* The type name of the object at obj into name (NUL-terminated, at most len - 1 bytes) and its
 * tp_flags; 0 or a negative status. */
int pyrepr_type(struct pyrepr *r, uint64_t obj, char *name, size_t len, uint64_t *flags);

#endif
