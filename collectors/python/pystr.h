/* Reading Python str and bytes objects out of another process. */
#ifndef RANKTOP_PYSTR_H
#define RANKTOP_PYSTR_H

#include <stddef.h>
#include <stdint.h>

#include "abi/pyabi.h"
#include "ranktop/proc/rmem.h"

/* Longest str we decode, in characters; longer ones are cut and end in "...". */
#define PYSTR_MAX_CHARS 1024
/* Longest bytes object (line tables) we copy. */
#define PYBYTES_MAX (1u << 20)

/* Decodes the str object at addr (Latin-1, UCS-2 or UCS-4, compact or legacy) into UTF-8.
 * Returns a heap string (caller frees) or NULL with *status set (APP_E_STALE for a torn or
 * implausible object, APP_E_GONE...). Uses one read for short strings. */
char *pystr_read(struct rmem *m, const struct py_layout *L, uint64_t addr, int *status);

/* Decodes an already-copied str object: `obj` holds `len` bytes starting at the object. Pure.
 * Returns a heap string or NULL when the copy is too short or the header is implausible; *need
 * then holds the bytes required (0 when the object is simply invalid). */
char *pystr_decode(const struct py_layout *L, const uint8_t *obj, size_t len, size_t *need);

/* Copies the content of the bytes object at addr. Returns a heap buffer (caller frees) and its
 * length, or NULL with *status set. */
uint8_t *pybytes_read(struct rmem *m, const struct py_layout *L, uint64_t addr, size_t *len,
                      int *status);

#endif
