/* Loads of fixed-width integers from byte buffers, and the plausibility test for pointers found
 * in them.
 *
 * The readers copy raw memory out of another process into local buffers and then pick fields
 * at offsets that are rarely aligned for the host type, so every load goes through memcpy.
 * The target runs on this machine, so its byte order is ours. A pointer read from a moving
 * target may be torn or stale: bytes_ptr_ok() is the one test every reader applies before
 * following an address it found in copied memory. Pure functions, any thread. */
#ifndef RANKTOP_BYTES_H
#define RANKTOP_BYTES_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_BASE)
#error "ranktop/base/bytes.h belongs to src/base/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Defines bytes_load_<name>(p): the <type> stored at p, which need not be aligned. The four
 * loaders below differ only in their type, hence one definition for all of them. */
#define BYTES_LOADER(name, type)                                                                   \
    static inline type bytes_load_##name(const uint8_t *p)                                         \
    {                                                                                              \
        type v;                                                                                    \
        memcpy(&v, p, sizeof(v));                                                                  \
        return v;                                                                                  \
    }

BYTES_LOADER(u64, uint64_t)
BYTES_LOADER(u32, uint32_t)
BYTES_LOADER(i32, int32_t)
BYTES_LOADER(u16, uint16_t)

#undef BYTES_LOADER

/* True for an address that can hold a heap object of a user-space process: 8-aligned, above
 * the first 4 KiB (not mapped: Linux's default mmap_min_addr is 4 KiB or more, whatever the
 * page size) and below 2^57, the top of user space with 5-level paging. */
static inline bool bytes_ptr_ok(uint64_t p)
{
    return p >= 4096 && p < (1ull << 57) && (p & 7) == 0;
}

#endif
