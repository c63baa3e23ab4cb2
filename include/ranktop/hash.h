/* Hashing and string equality shared by the interning tables (src/model) and the view models
 * (src/views). Pure inline functions, any thread. The values are never stored outside the
 * process, so they may change between versions. */
#ifndef RANKTOP_HASH_H
#define RANKTOP_HASH_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_BASE)
#error "ranktop/hash.h belongs to src/base/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Folds v into the running hash h. The multiply spreads the low bits, which open-addressed
 * tables index with a mask. */
static inline uint64_t hash_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

/* FNV-1a over a NUL-terminated string; NULL hashes as "". */
static inline uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;

    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Equal strings, where two NULLs are equal and NULL differs from any string. Interned strings
 * usually compare equal by pointer, which is tried first. */
static inline bool hash_str_same(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

#endif
