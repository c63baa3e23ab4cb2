/* A stand-in libnvidia-ml.so.1 that serves recorded nvidia-smi values through the NVML ABI.
 *
 * nvmlInit reads the CSV files named by FAKE_NVML_GPUS (`nvidia-smi --query-gpu=...
 * --format=csv[,noheader][,nounits]`) and FAKE_NVML_APPS (`--query-compute-apps=...`), with
 * its own small CSV code (the project's parsers are deliberately not linked in). With a
 * header, columns are found by name; without one, nvidia-smi's usual order is assumed
 * (index,uuid,name,utilization.gpu,memory.used,memory.total,power.draw[,temperature.gpu] and
 * pid,process_name,used_gpu_memory,gpu_uuid). Lines starting with '#' are comments. Two
 * columns nvidia-smi does not print are accepted in the apps file: gpu_instance_id and
 * compute_instance_id (MIG). `[N/A]`-style cells make the matching call answer "not
 * supported" (NVML_VALUE_NOT_AVAILABLE for process memory). A GPU whose mig.mode.current is
 * "Enabled" answers NOT_SUPPORTED to GetUtilizationRates, as a real MIG GPU does.
 *
 * Memory: GetMemoryInfo_v2's `used` is nvidia-smi's memory.used and `reserved` its
 * memory.reserved; the v1 call reports used = total - free (reserved included), as nvml.h
 * describes v1. Processes go to the GPU with the same gpu_bus_id, else the same gpu_uuid,
 * else the only GPU.
 *
 * Other knobs: FAKE_NVML_PID_MAP="old:new,..." rewrites PIDs; FAKE_NVML_INIT_ERROR=N makes
 * nvmlInit return N; FAKE_NVML_RACE=K makes the first K process-list calls that would fit
 * answer INSUFFICIENT_SIZE asking for one more than offered (processes appearing);
 * FAKE_NVML_MEM_V2_MISMATCH=1 makes GetMemoryInfo_v2 answer ARGUMENT_VERSION_MISMATCH;
 * FAKE_NVML_LOST_GPU=I makes the handle of GPU I answer GPU_IS_LOST. Built with
 * -DFAKE_NVML_V1_ONLY it exports only the unversioned entry points of old drivers (16-byte
 * process records, no _v2 memory call). Single-threaded test use only. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GPUS 64
#define MAX_PROCS 4096
#define MAX_CELLS 256
#define NA_U64 0xFFFFFFFFFFFFFFFFull

enum {
    OK = 0,
    E_UNINIT = 1,
    E_ARG = 2,
    E_NOT_SUPPORTED = 3,
    E_INSUFFICIENT = 7,
    E_LOST = 15,
    E_VERSION = 25,
    E_UNKNOWN = 999,
};

struct fgpu {
    char name[96], uuid[96], bus[32], driver[80];
    long long util, memutil;               /* percent, -1 unknown */
    long long total, used, free, reserved; /* MiB, -1 unknown */
    double power;                          /* W, < 0 unknown */
    long long temp;                        /* C, -1 unknown */
    bool mig;
};

struct fproc {
    unsigned int pid, gi, ci;
    long long mem; /* MiB, -1 = [N/A] */
    char uuid[96], bus[32];
    int gpu;
};

typedef struct fgpu *nvmlDevice_t;
typedef int nvmlReturn_t;

struct mem_v1 {
    unsigned long long total, free, used;
};
struct mem_v2 {
    unsigned int version;
    unsigned long long total, reserved, free, used;
};
struct util {
    unsigned int gpu, memory;
};
struct pci {
    char bus_legacy[16];
    unsigned int domain, bus, device, device_id, subsys_id;
    char bus_id[32];
};
struct proc_v1 {
    unsigned int pid;
    unsigned long long mem;
};
struct proc_v2 {
    unsigned int pid;
    unsigned long long mem;
    unsigned int gi, ci;
};

/* The exported ABI (prototypes keep -Wmissing-prototypes quiet). */
nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t rc);
nvmlReturn_t nvmlSystemGetDriverVersion(char *buf, unsigned int len);
nvmlReturn_t nvmlDeviceGetCount(unsigned int *count);
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *buf, unsigned int len);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *buf, unsigned int len);
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t d, struct pci *p);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, struct util *u);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, struct mem_v1 *m);
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw);
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t);
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *cur, unsigned int *pending);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *n,
                                                  struct proc_v1 *p);
#ifndef FAKE_NVML_V1_ONLY
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d);
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t d, struct pci *p);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, struct pci *p);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, struct mem_v2 *m);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *n,
                                                     struct proc_v2 *p);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n,
                                                     struct proc_v2 *p);
#endif

static struct fgpu gpus[MAX_GPUS];
static struct fproc procs[MAX_PROCS];
static unsigned int ngpus, nprocs;
static int refs;
static long race_left;

/* ---- small CSV reader ---- */

static char *trim(char *s)
{
    size_t n;

    while (*s == ' ' || *s == '\t')
        s++;
    n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

/* Splits line in place at commas; returns the number of cells. */
static size_t split(char *line, char **cells)
{
    size_t n = 0;
    char *p = line;

    for (;;) {
        char *c = strchr(p, ',');

        if (c)
            *c = '\0';
        if (n < MAX_CELLS)
            cells[n++] = trim(p);
        if (!c)
            return n;
        p = c + 1;
    }
}

/* Header names lose their " [unit]" suffix. */
static void strip_unit(char *s)
{
    char *b = strchr(s, '[');

    if (b && b > s && b[-1] == ' ')
        b[-1] = '\0';
}

static int col(char *const *hdr, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(hdr[i], name) == 0)
            return (int)i;
    return -1;
}

static const char *cell(char *const *cells, size_t n, int i)
{
    return i >= 0 && (size_t)i < n ? cells[i] : "";
}

static bool unknown(const char *s)
{
    return !*s || *s == '[' || strcmp(s, "N/A") == 0 || strcmp(s, "NA") == 0 || strcmp(s, "-") == 0;
}

static long long num(const char *s)
{
    char *end;
    double v;

    if (unknown(s))
        return -1;
    errno = 0;
    v = strtod(s, &end);
    return end == s || errno ? -1 : (long long)(v + 0.5);
}

static double dnum(const char *s)
{
    char *end;
    double v;

    if (unknown(s))
        return -1.0;
    v = strtod(s, &end);
    return end == s ? -1.0 : v;
}

static void copy(char *dst, size_t cap, const char *s)
{
    snprintf(dst, cap, "%s", unknown(s) ? "" : s);
}

/* A whole CSV file: its data lines and the column names (from the header, or the defaults). */
struct csv {
    char *text, *hdrline;
    char *lines[MAX_PROCS + 2];
    size_t nlines;
    char *hdr[MAX_CELLS];
    size_t nhdr;
};

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0, got;

    if (!f)
        return NULL;
    do {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 65536;
            buf = realloc(buf, cap);
            if (!buf)
                abort();
        }
        got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
    } while (got > 0);
    fclose(f);
    buf[len] = '\0';
    return buf;
}

/* Cuts text into its non-blank, non-comment lines. */
static void cut_lines(struct csv *c)
{
    char *save = NULL, *line;

    for (line = strtok_r(c->text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        line = trim(line);
        if (*line && *line != '#' && c->nlines < sizeof(c->lines) / sizeof(c->lines[0]))
            c->lines[c->nlines++] = line;
    }
}

/* Reads path; a first line naming one of the columns in defcols is the header, else the
 * columns are defcols in that order. */
static bool csv_open(struct csv *c, const char *path, const char *const *defcols)
{
    memset(c, 0, sizeof(*c));
    c->text = slurp(path);
    if (!c->text) {
        fprintf(stderr, "fake_nvml: %s: %s\n", path, strerror(errno));
        return false;
    }
    cut_lines(c);
    if (c->nlines) {
        c->hdrline = strdup(c->lines[0]);
        c->nhdr = split(c->hdrline, c->hdr);
        for (size_t i = 0; i < c->nhdr; i++)
            strip_unit(c->hdr[i]);
        for (size_t k = 0; defcols[k]; k++) {
            if (col(c->hdr, c->nhdr, defcols[k]) >= 0) {
                memmove(c->lines, c->lines + 1, --c->nlines * sizeof(c->lines[0]));
                return true;
            }
        }
    }
    for (c->nhdr = 0; defcols[c->nhdr]; c->nhdr++)
        c->hdr[c->nhdr] = (char *)(uintptr_t)defcols[c->nhdr];
    return true;
}

static void csv_close(struct csv *c)
{
    free(c->text);
    free(c->hdrline);
}

/* Splits data line i; a process name with commas in it spreads over several cells, which
 * are dropped so that the columns after it line up. */
static size_t csv_row(struct csv *c, size_t i, char **cells)
{
    size_t n = split(c->lines[i], cells);
    int name = col(c->hdr, c->nhdr, "process_name");

    if (n > c->nhdr && name >= 0) {
        size_t extra = n - c->nhdr;

        memmove(cells + name + 1, cells + name + 1 + extra,
                (n - (size_t)name - 1 - extra) * sizeof(cells[0]));
        n -= extra;
    }
    return n;
}

/* ---- loading the recorded values ---- */

static void load_gpu(struct csv *c, char **v, size_t n, struct fgpu *g)
{
#define C(name) cell(v, n, col(c->hdr, c->nhdr, name))
    long long total, used;

    memset(g, 0, sizeof(*g));
    copy(g->name, sizeof(g->name), C("name"));
    copy(g->uuid, sizeof(g->uuid), C("uuid"));
    copy(g->bus, sizeof(g->bus), C("pci.bus_id"));
    copy(g->driver, sizeof(g->driver), C("driver_version"));
    g->util = num(C("utilization.gpu"));
    g->memutil = num(C("utilization.memory"));
    g->total = total = num(C("memory.total"));
    g->used = used = num(C("memory.used"));
    g->reserved = num(C("memory.reserved"));
    g->free = num(C("memory.free"));
    if (g->free < 0 && total >= 0 && used >= 0)
        g->free = total - used - (g->reserved > 0 ? g->reserved : 0);
    g->power = dnum(C("power.draw"));
    g->temp = num(C("temperature.gpu"));
    g->mig = strcmp(C("mig.mode.current"), "Enabled") == 0;
#undef C
}

static bool load_gpus(const char *path)
{
    static const char *const def[] = {
        "index",       "uuid",         "name",       "utilization.gpu",
        "memory.used", "memory.total", "power.draw", "temperature.gpu",
        NULL};
    struct csv c;
    char *v[MAX_CELLS];

    if (!csv_open(&c, path, def))
        return false;
    for (size_t i = 0; i < c.nlines && ngpus < MAX_GPUS; i++) {
        size_t n = csv_row(&c, i, v);

        load_gpu(&c, v, n, &gpus[ngpus++]);
    }
    csv_close(&c);
    return true;
}

static unsigned int map_pid(unsigned int pid)
{
    const char *m = getenv("FAKE_NVML_PID_MAP");

    while (m && *m) {
        char *end;
        unsigned long from = strtoul(m, &end, 10), to;

        if (*end != ':')
            break;
        to = strtoul(end + 1, &end, 10);
        if (from == pid)
            return (unsigned int)to;
        m = *end == ',' ? end + 1 : end;
        if (*end != ',')
            break;
    }
    return pid;
}

/* The GPU a process row belongs to: same bus id, else same uuid, else the only GPU. */
static int owner(const struct fproc *p)
{
    for (unsigned int i = 0; i < ngpus; i++)
        if (p->bus[0] && strcmp(p->bus, gpus[i].bus) == 0)
            return (int)i;
    for (unsigned int i = 0; i < ngpus; i++)
        if (p->uuid[0] && strcmp(p->uuid, gpus[i].uuid) == 0)
            return (int)i;
    return ngpus == 1 ? 0 : -1;
}

static void load_proc(struct csv *c, char **v, size_t n)
{
#define C(name) cell(v, n, col(c->hdr, c->nhdr, name))
    struct fproc *p = &procs[nprocs];
    long long gi = num(C("gpu_instance_id")), ci = num(C("compute_instance_id"));
    const char *mem =
        col(c->hdr, c->nhdr, "used_memory") >= 0 ? C("used_memory") : C("used_gpu_memory");

    memset(p, 0, sizeof(*p));
    p->pid = map_pid((unsigned int)num(C("pid")));
    p->mem = num(mem);
    p->gi = gi < 0 ? 0xFFFFFFFFu : (unsigned int)gi;
    p->ci = ci < 0 ? 0xFFFFFFFFu : (unsigned int)ci;
    copy(p->uuid, sizeof(p->uuid), C("gpu_uuid"));
    copy(p->bus, sizeof(p->bus), C("gpu_bus_id"));
    p->gpu = owner(p);
    if (p->gpu >= 0)
        nprocs++;
    else
        fprintf(stderr, "fake_nvml: pid %u: no GPU with its bus id or uuid\n", p->pid);
#undef C
}

static bool load_apps(const char *path)
{
    static const char *const def[] = {"pid", "process_name", "used_gpu_memory", "gpu_uuid", NULL};
    struct csv c;
    char *v[MAX_CELLS];

    if (!csv_open(&c, path, def))
        return false;
    for (size_t i = 0; i < c.nlines && nprocs < MAX_PROCS; i++) {
        size_t n = csv_row(&c, i, v);

        if (num(cell(v, n, col(c.hdr, c.nhdr, "pid"))) > 0)
            load_proc(&c, v, n);
    }
    csv_close(&c);
    return true;
}

static long env_long(const char *name, long def)
{
    const char *v = getenv(name);

    return v && *v ? strtol(v, NULL, 10) : def;
}

/* ---- the NVML entry points ---- */

static nvmlReturn_t init(void)
{
    const char *g = getenv("FAKE_NVML_GPUS"), *a = getenv("FAKE_NVML_APPS");
    long fail = env_long("FAKE_NVML_INIT_ERROR", 0);

    if (fail)
        return (nvmlReturn_t)fail;
    if (refs++ > 0)
        return OK;
    ngpus = nprocs = 0;
    race_left = env_long("FAKE_NVML_RACE", 0);
    if ((g && *g && !load_gpus(g)) || (a && *a && !load_apps(a))) {
        refs = 0;
        return E_UNKNOWN;
    }
    return OK;
}

nvmlReturn_t nvmlInit(void)
{
    return init();
}

nvmlReturn_t nvmlShutdown(void)
{
    if (refs <= 0)
        return E_UNINIT;
    refs--;
    return OK;
}

const char *nvmlErrorString(nvmlReturn_t rc)
{
    switch (rc) {
    case OK:
        return "Success";
    case E_UNINIT:
        return "Uninitialized";
    case E_ARG:
        return "Invalid Argument";
    case E_NOT_SUPPORTED:
        return "Not Supported";
    case 4:
        return "Insufficient Permissions";
    case E_INSUFFICIENT:
        return "Insufficient Size";
    case 9:
        return "Driver Not Loaded";
    case E_LOST:
        return "GPU is lost";
    case 18:
        return "Driver/library version mismatch";
    case E_VERSION:
        return "Argument version mismatch";
    default:
        return "Unknown Error";
    }
}

static bool live(const struct fgpu *d)
{
    return refs > 0 && d >= gpus && d < gpus + ngpus;
}

static nvmlReturn_t put_str(const char *s, char *buf, unsigned int len)
{
    if (!*s)
        return E_NOT_SUPPORTED;
    if (strlen(s) + 1 > len)
        return E_INSUFFICIENT;
    memcpy(buf, s, strlen(s) + 1);
    return OK;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *buf, unsigned int len)
{
    if (refs <= 0)
        return E_UNINIT;
    return put_str(ngpus ? gpus[0].driver : "", buf, len);
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count)
{
    if (refs <= 0)
        return E_UNINIT;
    *count = ngpus;
    return OK;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d)
{
    if (refs <= 0)
        return E_UNINIT;
    if (i >= ngpus)
        return E_ARG;
    if (env_long("FAKE_NVML_LOST_GPU", -1) == (long)i)
        return E_LOST;
    *d = &gpus[i];
    return OK;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *buf, unsigned int len)
{
    return live(d) ? put_str(d->name, buf, len) : E_ARG;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *buf, unsigned int len)
{
    return live(d) ? put_str(d->uuid, buf, len) : E_ARG;
}

/* The unversioned call had only the 16-byte busId at the front. */
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t d, struct pci *p)
{
    if (!live(d))
        return E_ARG;
    memset(p, 0, offsetof(struct pci, bus_id));
    /* Old drivers printed a 4-digit domain ("0000:00:09.0") into 16 bytes. */
    snprintf(p->bus_legacy, sizeof(p->bus_legacy), "%.15s",
             strlen(d->bus) == 16 && strncmp(d->bus, "0000", 4) == 0 ? d->bus + 4 : d->bus);
    return d->bus[0] ? OK : E_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, struct util *u)
{
    if (!live(d))
        return E_ARG;
    if (d->mig || d->util < 0)
        return E_NOT_SUPPORTED;
    u->gpu = (unsigned int)d->util;
    u->memory = d->memutil < 0 ? 0 : (unsigned int)d->memutil;
    return OK;
}

#define MIB_BYTES(v) ((unsigned long long)(v) << 20)

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, struct mem_v1 *m)
{
    if (!live(d))
        return E_ARG;
    if (d->total < 0 || d->free < 0)
        return E_NOT_SUPPORTED;
    m->total = MIB_BYTES(d->total);
    m->free = MIB_BYTES(d->free);
    m->used = m->total - m->free;
    return OK;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
    if (!live(d))
        return E_ARG;
    if (d->power < 0)
        return E_NOT_SUPPORTED;
    *mw = (unsigned int)(d->power * 1000.0 + 0.5);
    return OK;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t)
{
    if (!live(d) || sensor != 0)
        return E_ARG;
    if (d->temp < 0)
        return E_NOT_SUPPORTED;
    *t = (unsigned int)d->temp;
    return OK;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *cur, unsigned int *pending)
{
    if (!live(d))
        return E_ARG;
    *cur = *pending = d->mig ? 1 : 0;
    return OK;
}

/* The documented protocol: *n in = room, out = count; INSUFFICIENT_SIZE when it did not fit.
 * put(i, k) writes process i into slot k. */
static nvmlReturn_t list_procs(nvmlDevice_t d, unsigned int *n, void *buf, size_t size)
{
    unsigned int need = 0, k = 0;

    if (!live(d) || !n || (*n && !buf))
        return E_ARG;
    for (unsigned int i = 0; i < nprocs; i++)
        need += procs[i].gpu == (int)(d - gpus);
    if (need > *n || (need && race_left > 0)) {
        if (need <= *n)
            race_left--, need = *n + 1;
        *n = need;
        return E_INSUFFICIENT;
    }
    for (unsigned int i = 0; i < nprocs; i++) {
        struct proc_v2 e = {procs[i].pid, procs[i].mem < 0 ? NA_U64 : MIB_BYTES(procs[i].mem),
                            procs[i].gi, procs[i].ci};

        if (procs[i].gpu != (int)(d - gpus))
            continue;
        if (size == sizeof(struct proc_v2))
            memcpy((char *)buf + k * size, &e, size);
        else
            memcpy((char *)buf + k * size, &(struct proc_v1){e.pid, e.mem}, size);
        k++;
    }
    *n = k;
    return OK;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *n,
                                                  struct proc_v1 *p)
{
    return list_procs(d, n, p, sizeof(*p));
}

#ifndef FAKE_NVML_V1_ONLY
nvmlReturn_t nvmlInit_v2(void)
{
    return init();
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    return nvmlDeviceGetCount(count);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    return nvmlDeviceGetHandleByIndex(i, d);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t d, struct pci *p)
{
    if (!live(d))
        return E_ARG;
    memset(p, 0, sizeof(*p));
    snprintf(p->bus_legacy, sizeof(p->bus_legacy), "%.15s", d->bus);
    snprintf(p->bus_id, sizeof(p->bus_id), "%s", d->bus);
    return d->bus[0] ? OK : E_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, struct pci *p)
{
    return nvmlDeviceGetPciInfo_v2(d, p);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, struct mem_v2 *m)
{
    if (!live(d))
        return E_ARG;
    if (m->version != (sizeof(*m) | 2u << 24) || env_long("FAKE_NVML_MEM_V2_MISMATCH", 0))
        return E_VERSION;
    if (d->total < 0 || d->used < 0)
        return E_NOT_SUPPORTED;
    m->total = MIB_BYTES(d->total);
    m->used = MIB_BYTES(d->used);
    m->reserved = d->reserved < 0 ? 0 : MIB_BYTES(d->reserved);
    m->free = d->free < 0 ? 0 : MIB_BYTES(d->free);
    return OK;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *n,
                                                     struct proc_v2 *p)
{
    return list_procs(d, n, p, sizeof(*p));
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n,
                                                     struct proc_v2 *p)
{
    return list_procs(d, n, p, sizeof(*p));
}
#endif
