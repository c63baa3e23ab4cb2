/* `ranktop dump --locals`: after a process's sample, each thread's locals are read with
 * pyproc_locals and matched to the sample's frames in order (function and file equal), since
 * the two reads are of two instants: a frame of the sample that the locals read no longer
 * found (the thread moved on) shows no locals and says so, nothing is paired by guess. Main
 * thread of the dump. */
#include "cli_locals.h"

#include "cli.h"
#include "ranktop/base/util.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOCALS_FRAMES 4096

static const char *kind_name(enum pylocal_kind k)
{
    return k == PYLOCAL_ARG ? "arg" : k == PYLOCAL_CELL ? "cell" : "local";
}

/* Pairs the sample's frames of t with the frames the locals read found, in order. */
static void match(const struct pythread *t, const struct pylocals *l,
                  const struct pylocals_frame **at)
{
    uint32_t j = 0;

    for (uint32_t k = 0; k < t->nframes; k++) {
        for (uint32_t m = j; m < l->nframes; m++) {
            if (!strcmp(l->frames[m].function, t->frames[k].function) &&
                !strcmp(l->frames[m].file, t->frames[k].file)) {
                at[k] = &l->frames[m];
                j = m + 1;
                break;
            }
        }
    }
}

void cli_locals_gather(struct pyproc *p, const struct pysample *s, struct cli_locals *lc)
{
    if (!lc->on || !p || !s)
        return;
    lc->nthreads = s->nthreads;
    lc->l = x_calloc(s->nthreads + 1u, sizeof(*lc->l));
    lc->at = x_calloc(s->nthreads + 1u, sizeof(*lc->at));
    lc->err = x_calloc(s->nthreads + 1u, sizeof(*lc->err));
    for (uint32_t i = 0; i < s->nthreads; i++) {
        const struct pythread *t = &s->threads[i];
        struct app_err err = {0};

        lc->at[i] = x_calloc(t->nframes + 1u, sizeof(**lc->at));
        if (t->status < 0 || !t->nframes)
            continue;
        if (pyproc_locals(p, t->ident, LOCALS_FRAMES, &lc->l[i], &err) < 0) {
            lc->err[i] = x_strdup(err.msg);
            continue;
        }
        match(t, lc->l[i], lc->at[i]);
    }
}

void cli_locals_fini(struct cli_locals *lc)
{
    for (uint32_t i = 0; i < lc->nthreads; i++) {
        pylocals_free(lc->l[i]);
        free(lc->at[i]);
        free(lc->err[i]);
    }
    free(lc->l);
    free(lc->at);
    free(lc->err);
}

const struct pylocals_frame *cli_locals_at(const struct cli_locals *lc, uint32_t i, uint32_t k)
{
    return lc->on && i < lc->nthreads && lc->at[i] ? lc->at[i][k] : NULL;
}

void cli_locals_text(const struct cli_locals *lc, uint32_t i, uint32_t k)
{
    const struct pylocals_frame *f = cli_locals_at(lc, i, k);

    if (!lc->on)
        return;
    if (!f) {
        printf("        (locals not read: %s)\n",
               i < lc->nthreads && lc->err[i] ? text_safe(lc->err[i])
                                              : "the frame had returned when they were read");
        return;
    }
    if (f->status < 0) {
        printf("        (locals unreadable: %s)\n", app_status_str(f->status));
        return;
    }
    for (uint32_t m = 0; m < f->nlocals; m++) {
        const struct pylocal *v = &f->locals[m];
        printf("        %-5s %s = %s\n", kind_name(v->kind), text_safe(v->name),
               text_safe(v->repr));
    }
}

struct json_object *cli_locals_json(const struct cli_locals *lc, uint32_t i, uint32_t k)
{
    const struct pylocals_frame *f = cli_locals_at(lc, i, k);
    json_object *a;

    if (!f || f->status < 0)
        return NULL;
    a = json_object_new_array();
    for (uint32_t m = 0; m < f->nlocals; m++) {
        const struct pylocal *v = &f->locals[m];
        json_object *o = json_object_new_object();

        json_object_object_add(o, "name", cli_json_str(v->name));
        json_object_object_add(o, "type", cli_json_str(v->type));
        json_object_object_add(o, "repr", cli_json_str(v->repr));
        json_object_object_add(o, "kind", cli_json_str(kind_name(v->kind)));
        json_object_array_add(a, o);
    }
    return a;
}
