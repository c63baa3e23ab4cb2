/* Remote memory reads: the single process_vm_readv wrapper of the project.
 *
 * Owns the mapping of system errors to app_status (ESRCH -> GONE, EPERM -> PERM, EFAULT and
 * short reads -> STALE) and the read counters the benchmarks report. It only ever reads: no
 * process_vm_writev, no ptrace. A struct rmem is used by one thread at a time. Images (for
 * unit tests of layouts no installed interpreter has) are sorted lists of local regions. */
#include "ranktop/rmem.h"

#include "ranktop/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

struct rmem_region {
    uint64_t addr;
    size_t len;
    uint8_t *data;
};

struct rmem {
    int pid;    /* 0 for an image */
    int mem_fd; /* /proc/PID/mem after process_vm_readv said ENOSYS, else -1 */
    uint64_t calls, bytes;
    struct rmem_region *regions;
    size_t nregions;
};

struct rmem *rmem_new_pid(int pid)
{
    struct rmem *m = x_calloc(1, sizeof(*m));

    m->pid = pid;
    m->mem_fd = -1;
    return m;
}

struct rmem *rmem_new_image(void)
{
    struct rmem *m = x_calloc(1, sizeof(*m));

    m->mem_fd = -1;
    return m;
}

void rmem_image_add(struct rmem *m, uint64_t addr, const void *data, size_t len)
{
    struct rmem_region *r;

    m->regions = x_reallocarray(m->regions, m->nregions + 1, sizeof(*m->regions));
    r = &m->regions[m->nregions++];
    r->addr = addr;
    r->len = len;
    r->data = x_malloc(len);
    memcpy(r->data, data, len);
}

int rmem_image_write(struct rmem *m, uint64_t addr, const void *data, size_t len)
{
    for (size_t i = 0; i < m->nregions; i++) {
        struct rmem_region *r = &m->regions[i];

        if (addr >= r->addr && addr - r->addr <= r->len && len <= r->len - (addr - r->addr)) {
            memcpy(r->data + (addr - r->addr), data, len);
            return 0;
        }
    }
    return APP_E_NOTFOUND;
}

void rmem_free(struct rmem *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nregions; i++)
        free(m->regions[i].data);
    free(m->regions);
    if (m->mem_fd >= 0)
        close(m->mem_fd);
    free(m);
}

static int errno_status(int e)
{
    switch (e) {
    case ESRCH:
        return APP_E_GONE;
    case EPERM:
    case EACCES:
        return APP_E_PERM;
    case EFAULT:
    case EIO:
        return APP_E_STALE;
    default:
        return APP_E_IO;
    }
}

/* Copies as much of [addr, addr+len) as the image holds contiguously from addr. */
static size_t image_read(const struct rmem *m, uint64_t addr, void *buf, size_t len)
{
    for (size_t i = 0; i < m->nregions; i++) {
        const struct rmem_region *r = &m->regions[i];

        if (addr >= r->addr && addr - r->addr < r->len) {
            size_t off = (size_t)(addr - r->addr);
            size_t n = r->len - off < len ? r->len - off : len;

            memcpy(buf, r->data + off, n);
            return n;
        }
    }
    return 0;
}

static ssize_t mem_fd_read(struct rmem *m, uint64_t addr, void *buf, size_t len)
{
    if (m->mem_fd < 0) {
        char path[64];

        snprintf(path, sizeof(path), "/proc/%d/mem", m->pid);
        m->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (m->mem_fd < 0)
            return -1;
    }
    return pread(m->mem_fd, buf, len, (off_t)addr);
}

/* One system call for up to RMEM_IOV_MAX ranges; returns bytes read or -errno. */
static long raw_readv(struct rmem *m, const struct rmem_iov *iov, int n)
{
    struct iovec local[RMEM_IOV_MAX], remote[RMEM_IOV_MAX];
    ssize_t r;

    m->calls++;
    if (m->pid == 0) {
        long total = 0;

        for (int i = 0; i < n; i++) {
            size_t got = image_read(m, iov[i].addr, iov[i].buf, iov[i].len);

            total += (long)got;
            if (got < iov[i].len)
                return total ? total : -EFAULT;
        }
        return total;
    }
    if (m->mem_fd >= 0 && n == 1) {
        r = mem_fd_read(m, iov[0].addr, iov[0].buf, iov[0].len);
        return r < 0 ? -errno : r;
    }
    for (int i = 0; i < n; i++) {
        local[i].iov_base = iov[i].buf;
        local[i].iov_len = iov[i].len;
        remote[i].iov_base = (void *)(uintptr_t)iov[i].addr;
        remote[i].iov_len = iov[i].len;
    }
    r = process_vm_readv(m->pid, local, (unsigned long)n, remote, (unsigned long)n, 0);
    if (r < 0 && errno == ENOSYS && n == 1) {
        r = mem_fd_read(m, iov[0].addr, iov[0].buf, iov[0].len);
    } else if (r < 0 && errno == ENOSYS) {
        long total = 0;

        for (int i = 0; i < n; i++) {
            long one = raw_readv(m, &iov[i], 1);

            if (one < 0)
                return total ? total : one;
            total += one;
            if ((size_t)one < iov[i].len)
                return total;
        }
        return total;
    }
    return r < 0 ? -errno : r;
}

int rmem_readv(struct rmem *m, const struct rmem_iov *iov, int n, int *ndone)
{
    long got;
    size_t want = 0;
    int done = 0;

    if (ndone)
        *ndone = 0;
    if (n <= 0 || n > RMEM_IOV_MAX)
        return n == 0 ? 0 : APP_E_LIMIT;
    for (int i = 0; i < n; i++) {
        if (iov[i].addr == 0 || iov[i].addr + iov[i].len < iov[i].addr)
            return APP_E_STALE;
        want += iov[i].len;
    }
    got = raw_readv(m, iov, n);
    if (got < 0)
        return errno_status((int)-got);
    m->bytes += (uint64_t)got;
    for (size_t acc = 0; done < n && acc + iov[done].len <= (size_t)got; done++)
        acc += iov[done].len;
    if (ndone)
        *ndone = done;
    return (size_t)got == want ? 0 : APP_E_STALE;
}

int rmem_read(struct rmem *m, uint64_t addr, void *buf, size_t len)
{
    struct rmem_iov iov = {addr, buf, len};

    return rmem_readv(m, &iov, 1, NULL);
}

long rmem_read_some(struct rmem *m, uint64_t addr, void *buf, size_t len)
{
    struct rmem_iov iov = {addr, buf, len};
    long got;

    if (addr == 0)
        return APP_E_STALE;
    got = raw_readv(m, &iov, 1);
    if (got < 0)
        return errno_status((int)-got);
    m->bytes += (uint64_t)got;
    return got;
}

uint64_t rmem_calls(const struct rmem *m)
{
    return m->calls;
}

uint64_t rmem_bytes(const struct rmem *m)
{
    return m->bytes;
}
