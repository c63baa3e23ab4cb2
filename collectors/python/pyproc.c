/* The remote CPython stack reader: attach (find _PyRuntime, detect the version, choose the
 * layout) and the per-sample walk over interpreters and threads.
 *
 * A struct pyproc is owned by one thread. It reads the target with bounded, validated
 * process_vm_readv calls and never writes to it or stops it. A thread walk that fails
 * validation (a torn read of a moving target) is retried once, then dropped and counted; a
 * target that exits mid-sample ends the sample with APP_E_GONE. Every loop has a bound. */
#include "pyproc_priv.h"

#include "ranktop/base/bytes.h"
#include "ranktop/proc/elfsym.h"
#include "ranktop/proc/procmaps.h"
#include "ranktop/base/util.h"

#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

const char *pyproc_supported_range(void)
{
    return "3." STRINGIFY(PYABI_MIN_MINOR) " to 3." STRINGIFY(PYABI_MAX_MINOR);
}

static void version_text(uint32_t hex, char *buf, size_t len)
{
    static const char *level[16] = {[0xA] = "a", [0xB] = "b", [0xC] = "rc"};
    unsigned lv = (hex >> 4) & 0xF;

    if (lv == 0xF || !level[lv])
        snprintf(buf, len, "%u.%u.%u", hex >> 24, (hex >> 16) & 0xFF, (hex >> 8) & 0xFF);
    else
        snprintf(buf, len, "%u.%u.%u%s%u", hex >> 24, (hex >> 16) & 0xFF, (hex >> 8) & 0xFF,
                 level[lv], hex & 0xF);
}

/* Chooses the layout for the version: 3.13+ from the target's own _Py_DebugOffsets, falling
 * back to the compiled table where the minor has one (never for a free-threaded build, which
 * no compiled table describes); older minors from their table. A minor newer than the newest
 * known is refused by name: its layout cannot be guessed. */
static int choose_layout(struct pyproc *p, struct app_err *err)
{
    int minor = (int)((p->version_hex >> 16) & 0xFF);
    const struct py_abi *abi = p->version_hex >> 24 == 3 ? pyabi_for_minor(minor) : NULL;
    uint8_t dbg[PYABI_DEBUG_OFFSETS_MAX];
    long got;

    if (!abi && p->version_hex >> 24 == 3 && minor > PYABI_MAX_MINOR)
        return app_err_set(err, APP_E_VERSION,
                           "process %d: CPython %s: layout not known to this ranktop (newest "
                           "supported: 3.%d)",
                           p->pid, p->version, PYABI_MAX_MINOR);
    if (!abi)
        return app_err_set(err, APP_E_VERSION, "process %d runs Python %s; supported %s", p->pid,
                           p->version, pyproc_supported_range());
    if (!abi->debug[0]) {
        p->L = abi->layout;
        return 0;
    }
    got = rmem_read_some(p->mem, p->runtime, dbg, sizeof(dbg));
    if (got < 0)
        return app_err_set(err, (int)got, "cannot read _PyRuntime of process %d: %s", p->pid,
                           app_status_str((int)got));
    if (pyabi_from_debug_offsets(dbg, (size_t)got, p->version_hex, &p->L, err) == 0)
        return 0;
    if (!abi->compiled ||
        (got >= 24 && !memcmp(dbg, "xdebugpy", 8) && bytes_load_u64(dbg + 16) != 0))
        return err->code;
    p->L = abi->layout;
    return 0;
}

int pyproc_open_mem(struct rmem *mem, int pid, uint64_t runtime, uint64_t pycode_type,
                    uint32_t version_hex, const struct pyproc_opts *opts, struct pyproc **out,
                    struct app_err *err)
{
    struct pyproc *p = x_calloc(1, sizeof(*p));
    int rc;

    p->pid = pid;
    p->mem = mem;
    p->runtime = runtime;
    p->pycode_type = pycode_type;
    p->version_hex = version_hex;
    p->pthread_tid_off = -1;
    version_text(version_hex, p->version, sizeof(p->version));
    if (opts)
        p->opts = *opts;
    if (!p->opts.max_frames)
        p->opts.max_frames = PYPROC_DEFAULT_FRAMES;
    if (!p->opts.max_threads)
        p->opts.max_threads = PYPROC_DEFAULT_THREADS;
    rc = choose_layout(p, err);
    if (rc < 0) {
        pyproc_free(p);
        return rc;
    }
    pycode_cache_init(&p->codes);
    p->raw = x_calloc(p->opts.max_frames, sizeof(*p->raw));
    p->raw_codes = x_calloc(p->opts.max_frames, sizeof(*p->raw_codes));
    p->raw_res = x_calloc(p->opts.max_frames, sizeof(*p->raw_res));
    if (pid > 0) {
        pytask_init(p);
        p->cpu_clock_ok = clock_getcpuclockid(pid, &p->cpu_clock) == 0;
    }
    *out = p;
    return 0;
}

void pyproc_set_state(struct pyproc *p, bool on)
{
    p->opts.no_state = !on;
}

void pyproc_watch(struct pyproc *p, uint64_t addr)
{
    p->watch_addr = addr;
    p->watch_ok = false;
}

bool pyproc_watched(const struct pyproc *p, int32_t *val)
{
    *val = p->watch_val;
    return p->watch_addr && p->watch_ok;
}

void pyproc_free(struct pyproc *p)
{
    if (!p)
        return;
    if (p->codes.slots)
        pycode_cache_fini(&p->codes);
    pytask_fini(p);
    for (int i = 0; i < PYPROC_MAX_CHUNKS; i++)
        free(p->chunk[i]);
    for (size_t i = 0; i < p->nhints; i++) {
        pywalk_hint_free(&p->hints[i]);
    }
    free(p->hints);
    free(p->hix);
    free(p->chain_new);
    free(p->chain_buf);
    free(p->span_buf);
    free(p->ts.copy);
    free(p->ts.addr);
    free(p->ts.iov);
    free(p->raw);
    free(p->raw_codes);
    free(p->raw_res);
    free(p->threads);
    free(p->frames);
    rmem_free(p->mem);
    free(p);
}

const char *pyproc_version(const struct pyproc *p)
{
    return p->version;
}

uint32_t pyproc_version_hex(const struct pyproc *p)
{
    return p->version_hex;
}

void pyproc_get_stats(const struct pyproc *p, struct pyproc_stats *st)
{
    memset(st, 0, sizeof(*st));
    st->samples = p->stat_samples;
    st->reads = rmem_calls(p->mem);
    st->bytes = rmem_bytes(p->mem);
    st->torn = p->stat_torn;
    st->dropped = p->stat_dropped;
    st->reused = p->stat_reused;
    st->prefetched = p->stat_prefetched;
    st->code_hits = p->codes.hits;
    st->code_misses = p->codes.misses;
    st->reader = rmem_reader(p->mem, &st->reader_why);
}

const char *pyproc_reader_probe(const char **why)
{
    return rmem_reader_probe(why);
}
