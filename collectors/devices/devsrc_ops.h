/* The interface every device source implements, and the chain state they share; private to
 * collectors/devices. The chain (devsrc.c) calls open, then refresh and close when open
 * succeeded, all on the thread that owns the struct devsrc. */
#ifndef RANKTOP_DEVSRC_OPS_H
#define RANKTOP_DEVSRC_OPS_H

#include "ranktop/devices/devsrc.h"
#include "ranktop/devices/exec.h"

#include <stdbool.h>

/* One discovery run's chain state, owned by the caller of devsrc_new. */
struct devsrc {
    struct devsrc_opts opts;
    struct smi_result *out; /* what devsrc_collect fills, during the call only */
    char ***errors;         /* its error lines, likewise */
    size_t *nerrors;
    int timeout_ms;         /* deadline of each tool run */
    struct exec_result res; /* a tool source's output, from refresh until close */
};

/* One device source. The ops objects are initialised positionally in this field order. */
struct devsrc_ops {
    const char *name;   /* "nvidia-smi": named when a source before it fails over to it */
    enum smi_kind kind; /* the chain it belongs to */
    bool fails_over;    /* a failure hands over to the next source of the chain (and says
                           so); otherwise it ends the chain */
    /* 0 when the source can be asked. APP_E_NOTFOUND skips it without a word (not installed,
     * not selected, already reported); another status is reported and the chain goes on. */
    int (*open)(struct devsrc *s, struct app_err *err);
    /* Appends what the source reports to r; 0, or a negative status with the message. */
    int (*refresh)(struct devsrc *s, struct smi_result *r, struct app_err *err);
    /* Releases what open and refresh left in s; may be NULL. */
    void (*close)(struct devsrc *s);
};

extern const struct devsrc_ops devsrc_nvml_ops, devsrc_dcmi_ops;
extern const struct devsrc_ops devsrc_nvsmi_ops, devsrc_nvsmi_file_ops;
extern const struct devsrc_ops devsrc_npusmi_ops, devsrc_npusmi_file_ops;

/* Appends a line to the run's errors for something that did not stop the source answering
 * (a process query that failed after the devices were read). */
void devsrc_note(struct devsrc *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* open's "skip me quietly". */
static inline int devsrc_skip(struct app_err *err)
{
    err->code = APP_E_NOTFOUND;
    err->msg[0] = '\0';
    return APP_E_NOTFOUND;
}

#endif
