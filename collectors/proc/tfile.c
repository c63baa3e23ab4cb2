/* Opening the files a target controls (see ranktop/proc/tfile.h): one place, so that no reader of
 * a target's objects, root or debug files can be made to wait on a FIFO, read a device, follow
 * the target's links out of its root, or read more than its caller's bound.
 *
 * Why each flag: open() of a FIFO without O_NONBLOCK waits for a writer for good, and the
 * unwinder's callbacks run with every signal blocked (libunwind masks them around its locks),
 * so nothing would end that wait; O_NOCTTY keeps a terminal device from becoming ours;
 * fstat on the open descriptor (not stat on the path, which the target can swap in between)
 * is what says it is a regular file. Absolute links under /proc/PID/root resolve against
 * our own root, not the target's, so paths there are resolved with RESOLVE_IN_ROOT.
 *
 * A mapping can lose its pages when the file is truncated: tfile_guard turns the SIGBUS of
 * such a read into an error. Its only state is the SIGBUS handler installed once (with the
 * action it replaced) and each thread's guarded range. Any thread. */
#include "ranktop/proc/tfile.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TFILE_FLAGS (O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)

/* glibc before 2.32 (Debian 11, where the portable binary is built) names no SYS_openat2; the
 * kernel's number is 437 on every architecture since the unified syscall table. */
#ifndef SYS_openat2
#ifdef __NR_openat2
#define SYS_openat2 __NR_openat2
#else
#define SYS_openat2 437
#endif
#endif

static int open_status(int e)
{
    return e == ENOENT || e == ENOTDIR || e == ESRCH ? APP_E_NOTFOUND
           : e == EACCES || e == EPERM               ? APP_E_PERM
                                                     : APP_E_IO;
}

/* path inside root: openat2 keeps its links in that root; without openat2 (Linux < 5.6) the
 * joined path is opened as before, links and all. */
static int open_in_root(const char *root, const char *path, int flags)
{
    struct open_how how = {.flags = (uint64_t)flags,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    char joined[8192];
    int dir = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC), fd, e;

    if (dir < 0)
        return -1;
    fd = (int)syscall(SYS_openat2, dir, path, &how, sizeof(how));
    e = errno;
    close(dir);
    if (fd >= 0 || e != ENOSYS) {
        errno = e;
        return fd;
    }
    if ((size_t)snprintf(joined, sizeof(joined), "%s%s", root, path) >= sizeof(joined)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return open(joined, flags);
}

int tfile_open(const char *root, const char *path, unsigned flags, uint64_t max, uint64_t *size,
               struct app_err *err)
{
    int oflags = TFILE_FLAGS | (flags & TFILE_NOFOLLOW ? O_NOFOLLOW : 0);
    int fd = root ? open_in_root(root, path, oflags) : open(path, oflags);
    struct stat st;

    if (fd < 0) {
        int e = errno;

        if (e == ELOOP)
            return app_err_set(err, APP_E_NOTREG, "%s%s: a symbolic link, not followed",
                               root ? root : "", path);
        return app_err_set(err, open_status(e), "cannot open %s%s: %s", root ? root : "", path,
                           strerror(e));
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return app_err_set(err, APP_E_NOTREG,
                           "%s%s: not a regular file (a FIFO, device or "
                           "directory is never read)",
                           root ? root : "", path);
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return app_err_set(err, APP_E_LIMIT, "%s%s: %llu bytes, over the %llu MiB read",
                           root ? root : "", path, (unsigned long long)st.st_size,
                           (unsigned long long)(max >> 20));
    }
    *size = (uint64_t)st.st_size;
    return fd;
}

int tfile_map(const char *root, const char *path, unsigned flags, uint64_t max, struct tfile_map *m,
              struct app_err *err)
{
    uint64_t size = 0;
    int fd = tfile_open(root, path, flags, max, &size, err);
    void *p;

    m->p = NULL;
    m->len = 0;
    if (fd < 0)
        return fd;
    p = size ? mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    close(fd);
    if (p == MAP_FAILED)
        return app_err_set(err, APP_E_IO, "cannot map %s%s", root ? root : "", path);
    m->p = p;
    m->len = (size_t)size;
    return 0;
}

void tfile_unmap(struct tfile_map *m)
{
    if (m->p)
        munmap((void *)m->p, m->len);
    m->p = NULL;
    m->len = 0;
}

/* The guarded read of this thread: where it may fault, and where to go back when it does. */
struct guard {
    const uint8_t *lo, *hi;
    sigjmp_buf back;
    volatile sig_atomic_t on;
};

static _Thread_local struct guard guard;
static struct sigaction guard_prev;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

/* A SIGBUS inside this thread's guarded range goes back to tfile_guard; any other is given to
 * the action there was before: a fault happens again on return with that action restored, a
 * signal someone sent is raised again. */
static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    const uint8_t *at = si ? (const uint8_t *)si->si_addr : NULL;

    (void)ctx;
    if (guard.on && si && si->si_code > 0 && at >= guard.lo && at < guard.hi) {
        guard.on = 0;
        siglongjmp(guard.back, 1);
    }
    sigaction(SIGBUS, &guard_prev, NULL);
    if (!si || si->si_code <= 0)
        raise(sig);
}

static void guard_install(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &guard_prev);
}

int tfile_guard(const struct tfile_map *m, int (*fn)(void *arg), void *arg, const char *path,
                struct app_err *err)
{
    struct guard outer = guard; /* a guarded read may map and read another file inside */
    sigset_t bus, mask;
    int rc;

    pthread_once(&guard_once, guard_install);
    /* libunwind's callbacks run with every signal blocked, and a fault with SIGBUS blocked
     * kills the process whatever the handler: unblocked for the read. */
    sigemptyset(&bus);
    sigaddset(&bus, SIGBUS);
    pthread_sigmask(SIG_UNBLOCK, &bus, &mask);
    guard.lo = m->p;
    guard.hi = m->p + m->len;
    if (sigsetjmp(guard.back, 1)) {
        rc = app_err_set(err, APP_E_IO, "%s: the file shrank while it was read", path);
    } else {
        guard.on = 1;
        rc = fn(arg);
    }
    guard = outer;
    pthread_sigmask(SIG_SETMASK, &mask, NULL);
    return rc;
}
