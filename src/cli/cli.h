/* Subcommands of the ranktop binary. Each parses its own arguments (argv[0] is the subcommand
 * name) and returns the process exit status. Main thread only. */
#ifndef RANKTOP_CLI_H
#define RANKTOP_CLI_H

#include <stdbool.h>
#include <stdio.h>

int cmd_dump(int argc, char **argv);
/* `ranktop dump --core FILE`: every thread's Python stack from a core (cmd_dump_core.c), with
 * native frames merged in when native. exe and lib_search may be NULL; py the reader's
 * options. Returns the exit status. */
struct pyproc_opts;
struct app_err;
int cmd_dump_core(const char *core, const char *exe, const char *lib_search, bool json, bool native,
                  const struct pyproc_opts *py);
int cmd_ls(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_monitor(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_watch(int argc, char **argv);

/* The monitor's options, for `ranktop --help` (which shows them after the commands). */
void cmd_monitor_options(FILE *f);

/* Prints `ranktop -V`: version, commit, architecture, the optional parts built in (procps
 * library, sanitizers) and the libraries looked for at run time, one "key: value" a line after
 * the first ("ranktop VERSION"). */
void cli_version(FILE *f);

/* Exit statuses, the same for every command (--help, the man page and the README say so). */
enum cli_exit {
    CLI_EXIT_OK = 0,    /* done */
    CLI_EXIT_FAIL = 1,  /* a runtime failure: nothing found, a process or file not usable */
    CLI_EXIT_USAGE = 2, /* the command line is wrong: option, value, argument */
};

/* Who speaks in an error line: "ranktop ls" for cmd "ls", "ranktop" for the monitor (cmd NULL
 * or ""). Points to a static buffer (main thread, one call per message). */
const char *cli_who(const char *cmd);

/* Lines said on stderr once each (cli_tell_once): reasons a target cannot be read, counters
 * that cannot be had, which the engine repeats at every pass. Only a line's first 199 bytes
 * are kept and compared; past CLI_TOLD_MAX lines a new one is said every time. */
#define CLI_TOLD_MAX 64
struct cli_told {
    char line[CLI_TOLD_MAX][200];
    size_t n;
};

/* Prints "ranktop CMD: LINE" unless t says it was said before; returns true when it was new. */
bool cli_tell_once(struct cli_told *t, const char *cmd, const char *line);

/* After getopt_long printed its line about a bad option (prefixed with argv[0], which main
 * sets to cli_who(cmd)): one line pointing at the help, not the whole usage. Returns
 * CLI_EXIT_USAGE. */
int cli_try_help(const char *cmd);

/* Writes the text of `ranktop dump --core core` to out atomically (cli_core.c): the monitor's
 * c key. 0, or a negative status with err filled. Any thread. */
int cli_core_text(const char *core, const char *out, struct app_err *err);

/* Parses "12,34" (or hex, "0x1a2b", as py-spy takes them) into pids (appending to *v / *n).
 * Returns 0 or -1 with a message in err. */
int cli_parse_pids(const char *arg, int **v, int *n, char *err, unsigned errlen);

struct json_object;
/* json_object_new_string for text that may come from a target, a device file or another
 * node: bytes that are not UTF-8 become U+FFFD, so every JSON ranktop writes is UTF-8. */
struct json_object *cli_json_str(const char *s);

/* Prints o as one line of plain JSON on stdout. json-c escapes the C0 controls but writes the
 * C1 controls (U+0080..U+009F, e.g. U+009B, a terminal's CSI) as raw UTF-8: here they become
 * \u0080..\u009f escapes, the same characters for a JSON reader, never control bytes on a
 * terminal (text output shows them as \u00NN too). */
void cli_json_puts(struct json_object *o);

/* dump's JSON frames (cmd_dump.c), for live processes and cores alike: a Python frame
 * {"kind"?, "function", "file", "line"} ("kind": "python" only when kind), and a native one
 * {"kind": "native", "function", "file" (the object), "line": null, "address"}. */
struct pyframe;
struct native_frame;
struct json_object *cli_pyframe_json(const struct pyframe *f, bool kind);
struct json_object *cli_natframe_json(const struct native_frame *f);

/* -V's version and commit, written at build time (version.c.in, commit.c.in). */
extern const char cli_vcs_version[];
extern const char cli_vcs_commit[];

#endif
