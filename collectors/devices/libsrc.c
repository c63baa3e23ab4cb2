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
#include <string.h>

#define NOT_TRIED 1 /* a lib_slot's rc before its first open */

enum lib_id { LIB_NVML, LIB_DCMI, LIB_COUNT };

/* One vendor library in the cache: what its one open gave. */
struct lib_slot {
    int rc; /* NOT_TRIED, or what the one open returned */
    union {
        struct nvml *nvml;
        struct dcmi *dcmi;
    } h; /* valid when rc is 0 */
};

static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lib_slot slots[LIB_COUNT] = {{NOT_TRIED, {NULL}}, {NOT_TRIED, {NULL}}};
static bool closer_registered;

/* At exit, so that nvmlShutdown balances the one nvmlInit. */
static void libs_close(void)
{
    pthread_mutex_lock(&lib_lock);
    nvml_close(slots[LIB_NVML].h.nvml);
    dcmi_close(slots[LIB_DCMI].h.dcmi);
    memset(slots, 0, sizeof(slots));
    pthread_mutex_unlock(&lib_lock);
}

/* Opens the library on the first call of the process. A failure is returned (and so reported)
 * by that first call only; later runs skip the library quietly. */
static int lib_open(enum lib_id id, bool wanted, struct app_err *err)
{
    struct lib_slot *l = &slots[id];
    int rc;

    if (!wanted)
        return devsrc_skip(err);
    pthread_mutex_lock(&lib_lock);
    if (l->rc == NOT_TRIED) {
        rc = id == LIB_NVML ? nvml_open(&l->h.nvml, err) : dcmi_open(&l->h.dcmi, err);
        l->rc = rc;
        if (rc == 0 && !closer_registered)
            closer_registered = atexit(libs_close) == 0;
    } else {
        rc = l->rc == 0 ? 0 : devsrc_skip(err);
    }
    pthread_mutex_unlock(&lib_lock);
    return rc;
}

/* Only called after lib_open succeeded, so the handle is there until exit. */
static int lib_refresh(enum lib_id id, struct smi_result *r, struct app_err *err)
{
    const struct lib_slot *l = &slots[id];
    int rc;

    pthread_mutex_lock(&lib_lock);
    rc = id == LIB_NVML ? nvml_collect(l->h.nvml, r, err) : dcmi_collect(l->h.dcmi, r, err);
    pthread_mutex_unlock(&lib_lock);
    return rc;
}

/* The ops: which library, and whether the options want it. */
static int nvml_src_open(struct devsrc *s, struct app_err *err)
{
    return lib_open(LIB_NVML, !s->opts.no_nvml && !s->opts.nvidia_smi, err);
}

static int dcmi_src_open(struct devsrc *s, struct app_err *err)
{
    return lib_open(LIB_DCMI, !s->opts.no_dcmi && !s->opts.npu_smi, err);
}

static int nvml_src_refresh(struct devsrc *s, struct smi_result *r, struct app_err *err)
{
    (void)s;
    return lib_refresh(LIB_NVML, r, err);
}

static int dcmi_src_refresh(struct devsrc *s, struct smi_result *r, struct app_err *err)
{
    (void)s;
    return lib_refresh(LIB_DCMI, r, err);
}

/* The handles stay in the cache: nothing to close per run. */
const struct devsrc_ops devsrc_nvml_ops = {"NVML",        SMI_KIND_GPU,     true,
                                           nvml_src_open, nvml_src_refresh, NULL};
const struct devsrc_ops devsrc_dcmi_ops = {"DCMI",        SMI_KIND_NPU,     true,
                                           dcmi_src_open, dcmi_src_refresh, NULL};
