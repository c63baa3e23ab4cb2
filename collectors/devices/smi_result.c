/* The smi record containers declared in ranktop/devices/devices.h.
 *
 * Owns the growable arrays of a struct smi_result and the "all unknown" initial state of each
 * record. Arrays grow by doubling through x_reallocarray (out of memory is fatal). A result
 * belongs to the thread filling it. */
#include "ranktop/devices/devices.h"
#include "ranktop/base/util.h"

#include <stdlib.h>
#include <string.h>

void smi_result_init(struct smi_result *r)
{
    memset(r, 0, sizeof(*r));
}

void smi_result_fini(struct smi_result *r)
{
    free(r->devs);
    free(r->procs);
    free(r->maps);
    memset(r, 0, sizeof(*r));
}

void smi_result_reset(struct smi_result *r)
{
    r->ndevs = r->nprocs = r->nmaps = 0;
    r->tool_version[0] = r->driver_version[0] = r->cuda_version[0] = '\0';
    r->skipped = r->skipped_line = 0;
    r->status = 0;
    r->msg[0] = '\0';
}

/* Makes room for one more element of size sz in *v (n used, *cap allocated). */
static void *grow(void *v, size_t n, size_t *cap, size_t sz)
{
    if (n < *cap)
        return v;
    *cap = *cap ? *cap * 2 : 8;
    return x_reallocarray(v, *cap, sz);
}

struct smi_device *smi_result_add_device(struct smi_result *r, const struct smi_device *d)
{
    r->devs = grow(r->devs, r->ndevs, &r->devs_cap, sizeof(*r->devs));
    r->devs[r->ndevs] = *d;
    return &r->devs[r->ndevs++];
}

struct smi_proc *smi_result_add_proc(struct smi_result *r, const struct smi_proc *p)
{
    r->procs = grow(r->procs, r->nprocs, &r->procs_cap, sizeof(*r->procs));
    r->procs[r->nprocs] = *p;
    return &r->procs[r->nprocs++];
}

struct smi_chipmap *smi_result_add_map(struct smi_result *r, const struct smi_chipmap *m)
{
    r->maps = grow(r->maps, r->nmaps, &r->maps_cap, sizeof(*r->maps));
    r->maps[r->nmaps] = *m;
    return &r->maps[r->nmaps++];
}

void smi_device_init(struct smi_device *d, enum smi_kind kind)
{
    memset(d, 0, sizeof(*d));
    d->kind = kind;
    d->index = d->chip = d->logic_id = d->phy_id = -1;
    d->util_pct = d->mem_used_mb = d->mem_total_mb = -1;
    d->hbm_used_mb = d->hbm_total_mb = d->ddr_used_mb = d->ddr_total_mb = -1;
    d->power_w = -1.0;
    d->temp_c = -1;
}

void smi_proc_init(struct smi_proc *p, enum smi_kind kind)
{
    memset(p, 0, sizeof(*p));
    p->kind = kind;
    p->pid = p->dev_index = p->chip = p->container_pid = p->gi = p->ci = -1;
    p->mem_mb = p->sm_pct = p->memutil_pct = -1;
}

void smi_chipmap_init(struct smi_chipmap *m)
{
    memset(m, 0, sizeof(*m));
    m->npu_id = m->chip_id = m->logic_id = m->phy_id = -1;
}

const char *smi_kind_name(enum smi_kind kind)
{
    return kind == SMI_KIND_NPU ? "npu" : "gpu";
}
