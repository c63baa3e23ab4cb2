/* Discovery flags shared by `ranktop ls`, `record` and the monitor, and the check that the
 * processes they name exist. Main thread only. */
#include "cli_discovery.h"

#include "cli.h"
#include "cli_hosts.h"
#include "ranktop/util.h"

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

const struct option cli_disc_options[] = {
    {"pid", required_argument, NULL, 'p'},
    {"children-of", required_argument, NULL, OPT_CHILDREN},
    {"match", required_argument, NULL, OPT_MATCH},
    {"nvidia-smi", required_argument, NULL, OPT_NVSMI},
    {"npu-smi", required_argument, NULL, OPT_NPUSMI},
    {"nvidia-smi-file", required_argument, NULL, OPT_NVSMI_FILE},
    {"npu-smi-file", required_argument, NULL, OPT_NPUSMI_FILE},
    {"tool-timeout", required_argument, NULL, OPT_TIMEOUT},
    {"no-device-libs", no_argument, NULL, OPT_NO_LIBS},
    {NULL, 0, NULL, 0},
};

void cli_disc_usage(FILE *f)
{
    fputs("  -p, --pid PID[,PID...]    these processes (repeatable)\n"
          "      --children-of PID     every descendant of a launcher such as torchrun\n"
          "      --match REGEX         processes whose command line matches REGEX\n"
          "      --nvidia-smi PATH     nvidia-smi to run (default: on PATH)\n"
          "      --npu-smi PATH        npu-smi to run (default: on PATH)\n"
          "      --nvidia-smi-file F   parse F, a recorded `nvidia-smi` output, instead\n"
          "      --npu-smi-file F      parse F, a recorded `npu-smi info` output, instead\n"
          "      --tool-timeout S      deadline for each device tool (default 5 s)\n"
          "      --no-device-libs      do not load NVML / DCMI, run the tools\n"
          "Without -p, --children-of or --match: the processes the device tools report, and\n"
          "every Python process a launcher gave a rank (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK,\n"
          "PMIX_RANK, MV2_COMM_WORLD_RANK, HOROVOD_RANK or SLURM_PROCID in its environment).\n",
          f);
}

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

void cli_disc_longopts(const struct option *own, size_t n, struct option *out)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++)
        out[k++] = own[i];
    for (const struct option *x = cli_disc_options; x->name; x++)
        out[k++] = *x;
    for (const struct option *x = cli_hosts_options; x->name; x++)
        out[k++] = *x;
    out[k] = (struct option){NULL, 0, NULL, 0};
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

void cli_disc_fini(struct discovery_opts *o)
{
    free(o->pids);
    free(o->children_of);
    o->pids = o->children_of = NULL;
}
