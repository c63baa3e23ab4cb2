/* `ranktop dump --locals`: each thread's frame locals, read after its sample and matched to
 * the sample's frames (cli_locals.c). */
#ifndef RANKTOP_CLI_LOCALS_H
#define RANKTOP_CLI_LOCALS_H

#include <stdbool.h>

#include "ranktop/python/pystack.h"

struct json_object;

/* The locals of every thread of one sample; at[i][k] is the locals of the sample's frame k of
 * thread i, NULL where none could be matched (the stack moved in between). */
struct cli_locals {
    bool on;
    uint32_t nthreads;
    struct pylocals **l;
    const struct pylocals_frame ***at;
    char **err; /* per thread, why its locals are missing; NULL when read */
};

/* Reads the locals of every thread of s (no-op unless lc->on). */
void cli_locals_gather(struct pyproc *p, const struct pysample *s, struct cli_locals *lc);
void cli_locals_fini(struct cli_locals *lc);

/* The locals of frame k of thread i, or NULL. */
const struct pylocals_frame *cli_locals_at(const struct cli_locals *lc, uint32_t i, uint32_t k);

/* Text lines under a frame ("        name = repr  (type, kind)"), or why they are missing. */
void cli_locals_text(const struct cli_locals *lc, uint32_t i, uint32_t k);
/* The frame's "locals" array, or NULL (JSON null) when none was matched. */
struct json_object *cli_locals_json(const struct cli_locals *lc, uint32_t i, uint32_t k);

#endif
