/* Allocation wrappers, the fatal path, clocks and file helpers.
 *
 * The only mutable state is the fatal hook pointer, written once by the UI thread before any
 * collector starts and read on the fatal path; every function may run on any thread. */
#include "ranktop/base/util.h"
#include "ranktop/base/status.h"

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

const char *app_signal_name(int sig)
{
    static const char *const names[] = {
        [1] = "SIGHUP",   [2] = "SIGINT",   [3] = "SIGQUIT",  [4] = "SIGILL",   [5] = "SIGTRAP",
        [6] = "SIGABRT",  [7] = "SIGBUS",   [8] = "SIGFPE",   [9] = "SIGKILL",  [10] = "SIGUSR1",
        [11] = "SIGSEGV", [12] = "SIGUSR2", [13] = "SIGPIPE", [14] = "SIGALRM", [15] = "SIGTERM",
    };

    return sig > 0 && sig < (int)(sizeof(names) / sizeof(names[0])) ? names[sig] : NULL;
}

void app_restore_terminal(void)
{
    if (fatal_hook)
        fatal_hook();
}

void app_fatal(const char *fmt, ...)
{
    va_list ap;

    app_restore_terminal();
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

size_t sys_page_size(void)
{
    long pg = sysconf(_SC_PAGESIZE); /* glibc answers from the auxiliary vector: no system call */

    return pg > 0 ? (size_t)pg : 4096;
}

static int open_status(int e)
{
    return e == ENOENT || e == ESRCH   ? APP_E_NOTFOUND
           : e == EACCES || e == EPERM ? APP_E_PERM
                                       : APP_E_IO;
}

static int read_fd_all(int fd, size_t max, char **out, size_t *len);

void x_qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    if (base && n > 1)
        qsort(base, n, size, cmp);
}

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

size_t utf8_valid_len(const unsigned char *s)
{
    uint32_t cp;
    size_t n;

    if (s[0] >= 0xC2 && s[0] <= 0xDF)
        n = 2, cp = s[0] & 0x1Fu;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF)
        n = 3, cp = s[0] & 0x0Fu;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4)
        n = 4, cp = s[0] & 0x07u;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) /* also stops at the terminating NUL */
            return 0;
        cp = cp << 6 | (s[i] & 0x3Fu);
    }
    /* Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8. */
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

char *utf8_fix(const char *s)
{
    size_t n = strlen(s), o = 0;
    char *out = x_malloc(n * 3 + 1); /* each bad byte may become 3 (U+FFFD) */

    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t k = *p < 0x80 ? 1 : utf8_valid_len(p);

        if (k) {
            memcpy(out + o, p, k);
            o += k, p += k;
        } else {
            o += utf8_put(out + o, 0xFFFD);
            p++;
        }
    }
    out[o] = '\0';
    return out;
}

#define TEXT_RING 8
#define TEXT_MAX 8192

const char *text_safe(const char *s)
{
    static _Thread_local char ring[TEXT_RING][TEXT_MAX];
    static _Thread_local unsigned next;
    char *out = ring[next++ % TEXT_RING];
    size_t o = 0;

    if (!s)
        return "(null)";
    for (const unsigned char *p = (const unsigned char *)s; *p && o < TEXT_MAX - 16;) {
        size_t k = *p < 0x80 ? 1 : utf8_valid_len(p);
        uint32_t c1 = k == 2 && p[0] == 0xC2 && p[1] < 0xA0 ? p[1] : 0; /* U+0080..U+009F */

        if (!k || (k == 1 && (*p < 0x20 || *p == 0x7f)))
            o += (size_t)snprintf(out + o, 8, "\\x%02x", *p);
        else if (c1)
            o += (size_t)snprintf(out + o, 8, "\\u%04x", c1);
        else
            memcpy(out + o, p, k), o += k;
        p += k ? k : 1;
        if (*p && o >= TEXT_MAX - 16) {
            memcpy(out + o, "...", 3);
            o += 3;
        }
    }
    out[o] = '\0';
    return out;
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
