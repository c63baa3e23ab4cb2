/* Allocation wrappers, the fatal path, clocks and file helpers.
 *
 * The only mutable state is the fatal hook pointer, written once by the UI thread before any
 * collector starts and read on the fatal path; every function may run on any thread. */
#include "ranktop/util.h"
#include "ranktop/status.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void (*fatal_hook)(void);

void app_set_fatal_hook(void (*hook)(void))
{
    fatal_hook = hook;
}

void app_fatal(const char *fmt, ...)
{
    va_list ap;

    if (fatal_hook)
        fatal_hook();
    fputs("ranktop: fatal: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

void *x_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (!p)
        app_fatal("out of memory (%zu bytes)", n);
    return p;
}

void *x_calloc(size_t nmemb, size_t size)
{
    void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);

    if (!p)
        app_fatal("out of memory (%zu x %zu bytes)", nmemb, size);
    return p;
}

void *x_reallocarray(void *p, size_t nmemb, size_t size)
{
    void *q;

    if (size && nmemb > SIZE_MAX / size)
        app_fatal("allocation overflow (%zu x %zu bytes)", nmemb, size);
    q = realloc(p, nmemb && size ? nmemb * size : 1);
    if (!q)
        app_fatal("out of memory (%zu x %zu bytes)", nmemb, size);
    return q;
}

char *x_strdup(const char *s)
{
    return x_strndup(s, strlen(s));
}

char *x_strndup(const char *s, size_t n)
{
    char *p = x_malloc(n + 1);

    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t clock_mono_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

uint64_t clock_thread_cpu_ns(void)
{
    return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

uint64_t clock_process_cpu_ns(void)
{
    return clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

static int open_status(int e)
{
    return e == ENOENT || e == ESRCH   ? APP_E_NOTFOUND
           : e == EACCES || e == EPERM ? APP_E_PERM
                                       : APP_E_IO;
}

static int read_fd_all(int fd, size_t max, char **out, size_t *len);

int file_read_all(const char *path, size_t max, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    *out = NULL;
    *len = 0;
    if (fd < 0)
        return open_status(errno);
    return read_fd_all(fd, max, out, len);
}

int file_read_regular(const char *path, size_t max, char **out, size_t *len)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; a regular file ignores it. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat st;

    *out = NULL;
    *len = 0;
    if (fd < 0)
        return open_status(errno);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return APP_E_NOTREG;
    }
    return read_fd_all(fd, max, out, len);
}

/* Reads fd to its end (at most max bytes) and closes it. */
static int read_fd_all(int fd, size_t max, char **out, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf;

    buf = x_malloc(cap + 1);
    for (;;) {
        ssize_t r;

        if (n == cap) {
            if (cap >= max)
                break;
            cap = cap * 2 > max ? max : cap * 2;
            buf = x_reallocarray(buf, cap + 1, 1);
        }
        r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;

            close(fd);
            free(buf);
            return e == ESRCH ? APP_E_GONE : e == EACCES || e == EPERM ? APP_E_PERM : APP_E_IO;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

char *str_scrub(char *s)
{
    for (char *c = s; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    return s;
}

size_t utf8_put(char *dst, uint32_t cp)
{
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        cp = 0xFFFD;
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xC0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xE0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        dst[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    dst[0] = (char)(0xF0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    dst[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

void strv_addv(char ***v, size_t *n, const char *fmt, va_list ap)
{
    char buf[512];

    vsnprintf(buf, sizeof(buf), fmt, ap);
    *v = x_reallocarray(*v, *n + 1, sizeof(char *));
    (*v)[(*n)++] = x_strdup(buf);
}

void strv_addf(char ***v, size_t *n, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    strv_addv(v, n, fmt, ap);
    va_end(ap);
}
