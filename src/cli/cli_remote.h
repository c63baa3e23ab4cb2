/* One-shot commands on other nodes for `ls --hosts` and `dump --hosts`: runs
 * RSH... HOST RANKTOP ARGS... on every host at once, each under a deadline, and hands back
 * each host's output. Main thread (it starts and joins one worker thread per host). */
#ifndef RANKTOP_CLI_REMOTE_H
#define RANKTOP_CLI_REMOTE_H

#include "cli_hosts.h"
#include "ranktop/devices/exec.h"

struct cli_remote_result {
    const char *host;       /* borrowed from the host list */
    int rc;                 /* exec_run's status: 0, APP_E_TIMEOUT, APP_E_NOTFOUND... */
    struct exec_result res; /* the remote command's output and exit status */
    char why[512];          /* one line when rc < 0 or the exit status is not 0: how the
                               remote shell ended and its last stderr lines (rsh_explain) */
    size_t ship_bytes;      /* --ship: the binary's bytes sent to this host (0: none) */
    double ship_s;          /* --ship: seconds from the node's request to the last byte */
};

/* Runs the command on every remote host of h (at most 32 at a time). *out has o->nhosts
 * entries; free with cli_remote_free. With o->ship the command goes through ship.h's script
 * and each host's shipping cost is printed on stderr. */
void cli_remote_run(const struct engine_remote_opts *o, const char *const *args, int timeout_ms,
                    struct cli_remote_result **out);
void cli_remote_free(struct cli_remote_result *r, size_t n);

#endif
