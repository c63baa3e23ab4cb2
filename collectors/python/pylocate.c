/* Attaching to a process: find the interpreter binary in its mappings, _PyRuntime in that
 * binary, and the Python version, then hand over to pyproc_open_mem.
 *
 * Files are opened through /proc/PID/exe, or where procmaps_file_path finds the mapped file
 * itself (the target's root, ours for a chroot, map_files for deleted binaries). When the
 * executable is a shim (ld.so run as a program, an emulator), the interpreter is the mapped
 * object that holds _PyRuntime. Every failure becomes one actionable line in the caller's
 * app_err. Runs on the attaching thread. */
#include "pyproc_priv.h"

#include "ranktop/base/bytes.h"
#include "ranktop/proc/elfsym.h"
#include "ranktop/proc/procmaps.h"
#include "ranktop/proc/procscan.h"
#include "ranktop/base/util.h"

#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pycand {
    const char *path; /* as the maps file prints it */
    uint64_t base;    /* lowest mapping start of that file with file offset 0 */
    struct elf_info elf;
    bool have_elf;
};

static bool is_libpython(const char *path)
{
    const char *base = strrchr(path, '/');

    base = base ? base + 1 : path;
    return strncmp(base, "libpython", 9) == 0 && strstr(base, ".so") != NULL;
}

static uint64_t map_base(const struct procmaps *maps, const char *path)
{
    uint64_t base = 0;

    for (size_t i = 0; i < maps->n; i++)
        if (!strcmp(maps->v[i].path, path) && maps->v[i].offset == 0 &&
            (!base || maps->v[i].start < base))
            base = maps->v[i].start;
    return base;
}

/* Opens the mapped file the way that works across mount namespaces, chroots and deleted
 * files: the executable through /proc/PID/exe, anything else where procmaps_file_path finds
 * the very file mapped. */
static int inspect_mapped(int pid, const struct procmaps *maps, const char *path, bool is_exe,
                          struct elf_info *elf, struct app_err *err)
{
    char buf[PATH_MAX + 64] = "";
    int rc = APP_E_NOTFOUND;

    if (is_exe) {
        snprintf(buf, sizeof(buf), "/proc/%d/exe", pid);
        rc = 0;
    }
    for (size_t i = 0; rc < 0 && i < maps->n; i++)
        if (!strcmp(maps->v[i].path, path) && maps->v[i].offset == 0)
            rc = procmaps_file_path(pid, &maps->v[i], buf, sizeof(buf));
    if (rc == APP_E_PERM ||
        (rc == 0 && access(buf, R_OK) < 0 && (errno == EACCES || errno == EPERM)))
        return app_err_set(err, APP_E_PERM, "cannot open %s: permission denied",
                           buf[0] ? buf : path);
    if (rc < 0)
        return app_err_set(err, rc, "cannot open %s (process %d): not found", path, pid);
    return elf_inspect_file(NULL, buf, elf, err);
}

static uint32_t version_from_text(const char *s)
{
    unsigned maj, min, mic = 0;

    if (sscanf(s, "%u.%u.%u", &maj, &min, &mic) < 2 || maj > 255 || min > 255 || mic > 255)
        return 0;
    return maj << 24 | min << 16 | mic << 8 | 0xF0;
}

static uint32_t version_from_path(const char *path)
{
    const char *s = strrchr(path, '/');
    unsigned min;

    s = s ? s + 1 : path;
    if (sscanf(s, "libpython3.%u", &min) == 1 || sscanf(s, "python3.%u", &min) == 1)
        return 3u << 24 | (min & 0xFF) << 16 | 0xF0;
    /* Python 2 has no _PyRuntime: known only to say that it is not supported. */
    if (sscanf(s, "libpython2.%u", &min) == 1 || sscanf(s, "python2.%u", &min) == 1)
        return 2u << 24 | (min & 0xFF) << 16 | 0xF0;
    return 0;
}

/* Finds "3.X.Y (" -- the start of sys.version, which Py_GetVersion() formats into a static
 * buffer at start-up -- in the remote .bss. Used for 3.8-3.10, which export no Py_Version. */
static uint32_t version_from_bss(struct rmem *m, const struct elf_info *elf, uint64_t bias)
{
    size_t len = elf->bss_size < (4u << 20) ? (size_t)elf->bss_size : (4u << 20);
    uint8_t *buf;
    uint32_t v = 0;
    long got;

    if (!elf->bss_addr || len < 16)
        return 0;
    buf = x_malloc(len);
    got = rmem_read_some(m, bias + elf->bss_addr, buf, len);
    for (long i = 0; i + 8 < got && !v; i++) {
        unsigned maj, min, mic;
        char tail[3] = "";
        char s[24];

        if (buf[i] != '3' || buf[i + 1] != '.' || (i > 0 && buf[i - 1] != 0))
            continue;
        memcpy(s, buf + i, (size_t)(got - i) < sizeof(s) - 1 ? (size_t)(got - i) : sizeof(s) - 1);
        s[sizeof(s) - 1] = '\0';
        if (sscanf(s, "%u.%u.%u%2[ (]", &maj, &min, &mic, tail) == 4 && !strcmp(tail, " (") &&
            min < 100 && mic < 100)
            v = maj << 24 | min << 16 | mic << 8 | 0xF0;
    }
    free(buf);
    return v;
}

/* Reads the version from the cookie-prefixed debug offsets (3.13+), Py_Version (3.11+), the
 * PY_VERSION literal in .rodata, or the file name, in that order. */
uint32_t pylocate_version(struct rmem *m, const struct elf_info *elf, const char *path,
                          uint64_t runtime, uint64_t bias)
{
    uint8_t head[16];
    uint32_t v = 0;

    if (runtime && rmem_read(m, runtime, head, sizeof(head)) == 0 && !memcmp(head, "xdebugpy", 8)) {
        v = bytes_load_u32(head + 8);
        if (v >> 24 == 3)
            return v;
    }
    if (elf->py_version && rmem_read(m, bias + elf->py_version, &v, sizeof(v)) == 0 && v >> 24 == 3)
        return v;
    if (elf->version[0] && (v = version_from_text(elf->version)) != 0)
        return v;
    if (runtime && (v = version_from_bss(m, elf, bias)) != 0)
        return v;
    return version_from_path(path);
}

/* The owner of pid from /proc/PID/status, or -1. */
static long target_uid(int pid)
{
    char path[64], *buf, *u;
    size_t len;
    long uid = -1;

    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    if (file_read_all(path, 1 << 16, &buf, &len) < 0)
        return -1;
    u = strstr(buf, "\nUid:");
    if (u)
        uid = strtol(u + 5, NULL, 10);
    free(buf);
    return uid;
}

/* Whether CAP_SYS_PTRACE (bit 19) is in this process's effective set. */
static bool has_cap_sys_ptrace(void)
{
    char *buf = NULL, *s;
    size_t len;
    bool yes = false;

    if (file_read_all("/proc/self/status", 1 << 16, &buf, &len) < 0)
        return false;
    s = strstr(buf, "\nCapEff:");
    if (s)
        yes = (strtoull(s + 8, NULL, 16) >> 19) & 1;
    free(buf);
    return yes;
}

static int perm_message(int pid, struct app_err *err)
{
    char *scope = NULL, who[96] = "";
    char val[48] = "kernel.yama.ptrace_scope is absent";
    long uid = target_uid(pid);
    size_t len;

    if (file_read_all("/proc/sys/kernel/yama/ptrace_scope", 64, &scope, &len) == 0) {
        snprintf(val, sizeof(val), "kernel.yama.ptrace_scope is %.*s", (int)strcspn(scope, "\n"),
                 scope);
        free(scope);
    }
    if (uid >= 0 && (uid_t)uid != geteuid())
        snprintf(who, sizeof(who), "it runs as uid %ld, ranktop as uid %ld; ", uid,
                 (long)geteuid());
    /* Advice that fits: privilege ranktop already has cannot be the answer. */
    if (has_cap_sys_ptrace())
        return app_err_set(err, APP_E_PERM,
                           "cannot read memory of process %d: permission denied although ranktop "
                           "has CAP_SYS_PTRACE (%s%s): the process may be in another user "
                           "namespace or protected by a security module (AppArmor, SELinux), "
                           "or ptrace_scope 3 forbids every attach",
                           pid, who, val);
    if (geteuid() == 0)
        return app_err_set(err, APP_E_PERM,
                           "cannot read memory of process %d: permission denied (%s%s): ranktop "
                           "runs as root but without CAP_SYS_PTRACE, as in a container; grant "
                           "it (docker/podman: --cap-add SYS_PTRACE)",
                           pid, who, val);
    return app_err_set(err, APP_E_PERM,
                       "cannot read memory of process %d: permission denied (%s%s). "
                       "Run ranktop as the same user with kernel.yama.ptrace_scope=0, or as "
                       "root / with CAP_SYS_PTRACE (containers: --cap-add SYS_PTRACE)",
                       pid, who, val);
}

static int locate_in(int pid, const struct procmaps *maps, struct pycand *c, bool is_exe,
                     struct app_err *err)
{
    int rc = inspect_mapped(pid, maps, c->path, is_exe, &c->elf, err);

    if (rc == APP_E_PERM)
        return perm_message(pid, err);
    if (rc < 0)
        return rc;
    c->have_elf = true;
    c->base = map_base(maps, c->path);
    return 0;
}

/* An empty maps file: a zombie, a kernel thread, or a process in the middle of exec. */
static int no_mappings(int pid, struct app_err *err)
{
    char path[64], *buf, *rp;
    size_t len;
    char state = '?';

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    if (file_read_all(path, 4096, &buf, &len) < 0)
        return app_err_set(err, APP_E_GONE, "process %d exited", pid);
    rp = strrchr(buf, ')');
    if (rp && rp[1] == ' ')
        state = rp[2];
    free(buf);
    if (state == 'Z' || state == 'X')
        return app_err_set(err, APP_E_GONE, "process %d exited (zombie)", pid);
    snprintf(path, sizeof(path), "/proc/%d/exe", pid);
    if (access(path, F_OK) < 0 && errno == ENOENT)
        return app_err_set(err, APP_E_NOTPY, "process %d is a kernel thread", pid);
    return app_err_set(err, APP_E_STARTING, "process %d is starting (exec in progress)", pid);
}

/* ld.so maps a library whole from file offset 0 before it maps the data segment in place, so
 * _PyRuntime is only meaningful once its page is a writable mapping. */
static bool runtime_ready(const struct procmaps *maps, uint64_t runtime)
{
    for (size_t i = 0; i < maps->n; i++)
        if (runtime >= maps->v[i].start && runtime < maps->v[i].end)
            return maps->v[i].perms[0] == 'r' && maps->v[i].perms[1] == 'w';
    return false;
}

static int attach_found(int pid, const struct procmaps *maps, struct pycand *c,
                        const struct pyproc_opts *opts, struct pyproc **out, struct app_err *err)
{
    uint64_t bias = c->elf.type == ET_DYN ? c->base - c->elf.load_vaddr : 0;
    uint64_t rtaddr = c->elf.pyruntime ? c->elf.pyruntime : c->elf.pyruntime_sec;
    uint64_t runtime = rtaddr ? bias + rtaddr : 0;
    struct rmem *m;
    uint8_t probe[8];
    uint32_t version;
    int rc;

    if (runtime && !runtime_ready(maps, runtime))
        return app_err_set(err, APP_E_STARTING,
                           "process %d: interpreter starting up (its data is not mapped yet)", pid);
    m = rmem_new_pid(pid);
    rc = runtime ? rmem_read(m, runtime, probe, sizeof(probe)) : 0;
    if (rc == APP_E_PERM || rc == APP_E_GONE) {
        rmem_free(m);
        return rc == APP_E_PERM ? perm_message(pid, err)
                                : app_err_set(err, rc, "process %d exited", pid);
    }
    version = pylocate_version(m, &c->elf, c->path, runtime, bias);
    if (!runtime || !version) {
        char vt[24];

        rmem_free(m);
        snprintf(vt, sizeof(vt), "%u.%u", version >> 24, (version >> 16) & 0xFF);
        if (version && ((version >> 24) < 3 || ((version >> 16) & 0xFF) < 8))
            return app_err_set(err, APP_E_VERSION, "process %d runs Python %s; supported %s", pid,
                               c->elf.version[0] ? c->elf.version : vt, pyproc_supported_range());
        return app_err_set(err, APP_E_NOTPY,
                           "process %d: found %s but no _PyRuntime in it (unsupported or "
                           "stripped build)",
                           pid, c->path);
    }
    return pyproc_open_mem(m, pid, runtime, c->elf.pycode_type ? bias + c->elf.pycode_type : 0,
                           version, opts, out, err);
}

/* The interpreter when the executable is not it: ld.so run as a program
 * (/lib64/ld-linux-x86-64.so.2 /usr/bin/python3.11 x.py), an emulator (qemu-user) or another
 * shim maps the python binary itself. The mapped objects other than the executable are tried,
 * those named python first, then those with an executable mapping and a name that is not a
 * library's (a renamed interpreter), at most SHIM_TRIES of them; the first whose ELF holds
 * _PyRuntime is taken. 0 with c filled in, else APP_E_NOTFOUND (or APP_E_PERM). */
#define SHIM_TRIES 16

static bool shim_candidate(const struct procmaps *maps, size_t i, const char *exe, bool named)
{
    const struct procmap *m = &maps->v[i];
    const char *b = strrchr(m->path, '/');
    bool x = false;

    if (m->offset != 0 || m->path[0] != '/' || !strcmp(m->path, exe) || is_libpython(m->path))
        return false;
    for (size_t k = 0; k < i; k++) /* each object once: its first offset-0 mapping */
        if (maps->v[k].offset == 0 && !strcmp(maps->v[k].path, m->path))
            return false;
    b = b ? b + 1 : m->path;
    if (named)
        return procscan_python_name(m->path);
    for (size_t k = 0; k < maps->n && !x; k++)
        x = maps->v[k].perms[2] == 'x' && !strcmp(maps->v[k].path, m->path);
    return x && !procscan_python_name(m->path) && strncmp(b, "lib", 3) && strncmp(b, "ld-", 3) &&
           !strstr(b, ".so");
}

static int locate_shim(int pid, const struct procmaps *maps, const char *exe, struct pycand *c,
                       struct app_err *err)
{
    int tries = 0, rc = APP_E_NOTFOUND;

    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < maps->n && tries < SHIM_TRIES; i++) {
            struct app_err e2 = {0};

            if (!shim_candidate(maps, i, exe, pass == 0))
                continue;
            tries++;
            *c = (struct pycand){.path = maps->v[i].path};
            rc = locate_in(pid, maps, c, false, &e2);
            if (rc == APP_E_PERM) {
                *err = e2;
                return rc;
            }
            if (rc == 0 && (c->elf.pyruntime || c->elf.pyruntime_sec))
                return 0;
            rc = APP_E_NOTFOUND;
        }
    return rc;
}

/* An executable of another architecture can be an emulator (qemu-user) running an
 * interpreter of ours: /proc/PID/exe is the emulator, the guest's python is mapped at its
 * guest addresses (which are host addresses: qemu-user's guest_base is 0 for a 64-bit guest
 * on a 64-bit host). The executable's error stands when no mapped object of ours holds
 * _PyRuntime. */
static bool emulated(int pid, const struct procmaps *maps, const char *exe, struct pycand *c)
{
    struct app_err e2 = {0};

    return locate_shim(pid, maps, exe, c, &e2) == 0;
}

int pyproc_open(int pid, const struct pyproc_opts *opts, struct pyproc **out, struct app_err *err)
{
    struct procmaps maps;
    struct pycand lib = {0}, exe = {0}, shim = {0};
    char exepath[PATH_MAX + 1], link[64];
    ssize_t n;
    int rc;

    *out = NULL;
    if (pid <= 0)
        return app_err_set(err, APP_E_USAGE, "invalid PID %d", pid);
    rc = procmaps_read(pid, &maps, err);
    if (rc == APP_E_PERM)
        return perm_message(pid, err);
    if (rc < 0)
        return rc == APP_E_NOTFOUND ? app_err_set(err, rc, "no such process %d", pid) : rc;
    if (maps.n == 0) {
        procmaps_fini(&maps);
        return no_mappings(pid, err);
    }
    snprintf(link, sizeof(link), "/proc/%d/exe", pid);
    n = readlink(link, exepath, sizeof(exepath) - 1);
    exepath[n > 0 ? n : 0] = '\0';
    for (size_t i = 0; i < maps.n && !lib.path; i++)
        if (is_libpython(maps.v[i].path))
            lib.path = maps.v[i].path;
    rc = APP_E_NOTPY;
    if (lib.path)
        rc = locate_in(pid, &maps, &lib, false, err);
    if (rc == 0 && (lib.elf.pyruntime || lib.elf.pyruntime_sec))
        rc = attach_found(pid, &maps, &lib, opts, out, err);
    else if (rc != APP_E_PERM) {
        exe.path = exepath;
        for (size_t i = 0; i < maps.n; i++)
            if (!strncmp(maps.v[i].path, exepath, strlen(exepath)) && maps.v[i].offset == 0)
                exe.path = maps.v[i].path;
        rc = locate_in(pid, &maps, &exe, true, err);
        if (rc == 0 && (exe.elf.pyruntime || exe.elf.pyruntime_sec || lib.have_elf ||
                        version_from_path(exe.path)))
            rc = attach_found(pid, &maps, lib.have_elf ? &lib : &exe, opts, out, err);
        else if (rc == 0 && (rc = locate_shim(pid, &maps, exe.path, &shim, err)) == 0)
            rc = attach_found(pid, &maps, &shim, opts, out, err);
        else if (rc == APP_E_ARCH && emulated(pid, &maps, exe.path, &shim))
            rc = attach_found(pid, &maps, &shim, opts, out, err);
        else if (rc == APP_E_NOTFOUND && exe.have_elf)
            rc = app_err_set(err, APP_E_NOTPY,
                             "process %d is not a Python process (%s has no _PyRuntime, no "
                             "libpython is mapped, nor any other object that holds one)",
                             pid, exepath[0] ? exepath : "its executable");
    }
    procmaps_fini(&maps);
    return rc;
}
