/* Bounded reads of another process's memory, and of memory images (tests, core files).
 *
 * A struct rmem belongs to one thread. Reads never write into the target. Errors map once,
 * here: ESRCH -> APP_E_GONE, EPERM -> APP_E_PERM, EFAULT or short read -> APP_E_STALE. */
#ifndef RANKTOP_RMEM_H
#define RANKTOP_RMEM_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_PROC)
#error "ranktop/proc/rmem.h belongs to collectors/proc/, a layer this one may not use"
#endif

#include <stddef.h>
#include <stdint.h>

#include "ranktop/base/status.h"

struct rmem;

struct rmem_iov {
    uint64_t addr; /* remote address */
    void *buf;     /* local destination */
    size_t len;
};

/* A reader for process pid: process_vm_readv, or pread on /proc/PID/mem where that call is
 * unavailable (ENOSYS: an emulator) or refused (EPERM: a seccomp filter) while the file is
 * readable. The choice is made once, by the reader's first answer, and kept. */
struct rmem *rmem_new_pid(int pid);

#define RMEM_READER_VM "process_vm_readv"
#define RMEM_READER_MEM "/proc/PID/mem"

/* Which reader m uses: RMEM_READER_VM or RMEM_READER_MEM, NULL while no read has decided it
 * (and for images). *why (if why is not NULL) says why /proc/PID/mem, e.g.
 * "process_vm_readv: ENOSYS", and is NULL for process_vm_readv. Static strings. */
const char *rmem_reader(const struct rmem *m, const char **why);

/* The reader a new rmem starts with, from a read of ranktop's own memory made once per
 * process: RMEM_READER_MEM (and *why) when process_vm_readv failed there, whatever the target;
 * else RMEM_READER_VM (a target may still refuse it alone). Static strings. */
const char *rmem_reader_probe(const char **why);

/* An empty memory image: reads succeed only inside regions added with rmem_image_add. */
struct rmem *rmem_new_image(void);

/* Copies len bytes into the image at addr (test images only). */
void rmem_image_add(struct rmem *m, uint64_t addr, const void *data, size_t len);

/* Adds the region [addr, addr + len) read from the file fd at offset off with pread: a core
 * file's segment, or a mapped file's bytes that the core left out. fd is borrowed: the caller
 * keeps it open for the life of m. A read past the file's end is a short read. */
void rmem_image_add_file(struct rmem *m, uint64_t addr, int fd, uint64_t off, size_t len);

/* Overwrites bytes inside an existing image region (tests that make memory change under the
 * reader). Returns 0 or APP_E_NOTFOUND when the range is not inside one region. */
int rmem_image_write(struct rmem *m, uint64_t addr, const void *data, size_t len);

void rmem_free(struct rmem *m);

/* Reads exactly len bytes at addr into buf. Returns 0 or a negative app_status. */
int rmem_read(struct rmem *m, uint64_t addr, void *buf, size_t len);

#define RMEM_IOV_MAX 1024

/* Reads several ranges in one system call (at most RMEM_IOV_MAX entries). Returns 0 when every
 * range was read whole; otherwise a negative status, with *ndone (if not NULL) set to the number of
 * leading ranges that were read completely. */
int rmem_readv(struct rmem *m, const struct rmem_iov *iov, int n, int *ndone);

/* Like rmem_read, but a short read is not an error: returns the byte count read (>= 0) or a
 * negative status when nothing could be read. */
long rmem_read_some(struct rmem *m, uint64_t addr, void *buf, size_t len);

/* Counters since creation: system calls issued and bytes received. */
uint64_t rmem_calls(const struct rmem *m);
uint64_t rmem_bytes(const struct rmem *m);

#endif
