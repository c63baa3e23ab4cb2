/* The tool device sources, nvidia-smi and npu-smi, behind the devsrc_ops interface: run under
 * the chain's deadline, or read from a recording named on the command line, and parsed by the
 * pure parsers into the run's smi_result.
 *
 * Owns nothing between runs; a tool's output lives in the caller's struct devsrc from refresh
 * until close. Invariants: a tool that is missing, hangs or fails makes refresh fail with one
 * line; once the devices are in, a failing process query is a note, not a failure, so the
 * devices still count. nvidia-smi is asked for the CSV query forms first (stable across
 * drivers) and for its default table when an old driver refuses them. Runs on the thread that
 * owns the struct devsrc. */
#include "devsrc_ops.h"
#include "npusmi_parse.h"
#include "nvsmi_parse.h"
#include "ranktop/base/util.h"

#include <stdlib.h>
#include <string.h>

#define GPU_QUERY                                                                                  \
    "--query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,power.draw,"             \
    "temperature.gpu"
#define APPS_QUERY "--query-compute-apps=pid,process_name,used_memory,gpu_uuid"
#define CSV_FORMAT "--format=csv,noheader,nounits"

typedef int (*parse_fn)(const char *, size_t, struct smi_result *, struct app_err *);

static const char *nvsmi_tool(const struct devsrc *s)
{
    return s->opts.nvidia_smi ? s->opts.nvidia_smi : "nvidia-smi";
}

static const char *npusmi_tool(const struct devsrc *s)
{
    return s->opts.npu_smi ? s->opts.npu_smi : "npu-smi";
}

/* Parses a recorded output; the message names the file. */
static int parse_file(const char *tool, const char *path, parse_fn fn, struct smi_result *r,
                      struct app_err *err)
{
    struct app_err perr = {0};
    char *buf;
    size_t len;
    int rc = file_read_regular(path, 64u << 20, &buf, &len);

    if (rc < 0)
        return app_err_set(err, rc, "%s: cannot read %s: %s", tool, path, app_status_str(rc));
    rc = fn(buf, len, r, &perr);
    free(buf);
    if (rc < 0) { /* the parser names the tool itself: once is enough */
        size_t n = strlen(tool);
        const char *why =
            !strncmp(perr.msg, tool, n) && perr.msg[n] == ':' ? perr.msg + n + 1 : perr.msg;

        return app_err_set(err, rc, "%s: %s:%s%s", tool, path, *why == ' ' ? "" : " ", why);
    }
    return 0;
}

/* The tool's own complaint (first non-empty line of its output) as the failure message. */
static int tool_failed(const char *tool, const struct exec_result *res, struct app_err *err)
{
    const char *s = res->out_len ? res->out : res->err ? res->err : "";

    while (*s == '\n' || *s == ' ')
        s++;
    return app_err_set(err, APP_E_IO, "%s: exit status %d%s%.*s", tool, res->status, *s ? ": " : "",
                       (int)strcspn(s, "\n"), s);
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

/* The processes of the query forms: the devices are in, so a failure here is only a note. */
static void query_apps(struct devsrc *s, const char *tool, struct smi_result *r)
{
    const char *apps[] = {tool, APPS_QUERY, CSV_FORMAT, NULL};
    struct app_err err = {0};
    size_t first = r->nprocs;

    exec_result_fini(&s->res);
    if (exec_run(apps, s->timeout_ms, &s->res, &err) < 0) {
        devsrc_note(s, "%s", err.msg);
        return;
    }
    if (s->res.status != 0) {
        tool_failed(tool, &s->res, &err);
        devsrc_note(s, "%s", err.msg);
    } else if (nvsmi_parse_query_apps(s->res.out, s->res.out_len, r, &err) < 0) {
        devsrc_note(s, "%s: %s", tool, err.msg);
    }
    join_uuid(r, first);
}

/* Old drivers refuse some query fields: the default table still works there. */
static int gpu_table(struct devsrc *s, const char *tool, struct smi_result *r, struct app_err *err)
{
    const char *argv[] = {tool, NULL};
    struct app_err perr = {0};
    int rc;

    exec_result_fini(&s->res);
    rc = exec_run(argv, s->timeout_ms, &s->res, err);
    if (rc < 0)
        return rc;
    rc = nvsmi_parse_table(s->res.out, s->res.out_len, r, &perr);
    if (rc < 0 && s->res.status != 0 && perr.msg[0] == '\0')
        return tool_failed(tool, &s->res, err);
    if (rc < 0)
        return app_err_set(err, rc, "%s: %s", tool, perr.msg);
    return 0;
}

static int nvsmi_refresh(struct devsrc *s, struct smi_result *r, struct app_err *err)
{
    const char *tool = nvsmi_tool(s);
    const char *query[] = {tool, GPU_QUERY, CSV_FORMAT, NULL};
    struct app_err perr = {0};
    int rc = exec_run(query, s->timeout_ms, &s->res, err);

    if (rc < 0)
        return rc;
    rc = nvsmi_parse_error(s->res.out, s->res.out_len, r, &perr);
    if (rc == 0 && s->res.status != 0)
        return gpu_table(s, tool, r, err);
    if (rc == 0)
        rc = nvsmi_parse_query_gpu(s->res.out, s->res.out_len, r, &perr);
    if (rc < 0)
        return app_err_set(err, rc, "%s: %s", tool, perr.msg);
    query_apps(s, tool, r);
    return 0;
}

static int npusmi_refresh(struct devsrc *s, struct smi_result *r, struct app_err *err)
{
    const char *tool = npusmi_tool(s);
    const char *argv[] = {tool, "info", NULL};
    struct app_err perr = {0};
    int rc = exec_run(argv, s->timeout_ms, &s->res, err);

    if (rc < 0)
        return rc;
    if (s->res.status != 0)
        return tool_failed(tool, &s->res, err);
    rc = npusmi_parse_info(s->res.out, s->res.out_len, r, &perr);
    if (rc < 0)
        return app_err_set(err, rc, "%s: %s", tool, perr.msg);
    return 0;
}

/* The tools are looked up on PATH when run: there is nothing to open. */
static int tool_open(struct devsrc *s, struct app_err *err)
{
    (void)s;
    (void)err;
    return 0;
}

static void tool_close(struct devsrc *s)
{
    exec_result_fini(&s->res);
}

static int nvsmi_file_open(struct devsrc *s, struct app_err *err)
{
    return s->opts.nvidia_smi_file ? 0 : devsrc_skip(err);
}

static int nvsmi_file_refresh(struct devsrc *s, struct smi_result *r, struct app_err *err)
{
    return parse_file("nvidia-smi", s->opts.nvidia_smi_file, nvsmi_parse_table, r, err);
}

static int npusmi_file_open(struct devsrc *s, struct app_err *err)
{
    return s->opts.npu_smi_file ? 0 : devsrc_skip(err);
}

static int npusmi_file_refresh(struct devsrc *s, struct smi_result *r, struct app_err *err)
{
    return parse_file("npu-smi", s->opts.npu_smi_file, npusmi_parse_info, r, err);
}

/* A recording replaces the live sources of its kind, whatever it holds: no fallback. */
const struct devsrc_ops devsrc_nvsmi_file_ops = {"nvidia-smi recording", SMI_KIND_GPU,       false,
                                                 nvsmi_file_open,        nvsmi_file_refresh, NULL};
const struct devsrc_ops devsrc_npusmi_file_ops = {"npu-smi recording", SMI_KIND_NPU,        false,
                                                  npusmi_file_open,    npusmi_file_refresh, NULL};
const struct devsrc_ops devsrc_nvsmi_ops = {"nvidia-smi", SMI_KIND_GPU,  false,
                                            tool_open,    nvsmi_refresh, tool_close};
const struct devsrc_ops devsrc_npusmi_ops = {"npu-smi", SMI_KIND_NPU,   false,
                                             tool_open, npusmi_refresh, tool_close};
