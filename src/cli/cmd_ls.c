/* `ranktop ls`: the joined table of devices and rank processes of this node, as text or as
 * JSON in the documented shape. Main thread only. */
#include "cli.h"
#include "cli_discovery.h"

#include "ranktop/discovery.h"
#include "ranktop/util.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void ls_usage(FILE *f)
{
    fputs("usage: ranktop ls [options]\n"
          "\n"
          "Lists the GPUs / NPUs of this node and the processes of the job: rank identity,\n"
          "devices and device memory, Python or not, DataLoader workers grouped under their rank.\n"
          "\n"
          "  -j, --json                JSON output (see README for the shape)\n",
          f);
    cli_disc_usage(f);
    fputs("  -h, --help                this help\n"
          "\nExit status: 0 when ranks were found, 1 when none were, 2 on bad usage.\n",
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

    json_object_object_add(o, "kind", json_object_new_string(smi_kind_name(dv->kind)));
    json_object_object_add(o, "index", num_or_null(dv->valid & SMI_DEV_INDEX, dv->index));
    json_object_object_add(o, "chip", num_or_null(npu && (dv->valid & SMI_DEV_CHIP), dv->chip));
    json_object_object_add(o, "name",
                           (dv->valid & SMI_DEV_NAME) ? json_object_new_string(dv->name) : NULL);
    json_object_object_add(o, "util_pct",
                           num_or_null(dv->valid & SMI_DEV_UTIL, (double)dv->util_pct));
    json_object_object_add(o, "mem_used_mb",
                           num_or_null(dv->valid & SMI_DEV_MEM_USED, (double)dv->mem_used_mb));
    json_object_object_add(o, "mem_total_mb",
                           num_or_null(dv->valid & SMI_DEV_MEM_TOTAL, (double)dv->mem_total_mb));
    json_object_object_add(o, "power_w", num_or_null(dv->valid & SMI_DEV_POWER, dv->power_w));
    json_object_object_add(o, "temp_c", num_or_null(dv->valid & SMI_DEV_TEMP, (double)dv->temp_c));
    json_object_object_add(
        o, "health", (dv->valid & SMI_DEV_HEALTH) ? json_object_new_string(dv->health) : NULL);
    return o;
}

static json_object *proc_json(const struct proc_rec *r)
{
    json_object *o = json_object_new_object(), *ch = json_object_new_array();
    json_object *devs = json_object_new_array();

    json_object_object_add(o, "pid", json_object_new_int(r->pid));
    json_object_object_add(o, "name", r->name[0] ? json_object_new_string(r->name) : NULL);
    json_object_object_add(o, "alive", json_object_new_boolean(r->alive));
    json_object_object_add(o, "python", json_object_new_boolean(r->python));
    json_object_object_add(o, "rank", num_or_null(r->id.rank >= 0, r->id.rank));
    json_object_object_add(o, "local_rank", num_or_null(r->id.local_rank >= 0, r->id.local_rank));
    json_object_object_add(o, "world_size", num_or_null(r->id.world_size >= 0, r->id.world_size));
    json_object_object_add(o, "launcher",
                           r->id.launcher[0] ? json_object_new_string(r->id.launcher) : NULL);
    for (size_t i = 0; i < r->nchildren; i++)
        json_object_array_add(ch, json_object_new_int(r->children[i]));
    json_object_object_add(o, "children", ch);
    for (size_t i = 0; i < r->ndevs; i++) {
        json_object *d = json_object_new_object();

        json_object_object_add(d, "kind", json_object_new_string(smi_kind_name(r->devs[i].kind)));
        json_object_object_add(d, "index", num_or_null(r->devs[i].index >= 0, r->devs[i].index));
        json_object_object_add(d, "chip", num_or_null(r->devs[i].chip >= 0, r->devs[i].chip));
        json_object_object_add(d, "mem_mb",
                               num_or_null(r->devs[i].mem_mb >= 0, (double)r->devs[i].mem_mb));
        json_object_array_add(devs, d);
    }
    json_object_object_add(o, "devices", devs);
    return o;
}

static void print_json(const struct discovery *d)
{
    json_object *root = json_object_new_object(), *a;

    json_object_object_add(root, "host", json_object_new_string(d->host));
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
        json_object_array_add(a, json_object_new_string(d->errors[i]));
    json_object_object_add(root, "errors", a);
    puts(json_object_to_json_string_ext(root,
                                        JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
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
               (dv->valid & SMI_DEV_NAME) ? dv->name : "-", util, mem, pw, temp);
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
               r->id.launcher[0] ? r->id.launcher : "-", r->pid, r->python ? "yes" : "no",
               r->alive ? "yes" : "NO", devs, r->name[0] ? r->name : "?");
        if (r->nchildren)
            printf(" (+%zu worker%s)", r->nchildren, r->nchildren > 1 ? "s" : "");
        putchar('\n');
    }
}

/* Why nothing was found, and what to do, in one line. */
static void explain_empty(const struct discovery *d, const struct discovery_opts *o)
{
    if (o->npids || o->nchildren_of || o->match)
        fprintf(stderr, "ranktop: no ranks found: none of the given processes exist%s\n",
                o->nchildren_of ? " (the launcher has no descendants)" : "");
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
    static struct option longs[32];
    struct discovery_opts o = {0};
    struct discovery d;
    struct app_err err = {0};
    bool json = false;
    int c, rc;

    static const struct option own[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
    };

    cli_disc_longopts(own, 2, longs);
    optind = 1;
    while ((c = getopt_long(argc, argv, "p:jh", longs, NULL)) != -1) {
        int h = cli_disc_handle(c, optarg, &o, "ls");

        if (h < 0 || (h == 0 && c != 'j' && c != 'h')) {
            if (h == 0)
                ls_usage(stderr);
            cli_disc_fini(&o);
            return 2;
        }
        if (c == 'j')
            json = true;
        if (c == 'h') {
            ls_usage(stdout);
            cli_disc_fini(&o);
            return 0;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ranktop ls: unexpected argument '%s'\n", argv[optind]);
        cli_disc_fini(&o);
        return 2;
    }
    discovery_init(&d);
    rc = discovery_run(&o, &d, &err);
    if (rc < 0) {
        fprintf(stderr, "ranktop ls: %s\n", err.msg);
        rc = 2;
    } else {
        if (json)
            print_json(&d);
        else {
            printf("host %s\n", d.host);
            print_devices(&d);
            print_procs(&d);
            for (size_t i = 0; i < d.nerrors; i++)
                fprintf(stderr, "ranktop: %s\n", d.errors[i]);
        }
        if (d.nprocs == 0)
            explain_empty(&d, &o);
        rc = d.nprocs ? 0 : 1;
    }
    discovery_fini(&d);
    cli_disc_fini(&o);
    return rc;
}
