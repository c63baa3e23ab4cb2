/* Thread identity for the stack reader: kernel TIDs, running/idle state, Python names.
 *
 * TIDs come from tstate->native_thread_id on 3.11+, and before that from glibc's struct
 * pthread (whose address is the thread ident): the TID's offset inside it is inferred once
 * per process by looking for a known TID, and cached per ident until that TID disappears
 * (glibc recycles pthread_t values). TIDs are translated when the target lives in another PID
 * namespace. Names come from threading._active and are re-read only when an unknown thread
 * shows up, or an unnamed one is due for another look (a new thread registers itself in
 * _active only after it starts running Python). All state belongs to the sampling thread that owns
 * the pyproc. */
#include "pyproc_priv.h"

#include "pynames.h"
#include "ranktop/base/bytes.h"
#include "ranktop/proc/procscan.h"
#include "ranktop/base/util.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PTHREAD_SCAN 2048
#define GLIBC_TID_OFF 0x2d0
#define NAME_RETRY_NS 100000000ull /* first re-look for an unnamed thread: 100 ms */
#define NAME_MISSES_MAX 4096

/* Parses the NSpid line of a status file: first (our namespace) and last (innermost) ids. */
static int nspid(const char *path, int *outer, int *inner)
{
    char *buf, *line;
    size_t len;
    int n = 0;

    if (file_read_all(path, 1 << 16, &buf, &len) < 0)
        return -1;
    line = strstr(buf, "\nNSpid:");
    if (line) {
        char *s = line + 7, *end;

        for (long v; (v = strtol(s, &end, 10)), end != s; s = end, n++) {
            if (n == 0)
                *outer = (int)v;
            *inner = (int)v;
        }
    }
    free(buf);
    return n;
}

/* Names generations of every pyproc of the process: one never repeats, so that a name pointer
 * of one pyproc's generation can never pass for another's (pysample.names_gen). */
static atomic_uint_least64_t names_gens;

static uint64_t names_gen_new(void)
{
    return (uint64_t)atomic_fetch_add(&names_gens, 1) + 1;
}

void pytask_init(struct pyproc *p)
{
    char path[64];
    int outer = p->pid, inner = p->pid;

    p->names_gen = names_gen_new();

    snprintf(path, sizeof(path), "/proc/%d/status", p->pid);
    p->ns_differs = nspid(path, &outer, &inner) > 1;
    p->ns_pid = inner;
}

/* Rebuilds the inner -> outer TID map from /proc/PID/task/ * /status. */
static void ns_refresh(struct pyproc *p)
{
    char path[320];
    DIR *d;
    struct dirent *de;

    snprintf(path, sizeof(path), "/proc/%d/task", p->pid);
    p->nns = 0;
    d = opendir(path);
    if (!d)
        return;
    while ((de = readdir(d)) != NULL && p->nns < 65536) {
        int outer, inner;

        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%d/task/%s/status", p->pid, de->d_name);
        if (nspid(path, &outer, &inner) < 1)
            continue;
        p->ns_inner = x_reallocarray(p->ns_inner, p->nns + 1, sizeof(int));
        p->ns_outer = x_reallocarray(p->ns_outer, p->nns + 1, sizeof(int));
        p->ns_inner[p->nns] = inner;
        p->ns_outer[p->nns++] = outer;
    }
    closedir(d);
}

static int ns_translate(struct pyproc *p, int inner)
{
    if (!p->ns_differs || inner <= 0)
        return inner;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < p->nns; i++)
            if (p->ns_inner[i] == inner)
                return p->ns_outer[i];
        if (!pass)
            ns_refresh(p);
    }
    return 0;
}

static bool task_exists(struct pyproc *p, int inner)
{
    if (p->pid <= 0) { /* a core: its threads are those it recorded */
        for (size_t i = 0; i < p->ncore_tids; i++)
            if (p->core_tids[i] == inner)
                return true;
        return false;
    }
    return procscan_thread_of(p->pid, ns_translate(p, inner));
}

/* Finds the TID's offset in struct pthread: prefer glibc's, else the first live TID. */
static void infer_tid_offset(struct pyproc *p, uint64_t ident)
{
    uint8_t buf[PTHREAD_SCAN];
    int32_t v;

    if (rmem_read(p->mem, ident, buf, sizeof(buf)) < 0)
        return;
    v = bytes_load_i32(buf + GLIBC_TID_OFF);
    if (v > 0 && task_exists(p, v)) {
        p->pthread_tid_off = GLIBC_TID_OFF;
        return;
    }
    for (size_t off = 0; off + 4 <= sizeof(buf); off += 4) {
        v = bytes_load_i32(buf + off);
        if (v == p->ns_pid) {
            p->pthread_tid_off = (long)off;
            return;
        }
    }
}

static int tid_from_pthread(struct pyproc *p, uint64_t ident)
{
    int32_t v = 0;

    for (size_t i = 0; i < p->ntids; i++)
        if (p->tids[i].ident == ident)
            return p->tids[i].tid;
    if (p->pthread_tid_off < 0)
        infer_tid_offset(p, ident);
    if (p->pthread_tid_off < 0 ||
        rmem_read(p->mem, ident + (uint64_t)p->pthread_tid_off, &v, sizeof(v)) < 0 || v <= 0 ||
        !task_exists(p, v))
        return 0;
    p->tids = x_reallocarray(p->tids, p->ntids + 1, sizeof(*p->tids));
    p->tids[p->ntids++] = (struct pytid){ident, v};
    return v;
}

int pytask_tid(struct pyproc *p, uint64_t ident, const uint8_t *tstate)
{
    int32_t inner = 0;

    if (p->L.ts.native_id >= 0)
        inner = bytes_load_i32(tstate + p->L.ts.native_id);
    else if (ident)
        inner = tid_from_pthread(p, ident);
    return ns_translate(p, inner);
}

static void forget_ident(struct pyproc *p, uint64_t ident)
{
    for (size_t i = 0; i < p->ntids; i++)
        if (p->tids[i].ident == ident) {
            p->tids[i] = p->tids[--p->ntids];
            return;
        }
}

enum pythread_state pytask_state(struct pyproc *p, uint64_t ident, int tid)
{
    char path[64], buf[512], *rp;
    FILE *f;
    size_t n;

    if (tid <= 0)
        return PYTHREAD_UNKNOWN;
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", p->pid, tid);
    f = fopen(path, "re");
    if (!f) {
        forget_ident(p, ident);
        return PYTHREAD_UNKNOWN;
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    rp = strrchr(buf, ')');
    if (!rp || rp[1] != ' ')
        return PYTHREAD_UNKNOWN;
    return rp[2] == 'R'                   ? PYTHREAD_RUNNING
           : rp[2] == 'T' || rp[2] == 't' ? PYTHREAD_STOPPED
                                          : PYTHREAD_IDLE;
}

static void names_drop(struct pyname_cache *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->names[i]);
    free(c->names);
    free(c->idents);
    memset(c, 0, sizeof(*c));
}

static const char *names_find(const struct pyname_cache *c, uint64_t ident)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->idents[i] == ident)
            return c->names[i];
    return NULL;
}

static struct pyname_miss *miss_find(struct pyproc *p, uint64_t ident)
{
    for (size_t i = 0; i < p->nneg; i++)
        if (p->neg[i].ident == ident)
            return &p->neg[i];
    return NULL;
}

/* Notes one more miss of ident: the next look is 100 ms later, doubling up to 6.4 s, so a
 * thread that is named shortly after it starts gets its name within a few tenths of a second
 * while a thread that never gets one (C-created, never registered) costs a refresh rarely. */
static void miss_note(struct pyproc *p, struct pyname_miss *m, uint64_t ident, uint64_t now)
{
    if (!m) {
        if (p->nneg >= NAME_MISSES_MAX)
            p->nneg = 0; /* idents of long-gone threads: start afresh */
        p->neg = x_reallocarray(p->neg, p->nneg + 1, sizeof(*p->neg));
        m = &p->neg[p->nneg++];
        *m = (struct pyname_miss){ident, 0, 0};
    }
    m->retry_ns = now + (NAME_RETRY_NS << (m->tries < 6 ? m->tries : 6));
    m->tries++;
}

/* Re-reads threading._active. The replaced cache stays alive until the next refresh, because
 * earlier threads of the current sample may point at its names. */
static void names_refresh(struct pyproc *p, uint64_t interp)
{
    struct pyname *v = NULL;
    size_t n = 0;
    struct app_err err;

    p->names_sample = p->stat_samples + 1;
    if (pynames_read(p->mem, &p->L, interp, &v, &n, &err) < 0)
        return;
    names_drop(&p->names_prev);
    p->names_prev = p->names;
    memset(&p->names, 0, sizeof(p->names));
    p->names.idents = x_calloc(n, sizeof(uint64_t));
    p->names.names = x_calloc(n, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        p->names.idents[i] = v[i].ident;
        p->names.names[i] = v[i].name;
        v[i].name = NULL;
    }
    p->names.n = n;
    p->names_gen = names_gen_new(); /* the oldest names went: their pointers may be reused */
    pynames_free(v, n);
}

const char *pytask_name(struct pyproc *p, uint64_t interp, uint64_t ident)
{
    const char *s = names_find(&p->names, ident);
    struct pyname_miss *m;
    uint64_t now;

    if (s || p->L.names.off) /* free-threaded builds: threading._active is not walked */
        return s;
    now = clock_mono_ns();
    m = miss_find(p, ident);
    if (m && now < m->retry_ns)
        return NULL;
    /* One refresh per sample at most, whatever the number of unnamed threads. */
    if (p->names_sample != p->stat_samples + 1) {
        names_refresh(p, interp);
        s = names_find(&p->names, ident);
        if (s)
            return s;
    }
    miss_note(p, m, ident, now);
    return NULL;
}

void pytask_fini(struct pyproc *p)
{
    names_drop(&p->names);
    names_drop(&p->names_prev);
    free(p->neg);
    free(p->tids);
    free(p->ns_inner);
    free(p->ns_outer);
    free(p->core_tids);
    free(p->ds_starts);
}
