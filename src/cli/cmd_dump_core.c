/* `ranktop dump --core FILE`: every thread's Python stack as it was when a core was written
 * (by the kernel when a rank crashed, or by gcore), in dump's text or JSON shape. The core is
 * opened and validated (corefile.c), the interpreter found among its mapped files, and the
 * live reader reads the core's memory instead of a process's: one sample, no retry (a core
 * does not change, so a thread that cannot be read whole says so). With --native each
 * thread's registers in the core are unwound over the same memory and merged with its Python
 * frames as dump --native merges a live thread's. What cannot be done is one line on stderr
 * and exit status 1. Main thread only. */
#include "cli.h"

#include "ranktop/proc/corefile.h"
#include "ranktop/native/native.h"
#include "ranktop/python/pystack.h"
#include "ranktop/base/util.h"

#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static const char *signal_name(int sig)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {{SIGSEGV, "SIGSEGV"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},
                 {SIGFPE, "SIGFPE"},   {SIGILL, "SIGILL"},   {SIGQUIT, "SIGQUIT"},
                 {SIGTRAP, "SIGTRAP"}, {SIGSYS, "SIGSYS"},   {SIGXCPU, "SIGXCPU"},
                 {SIGXFSZ, "SIGXFSZ"}, {SIGSTOP, "SIGSTOP"}, {SIGKILL, "SIGKILL"},
                 {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"}};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].sig == sig)
            return names[i].name;
    return NULL;
}

/* The thread the signal came to: the kernel writes the dumping thread's notes first. A core
 * that says SIGSTOP was taken of a stopped process (gcore attaches so): no thread crashed. */
static int signal_tid(const struct corefile *c)
{
    return c->info.signo > 0 && c->info.signo != SIGSTOP ? c->info.threads[0].tid : 0;
}

/* A thread's merged stack (--native): its frames, or n 0 when it has none. */
struct merged {
    struct merged_frame *m;
    size_t n;
};

static json_object *thread_json(const struct pythread *t, const struct merged *mg, bool native)
{
    json_object *o = json_object_new_object(), *frames = json_object_new_array();

    json_object_object_add(o, "tid", t->tid > 0 ? json_object_new_int(t->tid) : NULL);
    json_object_object_add(o, "name", t->name ? cli_json_str(t->name) : NULL);
    json_object_object_add(o, "gil", json_object_new_boolean(t->gil));
    json_object_object_add(o, "state", cli_json_str("unknown"));
    if (mg && mg->n) {
        for (size_t i = 0; i < mg->n; i++)
            json_object_array_add(frames, mg->m[i].native ? cli_natframe_json(mg->m[i].nat)
                                                          : cli_pyframe_json(mg->m[i].py, true));
    } else {
        for (uint32_t i = 0; i < t->nframes; i++)
            json_object_array_add(frames, cli_pyframe_json(&t->frames[i], native));
    }
    json_object_object_add(o, "frames", frames);
    json_object_object_add(o, "error",
                           t->status < 0 ? cli_json_str(app_status_str(t->status)) : NULL);
    json_object_object_add(o, "no_python", json_object_new_boolean(t->no_python));
    json_object_object_add(o, "truncated", json_object_new_boolean(t->truncated));
    return o;
}

/* The "core" object: which file, the signal that wrote it and to which thread, and what the
 * loader could not use. */
static json_object *core_json(const char *file, const struct corefile *c)
{
    json_object *o = json_object_new_object();
    const char *sn = c && c->info.signo > 0 ? signal_name(c->info.signo) : NULL;

    json_object_object_add(o, "file", cli_json_str(file));
    json_object_object_add(o, "command", c ? cli_json_str(c->info.psargs) : NULL);
    json_object_object_add(o, "signal",
                           c && c->info.signo > 0 ? json_object_new_int(c->info.signo) : NULL);
    json_object_object_add(o, "signal_name", sn ? cli_json_str(sn) : NULL);
    json_object_object_add(o, "signal_tid",
                           c && signal_tid(c) ? json_object_new_int(signal_tid(c)) : NULL);
    json_object_object_add(o, "note", c && c->note ? cli_json_str(c->note) : NULL);
    return o;
}

static void emit_json(const char *file, const struct corefile *c, const struct pyproc *p,
                      const struct pysample *s, const struct merged *mg, bool native,
                      const char *error)
{
    json_object *root = json_object_new_object(), *arr = json_object_new_array();
    json_object *o = json_object_new_object(), *threads = json_object_new_array();

    json_object_object_add(o, "pid",
                           c && c->info.pid > 0 ? json_object_new_int(c->info.pid) : NULL);
    json_object_object_add(o, "rank", NULL);
    json_object_object_add(o, "python", p ? cli_json_str(pyproc_version(p)) : NULL);
    json_object_object_add(o, "error", error ? cli_json_str(error) : NULL);
    json_object_object_add(o, "reader", cli_json_str("core"));
    json_object_object_add(o, "reader_why", NULL);
    json_object_object_add(o, "core", core_json(file, c));
    for (uint32_t i = 0; s && i < s->nthreads; i++)
        json_object_array_add(threads, thread_json(&s->threads[i], mg ? &mg[i] : NULL, native));
    json_object_object_add(o, "threads", threads);
    json_object_array_add(arr, o);
    json_object_object_add(root, "processes", arr);
    cli_json_puts(root);
    json_object_put(root);
}

static void frame_text(const struct pyframe *f)
{
    if (f->line > 0)
        printf("    %s (%s:%d)\n", text_safe(f->function), text_safe(f->file), f->line);
    else
        printf("    %s (%s)\n", text_safe(f->function), text_safe(f->file));
}

static void natframe_text(const struct native_frame *f)
{
    const char *base = strrchr(f->object, '/');

    base = base ? base + 1 : f->object;
    if (f->function)
        printf("    %s (%s) [native]\n", text_safe(f->function), base[0] ? text_safe(base) : "?");
    else
        printf("    0x%llx (%s+0x%llx) [native]\n", (unsigned long long)f->ip,
               base[0] ? text_safe(base) : "?", (unsigned long long)f->offset);
}

static void frames_text(const struct pythread *t, const struct merged *mg)
{
    if (mg && mg->n) {
        for (size_t k = 0; k < mg->n; k++)
            if (mg->m[k].native)
                natframe_text(mg->m[k].nat);
            else
                frame_text(mg->m[k].py);
        return;
    }
    for (uint32_t k = 0; k < t->nframes; k++)
        frame_text(&t->frames[k]);
}

static void emit_text(const char *file, const struct corefile *c, const struct pyproc *p,
                      const struct pysample *s, const struct merged *mg)
{
    const char *sn = c->info.signo > 0 ? signal_name(c->info.signo) : NULL;

    printf("Core %s of process %d: %s\n", text_safe(file), c->info.pid,
           text_safe(c->info.psargs[0] ? c->info.psargs : c->info.fname));
    if (signal_tid(c))
        printf("Signal %d%s%s, thread %d\n", c->info.signo, sn ? " " : "", sn ? sn : "",
               signal_tid(c));
    else if (c->info.signo > 0)
        printf("Signal %d%s%s (the process was stopped to take the core, as gcore does)\n",
               c->info.signo, sn ? " " : "", sn ? sn : "");
    printf("Python %s\n", text_safe(pyproc_version(p)));
    if (c->note)
        printf("Note: %s\n", text_safe(c->note));
    for (uint32_t i = 0; i < s->nthreads; i++) {
        const struct pythread *t = &s->threads[i];

        printf("\nThread %d \"%s\"%s%s\n", t->tid, t->name ? text_safe(t->name) : "?",
               t->gil ? " (holds GIL)" : "",
               t->tid > 0 && t->tid == signal_tid(c) ? " (the signal's thread)" : "");
        if (t->status < 0)
            printf("    (stack unreadable: %s)\n", app_status_str(t->status));
        else if (t->no_python)
            printf("    (no Python frame)\n");
        frames_text(t, mg ? &mg[i] : NULL);
        if (t->truncated)
            printf("    ... (truncated at %u frames)\n", t->nframes);
    }
}

/* --native: each Python thread's native stack, from the core thread of its TID, merged with
 * its Python frames into mg[i] (n 0 for a thread the core has no registers of). The stacks
 * are kept in st[i] (the merged frames point into them). */
/* The signal's thread: where it crashed matters even inside the interpreter, which the merge
 * drops (PyBytes_FromStringAndSize, say, under a ctypes read). When the merged stack does not
 * begin with the innermost native frame, the native frames up to the first evaluation-loop
 * frame that the merge left out go first. */
static void keep_crash_frames(const struct native_stack *st, struct merged *mg)
{
    size_t k = 0, add = 0;
    struct merged_frame *v;

    if (mg->n && mg->m[0].native && mg->m[0].nat == &st->frames[0])
        return;
    while (k < st->n && !st->frames[k].eval)
        k++;
    v = x_calloc(k + mg->n + 1, sizeof(*v));
    for (size_t i = 0; i < k; i++) {
        bool kept = false;

        for (size_t j = 0; j < mg->n && !kept; j++)
            kept = mg->m[j].native && mg->m[j].nat == &st->frames[i];
        if (!kept)
            v[add++] = (struct merged_frame){.native = true, .nat = &st->frames[i]};
    }
    memcpy(v + add, mg->m, mg->n * sizeof(*v));
    free(mg->m);
    mg->m = v;
    mg->n += add;
}

static void gather_native(struct native_core *nc, const struct corefile *c,
                          const struct pysample *s, struct native_stack *st, struct merged *mg)
{
    for (uint32_t i = 0; i < s->nthreads; i++)
        for (size_t k = 0; k < c->info.nthreads; k++)
            if (s->threads[i].tid > 0 && c->info.threads[k].tid == s->threads[i].tid) {
                native_core_thread(nc, k, &st[i]);
                if (st[i].n)
                    native_merge(&st[i], &s->threads[i], &mg[i].m, &mg[i].n);
                if (st[i].n && s->threads[i].tid == signal_tid(c))
                    keep_crash_frames(&st[i], &mg[i]);
                break;
            }
}

int cmd_dump_core(const char *core, const char *exe, const char *lib_search, bool json, bool native,
                  const struct pyproc_opts *py)
{
    struct native_core *nc = NULL;
    struct native_stack *st = NULL;
    struct merged *mg = NULL;
    struct core_opts co = {exe, lib_search};
    struct app_err err = {0};
    struct corefile *c = NULL;
    struct pyproc *p = NULL;
    const struct pysample *s = NULL;
    int rc = corefile_open(core, &co, &c, &err);

    if (rc == 0)
        rc = pyproc_open_core(c, py, &p, &err);
    if (rc == 0)
        rc = pyproc_sample(p, &s, &err);
    if (rc == 0 && native) {
        nc = native_core_open(c);
        st = x_calloc(s->nthreads + 1, sizeof(*st));
        mg = x_calloc(s->nthreads + 1, sizeof(*mg));
        gather_native(nc, c, s, st, mg);
    }
    if (json)
        emit_json(core, c, p, rc == 0 ? s : NULL, mg, native, rc < 0 ? err.msg : NULL);
    else if (rc == 0)
        emit_text(core, c, p, s, mg);
    for (uint32_t i = 0; mg && i < s->nthreads; i++) {
        free(mg[i].m);
        native_stack_fini(&st[i]);
    }
    free(mg);
    free(st);
    native_core_close(nc);
    if (rc < 0)
        fprintf(stderr, "ranktop dump: core %s: %s\n", text_safe(core), text_safe(err.msg));
    pyproc_free(p);
    corefile_free(c);
    return rc < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
