/* Kinds of wait for `ranktop watch` (watch_waits.h). Until the wait-kind rules exist in this
 * tree no rules can be loaded, and every rank's kind stays unknown (NULL), never guessed.
 * Main thread. */
#include "watch_waits.h"

#include <string.h>

void watch_wait_of(const void *waits, const struct history *h, const struct hrank *r, uint64_t now,
                   struct watch_wait *out)
{
    (void)waits;
    (void)h;
    (void)r;
    (void)now;
    memset(out, 0, sizeof(*out));
}
