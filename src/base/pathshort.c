/* path_short (ranktop/base/util.h): the short, package-relative file names of the text outputs and
 * the monitor. A pure function of the string: no I/O, any thread. The short name is always a
 * suffix of the full one, so callers print it without a copy and JSON keeps the full path. */
#include "ranktop/base/util.h"

#include <ctype.h>
#include <string.h>

/* After the last "/NAME/" in file (NAME "site-packages" or "dist-packages"), or NULL. */
static const char *after_last(const char *file, const char *name)
{
    const char *hit = NULL, *p = file;
    size_t n = strlen(name);

    while ((p = strstr(p, name)) != NULL) {
        if (p > file && p[-1] == '/' && p[n] == '/' && p[n + 1])
            hit = p + n + 1;
        p += n;
    }
    return hit;
}

/* After the last "lib/pythonX.Y/" (also "lib/python3.13t/", a free-threaded build), or NULL. */
static const char *after_stdlib(const char *file)
{
    const char *hit = NULL, *p = file;

    while ((p = strstr(p, "lib/python")) != NULL) {
        const char *q = p + 10;

        if (p == file || p[-1] == '/') {
            while (isdigit((unsigned char)*q) || *q == '.')
                q++;
            if (*q == 't')
                q++;
            if (q > p + 10 && *q == '/' && q[1])
                hit = q + 1;
        }
        p += 10;
    }
    return hit;
}

const char *path_short(const char *file)
{
    const char *a, *b;

    if (!file)
        return file;
    a = after_last(file, "site-packages");
    b = after_last(file, "dist-packages");
    if (a || b)
        return !b || (a && a > b) ? a : b;
    return (a = after_stdlib(file)) ? a : file;
}
