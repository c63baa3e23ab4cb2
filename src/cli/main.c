/* ranktop entry point: dispatches to a subcommand. Runs on the main thread. Every command
 * exits with the statuses of enum cli_exit (0 done, 1 runtime failure, 2 usage error), and
 * names itself at the start of its error lines ("ranktop ls: ..."): getopt's own lines take
 * argv[0], which is set here to that name. */
#include "cli.h"

#include "ranktop/engine.h"
#include "ranktop/util.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fputs("usage: ranktop [options]                the live monitor on the job's ranks\n"
          "       ranktop <command> [options]\n"
          "\n"
          "commands:\n"
          "  demo [options]                  the monitor on a bundled 4-rank demo job\n"
          "  ls [--json] [discovery flags]   list the GPUs/NPUs and the ranks of this node\n"
          "  dump -p PID[,PID...] [--json]   print the Python stacks of running processes\n"
          "  record -o FILE [options]        record the ranks' stacks to a trace file\n"
          "  agent [options]                 a node's collectors for a head on another node\n"
          "\n"
          "  -h, --help                      this help ('ranktop CMD --help': a command's)\n"
          "  -V, --version                   print the version\n"
          "\n"
          "options of the monitor (and demo):\n",
          f);
    cmd_monitor_options(f);
    fputs("\n"
          "Exit status (every command): 0 done, 1 a runtime failure (no rank found, a process\n"
          "or file that cannot be used, nothing recorded), 2 a usage error (unknown option,\n"
          "bad value, missing argument). See ranktop(1).\n",
          f);
}

/* The command's status, as main returns it; but when a collector thread stuck in a system
 * call was left running, the process ends here with _exit: exit handlers and library
 * destructors must not run beside that thread (LeakSanitizer's, for one, stops every thread
 * first and would wait on that one for good). */
static int leave(int rc)
{
    if (engine_left_threads()) {
        fflush(NULL);
        _exit(rc);
    }
    return rc;
}

static int is_opt(const char *a, const char *s, const char *l)
{
    return !strcmp(a, s) || !strcmp(a, l);
}

int main(int argc, char **argv)
{
    /* sink: the command leaves SIGINT/SIGTERM at their default action, so the signal thread
     * makes them end it whatever its threads block (record and the monitor take them). */
    static const struct {
        const char *name;
        int (*run)(int, char **);
        bool sink;
    } cmds[] = {{"ls", cmd_ls, true},
                {"demo", cmd_demo, false},
                {"record", cmd_record, false},
                {"dump", cmd_dump, true},
                {"agent", cmd_agent, true}};

    app_crash_install(RANKTOP_VERSION);
    if (argc >= 2 && is_opt(argv[1], "-h", "--help")) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (argc >= 2 && is_opt(argv[1], "-V", "--version")) {
        puts("ranktop " RANKTOP_VERSION);
        return CLI_EXIT_OK;
    }
    if (argc < 2 || argv[1][0] == '-') {
        argv[0] = (char *)"ranktop";
        return leave(cmd_monitor(argc, argv));
    }
    for (size_t i = 0; i < sizeof(cmds) / sizeof(*cmds); i++)
        if (!strcmp(argv[1], cmds[i].name)) {
            static char who[32];

            snprintf(who, sizeof(who), "ranktop %s", cmds[i].name);
            argv[1] = who;
            if (cmds[i].sink)
                app_term_sink_start();
            return leave(cmds[i].run(argc - 1, argv + 1));
        }
    fprintf(stderr, "ranktop: unknown command '%s' (commands: demo, ls, dump, record, agent)\n",
            argv[1]);
    return cli_try_help(NULL);
}
