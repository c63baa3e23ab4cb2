/* Remote memory reads: the one place the project reads another process's memory.
 *
 * Owns the mapping of system errors to app_status (ESRCH -> GONE, EPERM -> PERM, EFAULT and
 * short reads -> STALE) and the read counters the benchmarks report. It only ever reads: no
 * process_vm_writev, no ptrace. A struct rmem is used by one thread at a time. Images are
 * lists of regions: local copies (unit tests of layouts no installed interpreter has), or
 * ranges of files read with pread (a core file's segments and the files it mapped,
 * corefile.c); a read runs on across adjacent regions.
 *
 * Two readers, the same bounds and the same answers: process_vm_readv, and pread on
 * /proc/PID/mem where that call is unavailable to ranktop while the file is readable: an
 * emulator answers ENOSYS (qemu-user), a seccomp filter EPERM (some container runtimes'
 * default profiles). Each struct rmem decides once and keeps its reader: at creation when a
 * read of ranktop's own memory (probed once per process) already failed, else at its first
 * answer from the target: a read, or ENOSYS, or EPERM/EACCES while /proc/PID/mem opens (the
 * file's open makes the kernel's ptrace access check, so a real refusal fails there too and
 * stays a permission error). The file is bound to the address space it was opened on: when it
 * reads nothing the process exited or exec'd, and it is opened once more to tell which.
 *
 * The kernel pins and walks the target's pages once per remote range, and on a sampler that
 * wakes cold that costs about half a microsecond a range (bench: 30 ranges of 128 bytes on one
 * page cost 2.5 times one range), far more than copying a few hundred extra bytes. So a call's
 * ranges that lie within the gap (COALESCE_GAP, at most half the kernel's page) of each other
 * (thread states, a frame's pointer and its frame, code headers allocated together) are read
 * as one remote range, scattered straight into the callers' buffers (struct cgroup says how);
 * only ranges that overlap go through a scratch buffer. Copying out was as dear as reading: a
 * deep stack's frame chunks are tens of KB. A gap under a page lies in the pages of its two
 * neighbours, so it is mapped whenever they are; any short read falls back to the ranges as
 * given, so what a caller sees (which leading ranges were read) is exactly what an uncoalesced
 * call gives. Through /proc/PID/mem a merged range is one preadv. */
#include "ranktop/proc/rmem.h"

#include "ranktop/base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

struct rmem_region {
    uint64_t addr;
    size_t len;
    uint8_t *data; /* owned copy; NULL for a file region */
    int fd;        /* a file region: borrowed descriptor read with pread at off; else -1 */
    uint64_t off;
};

enum rmem_way { WAY_UNDECIDED, WAY_VM, WAY_MEM };

struct rmem {
    int pid;           /* 0 for an image */
    enum rmem_way way; /* decided once, then kept */
    const char *why;   /* why WAY_MEM: one of the WHY_ texts */
    int mem_fd;        /* /proc/PID/mem once WAY_MEM reads, else -1 */
    size_t gap;        /* ranges this close are merged: under a page */
    uint64_t calls, bytes;
    struct rmem_region *regions;
    size_t nregions;
    uint8_t *scratch; /* merged ranges whose members overlap */
    size_t scratch_cap;
    struct rmem_work *work; /* merging calls' arrays, from the first merge on */
};

#define COALESCE_GAP 2048          /* the most: under the smallest page (see the head comment) */
#define COALESCE_MAX (1024 * 1024) /* most bytes one coalesced call copies */

static const char WHY_ENOSYS[] = "process_vm_readv: ENOSYS";
static const char WHY_SECCOMP[] = "process_vm_readv: EPERM from a seccomp filter";
static const char WHY_EPERM[] = "process_vm_readv: EPERM";
static const char WHY_EPERM_SELF[] = "process_vm_readv: EPERM on ranktop's own memory";

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static const char *probe_why; /* NULL: process_vm_readv reads ranktop's own memory */

/* Whether ranktop runs under a seccomp filter ("Seccomp: 2" in /proc/self/status). */
static bool seccomp_filtered(void)
{
    char *buf;
    size_t len;
    bool on = false;

    if (file_read_all("/proc/self/status", 64 * 1024, &buf, &len) == 0) {
        const char *at = strstr(buf, "\nSeccomp:");

        on = at && strtol(at + 9, NULL, 10) == 2;
        free(buf);
    }
    return on;
}

/* Reads a word of ranktop's own memory with process_vm_readv: no permission check can refuse
 * that, so a failure is the call itself being unavailable (ENOSYS) or filtered (EPERM). */
static void probe_self(void)
{
    static volatile uint64_t word = 1;
    uint64_t got = 0;
    struct iovec l = {&got, sizeof(got)}, r = {(void *)(uintptr_t)&word, sizeof(word)};

    if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)sizeof(got))
        return;
    if (errno == ENOSYS)
        probe_why = WHY_ENOSYS;
    else if (errno == EPERM || errno == EACCES)
        probe_why = seccomp_filtered() ? WHY_SECCOMP : WHY_EPERM_SELF;
}

struct rmem *rmem_new_pid(int pid)
{
    struct rmem *m = x_calloc(1, sizeof(*m));
    size_t half = sys_page_size() / 2;

    pthread_once(&probe_once, probe_self);
    m->pid = pid;
    m->mem_fd = -1;
    m->way = probe_why ? WAY_MEM : WAY_UNDECIDED;
    m->why = probe_why;
    m->gap = half < COALESCE_GAP ? half : COALESCE_GAP;
    return m;
}

const char *rmem_reader(const struct rmem *m, const char **why)
{
    if (why)
        *why = m->way == WAY_MEM ? m->why : NULL;
    return m->way == WAY_MEM ? RMEM_READER_MEM : m->way == WAY_VM ? RMEM_READER_VM : NULL;
}

const char *rmem_reader_probe(const char **why)
{
    pthread_once(&probe_once, probe_self);
    if (why)
        *why = probe_why;
    return probe_why ? RMEM_READER_MEM : RMEM_READER_VM;
}

struct rmem *rmem_new_image(void)
{
    struct rmem *m = x_calloc(1, sizeof(*m));

    m->mem_fd = -1;
    m->gap = COALESCE_GAP;
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
    r->fd = -1;
    memcpy(r->data, data, len);
}

void rmem_image_add_file(struct rmem *m, uint64_t addr, int fd, uint64_t off, size_t len)
{
    m->regions = x_reallocarray(m->regions, m->nregions + 1, sizeof(*m->regions));
    m->regions[m->nregions++] = (struct rmem_region){addr, len, NULL, fd, off};
}

int rmem_image_write(struct rmem *m, uint64_t addr, const void *data, size_t len)
{
    for (size_t i = 0; i < m->nregions; i++) {
        struct rmem_region *r = &m->regions[i];

        if (r->data && addr >= r->addr && addr - r->addr <= r->len &&
            len <= r->len - (addr - r->addr)) {
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

/* Reads [addr, addr + len) from the one region that holds addr: the bytes it has there (a file
 * region's pread may give fewer, the file being shorter than the core said), 0 when none does. */
static size_t region_read(const struct rmem *m, uint64_t addr, void *buf, size_t len)
{
    for (size_t i = 0; i < m->nregions; i++) {
        const struct rmem_region *r = &m->regions[i];

        if (addr >= r->addr && addr - r->addr < r->len) {
            size_t off = (size_t)(addr - r->addr);
            size_t n = r->len - off < len ? r->len - off : len;
            ssize_t got;

            if (r->data) {
                memcpy(buf, r->data + off, n);
                return n;
            }
            if (r->off + off > (uint64_t)INT64_MAX)
                return 0;
            got = pread(r->fd, buf, n, (off_t)(r->off + off));
            return got > 0 ? (size_t)got : 0;
        }
    }
    return 0;
}

/* Copies as much of [addr, addr+len) as the image holds contiguously from addr, across
 * adjacent regions (a core's segments split one object's memory where its mappings do). */
static size_t image_read(const struct rmem *m, uint64_t addr, void *buf, size_t len)
{
    size_t done = 0;

    while (done < len) {
        size_t got = region_read(m, addr + done, (uint8_t *)buf + done, len - done);

        if (got == 0)
            break;
        done += got;
    }
    return done;
}

/* Opens /proc/PID/mem anew; 0 or -errno (ESRCH for a process that is not there). */
static int mem_open(struct rmem *m)
{
    char path[64];

    if (m->mem_fd >= 0)
        close(m->mem_fd);
    snprintf(path, sizeof(path), "/proc/%d/mem", m->pid);
    m->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (m->mem_fd < 0)
        return errno == ENOENT ? -ESRCH : -errno;
    return 0;
}

/* The remote range [addr, addr + the buffers' bytes) through /proc/PID/mem into lv[0..nl):
 * bytes read, or -errno as process_vm_readv says it. */
static long mem_preadv(struct rmem *m, uint64_t addr, const struct iovec *lv, int nl)
{
    size_t want = 0;
    ssize_t r;
    int rc;

    for (int i = 0; i < nl; i++)
        want += lv[i].iov_len;
    if (addr > (uint64_t)INT64_MAX) /* pread takes no such offset; no user space lives there */
        return -EFAULT;
    for (int tries = 0; tries < 2; tries++) {
        if (m->mem_fd < 0 && (rc = mem_open(m)) < 0)
            return rc;
        m->calls++;
        r = preadv(m->mem_fd, lv, nl, (off_t)addr);
        if (r != 0 || want == 0)
            return r < 0 ? -errno : r;
        /* Nothing: the address space the file was opened on is gone. The process exited (the
         * file opens again but reads nothing), or exec'd (the new image reads). */
        close(m->mem_fd);
        m->mem_fd = -1;
    }
    return -ESRCH;
}

/* Ranges one by one through /proc/PID/mem, with process_vm_readv's answer: the bytes up to
 * the first short range, or -errno when the first range read nothing. */
static long mem_ranges(struct rmem *m, const struct rmem_iov *iov, int n)
{
    long total = 0;

    for (int i = 0; i < n; i++) {
        struct iovec lv = {iov[i].buf, iov[i].len};
        long one = mem_preadv(m, iov[i].addr, &lv, 1);

        if (one < 0)
            return total ? total : one;
        total += one;
        if ((size_t)one < iov[i].len)
            return total;
    }
    return total;
}

/* A reader still undecided, after process_vm_readv failed with e: /proc/PID/mem for good
 * where the call is unavailable (ENOSYS) or refused (EPERM, EACCES) while the file opens. */
static void decide_after(struct rmem *m, int e)
{
    if (e == ENOSYS) {
        m->way = WAY_MEM;
        m->why = WHY_ENOSYS;
    } else if ((e == EPERM || e == EACCES) && mem_open(m) == 0) {
        m->way = WAY_MEM;
        m->why = seccomp_filtered() ? WHY_SECCOMP : WHY_EPERM;
    }
}

/* One process_vm_readv: bytes read or -errno. Decides an undecided reader (a read keeps
 * process_vm_readv); when it turns to /proc/PID/mem the caller reads again through that. */
static long vm_call(struct rmem *m, struct iovec *lv, int nl, struct iovec *rv, int nr)
{
    ssize_t r;
    int e;

    m->calls++;
    r = process_vm_readv(m->pid, lv, (unsigned long)nl, rv, (unsigned long)nr, 0);
    if (r >= 0) {
        if (m->way == WAY_UNDECIDED)
            m->way = WAY_VM;
        return r;
    }
    e = errno;
    if (m->way == WAY_UNDECIDED)
        decide_after(m, e);
    return -e;
}

/* One system call for up to RMEM_IOV_MAX ranges (one a range through /proc/PID/mem); returns
 * bytes read or -errno. */
static long raw_readv(struct rmem *m, const struct rmem_iov *iov, int n)
{
    struct iovec local[RMEM_IOV_MAX], remote[RMEM_IOV_MAX];

    if (m->pid == 0) {
        long total = 0;

        m->calls++;
        for (int i = 0; i < n; i++) {
            size_t got = image_read(m, iov[i].addr, iov[i].buf, iov[i].len);

            total += (long)got;
            if (got < iov[i].len)
                return total ? total : -EFAULT;
        }
        return total;
    }
    if (m->way != WAY_MEM) {
        long r;

        for (int i = 0; i < n; i++) {
            local[i].iov_base = iov[i].buf;
            local[i].iov_len = iov[i].len;
            remote[i].iov_base = (void *)(uintptr_t)iov[i].addr;
            remote[i].iov_len = iov[i].len;
        }
        r = vm_call(m, local, n, remote, n);
        if (m->way != WAY_MEM)
            return r;
    }
    return mem_ranges(m, iov, n);
}

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
    size_t off;        /* in scratch, when overlap */
    int lv_first, nlv; /* its local buffers: lv[lv_first .. lv_first + nlv) */
};

/* Groups ranges within gap (at most COALESCE_GAP) of each other, in address order (ord);
 * rel[i] is range i's offset in its group, grp[i] its group. Returns the group count, or 0 when
 * the bytes would pass COALESCE_MAX. */
static int group_ranges(const struct rmem_iov *iov, int n, const int *ord, size_t gap,
                        struct cgroup *g, int *grp, size_t *rel)
{
    size_t total = 0;
    int ng = 0;

    for (int k = 0; k < n; k++) {
        const struct rmem_iov *r = &iov[ord[k]];
        struct cgroup *cur = ng ? &g[ng - 1] : NULL;

        if (cur && r->addr <= cur->addr + cur->len + gap) {
            uint64_t end = r->addr + r->len;

            cur->overlap |= r->addr < cur->addr + cur->len;
            if (end > cur->addr + cur->len) {
                total += (size_t)(end - (cur->addr + cur->len));
                cur->len = (size_t)(end - cur->addr);
            }
            cur->members++;
        } else {
            g[ng++] = (struct cgroup){r->addr, r->len, k, 1, false, 0, 0, 0};
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
                        struct cgroup *g, int *nl)
{
    uint64_t at = g->addr;

    g->lv_first = *nl;
    g->nlv = 1;
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
        if (r->addr > at) /* at most gap bytes */
            w->lv[(*nl)++] = (struct iovec){w->junk, (size_t)(r->addr - at)};
        w->lv[(*nl)++] = (struct iovec){r->buf, r->len};
        at = r->addr + r->len;
    }
    g->nlv = *nl - g->lv_first;
    return true;
}

/* The merged ranges in one process_vm_readv, or one preadv each through /proc/PID/mem; bytes
 * read (up to the first short group), or -errno. */
static long merged_call(struct rmem *m, struct rmem_work *w, int nl, int ng)
{
    long total = 0;

    if (m->way != WAY_MEM) {
        long r = vm_call(m, w->lv, nl, w->rv, ng);

        if (m->way != WAY_MEM)
            return r;
    }
    for (int i = 0; i < ng; i++) {
        long got = mem_preadv(m, w->g[i].addr, w->lv + w->g[i].lv_first, w->g[i].nlv);

        if (got < 0)
            return total ? total : got;
        total += got;
        if ((size_t)got < w->g[i].len)
            return total;
    }
    return total;
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
    ng = group_ranges(iov, n, w->ord, m->gap, w->g, w->grp, w->rel);
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
    got = merged_call(m, w, nl, ng);
    if (got < 0 || (size_t)got != total) /* a range not mapped: the plain call tells which */
        return got < 0 && got != -EFAULT && got != -EIO ? got : 0;
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
