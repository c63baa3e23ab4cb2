/* The multi-node flags shared by the monitor, record, ls and dump: which hosts, how to reach
 * them (the remote shell, a template split with sh quoting rules and exec'd with an argv: no
 * local shell runs it), and which ranktop runs there. Main thread only. */
#include "cli_hosts.h"

#include "cli.h"
#include "cli_opts.h"

#include "ranktop/devices/exec.h"
#include "ranktop/base/util.h"

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
    OPT_SELECTOR,
    OPT_CONTAINER,
    OPT_SHIP,
    OPT_SHIP_DIR,
    OPT_NS = 'n',
};

/* Where a pod finds its namespace; RANKTOP_KUBE_NAMESPACE_FILE replaces it (for tests). */
#define KUBE_NS_FILE "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
#define KUBE_GET_MS 30000 /* a kubectl get that takes longer is not coming back */

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
    {OPT_LAUNCHER, "launcher", "ssh|srun|pdsh|kubectl",
     "srun: one srun --overlap step starts every agent (the default inside a Slurm "
     "allocation, without --hosts); pdsh: one pdsh starts them (--rsh: its options, then "
     "after a -- words to put before ranktop, for -R exec); kubectl: each host is a pod, "
     "reached with kubectl exec -i (--rsh: the kubectl part, %h the pod); in a pod without "
     "--hosts or --selector, the pods of its job"},
    {OPT_SELECTOR, "selector", "LABELS",
     "kubectl: the Running pods with these labels (kubectl get pods -l), in name order"},
    {OPT_NS, "namespace", "NS", "kubectl: the pods' namespace"},
    {OPT_CONTAINER, "container", "NAME", "kubectl: the container the agent runs in"},
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
        if (strcmp(arg, "ssh") && strcmp(arg, "srun") && strcmp(arg, "pdsh") &&
            strcmp(arg, "kubectl"))
            return bad(cmd, "--launcher takes ssh, srun, pdsh or kubectl, not ", arg);
        h->launcher = arg;
        return 1;
    case OPT_SELECTOR:
        if (!arg[0] || strlen(arg) > KUBE_ARG_MAX || strpbrk(arg, "\n\r\t"))
            return bad(cmd, "--selector: not a label selector: ", text_safe(arg));
        h->selector = arg;
        return 1;
    case OPT_NS:
    case OPT_CONTAINER:
        if (!kube_name_ok(arg))
            return bad(cmd,
                       c == OPT_NS ? "--namespace: not a namespace name: "
                                   : "--container: not a container name: ",
                       text_safe(arg));
        *(c == OPT_NS ? &h->ns : &h->container) = arg;
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

/* The last non-empty line of a tool's stderr (cut in place), "" when none. */
static const char *last_line(char *text)
{
    char *end = text ? text + strlen(text) : NULL, *start;

    if (!text)
        return "";
    while (end > text && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
        *--end = '\0';
    start = strrchr(text, '\n');
    return start ? start + 1 : text;
}

/* Runs `kubectl get pods WHAT... [-n NS] -o json` with the template's kubectl and parses the
 * pods into h->pods. Returns 0, or -1 with kubectl's own last words printed when it failed and
 * must succeed (strict); a failure that is not strict leaves the pods empty. */
static int kube_get(struct cli_hosts *h, const char *const *what, bool running, bool strict,
                    const char *cmd)
{
    char **argv = kube_get_argv(&h->tmpl, what, h->ns), why[700] = "";
    struct exec_result res = {0};
    struct app_err err = {0};
    int rc = exec_run((const char *const *)argv, KUBE_GET_MS, &res, &err);

    kube_pods_fini(&h->pods);
    if (rc < 0)
        snprintf(why, sizeof(why), "%s", err.msg);
    else if (kube_parse_pods(res.out, res.out_len, running, &h->pods, &err) < 0 && res.status == 0)
        snprintf(why, sizeof(why), "%s", err.msg);
    else if (res.status != 0 && strict)
        snprintf(why, sizeof(why), "exit %d: %s", res.status, last_line(res.err));
    if (why[0] && strict) {
        str_scrub(why);
        fprintf(stderr, "%s: %s get pods: %s\n", cli_who(cmd), argv[0], text_safe(why));
    }
    exec_result_fini(&res);
    rsh_argv_free(argv);
    return why[0] && strict ? -1 : 0;
}

/* Inside a pod (KUBERNETES_SERVICE_HOST set): the selector of this pod's job, from its labels,
 * and its namespace (from the service account, unless --namespace said). */
static int kube_own_job(struct cli_hosts *h, const char *cmd)
{
    const char *me = getenv("HOSTNAME"), *nsf = getenv("RANKTOP_KUBE_NAMESPACE_FILE");
    char **argv, *buf = NULL;
    const char *what[2] = {NULL, NULL};
    struct exec_result res = {0};
    struct app_err err = {0};
    size_t len = 0;
    int rc;

    if (!getenv("KUBERNETES_SERVICE_HOST") || !me || !kube_name_ok(me))
        return bad(cmd, "--launcher kubectl needs --hosts or --selector (or to run in a pod)",
                   NULL);
    if (!h->ns && file_read_regular(nsf && nsf[0] ? nsf : KUBE_NS_FILE, 4096, &buf, &len) == 0) {
        snprintf(h->own_ns, sizeof(h->own_ns), "%.*s", (int)strcspn(buf, "\n"), buf);
        if (kube_name_ok(h->own_ns))
            h->ns = h->own_ns;
        free(buf);
    }
    what[0] = me;
    argv = kube_get_argv(&h->tmpl, what, h->ns);
    rc = exec_run((const char *const *)argv, KUBE_GET_MS, &res, &err);
    rsh_argv_free(argv);
    if (rc == 0 && res.status != 0)
        rc = app_err_set(&err, APP_E_IO, "exit %d: %s", res.status, last_line(res.err));
    if (rc == 0)
        rc = kube_parse_job(res.out, res.out_len, h->own_sel, sizeof(h->own_sel), &err);
    exec_result_fini(&res);
    if (rc < 0) {
        str_scrub(err.msg);
        fprintf(stderr, "%s: this pod's job (pod %s): %s\n", cli_who(cmd), me, err.msg);
        return -1;
    }
    h->selector = h->own_sel;
    return 0;
}

/* The pods: those --selector (or this pod's job) selects, Running, in name order; or those
 * --hosts names, with their nodes when one kubectl get can tell (a missing pod is left for its
 * agent's launcher to report). */
static int kube_pods(struct cli_hosts *h, const char *cmd)
{
    char word[KUBE_ARG_MAX + 16];
    const char *what[ENGINE_MAX_HOSTS + 2] = {NULL};
    struct app_err err = {0};

    if (h->given && h->selector)
        return bad(cmd, "--selector and --hosts both name pods: give one", NULL);
    if (!h->given && !h->selector && kube_own_job(h, cmd) < 0)
        return -1;
    if (h->selector) {
        snprintf(word, sizeof(word), "--selector=%s", h->selector);
        what[0] = word;
        if (kube_get(h, what, true, true, cmd) < 0)
            return -1;
        if (!h->pods.n) {
            fprintf(stderr, "%s: no Running pod matches --selector %s%s%s\n", cli_who(cmd),
                    text_safe(h->selector), h->ns ? " in namespace " : "", h->ns ? h->ns : "");
            return -1;
        }
        for (size_t i = 0; i < h->pods.n; i++)
            hostlist_expand(h->pods.v[i].name, &h->list, &err);
        return 0;
    }
    hostlist_dedup(&h->list);
    for (size_t i = 0; i < h->list.n; i++) {
        if (!kube_name_ok(h->list.v[i]))
            return bad(cmd, "--hosts: not a pod name: ", text_safe(h->list.v[i]));
        if (i < ENGINE_MAX_HOSTS)
            what[i] = h->list.v[i];
    }
    return kube_get(h, what, false, false, cmd);
}

static int kube_finish(struct cli_hosts *h, struct engine_remote_opts *o, const char *cmd)
{
    if (parse_rsh(h, h->rsh ? h->rsh : KUBE_DEFAULT_EXEC, cmd, true) < 0 || kube_pods(h, cmd) < 0)
        return -1;
    for (size_t i = 0; i < h->list.n; i++) {
        if (is_local(h->list.v[i])) { /* this pod: its ranks are read in-process */
            o->local = true;
            continue;
        }
        if (h->remote.n >= ENGINE_MAX_HOSTS)
            return bad(cmd, "more pods than one head watches (511)", NULL);
        hostlist_expand(h->list.v[i], &h->remote, NULL);
    }
    h->nodes = x_calloc(h->remote.n + 1, sizeof(char *));
    for (size_t i = 0; i < h->remote.n; i++)
        h->nodes[i] = (char *)kube_pods_node(&h->pods, h->remote.v[i]);
    o->launcher = ENGINE_LAUNCH_KUBECTL;
    o->kube_ns = h->ns;
    o->kube_container = h->container;
    o->nodes = h->nodes;
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
                   "commands it runs: use --launcher ssh, srun or kubectl",
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
    if ((h->selector || h->ns || h->container) && !h->launcher)
        h->launcher = "kubectl"; /* only pods have them */
    if ((h->selector || h->ns || h->container) && strcmp(h->launcher, "kubectl"))
        return bad(cmd, "--selector, --namespace and --container go with --launcher kubectl", NULL);
    if (h->this_node)
        return 0;
    if (h->launcher && !strcmp(h->launcher, "kubectl")) {
        if (kube_finish(h, o, cmd) < 0)
            return -1;
        goto done;
    }
    if (!h->given && from_slurm(h, cmd, &job) < 0)
        return -1;
    if (!h->list.n) /* this node only; a template given is still checked, used or not */
        return h->rsh && parse_rsh(h, h->rsh, cmd, true) < 0 ? -1 : 0;
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
done:
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
    kube_pods_fini(&h->pods);
    free(h->nodes);
    if (h->cache.bins)
        ship_cache_fini(&h->cache);
    memset(h, 0, sizeof(*h));
}
