/* The job ranktop launches (cli_launch.h): fork, a process group of its own, exec; polling and
 * stopping it. The child resets what ranktop changed (blocked signals, ignored SIGPIPE) before
 * exec, and reports an exec failure through a close-on-exec pipe, so that a mistyped command
 * fails at once with its reason instead of as an empty run. Main thread only; call
 * cli_job_start before any other thread starts (a fork copies only the calling thread). */
#include "cli_launch.h"

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

char **cli_job_argv(int argc, char **argv, int at)
{
    if (at < 2 || at >= argc || strcmp(argv[at - 1], "--"))
        return NULL;
    return argv + at;
}

bool cli_job_missing(int argc, char **argv, int at)
{
    return at == argc && argc >= 2 && !strcmp(argv[argc - 1], "--");
}

/* In the child, between fork and exec: only async-signal-safe calls. */
static void child_exec(char *const *argv, const char *out, int report)
{
    sigset_t none;
    int e, fd;

    setpgid(0, 0);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);
    if (isatty(STDIN_FILENO) && (fd = open("/dev/null", O_RDONLY)) >= 0) {
        dup2(fd, STDIN_FILENO);
        close(fd);
    }
    if (out) {
        fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0) {
            e = errno;
            (void)!write(report, &e, sizeof(e));
            _exit(127);
        }
    }
    execvp(argv[0], argv);
    e = errno;
    (void)!write(report, &e, sizeof(e));
    _exit(127);
}

int cli_job_start(struct cli_job *j, char *const *argv, const char *out, char *err, size_t errlen)
{
    int p[2], e = 0;
    ssize_t n;
    pid_t pid;

    memset(j, 0, sizeof(*j));
    if (pipe2(p, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "cannot start '%s': %s", argv[0], strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid = fork();
    if (pid == 0)
        child_exec(argv, out, p[1]);
    close(p[1]);
    if (pid < 0) {
        snprintf(err, errlen, "cannot start '%s': %s", argv[0], strerror(errno));
        close(p[0]);
        return -1;
    }
    /* Both sides set the group, so that it exists whichever runs first. */
    setpgid(pid, pid);
    j->pid = (int)pid;
    do
        n = read(p[0], &e, sizeof(e));
    while (n < 0 && errno == EINTR);
    close(p[0]);
    if (n == (ssize_t)sizeof(e)) {
        waitpid(pid, &j->status, 0);
        j->ended = true;
        if (out && e != ENOENT && e != EACCES)
            snprintf(err, errlen, "cannot write the job's output to %s: %s", out, strerror(e));
        else
            snprintf(err, errlen, "cannot run '%s': %s", argv[0], strerror(e));
        return -1;
    }
    return 0;
}

bool cli_job_ended(struct cli_job *j)
{
    int st;

    if (j->ended || !j->pid)
        return j->ended;
    if (waitpid(j->pid, &st, WNOHANG) == j->pid) {
        j->status = st;
        j->ended = true;
    }
    return j->ended;
}

void cli_job_stop(struct cli_job *j, double grace_s)
{
    uint64_t waited_ms = 0;

    if (!j->pid || cli_job_ended(j))
        return;
    kill(-j->pid, SIGTERM);
    while (!cli_job_ended(j) && waited_ms < (uint64_t)(grace_s * 1000)) {
        struct timespec ts = {0, 50 * 1000 * 1000};

        nanosleep(&ts, NULL);
        waited_ms += 50;
    }
    if (!j->ended) {
        j->killed = true;
        kill(-j->pid, SIGKILL);
        if (waitpid(j->pid, &j->status, 0) == j->pid)
            j->ended = true;
    }
}

int cli_job_exit(const struct cli_job *j)
{
    if (!j->ended)
        return -1;
    if (WIFEXITED(j->status))
        return WEXITSTATUS(j->status);
    return WIFSIGNALED(j->status) ? 128 + WTERMSIG(j->status) : 1;
}

void cli_job_describe(const struct cli_job *j, char *out, size_t len)
{
    if (!j->ended)
        snprintf(out, len, "still running (pid %d)", j->pid);
    else if (WIFSIGNALED(j->status))
        snprintf(out, len, "killed by signal %d (%s)", WTERMSIG(j->status),
                 strsignal(WTERMSIG(j->status)));
    else
        snprintf(out, len, "exited with status %d", cli_job_exit(j));
}

void cli_job_default_name(const char *what, const char *ext, char *out, size_t len)
{
    const char *slash = strrchr(what, '/');
    char stamp[40] = "";
    time_t now = time(NULL);
    struct tm tm;

    if (slash && slash[1])
        what = slash + 1;
    /* RFC 3339 to the second, as py-spy writes it: the offset with a colon. */
    if (localtime_r(&now, &tm) && strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S%z", &tm)) {
        size_t n = strlen(stamp);

        memmove(stamp + n - 1, stamp + n - 2, 3);
        stamp[n - 2] = ':';
    }
    snprintf(out, len, "%s-%s.%s", what, stamp, ext);
}
