/* The multi-node flags shared by the monitor, record, ls and dump: which hosts, how to reach
 * them (the remote shell, a template split with sh quoting rules and exec'd with an argv: no
 * local shell runs it), and which ranktop runs there. Main thread only. */
#include "cli_hosts.h"

#include "cli.h"
#include "cli_opts.h"

#include "ranktop/util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    OPT_HOSTS = CLI_HOSTS_BASE,
    OPT_HOSTFILE,
    OPT_RSH,
    OPT_REMOTE,
    OPT_LAUNCHER,
    OPT_THIS,
    OPT_SHIP,
    OPT_SHIP_DIR
};

#define DEFAULT_RSH "ssh -o BatchMode=yes -o ConnectTimeout=5 -T"

const struct cli_opt cli_hosts_opts[] = {
    {.help = "\nOther nodes (README, Multi-node): ranktop agent runs on each, started through the "
             "cluster's remote shell; the local node is watched only when listed. The flags -p, "
             "--children-of and --match name this node's processes: they are refused with other "
             "hosts."},
    {OPT_HOSTS, "hosts", "LIST", "hosts, with Slurm/pdsh ranges: gpu[01-16,20],login2"},
    {OPT_HOSTFILE, "hostfile", "FILE", "one host (or range) per line, # comments"},
    {OPT_RSH, "rsh", "CMD",
     "remote shell, run as CMD HOST RANKTOP agent ...; %h puts the host elsewhere, %% is a %, "
     "words split with sh quoting (default '" DEFAULT_RSH "')"},
    {OPT_REMOTE, "remote-ranktop", "PATH",
     "ranktop on the hosts (default: ranktop on PATH; unused with --ship)"},
    {OPT_LAUNCHER, "launcher", "ssh|srun|pdsh",
     "srun: one srun --overlap step starts every agent (the default inside a Slurm "
     "allocation, without --hosts); pdsh: one pdsh starts them (--rsh: its options, then "
     "after a -- words to put before ranktop, for -R exec)"},
    {OPT_SHIP, "ship", NULL,
     "send this ranktop to each host through the remote shell's stdin (SHA-256 checked, run "
     "from a private temporary directory it deletes as it starts): nothing to install there"},
    {OPT_SHIP_DIR, "ship-dir", "DIR",
     "--ship: ranktop-VERSION-linux-ARCH binaries for hosts of another architecture (default: "
     "beside this binary, and share/ranktop/)"},
    {OPT_THIS, "this-node", NULL,
     "this node only, even inside a Slurm allocation (what the head asks of each node)"},
    {0},
};

static int bad(const char *cmd, const char *msg, const char *what)
{
    fprintf(stderr, "%s: %s%s\n", cli_who(cmd), msg, what ? what : "");
    return -1;
}

static int add_file(struct cli_hosts *h, const char *path, const char *cmd)
{
    struct app_err err = {0};
    char *buf = NULL;
    size_t len = 0, before;
    int rc;

    rc = file_read_regular(path, 1 << 24, &buf, &len);
    if (rc < 0) {
        fprintf(stderr, "%s: --hostfile %s: cannot read it: %s\n", cli_who(cmd), path,
                app_status_str(rc));
        return -1;
    }
    before = h->list.n;
    rc = hostlist_parse_file(buf, len, &h->list, &err);
    free(buf);
    if (rc < 0)
        return bad(cmd, "--hostfile: ", err.msg);
    if (h->list.n == before) { /* a list that names nobody is a mistake, not "this node" */
        fprintf(stderr, "%s: --hostfile %s names no host\n", cli_who(cmd), path);
        return -1;
    }
    return 1;
}

int cli_hosts_handle(int c, const char *arg, struct cli_hosts *h, const char *cmd)
{
    struct app_err err = {0};

    switch (c) {
    case OPT_HOSTS: {
        size_t before = h->list.n;

        h->given = true;
        if (hostlist_expand(arg, &h->list, &err) < 0)
            return bad(cmd, "--hosts: ", err.msg);
        if (h->list.n == before) {
            fprintf(stderr, "%s: --hosts '%s' names no host\n", cli_who(cmd), text_safe(arg));
            return -1;
        }
        return 1;
    }
    case OPT_HOSTFILE:
        h->given = true;
        return add_file(h, arg, cmd);
    case OPT_RSH:
        h->rsh = arg;
        return 1;
    case OPT_REMOTE:
        h->ranktop = arg;
        return 1;
    case OPT_THIS:
        h->this_node = true;
        return 1;
    case OPT_SHIP:
        h->ship = true;
        return 1;
    case OPT_SHIP_DIR:
        h->ship_dir = arg;
        return 1;
    case OPT_LAUNCHER:
        if (strcmp(arg, "ssh") && strcmp(arg, "srun") && strcmp(arg, "pdsh"))
            return bad(cmd, "--launcher takes ssh, srun or pdsh, not ", arg);
        h->launcher = arg;
        return 1;
    default:
        return 0;
    }
}

/* This node, under the names a host list may give it. */
static bool is_local(const char *host)
{
    const char *node = getenv("SLURMD_NODENAME"); /* inside a Slurm task: Slurm's name for us */
    char me[256] = "";
    size_t n;

    gethostname(me, sizeof(me) - 1);
    n = strcspn(me, ".");
    return !strcmp(host, me) || !strcmp(host, "localhost") || (node && !strcmp(host, node)) ||
           (strlen(host) == n && !strncmp(host, me, n));
}

/* Parses the remote shell template; srun names the hosts with -w, so %h has no place in its
 * options (pdsh's exec module takes %h itself: it is handed on). */
static int parse_rsh(struct cli_hosts *h, const char *text, const char *cmd, bool per_host)
{
    struct app_err err = {0};

    rsh_tmpl_fini(&h->tmpl);
    if (rsh_tmpl_parse(text, &h->tmpl, &err) < 0)
        return bad(cmd, err.msg, NULL);
    if (!per_host && h->tmpl.has_host)
        return bad(cmd, "--rsh: %h has no place with srun (it takes the hosts with -w)", NULL);
    return 0;
}

static int from_slurm(struct cli_hosts *h, const char *cmd, const char **job)
{
    const char *id = getenv("SLURM_JOB_ID"), *nodes = getenv("SLURM_JOB_NODELIST");
    struct app_err err = {0};

    *job = NULL;
    if (!id || !nodes || !id[0] || !nodes[0])
        return 0;
    for (const char *c = id; *c; c++)
        if (*c < '0' || *c > '9')
            return bad(cmd, "SLURM_JOB_ID is not a job id: ", id);
    if (hostlist_expand(nodes, &h->list, &err) < 0)
        return bad(cmd, "SLURM_JOB_NODELIST: ", err.msg);
    *job = id;
    if (!h->launcher)
        h->launcher = "srun";
    return 0;
}

/* --ship: pdsh forwards no stdin, so nothing could be sent; otherwise the cache of binaries,
 * searched in --ship-dir, else beside this binary and in its share/ranktop/. */
static int ship_setup(struct cli_hosts *h, struct engine_remote_opts *o, const char *cmd)
{
    const char *dirs[2] = {NULL, NULL};
    char exe[4096] = "";
    ssize_t n;

    if (!h->ship)
        return 0;
    if (o->launcher == ENGINE_LAUNCH_PDSH)
        return bad(cmd,
                   "--ship needs the remote shell's stdin, and pdsh passes none to the "
                   "commands it runs: use --launcher ssh (or srun)",
                   NULL);
    if (h->ship_dir) {
        dirs[0] = h->ship_dir;
    } else if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) > 0) {
        exe[n] = '\0';
        *strrchr(exe, '/') = '\0'; /* the kernel's path is absolute */
        snprintf(h->ship_dirs[0], sizeof(h->ship_dirs[0]), "%s", exe);
        snprintf(h->ship_dirs[1], sizeof(h->ship_dirs[1]), "%.2000s/%.2000s", exe,
                 RANKTOP_BIN_TO_DATA[0] ? RANKTOP_BIN_TO_DATA : "../share/ranktop");
        dirs[0] = h->ship_dirs[0];
        dirs[1] = h->ship_dirs[1];
    }
    ship_cache_init(&h->cache, RANKTOP_VERSION, dirs, 2);
    o->ship = &h->cache;
    return 0;
}

int cli_hosts_finish(struct cli_hosts *h, struct engine_remote_opts *o, const char *cmd)
{
    const char *job = NULL;
    char srun[160];
    bool pdsh = h->launcher && !strcmp(h->launcher, "pdsh");

    memset(o, 0, sizeof(*o));
    if (h->this_node)
        return 0;
    if (!h->given && from_slurm(h, cmd, &job) < 0)
        return -1;
    if (!h->list.n)
        return 0;             /* this node only */
    hostlist_dedup(&h->list); /* a host given twice is one host, watched once */
    if (h->launcher && !strcmp(h->launcher, "srun")) {
        if (!job && !(job = getenv("SLURM_JOB_ID")))
            return bad(cmd, "--launcher srun needs a Slurm allocation (SLURM_JOB_ID)", NULL);
        /* One step that shares the job's resources, an agent per node; the engine adds
         * --label, -N, -n and -w with the hosts. */
        snprintf(srun, sizeof(srun), "srun --jobid=%s --overlap --ntasks-per-node=1 --wait=0 -K0",
                 job);
        if (parse_rsh(h, h->rsh ? h->rsh : srun, cmd, false) < 0)
            return -1;
        o->launcher = ENGINE_LAUNCH_SRUN;
    } else if (pdsh) {
        if (parse_rsh(h, h->rsh ? h->rsh : "pdsh -R ssh -t 10", cmd, true) < 0)
            return -1;
        o->launcher = ENGINE_LAUNCH_PDSH;
    } else if (parse_rsh(h, h->rsh ? h->rsh : DEFAULT_RSH, cmd, true) < 0) {
        return -1;
    }
    for (size_t i = 0; i < h->list.n; i++) {
        if (is_local(h->list.v[i])) {
            o->local = true;
            continue;
        }
        if (h->remote.n >= ENGINE_MAX_HOSTS)
            return bad(cmd, "more hosts than one head watches (511)", NULL);
        hostlist_expand(h->list.v[i], &h->remote, NULL);
    }
    o->hosts = h->remote.v;
    o->nhosts = h->remote.n;
    o->rsh = h->tmpl.w;
    o->nrsh = h->tmpl.n;
    o->rsh_has_host = h->tmpl.has_host;
    o->ranktop = h->ranktop;
    o->slurm_job = job;
    return ship_setup(h, o, cmd);
}

void cli_hosts_fini(struct cli_hosts *h)
{
    hostlist_free(&h->list);
    hostlist_free(&h->remote);
    rsh_tmpl_fini(&h->tmpl);
    if (h->cache.bins)
        ship_cache_fini(&h->cache);
    memset(h, 0, sizeof(*h));
}
