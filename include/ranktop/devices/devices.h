/* Device and device-process records, as read from nvidia-smi, npu-smi (and later NVML / DCMI).
 *
 * Records are plain copyable structs with fixed-size strings. Every field that a tool can fail
 * to report has a bit in `valid`; a cleared bit means "unknown" (the tool printed N/A, [N/A],
 * NA, -, a blank cell, or nothing at all) and the field then holds -1, -1.0 or "". Unknown is
 * never 0. A struct smi_result owns growable arrays of records; it belongs to the one thread
 * that fills it and is not thread-safe. */
#ifndef RANKTOP_DEVICES_H
#define RANKTOP_DEVICES_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_DEVICES)
#error "ranktop/devices/devices.h belongs to collectors/devices/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/base/status.h"

enum smi_kind {
    SMI_KIND_GPU = 0,
    SMI_KIND_NPU = 1,
};

/* Validity bits of struct smi_device. */
enum smi_dev_field {
    SMI_DEV_INDEX = 1u << 0,      /* index */
    SMI_DEV_CHIP = 1u << 1,       /* chip (NPUs only) */
    SMI_DEV_LOGIC_ID = 1u << 2,   /* logic_id */
    SMI_DEV_PHY_ID = 1u << 3,     /* phy_id */
    SMI_DEV_NAME = 1u << 4,       /* name */
    SMI_DEV_UUID = 1u << 5,       /* uuid */
    SMI_DEV_BUS_ID = 1u << 6,     /* bus_id */
    SMI_DEV_UTIL = 1u << 7,       /* util_pct */
    SMI_DEV_MEM_USED = 1u << 8,   /* mem_used_mb */
    SMI_DEV_MEM_TOTAL = 1u << 9,  /* mem_total_mb */
    SMI_DEV_HBM_USED = 1u << 10,  /* hbm_used_mb */
    SMI_DEV_HBM_TOTAL = 1u << 11, /* hbm_total_mb */
    SMI_DEV_DDR_USED = 1u << 12,  /* ddr_used_mb */
    SMI_DEV_DDR_TOTAL = 1u << 13, /* ddr_total_mb */
    SMI_DEV_POWER = 1u << 14,     /* power_w */
    SMI_DEV_TEMP = 1u << 15,      /* temp_c */
    SMI_DEV_HEALTH = 1u << 16,    /* health */
};

/* One GPU, or one chip of an NPU card. */
struct smi_device {
    enum smi_kind kind;
    uint32_t valid;       /* enum smi_dev_field bits */
    int index;            /* GPU index (nvidia-smi order) or NPU card id ("NPU" column) */
    int chip;             /* chip within the NPU card; -1 for GPUs */
    int logic_id;         /* NPU logic id (old "Chip Device" layout, info -m) */
    int phy_id;           /* NPU physical id ("Chip Phy-ID" layout) */
    char name[96];        /* as printed, possibly ellipsized ("GeForce GTX 108...") */
    char uuid[96];        /* "GPU-..." */
    char bus_id[32];      /* PCI address as printed */
    char health[32];      /* NPU health ("OK", "Warning", "Alarm"); GPUs: unknown */
    int64_t util_pct;     /* GPU-Util, or NPU AICore % */
    int64_t mem_used_mb;  /* device memory in MiB: HBM where the chip has it, else DDR */
    int64_t mem_total_mb; /* (for GPUs: Memory-Usage) */
    int64_t hbm_used_mb;  /* NPU HBM-Usage column, as printed */
    int64_t hbm_total_mb;
    int64_t ddr_used_mb; /* NPU Memory-Usage column, as printed */
    int64_t ddr_total_mb;
    double power_w; /* current draw, watts */
    int64_t temp_c; /* degrees Celsius */
    char host[64];  /* the node it is on, for another node's device (multi-node); "" here */
};

/* Validity bits of struct smi_proc. */
enum smi_proc_field {
    SMI_PROC_PID = 1u << 0,
    SMI_PROC_DEV = 1u << 1,           /* dev_index */
    SMI_PROC_CHIP = 1u << 2,          /* chip (NPUs only) */
    SMI_PROC_NAME = 1u << 3,          /* name; blank names stay unknown */
    SMI_PROC_MEM = 1u << 4,           /* mem_mb */
    SMI_PROC_CONTAINER_PID = 1u << 5, /* container_pid (npu-smi 26.x) */
    SMI_PROC_GI = 1u << 6,            /* gi (MIG GPU instance) */
    SMI_PROC_CI = 1u << 7,            /* ci (MIG compute instance) */
    SMI_PROC_TYPE = 1u << 8,          /* type */
    SMI_PROC_UUID = 1u << 9,          /* gpu_uuid */
    SMI_PROC_BUS_ID = 1u << 10,       /* gpu_bus_id */
    SMI_PROC_SM = 1u << 11,           /* sm_pct (pmon) */
    SMI_PROC_MEMUTIL = 1u << 12,      /* memutil_pct (pmon) */
};

/* One process on one device. A process on several devices gives several records. */
struct smi_proc {
    enum smi_kind kind;
    uint32_t valid;      /* enum smi_proc_field bits */
    int pid;             /* as the tool saw it (host PID namespace for nvidia-smi) */
    int dev_index;       /* GPU index or NPU card id */
    int chip;            /* NPU chip within the card; -1 for GPUs */
    int container_pid;   /* npu-smi "Process id in container" */
    int gi, ci;          /* MIG instance ids */
    char type[8];        /* "C", "G", "C+G", "M"... */
    char name[256];      /* as printed: 15-char comm, path, or left-ellipsized "...ware/x" */
    char gpu_uuid[96];   /* query-compute-apps only: the join key to a device */
    char gpu_bus_id[32]; /* query-compute-apps only */
    int64_t mem_mb;      /* device memory used by this process, MiB */
    int64_t sm_pct;      /* pmon only */
    int64_t memutil_pct; /* pmon only: memory-controller busy %, not MiB */
};

/* One row of `npu-smi info -m`. */
struct smi_chipmap {
    uint32_t valid; /* SMI_DEV_INDEX, SMI_DEV_CHIP, SMI_DEV_LOGIC_ID, SMI_DEV_PHY_ID,
                       SMI_DEV_NAME */
    int npu_id;
    int chip_id;
    int logic_id; /* -1 when npu-smi prints "-" (the Mcu row) */
    int phy_id;
    char name[64]; /* "Ascend 910A", "Mcu" */
};

/* What one or more parses produced. Parsers append to it; smi_result_reset empties it. */
struct smi_result {
    struct smi_device *devs;
    size_t ndevs, devs_cap;
    struct smi_proc *procs;
    size_t nprocs, procs_cap;
    struct smi_chipmap *maps;
    size_t nmaps, maps_cap;
    char tool_version[32];   /* "590.48.01" from "NVIDIA-SMI ...", "23.0.rc1" from "npu-smi" */
    char driver_version[32]; /* Driver Version / KMD Version / npu-smi "Version:" */
    char cuda_version[16];   /* CUDA Version / CUDA UMD Version */
    unsigned skipped;        /* data lines recognised but not usable (malformed, cut) */
    unsigned skipped_line;   /* 1-based line number of the first of them */
    int status;              /* outcome of the last parse: 0 or a negative app_status */
    char msg[256];           /* its one-line message, or a note about skipped lines */
};

void smi_result_init(struct smi_result *r);
void smi_result_fini(struct smi_result *r);
/* Drops every record and message but keeps the arrays for reuse. */
void smi_result_reset(struct smi_result *r);

/* Append copies of a record; the returned pointer is valid until the next append. */
struct smi_device *smi_result_add_device(struct smi_result *r, const struct smi_device *d);
struct smi_proc *smi_result_add_proc(struct smi_result *r, const struct smi_proc *p);
struct smi_chipmap *smi_result_add_map(struct smi_result *r, const struct smi_chipmap *m);

/* Fill a record with "everything unknown" for the given kind. */
void smi_device_init(struct smi_device *d, enum smi_kind kind);
void smi_proc_init(struct smi_proc *p, enum smi_kind kind);
void smi_chipmap_init(struct smi_chipmap *m);

/* "gpu" or "npu". */
const char *smi_kind_name(enum smi_kind kind);

static inline bool smi_dev_has(const struct smi_device *d, uint32_t field)
{
    return (d->valid & field) == field;
}

static inline bool smi_proc_has(const struct smi_proc *p, uint32_t field)
{
    return (p->valid & field) == field;
}

#endif
