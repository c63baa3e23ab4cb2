/* Parser and reader for /proc/PID/maps.
 *
 * Owns nothing global. The parser is pure (buffer in, records out) and accepts only lines of
 * the kernel's exact shape; everything else is skipped. procmaps_file_path finds a path that
 * opens a mapped file itself, whatever the target's root. Any thread may call them. */
#include "ranktop/proc/procmaps.h"

#include "ranktop/base/util.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static int parse_line(const char *line, size_t len, struct procmap *out)
{
    char buf[4096 + 256], perms[8] = "";
    unsigned long long start, end, off, inode;
    unsigned major, minor;
    int consumed = 0;

    if (len >= sizeof(buf))
        len = sizeof(buf) - 1;
    memcpy(buf, line, len);
    buf[len] = '\0';
    if (sscanf(buf, "%llx-%llx %4s %llx %x:%x %llu %n", &start, &end, perms, &off, &major, &minor,
               &inode, &consumed) < 7 ||
        end <= start || strlen(perms) != 4)
        return -1;
    out->start = start;
    out->end = end;
    out->offset = off;
    out->inode = inode;
    out->dev = makedev(major, minor);
    memcpy(out->perms, perms, 5);
    out->path = x_strdup(consumed > 0 ? buf + consumed : "");
    return 0;
}

int procmaps_parse(const char *buf, size_t len, struct procmaps *out)
{
    size_t cap = 0;

    out->v = NULL;
    out->n = 0;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(buf + i, '\n', len - i);
        size_t ll = nl ? (size_t)(nl - (buf + i)) : len - i;
        struct procmap rec;

        if (parse_line(buf + i, ll, &rec) == 0) {
            if (out->n == cap) {
                cap = cap ? cap * 2 : 64;
                out->v = x_reallocarray(out->v, cap, sizeof(*out->v));
            }
            out->v[out->n++] = rec;
        }
        i += ll + 1;
    }
    return 0;
}

int procmaps_read(int pid, struct procmaps *out, struct app_err *err)
{
    char path[64], *buf;
    size_t len;
    int rc;

    snprintf(path, sizeof(path), "/proc/%d/maps", pid);
    rc = file_read_all(path, 64u << 20, &buf, &len);
    if (rc < 0) {
        out->v = NULL;
        out->n = 0;
        if (rc == APP_E_NOTFOUND)
            return app_err_set(err, rc, "no such process %d", pid);
        return app_err_set(err, rc, "cannot read %s: %s", path, app_status_str(rc));
    }
    procmaps_parse(buf, len, out);
    free(buf);
    return 0;
}

void procmaps_fini(struct procmaps *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->v[i].path);
    free(m->v);
    m->v = NULL;
    m->n = 0;
}

/* Whether path names the file of m (device and inode as the maps line gives them). */
static bool same_file(const char *path, const struct procmap *m)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_ino == m->inode &&
           (uint64_t)st.st_dev == m->dev;
}

/* The kernel prints a mapped file's path as seen from the reader's root, not the target's:
 * for a target in a chroot below ours the path is ours (/srv/root/usr/bin/python3), for a
 * target in another mount namespace (a container) it is the target's (/usr/bin/python3),
 * which only /proc/PID/root resolves. So the candidates are tried in that order, each taken
 * only when it is the mapped file itself (same device and inode); then map_files, which is
 * the file itself but needs CAP_SYS_ADMIN; then the target's view unchecked, because
 * overlayfs reports the lower layer's inode in maps but its own in stat. */
int procmaps_file_path(int pid, const struct procmap *m, char *out, size_t n)
{
    char root[PATH_MAX + 64];
    const char *del = strstr(m->path, " (deleted)");

    if (m->path[0] != '/')
        return APP_E_NOTFOUND;
    snprintf(root, sizeof(root), "/proc/%d/root%s", pid, m->path);
    if (!del && same_file(root, m))
        return snprintf(out, n, "%s", root) < (int)n ? 0 : APP_E_NOTFOUND;
    if (!del && same_file(m->path, m))
        return snprintf(out, n, "%s", m->path) < (int)n ? 0 : APP_E_NOTFOUND;
    snprintf(out, n, "/proc/%d/map_files/%llx-%llx", pid, (unsigned long long)m->start,
             (unsigned long long)m->end);
    if (access(out, R_OK) == 0)
        return 0;
    if (!del && access(root, R_OK) == 0)
        return snprintf(out, n, "%s", root) < (int)n ? 0 : APP_E_NOTFOUND;
    return errno == EACCES || errno == EPERM ? APP_E_PERM : APP_E_NOTFOUND;
}
