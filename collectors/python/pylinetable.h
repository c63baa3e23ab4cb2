/* Line-number decoders for CPython code objects, one per table format. Pure functions over a
 * local copy of the table: no I/O, no allocation, bounded by the table length. */
#ifndef RANKTOP_PYLINETABLE_H
#define RANKTOP_PYLINETABLE_H

#include <stddef.h>
#include <stdint.h>

/* Returns the source line executing at byte offset `offset` into the bytecode, for the table
 * format of CPython 3.<minor> (8..14+), or 0 when the table says "no line" for that offset or
 * the offset lies outside the table. `table` is the raw content of co_lnotab (3.8/3.9),
 * co_linetable (3.10) or the 3.11+ location table. A negative offset (frame not started)
 * yields firstlineno. Malformed tables never read out of bounds. */
int pyline_lookup(int minor, const uint8_t *table, size_t len, int firstlineno, long offset);

#endif
