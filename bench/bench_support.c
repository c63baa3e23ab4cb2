/* Target processes and small helpers shared by the bench/ runners (see bench_support.h). The
 * tracked-pid table is read by the signal handler, so it is only appended to with every
 * signal blocked, and its count is a sig_atomic_t. Main thread only. */
#include "bench_support.h"

#include "ranktop/base/util.h"

#include <errno.h>
#include <glob.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TRACKED 128

static pid_t tracked[MAX_TRACKED];
static volatile sig_atomic_t ntracked;

static void kill_all(void)
{
    for (int i = 0; i < ntracked; i++)
        if (tracked[i] > 0)
            kill(tracked[i], SIGKILL);
}

static void on_signal(int sig)
{
    kill_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

void bench_handlers_install(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

void bench_track(pid_t pid)
{
    if (pid > 0 && ntracked < MAX_TRACKED)
        tracked[ntracked++] = pid;
}

void bench_untrack(pid_t pid)
{
    sigset_t all, old;

    /* The handler reads the table: it must see either the entry or its replacement. */
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    for (int i = 0; i < ntracked; i++)
        if (tracked[i] == pid) {
            tracked[i] = tracked[ntracked - 1];
            ntracked--;
            break;
        }
    sigprocmask(SIG_SETMASK, &old, NULL);
}

void bench_kill_tracked(void)
{
    kill_all();
    for (int i = 0; i < ntracked; i++)
        if (tracked[i] > 0)
            waitpid(tracked[i], NULL, 0);
    ntracked = 0;
}

static void close_pair(int p[2])
{
    close(p[0]);
    close(p[1]);
}

int bench_target_spawn(struct bench_target *t, const char *const argv[])
{
    int in[2], out[2];
    sigset_t all, old;

    memset(t, 0, sizeof(*t));
    if (pipe(in) < 0)
        return -1;
    if (pipe(out) < 0) {
        close_pair(in);
        return -1;
    }
    /* Blocked until the pid is tracked: a ^C in between would leave the child running. */
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    t->pid = fork();
    if (t->pid == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(in[0], 0);
        dup2(out[1], 1);
        close_pair(in);
        close_pair(out);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    bench_track(t->pid);
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(in[0]);
    close(out[1]);
    t->in = fdopen(in[1], "w");
    t->out = fdopen(out[0], "r");
    return t->pid > 0 && t->in && t->out ? 0 : -1;
}

bool bench_target_ready(struct bench_target *t)
{
    char line[64];

    return t->out && fgets(line, sizeof(line), t->out) && strncmp(line, "ready", 5) == 0;
}

void bench_targets_kill(struct bench_target *t, int n)
{
    for (int i = 0; i < n; i++)
        if (t[i].pid > 0)
            kill(t[i].pid, SIGKILL);
    for (int i = 0; i < n; i++) {
        if (t[i].pid > 0)
            waitpid(t[i].pid, NULL, 0);
        if (t[i].in)
            fclose(t[i].in);
        if (t[i].out)
            fclose(t[i].out);
        memset(&t[i], 0, sizeof(t[i]));
    }
}

const char *bench_python(int minor)
{
    static char path[512];
    const char *root = getenv("PYENV_ROOT") ? getenv("PYENV_ROOT") : "/root/.pyenv";
    glob_t g;

    snprintf(path, sizeof(path), "%s/versions/3.%d.*/bin/python3", root, minor);
    if (glob(path, 0, NULL, &g) == 0)
        snprintf(path, sizeof(path), "%s", g.gl_pathv[0]);
    else
        snprintf(path, sizeof(path), "/usr/bin/python3");
    globfree(&g);
    return path;
}

void bench_sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

void bench_print_load(const char *when)
{
    double l[3] = {0, 0, 0};

    getloadavg(l, 3);
    printf("%s: load average %.2f %.2f %.2f on %ld CPUs\n", when, l[0], l[1], l[2],
           sysconf(_SC_NPROCESSORS_ONLN));
}

int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

void bench_engine_window(struct engine *e, double warm_s, double measure_s, struct bench_window *w)
{
    uint64_t t0, t1;
    double ds;

    bench_sleep_s(warm_s);
    engine_get_stats(e, &w->a);
    t0 = clock_mono_ns();
    bench_sleep_s(measure_s);
    engine_get_stats(e, &w->b);
    t1 = clock_mono_ns();
    engine_stop(e);
    engine_free(e);
    w->wall = (double)(t1 - t0) / 1e9;
    ds = (double)(w->b.samples - w->a.samples);
    w->passes_s = ds / w->wall;
    w->cpu_pct = (double)(w->b.cpu_ns - w->a.cpu_ns) / 1e9 / w->wall * 100;
    w->lag_ms =
        ds > 0 ? (w->b.lag_ms * (double)w->b.samples - w->a.lag_ms * (double)w->a.samples) / ds : 0;
}
