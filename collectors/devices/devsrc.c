/* Device sources for discovery: nvidia-smi and npu-smi, run under a deadline or read from a
 * recorded file, parsed by the pure parsers into the discovery's smi_result.
 *
 * nvidia-smi: the CSV query forms first (stable across drivers), the default table when the
 * query forms are refused. A tool that is missing, hangs or fails becomes one line in
 * d->errors and never stops the other source. Discovery thread. */
#include "ranktop/devsrc.h"

#include "dcmi.h"
#include "ranktop/exec.h"
#include "nvml.h"
#include "npusmi_parse.h"
#include "nvsmi_parse.h"
#include "ranktop/util.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPU_QUERY                                                                                  \
    "--query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,power.draw,"             \
    "temperature.gpu"
#define APPS_QUERY "--query-compute-apps=pid,process_name,used_memory,gpu_uuid"
#define CSV_FORMAT "--format=csv,noheader,nounits"

void devsrc_error(struct discovery *d, const char *fmt, ...)
{
    char buf[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    d->errors = x_reallocarray(d->errors, d->nerrors + 1, sizeof(char *));
    d->errors[d->nerrors++] = x_strdup(buf);
}

typedef int (*parse_fn)(const char *, size_t, struct smi_result *, struct app_err *);

static int parse_file(struct discovery *d, const char *tool, const char *path, parse_fn fn)
{
    struct app_err err = {0};
    char *buf;
    size_t len;
    int rc = file_read_all(path, 64u << 20, &buf, &len);

    if (rc < 0) {
        devsrc_error(d, "%s: cannot read %s: %s", tool, path, app_status_str(rc));
        return rc;
    }
    rc = fn(buf, len, &d->devs, &err);
    free(buf);
    if (rc < 0)
        devsrc_error(d, "%s: %s: %s", tool, path, err.msg);
    return rc;
}

/* Runs a tool; returns 0 with its output, or a negative status after recording the error. */
static int run_tool(struct discovery *d, const char *const argv[], int timeout_ms,
                    struct exec_result *res, bool quiet)
{
    struct app_err err = {0};
    int rc = exec_run(argv, timeout_ms, res, &err);

    if (rc < 0 && !quiet)
        devsrc_error(d, "%s", err.msg);
    return rc;
}

/* Joins query-compute-apps rows to devices by GPU UUID. */
static void join_uuid(struct smi_result *r, size_t first_proc)
{
    for (size_t i = first_proc; i < r->nprocs; i++) {
        struct smi_proc *p = &r->procs[i];

        for (size_t k = 0; k < r->ndevs && (p->valid & SMI_PROC_UUID); k++)
            if (r->devs[k].kind == SMI_KIND_GPU && !strcmp(r->devs[k].uuid, p->gpu_uuid)) {
                p->dev_index = r->devs[k].index;
                p->valid |= SMI_PROC_DEV;
            }
    }
}

/* The tool's own complaint (first non-empty line of its output), for the error list. */
static void tool_failed(struct discovery *d, const char *tool, const struct exec_result *res)
{
    const char *s = res->out_len ? res->out : res->err ? res->err : "";

    while (*s == '\n' || *s == ' ')
        s++;
    devsrc_error(d, "%s: exit status %d%s%.*s", tool, res->status, *s ? ": " : "",
                 (int)strcspn(s, "\n"), s);
}

static bool gpu_query_forms(struct discovery *d, const char *tool, int t, struct exec_result *res)
{
    const char *apps[] = {tool, APPS_QUERY, CSV_FORMAT, NULL};
    struct app_err err = {0};
    size_t first;
    int rc = nvsmi_parse_query_gpu(res->out, res->out_len, &d->devs, &err);

    if (rc < 0) {
        devsrc_error(d, "%s: %s", tool, err.msg);
        return false;
    }
    exec_result_fini(res);
    if (run_tool(d, apps, t, res, false) < 0)
        return true;
    first = d->devs.nprocs;
    if (res->status != 0)
        tool_failed(d, tool, res);
    else if (nvsmi_parse_query_apps(res->out, res->out_len, &d->devs, &err) < 0)
        devsrc_error(d, "%s: %s", tool, err.msg);
    join_uuid(&d->devs, first);
    return true;
}

static bool gpu_table(struct discovery *d, const char *tool, int t, struct exec_result *res)
{
    const char *argv[] = {tool, NULL};
    struct app_err err = {0};

    exec_result_fini(res);
    if (run_tool(d, argv, t, res, false) < 0)
        return false;
    if (nvsmi_parse_table(res->out, res->out_len, &d->devs, &err) < 0) {
        if (res->status != 0 && err.msg[0] == '\0')
            tool_failed(d, tool, res);
        else
            devsrc_error(d, "%s: %s", tool, err.msg);
        return false;
    }
    return true;
}

/* The device libraries are loaded once per process and kept (NVML's init re-creates the
 * driver context otherwise); one mutex serialises their use across engines and threads. */
static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nvml *g_nvml;
static struct dcmi *g_dcmi;
static int g_nvml_rc = 1, g_dcmi_rc = 1; /* 1 = not tried yet */
static bool g_atexit;

static void libs_close(void)
{
    nvml_close(g_nvml);
    dcmi_close(g_dcmi);
}

/* Collects from NVML when it is present. Returns true when it answered; false means "use the
 * tool" (after recording why, unless the library is simply not installed). */
static bool gpu_from_nvml(struct discovery *d)
{
    struct app_err err = {0};
    bool ok = false;

    pthread_mutex_lock(&lib_lock);
    if (g_nvml_rc == 1) {
        g_nvml_rc = nvml_open(&g_nvml, &err);
        if (g_nvml_rc < 0 && g_nvml_rc != APP_E_NOTFOUND)
            devsrc_error(d, "%s (using nvidia-smi instead)", err.msg);
        if (g_nvml_rc == 0 && !g_atexit)
            g_atexit = atexit(libs_close) == 0;
    }
    if (g_nvml_rc == 0) {
        ok = nvml_collect(g_nvml, &d->devs, &err) == 0;
        if (!ok)
            devsrc_error(d, "%s (using nvidia-smi instead)", err.msg);
    }
    pthread_mutex_unlock(&lib_lock);
    return ok;
}

static bool npu_from_dcmi(struct discovery *d)
{
    struct app_err err = {0};
    bool ok = false;

    pthread_mutex_lock(&lib_lock);
    if (g_dcmi_rc == 1) {
        g_dcmi_rc = dcmi_open(&g_dcmi, &err);
        if (g_dcmi_rc < 0 && g_dcmi_rc != APP_E_NOTFOUND)
            devsrc_error(d, "%s (using npu-smi instead)", err.msg);
        if (g_dcmi_rc == 0 && !g_atexit)
            g_atexit = atexit(libs_close) == 0;
    }
    if (g_dcmi_rc == 0) {
        ok = dcmi_collect(g_dcmi, &d->devs, &err) == 0;
        if (!ok)
            devsrc_error(d, "%s (using npu-smi instead)", err.msg);
    }
    pthread_mutex_unlock(&lib_lock);
    return ok;
}

bool devsrc_gpu(const struct discovery_opts *o, struct discovery *d)
{
    const char *tool = o->nvidia_smi ? o->nvidia_smi : "nvidia-smi";
    const char *query[] = {tool, GPU_QUERY, CSV_FORMAT, NULL};
    int t = o->timeout_ms > 0 ? o->timeout_ms : 5000;
    struct exec_result res = {0};
    struct app_err err = {0};
    bool ok;

    if (o->nvidia_smi_file)
        return parse_file(d, "nvidia-smi", o->nvidia_smi_file, nvsmi_parse_table) == 0;
    if (!o->no_nvml && !o->nvidia_smi && gpu_from_nvml(d))
        return true;
    if (run_tool(d, query, t, &res, false) < 0) {
        exec_result_fini(&res);
        return false;
    }
    if (nvsmi_parse_error(res.out, res.out_len, &d->devs, &err) < 0) {
        devsrc_error(d, "%s: %s", tool, err.msg);
        ok = false;
    } else if (res.status == 0) {
        ok = gpu_query_forms(d, tool, t, &res);
    } else {
        /* Old drivers refuse some query fields: the default table still works there. */
        ok = gpu_table(d, tool, t, &res);
    }
    exec_result_fini(&res);
    return ok;
}

bool devsrc_npu(const struct discovery_opts *o, struct discovery *d)
{
    const char *tool = o->npu_smi ? o->npu_smi : "npu-smi";
    const char *argv[] = {tool, "info", NULL};
    int t = o->timeout_ms > 0 ? o->timeout_ms : 5000;
    struct exec_result res = {0};
    struct app_err err = {0};
    bool ok = false;

    if (o->npu_smi_file)
        return parse_file(d, "npu-smi", o->npu_smi_file, npusmi_parse_info) == 0;
    if (!o->no_dcmi && !o->npu_smi && npu_from_dcmi(d))
        return true;
    if (run_tool(d, argv, t, &res, false) < 0) {
        exec_result_fini(&res);
        return false;
    }
    if (res.status != 0)
        tool_failed(d, tool, &res);
    else if (npusmi_parse_info(res.out, res.out_len, &d->devs, &err) < 0)
        devsrc_error(d, "%s: %s", tool, err.msg);
    else
        ok = true;
    exec_result_fini(&res);
    return ok;
}
