/* `ranktop watch`: the headless hang catcher. Runs the engine at a low rate (1 Hz) keeping
 * the last --window seconds, judges the job with the monitor's own HANG verdict (view_hang)
 * at every tick, and writes a report (watch_report.c) when the verdict fires, when a rank
 * dies by a signal or an exit status while others live, on SIGUSR1, and for a straggler
 * (--slow-after). After a report: --on-hang CMD, one stderr line, then either exit 3
 * (--exit-on-hang) or keep watching, writing again only when the picture changes or after a
 * recovery, up to --max-reports. Main thread; the engine's threads sample. Signals are blocked
 * in every thread and taken here with sigtimedwait, so none interrupts a report half-way. */
#include "cli.h"
#include "cli_launch.h"
#include "cli_discovery.h"
#include "cli_hosts.h"
#include "cli_opts.h"
#include "cli_waits.h"
#include "watch_report.h"
#include "watch_waits.h"

#include "ranktop/engine/engine.h"
#include "ranktop/base/util.h"
#include "ranktop/views/view.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WATCH_EXIT_HANG 3
#define MAX_DEAD 256
/* How long a report asked for before the first sample waits for one, and how often it looks. */
#define ASK_WAIT_NS (10 * 1000000000ull)
#define ASK_POLL_NS (100 * 1000000ull)

struct watch_opts {
    const char *out, *on_hang, *waits_file;
    struct engine_opts eng;
    struct cli_hosts hosts;
    struct waits *waits; /* --waits FILE, NULL: the built-in rules */
    double hang_after, window, on_hang_timeout, slow_after, dump_timeout;
    bool exit_on_hang;
    int max_reports;
    char **job_argv; /* `-- CMD...`: the job to start and watch */
    struct cli_job job;
};

enum {
    OPT_OUT = 0x2000,
    OPT_HANG,
    OPT_WINDOW,
    OPT_ON_HANG,
    OPT_ON_HANG_TIMEOUT,
    OPT_EXIT,
    OPT_MAX,
    OPT_SLOW,
    OPT_WAITS,
    OPT_DUMP_TIMEOUT,
    OPT_GIL_STATS,
};

static const struct cli_opt watch_opts_table[] = {
    {OPT_OUT, "out", "DIR", "where reports go (required; made when missing)"},
    {OPT_HANG, "hang-after", "S",
     "report when no rank's stack has changed for S seconds, as the monitor's HANG banner "
     "(default 30)"},
    {OPT_WINDOW, "window", "S", "seconds of history kept and written as traces (default 300)"},
    {'r', "rate", "HZ", "stack samples per second per rank (default 1)"},
    {OPT_ON_HANG, "on-hang", "CMD",
     "after each report run CMD with sh -c, RANKTOP_REPORT set to the report's directory; its "
     "output goes to on-hang.log there"},
    {OPT_ON_HANG_TIMEOUT, "on-hang-timeout", "S", "kill CMD after S seconds (default 60)"},
    {OPT_EXIT, "exit-on-hang", NULL, "exit with status 3 after the first hang report"},
    {OPT_MAX, "max-reports", "N", "write at most N reports (default 10)"},
    {OPT_SLOW, "slow-after", "S",
     "a straggler report when one rank was the odd one out in most ticks of the last S "
     "seconds (default: off)"},
    {OPT_WAITS, "waits", "FILE", "the wait-kind rules to use instead of the built-in ones"},
    {OPT_GIL_STATS, "gil-stats", NULL,
     "GIL counters for the GIL % column: each rank's GIL is probed 500 times a second, which "
     "costs more than the rest of the watcher (default: off)"},
    {OPT_DUMP_TIMEOUT, "dump-timeout", "S",
     "time allowed to read every rank's stacks with native frames for a report (default 60)"},
    {0},
};

static const struct cli_opt *const watch_tables[] = {watch_opts_table, cli_opts_help, cli_disc_opts,
                                                     cli_hosts_opts, NULL};

static void watch_usage(FILE *f)
{
    fputs("usage: ranktop watch --out DIR [options]\n"
          "       ranktop watch --out DIR [options] -- CMD [ARG...]\n"
          "\n"
          "Watches the job's ranks without a screen, at a low rate, and writes a hang\n"
          "report (DIR/ranktop-hang-YYYYmmdd-HHMMSS/: report.txt, report.json and the\n"
          "last window's traces) when the job hangs, when a rank dies while others wait,\n"
          "and on SIGUSR1. With -- CMD it starts CMD, watches the ranks of its process\n"
          "tree, and ends when CMD ends.\n"
          "\n",
          f);
    cli_opts_usage(f, watch_tables);
    fputs("\nExit status: 0 when stopped by a signal (SIGINT, SIGTERM, SIGHUP), 3 after a\n"
          "hang report with --exit-on-hang, 1 when it cannot start, 2 on bad usage.\n"
          "With -- CMD: CMD's exit status (128 + a signal that killed it); a signal to the\n"
          "watcher stops CMD first (SIGTERM, then SIGKILL after 5 s). --exit-on-hang wins:\n"
          "it exits 3 and leaves CMD running.\n",
          f);
}

static int num_arg(const char *arg, const char *flag, double min, double max, double *out)
{
    char *end;
    double v = strtod(arg, &end);

    if (end == arg || *end || !(v >= min && v <= max)) {
        fprintf(stderr, "ranktop watch: %s wants a number in [%g, %g], got '%s'\n", flag, min, max,
                arg);
        return -1;
    }
    *out = v;
    return 0;
}

static int watch_option(int c, const char *arg, struct watch_opts *o)
{
    double v;

    switch (c) {
    case OPT_OUT:
        o->out = arg;
        return 0;
    case OPT_HANG:
        return num_arg(arg, "--hang-after", 1, 1e6, &o->hang_after);
    case OPT_WINDOW:
        return num_arg(arg, "--window", 10, 1e6, &o->window);
    case 'r':
        return num_arg(arg, "--rate", 0.1, 100, &o->eng.rate_hz);
    case OPT_ON_HANG:
        o->on_hang = arg;
        return 0;
    case OPT_ON_HANG_TIMEOUT:
        return num_arg(arg, "--on-hang-timeout", 1, 86400, &o->on_hang_timeout);
    case OPT_EXIT:
        o->exit_on_hang = true;
        return 0;
    case OPT_MAX:
        if (num_arg(arg, "--max-reports", 1, 100000, &v) < 0)
            return -1;
        o->max_reports = (int)v;
        return 0;
    case OPT_SLOW:
        return num_arg(arg, "--slow-after", 5, 1e6, &o->slow_after);
    case OPT_WAITS:
        o->waits_file = arg;
        waits_free(o->waits);
        o->waits = NULL;
        return cli_waits_load(arg, "watch", &o->waits) ? -1 : 0;
    case OPT_DUMP_TIMEOUT:
        return num_arg(arg, "--dump-timeout", 1, 3600, &o->dump_timeout);
    case OPT_GIL_STATS:
        o->eng.gil = true;
        return 0;
    default: /* getopt said what was wrong */
        cli_try_help("watch");
        return -1;
    }
}

/* Returns an exit status to leave with (help, bad usage), or -1 to run. */
static int parse_watch(int argc, char **argv, struct watch_opts *o)
{
    static struct cli_getopt g;
    int c;

    cli_opts_getopt(watch_tables, &g);
    optind = 1;
    while ((c = getopt_long(argc, argv, g.shorts, g.longs, NULL)) != -1) {
        int h = cli_disc_handle(c, optarg, &o->eng.disc, "watch");

        if (h == 0)
            h = cli_hosts_handle(c, optarg, &o->hosts, "watch");
        if (h < 0)
            return CLI_EXIT_USAGE;
        if (h == 1)
            continue;
        if (c == 'h') {
            watch_usage(stdout);
            return CLI_EXIT_OK;
        }
        if (watch_option(c, optarg, o) < 0)
            return CLI_EXIT_USAGE;
    }
    o->job_argv = cli_job_argv(argc, argv, optind);
    if (cli_job_missing(argc, argv, optind)) {
        fprintf(stderr, "ranktop watch: -- wants the command to start after it\n");
        return cli_try_help("watch");
    }
    if ((optind < argc && !o->job_argv) || !o->out) {
        if (optind < argc && !o->job_argv)
            fprintf(stderr,
                    "ranktop watch: unexpected argument '%s' (a command to start goes after --)\n",
                    argv[optind]);
        else
            fprintf(stderr, "ranktop watch: no report directory: use --out DIR\n");
        return cli_try_help("watch");
    }
    if (o->job_argv &&
        (o->eng.disc.npids || o->eng.disc.nchildren_of || o->eng.disc.match || o->hosts.given)) {
        fprintf(stderr, "ranktop watch: -- CMD watches the job it starts: drop -p, "
                        "--children-of, --match, --hosts and --hostfile\n");
        return cli_try_help("watch");
    }
    return cli_disc_finish(&o->eng.disc, &o->hosts, &o->eng.remote, "watch") < 0 ? CLI_EXIT_USAGE
                                                                                 : -1;
}

/* --out: made when missing (one level), and it must take a directory of ours. */
static int check_out(const char *dir, const char **out)
{
    static char abs_out[PATH_MAX];
    struct stat st;
    int n;

    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "ranktop watch: cannot make %s: %s\n", dir, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK | X_OK) < 0) {
        fprintf(stderr, "ranktop watch: %s is not a directory this user can write into\n", dir);
        return CLI_EXIT_FAIL;
    }
    n = watch_report_clean(dir);
    /* Absolute, for RANKTOP_REPORT and the stderr line, whatever directory CMD runs in. */
    if (realpath(dir, abs_out))
        *out = abs_out;
    if (n > 0)
        fprintf(stderr,
                "ranktop watch: removed %d unfinished report%s a killed watcher left in %s\n", n,
                n == 1 ? "" : "s", dir);
    return 0;
}

/* ---- Stragglers ---- */

#define WATCH_MAX_KINDS 16

/* One tick's judgement for --slow-after: each live rank, whether it was odd, its wait kind. */
struct straggle_tick {
    uint64_t t;
    size_t n;
    int *ranks;
    unsigned char *odd, *kind;
};

struct straggle {
    struct straggle_tick *ticks; /* a ring, oldest at first */
    size_t first, n, cap;
    const char *kinds[WATCH_MAX_KINDS];
    size_t nkinds;
    int told; /* rank id reported as straggler, INT_MIN none */
};

/* ---- The watcher's state ---- */

struct watch {
    const struct watch_opts *o;
    struct engine *e;
    struct cli_job *job; /* `-- CMD`'s, NULL without one */
    char self[PATH_MAX];
    bool exit_known, hang_on, told_max, stop;
    bool asked;           /* a report was asked for (SIGUSR1) and is not written yet */
    uint64_t started;     /* when the engine started */
    struct cli_told told; /* why targets cannot be read, said once each */
    uint64_t sig;         /* picture of the last hang report */
    uint64_t last_death;  /* when a death was last reported */
    int nreports, dead[MAX_DEAD];
    size_t ndead;
    struct straggle sg;
    int rc;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static uint64_t mix_text(uint64_t h, const char *s)
{
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return (h ^ 0xff) * 0x100000001b3ull;
}

/* A stack by the text of its functions and files (lines left out, as the verdict groups
 * them). view_stack_fkey hashes interned pointers, which differ from one view to the next. */
static uint64_t stack_key(const struct history *h, uint32_t stack)
{
    uint64_t k = 0xcbf29ce484222325ull;
    const uint32_t *ids;

    if (stack == HSTACK_NONE || stack >= h->nstacks)
        return 0;
    ids = history_stack_frames(h, stack);
    for (uint32_t i = 0; i < h->stacks[stack].nframes; i++)
        k = mix_text(mix_text(k, h->frames[ids[i]].function), h->frames[ids[i]].file);
    return k;
}

/* The picture a hang shows: the majority's place, the odd ranks and theirs, the dead. */
static uint64_t picture(const struct history *h, const struct view_hang *vh)
{
    uint64_t k = mix(0, stack_key(h, vh->stack));

    for (size_t i = 0; i < vh->nodd; i++)
        k = mix(mix(k, (uint64_t)(int64_t)vh->odd[i].rank), stack_key(h, vh->odd[i].stack));
    for (size_t i = 0; i < vh->nexited; i++)
        k = mix(k, (uint64_t)(int64_t)vh->exited[i] + 7);
    return k;
}

/* Runs --on-hang with RANKTOP_REPORT=dir, its output in dir/on-hang.log. */
static void run_hook(const struct watch *w, const char *dir, const char *kind)
{
    extern char **environ;
    size_t n = 0;
    char **env, rep[PATH_MAX + 32], kd[64], log[PATH_MAX + 16];
    char *const argv[] = {(char *)"sh", (char *)"-c", (char *)w->o->on_hang, NULL};
    pid_t pid;
    int st;

    while (environ[n])
        n++;
    env = x_calloc(n + 3, sizeof(*env));
    n = 0;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "RANKTOP_REPORT=", 15) && strncmp(*e, "RANKTOP_REPORT_KIND=", 20))
            env[n++] = *e;
    snprintf(rep, sizeof(rep), "RANKTOP_REPORT=%s", dir);
    snprintf(kd, sizeof(kd), "RANKTOP_REPORT_KIND=%s", kind);
    env[n++] = rep;
    env[n++] = kd;
    snprintf(log, sizeof(log), "%s/on-hang.log", dir);
    if (watch_spawn("/bin/sh", argv, env, log, NULL, &pid) < 0) {
        fprintf(stderr, "ranktop watch: cannot run --on-hang: %s\n", strerror(errno));
    } else if ((st = watch_reap(pid, w->o->on_hang_timeout)) == -1) {
        fprintf(stderr, "ranktop watch: --on-hang ran past %g s: killed\n", w->o->on_hang_timeout);
    } else if (!WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "ranktop watch: --on-hang failed (%s %d), see %s\n",
                WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
                log);
    }
    free(env);
}

/* The stderr line that names a report. */
static void say(enum watch_why why, const char *dir, const struct view_hang *vh)
{
    static const char *const what[] = {"hang", "hang (a rank died)", "on-demand", "straggler"};

    fprintf(stderr, "ranktop watch: %s report %s%s%s\n", what[why], dir, vh->hang ? ": " : "",
            vh->hang ? vh->text : "");
}

static void report(struct watch *w, enum watch_why why, const struct engine_view *v, uint64_t now,
                   const struct view_hang *vh, int dead_key, const struct watch_shares *sh)
{
    struct watch_report_in in = {why,
                                 v,
                                 now,
                                 vh,
                                 dead_key,
                                 sh,
                                 (uint64_t)(w->o->hang_after * 1e9),
                                 w->o->eng.rate_hz,
                                 w->exit_known,
                                 w->self,
                                 w->o->dump_timeout,
                                 RANKTOP_VERSION,
                                 w->o->waits,
                                 w->o->waits_file};
    struct app_err err = {0};
    char dir[PATH_MAX];

    if (w->nreports >= w->o->max_reports) {
        if (!w->told_max)
            fprintf(stderr, "ranktop watch: --max-reports %d reached: no more reports\n",
                    w->o->max_reports);
        w->told_max = true;
    } else if (watch_report_write(w->o->out, &in, dir, sizeof(dir), &err) < 0) {
        fprintf(stderr, "ranktop watch: %s\n", err.msg);
    } else {
        w->nreports++;
        say(why, dir, vh);
        if (w->o->on_hang)
            run_hook(w, dir,
                     why == WATCH_STRAGGLER  ? "straggler"
                     : why == WATCH_ONDEMAND ? "ondemand"
                                             : "hang");
    }
    if (w->o->exit_on_hang && (why == WATCH_HANG || why == WATCH_EXIT)) {
        w->stop = true;
        w->rc = WATCH_EXIT_HANG;
    }
}

/* A rank that died by a signal or a failing exit status while others live, not reported
 * yet: its key, or 0. A rank that ended well (exit 0) is the job finishing, not news. */
static int new_death(struct watch *w, const struct history *h, const struct view_hang *vh)
{
    if (!vh->nlive)
        return 0;
    for (size_t i = 0; i < h->nranks; i++) {
        const struct hrank *r = &h->ranks[i];
        bool seen = false;

        if (!r->exited || (r->exit_signal <= 0 && r->exit_code <= 0))
            continue;
        for (size_t k = 0; k < w->ndead && !seen; k++)
            seen = w->dead[k] == r->pid;
        if (seen)
            continue;
        if (w->ndead < MAX_DEAD)
            w->dead[w->ndead++] = r->pid;
        return r->pid;
    }
    return 0;
}

static unsigned char kind_index(struct straggle *s, const char *kind)
{
    const char *k = kind ? kind : "unknown";

    for (size_t i = 0; i < s->nkinds; i++)
        if (!strcmp(s->kinds[i], k))
            return (unsigned char)i;
    if (s->nkinds == WATCH_MAX_KINDS)
        return WATCH_MAX_KINDS - 1;
    s->kinds[s->nkinds] = k; /* wait_kind_name()'s, static */
    return (unsigned char)s->nkinds++;
}

static void tick_free(struct straggle_tick *t)
{
    free(t->ranks);
    free(t->odd);
    free(t->kind);
    memset(t, 0, sizeof(*t));
}

/* Adds this tick (live ranks, odd when the odd ones are a minority) and drops ticks older than
 * span. */
static void straggle_add(struct watch *w, const struct history *h, const struct view_hang *vh,
                         uint64_t now, uint64_t span)
{
    struct straggle *s = &w->sg;
    struct straggle_tick *t;
    bool minority = vh->nodd && 2 * vh->nodd < vh->nlive;

    while (s->n && s->ticks[s->first].t + span < now) {
        tick_free(&s->ticks[s->first]);
        s->first = (s->first + 1) % s->cap;
        s->n--;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        struct straggle_tick *r = x_calloc(cap, sizeof(*r));

        for (size_t i = 0; i < s->n; i++)
            r[i] = s->ticks[(s->first + i) % s->cap];
        free(s->ticks);
        s->ticks = r;
        s->first = 0;
        s->cap = cap;
    }
    t = &s->ticks[(s->first + s->n++) % s->cap];
    t->t = now;
    t->ranks = x_calloc(h->nranks + 1, sizeof(int));
    t->odd = x_calloc(h->nranks + 1, 1);
    t->kind = x_calloc(h->nranks + 1, 1);
    for (size_t i = 0; i < h->nranks; i++) {
        const struct hrank *r = &h->ranks[i];
        struct watch_wait wk;

        if (r->exited)
            continue;
        watch_wait_of(w->o->waits, h, r, now, &wk);
        t->ranks[t->n] = view_rank_id(r);
        for (size_t k = 0; minority && k < vh->nodd; k++)
            t->odd[t->n] |= vh->odd[k].pid == r->pid;
        t->kind[t->n++] = kind_index(s, wk.kind);
    }
}

/* The rank odd in most of the ticks kept, or INT_MIN; *share gets its share. */
static int straggler_of(const struct straggle *s, double *share)
{
    int best = INT_MIN;
    size_t best_n = 0;

    for (size_t i = 0; i < s->n; i++) {
        const struct straggle_tick *t = &s->ticks[(s->first + i) % s->cap];

        for (size_t k = 0; k < t->n; k++) {
            size_t c = 0;

            if (!t->odd[k] || t->ranks[k] == best)
                continue;
            for (size_t j = 0; j < s->n; j++) {
                const struct straggle_tick *u = &s->ticks[(s->first + j) % s->cap];

                for (size_t m = 0; m < u->n; m++)
                    c += u->ranks[m] == t->ranks[k] && u->odd[m];
            }
            if (c > best_n) {
                best_n = c;
                best = t->ranks[k];
            }
        }
    }
    *share = s->n ? (double)best_n / (double)s->n : 0;
    return 2 * best_n > s->n ? best : INT_MIN;
}

/* Each rank's share of the ticks kept in each kind of wait, into sh (caller frees). */
static void straggle_shares(const struct straggle *s, struct watch_shares *sh)
{
    int *ranks = x_calloc(1, sizeof(int));
    double *share;
    size_t n = 0, *seen;

    for (size_t i = 0; i < s->n; i++) {
        const struct straggle_tick *t = &s->ticks[(s->first + i) % s->cap];

        for (size_t k = 0; k < t->n; k++) {
            bool have = false;

            for (size_t j = 0; j < n && !have; j++)
                have = ranks[j] == t->ranks[k];
            if (!have) {
                ranks = x_reallocarray(ranks, n + 1, sizeof(int));
                ranks[n++] = t->ranks[k];
            }
        }
    }
    share = x_calloc(n * s->nkinds + 1, sizeof(double));
    seen = x_calloc(n + 1, sizeof(size_t));
    for (size_t i = 0; i < s->n; i++) {
        const struct straggle_tick *t = &s->ticks[(s->first + i) % s->cap];

        for (size_t k = 0; k < t->n; k++)
            for (size_t j = 0; j < n; j++)
                if (ranks[j] == t->ranks[k]) {
                    share[j * s->nkinds + t->kind[k]] += 1;
                    seen[j]++;
                }
    }
    for (size_t j = 0; j < n; j++)
        for (size_t k = 0; k < s->nkinds; k++)
            share[j * s->nkinds + k] /= seen[j] ? (double)seen[j] : 1;
    free(seen);
    *sh = (struct watch_shares){
        .nranks = n, .ranks = ranks, .nkinds = s->nkinds, .kinds = s->kinds, .share = share};
}

static void straggle_check(struct watch *w, const struct engine_view *v, uint64_t now,
                           const struct view_hang *vh)
{
    uint64_t span = (uint64_t)(w->o->slow_after * 1e9);
    struct straggle *s = &w->sg;
    struct watch_shares sh;
    double odd_share;
    int rank;

    if (w->o->slow_after <= 0)
        return;
    straggle_add(w, &v->hist, vh, now, span);
    /* Judged over a full span only: the first ticks of a run are too few to call anyone. */
    if (!s->n || s->ticks[(s->first + s->n - 1) % s->cap].t - s->ticks[s->first].t +
                         (uint64_t)(1e9 / w->o->eng.rate_hz) <
                     span) {
        return;
    }
    rank = straggler_of(s, &odd_share);
    if (rank == INT_MIN || rank == s->told) {
        s->told = rank;
        return;
    }
    s->told = rank;
    straggle_shares(s, &sh);
    sh.rank = rank;
    sh.odd_share = odd_share;
    report(w, WATCH_STRAGGLER, v, now, vh, 0, &sh);
    free((void *)sh.ranks);
    free((void *)sh.share);
}

static void straggle_fini(struct straggle *s)
{
    for (size_t i = 0; i < s->n; i++)
        tick_free(&s->ticks[(s->first + i) % s->cap]);
    free(s->ticks);
}

/* Says why a process cannot be read (not Python, another user's) or attached to, once per
 * reason: a watcher of processes it cannot read would otherwise wait in silence. */
static void tell_unreadable(struct watch *w, const struct engine_view *v)
{
    for (size_t i = 0; i < v->nunread; i++)
        if (v->unread[i].why[0])
            cli_tell_once(&w->told, "watch", v->unread[i].why);
    if (v->attach_err[0])
        cli_tell_once(&w->told, "watch", v->attach_err);
}

/* Whether any rank has been sampled: a report before the first sample would name none. */
static bool sampled_yet(const struct history *h)
{
    for (size_t i = 0; i < h->nranks; i++)
        if (h->ranks[i].nthreads)
            return true;
    return false;
}

/* One judgement: a death, the hang verdict, a straggler. */
static void judge(struct watch *w, const struct engine_view *v, uint64_t now,
                  const struct view_hang *vh)
{
    int dead;

    /* A death is news once: the teardown that follows (a launcher ending the other ranks) is
     * not a death report of its own; a death after a quiet interval is. */
    if (!w->stop && (dead = new_death(w, &v->hist, vh)) != 0 &&
        (!w->last_death || now - w->last_death >= (uint64_t)(w->o->hang_after * 1e9))) {
        w->last_death = now;
        report(w, WATCH_EXIT, v, now, vh, dead, NULL);
        w->hang_on = vh->hang;
        w->sig = picture(&v->hist, vh);
    }
    if (!w->stop && vh->hang && (!w->hang_on || picture(&v->hist, vh) != w->sig)) {
        w->hang_on = true;
        w->sig = picture(&v->hist, vh);
        report(w, WATCH_HANG, v, now, vh, 0, NULL);
    } else if (!vh->hang) {
        w->hang_on = false; /* recovered: the next hang is news */
    }
    if (!w->stop && !vh->hang)
        straggle_check(w, v, now, vh);
}

/* A tick: the report asked for, if any, and with `judging` (the period's tick, or SIGUSR1) a
 * judgement. A report asked for before the first sample waits for one (ASK_WAIT_NS at most
 * from the start; the ticks in between only look for it), so that a SIGUSR1 sent as soon as
 * the watcher says it listens still gives every rank's stacks. */
static void tick(struct watch *w, bool judging)
{
    const struct engine_view *v = engine_acquire(w->e);
    uint64_t now = clock_mono_ns();
    bool write = w->asked && (sampled_yet(&v->hist) || now - w->started >= ASK_WAIT_NS);
    struct view_hang vh;

    tell_unreadable(w, v);
    if (write || judging) {
        view_hang(&v->hist, now, (uint64_t)(w->o->hang_after * 1e9), NULL, &vh);
        if (write) {
            w->asked = false;
            report(w, WATCH_ONDEMAND, v, now, &vh, 0, NULL);
        }
        if (judging)
            judge(w, v, now, &vh);
        view_hang_fini(&vh);
    }
    engine_release(v);
}

static void watch_defaults(struct watch_opts *o)
{
    memset(o, 0, sizeof(*o));
    /* Cheap by default: the GIL prober (500 probes a second per rank) is left to --gil-stats,
     * ranks are looked for every 5 s, not every 1-2 s as the monitor does, memory figures and
     * wait states are read every 5 s, and PSS and USS not at all (smaps_rollup walks every
     * rank's page tables; the reports show RSS, and each report's dump reads the wait states
     * anew). */
    o->eng.rate_hz = 1;
    o->eng.mem = o->eng.gpu = o->eng.npu = true;
    o->eng.mem_rss_only = true;
    o->eng.wait_states = true;
    o->eng.mem_period_ms = 5000;
    o->eng.discovery_ms = 5000;
    o->eng.mem_cap = 256u << 20;
    o->hang_after = 30;
    o->window = 300;
    o->on_hang_timeout = 60;
    o->dump_timeout = 60;
    o->max_reports = 10;
}

static int watch_run(struct watch *w, sigset_t *set)
{
    struct app_err err = {0};
    uint64_t period = (uint64_t)(1e9 / w->o->eng.rate_hz), next;
    char why[256];

    if (engine_start(&w->o->eng, &w->e, &err) < 0) {
        fprintf(stderr, "ranktop watch: %s\n", err.msg);
        return CLI_EXIT_FAIL;
    }
    w->started = clock_mono_ns();
    w->exit_known = engine_exit_listening(w->e, 2000, why, sizeof(why));
    if (!w->exit_known)
        fprintf(stderr, "ranktop watch: exit statuses of the ranks are not known: %s\n", why);
    /* Said once SIGUSR1 is taken (it ends a process that does not block it). */
    fprintf(stderr,
            "ranktop watch: watching at %g Hz, hang after %g s; reports into %s (SIGUSR1: one "
            "now)\n",
            w->o->eng.rate_hz, w->o->hang_after, w->o->out);
    next = clock_mono_ns() + period;
    while (!w->stop) {
        uint64_t now = clock_mono_ns(), left = next > now ? next - now : 0;
        struct timespec ts;
        int sig;

        if (w->asked && left > ASK_POLL_NS) /* a report waits for the first sample */
            left = ASK_POLL_NS;
        ts = (struct timespec){(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
        sig = sigtimedwait(set, NULL, &ts);

        if (sig > 0 && sig != SIGUSR1)
            break;
        if (w->job && cli_job_ended(w->job))
            break;
        if (sig == SIGUSR1)
            w->asked = true;
        if (w->asked || clock_mono_ns() >= next) {
            tick(w, sig == SIGUSR1 || clock_mono_ns() >= next);
            if (clock_mono_ns() >= next)
                next += period * (1 + (clock_mono_ns() - next) / period);
        }
    }
    /* Stopped before the engine: a signal to the watcher ends the job it started, as record
     * does. --exit-on-hang leaves it running: the job script that asked for status 3 acts. */
    if (w->job && w->rc != WATCH_EXIT_HANG)
        cli_job_stop(w->job, 5);
    engine_stop(w->e);
    engine_free(w->e);
    return w->rc;
}

/* Starts the job of `-- CMD` (before any thread: it forks), and makes it discovery's tree,
 * scanned every second so that its ranks are found soon after it exec's Python. Returns 0 or
 * CLI_EXIT_FAIL. */
static int start_job(struct watch_opts *o)
{
    char err[512];

    if (!o->job_argv)
        return 0;
    if (cli_job_start(&o->job, o->job_argv, NULL, err, sizeof(err)) < 0) {
        fprintf(stderr, "ranktop watch: %s\n", err);
        return CLI_EXIT_FAIL;
    }
    o->eng.disc.job = o->job.pid;
    o->eng.discovery_ms = 1000;
    return 0;
}

/* The exit status with a job: the job's (stopped first when it still runs), but 3 after a hang
 * with --exit-on-hang, the job left running. */
static int job_status(struct watch_opts *o, int rc)
{
    char how[160];
    int st;

    if (!o->job_argv || !o->job.pid)
        return rc;
    if (rc == WATCH_EXIT_HANG) {
        fprintf(stderr, "ranktop watch: %s (pid %d) left running\n", o->job_argv[0], o->job.pid);
        return rc;
    }
    cli_job_stop(&o->job, 5);
    st = cli_job_exit(&o->job);
    cli_job_describe(&o->job, how, sizeof(how));
    fprintf(stderr, "ranktop watch: %s (pid %d) %s\n", o->job_argv[0], o->job.pid, how);
    return st >= 0 ? st : rc;
}

int cmd_watch(int argc, char **argv)
{
    struct watch_opts o;
    struct watch w = {0};
    sigset_t set;
    ssize_t n;
    int rc;

    watch_defaults(&o);
    rc = parse_watch(argc, argv, &o);
    if (rc < 0 && !o.eng.remote.nhosts && !o.job_argv &&
        cli_disc_missing("watch", o.eng.disc.pids, o.eng.disc.npids, o.eng.disc.children_of,
                         o.eng.disc.nchildren_of))
        rc = CLI_EXIT_FAIL;
    if (rc < 0 && (rc = check_out(o.out, &o.out)) == 0 && (rc = start_job(&o)) == 0) {
        w.o = &o;
        w.job = o.job_argv ? &o.job : NULL;
        w.sg.told = INT_MIN;
        o.eng.history_ns = (uint64_t)(o.window * 1e9);
        n = readlink("/proc/self/exe", w.self, sizeof(w.self) - 1);
        w.self[n > 0 ? n : 0] = '\0';
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGHUP);
        sigaddset(&set, SIGUSR1);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        signal(SIGPIPE, SIG_IGN);
        rc = job_status(&o, watch_run(&w, &set));
        straggle_fini(&w.sg);
    }
    waits_free(o.waits);
    cli_disc_fini(&o.eng.disc);
    cli_hosts_fini(&o.hosts);
    return rc;
}
