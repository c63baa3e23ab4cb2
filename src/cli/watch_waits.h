/* The kind of wait of a rank for `ranktop watch`'s reports: the wait-kind rules (ranktop/
 * waits.h) applied to the rank's main-thread stack as last sampled, its GIL and GC figures, and
 * for a rank of this node its thread state, system call and wchan from /proc. Main thread. */
#ifndef RANKTOP_WATCH_WAITS_H
#define RANKTOP_WATCH_WAITS_H

#include "ranktop/history.h"

#include <stdint.h>

struct watch_wait {
    const char *kind; /* wait_kind_name(); NULL when no rules are loaded */
    char why[160];    /* the rule or fact that decided it, "" none */
};

/* waits: a struct waits (NULL: none loaded; kind stays NULL). */
void watch_wait_of(const void *waits, const struct history *h, const struct hrank *r, uint64_t now,
                   struct watch_wait *out);

#endif
