/* `ranktop dump`: one consistent look at the Python stacks of some processes, as text (like
 * py-spy dump) or as JSON in the documented shape. Main thread only; each process is attached,
 * sampled and released in turn, so a process that cannot be read costs only its own line (on
 * stderr, as every error). */
#include "cli.h"
#include "cli_discovery.h"
#include "cli_hosts.h"
#include "cli_locals.h"
#include "cli_opts.h"
#include "cli_remote.h"
#include "cli_waits.h"

#include "ranktop/discovery/discovery.h"
#include "ranktop/python/gil.h"
#include "ranktop/native/native.h"
#include "ranktop/proc/procenv.h"
#include "ranktop/proc/procscan.h"
#include "ranktop/python/pyasync.h"
#include "ranktop/python/pystack.h"
#include "ranktop/base/util.h"

#include <ctype.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DUMP_ATTEMPTS 5

struct dump_opts {
    int *pids;
    int npids;
    bool json, ranks, native, native_all, tasks;
    const char *core, *exe, *lib_search; /* --core: a core file instead of processes */
    bool subprocesses; /* py-spy's -s: each -p PID also stands for its descendants */
    bool locals;       /* --locals */
    struct pyproc_opts py;
    struct discovery_opts disc; /* --ranks: how to find them (ls's flags); its -p are ours */
    struct cli_hosts hosts;
    struct engine_remote_opts remote;
    struct waits *waits; /* --waits FILE; NULL: the built-in rules */
};

enum {
    OPT_MAX_FRAMES = 0x2000,
    OPT_RANKS,
    OPT_NATIVE,
    OPT_ASYNC,
    OPT_CORE,
    OPT_EXE,
    OPT_LIBS,
    OPT_FULL_NAMES,
    OPT_WAITS,
    OPT_LOCALS,
    OPT_NATIVE_ALL
};

/* --full-filenames: the text output names files by their full paths (JSON always does). Set
 * once by the option parser, read by the text printers; main thread only. */
static bool full_filenames;

/* A frame's file as the text output names it: short (path_short) unless --full-filenames. */
static const char *text_file(const char *file)
{
    return text_safe(full_filenames ? file : path_short(file));
}

static const struct cli_opt dump_opts_table[] = {
    {'p', "pid", "PID[,PID...]", "processes to read (repeatable)"},
    {OPT_RANKS, "ranks", NULL,
     "every rank discovery finds (as ranktop ls), on every host; --children-of and --match "
     "(below) narrow it, as in ranktop ls, and imply it"},
    {OPT_NATIVE, "native", NULL,
     "native (C/C++) frames too, merged with the Python ones: each thread is stopped briefly "
     "with ptrace"},
    {OPT_NATIVE_ALL, "native-all", NULL,
     "--native, and every other thread of the process too (threads without Python: NCCL's, "
     "CUDA's, C libraries'), native frames only, named by their comm"},
    {OPT_ASYNC, "async", NULL,
     "asyncio tasks too, under the thread running their loop: name, state, awaiting tasks and "
     "await chain (3.8-3.15, free-threaded 3.14t and 3.15t)"},
    {OPT_CORE, "core", "FILE",
     "read an ELF core file of a Python process instead (every thread's Python stack when "
     "the core was written)"},
    {OPT_EXE, "exe", "PYTHON",
     "with --core: the program the core's process ran, if not where "
     "the core says"},
    {OPT_LIBS, "lib-search", "DIR",
     "with --core: look for the core's mapped files (libpython...) in DIR first, by name"},
    {'s', "subprocesses", NULL,
     "each -p PID also means its descendants (as --children-of PID; PID itself when Python)"},
    {'t', "threads", NULL, "accepted for py-spy: thread ids are always shown"},
    {OPT_FULL_NAMES, "full-filenames", NULL,
     "text output: full file paths (default: package-relative, torch/nn/modules/module.py; "
     "JSON always has full paths)"},
    {OPT_LOCALS, "locals", NULL,
     "each frame's arguments and locals too, read from outside with bounded renderings "
     "(3.8-3.15)"},
    {'j', "json", NULL, "JSON output (see README for the shape)"},
    {OPT_MAX_FRAMES, "max-frames", "N", "frames kept per thread (default 4096)"},
    {OPT_WAITS, "waits", "FILE",
     "the rules naming each thread's kind of wait (default: the built-in table, "
     "share/ranktop/waits.rules)"},
    {0},
};

static const struct cli_opt *const dump_tables[] = {dump_opts_table, cli_opts_help, cli_disc_opts,
                                                    cli_hosts_opts, NULL};

static void dump_usage(FILE *f)
{
    fputs("usage: ranktop dump -p PID[,PID...] [options]\n"
          "       ranktop dump --ranks [--match REGEX] [--hosts LIST] [options]\n"
          "       ranktop dump --core FILE [--exe PYTHON] [--lib-search DIR] [options]\n"
          "\n"
          "Prints every thread's Python stack of each process, innermost frame first,\n"
          "without stopping the process.\n"
          "\n",
          f);
    cli_opts_usage(f, dump_tables);
    fputs("With --hosts, every host is dumped with --ranks.\n"
          "\n"
          "Exit status: 0 when every process was read, 1 when some were not, 2 on bad\n"
          "usage.\n",
          f);
}

/* One of dump's own options; returns 0, or 2 (usage) after a message. */
static int dump_option(int c, const char *arg, struct dump_opts *o)
{
    char *end;
    long v;

    switch (c) {
    case OPT_RANKS:
        o->ranks = true;
        return 0;
    case OPT_NATIVE:
        o->native = true;
        return 0;
    case OPT_NATIVE_ALL:
        o->native = o->native_all = true;
        return 0;
    case OPT_ASYNC:
        o->tasks = true;
        return 0;
    case OPT_LOCALS:
        o->locals = true;
        return 0;
    case 'j':
        o->json = true;
        return 0;
    case OPT_CORE:
        o->core = arg;
        return 0;
    case OPT_EXE:
        o->exe = arg;
        return 0;
    case OPT_LIBS:
        o->lib_search = arg;
        return 0;
    case 's':
        o->subprocesses = true;
        return 0;
    case 't':
        return 0;
    case OPT_FULL_NAMES:
        full_filenames = true;
        return 0;
    case OPT_WAITS:
        waits_free(o->waits);
        return cli_waits_load(arg, "dump", &o->waits);
    case OPT_MAX_FRAMES:
        v = strtol(arg, &end, 10);
        if (end == arg || *end || v < 1 || v > 1000000) {
            fprintf(stderr, "ranktop dump: --max-frames wants 1..1000000, got '%s'\n", arg);
            return 2;
        }
        o->py.max_frames = (uint32_t)v;
        return 0;
    default: /* getopt said what was wrong */
        return cli_try_help("dump");
    }
}

/* Whether --children-of or --match was given: they select ranks, so they imply --ranks (the
 * device tools' flags only say how to ask the tools, for --ranks or ls alike). */
static bool disc_selects(const struct discovery_opts *d)
{
    return d->nchildren_of || d->match;
}

/* --core reads one file: no process flag goes with it, and --exe and --lib-search only
 * with it. True (after a line) when the command line mixes them. */
static bool core_args_wrong(const struct dump_opts *o)
{
    const char *bad =
        o->core && (o->npids || o->ranks)       ? "--core reads a file: not with -p or --ranks"
        : o->core && o->tasks                   ? "--async does not read cores yet"
        : !o->core && (o->exe || o->lib_search) ? "--exe and --lib-search go with --core"
                                                : NULL;

    if (bad)
        fprintf(stderr, "ranktop dump: %s\n", bad);
    return bad != NULL;
}

static int parse_dump_args(int argc, char **argv, struct dump_opts *o)
{
    static struct cli_getopt g;
    int c, rc;

    cli_opts_getopt(dump_tables, &g);
    optind = 1;
    while ((c = getopt_long(argc, argv, g.shorts, g.longs, NULL)) != -1) {
        int h = cli_disc_handle(c, optarg, &o->disc, "dump");

        if (h == 0)
            h = cli_hosts_handle(c, optarg, &o->hosts, "dump");
        if (h < 0)
            return 2;
        if (h == 1)
            continue;
        if (c == 'h') {
            dump_usage(stdout);
            return 0;
        }
        if ((rc = dump_option(c, optarg, o)) != 0)
            return rc;
    }
    /* --children-of PID, so --ranks: the descendants are found by discovery. */
    if (o->subprocesses && cli_disc_subprocesses(&o->disc, "dump") < 0)
        return cli_try_help("dump");
    if (cli_disc_finish(&o->disc, &o->hosts, &o->remote, "dump") < 0)
        return 2;
    /* -p names processes to read as they are, found or not; the other flags find ranks. */
    o->pids = o->disc.pids;
    o->npids = o->disc.npids;
    o->disc.pids = NULL;
    o->disc.npids = 0;
    if (disc_selects(&o->disc))
        o->ranks = true;
    if (o->remote.nhosts)
        o->ranks = true;
    if (core_args_wrong(o))
        return cli_try_help("dump");
    if (optind < argc || (o->npids == 0 && !o->ranks && !o->core)) {
        fprintf(stderr, "ranktop dump: %s\n",
                optind < argc ? "unexpected argument" : "no process given: use -p PID or --ranks");
        return cli_try_help("dump");
    }
    return -1;
}

/* Takes a sample, retrying briefly while the interpreter starts or a thread read was torn. */
static int take_sample(struct pyproc *p, const struct pysample **s, struct app_err *err)
{
    int rc = 0;

    for (int i = 0; i < DUMP_ATTEMPTS; i++) {
        struct timespec ts = {0, 50 * 1000 * 1000};

        rc = pyproc_sample(p, s, err);
        if (rc == 0 && (*s)->dropped == 0)
            return 0;
        if (rc != 0 && rc != APP_E_STARTING && rc != APP_E_STALE)
            return rc;
        nanosleep(&ts, NULL);
    }
    return rc;
}

static const char *state_name(enum pythread_state s)
{
    return s == PYTHREAD_RUNNING   ? "running"
           : s == PYTHREAD_IDLE    ? "idle"
           : s == PYTHREAD_STOPPED ? "stopped"
                                   : "unknown";
}

/* A thread's state from its /proc letter, as the sample names a Python thread's. */
static const char *letter_state(char st)
{
    return st == 'R' ? "running" : st == 'T' || st == 't' ? "stopped" : st ? "idle" : "unknown";
}

/* --native: each thread's native stack merged with its Python stack, or why not. */
struct thread_native {
    struct native_stack st;
    struct pythread py; /* the Python stack read while the thread was stopped (owned copy) */
    struct merged_frame *m;
    size_t n;
    bool ok;
};

/* --native-all: a thread of the process that has no Python thread state. */
struct thread_other {
    int tid;
    char comm[32];
    char state; /* /proc's letter, 0 unknown */
    struct native_stack st;
    int status; /* 0 when st was unwound, else why not */
};

struct dump_native {
    bool on, all;
    struct thread_native *t; /* one per thread of the sample */
    struct thread_other *other;
    size_t nother;
    char err[512];          /* why native frames are missing (process or some thread) */
    struct native_ctx *ctx; /* owns the frames' names */
};

/* --async: the process's asyncio tasks and the sample's thread each is shown under (the
 * thread running its loop, else the main thread: tid == pid, or the last thread listed). */
struct dump_async {
    bool on;
    struct pyasync_list l;
    uint32_t *owner; /* thread index per task */
    char err[512];   /* why the tasks could not be read */
};

static void gather_async(struct pyproc *p, int pid, const struct pysample *s, struct dump_async *as)
{
    struct app_err err = {0};
    uint32_t main_ix;

    if (!as->on || !p || !s || s->nthreads == 0)
        return;
    if (pyasync_read(p, &as->l, &err) < 0) {
        snprintf(as->err, sizeof(as->err), "%s", err.msg);
        return;
    }
    main_ix = s->nthreads - 1;
    for (uint32_t i = 0; i < s->nthreads; i++)
        if (s->threads[i].tid == pid)
            main_ix = i;
    as->owner = x_calloc(as->l.n + 1, sizeof(*as->owner));
    for (size_t t = 0; t < as->l.n; t++) {
        as->owner[t] = main_ix;
        for (uint32_t i = 0; as->l.tasks[t].thread && i < s->nthreads; i++)
            if (s->threads[i].ident == as->l.tasks[t].thread)
                as->owner[t] = i;
    }
}

static void async_done(struct dump_async *as)
{
    pyasync_free(&as->l);
    free(as->owner);
}

static json_object *task_json(const struct pyasync_list *l, const struct pyasync_task *t)
{
    json_object *o = json_object_new_object(), *by = json_object_new_array(),
                *frames = json_object_new_array();

    json_object_object_add(o, "name", cli_json_str(t->name));
    json_object_object_add(o, "state", cli_json_str(pyasync_state_name(t->state)));
    for (size_t i = 0; i < t->nawaited_by; i++)
        json_object_array_add(by, cli_json_str(l->tasks[t->awaited_by[i]].name));
    json_object_object_add(o, "awaited_by", by);
    for (size_t i = 0; i < t->nframes; i++) {
        json_object *fo = json_object_new_object();

        json_object_object_add(fo, "function", cli_json_str(t->frames[i].function));
        json_object_object_add(fo, "file", cli_json_str(t->frames[i].file));
        json_object_object_add(
            fo, "line", t->frames[i].line > 0 ? json_object_new_int(t->frames[i].line) : NULL);
        json_object_array_add(frames, fo);
    }
    json_object_object_add(o, "frames", frames);
    /* false: its loop's thread is unknown (the loop is not running), shown under main */
    json_object_object_add(o, "thread_known", json_object_new_boolean(t->thread != 0));
    json_object_object_add(o, "truncated", json_object_new_boolean(t->chain_truncated));
    return o;
}

static void tasks_text(const struct dump_async *as, uint32_t ix)
{
    for (size_t k = 0; as->on && k < as->l.n; k++) {
        const struct pyasync_task *t = &as->l.tasks[k];

        if (as->owner[k] != ix)
            continue;
        printf("  Task \"%s\" (%s)", text_safe(t->name), pyasync_state_name(t->state));
        for (size_t i = 0; i < t->nawaited_by; i++)
            printf("%s\"%s\"", i ? ", " : " awaited by ",
                   text_safe(as->l.tasks[t->awaited_by[i]].name));
        printf("%s\n", t->thread ? "" : " [loop thread unknown]");
        for (size_t i = 0; i < t->nframes; i++)
            if (t->frames[i].line > 0)
                printf("      %s (%s:%d)\n", text_safe(t->frames[i].function),
                       text_file(t->frames[i].file), t->frames[i].line);
            else
                printf("      %s (%s)\n", text_safe(t->frames[i].function),
                       text_file(t->frames[i].file));
    }
}

json_object *cli_pyframe_json(const struct pyframe *f, bool kind)
{
    json_object *fo = json_object_new_object();

    if (kind)
        json_object_object_add(fo, "kind", cli_json_str("python"));
    json_object_object_add(fo, "function", cli_json_str(f->function));
    json_object_object_add(fo, "file", cli_json_str(f->file));
    json_object_object_add(fo, "line", f->line > 0 ? json_object_new_int(f->line) : NULL);
    return fo;
}

json_object *cli_natframe_json(const struct native_frame *f)
{
    json_object *fo = json_object_new_object();
    char addr[24];

    snprintf(addr, sizeof(addr), "0x%llx", (unsigned long long)f->ip);
    json_object_object_add(fo, "kind", cli_json_str("native"));
    json_object_object_add(fo, "function", f->function ? cli_json_str(f->function) : NULL);
    json_object_object_add(fo, "file", cli_json_str(f->object));
    json_object_object_add(fo, "line", NULL);
    json_object_object_add(fo, "address", cli_json_str(addr));
    return fo;
}

/* A thread's kind of wait (cli_waits.h): {"kind", "why", "state", "syscall", "syscall_name",
 * "wchan"}, null where unknown; null as a whole when no wait was judged. */
static json_object *wait_json(const struct cli_wait *w)
{
    json_object *o;
    const char *sc;
    char st[2] = {0};

    if (!w)
        return NULL;
    o = json_object_new_object();
    st[0] = w->pw.state;
    sc = waits_syscall_name(w->pw.syscall);
    json_object_object_add(o, "kind", cli_json_str(wait_kind_name(w->kind)));
    json_object_object_add(o, "why", cli_json_str(w->why));
    json_object_object_add(o, "state", st[0] ? cli_json_str(st) : NULL);
    json_object_object_add(o, "syscall",
                           w->pw.syscall >= 0 ? json_object_new_int(w->pw.syscall) : NULL);
    json_object_object_add(o, "syscall_name", sc ? cli_json_str(sc) : NULL);
    json_object_object_add(o, "wchan", w->pw.wchan[0] ? cli_json_str(w->pw.wchan) : NULL);
    return o;
}

/* With --native the Python frames come from a second read: each is paired with the sample's
 * next frame of the same function and file (*k: the sample frame to look from). */
static uint32_t sample_frame_of(const struct pythread *t, const struct pyframe *f, uint32_t *k)
{
    for (uint32_t i = *k; i < t->nframes; i++)
        if (!strcmp(t->frames[i].function, f->function) && !strcmp(t->frames[i].file, f->file))
            return *k = i + 1, i;
    return UINT32_MAX; /* not in the sample: the next frame looks from the same place */
}

static json_object *locals_json_of(const struct cli_locals *lc, const struct pythread *t,
                                   uint32_t ix, const struct pyframe *f, uint32_t *k)
{
    uint32_t at = sample_frame_of(t, f, k);

    return at == UINT32_MAX ? NULL : cli_locals_json(lc, ix, at);
}

static json_object *thread_json(const struct pythread *t, const struct cli_locals *lc,
                                const struct dump_native *nv, const struct thread_native *tn,
                                const struct dump_async *as, uint32_t ix, const struct cli_wait *w)
{
    json_object *o = json_object_new_object(), *frames = json_object_new_array();

    json_object_object_add(o, "tid", t->tid > 0 ? json_object_new_int(t->tid) : NULL);
    json_object_object_add(o, "name", t->name ? cli_json_str(t->name) : NULL);
    json_object_object_add(o, "gil", json_object_new_boolean(t->gil));
    json_object_object_add(o, "state", cli_json_str(state_name(t->state)));
    if (tn && tn->ok) {
        uint32_t k = 0;
        for (size_t i = 0; i < tn->n; i++) {
            json_object *fo = tn->m[i].native ? cli_natframe_json(tn->m[i].nat)
                                              : cli_pyframe_json(tn->m[i].py, true);
            if (lc->on && !tn->m[i].native)
                json_object_object_add(fo, "locals", locals_json_of(lc, t, ix, tn->m[i].py, &k));
            json_object_array_add(frames, fo);
        }
    } else {
        for (uint32_t i = 0; i < t->nframes; i++) {
            json_object *fo = cli_pyframe_json(&t->frames[i], nv->on);
            if (lc->on)
                json_object_object_add(fo, "locals", cli_locals_json(lc, ix, i));
            json_object_array_add(frames, fo);
        }
    }
    json_object_object_add(o, "frames", frames);
    /* Added keys: why a thread has no frames. "error" is set when its stack could not be read
     * whole (never returned partial); "no_python" when it has no Python frame at all. */
    json_object_object_add(o, "error",
                           t->status < 0 ? cli_json_str(app_status_str(t->status)) : NULL);
    json_object_object_add(o, "no_python", json_object_new_boolean(t->no_python));
    /* The frame cap (--max-frames) was hit: "frames" holds the innermost ones only. */
    json_object_object_add(o, "truncated", json_object_new_boolean(t->truncated));
    json_object_object_add(o, "wait", wait_json(w));
    if (as->on) { /* --async: the tasks of the loop this thread runs */
        json_object *tasks = json_object_new_array();

        for (size_t k = 0; as->owner && k < as->l.n; k++)
            if (as->owner[k] == ix)
                json_object_array_add(tasks, task_json(&as->l, &as->l.tasks[k]));
        json_object_object_add(o, "tasks", tasks);
    }
    return o;
}

/* The kinds of wait of one process's threads (one per thread of the sample, NULL without a
 * sample), the interpreter's GC flag and which thread is its main one. */
struct dump_waits {
    struct cli_wait *t;
    int in_gc;        /* 1, 0, -1 unknown */
    uint32_t main_ix; /* the main thread: tid == pid, else the last one listed */
};
/* --native-all: a thread without Python, in the shape of the others ("python": false). */
static json_object *other_json(const struct thread_other *t)
{
    json_object *o = json_object_new_object(), *frames = json_object_new_array();

    json_object_object_add(o, "tid", json_object_new_int(t->tid));
    json_object_object_add(o, "name", cli_json_str(t->comm));
    json_object_object_add(o, "python", json_object_new_boolean(false));
    json_object_object_add(o, "gil", json_object_new_boolean(false));
    json_object_object_add(o, "state", cli_json_str(letter_state(t->state)));
    for (size_t i = 0; t->status == 0 && i < t->st.n; i++)
        json_object_array_add(frames, cli_natframe_json(&t->st.frames[i]));
    json_object_object_add(o, "frames", frames);
    json_object_object_add(o, "error",
                           t->status < 0 ? cli_json_str(app_status_str(t->status)) : NULL);
    json_object_object_add(o, "no_python", json_object_new_boolean(true));
    json_object_object_add(o, "truncated", json_object_new_boolean(false));
    return o;
}

static json_object *process_json(int pid, int rank, const char *python, const char *error,
                                 const struct pysample *s, const struct cli_locals *lc,
                                 const struct dump_native *nv, const struct dump_async *as,
                                 const struct pyproc_stats *st, const struct dump_waits *dw)
{
    json_object *o = json_object_new_object(), *threads = json_object_new_array();

    json_object_object_add(o, "pid", json_object_new_int(pid));
    json_object_object_add(o, "rank", rank >= 0 ? json_object_new_int(rank) : NULL);
    json_object_object_add(o, "python", python ? cli_json_str(python) : NULL);
    json_object_object_add(o, "error", error ? cli_json_str(error) : NULL);
    /* How its memory was read, and why /proc/PID/mem: null until a read decided it. */
    json_object_object_add(o, "reader", st->reader ? cli_json_str(st->reader) : NULL);
    json_object_object_add(o, "reader_why", st->reader_why ? cli_json_str(st->reader_why) : NULL);
    if (nv->on) /* only with --native: the output is otherwise exactly as before */
        json_object_object_add(o, "native_error", nv->err[0] ? cli_json_str(nv->err) : NULL);
    if (as->on) { /* only with --async */
        json_object_object_add(o, "async_error", as->err[0] ? cli_json_str(as->err) : NULL);
        /* Tasks found but not read: the read's caps (per loop thread, bytes) left them out. */
        json_object_object_add(o, "tasks_not_read", json_object_new_int64((int64_t)as->l.not_read));
    }
    /* The rank's kind of wait: its main thread's; and whether its interpreter collects. */
    json_object_object_add(o, "wait", wait_json(dw->t ? &dw->t[dw->main_ix] : NULL));
    json_object_object_add(o, "in_gc", dw->in_gc >= 0 ? json_object_new_boolean(dw->in_gc) : NULL);
    for (uint32_t i = 0; s && i < s->nthreads; i++) {
        json_object *t = thread_json(&s->threads[i], lc, nv, nv->t ? &nv->t[i] : NULL, as, i,
                                     dw->t ? &dw->t[i] : NULL);

        if (nv->all) /* only with --native-all: which threads have a Python state */
            json_object_object_add(t, "python", json_object_new_boolean(true));
        json_object_array_add(threads, t);
    }
    for (size_t i = 0; i < nv->nother; i++)
        json_object_array_add(threads, other_json(&nv->other[i]));
    json_object_object_add(o, "threads", threads);
    return o;
}

static void pyframe_text(const struct pyframe *f)
{
    if (f->line > 0)
        printf("    %s (%s:%d)\n", text_safe(f->function), text_file(f->file), f->line);
    else
        printf("    %s (%s)\n", text_safe(f->function), text_file(f->file));
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

static void thread_text(const struct pythread *t, const struct cli_locals *lc, uint32_t ix,
                        const struct thread_native *tn, const struct cli_wait *w)
{
    uint32_t k = 0, at;

    printf("\nThread %d \"%s\" (%s%s)", t->tid, t->name ? text_safe(t->name) : "?",
           state_name(t->state), t->gil ? ", holds GIL" : "");
    if (w)
        printf("  wait: %s (%s)", wait_kind_name(w->kind), text_safe(w->why));
    printf("\n");
    if (t->status < 0)
        printf("    (stack unreadable: %s)\n", app_status_str(t->status));
    else if (t->no_python && !(tn && tn->ok))
        printf("    (no Python frame)\n");
    if (tn && tn->ok) {
        for (size_t i = 0; i < tn->n; i++)
            if (tn->m[i].native)
                natframe_text(tn->m[i].nat);
            else {
                pyframe_text(tn->m[i].py);
                if (lc->on && (at = sample_frame_of(t, tn->m[i].py, &k)) != UINT32_MAX)
                    cli_locals_text(lc, ix, at);
            }
    } else {
        for (uint32_t i = 0; i < t->nframes; i++) {
            pyframe_text(&t->frames[i]);
            cli_locals_text(lc, ix, i);
        }
    }
    if (t->truncated)
        printf("    ... (truncated at %u frames)\n", t->nframes);
}

static void other_text(const struct thread_other *t)
{
    printf("\nThread %d \"%s\" (%s, no Python)\n", t->tid, text_safe(t->comm),
           letter_state(t->state));
    if (t->status < 0)
        printf("    (native stack unreadable: %s)\n", app_status_str(t->status));
    for (size_t i = 0; t->status == 0 && i < t->st.n; i++)
        natframe_text(&t->st.frames[i]);
}

/* A process that was read: its header and threads on stdout (what could not be read goes to
 * stderr, see tell_error). A reader other than process_vm_readv is said in the header of the
 * first process read through it (*said: the last one said), with why. */
static void process_text(int pid, int rank, const char *python, const struct pysample *s,
                         const struct cli_locals *lc, const struct dump_native *nv,
                         const struct dump_async *as, const struct pyproc_stats *st,
                         const char **said, const struct dump_waits *dw)
{
    char cmd[512] = "";

    procenv_cmdline(pid, cmd, sizeof(cmd));
    if (rank >= 0)
        printf("Process %d (rank %d): %s\n", pid, rank, text_safe(cmd));
    else
        printf("Process %d: %s\n", pid, text_safe(cmd));
    if (python)
        printf("Python %s\n", text_safe(python));
    if (st->reader && st->reader_why && st->reader_why != *said)
        printf("Memory reader: %s (%s)\n", st->reader, st->reader_why);
    if (st->reader)
        *said = st->reader_why;
    if (dw->t) /* the rank's: its main thread's */
        printf("Wait: %s (%s)\n", wait_kind_name(dw->t[dw->main_ix].kind),
               text_safe(dw->t[dw->main_ix].why));
    for (uint32_t i = 0; s && i < s->nthreads; i++) {
        thread_text(&s->threads[i], lc, i, nv->t ? &nv->t[i] : NULL, dw->t ? &dw->t[i] : NULL);
        tasks_text(as, i);
    }
    for (size_t i = 0; i < nv->nother; i++)
        other_text(&nv->other[i]);
    if (as->on && as->l.not_read)
        printf("  ... %zu more tasks not read (a read takes at most %d tasks a loop thread and "
               "%u MiB of names and frames)\n",
               as->l.not_read, PYASYNC_THREAD_TASKS, PYASYNC_MAX_BYTES >> 20);
}

/* The hook's read: the stopped thread's Python stack, from a second reader so that the
 * sample being dumped stays valid; copied, since the next read reuses the reader's buffers. */
struct stopped_read {
    struct pyproc *p;
    uint64_t ident;
    struct pythread *out;
    bool ok;
};

static void copy_pythread(const struct pythread *t, struct pythread *out)
{
    struct pyframe *f = x_calloc(t->nframes ? t->nframes : 1, sizeof(*f));

    *out = *t;
    out->name = NULL;
    for (uint32_t i = 0; i < t->nframes; i++)
        f[i] = (struct pyframe){x_strdup(t->frames[i].function), x_strdup(t->frames[i].file),
                                t->frames[i].line, t->frames[i].entry, t->frames[i].key};
    out->frames = f;
}

static void read_stopped(void *arg, int tid)
{
    struct stopped_read *r = arg;
    const struct pythread *t = pyproc_sample_thread(r->p, r->ident);

    (void)tid;
    if (t) {
        copy_pythread(t, r->out);
        r->ok = true;
    }
}

#define DUMP_MAX_TASKS 4096

/* --native-all: the process's threads the sample has no Python state for, unwound natively
 * and named by their comm. A thread that exits meanwhile is left out; one that cannot be
 * unwound is listed with why. */
static void gather_others(struct native_ctx *c, int pid, const struct pysample *s,
                          struct dump_native *nv)
{
    int *tids = x_calloc(DUMP_MAX_TASKS, sizeof(*tids));
    size_t n = procscan_threads(pid, tids, DUMP_MAX_TASKS);
    struct app_err err = {0};

    nv->other = x_calloc(n ? n : 1, sizeof(*nv->other));
    for (size_t k = 0; k < n; k++) {
        struct thread_other *o = &nv->other[nv->nother];
        bool python = false;

        for (uint32_t i = 0; i < s->nthreads && !python; i++)
            python = s->threads[i].tid == tids[k];
        if (python || procscan_thread_comm(pid, tids[k], o->comm, sizeof(o->comm)) < 0)
            continue;
        o->tid = tids[k];
        o->state = procscan_thread_state(pid, tids[k]);
        o->status = native_unwind(c, tids[k], NULL, &o->st, &err);
        if (o->status == APP_E_GONE)
            continue;
        nv->nother++;
    }
    free(tids);
}

/* Unwinds every thread of the sample, reading its Python stack again while it is stopped so
 * that the merge is of one instant (the sample's own stack when that read fails); a thread or
 * process that cannot be traced keeps its Python frames and says why once. */
static void gather_native(int pid, const struct dump_opts *o, const struct pysample *s,
                          struct dump_native *nv)
{
    struct native_ctx *c = NULL;
    struct pyproc *p2 = NULL;
    struct app_err err = {0};
    bool perm = false;
    char *notes;

    if (!nv->on || !s)
        return;
    if (native_open(pid, &c, &err) < 0) {
        snprintf(nv->err, sizeof(nv->err), "%s", err.msg);
        return;
    }
    if (pyproc_open(pid, &o->py, &p2, NULL) < 0)
        p2 = NULL;
    else /* warm its caches (code objects, names) now, not while a thread is stopped */
        pyproc_sample(p2, &(const struct pysample *){NULL}, NULL);
    nv->t = x_calloc(s->nthreads ? s->nthreads : 1, sizeof(*nv->t));
    for (uint32_t i = 0; i < s->nthreads; i++) {
        struct thread_native *tn = &nv->t[i];
        struct stopped_read rd = {p2, s->threads[i].ident, &tn->py, false};
        struct native_hook hook = {read_stopped, &rd};

        if (s->threads[i].tid <= 0)
            continue;
        if (native_unwind(c, s->threads[i].tid, p2 ? &hook : NULL, &tn->st, &err) < 0) {
            if (!nv->err[0])
                snprintf(nv->err, sizeof(nv->err), "%s", err.msg);
            if ((perm = err.code == APP_E_PERM))
                break; /* the same for every thread */
            continue;
        }
        native_merge(&tn->st, rd.ok ? &tn->py : &s->threads[i], &tn->m, &tn->n);
        tn->ok = true;
    }
    pyproc_free(p2);
    if (nv->all && !perm)
        gather_others(c, pid, s, nv);
    /* Objects whose symbols were skipped (a FIFO for a debug file, a table over the cap). */
    notes = native_take_notes(c);
    for (const char *l = notes; l && *l; l += strcspn(l, "\n") + 1)
        fprintf(stderr, "ranktop dump: %.*s\n", (int)strcspn(l, "\n"), l);
    free(notes);
    /* The stacks point into the context's names: keep it until the output is written. */
    nv->ctx = c;
}

static void native_done(struct dump_native *nv, uint32_t nthreads)
{
    for (uint32_t i = 0; nv->t && i < nthreads; i++) {
        struct pythread *py = &nv->t[i].py;

        for (uint32_t k = 0; py->frames && k < py->nframes; k++) {
            free((char *)py->frames[k].function);
            free((char *)py->frames[k].file);
        }
        free((struct pyframe *)py->frames);
        native_stack_fini(&nv->t[i].st);
        free(nv->t[i].m);
    }
    free(nv->t);
    for (size_t i = 0; i < nv->nother; i++)
        native_stack_fini(&nv->other[i].st);
    free(nv->other);
    native_close(nv->ctx);
}

/* Each thread's kernel view (state, syscall, wait channel) and the interpreter's GC and GIL, read
 * right after the sample so that they describe the same moment. gc.collecting is the
 * interpreter's: the thread holding the GIL is the one collecting, so the others are not
 * (unless no holder is known). */
static void gather_waits(struct pyproc *p, int pid, const struct pysample *s, struct dump_waits *dw)
{
    struct pygil *g = p ? pygil_new(p) : NULL;
    struct pygil_sample gs;
    struct app_err err = {0};
    int waiters = -1;

    dw->in_gc = -1;
    if (g && pygil_sample(g, &gs, &err) == 0 && gs.known) {
        dw->in_gc = gs.in_gc;
        waiters = gs.waiters;
    }
    pygil_free(g);
    if (!s || s->nthreads == 0)
        return;
    dw->t = x_calloc(s->nthreads, sizeof(*dw->t));
    dw->main_ix = s->nthreads - 1;
    for (uint32_t i = 0; i < s->nthreads; i++) {
        const struct pythread *t = &s->threads[i];
        /* Not holding the GIL counts (as a possible GIL wait) only while another thread holds
         * it and, where glibc's waiter count is known, some thread waits for it: a thread
         * asleep on any other lock looks the same from outside. */
        int holds = t->gil ? 1 : s->gil_locked && waiters != 0 ? 0 : -1;

        if (t->tid == pid)
            dw->main_ix = i;
        cli_wait_read(pid, t->tid, dw->in_gc == 1 && holds == 0 ? 0 : dw->in_gc, holds, &dw->t[i]);
    }
}

/* The verdicts, once the native frames (--native) are there to be matched too. */
static void classify_waits(const struct dump_opts *o, const struct pysample *s,
                           const struct dump_native *nv, struct dump_waits *dw)
{
    for (uint32_t i = 0; dw->t && i < s->nthreads; i++) {
        const struct thread_native *tn = nv->t && nv->t[i].ok ? &nv->t[i] : NULL;

        cli_wait_classify(cli_waits_table(o->waits), s->threads[i].frames, s->threads[i].nframes,
                          tn ? tn->m : NULL, tn ? tn->n : 0, &dw->t[i]);
    }
}

/* What could not be read of process pid, on stderr like every error, text or JSON (JSON keeps
 * it in its error fields too): "ranktop dump: process PID: [what: ]msg", without the
 * "process PID: " when msg names the process itself. */
static void tell_error(int pid, const char *what, const char *msg)
{
    char me[32];
    int n = snprintf(me, sizeof(me), "process %d", pid);
    bool named = false;

    for (const char *at = strstr(msg, me); at && !named; at = strstr(at + 1, me))
        named = !isdigit((unsigned char)at[n]);
    fprintf(stderr, "ranktop dump: %s%s%s%s%s\n", named ? "" : me, named ? "" : ": ",
            what ? what : "", what ? ": " : "", text_safe(msg));
}

/* Reads one process and emits it; shown counts the processes printed as text so far, said is
 * the memory reader's reason the text said last. Returns 0 when it was read. */
static int dump_one(const struct dump_opts *o, int pid, json_object *arr, int *shown,
                    const char **said)
{
    struct app_err err = {0};
    struct pyproc_stats st = {0};
    struct pyproc *p = NULL;
    const struct pysample *s = NULL;
    struct dump_native nv = {.on = o->native, .all = o->native_all};
    struct dump_async as = {.on = o->tasks};
    struct dump_waits dw = {0};
    struct cli_locals lc = {.on = o->locals};
    struct rank_ident id;
    int rank, rc;

    /* The same launcher precedence as discovery: torchrun, MPI flavours, Horovod, Slurm. */
    rank = procscan_ident(pid, &id) == 0 ? id.rank : -1;
    rc = pyproc_open(pid, &o->py, &p, &err);
    if (rc == 0)
        rc = take_sample(p, &s, &err);
    if (rc < 0)
        s = NULL;
    cli_locals_gather(p, s, &lc); /* first: the other reads below may move the reader on */
    gather_waits(p, pid, s, &dw);
    gather_native(pid, o, s, &nv);
    classify_waits(o, s, &nv, &dw);
    gather_async(p, pid, s, &as);
    if (p)
        pyproc_get_stats(p, &st);
    if (o->json) {
        json_object_array_add(arr,
                              process_json(pid, rank, p ? pyproc_version(p) : NULL,
                                           rc < 0 ? err.msg : NULL, s, &lc, &nv, &as, &st, &dw));
    } else if (rc == 0) {
        if ((*shown)++)
            fputs("\n", stdout);
        process_text(pid, rank, p ? pyproc_version(p) : NULL, s, &lc, &nv, &as, &st, said, &dw);
    }
    if (rc < 0)
        tell_error(pid, NULL, err.msg);
    if (nv.err[0])
        tell_error(pid, "native frames", nv.err);
    if (as.err[0])
        tell_error(pid, NULL, as.err);
    free(dw.t);
    async_done(&as);
    cli_locals_fini(&lc);
    native_done(&nv, s ? s->nthreads : 0);
    pyproc_free(p);
    return rc;
}

/* --ranks: the Python processes discovery finds on this node, as ranktop ls lists them with
 * the same discovery flags; a pid -p named already is not read twice. Returns 0, or 2 for a
 * bad --match (a usage error). */
static int add_ranks(struct dump_opts *o)
{
    struct discovery d;
    struct app_err err = {0};
    int rc;

    discovery_init(&d);
    if ((rc = discovery_run(&o->disc, &d, &err)) < 0)
        fprintf(stderr, "ranktop dump: %s\n", err.msg);
    for (size_t i = 0; i < d.nprocs; i++) {
        bool dup = false;

        for (int k = 0; k < o->npids; k++)
            dup |= o->pids[k] == d.procs[i].pid;
        if (d.procs[i].alive && d.procs[i].python && !dup) {
            o->pids = x_reallocarray(o->pids, (size_t)o->npids + 1, sizeof(int));
            o->pids[o->npids++] = d.procs[i].pid;
        }
    }
    discovery_fini(&d);
    return rc == APP_E_USAGE ? 2 : 0;
}

/* What another host's ranktop said on stderr about its processes (a text dump's errors), each
 * line under the host's name; the remote shell's own lines are left out. Returns how many. */
static int relay_errors(const struct cli_remote_result *r)
{
    int n = 0;

    for (const char *c = r->res.err; c && *c;) {
        size_t len = strcspn(c, "\n");
        char *line = x_strndup(c, len);
        const char *t = !strncmp(line, "ranktop dump: ", 14) ? line + 14
                        : !strncmp(line, "ranktop: ", 9)     ? line + 9
                                                             : NULL;

        if (t && *t) {
            fprintf(stderr, "ranktop dump: %s: %s\n", r->host, text_safe(t));
            n++;
        }
        free(line);
        c += len + (c[len] != '\0');
    }
    return n;
}

/* A text dump as this version writes it: nothing (no rank there), or a "Process PID" line
 * first. Anything else is not a ranktop dump (a different program, a login banner). */
static bool text_dump_ok(const char *out)
{
    unsigned pid;
    char c;

    return !out || !out[0] || sscanf(out, "Process %u%c", &pid, &c) == 2;
}

/* Another host's dump: its JSON processes tagged with the host, or its text under a header;
 * a host that could not be read, or that answered with something other than a dump, is one
 * error entry (and an error line), in text as in JSON. Returns 0 when it was read whole. */
static int remote_one(const struct dump_opts *o, const struct cli_remote_result *r,
                      json_object *arr)
{
    json_object *doc = NULL, *procs;
    bool ok = r->rc == 0 && (r->res.status == 0 || r->res.status == 1);

    if (ok && o->json) {
        doc = json_tokener_parse(r->res.out ? r->res.out : "");
        ok = doc && json_object_object_get_ex(doc, "processes", &procs) &&
             json_object_is_type(procs, json_type_array);
    } else if (ok) {
        ok = text_dump_ok(r->res.out);
    }
    if (!ok) {
        const char *why =
            r->why[0] ? r->why
                      : "the remote ranktop did not answer with a dump (a different version?)";

        if (o->json) {
            json_object *e = json_object_new_object();

            json_object_object_add(e, "host", cli_json_str(r->host));
            json_object_object_add(e, "error", cli_json_str(why));
            json_object_object_add(e, "threads", json_object_new_array());
            json_object_array_add(arr, e);
        }
        fprintf(stderr, "ranktop dump: %s: %s\n", r->host, text_safe(why));
        json_object_put(doc);
        return -1;
    }
    if (!o->json) {
        printf("\n=== host %s ===\n", r->host);
        /* Remote text, line by line: its own newlines stay, nothing else reaches the terminal. */
        for (const char *c = r->res.out; c && *c;) {
            size_t n = strcspn(c, "\n");
            char *line = x_strndup(c, n);

            printf("%s%s", text_safe(line), c[n] ? "\n" : "");
            free(line);
            c += n + (c[n] != '\0');
        }
        /* A remote shell that failed without a ranktop line (kubectl's unknown flag, exit
         * 1) is said in its own words. */
        if (!relay_errors(r) && r->res.status != 0)
            fprintf(stderr, "ranktop dump: %s: %s\n", r->host, text_safe(r->why));
        return r->res.status == 0 ? 0 : -1;
    }
    for (size_t i = 0; i < json_object_array_length(procs); i++) {
        json_object *p = json_object_array_get_idx(procs, i);

        json_object_object_add(p, "host", cli_json_str(r->host));
        json_object_array_add(arr, json_object_get(p));
    }
    json_object_put(doc);
    return r->res.status == 0 ? 0 : -1;
}

static int dump_remote(const struct dump_opts *o, json_object *arr)
{
    char frames[32];
    const char *args[16] = {"dump", "--ranks", "--this-node"};
    struct cli_remote_result *res;
    int failed = 0, k = 3;

    if (o->json)
        args[k++] = "--json";
    if (o->native)
        args[k++] = o->native_all ? "--native-all" : "--native";
    if (full_filenames)
        args[k++] = "--full-filenames";
    if (o->tasks)
        args[k++] = "--async";
    if (o->locals)
        args[k++] = "--locals";
    if (o->py.max_frames) {
        snprintf(frames, sizeof(frames), "%u", o->py.max_frames);
        args[k++] = "--max-frames";
        args[k++] = frames;
    }
    cli_remote_run(&o->remote, args, 30000, &res);
    for (size_t i = 0; i < o->remote.nhosts; i++)
        failed += remote_one(o, &res[i], arr) < 0;
    cli_remote_free(res, o->remote.nhosts);
    return failed;
}

int cmd_dump(int argc, char **argv)
{
    struct dump_opts o = {0};
    json_object *root = NULL, *arr = NULL;
    int rc = parse_dump_args(argc, argv, &o), failed = 0, shown = 0;
    const char *said = NULL; /* the reader's reason the text said last */
    bool local = !o.remote.nhosts || o.remote.local;
    char me[64] = "";

    gethostname(me, sizeof(me) - 1);

    if (rc < 0 && o.ranks && local)
        rc = add_ranks(&o) ? 2 : -1;
    if (rc < 0 && o.core)
        rc = cmd_dump_core(o.core, o.exe, o.lib_search, o.json, o.native, &o.py);
    if (rc >= 0) {
        waits_free(o.waits);
        free(o.pids);
        cli_disc_fini(&o.disc);
        cli_hosts_fini(&o.hosts);
        return rc;
    }
    if (o.json) {
        root = json_object_new_object();
        arr = json_object_new_array();
        json_object_object_add(root, "processes", arr);
    }
    if (local && o.npids == 0 && !o.remote.nhosts) {
        if (o.disc.match)
            fprintf(stderr, "ranktop dump: no Python process matched --match '%s'\n",
                    text_safe(o.disc.match));
        else
            fprintf(stderr, "ranktop dump: no ranks found on this node (see ranktop ls)\n");
        failed++;
    }
    if (local && o.remote.nhosts && !o.json)
        printf("=== host %s ===\n", me);
    for (int i = 0; local && i < o.npids; i++)
        failed += dump_one(&o, o.pids[i], arr, &shown, &said) < 0;
    for (size_t i = 0; o.json && o.remote.nhosts && i < json_object_array_length(arr); i++)
        json_object_object_add(json_object_array_get_idx(arr, i), "host", cli_json_str(me));
    if (o.remote.nhosts)
        failed += dump_remote(&o, arr);
    if (o.json) {
        cli_json_puts(root);
        json_object_put(root);
    }
    free(o.pids);
    cli_disc_fini(&o.disc);
    cli_hosts_fini(&o.hosts);
    waits_free(o.waits);
    return failed ? 1 : 0;
}
