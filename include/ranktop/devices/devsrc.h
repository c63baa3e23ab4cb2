/* Device sources: NVML, DCMI, nvidia-smi, npu-smi and their recorded outputs, tried in a
 * fixed order per device kind (collectors/devices/devsrc.c has the table).
 *
 * A struct devsrc is the caller's: it holds what the sources need between their steps for one
 * discovery run and belongs to the one thread running it. This layer knows nothing of ranks or
 * processes: discovery passes the options and the lists it wants filled. */
#ifndef RANKTOP_DEVSRC_H
#define RANKTOP_DEVSRC_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_DEVICES)
#error "ranktop/devices/devsrc.h belongs to collectors/devices/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>

#include "ranktop/devices/devices.h"

struct devsrc_opts {
    const char *nvidia_smi;      /* tool path; NULL = "nvidia-smi" on PATH */
    const char *npu_smi;         /* NULL = "npu-smi" */
    const char *nvidia_smi_file; /* recorded default output to parse instead of running it */
    const char *npu_smi_file;
    int timeout_ms;        /* deadline per external command; 0 = 5000 */
    bool no_nvml, no_dcmi; /* skip the libraries, use the tools */
};

struct devsrc;

/* A chain state for the sources o selects (o is copied). */
struct devsrc *devsrc_new(const struct devsrc_opts *o);
void devsrc_free(struct devsrc *s);

/* Walks the chain of kind until a source answers: appends its devices and processes to out,
 * and one heap-allocated line to (*errors, *nerrors) for each failure or note on the way
 * ("npu-smi: not found on PATH"). Returns true when some source answered. */
bool devsrc_collect(struct devsrc *s, enum smi_kind kind, struct smi_result *out, char ***errors,
                    size_t *nerrors);

#endif
