/* Attaching to an ELF core instead of a live process: the interpreter is found among the
 * core's mapped files (libpython first, else the executable, as pylocate.c does with a
 * process's maps), _PyRuntime in that file, the version in the core's memory, and then the
 * reader of live processes runs unchanged over the core's memory image (corefile_mem), with
 * pid 0: nothing in /proc is consulted, TIDs come from the threads the core recorded and
 * thread names from threading._active in the core. Runs on the calling thread. */
#include "pyproc_priv.h"

#include "ranktop/base/bytes.h"
#include "ranktop/proc/corefile.h"
#include "ranktop/proc/elfsym.h"
#include "ranktop/base/util.h"

#include <elf.h>
#include <string.h>

static bool libpython_name(const char *path)
{
    const char *base = strrchr(path, '/');

    base = base ? base + 1 : path;
    return strncmp(base, "libpython", 9) == 0 && strstr(base, ".so") != NULL;
}

/* The lowest start of the maps of path that begin at its file offset 0: its load base. */
static uint64_t core_base(const struct corefile *c, const char *path)
{
    uint64_t base = 0;

    for (size_t i = 0; i < c->info.nmaps; i++)
        if (!strcmp(c->info.maps[i].path, path) && c->info.maps[i].offset == 0 &&
            (!base || c->info.maps[i].start < base))
            base = c->info.maps[i].start;
    return base;
}

static int inspect(const struct corefile *c, long i, struct elf_info *elf, struct app_err *err)
{
    const char *rec = c->info.maps[i].path;

    if (c->map_fd[i] < 0)
        return app_err_set(err, APP_E_NOTFOUND,
                           "%s, mapped by the process of the core, was not found or is another "
                           "build%s%s: give the folder that holds it with --lib-search DIR%s",
                           rec, c->note ? " (" : "", c->note ? c->note : "",
                           i == c->exe_map ? ", or the program with --exe" : "");
    return elf_inspect_file(NULL, c->map_local[i], elf, err);
}

/* The map of the object holding _PyRuntime: libpython when one is mapped, else the program. */
static long find_interp(const struct corefile *c, struct elf_info *elf, struct app_err *err)
{
    long lib = -1, pick;
    int rc;

    for (size_t i = 0; i < c->info.nmaps && lib < 0; i++)
        if (libpython_name(c->info.maps[i].path))
            lib = (long)i;
    pick = lib >= 0 ? lib : c->exe_map;
    if (pick < 0)
        return app_err_set(err, APP_E_NOTPY,
                           "the core records no mapped files (no NT_FILE note): its interpreter "
                           "cannot be found");
    rc = inspect(c, pick, elf, err);
    if (rc == 0 && !elf->pyruntime && !elf->pyruntime_sec && lib >= 0 && c->exe_map >= 0) {
        pick = c->exe_map; /* a libpython that holds no runtime: a program built static too */
        rc = inspect(c, pick, elf, err);
    }
    if (rc < 0)
        return rc;
    if (!elf->pyruntime && !elf->pyruntime_sec)
        return app_err_set(err, APP_E_NOTPY,
                           "not a core of a Python process: %s has no _PyRuntime (Python 3.8 or "
                           "later, not stripped of it, is needed)",
                           c->info.maps[pick].path);
    return pick;
}

int pyproc_open_core(const struct corefile *core, const struct pyproc_opts *opts,
                     struct pyproc **out, struct app_err *err)
{
    struct elf_info elf;
    struct pyproc_opts o = {0};
    long pick = find_interp(core, &elf, err);
    const char *path;
    uint64_t bias, runtime;
    struct rmem *m;
    uint32_t version;
    int rc;

    *out = NULL;
    if (pick < 0)
        return (int)pick;
    path = core->info.maps[pick].path;
    bias = elf.type == ET_DYN ? core_base(core, path) - elf.load_vaddr : 0;
    runtime = bias + (elf.pyruntime ? elf.pyruntime : elf.pyruntime_sec);
    m = corefile_mem(core);
    version = pylocate_version(m, &elf, path, runtime, bias);
    if (version >> 24 != 3 || ((version >> 16) & 0xFF) < 8) {
        rmem_free(m);
        return app_err_set(err, APP_E_VERSION, "the core's Python (%s) is not one of %s",
                           elf.version[0] ? elf.version : "version unknown",
                           pyproc_supported_range());
    }
    if (opts)
        o = *opts;
    o.no_state = true; /* no process to ask whether a thread runs */
    rc = pyproc_open_mem(m, 0, runtime, elf.pycode_type ? bias + elf.pycode_type : 0, version, &o,
                         out, err);
    if (rc < 0)
        return rc;
    (*out)->ns_pid = core->info.pid;
    (*out)->ncore_tids = core->info.nthreads;
    (*out)->core_tids = x_calloc(core->info.nthreads + 1, sizeof(int));
    for (size_t i = 0; i < core->info.nthreads; i++)
        (*out)->core_tids[i] = core->info.threads[i].tid;
    return 0;
}

/* 3.12-3.15 keep co_framesize two ints after co_firstlineno (co_nlocalsplus between). */
#define CO_FRAMESIZE_AFTER_FIRSTLINENO 8
#define BELOW_CHUNKS_MAX 4096 /* chunks of one data stack looked through */
#define CHUNK_BYTES_MAX (16u << 20)

/* The size in bytes of the data-stack frame at x (its code's co_framesize words), or 0. */
static uint64_t frame_bytes(struct pyproc *p, uint64_t x)
{
    const struct py_layout *L = &p->L;
    uint64_t code = 0, type = 0;
    int32_t words = 0;

    if (rmem_read(p->mem, x + L->fr.code, &code, 8) < 0)
        return 0;
    code &= L->fr.code_tagged ? ~(uint64_t)7 : ~(uint64_t)0;
    if (code && code == p->ds_code) /* a recursion: the same code frame after frame */
        return p->ds_code_bytes;
    if (!code || (code & 7) ||
        rmem_read(p->mem, code + L->co.firstlineno + CO_FRAMESIZE_AFTER_FIRSTLINENO, &words, 4) < 0)
        return 0;
    if (p->pycode_type &&
        (rmem_read(p->mem, code + L->ob_type, &type, 8) < 0 || type != p->pycode_type))
        return 0;
    if (words <= 0 || (uint64_t)words * 8 < L->fr.size)
        return 0;
    p->ds_code = code;
    p->ds_code_bytes = (uint64_t)words * 8;
    return p->ds_code_bytes;
}

static void start_add(struct pyproc *p, uint64_t x)
{
    if (p->nds_starts == p->ds_cap) {
        p->ds_cap = p->ds_cap ? 2 * p->ds_cap : 64;
        p->ds_starts = x_reallocarray(p->ds_starts, p->ds_cap, sizeof(*p->ds_starts));
    }
    p->ds_starts[p->nds_starts++] = x;
}

/* The frame of [first, end) that ends at end: frame by frame from first, from where the last
 * search in this chunk stopped (the starts it met are kept). */
static int frame_ending(struct pyproc *p, uint64_t first, uint64_t end, uint64_t *below)
{
    size_t lo = 0, hi;
    uint64_t x;

    if (p->ds_first != first || !p->nds_starts) {
        p->ds_first = first;
        p->nds_starts = 0;
        start_add(p, first);
    }
    for (x = p->ds_starts[p->nds_starts - 1]; x < end;) {
        uint64_t n = frame_bytes(p, x);

        if (!n || n > end - x)
            return APP_E_STALE;
        x += n;
        start_add(p, x);
    }
    hi = p->nds_starts - 1; /* the starts ascend: the one equal to end, and the one before */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;

        if (p->ds_starts[mid] < end)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || p->ds_starts[lo] != end)
        return APP_E_STALE;
    *below = p->ds_starts[lo - 1];
    return 0;
}

int pycore_frame_below(struct pyproc *p, uint64_t end, uint64_t *below)
{
    const struct py_layout *L = &p->L;
    uint64_t chunk = bytes_load_u64(p->tsfresh + L->ts.datastack);
    uint64_t top = bytes_load_u64(p->tsfresh + L->ts.datastack + 8); /* datastack_top */

    *below = 0;
    for (int k = 0; k < BELOW_CHUNKS_MAX && chunk; k++) {
        uint64_t hdr[3], first, saved = 0; /* previous, size, top (older chunks) */

        if (rmem_read(p->mem, chunk, hdr, sizeof(hdr)) < 0)
            return APP_E_STALE;
        first = chunk + PYABI_CHUNK_HDR + (hdr[0] ? 0 : 8); /* the root skips data[0] */
        if (hdr[1] > CHUNK_BYTES_MAX || top < first || top - chunk > hdr[1])
            return APP_E_STALE;
        if (end == first && !hdr[0])
            return 0; /* the outermost frame: nothing under it on the data stack */
        if (end > first && end <= top)
            return frame_ending(p, first, end, below);
        chunk = hdr[0];
        if (rmem_read(p->mem, chunk + PYABI_CHUNK_TOP, &saved, 8) < 0 ||
            saved > CHUNK_BYTES_MAX / 8)
            return APP_E_STALE;
        if (end == first) /* the first frame of its chunk: the one below ends the older one */
            end = chunk + PYABI_CHUNK_HDR + saved * 8;
        top = chunk + PYABI_CHUNK_HDR + saved * 8;
    }
    return APP_E_STALE;
}
