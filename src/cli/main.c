/* ranktop entry point: dispatches to a subcommand. Runs on the main thread. Every command
 * exits with the statuses of enum cli_exit (0 done, 1 runtime failure, 2 usage error), and
 * names itself at the start of its error lines ("ranktop ls: ..."): getopt's own lines take
 * argv[0], which is set here to that name. */
#include "cli.h"
#include "cli_opts.h"

#include "ranktop/engine/engine.h"
#include "ranktop/remote/ship.h"
#include "ranktop/base/util.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fputs("usage: ranktop [options]                the live monitor on the job's ranks\n"
          "       ranktop [options] -- CMD...     start CMD and watch its ranks\n"
          "       ranktop <command> [options]\n"
          "\n"
          "commands:\n",
          f);
    cli_opts_row(f, "  demo [options]", "the monitor on a bundled 4-rank demo job");
    cli_opts_row(f, "  ls [options]", "list the GPUs/NPUs and the ranks of this node");
    cli_opts_row(f, "  dump [options]",
                 "print the Python stacks of running processes (-p PID, or --ranks)");
    cli_opts_row(f, "  record [-o FILE] [options]", "record the ranks' stacks to a trace file");
    cli_opts_row(f, "  watch --out DIR [options]",
                 "watch the job headless; write a hang report when it hangs");
    cli_opts_row(f, "  agent [options]", "a node's collectors for a head on another node");
    fputc('\n', f);
    cli_opts_row(f, "  -h, --help", "this help ('ranktop CMD --help': a command's)");
    cli_opts_row(f, "  -V, --version", "print the version");
    fputs("\noptions of the monitor (and demo):\n", f);
    cmd_monitor_options(f);
    fputs("\n"
          "Exit status (every command): 0 done, 1 a runtime failure (no rank found, a\n"
          "process or file that cannot be used, nothing recorded), 2 a usage error\n"
          "(unknown option, bad value, missing argument). See ranktop(1).\n",
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
    } cmds[] = {{"ls", cmd_ls, true},          {"demo", cmd_demo, false},
                {"record", cmd_record, false}, {"dump", cmd_dump, true},
                {"watch", cmd_watch, false},   {"agent", cmd_agent, true}};

    /* A binary the head shipped here (--ship) removes itself and its directory before anything
     * else, so that nothing is left on the node however it ends. */
    ship_cleanup();
    app_crash_install(RANKTOP_VERSION);
    if (argc >= 2 && is_opt(argv[1], "-h", "--help")) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (argc >= 2 && is_opt(argv[1], "-V", "--version")) {
        cli_version(stdout);
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
    fprintf(stderr,
            "ranktop: unknown command '%s' (commands: demo, ls, dump, record, watch, agent)\n",
            argv[1]);
    return cli_try_help(NULL);
}
