/* SHA-256 (FIPS 180-4), for checking a binary the head ships to another node: the node checks
 * the bytes it got with its own sha256sum against the digest the head computed here. Pure, no
 * global state: any thread. */
#ifndef RANKTOP_SHA256_H
#define RANKTOP_SHA256_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_BASE)
#error "ranktop/base/sha256.h belongs to src/base/, a layer this one may not use"
#endif

#include <stddef.h>
#include <stdint.h>

struct sha256 {
    uint32_t h[8];
    uint64_t len; /* bytes fed so far */
    unsigned char buf[64];
    size_t nbuf;
};

void sha256_init(struct sha256 *s);
void sha256_feed(struct sha256 *s, const void *data, size_t n);
/* The digest as 32 bytes; s is spent afterwards (sha256_init to reuse it). */
void sha256_done(struct sha256 *s, unsigned char out[32]);
/* The digest of data as 64 lower-case hex digits and a NUL, as sha256sum prints it. */
void sha256_hex(const void *data, size_t n, char out[65]);

#endif
