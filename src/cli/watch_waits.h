/* The kind of wait of a rank for `ranktop watch`'s reports: the wait-kind rules (ranktop/
 * waits.h) applied to the rank's main-thread stack as last sampled, its GIL and GC figures, and
 * for a rank of this node its thread state, system call and wchan from /proc. Main thread. */
#ifndef RANKTOP_WATCH_WAITS_H
#define RANKTOP_WATCH_WAITS_H

#include "ranktop/model/history.h"

#include <stdint.h>

struct watch_wait {
    const char *kind; /* wait_kind_name(): static */
    char why[256];    /* the rule or fact that decided it, "" none */
};

/* waits: the user's struct waits (--waits), NULL: the built-in rules. */
void watch_wait_of(const void *waits, const struct history *h, const struct hrank *r, uint64_t now,
                   struct watch_wait *out);

#endif
