/* Parser and reader for /proc/PID/maps.
 *
 * Owns nothing global. The parser is pure (buffer in, records out) and accepts only lines of
 * the kernel's exact shape; everything else is skipped. Any thread may call it. */
#include "ranktop/procmaps.h"

#include "ranktop/util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_line(const char *line, size_t len, struct procmap *out)
{
    char buf[4096 + 256], perms[8] = "";
    unsigned long long start, end, off, inode;
    int consumed = 0;

    if (len >= sizeof(buf))
        len = sizeof(buf) - 1;
    memcpy(buf, line, len);
    buf[len] = '\0';
    if (sscanf(buf, "%llx-%llx %4s %llx %*x:%*x %llu %n", &start, &end, perms, &off, &inode,
               &consumed) < 5 ||
        end <= start || strlen(perms) != 4)
        return -1;
    out->start = start;
    out->end = end;
    out->offset = off;
    out->inode = inode;
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
