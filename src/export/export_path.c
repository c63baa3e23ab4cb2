/* Output paths of the exports: what may be written, the temp file beside it, stale temps.
 *
 * An export is written to a temp file in the output's directory and renamed over the output,
 * so the output must be a regular file or not exist yet: renaming over a FIFO, device, socket,
 * symbolic link or directory would replace that node instead of writing to it. The temp name
 * is the output's name + ".tmp." + pid, its name part shortened when that would pass NAME_MAX;
 * a temp of that shape whose pid no longer runs was left by a killed run and is removed when
 * the next run starts. Runs on whichever thread calls it. */
#include "export_priv.h"

#include "ranktop/base/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TMP_TAG ".tmp."
#define PID_DIGITS 10

/* Splits path into its directory ("." when none) and its last component. */
static void split_path(const char *path, char *dir, size_t dlen, const char **base)
{
    const char *slash = strrchr(path, '/');

    *base = slash ? slash + 1 : path;
    if (!slash)
        snprintf(dir, dlen, ".");
    else
        snprintf(dir, dlen, "%.*s", slash == path ? 1 : (int)(slash - path), path);
}

/* The name part a temp of base starts with: base itself, cut so that the whole temp name
 * (prefix + ".tmp." + pid) stays within NAME_MAX. */
static size_t temp_prefix_len(const char *base)
{
    size_t n = strlen(base), room = NAME_MAX - strlen(TMP_TAG) - PID_DIGITS;

    return n < room ? n : room;
}

void export_temp_name(const char *path, long pid, char *out, size_t len)
{
    char dir[PATH_MAX];
    const char *base;

    split_path(path, dir, sizeof(dir), &base);
    snprintf(out, len, "%.*s%.*s" TMP_TAG "%ld", (int)(base - path), path,
             (int)temp_prefix_len(base), base, pid);
}

static const char *node_kind(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
           : S_ISLNK(m)  ? "a symbolic link"
                         : "not a regular file";
}

int export_check_path(const char *path, struct app_err *err)
{
    char dir[PATH_MAX], tmp[PATH_MAX + NAME_MAX];
    const char *base;
    struct stat st;
    int fd;

    if (!path || !path[0])
        return app_err_set(err, APP_E_USAGE, "no output file named (an empty path)");
    split_path(path, dir, sizeof(dir), &base);
    if (!base[0] || !strcmp(base, ".") || !strcmp(base, ".."))
        return app_err_set(err, APP_E_USAGE, "%s names a directory, not a file", path);
    if (strlen(base) > NAME_MAX)
        return app_err_set(err, APP_E_USAGE, "%s: the file name is longer than %d bytes", path,
                           NAME_MAX);
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return app_err_set(err, APP_E_NOTREG,
                           "%s is %s: ranktop writes a new file and renames it over the "
                           "output, so the output must be a regular file or a new name",
                           path, node_kind(st.st_mode));
    export_temp_name(path, (long)getpid(), tmp, sizeof(tmp));
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return app_err_set(err, APP_E_IO, "cannot write %s: %s", path, strerror(errno));
    close(fd);
    unlink(tmp);
    return 0;
}

/* True when name is a temp of a file whose name part starts with prefix[0..n): prefix, then
 * ".tmp.", then a pid; *pid gets it. */
static bool temp_of(const char *name, const char *prefix, size_t n, long *pid)
{
    const char *p = name + n;
    char *end;

    if (strncmp(name, prefix, n) || strncmp(p, TMP_TAG, strlen(TMP_TAG)))
        return false;
    p += strlen(TMP_TAG);
    if (*p < '1' || *p > '9')
        return false;
    *pid = strtol(p, &end, 10);
    return !*end && *pid > 0;
}

int export_clean_stale(const char *path)
{
    char dir[PATH_MAX], victim[PATH_MAX + NAME_MAX + 2];
    const char *base;
    struct dirent *d;
    DIR *dh;
    int removed = 0;
    size_t n;

    split_path(path, dir, sizeof(dir), &base);
    n = temp_prefix_len(base);
    dh = opendir(dir);
    if (!dh)
        return 0;
    while ((d = readdir(dh))) {
        long pid;

        /* Ours only: the exact shape, and a pid that runs no more (not a running record's). */
        if (!temp_of(d->d_name, base, n, &pid) || pid == (long)getpid() ||
            kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        snprintf(victim, sizeof(victim), "%s/%s", dir, d->d_name);
        removed += unlink(victim) == 0;
    }
    closedir(dh);
    return removed;
}
