/* NVML through dlopen, as nvtop does: our own minimal types, every entry point looked up by
 * name with the newest version first (the file search and the binding are dlib.c's).
 *
 * Owns one dlopen handle, one nvmlInit (undone by nvmlShutdown in nvml_close) and a scratch
 * array for process lists that only grows. Invariants: the required entry points (init,
 * shutdown, count, handle) are non-NULL after nvml_open; the element size of the process
 * array always follows the symbol dlsym returned (16 bytes for the unversioned call, 24 for
 * _v2 and _v3); GetMemoryInfo_v2 is dropped for good once it answers "version mismatch".
 * Layouts are the LP64 ones of nvml.h (see docs devices.md 2.3). NVML is thread-safe, but one
 * struct nvml belongs to one thread at a time because of the scratch array. */
#include "nvml.h"

#include "dlib.h"
#include "ranktop/base/util.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NVML_SUCCESS 0
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NO_PERMISSION 4
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_LIBRARY_NOT_FOUND 12
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_LIB_RM_VERSION_MISMATCH 18
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25

#define NVML_VALUE_NOT_AVAILABLE 0xFFFFFFFFFFFFFFFFull
#define NVML_NO_INSTANCE 0xFFFFFFFFu
#define NVML_MEMORY_V2_VERSION 0x02000028u /* sizeof(nvmlMemory_v2_t) | 2 << 24 */
#define NVML_BUF 96                        /* NVML_DEVICE_{NAME,UUID}_V2_BUFFER_SIZE */
#define NVML_PROC_TRIES 8                  /* "insufficient size" retries before giving up */
#define NVML_PROC_MAX 65536 /* more processes than this on one GPU is a broken answer */
#define NVML_MAX_GPUS 1024  /* likewise for GPUs */
#define MIB (1024.0 * 1024.0)

typedef int nvml_ret;
typedef struct nvml_device *nvml_dev; /* opaque nvmlDevice_t */

struct nvml_memory_v1 {
    unsigned long long total, free, used; /* bytes */
};

struct nvml_memory_v2 {
    unsigned int version;
    unsigned long long total, reserved, free, used; /* bytes */
};

struct nvml_util {
    unsigned int gpu, memory; /* percent */
};

struct nvml_pci {
    char bus_id_legacy[16]; /* the whole busId of the unversioned call */
    unsigned int domain, bus, device, device_id, subsys_id;
    char bus_id[32]; /* _v2 and _v3 */
};

_Static_assert(sizeof(struct nvml_memory_v1) == 24, "nvmlMemory_t layout");
_Static_assert(sizeof(struct nvml_memory_v2) == 40, "nvmlMemory_v2_t layout");
_Static_assert(sizeof(struct nvml_pci) == 68, "nvmlPciInfo_t layout");

struct nvml {
    void *lib;
    char path[256];
    nvml_ret (*init)(void);
    nvml_ret (*shutdown)(void);
    const char *(*error_string)(nvml_ret);
    nvml_ret (*driver_version)(char *, unsigned int);
    nvml_ret (*count)(unsigned int *);
    nvml_ret (*handle)(unsigned int, nvml_dev *);
    nvml_ret (*name)(nvml_dev, char *, unsigned int);
    nvml_ret (*uuid)(nvml_dev, char *, unsigned int);
    nvml_ret (*pci)(nvml_dev, struct nvml_pci *);
    nvml_ret (*util)(nvml_dev, struct nvml_util *);
    nvml_ret (*mem_v2)(nvml_dev, struct nvml_memory_v2 *);
    nvml_ret (*mem_v1)(nvml_dev, struct nvml_memory_v1 *);
    nvml_ret (*power)(nvml_dev, unsigned int *);
    nvml_ret (*temp)(nvml_dev, int, unsigned int *);
    nvml_ret (*mig_mode)(nvml_dev, unsigned int *, unsigned int *);
    nvml_ret (*procs)(nvml_dev, unsigned int *, void *);
    const char *init_sym, *procs_sym;
    char driver[32];  /* nvmlSystemGetDriverVersion, "" when unknown */
    int pci_version;  /* 1 = unversioned (bus id at offset 0), 2 or 3 */
    size_t proc_size; /* element size that procs expects */
    unsigned char *proc_buf;
    size_t proc_cap; /* elements */
};

static const char *errstr(const struct nvml *n, nvml_ret rc)
{
    const char *s = n->error_string ? n->error_string(rc) : NULL;

    return s ? s : "unknown error";
}

static int map_status(nvml_ret rc)
{
    switch (rc) {
    case NVML_ERROR_NO_PERMISSION:
        return APP_E_PERM;
    case NVML_ERROR_NOT_FOUND:
    case NVML_ERROR_LIBRARY_NOT_FOUND:
        return APP_E_NOTFOUND;
    default:
        return APP_E_IO;
    }
}

/* What a user should do about the few failures that have one clear cause. */
static const char *hint(nvml_ret rc)
{
    switch (rc) {
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return ": couldn't communicate with the NVIDIA driver; make sure it is installed "
               "and loaded";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return ": driver/library version mismatch; reload the nvidia module or reboot";
    case NVML_ERROR_NO_PERMISSION:
        return ": insufficient permissions";
    case NVML_ERROR_GPU_IS_LOST:
        return ": the GPU has fallen off the bus";
    default:
        return "";
    }
}

static int nvml_fail(const struct nvml *n, const char *call, nvml_ret rc, struct app_err *err)
{
    return app_err_set(err, map_status(rc), "NVML (%s): %s: %s (%d)%s", n->path, call,
                       errstr(n, rc), rc, hint(rc));
}

static const struct dlib_spec nvml_spec = {
    .who = "NVML",
    .env = "RANKTOP_NVML_LIB",
    .fallback = "libnvidia-ml.so.1",
    .hint = " (no NVIDIA driver on this host?)",
    .what = "an NVML library",
};

/* Looks up every entry point. The four without which nothing works are required, listed in
 * the order of blame: nvmlInit first, the one to name when nothing matches. */
static int load_all(struct nvml *n, struct app_err *err)
{
    const char *pci = NULL;
    const struct dlib_sym syms[] = {
        {&n->init, DLIB_NAMES("nvmlInit_v2", "nvmlInit"), "nvmlInit", &n->init_sym},
        {&n->shutdown, DLIB_NAMES("nvmlShutdown"), "nvmlShutdown", NULL},
        {&n->handle, DLIB_NAMES("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"),
         "nvmlDeviceGetHandleByIndex", NULL},
        {&n->count, DLIB_NAMES("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"), "nvmlDeviceGetCount",
         NULL},
        {&n->error_string, DLIB_NAMES("nvmlErrorString"), NULL, NULL},
        {&n->driver_version, DLIB_NAMES("nvmlSystemGetDriverVersion"), NULL, NULL},
        {&n->name, DLIB_NAMES("nvmlDeviceGetName"), NULL, NULL},
        {&n->uuid, DLIB_NAMES("nvmlDeviceGetUUID"), NULL, NULL},
        {&n->pci,
         DLIB_NAMES("nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"),
         NULL, &pci},
        {&n->util, DLIB_NAMES("nvmlDeviceGetUtilizationRates"), NULL, NULL},
        {&n->mem_v2, DLIB_NAMES("nvmlDeviceGetMemoryInfo_v2"), NULL, NULL},
        {&n->mem_v1, DLIB_NAMES("nvmlDeviceGetMemoryInfo"), NULL, NULL},
        {&n->power, DLIB_NAMES("nvmlDeviceGetPowerUsage"), NULL, NULL},
        {&n->temp, DLIB_NAMES("nvmlDeviceGetTemperature"), NULL, NULL},
        {&n->mig_mode, DLIB_NAMES("nvmlDeviceGetMigMode"), NULL, NULL},
        {&n->procs,
         DLIB_NAMES("nvmlDeviceGetComputeRunningProcesses_v3",
                    "nvmlDeviceGetComputeRunningProcesses_v2",
                    "nvmlDeviceGetComputeRunningProcesses"),
         NULL, &n->procs_sym},
    };
    const char *missing = dlib_bind(n->lib, syms, sizeof(syms) / sizeof(syms[0]));

    if (missing)
        return dlib_missing(&nvml_spec, n->path, missing, err);
    n->pci_version = !pci ? 0 : strstr(pci, "_v3") ? 3 : strstr(pci, "_v2") ? 2 : 1;
    /* v2 and v3 take the 24-byte nvmlProcessInfo_t, the unversioned call the 16-byte v1. */
    n->proc_size = n->procs_sym && strstr(n->procs_sym, "_v") ? 24 : 16;
    return 0;
}

static int open_lib(struct nvml *n, struct app_err *err)
{
    static const char *const names[] = {"libnvidia-ml.so.1", "libnvidia-ml.so"};

    return dlib_open(&nvml_spec, names, sizeof(names) / sizeof(names[0]), &n->lib, n->path,
                     sizeof(n->path), err);
}

static void read_driver(struct nvml *n)
{
    char buf[80] = "";

    if (n->driver_version && n->driver_version(buf, sizeof(buf)) == NVML_SUCCESS)
        snprintf(n->driver, sizeof(n->driver), "%.*s", (int)sizeof(n->driver) - 1, buf);
}

int nvml_open(struct nvml **out, struct app_err *err)
{
    struct nvml *n = x_calloc(1, sizeof(*n));
    nvml_ret nrc;
    int rc;

    *out = NULL;
    rc = open_lib(n, err);
    if (rc == 0)
        rc = load_all(n, err);
    if (rc == 0 && (nrc = n->init()) != NVML_SUCCESS)
        rc = nvml_fail(n, n->init_sym, nrc, err);
    if (rc == 0)
        read_driver(n);
    if (rc < 0) {
        if (n->lib)
            dlclose(n->lib);
        free(n);
        return rc;
    }
    *out = n;
    return 0;
}

const char *nvml_path(const struct nvml *n)
{
    return n->path;
}

void nvml_close(struct nvml *n)
{
    if (!n)
        return;
    n->shutdown();
    dlclose(n->lib);
    free(n->proc_buf);
    free(n);
}

/* Keeps the first note of a collect pass in r->msg (later ones add nothing new). */
static void note(struct smi_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(struct smi_result *r, const char *fmt, ...)
{
    va_list ap;

    if (r->msg[0])
        return;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
    va_end(ap);
}

static void read_strings(struct nvml *n, nvml_dev h, struct smi_device *d)
{
    char buf[NVML_BUF];
    struct nvml_pci pci;

    if (n->name && n->name(h, buf, sizeof(buf)) == NVML_SUCCESS) {
        snprintf(d->name, sizeof(d->name), "%.*s", (int)sizeof(buf), buf);
        d->valid |= SMI_DEV_NAME;
    }
    if (n->uuid && n->uuid(h, buf, sizeof(buf)) == NVML_SUCCESS) {
        snprintf(d->uuid, sizeof(d->uuid), "%.*s", (int)sizeof(buf), buf);
        d->valid |= SMI_DEV_UUID;
    }
    memset(&pci, 0, sizeof(pci));
    if (n->pci && n->pci(h, &pci) == NVML_SUCCESS) {
        const char *id = n->pci_version >= 2 ? pci.bus_id : pci.bus_id_legacy;
        int len = n->pci_version >= 2 ? (int)sizeof(pci.bus_id) : (int)sizeof(pci.bus_id_legacy);

        snprintf(d->bus_id, sizeof(d->bus_id), "%.*s", len, id);
        if (d->bus_id[0])
            d->valid |= SMI_DEV_BUS_ID;
    }
}

/* Memory in MiB: _v2 (whose `used` matches nvidia-smi's memory.used), else v1. */
static void read_memory(struct nvml *n, nvml_dev h, struct smi_device *d)
{
    unsigned long long total = 0, used = 0;
    bool ok = false;

    if (n->mem_v2) {
        struct nvml_memory_v2 m = {.version = NVML_MEMORY_V2_VERSION};
        nvml_ret rc = n->mem_v2(h, &m);

        if (rc == NVML_SUCCESS)
            ok = true, total = m.total, used = m.used;
        else if (rc == NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
            n->mem_v2 = NULL; /* an older driver: ask v1 from now on */
    }
    if (!ok && n->mem_v1) {
        struct nvml_memory_v1 m;

        if (n->mem_v1(h, &m) == NVML_SUCCESS)
            ok = true, total = m.total, used = m.used;
    }
    if (!ok)
        return;
    d->mem_total_mb = (int64_t)(total >> 20);
    d->mem_used_mb = (int64_t)(used >> 20);
    d->valid |= SMI_DEV_MEM_TOTAL | SMI_DEV_MEM_USED;
}

/* Utilisation, power and temperature. Under MIG the whole GPU has no utilisation figure
 * (nvidia-smi prints N/A), so it is not asked for. */
static void read_sensors(struct nvml *n, nvml_dev h, struct smi_device *d)
{
    unsigned int cur = 0, pending = 0, v;
    struct nvml_util u;
    bool mig = n->mig_mode && n->mig_mode(h, &cur, &pending) == NVML_SUCCESS && cur == 1;

    if (!mig && n->util && n->util(h, &u) == NVML_SUCCESS && u.gpu <= 100) {
        d->util_pct = u.gpu;
        d->valid |= SMI_DEV_UTIL;
    }
    if (n->power && n->power(h, &v) == NVML_SUCCESS) {
        d->power_w = v / 1000.0; /* milliwatts */
        d->valid |= SMI_DEV_POWER;
    }
    if (n->temp && n->temp(h, 0 /* NVML_TEMPERATURE_GPU */, &v) == NVML_SUCCESS) {
        d->temp_c = v;
        d->valid |= SMI_DEV_TEMP;
    }
}

/* Fills n->proc_buf with the GPU's compute processes: try with the buffer we have, and on
 * "insufficient size" grow to the count NVML asked for plus slack and try again, a bounded
 * number of times (processes may appear between two calls). Returns NVML's code. */
static nvml_ret read_procs(struct nvml *n, nvml_dev h, unsigned int *count)
{
    nvml_ret rc = NVML_ERROR_INSUFFICIENT_SIZE;

    for (int tries = 0; tries < NVML_PROC_TRIES && rc == NVML_ERROR_INSUFFICIENT_SIZE; tries++) {
        *count = (unsigned int)n->proc_cap;
        rc = n->procs(h, count, n->proc_cap ? n->proc_buf : NULL);
        if (rc != NVML_ERROR_INSUFFICIENT_SIZE)
            break;
        if (*count > NVML_PROC_MAX)
            return rc;
        if (*count + 8u > n->proc_cap) {
            n->proc_cap = *count + *count / 4 + 8;
            n->proc_buf = x_reallocarray(n->proc_buf, n->proc_cap, n->proc_size);
        } else {
            /* NVML wants less than we offered: a misbehaving library, do not spin. */
            break;
        }
    }
    if (rc == NVML_SUCCESS && *count > n->proc_cap)
        *count = (unsigned int)n->proc_cap;
    return rc;
}

static void add_proc(struct smi_result *r, const unsigned char *e, size_t size, int index,
                     const struct smi_device *d)
{
    struct smi_proc p;
    unsigned int pid, gi, ci;
    unsigned long long mem;

    smi_proc_init(&p, SMI_KIND_GPU);
    memcpy(&pid, e, sizeof(pid));
    memcpy(&mem, e + 8, sizeof(mem));
    p.pid = (int)pid;
    p.dev_index = index;
    snprintf(p.type, sizeof(p.type), "C");
    p.valid |= SMI_PROC_PID | SMI_PROC_DEV | SMI_PROC_TYPE;
    if (mem != NVML_VALUE_NOT_AVAILABLE) {
        p.mem_mb = (int64_t)(mem >> 20);
        p.valid |= SMI_PROC_MEM;
    }
    if (size >= 24) {
        memcpy(&gi, e + 16, sizeof(gi));
        memcpy(&ci, e + 20, sizeof(ci));
        if (gi != NVML_NO_INSTANCE)
            p.gi = (int)gi, p.valid |= SMI_PROC_GI;
        if (ci != NVML_NO_INSTANCE)
            p.ci = (int)ci, p.valid |= SMI_PROC_CI;
    }
    if (smi_dev_has(d, SMI_DEV_UUID)) {
        snprintf(p.gpu_uuid, sizeof(p.gpu_uuid), "%s", d->uuid);
        p.valid |= SMI_PROC_UUID;
    }
    if (smi_dev_has(d, SMI_DEV_BUS_ID)) {
        snprintf(p.gpu_bus_id, sizeof(p.gpu_bus_id), "%s", d->bus_id);
        p.valid |= SMI_PROC_BUS_ID;
    }
    smi_result_add_proc(r, &p);
}

static void collect_procs(struct nvml *n, nvml_dev h, const struct smi_device *d,
                          struct smi_result *r)
{
    unsigned int count = 0;
    nvml_ret rc;

    if (!n->procs)
        return;
    rc = read_procs(n, h, &count);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
        note(r, "GPU %d: %s: the process list kept growing (%u), gave up", d->index, n->procs_sym,
             count);
        return;
    }
    if (rc != NVML_SUCCESS) {
        if (rc != NVML_ERROR_NOT_SUPPORTED)
            note(r, "GPU %d: %s: %s (%d)", d->index, n->procs_sym, errstr(n, rc), rc);
        return;
    }
    for (unsigned int i = 0; i < count; i++)
        add_proc(r, n->proc_buf + (size_t)i * n->proc_size, n->proc_size, d->index, d);
}

static void collect_gpu(struct nvml *n, unsigned int index, struct smi_result *r)
{
    struct smi_device d;
    nvml_dev h = NULL;
    nvml_ret rc;

    smi_device_init(&d, SMI_KIND_GPU);
    d.index = (int)index;
    d.valid |= SMI_DEV_INDEX;
    rc = n->handle(index, &h);
    if (rc != NVML_SUCCESS) {
        note(r, "GPU %u: nvmlDeviceGetHandleByIndex: %s (%d)%s", index, errstr(n, rc), rc,
             hint(rc));
        r->skipped++;
        smi_result_add_device(r, &d);
        return;
    }
    read_strings(n, h, &d);
    read_memory(n, h, &d);
    read_sensors(n, h, &d);
    smi_result_add_device(r, &d);
    collect_procs(n, h, &d, r);
}

int nvml_collect(struct nvml *n, struct smi_result *r, struct app_err *err)
{
    unsigned int count = 0;
    nvml_ret rc;

    snprintf(r->driver_version, sizeof(r->driver_version), "%s", n->driver);
    rc = n->count(&count);
    if (rc != NVML_SUCCESS) {
        struct app_err e2;

        r->status = nvml_fail(n, "nvmlDeviceGetCount", rc, &e2);
        snprintf(r->msg, sizeof(r->msg), "%.*s", (int)sizeof(r->msg) - 1, e2.msg);
        return app_err_set(err, r->status, "%s", e2.msg);
    }
    if (count > NVML_MAX_GPUS) {
        note(r, "nvmlDeviceGetCount: %u GPUs? reading the first %d", count, NVML_MAX_GPUS);
        count = NVML_MAX_GPUS;
    }
    for (unsigned int i = 0; i < count; i++)
        collect_gpu(n, i, r);
    r->status = 0;
    return 0;
}
