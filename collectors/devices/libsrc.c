/* The vendor-library device sources, NVML and DCMI, behind the devsrc_ops interface.
 *
 * Owns the process-wide cache of opened libraries. It has to be process-wide, not part of the
 * caller's struct devsrc: every discovery run (each `ranktop ls`, each engine refresh) makes a
 * new chain state, while nvmlInit re-creates the driver context each time (slow, and NVML
 * counts its users) and DCMI has no shutdown at all. Invariants: each library is opened at
 * most once per process, its failure is reported by the first run only (later runs fall
 * through to the tool quietly), and a library that opened stays open until exit. lib_lock
 * guards the cache and serialises every call into either library, whichever engine or thread
 * makes it. */
#include "devsrc_ops.h"

#include "dcmi.h"
#include "nvml.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#define NOT_TRIED 1 /* a lib_slot's rc before its first open */

/* One vendor library in the cache: how to open and read it, and what its one open gave. */
struct lib_slot {
    int (*open)(void **handle, struct app_err *err);
    int (*collect)(void *handle, struct smi_result *r, struct app_err *err);
    int rc;       /* NOT_TRIED, or what the one open returned */
    void *handle; /* struct nvml or struct dcmi, when rc is 0 */
};

static int open_nvml(void **handle, struct app_err *err)
{
    struct nvml *n = NULL;
    int rc = nvml_open(&n, err);

    *handle = n;
    return rc;
}

static int collect_nvml(void *handle, struct smi_result *r, struct app_err *err)
{
    return nvml_collect(handle, r, err);
}

static int open_dcmi(void **handle, struct app_err *err)
{
    struct dcmi *d = NULL;
    int rc = dcmi_open(&d, err);

    *handle = d;
    return rc;
}

static int collect_dcmi(void *handle, struct smi_result *r, struct app_err *err)
{
    return dcmi_collect(handle, r, err);
}

static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lib_slot nvml_slot = {open_nvml, collect_nvml, NOT_TRIED, NULL};
static struct lib_slot dcmi_slot = {open_dcmi, collect_dcmi, NOT_TRIED, NULL};
static bool closer_registered;

/* At exit, so that nvmlShutdown balances the one nvmlInit. */
static void libs_close(void)
{
    pthread_mutex_lock(&lib_lock);
    nvml_close(nvml_slot.handle);
    dcmi_close(dcmi_slot.handle);
    nvml_slot.handle = dcmi_slot.handle = NULL;
    pthread_mutex_unlock(&lib_lock);
}

/* Lends the library's handle to s, opening it on the first call of the process. A failure is
 * returned (and so reported) by that first call only; later runs skip the library quietly. */
static int slot_open(struct lib_slot *l, bool wanted, struct devsrc *s, struct app_err *err)
{
    int rc;

    if (!wanted)
        return devsrc_skip(err);
    pthread_mutex_lock(&lib_lock);
    if (l->rc == NOT_TRIED) {
        rc = l->rc = l->open(&l->handle, err);
        if (rc == 0 && !closer_registered)
            closer_registered = atexit(libs_close) == 0;
    } else {
        rc = l->rc == 0 ? 0 : devsrc_skip(err);
    }
    s->lib = l->handle;
    pthread_mutex_unlock(&lib_lock);
    return rc;
}

static int slot_refresh(struct lib_slot *l, struct devsrc *s, struct smi_result *r,
                        struct app_err *err)
{
    int rc;

    pthread_mutex_lock(&lib_lock);
    rc = l->collect(s->lib, r, err);
    pthread_mutex_unlock(&lib_lock);
    return rc;
}

static int nvml_src_open(struct devsrc *s, struct app_err *err)
{
    return slot_open(&nvml_slot, !s->opts->no_nvml && !s->opts->nvidia_smi, s, err);
}

static int nvml_src_refresh(struct devsrc *s, struct smi_result *r, struct app_err *err)
{
    return slot_refresh(&nvml_slot, s, r, err);
}

static int dcmi_src_open(struct devsrc *s, struct app_err *err)
{
    return slot_open(&dcmi_slot, !s->opts->no_dcmi && !s->opts->npu_smi, s, err);
}

static int dcmi_src_refresh(struct devsrc *s, struct smi_result *r, struct app_err *err)
{
    return slot_refresh(&dcmi_slot, s, r, err);
}

/* The handle is only borrowed: the cache keeps it until exit. */
static void lib_src_close(struct devsrc *s)
{
    s->lib = NULL;
}

const struct devsrc_ops devsrc_nvml_ops = {
    .name = "NVML",
    .kind = SMI_KIND_GPU,
    .instead = "nvidia-smi",
    .open = nvml_src_open,
    .refresh = nvml_src_refresh,
    .close = lib_src_close,
};

const struct devsrc_ops devsrc_dcmi_ops = {
    .name = "DCMI",
    .kind = SMI_KIND_NPU,
    .instead = "npu-smi",
    .open = dcmi_src_open,
    .refresh = dcmi_src_refresh,
    .close = lib_src_close,
};
