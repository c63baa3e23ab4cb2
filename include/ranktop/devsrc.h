/* Device sources of discovery (nvidia-smi, npu-smi, their recorded outputs). */
#ifndef RANKTOP_DEVSRC_H
#define RANKTOP_DEVSRC_H

#include "ranktop/discovery.h"

/* Appends GPUs and their processes to d->devs; errors to d->errors. Returns true when the
 * source answered. */
bool devsrc_gpu(const struct discovery_opts *o, struct discovery *d);
bool devsrc_npu(const struct discovery_opts *o, struct discovery *d);

/* Appends one formatted line to d->errors. */
void devsrc_error(struct discovery *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
