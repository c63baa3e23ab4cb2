/* Remote memory reads: the single process_vm_readv wrapper of the project.
 *
 * Owns the mapping of system errors to app_status (ESRCH -> GONE, EPERM -> PERM, EFAULT and
 * short reads -> STALE) and the read counters the benchmarks report. It only ever reads: no
 * process_vm_writev, no ptrace. A struct rmem is used by one thread at a time. Images (for
 * unit tests of layouts no installed interpreter has) are sorted lists of local regions.
 *
 * The kernel pins and walks the target's pages once per remote range, and on a sampler that
 * wakes cold that costs about half a microsecond a range (bench: 30 ranges of 128 bytes on one
 * page cost 2.5 times one range), far more than copying a few hundred extra bytes. So a call's
 * ranges that lie within COALESCE_GAP bytes of each other (thread states, a frame's pointer
 * and its frame, code headers allocated together) are read as one remote range, scattered
 * straight into the callers' buffers (struct cgroup says how); only ranges that overlap go
 * through a scratch buffer. Copying out was as dear as reading: a deep stack's frame chunks
 * are tens of KB. A gap under a page lies in the pages of its two neighbours, so it is mapped
 * whenever they are; any short read falls back to the ranges as given, so what a caller sees
 * (which leading ranges were read) is exactly what an uncoalesced call gives. */
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
    uint8_t *scratch; /* merged ranges whose members overlap */
    size_t scratch_cap;
    struct rmem_work *work; /* merging calls' arrays, from the first merge on */
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
    free(m->scratch);
    free(m->work);
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

#define COALESCE_GAP 2048          /* under a page: see the head comment */
#define COALESCE_MAX (1024 * 1024) /* most bytes one coalesced call copies */

#define SORT_SMALL 64 /* insertion sort up to this many ranges, qsort beyond */

struct rkey {
    uint64_t addr;
    int i;
};

static int rkey_cmp(const void *a, const void *b)
{
    const struct rkey *x = a, *y = b;

    return x->addr < y->addr ? -1 : x->addr > y->addr ? 1 : x->i - y->i;
}

/* Sorts ord[0..n) by the ranges' addresses: insertion sort for the tens of ranges of most calls,
 * qsort for a many-threaded process's hundreds (insertion sort would be quadratic there). The
 * insertion sort starts from the last call's order when it had as many ranges (same_n): a
 * sampler asks for the same ranges in the same order sample after sample, so that order is
 * (nearly) right and the sort a pass. */
static void sort_ranges(const struct rmem_iov *iov, int *ord, struct rkey *keys, int n, bool same_n)
{
    if (n > SORT_SMALL) {
        for (int i = 0; i < n; i++)
            keys[i] = (struct rkey){iov[i].addr, i};
        qsort(keys, (size_t)n, sizeof(keys[0]), rkey_cmp);
        for (int i = 0; i < n; i++)
            ord[i] = keys[i].i;
        return;
    }
    for (int i = 0; !same_n && i < n; i++)
        ord[i] = i;
    for (int i = 1; i < n; i++) {
        int v = ord[i], k = i;

        while (k > 0 && iov[ord[k - 1]].addr > iov[v].addr) {
            ord[k] = ord[k - 1];
            k--;
        }
        ord[k] = v;
    }
}

/* The merged ranges of one call. A range merged with no other is read straight into its own
 * buffer, and so are the members of a merge that do not overlap: the kernel fills the local
 * buffers in order from the merged range, so the members' buffers, with a junk buffer for the
 * gaps between them, take its bytes where they belong. Only overlapping members (the same
 * range asked twice, a range inside another) go through scratch and are copied out. */
struct cgroup {
    uint64_t addr;
    size_t len;
    int first, members; /* members: ord[first .. first + members) */
    bool overlap;
    size_t off; /* in scratch, when overlap */
};

/* Groups ranges within COALESCE_GAP of each other, in address order (ord); rel[i] is range
 * i's offset in its group, grp[i] its group. Returns the group count, or 0 when the bytes
 * would pass COALESCE_MAX. */
static int group_ranges(const struct rmem_iov *iov, int n, const int *ord, struct cgroup *g,
                        int *grp, size_t *rel)
{
    size_t total = 0;
    int ng = 0;

    for (int k = 0; k < n; k++) {
        const struct rmem_iov *r = &iov[ord[k]];
        struct cgroup *cur = ng ? &g[ng - 1] : NULL;

        if (cur && r->addr <= cur->addr + cur->len + COALESCE_GAP) {
            uint64_t end = r->addr + r->len;

            cur->overlap |= r->addr < cur->addr + cur->len;
            if (end > cur->addr + cur->len) {
                total += (size_t)(end - (cur->addr + cur->len));
                cur->len = (size_t)(end - cur->addr);
            }
            cur->members++;
        } else {
            g[ng++] = (struct cgroup){r->addr, r->len, k, 1, false, 0};
            total += r->len;
        }
        grp[ord[k]] = ng - 1;
        rel[ord[k]] = (size_t)(r->addr - g[ng - 1].addr);
        if (total > COALESCE_MAX)
            return 0;
    }
    return ng;
}

#define LOCAL_MAX 1024 /* the kernel's limit on iovec entries (UIO_MAXIOV) */

/* A merging call's working arrays: in the rmem (one thread uses it at a time), allocated at its
 * first merge, rather than thread-local (every thread of the program would carry them). */
struct rmem_work {
    struct rkey keys[RMEM_IOV_MAX];
    int ord[RMEM_IOV_MAX], grp[RMEM_IOV_MAX];
    size_t rel[RMEM_IOV_MAX];
    struct cgroup g[RMEM_IOV_MAX];
    struct iovec lv[LOCAL_MAX], rv[RMEM_IOV_MAX];
    uint8_t junk[COALESCE_GAP]; /* the gaps between merged members */
    int last_n;                 /* ranges of the last merging call: ord holds their order */
};

/* The local buffers of group i from lv[*nl] on: its members' buffers and junk for the gaps, or
 * its scratch. false when they would pass LOCAL_MAX. */
static bool group_local(struct rmem *m, const struct rmem_iov *iov, struct rmem_work *w,
                        const struct cgroup *g, int *nl)
{
    uint64_t at = g->addr;

    if (g->overlap) {
        if (*nl >= LOCAL_MAX)
            return false;
        w->lv[(*nl)++] = (struct iovec){m->scratch + g->off, g->len};
        return true;
    }
    for (int k = g->first; k < g->first + g->members; k++) {
        const struct rmem_iov *r = &iov[w->ord[k]];

        if (*nl + 2 > LOCAL_MAX)
            return false;
        if (r->addr > at) /* at most COALESCE_GAP bytes */
            w->lv[(*nl)++] = (struct iovec){w->junk, (size_t)(r->addr - at)};
        w->lv[(*nl)++] = (struct iovec){r->buf, r->len};
        at = r->addr + r->len;
    }
    return true;
}

/* One process_vm_readv of merged ranges; bytes read, or -errno (-ENOSYS: make the plain call,
 * which knows the fallback). */
static long merged_call(struct rmem *m, const struct iovec *lv, int nl, const struct iovec *rv,
                        int nr)
{
    ssize_t r;

    m->calls++;
    r = process_vm_readv(m->pid, lv, (unsigned long)nl, rv, (unsigned long)nr, 0);
    return r < 0 ? -errno : r;
}

/* Reads iov[0..n) as merged ranges when that saves ranges. Returns 1 when every range was read
 * (and copied out), 0 when the caller should make the plain call, or a negative errno. */
static long coalesced_readv(struct rmem *m, const struct rmem_iov *iov, int n)
{
    struct rmem_work *w;
    size_t total = 0, scratch = 0;
    int ng, nl = 0;
    long got;

    if (m->pid == 0 || n < 2 || n > RMEM_IOV_MAX)
        return 0;
    if (!m->work) {
        m->work = x_malloc(sizeof(*m->work));
        m->work->last_n = 0;
    }
    w = m->work;
    sort_ranges(iov, w->ord, w->keys, n, w->last_n == n);
    w->last_n = n;
    ng = group_ranges(iov, n, w->ord, w->g, w->grp, w->rel);
    if (ng == 0 || ng == n)
        return 0;
    for (int i = 0; i < ng; i++) {
        if (w->g[i].overlap) {
            w->g[i].off = scratch;
            scratch += w->g[i].len;
        }
        total += w->g[i].len;
    }
    if (m->scratch_cap < scratch) {
        free(m->scratch);
        m->scratch = x_malloc(scratch);
        m->scratch_cap = scratch;
    }
    for (int i = 0; i < ng; i++) {
        w->rv[i] = (struct iovec){(void *)(uintptr_t)w->g[i].addr, w->g[i].len};
        if (!group_local(m, iov, w, &w->g[i], &nl))
            return 0;
    }
    got = merged_call(m, w->lv, nl, w->rv, ng);
    if (got < 0 || (size_t)got != total)
        return got < 0 && got != -EFAULT && got != -ENOSYS ? got : 0;
    for (int i = 0; i < n; i++)
        if (iov[i].len && w->g[w->grp[i]].overlap)
            memcpy(iov[i].buf, m->scratch + w->g[w->grp[i]].off + w->rel[i], iov[i].len);
    return 1;
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
    got = coalesced_readv(m, iov, n);
    if (got == 1) {
        m->bytes += want;
        if (ndone)
            *ndone = n;
        return 0;
    }
    if (got == 0)
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
