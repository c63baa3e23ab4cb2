/* The device-source chains of discovery: which sources are tried, in which order, and what the
 * user is told when one fails.
 *
 * Owns the ordered table below and the chain state of one run (struct devsrc, the caller's).
 * Invariants: for each kind the first source that answers is the only one whose records land
 * in the caller's device list; a failing source costs one error line and the chain goes on only
 * when the source names the one that takes over (NVML to nvidia-smi, DCMI to npu-smi); a missing or
 * unselected source costs nothing. A source never stops the other kind's chain. Runs on the
 * thread running discovery. */
#include "ranktop/devices/devsrc.h"

#include "devsrc_ops.h"
#include "ranktop/base/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every source, in the order its chain tries it. A recording given on the command line
 * replaces its kind's live sources; the libraries come before the tools because they are
 * cheaper and do not depend on a tool's output format. */
static const struct devsrc_ops *const devsrc_chain[] = {
    &devsrc_nvsmi_file_ops,  /* --nvidia-smi-file */
    &devsrc_nvml_ops,        /* libnvidia-ml, unless --no-nvml or --nvidia-smi */
    &devsrc_nvsmi_ops,       /* nvidia-smi --query-gpu, else its default table */
    &devsrc_npusmi_file_ops, /* --npu-smi-file */
    &devsrc_dcmi_ops,        /* libdcmi, unless --no-dcmi or --npu-smi */
    &devsrc_npusmi_ops,      /* npu-smi info */
};

void devsrc_note(struct devsrc *s, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    strv_addv(s->errors, s->nerrors, fmt, ap);
    va_end(ap);
}

struct devsrc *devsrc_new(const struct devsrc_opts *o)
{
    struct devsrc *s = x_calloc(1, sizeof(*s));

    s->opts = *o;
    s->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 5000;
    return s;
}

void devsrc_free(struct devsrc *s)
{
    if (!s)
        return;
    exec_result_fini(&s->res);
    free(s);
}

#define CHAIN_LEN (sizeof(devsrc_chain) / sizeof(devsrc_chain[0]))

/* The source a failure of chain entry i hands over to: the next one of the same kind. */
static const char *next_name(size_t i)
{
    for (size_t k = i + 1; k < CHAIN_LEN; k++)
        if (devsrc_chain[k]->kind == devsrc_chain[i]->kind)
            return devsrc_chain[k]->name;
    return "nothing";
}

static void report(struct devsrc *s, size_t i, const struct app_err *err)
{
    if (devsrc_chain[i]->fails_over)
        devsrc_note(s, "%s (using %s instead)", err->msg, next_name(i));
    else
        devsrc_note(s, "%s", err->msg);
}

enum outcome { ANSWERED, GO_ON, STOP };

/* Asks chain entry i whether it can answer and, when it can, for its records. */
static enum outcome ask(struct devsrc *s, size_t i)
{
    const struct devsrc_ops *ops = devsrc_chain[i];
    struct app_err err = {0};
    int rc = ops->open(s, &err);

    if (rc < 0) {
        if (rc != APP_E_NOTFOUND)
            report(s, i, &err);
        return GO_ON;
    }
    rc = ops->refresh(s, s->out, &err);
    if (ops->close)
        ops->close(s);
    if (rc == 0)
        return ANSWERED;
    report(s, i, &err);
    return ops->fails_over ? GO_ON : STOP;
}

bool devsrc_collect(struct devsrc *s, enum smi_kind kind, struct smi_result *out, char ***errors,
                    size_t *nerrors)
{
    enum outcome res = GO_ON;

    s->out = out;
    s->errors = errors;
    s->nerrors = nerrors;
    for (size_t i = 0; i < CHAIN_LEN && res == GO_ON; i++)
        if (devsrc_chain[i]->kind == kind)
            res = ask(s, i);
    s->out = NULL;
    s->errors = NULL;
    s->nerrors = NULL;
    return res == ANSWERED;
}
