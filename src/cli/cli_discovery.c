/* Discovery flags shared by `ranktop ls`, `record` and the monitor, and the check that the
 * processes they name exist. Main thread only. */
#include "cli_discovery.h"

#include "cli.h"
#include "cli_hosts.h"
#include "cli_opts.h"
#include "ranktop/proc/procscan.h"
#include "ranktop/base/util.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_CHILDREN = CLI_DISC_BASE,
    OPT_MATCH,
    OPT_NVSMI,
    OPT_NPUSMI,
    OPT_NVSMI_FILE,
    OPT_NPUSMI_FILE,
    OPT_TIMEOUT,
    OPT_NO_LIBS,
};

const struct cli_opt cli_disc_opts[] = {
    {'p', "pid", "PID[,PID...]", "these processes (repeatable)"},
    {OPT_CHILDREN, "children-of", "PID", "every descendant of a launcher such as torchrun"},
    {OPT_MATCH, "match", "REGEX", "processes whose command line matches REGEX"},
    {OPT_NVSMI, "nvidia-smi", "PATH", "nvidia-smi to run (default: on PATH)"},
    {OPT_NPUSMI, "npu-smi", "PATH", "npu-smi to run (default: on PATH)"},
    {OPT_NVSMI_FILE, "nvidia-smi-file", "F", "parse F, a recorded `nvidia-smi` output, instead"},
    {OPT_NPUSMI_FILE, "npu-smi-file", "F", "parse F, a recorded `npu-smi info` output, instead"},
    {OPT_TIMEOUT, "tool-timeout", "S", "deadline for each device tool (default 5 s)"},
    {OPT_NO_LIBS, "no-device-libs", NULL, "do not load NVML / DCMI, run the tools"},
    {.help = "Without -p, --children-of or --match: the processes the device tools report, and "
             "every Python process a launcher gave a rank (RANK, OMPI_COMM_WORLD_RANK, "
             "PMI_RANK, PMIX_RANK, MV2_COMM_WORLD_RANK, HOROVOD_RANK or SLURM_PROCID in its "
             "environment)."},
    {0},
};

static int parse_ints(const char *arg, int **v, int *n, const char *cmd, const char *flag)
{
    char err[160];

    if (cli_parse_pids(arg, v, n, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s: %s: %s\n", cli_who(cmd), flag, err);
        return -1;
    }
    return 1;
}

int cli_disc_handle(int c, const char *arg, struct discovery_opts *o, const char *cmd)
{
    char *end;
    double s;

    switch (c) {
    case 'p':
        return parse_ints(arg, &o->pids, &o->npids, cmd, "-p");
    case OPT_CHILDREN:
        return parse_ints(arg, &o->children_of, &o->nchildren_of, cmd, "--children-of");
    case OPT_MATCH:
        o->match = arg;
        return 1;
    case OPT_NVSMI:
        o->dev.nvidia_smi = arg;
        return 1;
    case OPT_NPUSMI:
        o->dev.npu_smi = arg;
        return 1;
    case OPT_NVSMI_FILE:
        o->dev.nvidia_smi_file = arg;
        return 1;
    case OPT_NPUSMI_FILE:
        o->dev.npu_smi_file = arg;
        return 1;
    case OPT_TIMEOUT:
        s = strtod(arg, &end);
        if (*end || end == arg || !(s > 0 && s <= 3600)) {
            fprintf(stderr, "%s: --tool-timeout wants seconds in (0, 3600], got '%s'\n",
                    cli_who(cmd), arg);
            return -1;
        }
        o->dev.timeout_ms = (int)(s * 1000);
        return 1;
    case OPT_NO_LIBS:
        o->dev.no_nvml = o->dev.no_dcmi = true;
        return 1;
    default:
        return 0;
    }
}

static bool in_list(int pid, const int *v, int n)
{
    for (int i = 0; i < n; i++)
        if (v[i] == pid)
            return true;
    return false;
}

int cli_disc_missing(const char *cmd, const int *a, int na, const int *b, int nb)
{
    int missing = 0;

    for (int i = 0; i < na + nb; i++) {
        int pid = i < na ? a[i] : b[i - na];

        /* Said once: the same pid in both lists (--subprocesses) or twice in one. */
        if (i < na ? in_list(pid, a, i) : in_list(pid, a, na) || in_list(pid, b, i - na))
            continue;
        /* Signal 0 only asks: EPERM means the process exists (another user's). */
        if (kill(pid, 0) < 0 && errno == ESRCH) {
            fprintf(stderr, "%s: no process %d\n", cli_who(cmd), pid);
            missing++;
        }
    }
    return missing;
}

int cli_disc_subprocesses(struct discovery_opts *o, const char *cmd)
{
    int kept = 0;

    if (!o->npids) {
        fprintf(stderr, "%s: --subprocesses wants -p PID, the process whose descendants to %s\n",
                cli_who(cmd),
                !strcmp(cmd, "record") ? "record"
                : !strcmp(cmd, "dump") ? "read"
                                       : "watch");
        return -1;
    }
    for (int i = 0; i < o->npids; i++) {
        int pid = o->pids[i];

        o->children_of = x_reallocarray(o->children_of, (size_t)o->nchildren_of + 1, sizeof(int));
        o->children_of[o->nchildren_of++] = pid;
        if (procscan_is_python(pid) || kill(pid, 0) < 0)
            o->pids[kept++] = pid;
    }
    o->npids = kept;
    return 0;
}

void cli_disc_fini(struct discovery_opts *o)
{
    free(o->pids);
    free(o->children_of);
    o->pids = o->children_of = NULL;
}

/* The first flag of o that names processes (pids, a launcher, a pattern), or NULL. */
static const char *naming_flag(const struct discovery_opts *o)
{
    return o->npids ? "-p" : o->nchildren_of ? "--children-of" : o->match ? "--match" : NULL;
}

int cli_disc_finish(const struct discovery_opts *o, struct cli_hosts *h,
                    struct engine_remote_opts *ro, const char *cmd)
{
    const char *flag = naming_flag(o);

    /* Inside a Slurm allocation every node of the job is watched by default; processes named
     * here are this node's, so they mean this node only, as --this-node. */
    if (flag && !h->given)
        h->this_node = true;
    if (cli_hosts_finish(h, ro, cmd) < 0)
        return -1;
    if (flag && ro->nhosts) {
        fprintf(stderr,
                "%s: %s selects processes of this node only, and the hosts named with --hosts "
                "or --hostfile find their ranks themselves: drop %s, or the other hosts\n",
                cli_who(cmd), flag, flag);
        return -1;
    }
    return 0;
}
