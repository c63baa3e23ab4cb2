/* External tools with a deadline: posix_spawn, read both pipes with poll() until EOF or the
 * deadline, and only then wait for the child.
 *
 * Reading before waiting means a tool that prints more than a pipe buffer cannot deadlock us;
 * the deadline means a hung tool (nvidia-smi on a wedged driver) costs at most timeout_ms. The
 * child gets its own process group so the kill also reaches anything it started. posix_spawn
 * (not fork) because callers are threads of a multi-threaded process. Any thread.
 *
 * A thread may name a cancel descriptor (exec_cancel_on): once it is readable, a tool running
 * on that thread is killed at once and later calls start nothing, so a stopping engine never
 * waits out a hung tool's deadline. The descriptor is per thread (thread-local) because the
 * tools are reached through the device sources, which know nothing of who runs them.
 *
 * exec_run_fed gives the tool a stdin pipe instead of /dev/null: a feed looks at the output so
 * far and answers once; the answer is written non-blocking between reads (a tool that reads
 * slowly never stalls the reading of its output), then the pipe is closed. */
#include "ranktop/devices/exec.h"

#include "ranktop/base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXEC_MAX_OUT (16u << 20)

extern char **environ;

/* The calling thread's cancel descriptor, -1 for none. */
static _Thread_local int cancel_fd = -1;

void exec_cancel_on(int fd)
{
    cancel_fd = fd;
}

/* True when the calling thread's cancel descriptor is readable (never consumed: it stays set
 * for every later call). */
static bool cancelled(void)
{
    struct pollfd pf = {cancel_fd, POLLIN, 0};

    return cancel_fd >= 0 && poll(&pf, 1, 0) > 0 && (pf.revents & POLLIN);
}

struct sink {
    char *buf;
    size_t len, cap;
};

static void sink_add(struct sink *s, const char *data, size_t n)
{
    size_t room = s->len < EXEC_MAX_OUT ? EXEC_MAX_OUT - s->len : 0;

    if (n > room) /* what is past the cap is dropped */
        n = room;
    if (s->len + n + 1 > s->cap) {
        while (s->len + n + 1 > s->cap)
            s->cap = s->cap ? s->cap * 2 : 4096;
        s->buf = x_reallocarray(s->buf, s->cap, 1);
    }
    memcpy(s->buf + s->len, data, n);
    s->len += n;
    s->buf[s->len] = '\0';
}

/* in: the stdin pipe's read end, or -1 for /dev/null. */
static int spawn(const char *const argv[], int in, int out[2], int errp[2], pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int rc;

    posix_spawn_file_actions_init(&fa);
    if (in >= 0)
        posix_spawn_file_actions_adddup2(&fa, in, 0);
    else
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
    posix_spawnattr_init(&at);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
    {
        sigset_t none, all;

        sigemptyset(&none);
        sigfillset(&all);
        posix_spawnattr_setsigmask(&at, &none);
        posix_spawnattr_setsigdefault(&at, &all);
    }
    rc = posix_spawnp(pid, argv[0], &fa, &at, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return rc;
}

/* The stdin side of a fed run: the feed, whether it has answered, what is left to write. */
struct feeder {
    const struct exec_feed *feed;
    int *fd; /* the stdin pipe's write end (non-blocking), -1 once closed */
    bool answered;
    uint64_t fed_ns; /* when the answer was all written */
    struct exec_send send;
    size_t piece, at;
};

static void close_in(struct feeder *f)
{
    if (*f->fd >= 0)
        close(*f->fd);
    *f->fd = -1;
}

/* Asks the feed after new output; writes what it answered as far as the pipe takes it. */
static void feed_step(struct feeder *f, const struct sink *o)
{
    if (*f->fd < 0)
        return;
    if (!f->answered && f->feed->answer(f->feed->ctx, o->buf ? o->buf : "", o->len, &f->send))
        f->answered = true;
    while (f->answered && f->piece < 2) {
        ssize_t n;

        if (f->at == f->send.n[f->piece]) {
            f->piece++;
            f->at = 0;
            continue;
        }
        n = write(*f->fd, f->send.p[f->piece] + f->at, f->send.n[f->piece] - f->at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return; /* poll says when it takes more */
        if (n <= 0) {
            close_in(f); /* the tool stopped reading: its output says why */
            return;
        }
        f->at += (size_t)n;
    }
    if (f->answered) {
        f->fed_ns = clock_mono_ns();
        close_in(f);
    }
}

/* Drains both pipes until EOF, the deadline or a cancel, feeding the stdin of a fed run;
 * returns 0, APP_E_TIMEOUT (deadline) or APP_E_CANCELLED (cancelled). */
static int drain(int outfd, int errfd, uint64_t deadline, struct sink *o, struct sink *e,
                 struct feeder *f)
{
    struct pollfd pf[4] = {
        {outfd, POLLIN, 0}, {errfd, POLLIN, 0}, {cancel_fd, POLLIN, 0}, {-1, POLLOUT, 0}};
    char buf[65536];

    if (f)
        feed_step(f, o);
    while (pf[0].fd >= 0 || pf[1].fd >= 0) {
        uint64_t now = clock_mono_ns();
        int r;

        pf[3].fd = f && f->answered ? *f->fd : -1;
        if (now >= deadline)
            return APP_E_TIMEOUT;
        r = poll(pf, 4, (int)((deadline - now) / 1000000u) + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return APP_E_IO;
        if (pf[2].revents & POLLIN)
            return APP_E_CANCELLED;
        for (int i = 0; i < 2; i++) {
            ssize_t n;

            if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            n = read(pf[i].fd, buf, sizeof(buf));
            if (n > 0)
                sink_add(i ? e : o, buf, (size_t)n);
            else if (n == 0 || errno != EINTR)
                pf[i].fd = -1;
        }
        if (f)
            feed_step(f, o);
    }
    return 0;
}

/* Waits for the child until the deadline or a cancel (a tool may close its pipes and still
 * hang), then kills its group and collects it. *killed tells whether it was killed. The wait
 * polls the cancel descriptor in 1 ms steps, so a cancel is seen within a millisecond. */
static int reap(pid_t pid, uint64_t deadline, bool *killed)
{
    struct pollfd pf = {cancel_fd, POLLIN, 0};
    int st;
    pid_t r;

    while ((r = waitpid(pid, &st, WNOHANG)) == 0 && clock_mono_ns() < deadline)
        if (poll(&pf, 1, 1) > 0 && (pf.revents & POLLIN))
            break;
    if (r == 0) {
        *killed = true;
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        while ((r = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
            ;
    }
    if (r < 0)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int exec_run(const char *const argv[], int timeout_ms, struct exec_result *res, struct app_err *err)
{
    return exec_run_fed(argv, timeout_ms, NULL, res, err);
}

int exec_run_fed(const char *const argv[], int timeout_ms, const struct exec_feed *feed,
                 struct exec_result *res, struct app_err *err)
{
    int out[2], errp[2], in[2] = {-1, -1}, rc;
    struct feeder f = {feed, &in[1], false, 0, {{NULL, NULL}, {0, 0}}, 0, 0};
    struct sink o = {0}, e = {0};
    uint64_t deadline = clock_mono_ns() + (uint64_t)timeout_ms * 1000000u;
    bool killed = false;
    pid_t pid;

    memset(res, 0, sizeof(*res));
    if (cancelled())
        return app_err_set(err, APP_E_CANCELLED, "%s: not started, stopping", argv[0]);
    if (pipe2(out, O_CLOEXEC) < 0)
        return app_err_set(err, APP_E_IO, "pipe: %s", strerror(errno));
    if (pipe2(errp, O_CLOEXEC) < 0) {
        close(out[0]);
        close(out[1]);
        return app_err_set(err, APP_E_IO, "pipe: %s", strerror(errno));
    }
    if (feed && pipe2(in, O_CLOEXEC) < 0) {
        close(out[0]);
        close(out[1]);
        close(errp[0]);
        close(errp[1]);
        return app_err_set(err, APP_E_IO, "pipe: %s", strerror(errno));
    }
    rc = spawn(argv, in[0], out, errp, &pid);
    close(out[1]);
    close(errp[1]);
    if (in[0] >= 0)
        close(in[0]);
    if (in[1] >= 0)
        fcntl(in[1], F_SETFL, O_NONBLOCK);
    if (rc != 0) {
        close_in(&f);
        close(out[0]);
        close(errp[0]);
        return app_err_set(err, rc == ENOENT ? APP_E_NOTFOUND : APP_E_IO, "%s: %s", argv[0],
                           rc != ENOENT           ? strerror(rc)
                           : strchr(argv[0], '/') ? "no such file"
                                                  : "not found on PATH");
    }
    rc = drain(out[0], errp[0], deadline, &o, &e, feed ? &f : NULL);
    close_in(&f);
    close(out[0]);
    close(errp[0]);
    res->status = reap(pid, rc == APP_E_TIMEOUT || rc == APP_E_CANCELLED ? 0 : deadline, &killed);
    if (killed && rc != APP_E_CANCELLED)
        rc = cancelled() ? APP_E_CANCELLED : APP_E_TIMEOUT;
    sink_add(&o, "", 0);
    sink_add(&e, "", 0);
    res->out = o.buf;
    res->out_len = o.len;
    res->err = e.buf;
    res->err_len = e.len;
    res->fed_ns = f.fed_ns;
    if (rc == APP_E_TIMEOUT)
        return app_err_set(err, rc, "%s: no answer within %d ms, killed", argv[0], timeout_ms);
    if (rc == APP_E_CANCELLED)
        return app_err_set(err, rc, "%s: killed, stopping", argv[0]);
    if (res->status == 127 && e.len == 0)
        return app_err_set(err, APP_E_NOTFOUND, "%s: %s", argv[0],
                           strchr(argv[0], '/') ? "no such file" : "not found on PATH");
    return rc < 0 ? app_err_set(err, rc, "%s: read error", argv[0]) : 0;
}

void exec_result_fini(struct exec_result *res)
{
    free(res->out);
    free(res->err);
    memset(res, 0, sizeof(*res));
}
