/* ELF core files of crashed (or gcore'd) processes: their segments, threads and mapped files,
 * and a memory image (rmem) over them, so that the stack reader reads a core as it reads a
 * live process. A pure parser of the headers and notes, plus a loader that opens the files. */
#ifndef RANKTOP_COREFILE_H
#define RANKTOP_COREFILE_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_PROC)
#error "ranktop/proc/corefile.h belongs to collectors/proc/, a layer this one may not use"
#endif

#include <stddef.h>
#include <stdint.h>

#include "ranktop/proc/rmem.h"
#include "ranktop/base/status.h"

#define CORE_MAX_SEGS 65534u       /* PT_LOAD and PT_NOTE headers (PN_XNUM cores are refused) */
#define CORE_MAX_MAPS (1u << 20)   /* NT_FILE entries */
#define CORE_MAX_THREADS 65536u    /* NT_PRSTATUS notes */
#define CORE_NOTES_MAX (64u << 20) /* bytes of notes read, all PT_NOTE segments together */
#define CORE_NREGS 34              /* general registers kept per thread (aarch64 has 34) */

struct core_seg {
    uint64_t vaddr, memsz, offset, filesz;
    uint32_t flags; /* PF_R, PF_W, PF_X */
};

struct core_map {
    uint64_t start, end, offset; /* offset: bytes into the file */
    char *path;                  /* as the core recorded it */
};

struct core_thread {
    int tid;
    int cursig;
    unsigned nregs;
    uint64_t regs[CORE_NREGS]; /* pr_reg as the kernel lays it out */
};

struct core_info {
    struct core_seg *segs; /* PT_LOAD only, in header order */
    size_t nsegs;
    struct core_map *maps; /* NT_FILE */
    size_t nmaps;
    struct core_thread *threads; /* NT_PRSTATUS: the kernel puts the dumping thread first */
    size_t nthreads;
    int pid;          /* NT_PRPSINFO; 0 when absent */
    char fname[17];   /* the command name */
    char psargs[81];  /* the start of the command line */
    int signo;        /* NT_SIGINFO's si_signo, else the first thread's cursig; 0 none */
    uint64_t at_phdr; /* NT_AUXV AT_PHDR: lies in the executable; 0 when absent */
    uint64_t notes_off[16], notes_len[16]; /* PT_NOTE segments (at most 16 are read) */
    size_t nnotes;
};

/* Parses the ELF header and program headers of a core: buf holds the file's first len bytes
 * (at least the headers), file_size is the whole file's length. Pure and bounded. APP_E_PARSE
 * (not a core, malformed, truncated: err says which) or APP_E_ARCH (another machine). */
int core_parse_head(const uint8_t *buf, size_t len, uint64_t file_size, struct core_info *out,
                    struct app_err *err);

/* Parses one PT_NOTE segment's bytes into out (threads, files, process, signal, auxv); pure,
 * bounded by len. Malformed notes give APP_E_PARSE. */
int core_parse_notes(const uint8_t *buf, size_t len, struct core_info *out, struct app_err *err);

void core_info_fini(struct core_info *ci);

struct core_opts {
    const char *exe;        /* the executable to use instead of the recorded one; NULL */
    const char *lib_search; /* a folder searched (by base name) before the recorded paths */
};

struct corefile {
    char *path;
    struct core_info info;
    uint64_t size; /* of the core file */
    int fd;
    int *map_fd;       /* per map: the file opened for it, or -1 */
    char **map_local;  /* per map: the path it was opened at, or NULL */
    uint64_t *map_len; /* per map: the opened file's length */
    long *map_same;    /* per map: the first map of the same file, whose file it shares; -1 */
    long exe_map;      /* the map of the executable, -1 when unknown */
    char *note;        /* what the loader could not do, that a reader may want said; or NULL */
};

/* Opens a core: validates its headers and notes (a truncated core is refused, err says where
 * it ends and where it should), and opens every mapped file it can find (regular files only,
 * through tfile_open), checked against the core's copy of the file's first page where the core
 * holds one. Returns 0, or a negative status with err saying why. */
int corefile_open(const char *path, const struct core_opts *o, struct corefile **out,
                  struct app_err *err);

/* A new memory image of the process the core was taken of: its dumped segments, and the
 * read-only parts of mapped files it left out, read from the files. Reads only; c must outlive
 * it (it borrows the descriptors). */
struct rmem *corefile_mem(const struct corefile *c);

/* The map holding addr, or -1. */
long corefile_map_at(const struct corefile *c, uint64_t addr);

void corefile_free(struct corefile *c);

#endif
