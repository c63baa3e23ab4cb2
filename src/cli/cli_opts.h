/* The one source of every command's options: a table per command (and the shared tables of
 * the discovery and multi-node flags) from which both getopt_long's arrays and the --help
 * lines are made, so that the help names every option getopt accepts, with its description in
 * one column. Main thread only. */
#ifndef RANKTOP_CLI_OPTS_H
#define RANKTOP_CLI_OPTS_H

#include <getopt.h>
#include <stdio.h>

/* One entry of a table. An option has a name; an entry without one is a paragraph of prose
 * (help: its leading newlines are blank lines, the rest is wrapped) between the options; the
 * table ends with an all-zero entry. */
struct cli_opt {
    int val;          /* what getopt_long returns; a letter or digit is also the short option */
    const char *name; /* the long name; NULL for a paragraph */
    const char *arg;  /* the value's name in the help ("FILE"); NULL for a flag without one */
    const char *help; /* the description, wrapped to the help's width; '\n' breaks a line */
};

/* A command's tables in the order --help shows them, ended by NULL. */
typedef const struct cli_opt *const cli_opt_tables[];

/* Where every description starts, and the width the help is wrapped to. */
#define CLI_OPTS_COLUMN 30
#define CLI_OPTS_WIDTH 79
#define CLI_OPTS_MAX 64

/* getopt_long's arguments, made from tables. */
struct cli_getopt {
    struct option longs[CLI_OPTS_MAX + 1];
    char shorts[2 * CLI_OPTS_MAX + 2];
};

/* The shared --help entry, for the end of a command's tables. */
extern const struct cli_opt cli_opts_help[];

/* Fills g from the tables: every named entry once (a later entry with a name already taken
 * is dropped, so a command may list its own -p before a shared table's). Aborts when the
 * tables hold more than CLI_OPTS_MAX options (a programming error). */
void cli_opts_getopt(const struct cli_opt *const *tabs, struct cli_getopt *g);

/* Prints the tables' help lines: "  -o, --output FILE" (or "      --all-threads") and the
 * description from CLI_OPTS_COLUMN, wrapped; a name too long for the column gets a line of
 * its own. Paragraphs are wrapped from column 0. Options a previous table named are skipped. */
void cli_opts_usage(FILE *f, const struct cli_opt *const *tabs);

/* One help row: left ("  ls [options]") and the description from CLI_OPTS_COLUMN. */
void cli_opts_row(FILE *f, const char *left, const char *help);

#endif
