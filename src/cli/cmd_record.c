/* `ranktop record`: the headless recorder. Runs the engine, autosaves the trace atomically,
 * writes time-tagged snapshots and trigger windows, and on SIGINT / SIGTERM / --duration
 * writes the final file and a one-line summary. Main thread; the engine's threads sample.
 * Signals are blocked in every thread and taken synchronously here (sigtimedwait), so a
 * signal never interrupts a file write half-way. */
#include "cli.h"
#include "cli_discovery.h"
#include "cli_hosts.h"
#include "cli_launch.h"
#include "cli_opts.h"
#include "cli_waits.h"
#include "ranktop/engine/engine.h"
#include "ranktop/export/export.h"
#include "ranktop/proc/procscan.h"
#include "ranktop/python/pystack.h"

#include "ranktop/base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct rec_opts {
    const char *out;
    struct engine_opts eng;
    double duration;     /* seconds, 0 = until a signal */
    double autosave;     /* seconds, 0 = off */
    double snapshot;     /* seconds, 0 = off */
    const char *trigger; /* --trigger-file */
    enum export_format fmt;
    bool fmt_set; /* -f given; else the output's suffix chooses (export_format_from_name) */
    struct cli_hosts hosts;
    bool subprocesses;   /* py-spy's: each -p PID also stands for its descendants */
    bool nonblocking;    /* py-spy's: never stop the target (refuses --native) */
    bool no_lines;       /* py-spy's -F / --nolineno: frames by function, no lines */
    bool full_filenames; /* --full-filenames: collapsed and flame graph keep full paths */
    char **job_argv;     /* `-- CMD...`: the job to start and record */
    struct cli_job job;
    char out_name[4096]; /* py-spy's default name, without -o */
    struct waits *waits; /* --waits FILE; NULL: the built-in rules */
};

enum {
    OPT_ALL = 0x2000,
    OPT_NPU,
    OPT_GPU,
    OPT_MEM,
    OPT_AUTOSAVE,
    OPT_SNAPSHOT,
    OPT_GIL_STATS,
    OPT_IDLE,
    OPT_ONCPU,
    OPT_NONBLOCKING,
    OPT_NATIVE,
    OPT_ASYNC,
    OPT_TRIGGER,
    OPT_HISTORY,
    OPT_MEMCAP,
    OPT_SAMPLERS,
    OPT_TASK_LANES,
    OPT_NOLINENO,
    OPT_WAITS,
    OPT_FULL_NAMES,
};

/* -f's description, from the exporter's own lists of names and suffixes (rec_format_help). */
static char rec_format_help[640];

static const struct cli_opt rec_opts_table[] = {
    {'o', "output", "FILE",
     "where to write (default, as py-spy: NAME-TIME.EXT, NAME the command after --, the first "
     "-p PID or 'ranks', TIME the local time, EXT the format's suffix)"},
    {'i', "interval", "S", "seconds between samples (default 0.1)"},
    {'r', "rate", "HZ", "samples per second (instead of -i)"},
    {'d', "duration", "S", "stop after S seconds (default: until Ctrl-C)"},
    {OPT_ALL, "all-threads", NULL, "every Python thread (default: main thread only)"},
    {OPT_GPU, "gpu-usage", NULL, "GPU utilisation and memory counters"},
    {OPT_NPU, "npu-usage", NULL, "NPU AICore and HBM counters"},
    {OPT_MEM, "cpu-mem-usage", NULL, "host memory counters (RSS, PSS, USS, swap)"},
    {OPT_GIL_STATS, "gil-stats", NULL, "GIL counters (busy %, switches/s, waiters)"},
    {'g', "gil", NULL,
     "only samples of threads that hold the GIL (as py-spy --gil); the others leave gaps"},
    {OPT_IDLE, "idle", NULL,
     "accepted for py-spy: idle (off-CPU) samples are recorded unless --oncpu, a rank waiting "
     "is news here"},
    {OPT_ONCPU, "oncpu", NULL,
     "only samples of threads running on a CPU at that moment (as austin -c); idle ones leave "
     "gaps"},
    {OPT_NONBLOCKING, "nonblocking", NULL,
     "accepted for py-spy: ranktop never stops the target (except --native, which it refuses)"},
    {'s', "subprocesses", NULL,
     "each -p PID also means its descendants (as --children-of PID; PID itself when Python)"},
    {'F', "function", NULL,
     "frames by function, without line numbers: a function's lines are one frame (py-spy's "
     "-F; as --nolineno here)"},
    {OPT_NOLINENO, "nolineno", NULL, "no line numbers: frames by function (as -F)"},
    {'t', "threads", NULL, "accepted for py-spy: each lane names its thread and its id"},
    {OPT_FULL_NAMES, "full-filenames", NULL,
     "collapsed stacks and flame graphs: full file paths (default: package-relative, "
     "torch/nn/modules/module.py; the traces always have full paths)"},
    {OPT_NATIVE, "native", NULL,
     "native (C/C++) frames merged into every sample, marked native; each thread is stopped "
     "for about 0.2 ms per sample, so keep the rate low (10 Hz)"},
    {OPT_ASYNC, "async", NULL,
     "asyncio tasks as lanes of their own, one per task, named 'task NAME', showing its await "
     "chain; read at most 10 times a second"},
    {OPT_TASK_LANES, "task-lanes", "N",
     "with --async, at most N live task lanes per rank (more tasks are counted, not laned) and "
     "N ended ones (older ones folded away, counted; default 256)"},
    {OPT_AUTOSAVE, "autosave-interval", "S", "rewrite FILE every S seconds (default 30; 0 = off)"},
    {OPT_SNAPSHOT, "autosave-snapshot-interval", "S",
     "also keep a time-tagged copy every S seconds (default 7200; 0 = off)"},
    {'f', "format", "F", rec_format_help},
    {OPT_TRIGGER, "trigger-file", "PATH",
     "record only while PATH exists; write each window to its own time-tagged file"},
    {OPT_HISTORY, "history", "S", "keep only the last S seconds (default: all)"},
    {OPT_WAITS, "waits", "FILE",
     "the rules naming each rank's kind of wait, a trace instant at each change (default: the "
     "built-in table, share/ranktop/waits.rules)"},
    {OPT_MEMCAP, "memory-cap", "MB",
     "memory cap of the whole process beyond its base (default 1024)"},
    {OPT_SAMPLERS, "sampler-threads", "N",
     "read the ranks' stacks on N threads (1-4; default: one, more while one cannot keep the "
     "rate, up to 4 and the CPUs online)"},
    {0},
};

static const struct cli_opt *const rec_tables[] = {rec_opts_table, cli_opts_help, cli_disc_opts,
                                                   cli_hosts_opts, NULL};

/* Appends the exporter's names (or suffixes) of format fmt, "a or b", at *n. */
static void format_words(int fmt, bool suffixes, size_t *n)
{
    const char *w;
    int f, k = 0;

    for (size_t i = 0; (w = suffixes ? export_format_suffix(i, &f) : export_format_name(i, &f));
         i++)
        if (f == fmt && *n < sizeof(rec_format_help))
            *n += (size_t)snprintf(rec_format_help + *n, sizeof(rec_format_help) - *n, "%s%s%s",
                                   k++ ? (suffixes ? ", " : " or ") : "", suffixes ? "*" : "", w);
}

/* "chrome or chrometrace: a Chrome trace (the default) (*.json); ...": every name -f takes and
 * every suffix that chooses a format without it, as the exporter lists them, so the help never
 * misses one. */
static void rec_format_text(void)
{
    static const char *const what[EXPORT_NFORMATS] = {
        [EXPORT_CHROME] = "a Chrome trace, the default",
        [EXPORT_SPEEDSCOPE] = "a speedscope profile",
        [EXPORT_COLLAPSED] = "collapsed stacks",
        [EXPORT_FLAMEGRAPH] = "an SVG flame graph",
        [EXPORT_PERFETTO] = "Perfetto's protobuf trace",
    };
    size_t n = 0;

    for (int fmt = 0; fmt < EXPORT_NFORMATS; fmt++) {
        format_words(fmt, false, &n);
        if (n < sizeof(rec_format_help))
            n += (size_t)snprintf(rec_format_help + n, sizeof(rec_format_help) - n, ": %s (",
                                  what[fmt]);
        format_words(fmt, true, &n);
        if (n < sizeof(rec_format_help))
            n += (size_t)snprintf(rec_format_help + n, sizeof(rec_format_help) - n, ");\n");
    }
    if (n < sizeof(rec_format_help))
        snprintf(rec_format_help + n, sizeof(rec_format_help) - n,
                 "without -f, FILE's suffix chooses (chrome for any other); FILE ending in .gz "
                 "is gzipped (*.json.gz)");
}

static void rec_usage(FILE *f)
{
    fputs("usage: ranktop record [-o FILE] [options] [-- CMD...]\n"
          "\n"
          "Samples the Python stacks of every rank (and optionally device, memory and GIL\n"
          "counters) and writes a Chrome trace (Perfetto, chrome://tracing), a speedscope\n"
          "profile, collapsed stacks, an SVG flame graph or a Perfetto protobuf trace. The\n"
          "file is replaced atomically on every autosave. With -- CMD, record starts CMD\n"
          "in a process group of its own, records its Python processes (torchrun's\n"
          "workers as the ranks), stops when it ends and exits with its status; Ctrl-C,\n"
          "SIGTERM and --duration stop the job too (SIGTERM, then SIGKILL after 5 s).\n"
          "\n",
          f);
    cli_opts_usage(f, rec_tables);
    fputs("\nExit status: 0 when a trace was written, 1 when nothing could be recorded or\n"
          "written (an unwritable output included), 2 on bad usage (an option, a value, an\n"
          "output that is not a regular file or a new name). With -- CMD: CMD's exit\n"
          "status (128 + the signal that killed it) when not 0, else record's own.\n",
          f);
}

static int seconds_arg(const char *arg, const char *flag, double min, double *out)
{
    char *end;
    double v = strtod(arg, &end);

    if (end == arg || *end || !(v >= min) || v > 1e9) {
        fprintf(stderr, "ranktop record: %s wants a number >= %g, got '%s'\n", flag, min, arg);
        return -1;
    }
    *out = v;
    return 0;
}

static int rec_option(int c, const char *arg, struct rec_opts *o)
{
    double v = 0;

    switch (c) {
    case 'o':
        o->out = arg;
        return 0;
    case OPT_WAITS:
        waits_free(o->waits);
        return cli_waits_load(arg, "record", &o->waits) ? -1 : 0;
    case 'i':
        if (seconds_arg(arg, "--interval", 0.001, &v) < 0)
            return -1;
        o->eng.rate_hz = 1.0 / v;
        return 0;
    case 'r':
        if (seconds_arg(arg, "--rate", 0.1, &v) < 0 || v > 1000)
            return v > 1000 ? (fprintf(stderr, "ranktop record: --rate at most 1000\n"), -1) : -1;
        o->eng.rate_hz = v;
        return 0;
    case 'd':
        return seconds_arg(arg, "--duration", 0.001, &o->duration);
    case OPT_AUTOSAVE:
        return seconds_arg(arg, "--autosave-interval", 0, &o->autosave);
    case OPT_SNAPSHOT:
        return seconds_arg(arg, "--autosave-snapshot-interval", 0, &o->snapshot);
    case OPT_HISTORY:
        if (seconds_arg(arg, "--history", 1, &v) < 0)
            return -1;
        o->eng.history_ns = (uint64_t)(v * 1e9);
        return 0;
    case OPT_MEMCAP:
        if (seconds_arg(arg, "--memory-cap", 16, &v) < 0)
            return -1;
        o->eng.mem_cap = (size_t)(v * 1048576.0);
        return 0;
    case 'f':
        o->fmt_set = true;
        if ((int)(o->fmt = (enum export_format)export_format_parse(arg)) < 0) {
            const char *w;

            fprintf(stderr, "ranktop record: unknown --format '%s' (", arg);
            for (size_t i = 0; (w = export_format_name(i, NULL)); i++)
                fprintf(stderr, "%s%s", i ? ", " : "", w);
            fputs(")\n", stderr);
            return -1;
        }
        return 0;
    case OPT_TRIGGER:
        o->trigger = arg;
        return 0;
    case 'g':
        o->eng.gil_only = true;
        return 0;
    case 's':
        o->subprocesses = true;
        return 0;
    case 't':
        return 0;
    case 'F':
    case OPT_NOLINENO:
        o->no_lines = true;
        return 0;
    case OPT_FULL_NAMES:
        o->full_filenames = true;
        return 0;
    case OPT_SAMPLERS:
        if (seconds_arg(arg, "--sampler-threads", 1, &v) < 0)
            return -1;
        if (v > 4 || v != (int)v) {
            fprintf(stderr, "ranktop record: --sampler-threads wants 1, 2, 3 or 4, got '%s'\n",
                    arg);
            return -1;
        }
        o->eng.sampler_threads = (int)v;
        return 0;
    case OPT_TASK_LANES:
        if (seconds_arg(arg, "--task-lanes", 1, &v) < 0)
            return -1;
        if (v > 100000 || v != (int)v) {
            fprintf(stderr,
                    "ranktop record: --task-lanes wants a whole number up to 100000, "
                    "got '%s'\n",
                    arg);
            return -1;
        }
        o->eng.task_lanes = (size_t)v;
        return 0;
    default:
        o->eng.all_threads |= c == OPT_ALL;
        o->eng.npu |= c == OPT_NPU;
        o->eng.gpu |= c == OPT_GPU;
        o->eng.mem |= c == OPT_MEM;
        o->eng.gil |= c == OPT_GIL_STATS;
        o->eng.oncpu |= c == OPT_ONCPU;
        o->nonblocking |= c == OPT_NONBLOCKING;
        o->eng.native |= c == OPT_NATIVE;
        o->eng.async |= c == OPT_ASYNC;
        return c >= OPT_ALL && c <= OPT_ASYNC ? 0 : 1; /* OPT_IDLE: nothing to change */
    }
}

/* py-spy's flags that need the whole command line. --nonblocking refuses --native (which
 * stops each thread at every sample). --subprocesses makes each -p PID stand for its
 * descendants (--children-of PID) and for itself when it runs Python, as py-spy records the
 * process and its children; a launcher that is not Python (a shell) is not a rank. Returns -1
 * to go on, or CLI_EXIT_USAGE. */
static int py_spy_words(struct rec_opts *o)
{
    if (o->nonblocking && o->eng.native) {
        fprintf(stderr, "ranktop record: --native stops each thread briefly at every sample, "
                        "which --nonblocking forbids: drop one of them\n");
        return CLI_EXIT_USAGE;
    }
    if (o->subprocesses && cli_disc_subprocesses(&o->eng.disc, "record") < 0)
        return cli_try_help("record");
    return -1;
}

static int parse_record(int argc, char **argv, struct rec_opts *o)
{
    static struct cli_getopt g;
    int c;

    rec_format_text();
    cli_opts_getopt(rec_tables, &g);
    optind = 1;
    while ((c = getopt_long(argc, argv, g.shorts, g.longs, NULL)) != -1) {
        int h = cli_disc_handle(c, optarg, &o->eng.disc, "record");

        if (h == 0)
            h = cli_hosts_handle(c, optarg, &o->hosts, "record");
        if (h < 0)
            return 2;
        if (h == 1)
            continue;
        if (c == 'h') {
            rec_usage(stdout);
            return 0;
        }
        h = rec_option(c, optarg, o);
        if (h > 0) /* getopt said what was wrong */
            return cli_try_help("record");
        if (h < 0)
            return CLI_EXIT_USAGE;
    }
    o->job_argv = cli_job_argv(argc, argv, optind);
    if (cli_job_missing(argc, argv, optind)) {
        fprintf(stderr, "ranktop record: -- wants the command to start after it\n");
        return cli_try_help("record");
    }
    if (optind < argc && !o->job_argv) {
        fprintf(stderr,
                "ranktop record: unexpected argument '%s' (a command to start goes after --)\n",
                argv[optind]);
        return cli_try_help("record");
    }
    if (o->job_argv &&
        (o->eng.disc.npids || o->eng.disc.nchildren_of || o->eng.disc.match || o->hosts.given)) {
        fprintf(stderr, "ranktop record: -- CMD records the job it starts: drop -p, "
                        "--children-of, --match, --hosts and --hostfile\n");
        return cli_try_help("record");
    }
    if (cli_disc_finish(&o->eng.disc, &o->hosts, &o->eng.remote, "record") < 0)
        return CLI_EXIT_USAGE;
    return py_spy_words(o);
}

/* The output is checked before anything is sampled: a run must not be lost at its end.
 * Returns 0, or the exit status: usage for a name that can never be an output (standard
 * output, a directory, a FIFO...), a runtime failure for one the system refuses now. */
static int check_output(const char *path)
{
    struct app_err err = {0};
    int n;

    if (path && !strcmp(path, "-")) {
        fprintf(stderr, "ranktop record: -o -: the output is written to a temp file and renamed "
                        "into place (again at every autosave), so it must be a file, not "
                        "standard output\n");
        return CLI_EXIT_USAGE;
    }
    if ((n = export_check_path(path, &err)) < 0) {
        fprintf(stderr, "ranktop record: %s\n", err.msg);
        return n == APP_E_USAGE || n == APP_E_NOTREG ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    }
    n = export_clean_stale(path);
    if (n > 0)
        fprintf(stderr, "ranktop record: removed %d temp file%s a killed run left beside %s\n", n,
                n == 1 ? "" : "s", path);
    return 0;
}

/* The processes named with -p or --children-of must exist when the run starts: a mistyped or
 * finished pid fails at once instead of at Ctrl-C. Checked for this node only (with --hosts a
 * pid is not one of ours to check). Returns 0 or CLI_EXIT_FAIL. */
static int check_named(const struct rec_opts *o)
{
    const struct discovery_opts *d = &o->eng.disc;

    if (o->eng.remote.nhosts)
        return 0;
    return cli_disc_missing("record", d->pids, d->npids, d->children_of, d->nchildren_of)
               ? CLI_EXIT_FAIL
               : 0;
}

/* "trace.json" -> "trace-20261122-051200.json" (the tag goes before the extension). */
static void tagged_name(const char *path, char *out, size_t len)
{
    const char *slash = strrchr(path, '/'), *dot = strchr(slash ? slash : path, '.');
    char tag[32];
    time_t now = time(NULL);
    struct tm tm;

    localtime_r(&now, &tm);
    strftime(tag, sizeof(tag), "-%Y%m%d-%H%M%S", &tm);
    if (!dot || dot == (slash ? slash + 1 : path))
        dot = path + strlen(path);
    snprintf(out, len, "%.*s%s%s", (int)(dot - path), path, tag, dot);
}

/* True when no thread has a stack: runs of HSTACK_NONE are gaps (stacks that could not be read,
 * samples --gil left out), and a trace of gaps alone holds nothing. */
static bool nothing_recorded(const struct history *h)
{
    for (size_t i = 0; i < h->nranks; i++)
        for (size_t k = 0; k < h->ranks[i].nthreads; k++) {
            const struct hthread *t = &h->ranks[i].threads[k];

            for (size_t r = 0; r < t->nruns; r++)
                if (history_run(t, r)->stack != HSTACK_NONE)
                    return false;
        }
    return true;
}

/* Lines already told on stderr (reasons a target could not be read, requested counters that
 * could not be had), so that each is said once however often the engine repeats it. The
 * recorder runs once per process, on the main thread. */
static struct {
    struct cli_told told;
    char why[2][256]; /* per enum smi_kind: why its requested counters cannot be had */
    bool said[2];
    const char *pairs[5]; /* export_opts.unavailable: "gpu", why, "npu", why, NULL */
} rec_told;

/* Prints "ranktop record: LINE" unless it was said before; returns true when it was new. */
static bool tell_once(const char *line)
{
    return cli_tell_once(&rec_told.told, "record", line);
}

/* tell_once for each part of a "; "-joined list (engine_last_errors). */
static void tell_lines(const char *joined)
{
    char buf[1600], *save = NULL;

    snprintf(buf, sizeof(buf), "%s", joined);
    for (char *t = strtok_r(buf, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
        while (*t == ' ')
            t++;
        if (*t)
            tell_once(t);
    }
}

/* Why a target cannot be read (another user's, not Python...), as dump says it: said once
 * each, while recording. */
static void tell_unreadable(const struct engine_unread *u, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tell_once(u[i].why);
}

/* The discovery errors about kind's tools (nvidia-smi and NVML, npu-smi and DCMI). */
static void kind_errors(const char *joined, enum smi_kind kind, char *out, size_t len)
{
    static const char *const tool[2][2] = {{"nvidia-smi", "NVML"}, {"npu-smi", "DCMI"}};
    char buf[1600], *save = NULL;
    size_t n = 0;

    out[0] = '\0';
    snprintf(buf, sizeof(buf), "%s", joined);
    for (char *t = strtok_r(buf, ";", &save); t && n < len; t = strtok_r(NULL, ";", &save)) {
        while (*t == ' ')
            t++;
        if (strstr(t, tool[kind][0]) || strstr(t, tool[kind][1]))
            n += (size_t)snprintf(out + n, len - n, "%s%s", n ? "; " : "", t);
    }
}

static bool have_devices(const struct smi_device *devs, size_t n, enum smi_kind kind)
{
    for (size_t i = 0; i < n; i++)
        if (devs[i].kind == kind)
            return true;
    return false;
}

/* --gpu-usage / --npu-usage without such a device: said once on stderr with the reason (the
 * tool's error in errs, else none found) as soon as the tool has answered, or at the end
 * (final), and kept for the trace's metadata (rec_told.pairs). A device that shows up later
 * clears it. */
static void check_counters(const char *errs, const struct smi_device *devs, size_t ndevs,
                           const struct rec_opts *o, bool final)
{
    static const char *const flag[2] = {"--gpu-usage", "--npu-usage"};
    static const char *const what[2] = {"GPU", "NPU"};
    bool want[2] = {o->eng.gpu, o->eng.npu};
    char why[256], line[400];
    size_t n = 0;

    for (int k = 0; k < 2; k++) {
        if (!want[k] || (!final && rec_told.why[k][0]))
            continue;
        if (have_devices(devs, ndevs, (enum smi_kind)k)) {
            rec_told.why[k][0] = '\0';
            continue;
        }
        kind_errors(errs, (enum smi_kind)k, why, sizeof(why));
        if (!why[0] && !final)
            continue; /* the tool has not answered yet */
        if (!rec_told.why[k][0] || why[0])
            snprintf(rec_told.why[k], sizeof(rec_told.why[k]), "%s",
                     why[0] ? why
                     : k    ? "no NPU found"
                            : "no GPU found");
        if (!rec_told.said[k]) {
            snprintf(line, sizeof(line), "%s: no %s counters: %s", flag[k], what[k],
                     rec_told.why[k]);
            rec_told.said[k] = tell_once(line);
        }
    }
    for (int k = 0; k < 2; k++)
        if (rec_told.why[k][0]) {
            rec_told.pairs[n++] = smi_kind_name((enum smi_kind)k);
            rec_told.pairs[n++] = rec_told.why[k];
        }
    rec_told.pairs[n] = NULL;
}

/* The notices of a tick (unreadable targets, requested counters that cannot be had), from
 * the engine's short getters of those small lists: a view taken ten times a second would have
 * the recorder clone every rank and thread record ten times a second, for two lists. */
static void tick_notices(struct engine *e, const struct rec_opts *o)
{
    struct engine_unread u[16];
    size_t n = engine_unreadable(e, u, 16);
    struct smi_device *devs = NULL;
    struct engine_rank_live *ranks = NULL;
    size_t nd = 0, nr = 0;
    char errs[1024];

    tell_unreadable(u, n < 16 ? n : 16);
    if (!o->eng.gpu && !o->eng.npu)
        return;
    engine_last_errors(e, errs, sizeof(errs));
    engine_snapshot_live(e, &devs, &nd, &ranks, &nr);
    check_counters(errs, devs, nd, o, false);
    free(devs);
    free(ranks);
}

/* Exports the view's history (or the window from..to) to path; reports failures once per
 * message so a full disk does not flood the terminal. Returns 0, 1 (nothing to write) or -1. */
static int save(const struct engine_view *v, const struct rec_opts *o, const char *path,
                uint64_t from, uint64_t to)
{
    static char last_err[512];
    struct export_opts xo = {.format = o->fmt,
                             .all_threads = o->eng.all_threads,
                             .from = from,
                             .to = to,
                             .interval_ns = (uint64_t)(1e9 / o->eng.rate_hz),
                             .version = RANKTOP_VERSION,
                             .unavailable = rec_told.pairs[0] ? rec_told.pairs : NULL,
                             .no_lines = o->no_lines,
                             .short_files = !o->full_filenames,
                             .waits = o->waits};
    struct app_err err = {0};
    int rc;

    if (nothing_recorded(&v->hist))
        return 1;
    rc = export_write(&v->hist, &xo, path, &err);
    if (rc < 0 && strcmp(last_err, err.msg) != 0) {
        fprintf(stderr, "ranktop record: %s\n", err.msg);
        snprintf(last_err, sizeof(last_err), "%s", err.msg);
    } else if (rc == 0) {
        last_err[0] = '\0';
    }
    return rc < 0 ? -1 : 0;
}

/* One line per other node: how its agent did, and the last thing that went wrong there. */
static void hosts_summary(const struct engine_view *v)
{
    static const char *const states[] = {"connecting", "up", "lagging", "down"};
    const struct engine_host *h = v->hosts;

    for (size_t i = 0; i < v->nhosts; i++) {
        char clock[64] = "", ship[80] = "";

        if (h[i].offset_err_ms >= 0)
            snprintf(clock, sizeof(clock), ", clock %+.3f ms (+-%.3f)", h[i].offset_ms,
                     h[i].offset_err_ms);
        if (h[i].ship_bytes) /* --ship: what sending the binary cost (the last time) */
            snprintf(ship, sizeof(ship), ", shipped %zu bytes in %.2f s", h[i].ship_bytes,
                     h[i].ship_s);
        fprintf(stderr, "ranktop: host %s: %s, %d ranks, agent %s, %u connects%s%s%s%s\n",
                h[i].agent_host[0] ? h[i].agent_host : h[i].name,
                states[h[i].state < 4 ? h[i].state : 3], h[i].ranks,
                h[i].version[0] ? h[i].version : "-", h[i].connects, ship, clock,
                h[i].error[0] ? "; last error: " : "", h[i].error);
    }
}

static void summary(const struct engine_view *v)
{
    const struct engine_stats st = v->stats;
    const char *native_err = engine_view_native_error(v, 0);
    double pct;

    pct = st.stacks + st.errors ? 100.0 * (double)st.errors / (double)(st.stacks + st.errors) : 0;
    fprintf(stderr,
            "ranktop: %llu samples, %llu thread stacks, %llu errors (%.2f%%), %.1f Hz achieved, "
            "%.3f s CPU\n",
            (unsigned long long)st.samples, (unsigned long long)st.stacks,
            (unsigned long long)st.errors, pct, st.achieved_hz, (double)st.cpu_ns / 1e9);
    /* A line of its own: scripts match the first one as it always was. */
    pct = st.stacks + st.lost ? 100.0 * (double)st.lost / (double)(st.stacks + st.lost) : 0;
    fprintf(stderr, "ranktop: %llu thread stacks lost as torn (%.2f%%), %llu torn reads retried\n",
            (unsigned long long)st.lost, pct, (unsigned long long)st.torn);
    if (st.sampler_threads > 1)
        fprintf(stderr, "ranktop: stacks read on %d threads\n", st.sampler_threads);
    if (st.reader) /* this node's: process_vm_readv, or /proc/PID/mem and why */
        fprintf(stderr, "ranktop: memory reader: %s%s%s%s\n", st.reader, st.reader_why ? " (" : "",
                st.reader_why ? st.reader_why : "", st.reader_why ? ")" : "");
    if (st.task_lane_cap)
        fprintf(stderr,
                "ranktop: task lanes: %llu ended ones folded away (%zu kept per rank), at most "
                "%u live tasks of a read without a lane (%zu per rank)\n",
                (unsigned long long)st.tasks_folded, st.task_lane_cap, st.tasks_unlaned_max,
                st.task_lane_cap);
    hosts_summary(v);
    if (native_err)
        fprintf(stderr, "ranktop record: %s\n", native_err);
}

struct rec_state {
    uint64_t start, next_save, next_snap, trig_from;
    bool trig_active, wrote;
    int failed;
};

/* One tick of the recorder: notices, autosave, snapshot and trigger bookkeeping. Each pass
 * that writes takes one view of the engine for all it writes. */
static void tick(struct engine *e, const struct rec_opts *o, struct rec_state *s, uint64_t now)
{
    char path[4200];
    const struct engine_view *v;
    bool autosave = o->autosave > 0 && now >= s->next_save;
    bool snap = o->snapshot > 0 && now >= s->next_snap;

    tick_notices(e, o);
    if (o->trigger) {
        bool exists = access(o->trigger, F_OK) == 0;

        if (exists && !s->trig_active) {
            s->trig_active = true;
            s->trig_from = now;
        } else if (!exists && s->trig_active) {
            s->trig_active = false;
            tagged_name(o->out, path, sizeof(path));
            v = engine_acquire_fresh(e);
            if (save(v, o, path, s->trig_from, now) == 0) {
                fprintf(stderr, "ranktop: wrote %s\n", path);
                s->wrote = true;
            }
            engine_release(v);
        }
        return;
    }
    if (!autosave && !snap)
        return;
    v = engine_acquire_fresh(e);
    if (autosave) {
        int rc = save(v, o, o->out, 0, 0);

        s->wrote |= rc == 0;
        s->failed += rc < 0;
        s->next_save = now + (uint64_t)(o->autosave * 1e9);
    }
    if (snap) {
        tagged_name(o->out, path, sizeof(path));
        save(v, o, path, 0, 0);
        s->next_snap = now + (uint64_t)(o->snapshot * 1e9);
    }
    engine_release(v);
}

/* Asks each -p process once more why it cannot be read (no such process, not Python,
 * another user's...), as dump does, and says each reason once: the sampler gives a process
 * a moment to finish an exec before it keeps a reason, so a short run may have none. Returns
 * how many could not be read. */
static int explain_pids(const struct discovery_opts *d)
{
    struct pyproc_opts po = {.main_only = true, .no_state = true, .no_names = true};
    int told = 0;

    for (int i = 0; i < d->npids; i++) {
        struct app_err err = {0};
        struct pyproc *p = NULL;

        if (pyproc_open(d->pids[i], &po, &p, &err) < 0) {
            tell_once(err.msg);
            told++;
        }
        pyproc_free(p);
    }
    return told;
}

/* Nothing was recorded from processes the user named, and none gave a reason. A --match or
 * --children-of that never found a Python process is named as such: the rate is beside the
 * point then. */
static void explain_named(const struct engine_view *v, const struct discovery_opts *d)
{
    char line[400];

    if (explain_pids(d))
        return;
    if (v->stats.ranks_seen || (!d->match && !d->nchildren_of)) {
        fprintf(stderr, "ranktop record: no Python stack of the given processes was read while "
                        "it ran (too short a run for the rate?)\n");
        return;
    }
    if (d->match) {
        snprintf(line, sizeof(line), "no Python process matched --match '%s' while it ran",
                 text_safe(d->match));
        tell_once(line);
    }
    for (int i = 0; i < d->nchildren_of; i++) {
        snprintf(line, sizeof(line), "process %d had no Python descendants while it ran",
                 d->children_of[i]);
        tell_once(line);
    }
}

/* --gil kept nothing because no sample caught a thread of the ranks holding the GIL (a rank
 * waiting in C with the GIL released, or one whose GIL another thread holds), or --oncpu
 * because none caught one running: say so, or the trace is missing with no reason. Returns
 * true when it was the case. */
static bool explain_gil(const struct engine_view *v, const struct rec_opts *o)
{
    const struct engine_stats st = v->stats;

    if ((!o->eng.gil_only && !o->eng.oncpu) || st.stacks || !st.ranks_seen)
        return false;
    if (!o->eng.gil_only) { /* --oncpu, the same way */
        fprintf(stderr,
                "ranktop record: --oncpu: none of the %llu samples found a thread running: "
                "the ranks were idle (waiting) whenever sampled (leave --oncpu out to record "
                "idle stacks too)\n",
                (unsigned long long)st.samples);
        return true;
    }
    fprintf(stderr,
            "ranktop record: --gil: none of the %llu samples found a thread holding the GIL: "
            "the ranks never held it while sampled (--gil keeps only such samples; leave it "
            "out to record every stack)\n",
            (unsigned long long)st.samples);
    return true;
}

/* Why nothing was recorded; or, with a trace, why device input the user asked for by name (a
 * recording to replay) is not in it. Requested counters were told by check_counters. final is
 * the final save's result: after a failed write its error line is the reason, and "nothing was
 * read" would contradict it. */
static void explain_outcome(const struct engine_view *v, const struct rec_opts *o,
                            const struct rec_state *s, int final)
{
    const struct discovery_opts *d = &o->eng.disc;
    bool named = d->npids || d->nchildren_of || d->match;
    const char *errs;

    if (final == 1 && explain_gil(v, o))
        return;
    if (s->wrote && !d->dev.nvidia_smi_file && !d->dev.npu_smi_file)
        return;
    /* Processes named by the user: the device tools are beside the point. */
    if (named && !d->dev.nvidia_smi_file && !d->dev.npu_smi_file)
        errs = v->attach_err;
    else
        errs = v->last_errors;
    if (errs[0])
        tell_lines(errs);
    else if (!s->wrote && named && final >= 0)
        explain_named(v, d);
}

/* Stops the engine and says and saves what it recorded, all from one view taken after the
 * stop (it holds the last samples). */
static int finish(struct engine *e, const struct rec_opts *o, struct rec_state *s)
{
    const struct engine_view *v;
    int rc = 0;

    engine_stop(e);
    v = engine_acquire_fresh(e);
    tell_unreadable(v->unread, v->nunread);
    explain_pids(&o->eng.disc);
    check_counters(v->last_errors, v->devs, v->ndevs, o, true);
    if (!o->trigger) {
        rc = save(v, o, o->out, 0, 0);
        if (rc == 1)
            fprintf(stderr, "ranktop record: nothing was recorded, %s not written\n", o->out);
        else if (rc == 0)
            s->wrote = true;
    }
    summary(v);
    explain_outcome(v, o, s, rc);
    engine_release(v);
    return s->wrote && rc >= 0 ? 0 : 1;
}

/* Without -o: py-spy's name, from the command after --, the first -p PID, or "ranks". */
static void default_out(struct rec_opts *o)
{
    char pid[16];
    const char *what = "ranks";

    if (o->job_argv)
        what = o->job_argv[0];
    else if (o->eng.disc.npids) {
        snprintf(pid, sizeof(pid), "%d", o->eng.disc.pids[0]);
        what = pid;
    }
    cli_job_default_name(what, export_format_ext(o->fmt) + 1, o->out_name, sizeof(o->out_name));
    o->out = o->out_name;
}

/* Starts the job of `-- CMD` (before any thread: it forks), and makes it discovery's tree.
 * Its scan runs twice a second, so that a short job is found soon after it exec's Python.
 * Returns 0 or CLI_EXIT_FAIL. */
static int start_job(struct rec_opts *o)
{
    char err[512];

    if (!o->job_argv)
        return 0;
    if (cli_job_start(&o->job, o->job_argv, NULL, err, sizeof(err)) < 0) {
        fprintf(stderr, "ranktop record: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    o->eng.disc.job = o->job.pid;
    o->eng.discovery_ms = 500;
    return 0;
}

/* The exit status with a job: the job's when it failed, else record's own (rc). The job is
 * stopped first when it still runs (Ctrl-C, SIGTERM, --duration). */
static int job_status(struct rec_opts *o, int rc)
{
    char how[160];
    int st;

    if (!o->job_argv)
        return rc;
    cli_job_stop(&o->job, 5);
    st = cli_job_exit(&o->job);
    cli_job_describe(&o->job, how, sizeof(how));
    fprintf(stderr, "ranktop record: %s (pid %d) %s\n", o->job_argv[0], o->job.pid, how);
    return st > 0 ? st : rc;
}

int cmd_record(int argc, char **argv)
{
    struct rec_opts o = {.autosave = 30, .snapshot = 7200, .fmt = EXPORT_CHROME};
    struct rec_state s = {0};
    struct engine *e = NULL;
    struct app_err err = {0};
    sigset_t set;
    int rc;

    o.eng.rate_hz = 10;
    o.eng.mem_cap = 1024u << 20;
    rc = parse_record(argc, argv, &o);
    if (rc < 0 && !o.out)
        default_out(&o);
    if (rc < 0 && !o.fmt_set && export_format_from_name(o.out) >= 0)
        o.fmt = (enum export_format)export_format_from_name(o.out);
    if (rc >= 0 || (rc = check_output(o.out)) != 0 || (rc = check_named(&o)) != 0 ||
        (rc = start_job(&o)) != 0) {
        cli_disc_fini(&o.eng.disc);
        cli_hosts_fini(&o.hosts);
        waits_free(o.waits);
        return rc;
    }
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (engine_start(&o.eng, &e, &err) < 0) {
        fprintf(stderr, "ranktop record: %s\n", err.msg);
        cli_disc_fini(&o.eng.disc);
        cli_hosts_fini(&o.hosts);
        waits_free(o.waits);
        return job_status(&o, 1);
    }
    s.start = clock_mono_ns();
    s.next_save = s.start + (uint64_t)(o.autosave * 1e9);
    s.next_snap = s.start + (uint64_t)(o.snapshot * 1e9);
    for (;;) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        uint64_t now = clock_mono_ns();

        if (sigtimedwait(&set, NULL, &ts) > 0)
            break;
        now = clock_mono_ns();
        if (o.duration > 0 && now - s.start >= (uint64_t)(o.duration * 1e9))
            break;
        if (o.job_argv && cli_job_ended(&o.job))
            break;
        tick(e, &o, &s, now);
    }
    /* The job is stopped before the last save: its ranks' final samples are in the trace. */
    if (o.job_argv)
        cli_job_stop(&o.job, 5);
    rc = finish(e, &o, &s);
    engine_free(e);
    cli_disc_fini(&o.eng.disc);
    cli_hosts_fini(&o.hosts);
    waits_free(o.waits);
    return job_status(&o, rc);
}
