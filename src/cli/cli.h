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

struct json_object;
/* json_object_new_string for text that may come from a target, a device file or another
 * node: bytes that are not UTF-8 become U+FFFD, so every JSON ranktop writes is UTF-8. */
struct json_object *cli_json_str(const char *s);

#endif
