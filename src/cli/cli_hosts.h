/* The multi-node flags every command that watches ranks accepts (README, "Multi-node"):
 * --hosts, --hostfile, --rsh, --remote-ranktop, --launcher, and for pods --selector,
 * --namespace, --container; inside a Slurm allocation the job's nodes by default, inside a pod
 * with --launcher kubectl the pods of its job. Main thread only. */
#ifndef RANKTOP_CLI_HOSTS_H
#define RANKTOP_CLI_HOSTS_H

#include <getopt.h>
#include <stdio.h>

#include "cli_opts.h"
#include "ranktop/engine/engine.h"
#include "ranktop/remote/hostlist.h"
#include "ranktop/remote/kube.h"
#include "ranktop/remote/rsh.h"

/* The multi-node flags' table (cli_opts.h), with the paragraph that introduces them; their
 * `val`s are >= CLI_HOSTS_BASE. */
#define CLI_HOSTS_BASE 0x4000
extern const struct cli_opt cli_hosts_opts[];

struct cli_hosts {
    struct hostlist list;   /* every host named, in order */
    struct hostlist remote; /* those that are not this node */
    const char *rsh, *ranktop, *launcher;
    struct rsh_tmpl tmpl; /* --rsh (or the launcher's default), parsed */
    bool given;           /* --hosts or --hostfile */
    bool this_node;       /* --this-node: no other host, whatever the environment says */
    /* kubectl: --selector, --namespace, --container; the pods listed (their nodes) and each
     * remote host's node, parallel to remote (pointers into pods, or NULL). */
    const char *selector, *ns, *container;
    char own_sel[160], own_ns[KUBE_NAME_MAX + 1]; /* this pod's job, its namespace */
    struct kube_pods pods;
    char **nodes;
    bool ship;            /* --ship */
    const char *ship_dir; /* --ship-dir */
    char ship_dirs[2][4096];
    struct ship_cache cache; /* set up by cli_hosts_finish with --ship */
};

/* Handles one getopt result (>= CLI_HOSTS_BASE). Returns 1 when handled, 0 when not ours, -1
 * on a bad value (message printed with the command's name). */
int cli_hosts_handle(int c, const char *arg, struct cli_hosts *h, const char *cmd);

/* After parsing: the job's nodes from Slurm when no host was named, the remote shell parsed
 * as a template (rsh.h; a malformed one is a usage error), this node taken out of the list; fills
 * o. Returns 0, or -1 with a message. */
int cli_hosts_finish(struct cli_hosts *h, struct engine_remote_opts *o, const char *cmd);

void cli_hosts_fini(struct cli_hosts *h);

#endif
