/* Subcommands of the ranktop binary. Each parses its own arguments (argv[0] is the subcommand
 * name) and returns the process exit status. Main thread only. */
#ifndef RANKTOP_CLI_H
#define RANKTOP_CLI_H

int cmd_dump(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_monitor(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_agent(int argc, char **argv);

/* Parses "12,34" into pids (appending to *v / *n). Returns 0 or -1 with a message in err. */
int cli_parse_pids(const char *arg, int **v, int *n, char *err, unsigned errlen);

#endif
