/* A thread's state, syscall and wait channel from /proc (ranktop/proc/procwait.h). Each file is
 * read with one bounded read(2) into a stack buffer: the kernel writes these small files whole in
 * one go, and a longer answer than the buffer is cut, never overrun. Parsers are separate and
 * pure so that the unit test can feed them what kernels write. No state; any thread. */
#include "ranktop/proc/procwait.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int procwait_parse_stat(const char *buf, size_t len, char *state)
{
    const char *rp = NULL;

    /* The command name is in parentheses and may itself hold ')': the last one ends it. */
    for (size_t i = 0; i < len; i++)
        if (buf[i] == ')')
            rp = buf + i;
    if (!rp || (size_t)(rp - buf) + 2 >= len || rp[1] != ' ' || !isalpha((unsigned char)rp[2]))
        return APP_E_PARSE;
    *state = rp[2];
    return 0;
}

/* Whether syscall nr with arguments a waits on no descriptor: select's nfds (its first
 * argument) or poll's (its second) is 0. */
static bool waits_on_nothing(int nr, const unsigned long *a)
{
#ifdef SYS_select
    if (nr == SYS_select)
        return a[0] == 0;
#endif
#ifdef SYS_poll
    if (nr == SYS_poll)
        return a[1] == 0;
#endif
    return (nr == SYS_pselect6 && a[0] == 0) || (nr == SYS_ppoll && a[1] == 0);
}

int procwait_parse_syscall(const char *buf, size_t len, int *nr, bool *no_fds)
{
    char tmp[256];
    size_t n = len < sizeof(tmp) - 1 ? len : sizeof(tmp) - 1;
    unsigned long a[6] = {0};
    char *end, *at;
    long v;
    int k = 0;

    memcpy(tmp, buf, n);
    tmp[n] = 0;
    if (no_fds)
        *no_fds = false;
    if (!strncmp(tmp, "running", 7)) {
        *nr = -1;
        return 0;
    }
    v = strtol(tmp, &end, 10);
    if (end == tmp || (*end != ' ' && *end != '\n' && *end != 0) || v < -1 || v > 100000)
        return APP_E_PARSE;
    *nr = (int)v;
    for (at = end; k < 6; k++, at = end) {
        a[k] = strtoul(at, &end, 16);
        if (end == at)
            break;
    }
    if (no_fds && k == 6)
        *no_fds = waits_on_nothing(*nr, a);
    return 0;
}

void procwait_parse_wchan(const char *buf, size_t len, char *out, size_t outlen)
{
    size_t n = 0;

    if (!outlen)
        return;
    while (n < len && n + 1 < outlen &&
           (isalnum((unsigned char)buf[n]) || buf[n] == '_' || buf[n] == '.'))
        n++;
    /* "0": not sleeping, or a kernel that hides it. Anything odd past the name: not a name. */
    if ((n < len && buf[n] != '\n') || (n == 1 && buf[0] == '0'))
        n = 0;
    memcpy(out, buf, n);
    out[n] = 0;
}

/* Reads at most cap - 1 bytes of /proc/PID/task/TID/NAME into buf; returns the length, or a
 * negative status. */
static long read_small(int pid, int tid, const char *name, char *buf, size_t cap)
{
    char path[96];
    ssize_t n;
    int fd, e;

    snprintf(path, sizeof(path), "/proc/%d/task/%d/%s", pid, tid, name);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        e = errno;
        return e == ENOENT || e == ESRCH   ? APP_E_GONE
               : e == EACCES || e == EPERM ? APP_E_PERM
                                           : APP_E_IO;
    }
    do
        n = read(fd, buf, cap - 1);
    while (n < 0 && errno == EINTR);
    e = errno;
    close(fd);
    if (n < 0)
        return e == ESRCH ? APP_E_GONE : e == EACCES || e == EPERM ? APP_E_PERM : APP_E_IO;
    buf[n] = 0;
    return n;
}

int procwait_read(int pid, int tid, struct procwait *out, struct app_err *err)
{
    char buf[1024];
    long n;

    *out = (struct procwait){.syscall = -1};
    if (pid <= 0 || tid <= 0)
        return app_err_set(err, APP_E_NOTFOUND, "thread %d of process %d: no such thread", tid,
                           pid);
    n = read_small(pid, tid, "stat", buf, sizeof(buf));
    if (n < 0)
        return app_err_set(err, (int)n, "thread %d of process %d: stat: %s", tid, pid,
                           app_status_str((int)n));
    if (procwait_parse_stat(buf, (size_t)n, &out->state) < 0)
        return app_err_set(err, APP_E_PARSE, "thread %d of process %d: stat unreadable", tid, pid);
    n = read_small(pid, tid, "syscall", buf, sizeof(buf));
    if (n >= 0 && procwait_parse_syscall(buf, (size_t)n, &out->syscall, &out->no_fds) < 0)
        out->syscall = -1;
    n = read_small(pid, tid, "wchan", buf, sizeof(buf));
    if (n >= 0)
        procwait_parse_wchan(buf, (size_t)n, out->wchan, sizeof(out->wchan));
    return 0;
}
