/* libFuzzer entry point for the npu-smi parsers: info, info -m and info -t usages.
 *
 * Same rules as fuzz_nvsmi.c: exact-size copy of the input, status in range, every field known
 * or at its "unknown" sentinel, else abort. */
#include "npusmi_parse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_device(const struct smi_device *d)
{
    if (!memchr(d->name, '\0', sizeof(d->name)) || !memchr(d->health, '\0', sizeof(d->health)))
        abort();
    if (!smi_dev_has(d, SMI_DEV_MEM_USED) ? d->mem_used_mb != -1 : d->mem_used_mb < 0)
        abort();
    if (!smi_dev_has(d, SMI_DEV_HBM_USED) ? d->hbm_used_mb != -1 : d->hbm_used_mb < 0)
        abort();
    if (!smi_dev_has(d, SMI_DEV_CHIP) ? d->chip != -1 : d->chip < 0)
        abort();
}

static void check_result(const struct smi_result *r, int rc)
{
    if (rc > 0 || rc < APP_E_LIMIT || r->status != rc || !memchr(r->msg, '\0', sizeof(r->msg)))
        abort();
    for (size_t i = 0; i < r->ndevs; i++) {
        if (!smi_dev_has(&r->devs[i], SMI_DEV_INDEX))
            abort();
        check_device(&r->devs[i]);
    }
    for (size_t i = 0; i < r->nprocs; i++)
        if (r->procs[i].pid <= 0 || !memchr(r->procs[i].name, '\0', sizeof(r->procs[i].name)))
            abort();
    for (size_t i = 0; i < r->nmaps; i++)
        if (!memchr(r->maps[i].name, '\0', sizeof(r->maps[i].name)))
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    struct smi_result r;
    struct smi_device d;
    struct app_err err;
    int rc;

    if (!buf)
        return 0;
    memcpy(buf, data, size);
    smi_result_init(&r);
    check_result(&r, npusmi_parse_info(buf, size, &r, &err));
    smi_result_reset(&r);
    check_result(&r, npusmi_parse_mapping(buf, size, &r, &err));
    smi_device_init(&d, SMI_KIND_NPU);
    rc = npusmi_parse_usages(buf, size, &d, &err);
    if (rc > 0 || rc < APP_E_LIMIT || err.code != rc)
        abort();
    check_device(&d);
    smi_result_fini(&r);
    free(buf);
    return 0;
}
