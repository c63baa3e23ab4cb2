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

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t bytes_load_u64(const uint8_t *p)
{
    uint64_t v;

    memcpy(&v, p, sizeof(v));
    return v;
}

static inline uint32_t bytes_load_u32(const uint8_t *p)
{
    uint32_t v;

    memcpy(&v, p, sizeof(v));
    return v;
}

static inline int32_t bytes_load_i32(const uint8_t *p)
{
    int32_t v;

    memcpy(&v, p, sizeof(v));
    return v;
}

static inline uint16_t bytes_load_u16(const uint8_t *p)
{
    uint16_t v;

    memcpy(&v, p, sizeof(v));
    return v;
}

/* True for an address that can hold a heap object of a user-space process: 8-aligned, above
 * the unmapped first page and below 2^57, the top of user space with 5-level paging. */
static inline bool bytes_ptr_ok(uint64_t p)
{
    return p >= 4096 && p < (1ull << 57) && (p & 7) == 0;
}

#endif
