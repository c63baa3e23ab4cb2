/* `ranktop ls`: the joined table of devices and rank processes of this node, as text or as
 * JSON in the documented shape. Main thread only. */
#include "cli.h"
#include "cli_discovery.h"
#include "cli_hosts.h"
#include "cli_opts.h"
#include "cli_remote.h"

#include "ranktop/discovery/discovery.h"
#include "ranktop/python/pystack.h"
#include "ranktop/base/util.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct cli_opt ls_opts[] = {
    {'j', "json", NULL, "JSON output (see README for the shape)"},
    {0},
};

static const struct cli_opt *const ls_tables[] = {ls_opts, cli_opts_help, cli_disc_opts,
                                                  cli_hosts_opts, NULL};

static void ls_usage(FILE *f)
{
    fputs("usage: ranktop ls [options]\n"
          "\n"
          "Lists the GPUs / NPUs of this node and the processes of the job: rank\n"
          "identity, devices and device memory, Python or not, DataLoader workers grouped\n"
          "under their rank.\n"
          "\n",
          f);
    cli_opts_usage(f, ls_tables);
    fputs("\nExit status: 0 when ranks were found, 1 when none were (or none matched) or a\n"
          "process named with -p is not a readable Python process, 2 on bad usage.\n",
          f);
}

static json_object *num_or_null(bool valid, double v)
{
    if (!valid)
        return NULL;
    if (v == floor(v) && fabs(v) < 9e15)
        return json_object_new_int64((int64_t)v);
    return json_object_new_double(v);
}

static json_object *device_json(const struct smi_device *dv)
{
    json_object *o = json_object_new_object();
    bool npu = dv->kind == SMI_KIND_NPU;

    json_object_object_add(o, "kind", cli_json_str(smi_kind_name(dv->kind)));
    json_object_object_add(o, "index", num_or_null(dv->valid & SMI_DEV_INDEX, dv->index));
    json_object_object_add(o, "chip", num_or_null(npu && (dv->valid & SMI_DEV_CHIP), dv->chip));
    json_object_object_add(o, "name", (dv->valid & SMI_DEV_NAME) ? cli_json_str(dv->name) : NULL);
    json_object_object_add(o, "util_pct",
                           num_or_null(dv->valid & SMI_DEV_UTIL, (double)dv->util_pct));
    json_object_object_add(o, "mem_used_mb",
                           num_or_null(dv->valid & SMI_DEV_MEM_USED, (double)dv->mem_used_mb));
    json_object_object_add(o, "mem_total_mb",
                           num_or_null(dv->valid & SMI_DEV_MEM_TOTAL, (double)dv->mem_total_mb));
    json_object_object_add(o, "power_w", num_or_null(dv->valid & SMI_DEV_POWER, dv->power_w));
    json_object_object_add(o, "temp_c", num_or_null(dv->valid & SMI_DEV_TEMP, (double)dv->temp_c));
    json_object_object_add(o, "health",
                           (dv->valid & SMI_DEV_HEALTH) ? cli_json_str(dv->health) : NULL);
    return o;
}

static json_object *proc_json(const struct proc_rec *r)
{
    json_object *o = json_object_new_object(), *ch = json_object_new_array();
    json_object *devs = json_object_new_array();

    json_object_object_add(o, "pid", json_object_new_int(r->pid));
    json_object_object_add(o, "name", r->name[0] ? cli_json_str(r->name) : NULL);
    json_object_object_add(o, "alive", json_object_new_boolean(r->alive));
    json_object_object_add(o, "python", r->unreadable ? NULL : json_object_new_boolean(r->python));
    json_object_object_add(o, "rank", num_or_null(r->id.rank >= 0, r->id.rank));
    json_object_object_add(o, "local_rank", num_or_null(r->id.local_rank >= 0, r->id.local_rank));
    json_object_object_add(o, "world_size", num_or_null(r->id.world_size >= 0, r->id.world_size));
    json_object_object_add(o, "launcher", r->id.launcher[0] ? cli_json_str(r->id.launcher) : NULL);
    for (size_t i = 0; i < r->nchildren; i++)
        json_object_array_add(ch, json_object_new_int(r->children[i]));
    json_object_object_add(o, "children", ch);
    for (size_t i = 0; i < r->ndevs; i++) {
        json_object *d = json_object_new_object();

        json_object_object_add(d, "kind", cli_json_str(smi_kind_name(r->devs[i].kind)));
        json_object_object_add(d, "index", num_or_null(r->devs[i].index >= 0, r->devs[i].index));
        json_object_object_add(d, "chip", num_or_null(r->devs[i].chip >= 0, r->devs[i].chip));
        json_object_object_add(d, "mem_mb",
                               num_or_null(r->devs[i].mem_mb >= 0, (double)r->devs[i].mem_mb));
        json_object_array_add(devs, d);
    }
    json_object_object_add(o, "devices", devs);
    return o;
}

static json_object *ls_json(const struct discovery *d)
{
    json_object *root = json_object_new_object(), *a;

    json_object_object_add(root, "host", cli_json_str(d->host));
    /* How dump, record and the monitor would read these processes' memory, and why. */
    {
        const char *why, *reader = pyproc_reader_probe(&why);

        json_object_object_add(root, "reader", cli_json_str(reader));
        json_object_object_add(root, "reader_why", why ? cli_json_str(why) : NULL);
    }
    a = json_object_new_array();
    for (size_t i = 0; i < d->devs.ndevs; i++)
        json_object_array_add(a, device_json(&d->devs.devs[i]));
    json_object_object_add(root, "devices", a);
    a = json_object_new_array();
    for (size_t i = 0; i < d->nprocs; i++)
        json_object_array_add(a, proc_json(&d->procs[i]));
    json_object_object_add(root, "processes", a);
    a = json_object_new_array();
    for (size_t i = 0; i < d->nerrors; i++)
        json_object_array_add(a, cli_json_str(d->errors[i]));
    json_object_object_add(root, "errors", a);
    return root;
}

static void print_json(const struct discovery *d)
{
    json_object *root = ls_json(d);

    cli_json_puts(root);
    json_object_put(root);
}

static void fmt_i64(char *buf, size_t len, bool valid, int64_t v, const char *unit)
{
    if (valid)
        snprintf(buf, len, "%lld%s", (long long)v, unit);
    else
        snprintf(buf, len, "-");
}

static void print_devices(const struct discovery *d)
{
    if (d->devs.ndevs)
        printf("%-4s %-5s %-28s %5s %17s %7s %5s\n", "KIND", "DEV", "NAME", "UTIL", "MEMORY MiB",
               "POWER", "TEMP");
    for (size_t i = 0; i < d->devs.ndevs; i++) {
        const struct smi_device *dv = &d->devs.devs[i];
        char idx[32], util[24], used[24], total[24], mem[64], pw[32], temp[24];

        if (dv->kind == SMI_KIND_NPU && (dv->valid & SMI_DEV_CHIP))
            snprintf(idx, sizeof(idx), "%d.%d", dv->index, dv->chip);
        else
            fmt_i64(idx, sizeof(idx), dv->valid & SMI_DEV_INDEX, dv->index, "");
        fmt_i64(util, sizeof(util), dv->valid & SMI_DEV_UTIL, dv->util_pct, "%");
        fmt_i64(used, sizeof(used), dv->valid & SMI_DEV_MEM_USED, dv->mem_used_mb, "");
        fmt_i64(total, sizeof(total), dv->valid & SMI_DEV_MEM_TOTAL, dv->mem_total_mb, "");
        snprintf(mem, sizeof(mem), "%s / %s", used, total);
        if (dv->valid & SMI_DEV_POWER)
            snprintf(pw, sizeof(pw), "%.0fW", dv->power_w);
        else
            snprintf(pw, sizeof(pw), "-");
        fmt_i64(temp, sizeof(temp), dv->valid & SMI_DEV_TEMP, dv->temp_c, "C");
        printf("%-4s %-5s %-28.28s %5s %17s %7s %5s\n", smi_kind_name(dv->kind), idx,
               (dv->valid & SMI_DEV_NAME) ? text_safe(dv->name) : "-", util, mem, pw, temp);
    }
}

static void proc_devices(const struct proc_rec *r, char *buf, size_t len)
{
    size_t at = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < r->ndevs && at < len; i++) {
        const struct proc_dev *pd = &r->devs[i];
        char mem[24];

        fmt_i64(mem, sizeof(mem), pd->mem_mb >= 0, pd->mem_mb, "M");
        if (pd->chip >= 0)
            at += (size_t)snprintf(buf + at, len - at, "%s%s%d.%d:%s", i ? "," : "",
                                   smi_kind_name(pd->kind), pd->index, pd->chip, mem);
        else
            at += (size_t)snprintf(buf + at, len - at, "%s%s%d:%s", i ? "," : "",
                                   smi_kind_name(pd->kind), pd->index, mem);
    }
    if (!buf[0])
        snprintf(buf, len, "-");
}

static void print_procs(const struct discovery *d)
{
    if (d->nprocs)
        printf("\n%-5s %-5s %-5s %-8s %-8s %-3s %-5s %-22s %s\n", "RANK", "LOCAL", "WORLD",
               "LAUNCHER", "PID", "PY", "ALIVE", "DEVICES", "NAME");
    for (size_t i = 0; i < d->nprocs; i++) {
        const struct proc_rec *r = &d->procs[i];
        char rank[16], lr[16], ws[16], devs[256];

        fmt_i64(rank, sizeof(rank), r->id.rank >= 0, r->id.rank, "");
        fmt_i64(lr, sizeof(lr), r->id.local_rank >= 0, r->id.local_rank, "");
        fmt_i64(ws, sizeof(ws), r->id.world_size >= 0, r->id.world_size, "");
        proc_devices(r, devs, sizeof(devs));
        printf("%-5s %-5s %-5s %-8s %-8d %-3s %-5s %-22s %s", rank, lr, ws,
               r->id.launcher[0] ? text_safe(r->id.launcher) : "-", r->pid,
               r->unreadable ? "?"
               : r->python   ? "yes"
                             : "no",
               r->alive ? "yes" : "NO", devs, r->name[0] ? text_safe(r->name) : "?");
        if (r->nchildren)
            printf(" (+%zu worker%s)", r->nchildren, r->nchildren > 1 ? "s" : "");
        putchar('\n');
    }
}

/* ---- across hosts ---- */

/* Appends every element of node's array `key` to out, each tagged with the host. */
static void merge_array(json_object *node, const char *key, const char *host, json_object *out)
{
    json_object *a;

    if (!json_object_object_get_ex(node, key, &a) || !json_object_is_type(a, json_type_array))
        return;
    for (size_t i = 0; i < json_object_array_length(a); i++) {
        json_object *e = json_object_array_get_idx(a, i);

        if (!json_object_is_type(e, json_type_object))
            continue;
        json_object_object_add(e, "host", cli_json_str(host));
        json_object_array_add(out, json_object_get(e));
    }
}

static void merge_errors(json_object *node, const char *host, json_object *out)
{
    json_object *a;
    char line[600];

    if (!json_object_object_get_ex(node, "errors", &a) || !json_object_is_type(a, json_type_array))
        return;
    for (size_t i = 0; i < json_object_array_length(a); i++) {
        snprintf(line, sizeof(line), "%s: %s", host,
                 json_object_get_string(json_object_array_get_idx(a, i)));
        json_object_array_add(out, cli_json_str(line));
    }
}

/* One host's part: its ls JSON merged in, or its failure as an error line and host state. */
static void merge_host(json_object *root, const char *host, json_object *node, const char *why)
{
    json_object *h = json_object_new_object(), *v;

    json_object_object_add(h, "host", cli_json_str(host));
    json_object_object_add(h, "ok", json_object_new_boolean(node != NULL));
    json_object_object_add(h, "error", node ? NULL : cli_json_str(why));
    json_object_object_get_ex(root, "hosts", &v);
    json_object_array_add(v, h);
    json_object_object_get_ex(root, "errors", &v);
    if (!node) {
        char line[600];

        snprintf(line, sizeof(line), "%s: %s", host, why);
        json_object_array_add(v, cli_json_str(line));
        return;
    }
    merge_errors(node, host, v);
    json_object_object_get_ex(root, "devices", &v);
    merge_array(node, "devices", host, v);
    json_object_object_get_ex(root, "processes", &v);
    merge_array(node, "processes", host, v);
}

/* A pod's node (kubectl) beside its name: in its hosts entry and in each of its processes and
 * devices, as "node". */
static void tag_node(json_object *root, const char *host, const char *node)
{
    static const char *const arrays[] = {"hosts", "processes", "devices"};

    for (size_t k = 0; node && node[0] && k < 3; k++) {
        json_object *a, *h;

        json_object_object_get_ex(root, arrays[k], &a);
        for (size_t i = 0; i < json_object_array_length(a); i++) {
            json_object *e = json_object_array_get_idx(a, i);

            if (json_object_object_get_ex(e, "host", &h) &&
                !strcmp(json_object_get_string(h), host))
                json_object_object_add(e, "node", cli_json_str(node));
        }
    }
}

/* A remote ls --json output, checked: an object with the three arrays. */
static json_object *remote_json(const struct cli_remote_result *r, char *why, size_t len)
{
    json_object *o, *a;

    if (r->rc < 0 || (r->res.status != 0 && r->res.status != 1)) {
        snprintf(why, len, "%s", r->why[0] ? r->why : "the remote ranktop failed");
        return NULL;
    }
    o = json_tokener_parse(r->res.out ? r->res.out : "");
    if (!o || !json_object_is_type(o, json_type_object) ||
        !json_object_object_get_ex(o, "processes", &a) ||
        !json_object_is_type(a, json_type_array)) {
        json_object_put(o);
        /* ls exits 1 with JSON when it found no rank; without JSON, 1 is the remote shell's
         * failure (kubectl's unknown flag, a refused pod), said in its own words. */
        if (r->res.status != 0 && r->why[0])
            snprintf(why, len, "%s", r->why);
        else
            snprintf(why, len,
                     "the remote ranktop did not answer with ls JSON (a different version?)");
        return NULL;
    }
    return o;
}

static int cmp_procs(const void *a, const void *b)
{
    json_object *x = *(json_object *const *)a, *y = *(json_object *const *)b, *v;
    int64_t rx = INT64_MAX, ry = INT64_MAX;

    if (json_object_object_get_ex(x, "rank", &v) && json_object_is_type(v, json_type_int))
        rx = json_object_get_int64(v);
    if (json_object_object_get_ex(y, "rank", &v) && json_object_is_type(v, json_type_int))
        ry = json_object_get_int64(v);
    return (rx > ry) - (rx < ry);
}

/* A rank number that two live processes claim (two jobs, or a launcher's mistake) is an
 * error line: the table would otherwise show one of them under the other's name. */
static void check_claims(json_object *procs, json_object *errs)
{
    size_t n = json_object_array_length(procs);

    for (size_t i = 0; i + 1 < n; i++) {
        json_object *a = json_object_array_get_idx(procs, i),
                    *b = json_object_array_get_idx(procs, i + 1);
        json_object *ra, *rb, *ha, *hb, *pa, *pb;
        char line[300];

        if (!json_object_object_get_ex(a, "rank", &ra) ||
            !json_object_object_get_ex(b, "rank", &rb) || !json_object_is_type(ra, json_type_int) ||
            !json_object_is_type(rb, json_type_int) ||
            json_object_get_int64(ra) != json_object_get_int64(rb))
            continue;
        json_object_object_get_ex(a, "host", &ha);
        json_object_object_get_ex(b, "host", &hb);
        json_object_object_get_ex(a, "pid", &pa);
        json_object_object_get_ex(b, "pid", &pb);
        snprintf(line, sizeof(line), "rank %lld is claimed twice: %s pid %s and %s pid %s",
                 (long long)json_object_get_int64(ra), json_object_get_string(ha),
                 json_object_get_string(pa), json_object_get_string(hb),
                 json_object_get_string(pb));
        json_object_array_add(errs, cli_json_str(line));
    }
}

static void print_multi_text(json_object *root)
{
    json_object *procs, *errs, *v;

    json_object_object_get_ex(root, "processes", &procs);
    printf("%-16s %-5s %-5s %-8s %-8s %-3s %s\n", "HOST", "RANK", "WORLD", "LAUNCHER", "PID", "PY",
           "NAME");
    for (size_t i = 0; i < json_object_array_length(procs); i++) {
        json_object *p = json_object_array_get_idx(procs, i);
        const char *f[7] = {"host", "rank", "world_size", "launcher", "pid", "python", "name"};
        char cell[7][64];

        for (int k = 0; k < 7; k++) {
            const char *s =
                json_object_object_get_ex(p, f[k], &v) && v ? json_object_get_string(v) : "-";

            snprintf(cell[k], sizeof(cell[k]), "%s",
                     k == 5 ? (strcmp(s, "true") ? "no" : "yes") : text_safe(s));
        }
        printf("%-16.16s %-5s %-5s %-8s %-8s %-3s %s\n", cell[0], cell[1], cell[2], cell[3],
               cell[4], cell[5], cell[6]);
    }
    json_object_object_get_ex(root, "errors", &errs);
    for (size_t i = 0; i < json_object_array_length(errs); i++)
        fprintf(stderr, "ranktop: %s\n",
                text_safe(json_object_get_string(json_object_array_get_idx(errs, i))));
}

/* ls over every host: this node in-process when it is listed, the others through the remote
 * shell; one JSON document (or table) for the whole job. Exit 1 when no host found a rank. */
static int ls_hosts(const struct discovery_opts *o, const struct engine_remote_opts *ro, bool json)
{
    json_object *root = json_object_new_object(), *procs;
    const char *args[] = {"ls", "--json", "--this-node", o->dev.no_nvml ? "--no-device-libs" : NULL,
                          NULL};
    struct cli_remote_result *res = NULL;
    size_t nprocs;

    json_object_object_add(root, "hosts", json_object_new_array());
    json_object_object_add(root, "devices", json_object_new_array());
    json_object_object_add(root, "processes", json_object_new_array());
    json_object_object_add(root, "errors", json_object_new_array());
    if (ro->local) {
        struct discovery d;
        struct app_err err = {0};

        discovery_init(&d);
        if (discovery_run(o, &d, &err) == 0) {
            json_object *node = ls_json(&d);

            merge_host(root, d.host, node, NULL);
            json_object_put(node);
        } else {
            merge_host(root, "localhost", NULL, err.msg);
        }
        discovery_fini(&d);
    }
    cli_remote_run(ro, args, o->dev.timeout_ms > 0 ? o->dev.timeout_ms * 2 + 15000 : 25000, &res);
    for (size_t i = 0; i < ro->nhosts; i++) {
        char why[600];
        json_object *node = remote_json(&res[i], why, sizeof(why));

        merge_host(root, res[i].host, node, why);
        tag_node(root, res[i].host, ro->nodes ? ro->nodes[i] : NULL);
        json_object_put(node);
    }
    cli_remote_free(res, ro->nhosts);
    json_object_object_get_ex(root, "processes", &procs);
    json_object_array_sort(procs, cmp_procs);
    nprocs = json_object_array_length(procs);
    {
        json_object *errs;

        json_object_object_get_ex(root, "errors", &errs);
        check_claims(procs, errs);
    }
    if (json)
        cli_json_puts(root);
    else
        print_multi_text(root);
    if (!nprocs)
        fprintf(stderr, "ranktop: no ranks found on any host\n");
    json_object_put(root);
    return nprocs ? 0 : 1;
}

/* With -p, every process named must be a readable Python process: one that is not gets a
 * line and makes the exit status 1 (unreadable and gone ones have their line from discovery,
 * and a gone one is not listed at all). */
static bool named_ok(const struct discovery *d, const struct discovery_opts *o)
{
    bool ok = true;

    for (int i = 0; i < o->npids; i++) {
        bool listed = false;

        for (size_t k = 0; k < d->nprocs; k++) {
            const struct proc_rec *r = &d->procs[k];

            if (r->pid != o->pids[i])
                continue;
            listed = true;
            if (r->alive && !r->unreadable && !r->python)
                fprintf(stderr, "ranktop ls: process %d (%s) is not a Python process\n", r->pid,
                        text_safe(r->name));
            ok = ok && r->alive && !r->unreadable && r->python;
        }
        ok = ok && listed;
    }
    return ok;
}

/* Why nothing was found, and what to do, in one line. */
static void explain_empty(const struct discovery *d, const struct discovery_opts *o)
{
    if (o->match && !o->npids && !o->nchildren_of)
        fprintf(stderr, "ranktop ls: no ranks found: no process matched --match '%s'\n",
                text_safe(o->match));
    else if (o->nchildren_of && !o->npids) /* each launcher exists (cmd_ls checked) */
        for (int i = 0; i < o->nchildren_of; i++)
            fprintf(stderr, "ranktop ls: no ranks found: process %d has no descendants\n",
                    o->children_of[i]);
    else if (o->npids || o->match)
        fprintf(stderr, "ranktop ls: no ranks found: none of the given processes exist\n");
    else
        fprintf(stderr,
                "ranktop: no ranks found: %s, no Python process with a launcher's rank "
                "(RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, ...); use -p PID or "
                "--children-of PID\n",
                d->any_tool ? "the device tools list no processes"
                            : "no nvidia-smi or npu-smi answered");
}

int cmd_ls(int argc, char **argv)
{
    static struct cli_getopt g;
    struct discovery_opts o = {0};
    struct cli_hosts hosts = {0};
    struct engine_remote_opts ro;
    struct discovery d;
    struct app_err err = {0};
    bool json = false;
    int c, rc;

    cli_opts_getopt(ls_tables, &g);
    optind = 1;
    while ((c = getopt_long(argc, argv, g.shorts, g.longs, NULL)) != -1) {
        int h = cli_disc_handle(c, optarg, &o, "ls");

        if (h == 0)
            h = cli_hosts_handle(c, optarg, &hosts, "ls");
        if (h < 0 || (h == 0 && c != 'j' && c != 'h')) {
            if (h == 0) /* getopt said what was wrong */
                cli_try_help("ls");
            cli_disc_fini(&o);
            return CLI_EXIT_USAGE;
        }
        if (c == 'j')
            json = true;
        if (c == 'h') {
            ls_usage(stdout);
            cli_disc_fini(&o);
            return 0;
        }
    }
    if (optind < argc || cli_disc_finish(&o, &hosts, &ro, "ls") < 0) {
        if (optind < argc) {
            fprintf(stderr, "ranktop ls: unexpected argument '%s'\n", argv[optind]);
            cli_try_help("ls");
        }
        cli_disc_fini(&o);
        cli_hosts_fini(&hosts);
        return CLI_EXIT_USAGE;
    }
    if (ro.nhosts) {
        rc = ls_hosts(&o, &ro, json);
        cli_disc_fini(&o);
        cli_hosts_fini(&hosts);
        return rc;
    }
    /* A launcher that does not exist has no descendants to list: said as such, at once. */
    if (cli_disc_missing("ls", o.children_of, o.nchildren_of, NULL, 0)) {
        cli_disc_fini(&o);
        cli_hosts_fini(&hosts);
        return CLI_EXIT_FAIL;
    }
    discovery_init(&d);
    rc = discovery_run(&o, &d, &err);
    if (rc < 0) {
        fprintf(stderr, "ranktop ls: %s\n", err.msg);
        rc = rc == APP_E_USAGE ? CLI_EXIT_USAGE : CLI_EXIT_FAIL; /* a bad --match is usage */
    } else {
        if (json)
            print_json(&d);
        else {
            const char *why, *reader = pyproc_reader_probe(&why);

            printf("host %s\n", d.host);
            if (why) /* said when not process_vm_readv */
                printf("memory reader: %s (%s)\n", reader, why);
            print_devices(&d);
            print_procs(&d);
            for (size_t i = 0; i < d.nerrors; i++)
                fprintf(stderr, "ranktop: %s\n", text_safe(d.errors[i]));
        }
        if (d.nprocs == 0)
            explain_empty(&d, &o);
        rc = d.nprocs && named_ok(&d, &o) ? 0 : 1;
    }
    discovery_fini(&d);
    cli_disc_fini(&o);
    cli_hosts_fini(&hosts);
    return rc;
}
