/* ranktop entry point: dispatches to a subcommand. Runs on the main thread; decides the exit
 * status (0 success, 1 some target could not be read, 2 usage error). */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("usage: ranktop <command> [options]\n"
          "\n"
          "commands:\n"
          "  (none) [options]                the live monitor (see ranktop --help)\n"
          "  demo                            the monitor on a bundled demo job\n"
          "  ls [--json] [discovery flags]   list the GPUs/NPUs and the ranks of this node\n"
          "  dump -p PID[,PID...] [--json]   print the Python stacks of running processes\n"
          "  record -o FILE [options]        record the ranks' stacks to a trace file\n"
          "  agent [options]                 a node's collectors for a head on another node\n"
          "\n"
          "options:\n"
          "  -h, --help      this help\n"
          "  -V, --version   print the version\n"
          "\n"
          "Run 'ranktop dump --help' for the options of a command.\n",
          f);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version"))) {
            puts("ranktop " RANKTOP_VERSION);
            return 0;
        }
        return cmd_monitor(argc, argv);
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
        puts("ranktop " RANKTOP_VERSION);
        return 0;
    }
    if (!strcmp(argv[1], "ls"))
        return cmd_ls(argc - 1, argv + 1);
    if (!strcmp(argv[1], "demo"))
        return cmd_demo(argc - 1, argv + 1);
    if (!strcmp(argv[1], "record"))
        return cmd_record(argc - 1, argv + 1);
    if (!strcmp(argv[1], "dump"))
        return cmd_dump(argc - 1, argv + 1);
    if (!strcmp(argv[1], "agent"))
        return cmd_agent(argc - 1, argv + 1);
    fprintf(stderr, "ranktop: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
