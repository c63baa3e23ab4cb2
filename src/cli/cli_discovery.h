/* The discovery flags every subcommand that finds ranks accepts (issue 3): -p, --children-of,
 * --match, --nvidia-smi, --npu-smi, --nvidia-smi-file, --npu-smi-file, --tool-timeout,
 * --no-device-libs. */
#ifndef RANKTOP_CLI_DISCOVERY_H
#define RANKTOP_CLI_DISCOVERY_H

#include <getopt.h>
#include <stdio.h>

#include "cli_hosts.h"
#include "cli_opts.h"
#include "ranktop/discovery/discovery.h"

/* The discovery flags' table (cli_opts.h) for a command's tables; their `val`s are 'p' and
 * >= CLI_DISC_BASE. */
#define CLI_DISC_BASE 0x1000
extern const struct cli_opt cli_disc_opts[];

/* Handles one getopt result that belongs to discovery ('p' or >= CLI_DISC_BASE). Returns 1 when
 * handled, 0 when not ours, -1 on a bad value (message printed with the command's name). */
int cli_disc_handle(int c, const char *arg, struct discovery_opts *o, const char *cmd);

/* cli_hosts_finish for a command that takes both kinds of flags. Flags that name processes
 * (-p, --children-of, --match) select this node's: inside a Slurm allocation without --hosts
 * they mean this node only (as --this-node); with --hosts or --hostfile naming another node
 * they are refused (the agents there find their ranks themselves, the flags would be ignored
 * there). Returns 0, or -1 after a message (a usage error). */
int cli_disc_finish(const struct discovery_opts *o, struct cli_hosts *h,
                    struct engine_remote_opts *ro, const char *cmd);

/* py-spy's --subprocesses: each -p PID also stands for its descendants (--children-of PID), and
 * for itself only when it runs Python (a shell launcher is not a rank) or cannot be checked
 * (gone or unreadable: the command says why later). Returns 0, or -1 after a message when no
 * -p was given. */
int cli_disc_subprocesses(struct discovery_opts *o, const char *cmd);

/* Frees what cli_disc_handle allocated. */
void cli_disc_fini(struct discovery_opts *o);

/* Says "ranktop CMD: no process N" on stderr for each pid of a and b (the processes named with
 * -p and --children-of) that does not exist, each pid once, so that a run on a mistyped pid
 * fails at once instead of waiting for it. A process of another user exists. Returns how many
 * do not. */
int cli_disc_missing(const char *cmd, const int *a, int na, const int *b, int nb);

#endif
