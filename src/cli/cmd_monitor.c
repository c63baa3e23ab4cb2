/* `ranktop` (the live monitor) and `ranktop demo` (the monitor on a bundled demo job that it
 * starts and stops). Main thread: parses options, starts the engine, runs the UI, stops. */
#include "cli.h"
#include "cli_discovery.h"
#include "cli_hosts.h"
#include "cli_launch.h"
#include "cli_opts.h"
#include "cli_waits.h"
#include "ranktop/engine/engine.h"
#include "ranktop/ui/ui.h"

#include "ranktop/base/util.h"

#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEMO_RANKS 4

extern char **environ;

struct mon_opts {
    struct engine_opts eng;
    struct ui_opts ui;
    struct cli_hosts hosts;
    char **job_argv;     /* `-- CMD...`: the job to start and watch */
    struct waits *waits; /* --waits FILE; NULL: the built-in rules */
};

enum {
    OPT_HANG = 0x3000,
    OPT_EXPORT_DIR,
    OPT_HISTORY,
    OPT_ALL,
    OPT_FULL_NAMES,
    OPT_WAITS,
    OPT_NOLINENO
};

/* -s (py-spy's --subprocesses), applied once every -p is known. Main thread only. */
static bool subprocesses;

static const struct cli_opt mon_opts_table[] = {
    {'r', "rate", "HZ", "stack samples per second per rank (default 10)"},
    {OPT_HANG, "hang-after", "S", "HANG banner after S seconds without change (default 30)"},
    {OPT_EXPORT_DIR, "export-dir", "DIR", "where `e` writes traces (default: current directory)"},
    {OPT_HISTORY, "history", "S", "seconds of history kept (default 600)"},
    {OPT_ALL, "all-threads", NULL, "start with every thread (key t toggles)"},
    {'s', "subprocesses", NULL,
     "each -p PID also means its descendants (as --children-of PID; PID itself when Python)"},
    {OPT_FULL_NAMES, "full-filenames", NULL,
     "frames' files as full paths (default: package-relative, torch/nn/modules/module.py)"},
    {'g', "gil", NULL,
     "only samples of threads that hold the GIL (as py-spy --gil); the others leave gaps"},
    {'F', "function", NULL,
     "frames by function, without line numbers (py-spy's -F; as --nolineno here: the merged "
     "tree and the Top view merge a function's lines anyway)"},
    {OPT_NOLINENO, "nolineno", NULL, "no line numbers: frames by function (as -F)"},
    {OPT_WAITS, "waits", "FILE",
     "the rules naming each rank's kind of wait, the WAIT column (default: the built-in "
     "table, share/ranktop/waits.rules)"},
    {0},
};

static const struct cli_opt *const mon_tables[] = {mon_opts_table, cli_opts_help, cli_disc_opts,
                                                   cli_hosts_opts, NULL};

void cmd_monitor_options(FILE *f)
{
    static const struct cli_opt *const no_help[] = {mon_opts_table, cli_disc_opts, cli_hosts_opts,
                                                    NULL};

    cli_opts_usage(f, no_help);
}

static void mon_usage(FILE *f)
{
    fputs("usage: ranktop [options]               the live monitor on the discovered ranks\n"
          "       ranktop [options] -- CMD...    start CMD and watch its ranks\n"
          "       ranktop demo [options]         the monitor on a bundled demo job\n"
          "\n"
          "With -- CMD the monitor starts CMD in a process group of its own (its output\n"
          "goes to NAME-TIME.log in the export directory), watches its Python processes\n"
          "(torchrun's workers as the ranks) and quits when it ends, with its exit\n"
          "status; Ctrl-C asks whether to stop the job too.\n"
          "\n",
          f);
    cli_opts_usage(f, mon_tables);
    fputs("\nOther commands: ranktop ls | dump | record | agent (each with --help); keys: F1\n"
          "or ? in the monitor. Exit status: 0 on q, 1 when the monitor cannot start, 2 on\n"
          "bad usage.\n",
          f);
}

static int num_arg(const char *who, const char *arg, const char *flag, double min, double max,
                   double *out)
{
    char *end;
    double v = strtod(arg, &end);

    if (end == arg || *end || !(v >= min && v <= max)) {
        fprintf(stderr, "%s: %s wants a number in [%g, %g], got '%s'\n", cli_who(who), flag, min,
                max, arg);
        return -1;
    }
    *out = v;
    return 0;
}

/* One option of the monitor's own; who is "" (the monitor) or "demo". Returns 0, or -1 after
 * its message. */
static int mon_option(int c, const char *arg, struct mon_opts *o, const char *who)
{
    double v;

    switch (c) {
    case 'r':
        return num_arg(who, arg, "--rate", 0.1, 1000, &o->eng.rate_hz);
    case OPT_HANG:
        return num_arg(who, arg, "--hang-after", 1, 1e6, &o->ui.hang_after_s);
    case OPT_EXPORT_DIR:
        o->ui.export_dir = arg;
        return 0;
    case OPT_HISTORY:
        if (num_arg(who, arg, "--history", 10, 1e7, &v) < 0)
            return -1;
        o->eng.history_ns = (uint64_t)(v * 1e9);
        return 0;
    case OPT_ALL:
        o->ui.all_threads = o->eng.all_threads = true;
        return 0;
    case OPT_FULL_NAMES:
        o->ui.full_filenames = true;
        return 0;
    case 'g': /* the sampler leaves the others out, as record --gil */
        o->ui.gil_only = o->eng.gil_only = true;
        return 0;
    case 'F':
    case OPT_NOLINENO:
        o->ui.no_lines = true;
        return 0;
    case 's':
        subprocesses = true;
        return 0;
    case OPT_WAITS:
        waits_free(o->waits);
        if (cli_waits_load(arg, who, &o->waits) != 0)
            return -1;
        o->ui.waits = o->waits;
        return 0;
    default: /* getopt said what was wrong */
        cli_try_help(who);
        return -1;
    }
}

/* Returns an exit status to leave with (help, bad usage), or -1 to run. */
static int parse_monitor(int argc, char **argv, struct mon_opts *o, const char *who)
{
    static struct cli_getopt g;
    int c;

    cli_opts_getopt(mon_tables, &g);
    optind = 1;
    while ((c = getopt_long(argc, argv, g.shorts, g.longs, NULL)) != -1) {
        int h = cli_disc_handle(c, optarg, &o->eng.disc, who);

        if (h == 0)
            h = cli_hosts_handle(c, optarg, &o->hosts, who);
        if (h < 0)
            return CLI_EXIT_USAGE;
        if (h == 1)
            continue;
        if (c == 'h') {
            mon_usage(stdout);
            return CLI_EXIT_OK;
        }
        if (mon_option(c, optarg, o, who) < 0)
            return CLI_EXIT_USAGE;
    }
    o->job_argv = who[0] ? NULL : cli_job_argv(argc, argv, optind);
    if (!who[0] && cli_job_missing(argc, argv, optind)) {
        fprintf(stderr, "ranktop: -- wants the command to start after it\n");
        return cli_try_help(who);
    }
    if (optind < argc && !o->job_argv) {
        fprintf(stderr, "%s: unexpected argument '%s'%s\n", cli_who(who), argv[optind],
                who[0] ? "" : " (a command to start goes after --)");
        return cli_try_help(who);
    }
    if (subprocesses && cli_disc_subprocesses(&o->eng.disc, who) < 0)
        return cli_try_help(who);
    if (o->job_argv &&
        (o->eng.disc.npids || o->eng.disc.nchildren_of || o->eng.disc.match || o->hosts.given)) {
        fprintf(stderr,
                "%s: -- CMD watches the job it starts: drop -p, --children-of, --match, "
                "--hosts and --hostfile\n",
                cli_who(who));
        return cli_try_help(who);
    }
    return cli_disc_finish(&o->eng.disc, &o->hosts, &o->eng.remote, who) < 0 ? CLI_EXIT_USAGE : -1;
}

static int run_monitor(struct mon_opts *o)
{
    struct engine *e;
    struct app_err err = {0};
    sigset_t set;
    int rc;

    /* Collector threads must not take SIGWINCH / SIGINT: block before they start; the UI
     * thread unblocks. */
    sigemptyset(&set);
    sigaddset(&set, SIGWINCH);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    /* Every thread is sampled whatever the view: `t` switches views at once, and the GIL view
     * and the rank table name GIL holders that are not the main thread. */
    o->eng.all_threads = true;
    /* The terminal is opened first: opening it sets environment variables, which the
     * collector threads read (posix_spawn of the device tools). */
    rc = ui_open(&err);
    if (rc == 0)
        rc = engine_start(&o->eng, &e, &err);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    if (rc < 0) {
        ui_restore();
        fprintf(stderr, "ranktop: %s\n", err.msg);
        return 1;
    }
    o->ui.engine = e;
    rc = ui_run(&o->ui, &err);
    engine_stop(e);
    engine_free(e);
    if (rc < 0)
        fprintf(stderr, "ranktop: %s\n", err.msg);
    return rc < 0 ? 1 : 0;
}

static void mon_defaults(struct mon_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->eng.rate_hz = 10;
    o->eng.gil = o->eng.mem = o->eng.gpu = o->eng.npu = o->eng.wait_states = true;
    o->eng.history_ns = 600ull * 1000000000ull;
    /* 512 MiB in all: the history takes a quarter of the cap it is given (HISTORY_CAP_SHARE),
     * and the monitor holds one more copy than the cap counts: the view it draws while the
     * recorder publishes the next (engine_acquire). */
    o->eng.mem_cap = (512u << 20) / 5 * 4;
    o->ui.hang_after_s = 30;
    o->ui.export_dir = ".";
    o->ui.core_text = cli_core_text;
}

static bool job_ended(void *arg)
{
    return cli_job_ended(arg);
}

/* The monitor on the job of `-- CMD`: started before any thread (it forks), its output in the
 * export directory, stopped after the UI when the user said so. Returns the exit status: the
 * job's when it ended, 0 when it was left running, 1 when it could not start. */
static int run_job(struct mon_opts *o)
{
    struct cli_job job;
    struct ui_job uj = {job_ended, &job, o->job_argv[0], false};
    char log[4096], name[512], err[640], how[160];
    int rc;

    cli_job_default_name(o->job_argv[0], "log", name, sizeof(name));
    snprintf(log, sizeof(log), "%s/%s", o->ui.export_dir, name);
    if (cli_job_start(&job, o->job_argv, log, err, sizeof(err)) < 0) {
        fprintf(stderr, "ranktop: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    o->eng.disc.job = job.pid;
    o->eng.discovery_ms = 500;
    o->ui.job = &uj;
    o->ui.title = o->job_argv[0];
    rc = run_monitor(o);
    if (uj.stop)
        cli_job_stop(&job, 5);
    cli_job_describe(&job, how, sizeof(how));
    fprintf(stderr, "ranktop: %s (pid %d) %s; its output is in %s\n", o->job_argv[0], job.pid, how,
            log);
    if (rc)
        return rc;
    return job.ended ? cli_job_exit(&job) : 0;
}

int cmd_monitor(int argc, char **argv)
{
    struct mon_opts o;
    int rc;

    mon_defaults(&o);
    rc = parse_monitor(argc, argv, &o, "");
    /* A named process that does not exist fails before the screen is taken (this node's pids
     * only: with --hosts they may be another node's). */
    if (rc < 0 && !o.eng.remote.nhosts &&
        cli_disc_missing("", o.eng.disc.pids, o.eng.disc.npids, o.eng.disc.children_of,
                         o.eng.disc.nchildren_of))
        rc = CLI_EXIT_FAIL;
    if (rc < 0 && o.job_argv) {
        rc = run_job(&o);
    } else if (rc < 0) {
        o.ui.title = o.eng.disc.npids          ? "given pids"
                     : o.eng.disc.nchildren_of ? "children of launcher"
                                               : "discovered ranks";
        rc = run_monitor(&o);
    }
    cli_disc_fini(&o.eng.disc);
    cli_hosts_fini(&o.hosts);
    waits_free(o.waits);
    return rc;
}

/* Starts DEMO_RANKS python3 processes running data/demo_job.py; returns how many started. */
static int demo_start(const char *script, const char *syncdir, int *pids)
{
    int n = 0;

    for (int r = 0; r < DEMO_RANKS; r++) {
        char rank[32], lrank[32], world[32], sync[600];
        char *const argv[] = {(char *)"python3", (char *)"-S", (char *)script, NULL};
        char *envp[512];
        int k = 0;

        snprintf(rank, sizeof(rank), "RANK=%d", r);
        snprintf(lrank, sizeof(lrank), "LOCAL_RANK=%d", r);
        snprintf(world, sizeof(world), "WORLD_SIZE=%d", DEMO_RANKS);
        snprintf(sync, sizeof(sync), "DEMO_SYNC_DIR=%s", syncdir);
        envp[k++] = rank;
        envp[k++] = lrank;
        envp[k++] = world;
        envp[k++] = sync;
        for (char **e = environ; *e && k < 500; e++)
            if (strncmp(*e, "RANK=", 5) && strncmp(*e, "LOCAL_RANK=", 11) &&
                strncmp(*e, "WORLD_SIZE=", 11))
                envp[k++] = *e;
        envp[k] = NULL;
        if (posix_spawnp(&pids[n], "python3", NULL, NULL, argv, envp) == 0)
            n++;
    }
    return n;
}

static void demo_stop(int *pids, int n, const char *syncdir)
{
    DIR *d;
    struct dirent *de;
    struct timespec ts = {0, 100 * 1000 * 1000};

    for (int i = 0; i < n; i++)
        kill(pids[i], SIGTERM);
    nanosleep(&ts, NULL);
    for (int i = 0; i < n; i++) {
        kill(pids[i], SIGKILL);
        waitpid(pids[i], NULL, 0);
    }
    d = opendir(syncdir);
    while (d && (de = readdir(d)) != NULL) {
        char path[1200];

        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", syncdir, de->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(syncdir);
}

/* Whether dir/demo_job.py can be read; path gets it. */
static bool demo_in(const char *dir, char *path, size_t len)
{
    return snprintf(path, len, "%s/demo_job.py", dir) < (int)len && access(path, R_OK) == 0;
}

/* Where demo_job.py is, first found: $RANKTOP_DATADIR; the data directory of an installed
 * binary, found from the binary's own place (BINDIR/../share/ranktop as configured), so that
 * an install copied or installed with --destdir elsewhere finds its own copy, not a checkout's;
 * the source tree of a binary run from its build directory; the configured install datadir. */
static const char *demo_script(void)
{
    static char path[PATH_MAX + 32];
    char exe[PATH_MAX], dir[PATH_MAX + 64];
    const char *env = getenv("RANKTOP_DATADIR"), *bin_to_data = RANKTOP_BIN_TO_DATA;
    ssize_t n;

    if (env && env[0])
        return demo_in(env, path, sizeof(path)) ? path : NULL;
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0 && bin_to_data[0]) {
        exe[n] = '\0';
        *strrchr(exe, '/') = '\0'; /* the kernel's path is absolute */
        snprintf(dir, sizeof(dir), "%s/%s", exe, bin_to_data);
        /* Resolved: the ranks' command lines and frames show .../share/ranktop, not bin/.. */
        if (realpath(dir, exe) && demo_in(exe, path, sizeof(path)))
            return path;
    }
    if (demo_in(RANKTOP_DATADIR, path, sizeof(path)) ||
        demo_in(RANKTOP_INSTALL_DATADIR, path, sizeof(path)))
        return path;
    return NULL;
}

/* demo_job.py as built in (data/embed.sh), for a binary that finds no copy of it. */
extern const unsigned char demo_job_py[];
extern const size_t demo_job_py_len;

/* Writes the built-in demo job into the demo's private directory; its path, or NULL. */
static const char *demo_builtin(const char *syncdir)
{
    static char path[PATH_MAX];
    FILE *f;
    bool ok;

    snprintf(path, sizeof(path), "%s/demo_job.py", syncdir);
    f = fopen(path, "wx");
    if (!f)
        return NULL;
    ok = fwrite(demo_job_py, 1, demo_job_py_len, f) == demo_job_py_len;
    ok = fclose(f) == 0 && ok;
    return ok ? path : NULL;
}

int cmd_demo(int argc, char **argv)
{
    struct mon_opts o;
    char syncdir[] = "/tmp/ranktop-demo-XXXXXX";
    const char *script = demo_script();
    int pids[DEMO_RANKS], n, rc;

    mon_defaults(&o);
    o.ui.hang_after_s = 10;
    rc = parse_monitor(argc, argv, &o, "demo");
    if (rc < 0 && !mkdtemp(syncdir)) {
        fprintf(stderr, "ranktop demo: cannot create a temporary directory\n");
        rc = 1;
    } else if (rc < 0 && !script && !(script = demo_builtin(syncdir))) {
        fprintf(stderr, "ranktop demo: cannot write the demo job into %s\n", syncdir);
        rmdir(syncdir);
        rc = 1;
    }
    if (rc >= 0) {
        cli_disc_fini(&o.eng.disc);
        cli_hosts_fini(&o.hosts);
        waits_free(o.waits);
        return rc;
    }
    n = demo_start(script, syncdir, pids);
    if (n == 0) {
        fprintf(stderr, "ranktop demo: cannot start python3 (is it installed?)\n");
        rmdir(syncdir);
        return 1;
    }
    cli_disc_fini(&o.eng.disc);
    cli_hosts_fini(&o.hosts);
    waits_free(o.waits);
    o.eng.disc.pids = x_calloc((size_t)n, sizeof(int));
    memcpy(o.eng.disc.pids, pids, (size_t)n * sizeof(int));
    o.eng.disc.npids = n;
    o.ui.title = "demo job";
    rc = run_monitor(&o);
    demo_stop(pids, n, syncdir);
    cli_disc_fini(&o.eng.disc);
    cli_hosts_fini(&o.hosts);
    waits_free(o.waits);
    return rc;
}
