/* Where the kernel wrote a core: kernel.core_pattern expanded as the kernel's format_corename
 * does, for one process that dumped.
 *
 * corepath_expand is pure and bounded: it writes at most len bytes and gives up (unknown)
 * where a field it needs is not known or the path would not fit, rather than naming a file
 * the kernel did not write. Values the kernel escapes (%h, %e, %E) get '/' turned into '!' and
 * a lone "." or ".." a leading '!', as the kernel does. %p and %P are the same pid here: the
 * caller knows the initial-namespace one, which is what the kernel sees from the default
 * namespace where a core_pattern file path is written. %i / %I are the dumping thread, which
 * the exit event does not name: the leader's id is used, right when the leader crashed.
 * corepath_locate does the reading (/proc/sys/kernel, /proc/PID) for the engine's exit
 * thread; any thread may call either. */
#include "ranktop/proc/corepath.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "ranktop/base/util.h"

#define PATTERN_MAX 256 /* the kernel keeps 128 bytes (CORENAME_MAX_SIZE) */

struct sink {
    char *out;
    size_t len, used;
    bool full;
};

static void put(struct sink *s, const char *text, bool escape)
{
    size_t start = s->used;

    for (const char *c = text; *c; c++) {
        if (s->used + 1 >= s->len) {
            s->full = true;
            return;
        }
        s->out[s->used++] = escape && *c == '/' ? '!' : *c;
    }
    s->out[s->used] = '\0';
    if (escape && ((s->used - start == 1 && s->out[start] == '.') ||
                   (s->used - start == 2 && !memcmp(s->out + start, "..", 2))))
        s->out[start] = '!';
}

/* The systemd helper, by its program's base name. */
static bool is_systemd(const char *p, size_t n)
{
    size_t end = 1, start;

    while (end < n && p[end] != ' ')
        end++;
    start = end;
    while (start > 1 && p[start - 1] != '/')
        start--;
    return end - start == strlen("systemd-coredump") &&
           !memcmp(p + start, "systemd-coredump", end - start);
}

/* One "%x" field into s; false when its value is not known. */
static bool field(struct sink *s, char c, const struct corepath_info *in, bool *pid_seen)
{
    char num[32];

    switch (c) {
    case '%':
        put(s, "%", false);
        return true;
    case 'p':
        *pid_seen = true; /* fall through */
    case 'P':
    case 'i':
    case 'I':
        snprintf(num, sizeof(num), "%d", in->pid);
        break;
    case 'u':
    case 'g':
        if ((c == 'u' ? in->uid : in->gid) < 0)
            return false;
        snprintf(num, sizeof(num), "%ld", c == 'u' ? in->uid : in->gid);
        break;
    case 's':
        snprintf(num, sizeof(num), "%d", in->signal);
        break;
    case 't':
        snprintf(num, sizeof(num), "%" PRId64, in->time);
        break;
    case 'c':
        snprintf(num, sizeof(num), "%" PRIu64, in->core_limit);
        break;
    case 'h':
    case 'e':
    case 'E': {
        const char *v = c == 'h' ? in->host : c == 'e' ? in->comm : in->exe;

        if (!v || !*v)
            return false;
        put(s, v, true);
        return true;
    }
    case 'd':
    case 'C':
    case 'f':
        return false; /* dump mode, cgroup, file name: not known here */
    default:
        return true; /* the kernel drops an unknown field */
    }
    put(s, num, false);
    return true;
}

int corepath_expand(const char *pattern, size_t plen, const struct corepath_info *in, char *out,
                    size_t len)
{
    struct sink s = {out, len, 0, false};
    bool pid_seen = false;
    size_t n = strnlen(pattern, plen);

    if (!len)
        return COREPATH_UNKNOWN;
    out[0] = '\0';
    while (n && (pattern[n - 1] == '\n' || pattern[n - 1] == ' '))
        n--;
    if (n && pattern[0] == '|') {
        if (!is_systemd(pattern, n))
            return COREPATH_UNKNOWN;
        snprintf(out, len, "%s", COREPATH_SYSTEMD_TEXT);
        return COREPATH_SYSTEMD;
    }
    if (!n)
        return COREPATH_UNKNOWN; /* an empty pattern: the kernel writes "core" (below) */
    if (pattern[0] != '/' && in->cwd && *in->cwd) {
        put(&s, in->cwd, false);
        put(&s, "/", false);
    }
    for (size_t i = 0; i < n && !s.full; i++) {
        char one[2] = {pattern[i], '\0'};

        if (pattern[i] != '%') {
            put(&s, one, false);
        } else if (++i < n && !field(&s, pattern[i], in, &pid_seen)) {
            out[0] = '\0';
            return COREPATH_UNKNOWN;
        }
    }
    if (in->core_uses_pid && !pid_seen) {
        char num[16];

        snprintf(num, sizeof(num), ".%d", in->pid);
        put(&s, num, false);
    }
    if (s.full) {
        out[0] = '\0';
        return COREPATH_UNKNOWN;
    }
    return COREPATH_FILE;
}

/* The first line of a small file, newline dropped; "" when it cannot be read. */
static void read_line(const char *path, char *out, size_t len)
{
    char *buf = NULL;
    size_t n = 0;

    out[0] = '\0';
    if (file_read_all(path, PATTERN_MAX, &buf, &n) < 0)
        return;
    snprintf(out, len, "%.*s", (int)strcspn(buf, "\n"), buf);
    free(buf);
}

/* Uid and gid (real) from /proc/PID/status; -1 when gone. */
static void read_ids(int pid, long *uid, long *gid)
{
    char path[64], *buf = NULL, *u, *g;
    size_t n = 0;

    *uid = *gid = -1;
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    if (file_read_all(path, 1 << 16, &buf, &n) < 0)
        return;
    if ((u = strstr(buf, "\nUid:")))
        *uid = strtol(u + 5, NULL, 10);
    if ((g = strstr(buf, "\nGid:")))
        *gid = strtol(g + 5, NULL, 10);
    free(buf);
}

static void read_link(int pid, const char *what, char *out, size_t len)
{
    char path[64];
    ssize_t n;

    snprintf(path, sizeof(path), "/proc/%d/%s", pid, what);
    n = readlink(path, out, len - 1);
    out[n > 0 ? n : 0] = '\0';
}

int corepath_locate(int pid, int sig, char *out, size_t len)
{
    char pattern[PATTERN_MAX], uses[16], comm[64], path[64], exe[256], cwd[256];
    struct corepath_info in = {.pid = pid, .signal = sig, .time = (int64_t)time(NULL)};
    struct utsname u;
    struct rlimit rl;

    read_line("/proc/sys/kernel/core_pattern", pattern, sizeof(pattern));
    read_line("/proc/sys/kernel/core_uses_pid", uses, sizeof(uses));
    snprintf(path, sizeof(path), "/proc/%d/comm", pid);
    read_line(path, comm, sizeof(comm));
    read_ids(pid, &in.uid, &in.gid);
    read_link(pid, "exe", exe, sizeof(exe));
    read_link(pid, "cwd", cwd, sizeof(cwd));
    /* The rank's own limit is gone with it; a launcher gives its ranks its own. */
    in.core_limit = getrlimit(RLIMIT_CORE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                        ? (uint64_t)rl.rlim_cur
                        : UINT64_MAX;
    in.comm = comm;
    in.exe = exe;
    in.cwd = cwd;
    in.host = uname(&u) == 0 ? u.nodename : "";
    in.core_uses_pid = atoi(uses) != 0;
    return corepath_expand(pattern, sizeof(pattern), &in, out, len);
}
