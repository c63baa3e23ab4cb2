/* The discovery flags every subcommand that finds ranks accepts (issue 3): -p, --children-of,
 * --match, --nvidia-smi, --npu-smi, --nvidia-smi-file, --npu-smi-file, --tool-timeout. */
#ifndef RANKTOP_CLI_DISCOVERY_H
#define RANKTOP_CLI_DISCOVERY_H

#include <getopt.h>
#include <stdio.h>

#include "ranktop/discovery.h"

/* Long options to splice into a subcommand's table (terminated by a zero entry); their `val`s
 * are >= CLI_DISC_BASE. */
#define CLI_DISC_BASE 0x1000
extern const struct option cli_disc_options[];

/* Handles one getopt result that belongs to discovery ('p' or >= CLI_DISC_BASE). Returns 1 when
 * handled, 0 when not ours, -1 on a bad value (message printed with the command's name). */
int cli_disc_handle(int c, const char *arg, struct discovery_opts *o, const char *cmd);

/* Builds a getopt_long table: the command's own options (n of them), then the discovery
 * options, the multi-node options (cli_hosts.h), then the terminator. out must hold n + 24
 * entries. */
void cli_disc_longopts(const struct option *own, size_t n, struct option *out);

/* Frees what cli_disc_handle allocated. */
void cli_disc_fini(struct discovery_opts *o);

/* Says "ranktop CMD: no process N" on stderr for each pid of a and b (the processes named with
 * -p and --children-of) that does not exist, each pid once, so that a run on a mistyped pid
 * fails at once instead of waiting for it. A process of another user exists. Returns how many
 * do not. */
int cli_disc_missing(const char *cmd, const int *a, int na, const int *b, int nb);

/* Prints the help lines of the discovery flags. */
void cli_disc_usage(FILE *f);

#endif
