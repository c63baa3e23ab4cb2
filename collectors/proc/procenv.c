/* Reading another process's initial environment from /proc/PID/environ.
 *
 * The parser never reads past the buffer and ignores entries without '=' or a final NUL. The
 * environment is the one the process started with (later setenv calls are invisible), which is
 * what launchers such as torchrun set for each rank. Any thread. */
#include "ranktop/proc/procenv.h"

#include "ranktop/base/status.h"
#include "ranktop/base/util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *procenv_find(const char *buf, size_t len, const char *name)
{
    size_t nl = strlen(name);

    for (size_t i = 0; i < len;) {
        const char *e = buf + i;
        const char *z = memchr(e, '\0', len - i);

        if (!z)
            return NULL;
        if ((size_t)(z - e) > nl && !memcmp(e, name, nl) && e[nl] == '=')
            return e + nl + 1;
        i += (size_t)(z - e) + 1;
    }
    return NULL;
}

int procenv_get(int pid, const char *name, char *out, size_t outlen)
{
    char path[64], *buf;
    const char *v;
    size_t len;
    int rc;

    snprintf(path, sizeof(path), "/proc/%d/environ", pid);
    rc = file_read_all(path, 4u << 20, &buf, &len);
    if (rc < 0)
        return rc;
    v = procenv_find(buf, len, name);
    if (v)
        snprintf(out, outlen, "%s", v);
    free(buf);
    return v ? 0 : APP_E_NOTFOUND;
}

int procenv_get_int(int pid, const char *name, int *val)
{
    char buf[32], *end;
    long v;
    int rc = procenv_get(pid, name, buf, sizeof(buf));

    if (rc < 0)
        return rc;
    errno = 0;
    v = strtol(buf, &end, 10);
    if (errno || end == buf || *end || v < 0 || v > INT_MAX)
        return APP_E_PARSE;
    *val = (int)v;
    return 0;
}

int procenv_cmdline(int pid, char *out, size_t outlen)
{
    char path[64], *buf;
    size_t len;
    int rc;

    snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
    rc = file_read_all(path, 1u << 16, &buf, &len);
    if (rc < 0)
        return rc;
    while (len > 0 && buf[len - 1] == '\0')
        len--;
    for (size_t i = 0; i < len; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    snprintf(out, outlen, "%.*s", (int)len, buf);
    free(buf);
    return 0;
}
