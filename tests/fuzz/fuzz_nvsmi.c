/* libFuzzer entry point for the nvidia-smi parsers: every parser reads every input.
 *
 * The input is copied into an exact-size heap buffer so AddressSanitizer catches any read
 * past the end (the parsers take a length and must never look for a NUL). Each parse must
 * return 0 or a negative app_status, and every record must hold either a known value or its
 * "unknown" sentinel; anything else aborts, which libFuzzer reports as a crash. */
#include "nvsmi_parse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_result(const struct smi_result *r, int rc)
{
    if (rc > 0 || rc < APP_E_LIMIT || r->status != rc || !memchr(r->msg, '\0', sizeof(r->msg)))
        abort();
    for (size_t i = 0; i < r->ndevs; i++) {
        const struct smi_device *d = &r->devs[i];

        if (!smi_dev_has(d, SMI_DEV_INDEX) || d->index < 0 || !memchr(d->name, '\0', 96))
            abort();
        if (!smi_dev_has(d, SMI_DEV_MEM_USED) ? d->mem_used_mb != -1 : d->mem_used_mb < 0)
            abort();
        if (!smi_dev_has(d, SMI_DEV_UTIL) ? d->util_pct != -1 : d->util_pct < 0)
            abort();
    }
    for (size_t i = 0; i < r->nprocs; i++) {
        const struct smi_proc *p = &r->procs[i];

        if (p->pid <= 0 || !memchr(p->name, '\0', sizeof(p->name)))
            abort();
        if (!smi_proc_has(p, SMI_PROC_MEM) ? p->mem_mb != -1 : p->mem_mb < 0)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int (*const parsers[])(const char *, size_t, struct smi_result *, struct app_err *) = {
        nvsmi_parse_table, nvsmi_parse_query_gpu, nvsmi_parse_query_apps,
        nvsmi_parse_pmon,  nvsmi_parse_error,
    };
    char *buf = malloc(size ? size : 1);
    struct smi_result r;
    struct app_err err;

    if (!buf)
        return 0;
    memcpy(buf, data, size);
    smi_result_init(&r);
    for (size_t i = 0; i < sizeof(parsers) / sizeof(parsers[0]); i++) {
        int rc;

        smi_result_reset(&r);
        rc = parsers[i](buf, size, &r, &err);
        if (parsers[i] != nvsmi_parse_error)
            check_result(&r, rc);
    }
    smi_result_fini(&r);
    free(buf);
    return 0;
}
