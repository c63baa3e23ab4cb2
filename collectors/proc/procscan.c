/* /proc enumeration for rank discovery.
 *
 * Reads only /proc: stat (parent), status (NSpid), exe, maps and environ of each candidate.
 * Processes vanish at any moment; every reader treats a missing file as "gone" and moves on.
 * rank_ident_parse is pure. Runs on the discovery thread (or `ranktop ls`). */
#include "ranktop/proc/procscan.h"

#include "ranktop/proc/procenv.h"
#include "ranktop/base/status.h"
#include "ranktop/base/util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

static int env_int(const char *env, size_t len, const char *name)
{
    const char *v = procenv_find(env, len, name);
    char *end;
    long n;

    if (!v || !*v)
        return -1;
    errno = 0;
    n = strtol(v, &end, 10);
    return (errno || *end || n < 0 || n > INT_MAX) ? -1 : (int)n;
}

static void env_str(const char *env, size_t len, const char *name, char *out, size_t outlen)
{
    const char *v = procenv_find(env, len, name);

    snprintf(out, outlen, "%s", v ? v : "");
}

/* The launchers in precedence order (procenv.h explains the order and the set rule). */
static const struct launcher_vars {
    const char *name, *rank, *local_rank, *world_size, *local_size;
} launchers[] = {
    {"torchrun", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"mpich", "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE", "MPI_LOCALNRANKS"},
    {"pmix", "PMIX_RANK", "PMIX_LOCAL_RANK", "PMIX_SIZE", "PMIX_LOCAL_SIZE"},
    {"mvapich2", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_SIZE",
     "MV2_COMM_WORLD_LOCAL_SIZE"},
    {"horovod", "HOROVOD_RANK", "HOROVOD_LOCAL_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", NULL},
};

/* Takes the identity from the first launcher whose rank variable holds a number. The other
 * fields come from that launcher only: a missing local rank stays unknown rather than being
 * borrowed from a launcher that numbers something else. */
static void ident_launcher(const char *env, size_t len, struct rank_ident *id)
{
    for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
        const struct launcher_vars *l = &launchers[i];
        int rank = env_int(env, len, l->rank);

        if (rank < 0)
            continue;
        id->rank = rank;
        id->local_rank = env_int(env, len, l->local_rank);
        id->world_size = env_int(env, len, l->world_size);
        id->local_world_size = l->local_size ? env_int(env, len, l->local_size) : -1;
        snprintf(id->launcher, sizeof(id->launcher), "%s", l->name);
        return;
    }
}

void rank_ident_parse(const char *env, size_t len, struct rank_ident *id)
{
    memset(id, 0, sizeof(*id));
    id->rank = id->local_rank = id->world_size = id->local_world_size = -1;
    ident_launcher(env, len, id);
    id->group_rank = env_int(env, len, "GROUP_RANK");
    env_str(env, len, "TORCHELASTIC_RUN_ID", id->run_id, sizeof(id->run_id));
    env_str(env, len, "MASTER_ADDR", id->master_addr, sizeof(id->master_addr));
    env_str(env, len, "MASTER_PORT", id->master_port, sizeof(id->master_port));
    env_str(env, len, "CUDA_VISIBLE_DEVICES", id->cuda_visible, sizeof(id->cuda_visible));
    env_str(env, len, "ASCEND_RT_VISIBLE_DEVICES", id->ascend_visible, sizeof(id->ascend_visible));
}

int procscan_ident(int pid, struct rank_ident *id)
{
    char path[64], *buf;
    size_t len;
    int rc;

    snprintf(path, sizeof(path), "/proc/%d/environ", pid);
    rc = file_read_all(path, 4u << 20, &buf, &len);
    if (rc < 0) {
        rank_ident_parse("", 0, id);
        return rc;
    }
    rank_ident_parse(buf, len, id);
    free(buf);
    return 0;
}

/* Parent and innermost namespaced PID from /proc/PID/status. */
static int read_status(int pid, int *ppid, int *inner)
{
    char path[64], *buf, *s;
    size_t len;

    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    if (file_read_all(path, 1 << 16, &buf, &len) < 0)
        return -1;
    *ppid = 0;
    *inner = pid;
    s = strstr(buf, "\nPPid:");
    if (s)
        *ppid = (int)strtol(s + 6, NULL, 10);
    s = strstr(buf, "\nNSpid:");
    if (s) {
        char *p = s + 7, *end;

        for (long v; (v = strtol(p, &end, 10)), end != p; p = end)
            *inner = (int)v;
    }
    free(buf);
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return (x > y) - (x < y);
}

int procscan_list(struct pslist *out)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    int *pids = NULL;
    size_t n = 0, cap = 0;

    memset(out, 0, sizeof(*out));
    if (!d)
        return APP_E_IO;
    while ((de = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 512;
            pids = x_reallocarray(pids, cap, sizeof(int));
        }
        pids[n++] = atoi(de->d_name);
    }
    closedir(d);
    x_qsort(pids, n, sizeof(int), cmp_int);
    out->pid = x_calloc(n, sizeof(int));
    out->ppid = x_calloc(n, sizeof(int));
    out->nsinner = x_calloc(n, sizeof(int));
    for (size_t i = 0; i < n; i++) {
        int pp, inner;

        if (read_status(pids[i], &pp, &inner) < 0)
            continue;
        out->pid[out->n] = pids[i];
        out->ppid[out->n] = pp;
        out->nsinner[out->n++] = inner;
    }
    free(pids);
    return 0;
}

void procscan_list_fini(struct pslist *l)
{
    free(l->pid);
    free(l->ppid);
    free(l->nsinner);
    memset(l, 0, sizeof(*l));
}

long procscan_find(const struct pslist *l, int pid)
{
    size_t lo = 0, hi = l->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (l->pid[mid] == pid)
            return (long)mid;
        if (l->pid[mid] < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

void procscan_descendants(const struct pslist *l, int root, int **out, size_t *n)
{
    size_t start = *n;

    /* Breadth-first over the parent links; each process is visited once because a process has
     * one parent and the list holds each PID once. The bound guards against a corrupt list. */
    *out = x_reallocarray(*out, *n + 1, sizeof(int));
    (*out)[(*n)++] = root;
    for (size_t q = start; q < *n && *n < start + l->n + 1; q++)
        for (size_t i = 0; i < l->n; i++)
            if (l->ppid[i] == (*out)[q] && l->pid[i] != (*out)[q]) {
                *out = x_reallocarray(*out, *n + 1, sizeof(int));
                (*out)[(*n)++] = l->pid[i];
            }
    /* The root itself is the launcher, not one of its descendants. */
    memmove(*out + start, *out + start + 1, (*n - start - 1) * sizeof(int));
    (*n)--;
}

int procscan_from_inner(const struct pslist *l, int inner)
{
    int found = 0;

    for (size_t i = 0; i < l->n; i++)
        if (l->nsinner[i] == inner && l->pid[i] != inner) {
            if (found)
                return 0;
            found = l->pid[i];
        }
    return found;
}

bool procscan_python_name(const char *path)
{
    const char *b = strrchr(path, '/');

    b = b ? b + 1 : path;
    if (strncmp(b, "python", 6) != 0)
        return false;
    b += 6;
    /* python, python3, python3.11, python3.11d, but not python-config or pythonw-tools */
    while (*b && (isdigit((unsigned char)*b) || *b == '.'))
        b++;
    return *b == '\0' || !strcmp(b, "d") || !strcmp(b, "m") || !strcmp(b, "u") ||
           !strcmp(b, " (deleted)");
}

/* Whether the process maps libpython3 or a python executable: the interpreter is a mapped
 * file also when the process's executable is a shim that loaded it (ld.so run as a program,
 * an emulator such as qemu-user). */
static bool maps_python(int pid)
{
    char path[64], *buf;
    size_t len;
    bool found = false;

    snprintf(path, sizeof(path), "/proc/%d/maps", pid);
    if (file_read_all(path, 64u << 20, &buf, &len) < 0)
        return false;
    for (char *line = buf, *end; !found && line < buf + len; line = end + 1) {
        char *slash;

        end = memchr(line, '\n', (size_t)(buf + len - line));
        if (!end)
            end = buf + len;
        *end = '\0';
        slash = strchr(line, '/');
        found = slash && (strstr(slash, "/libpython3") || procscan_python_name(slash));
    }
    free(buf);
    return found;
}

bool procscan_comm_python(int pid)
{
    char path[64], *buf;
    size_t len;
    bool yes;

    snprintf(path, sizeof(path), "/proc/%d/comm", pid);
    if (file_read_all(path, 64, &buf, &len) < 0)
        return false;
    buf[strcspn(buf, "\n")] = '\0';
    yes = procscan_python_name(buf);
    free(buf);
    return yes;
}

bool procscan_is_python(int pid)
{
    char link[64], exe[PATH_MAX];
    ssize_t n;

    snprintf(link, sizeof(link), "/proc/%d/exe", pid);
    n = readlink(link, exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        if (procscan_python_name(exe))
            return true;
    }
    return maps_python(pid);
}

bool procscan_thread_of(int pid, int tid)
{
    char path[64];

    snprintf(path, sizeof(path), "/proc/%d/task/%d", pid, tid);
    return pid > 0 && tid > 0 && access(path, F_OK) == 0;
}

/* The state letter of a /proc stat file. */
static char stat_state(const char *path)
{
    char *buf, *rp, st = 0;
    size_t len;

    if (file_read_all(path, 4096, &buf, &len) < 0)
        return 0;
    rp = strrchr(buf, ')');
    if (rp && rp[1] == ' ')
        st = rp[2];
    free(buf);
    return st;
}

char procscan_state(int pid)
{
    char path[64];

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    return stat_state(path);
}

int procscan_image(int pid, struct proc_image *out)
{
    char path[64], *buf, *p, *end;
    struct stat st;
    size_t len;
    int rc, field;

    memset(out, 0, sizeof(*out));
    snprintf(path, sizeof(path), "/proc/%d/exe", pid);
    if (stat(path, &st) == 0) {
        out->dev = (uint64_t)st.st_dev;
        out->ino = (uint64_t)st.st_ino;
    } else if (errno == ENOENT) {
        /* A process that is exiting has released its address space, and with it the
         * executable link: that is no new image, and reading it as one would drop the
         * reader of a rank that is about to be reported exited. */
        return APP_E_GONE;
    }
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    rc = file_read_all(path, 4096, &buf, &len);
    if (rc < 0)
        return rc == APP_E_NOTFOUND ? APP_E_GONE : rc;
    /* After the command name: the state (field 3), then numbers; starttime is field 22 and
     * startstack field 28 (0 without the right to read it). */
    p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || !p[2]) {
        free(buf);
        return APP_E_PARSE;
    }
    if (p[2] == 'Z' || p[2] == 'X') { /* a zombie keeps its stat but no image */
        free(buf);
        return APP_E_GONE;
    }
    p += 3;
    for (field = 4; field <= 28; field++, p = end) {
        unsigned long long v = strtoull(p, &end, 10);

        if (end == p)
            break;
        if (field == 22)
            out->start_time = v;
        else if (field == 28)
            out->start_stack = v;
    }
    free(buf);
    return field > 22 ? 0 : APP_E_PARSE;
}

bool proc_image_same(const struct proc_image *a, const struct proc_image *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->start_time == b->start_time &&
           a->start_stack == b->start_stack;
}

int procscan_name(int pid, char *out, size_t len)
{
    char link[64], *buf;
    size_t n;
    ssize_t r;

    snprintf(link, sizeof(link), "/proc/%d/exe", pid);
    r = readlink(link, out, len - 1);
    if (r > 0) {
        out[r] = '\0';
        return 0;
    }
    snprintf(link, sizeof(link), "/proc/%d/comm", pid);
    if (file_read_all(link, 256, &buf, &n) < 0) {
        out[0] = '\0';
        return APP_E_GONE;
    }
    snprintf(out, len, "%.*s", (int)strcspn(buf, "\n"), buf);
    free(buf);
    return 0;
}

int procscan_cpu_ticks(int pid, uint64_t *ticks)
{
    char path[64], *buf, *rp;
    size_t len;
    unsigned long long ut = 0, st = 0;
    int rc;

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    rc = file_read_all(path, 4096, &buf, &len);
    if (rc < 0)
        return rc == APP_E_NOTFOUND ? APP_E_GONE : rc;
    rp = strrchr(buf, ')');
    /* After "pid (comm)": state ppid pgrp session tty tpgid flags minflt cminflt majflt
     * cmajflt utime stime -- utime is the 12th field after the parenthesis. */
    rc = rp && sscanf(rp + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) ==
                     2
             ? 0
             : APP_E_PARSE;
    free(buf);
    *ticks = (uint64_t)(ut + st);
    return rc;
}

static int tid_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return (x > y) - (x < y);
}

size_t procscan_threads(int pid, int *tids, size_t max)
{
    char path[64];
    struct dirent *de;
    size_t n = 0;
    DIR *d;

    snprintf(path, sizeof(path), "/proc/%d/task", pid);
    if (pid <= 0 || !(d = opendir(path)))
        return 0;
    while (n < max && (de = readdir(d))) {
        char *end;
        long t = strtol(de->d_name, &end, 10);

        if (end != de->d_name && !*end && t > 0 && t <= INT_MAX)
            tids[n++] = (int)t;
    }
    closedir(d);
    x_qsort(tids, n, sizeof(*tids), tid_cmp);
    return n;
}

int procscan_thread_comm(int pid, int tid, char *out, size_t len)
{
    char path[64], *buf;
    size_t n;
    int rc;

    snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
    if (len)
        out[0] = '\0';
    rc = file_read_all(path, 64, &buf, &n);
    if (rc < 0)
        return rc == APP_E_NOTFOUND ? APP_E_GONE : rc;
    snprintf(out, len, "%.*s", (int)strcspn(buf, "\n"), buf);
    free(buf);
    str_scrub(out);
    return 0;
}

char procscan_thread_state(int pid, int tid)
{
    char path[64];

    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
    return stat_state(path);
}
