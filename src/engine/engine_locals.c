/* The monitor's locals on request: a one-shot stack reader of the rank's process, opened, read
 * and closed within the call, on the calling (UI) thread. It shares nothing with the sampler,
 * so sampling cost and state are unchanged; a slow or failed read costs only that key press.
 * Ranks of other hosts are refused: a pid names another process here. */
#include "ranktop/engine/engine.h"
#include "ranktop/python/pystack.h"
#include "ranktop/base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The frame of function in file nearest to the pyindex-th, or NULL. */
static const struct pylocals_frame *pick(const struct pylocals *l, const char *function,
                                         const char *file, int pyindex)
{
    const struct pylocals_frame *best = NULL;
    int bestd = 0;

    for (uint32_t i = 0; i < l->nframes; i++) {
        int d = abs((int)i - pyindex);
        if (strcmp(l->frames[i].function, function) || strcmp(l->frames[i].file, file))
            continue;
        if (!best || d < bestd)
            best = &l->frames[i], bestd = d;
    }
    return best;
}

static void copy_out(const struct pylocals_frame *f, struct engine_locals *out)
{
    out->line = f->line;
    out->v = x_calloc(f->nlocals + 1u, sizeof(*out->v));
    for (uint32_t i = 0; i < f->nlocals; i++) {
        struct engine_local *v = &out->v[out->n++];
        snprintf(v->name, sizeof(v->name), "%s", f->locals[i].name);
        snprintf(v->type, sizeof(v->type), "%s", f->locals[i].type);
        snprintf(v->repr, sizeof(v->repr), "%s", f->locals[i].repr);
        v->kind = f->locals[i].kind == PYLOCAL_ARG    ? 'a'
                  : f->locals[i].kind == PYLOCAL_CELL ? 'c'
                                                      : 'l';
    }
}

int engine_locals_read(const char *host, int pid, uint64_t ident, const char *function,
                       const char *file, int pyindex, struct engine_locals *out,
                       struct app_err *err)
{
    struct pyproc_opts po = {.no_names = true, .no_state = true};
    const struct pylocals_frame *f;
    struct pylocals *l = NULL;
    struct pyproc *p = NULL;
    char me[64] = "";
    int st;

    memset(out, 0, sizeof(*out));
    gethostname(me, sizeof(me) - 1);
    if (host && host[0] && strcmp(host, me))
        return app_err_set(err, APP_E_USAGE,
                           "rank on host %s: its locals are read there (ranktop dump --locals)",
                           host);
    if ((st = pyproc_open(pid, &po, &p, err)) < 0)
        return st;
    st = pyproc_locals(p, ident, 0, &l, err);
    if (st == 0 && !(f = pick(l, function, file, pyindex)))
        st = app_err_set(err, APP_E_NOTFOUND, "%s is no longer on the thread's stack", function);
    else if (st == 0 && f->status < 0)
        st = app_err_set(err, f->status, "the frame's locals: %s", app_status_str(f->status));
    else if (st == 0)
        copy_out(f, out);
    pylocals_free(l);
    pyproc_free(p);
    return st;
}

void engine_locals_fini(struct engine_locals *l)
{
    free(l->v);
    memset(l, 0, sizeof(*l));
}
