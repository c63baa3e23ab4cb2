/* Host memory of one process: RSS / PSS / USS / swap / anonymous totals, per-mapping figures,
 * and the mappings that grew most between two readings (the history keeps the readings; the
 * memory baseline is the views').
 *
 * The parsers and memstat_top_growth are pure (buffer or records in, records out) and may run
 * on any thread. The readers (memstat_read, memstat_read_maps) do file I/O on /proc and may also
 * run on any thread; the procps library fallback they use is serialised internally. All sizes are
 * KiB, as the kernel prints them. */
#ifndef RANKTOP_MEMSTAT_H
#define RANKTOP_MEMSTAT_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_PROC)
#error "ranktop/proc/memstat.h belongs to collectors/proc/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/base/status.h"

/* Validity bits of struct memstat: a field is meaningful only when its bit is set, so
 * "unknown" is never confused with 0. */
#define MEMSTAT_RSS 0x01u
#define MEMSTAT_PSS 0x02u
#define MEMSTAT_USS 0x04u
#define MEMSTAT_SWAP 0x08u
#define MEMSTAT_ANON 0x10u

/* Bounds on /proc/PID/smaps: bytes read and mappings kept (vm.max_map_count defaults to 65530). */
#define MEMSTAT_SMAPS_MAX_BYTES (256u << 20)
#define MEMSTAT_MAPS_MAX 262144u

struct memstat {
    uint32_t valid;  /* MEMSTAT_* bits */
    int64_t rss_kb;  /* resident set */
    int64_t pss_kb;  /* proportional set: shared pages divided among their users */
    int64_t uss_kb;  /* unique set: Private_Clean + Private_Dirty + Private_Hugetlb */
    int64_t swap_kb; /* swapped out */
    int64_t anon_kb; /* resident anonymous memory */
};

/* Parses the text of /proc/PID/smaps_rollup. Sets RSS, PSS, USS (when both Private_Clean and
 * Private_Dirty are present), SWAP and ANON (Anonymous). Pure. APP_E_PARSE with the line number
 * when a value is malformed, the last line is cut short, or Rss or Pss is missing (which also
 * covers empty input). */
int memstat_parse_rollup(const char *buf, size_t len, struct memstat *out, struct app_err *err);

/* Parses the text of /proc/PID/status: RSS from VmRSS, SWAP from VmSwap, ANON from RssAnon.
 * PSS and USS are never set (they need smaps). Missing lines leave their bit clear: a kernel
 * thread or zombie has none and still returns 0. Pure. APP_E_PARSE when one of those values is
 * malformed, a line has no ':', or the last line is cut short. */
int memstat_parse_status(const char *buf, size_t len, struct memstat *out, struct app_err *err);

/* Reads the totals of process pid. First /proc/PID/smaps_rollup (all five fields); when that
 * is unreadable (another user's process, an old kernel, a malformed file) the procps library
 * the build links (RSS, SWAP, ANON from /proc/PID/status and statm) and, if it fails or none is
 * built in, /proc/PID/status directly. APP_E_GONE when the process no longer exists or is a zombie;
 * APP_E_PERM or APP_E_IO when nothing could be read. Costs time in proportion to the resident size:
 * see memstat_read_status for the cheap alternative. */
int memstat_read(int pid, struct memstat *out, struct app_err *err);

/* The procps library this build reads through, with its version: "libproc2 4.0.2",
 * "libprocps 3.3.17", or "none" (meson option procps). A static string. */
const char *memstat_procps(void);

/* The cheap reading: RSS, SWAP and ANON from /proc/PID/status, which the kernel answers from
 * counters (tens of microseconds whatever the process size), while smaps_rollup walks every
 * page table of the process (about 1 ms per 100 MiB resident, and it holds the target's mmap
 * lock for reading meanwhile). Readable for any process. APP_E_GONE when the process is gone or
 * a zombie. */
int memstat_read_status(int pid, struct memstat *out, struct app_err *err);

/* One mapping of /proc/PID/smaps. */
struct memmap {
    uint64_t start, end; /* [start, end) virtual addresses */
    char perms[5];       /* "rw-p" */
    char path[256];      /* "" when anonymous; "[heap]", "[stack]", files; cut to fit */
    int64_t rss_kb, pss_kb;
};

/* Parses the text of /proc/PID/smaps into one record per mapping, in file (address) order.
 * On success *out is a heap array the caller frees with free() (NULL when *n is 0). Pure.
 * APP_E_PARSE (with the line number) on a malformed header or value, a field before the first
 * header, a mapping without Rss or Pss, or a last line cut short; APP_E_LIMIT beyond
 * MEMSTAT_MAPS_MAX mappings. On error *out is NULL and *n is 0. */
int memstat_parse_smaps(const char *buf, size_t len, struct memmap **out, size_t *n,
                        struct app_err *err);

/* Reads and parses /proc/PID/smaps (see memstat_parse_smaps for ownership). Costs about as much
 * as the process has mappings; meant for "on request", not for every period. APP_E_GONE when
 * the process is gone or a zombie (a kernel thread gives 0 mappings), APP_E_PERM when its smaps
 * is not readable (another user's process), APP_E_LIMIT beyond MEMSTAT_SMAPS_MAX_BYTES. */
int memstat_read_maps(int pid, struct memmap **out, size_t *n, struct app_err *err);

/* One line of "the mappings that grew most". */
struct memgrowth {
    char label[280]; /* "[heap]", "/usr/lib/libtorch.so", "anon 0x7f12...-0x7f13..." */
    int64_t before_kb, after_kb, delta_kb; /* RSS */
};

/* The mappings that grew most (by RSS) between two smaps readings of the same process, each
 * list in address order as memstat_parse_smaps returns it. Named mappings ("[heap]", files,
 * "[anon:name]") are matched and summed by path, so all segments of a library count as one.
 * Anonymous mappings are merged into runs of address-adjacent neighbours; an after-run is
 * compared with the before-runs it overlaps (the kernel merges a new mmap into a neighbouring
 * VMA, so a start address alone would not match), each before-run counted once. Writes the top
 * n with delta_kb > 0 to out, largest first, and returns how many it wrote. Pure. */
size_t memstat_top_growth(const struct memmap *before, size_t nb, const struct memmap *after,
                          size_t na, struct memgrowth *out, size_t n);

#endif
