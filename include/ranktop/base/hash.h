/* Hashing and string equality shared by the interning tables (src/model) and the view models
 * (src/views). Pure inline functions, any thread. The values are never stored outside the
 * process, so they may change between versions. */
#ifndef RANKTOP_HASH_H
#define RANKTOP_HASH_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_BASE)
#error "ranktop/base/hash.h belongs to src/base/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* MurmurHash3's 64-bit finalizer: a bijection whose every output bit depends on every input
 * bit. */
static inline uint64_t hash_fmix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Folds v into the running hash h. Keys made by chains of these are compared for equality
 * (a stack's key folds its frames), so two different inputs must collide only as rarely as
 * two random 64-bit values, also when both are small numbers such as a counter and a line:
 * v is spread over all 64 bits before it meets h, and the result is spread again. (The
 * boost-style h ^ (v + C + (h << 6) + (h >> 2)) it replaces gave hash_mix(6, 1176) ==
 * hash_mix(24, 21).) The low bits are as good as the high ones for masked table indices. */
static inline uint64_t hash_mix(uint64_t h, uint64_t v)
{
    return hash_fmix(h ^ hash_fmix(v + 0x9E3779B97F4A7C15ull));
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
