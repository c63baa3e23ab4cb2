/* Device sources of discovery: NVML, DCMI, nvidia-smi, npu-smi and their recorded outputs,
 * tried in a fixed order per device kind (collectors/devices/devsrc.c has the table).
 *
 * A struct devsrc is the caller's: it holds what the sources need between their steps for one
 * discovery run and belongs to the one thread running it. */
#ifndef RANKTOP_DEVSRC_H
#define RANKTOP_DEVSRC_H

#include "ranktop/discovery.h"

struct devsrc;

/* A chain state for the sources o selects (o is borrowed for the state's lifetime). */
struct devsrc *devsrc_new(const struct discovery_opts *o);
void devsrc_free(struct devsrc *s);

/* Walks the chain of kind until a source answers: appends its devices and processes to
 * d->devs, and one line to d->errors for each failure or note on the way. Returns true when
 * some source answered. */
bool devsrc_collect(struct devsrc *s, enum smi_kind kind, struct discovery *d);

/* Appends one formatted line to d->errors. */
void devsrc_error(struct discovery *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
