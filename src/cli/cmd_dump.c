/* `ranktop dump`: one consistent look at the Python stacks of some processes, as text (like
 * py-spy dump) or as JSON in the documented shape. Main thread only; each process is attached,
 * sampled and released in turn, so a process that cannot be read costs only its own line. */
#include "cli.h"

#include "ranktop/procenv.h"
#include "ranktop/procscan.h"
#include "ranktop/pystack.h"
#include "ranktop/util.h"

#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DUMP_ATTEMPTS 5

struct dump_opts {
    int *pids;
    int npids;
    bool json;
    struct pyproc_opts py;
};

static void dump_usage(FILE *f)
{
    fputs("usage: ranktop dump -p PID[,PID...] [options]\n"
          "\n"
          "Prints every thread's Python stack of each process, innermost frame first, without\n"
          "stopping the process.\n"
          "\n"
          "  -p, --pid PID[,PID...]   processes to read (repeatable)\n"
          "  -j, --json               JSON output (see README for the shape)\n"
          "      --max-frames N       frames kept per thread (default 4096)\n"
          "  -h, --help               this help\n"
          "\n"
          "Exit status: 0 when every process was read, 1 when some were not, 2 on bad usage.\n",
          f);
}

static int parse_dump_args(int argc, char **argv, struct dump_opts *o)
{
    static const struct option longs[] = {{"pid", required_argument, NULL, 'p'},
                                          {"json", no_argument, NULL, 'j'},
                                          {"max-frames", required_argument, NULL, 'F'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    char err[160];
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "p:jh", longs, NULL)) != -1) {
        if (c == 'p' && cli_parse_pids(optarg, &o->pids, &o->npids, err, sizeof(err)) < 0) {
            fprintf(stderr, "ranktop dump: %s\n", err);
            return 2;
        } else if (c == 'j') {
            o->json = true;
        } else if (c == 'F') {
            char *end;
            long v = strtol(optarg, &end, 10);

            if (*end || v < 1 || v > 1000000) {
                fprintf(stderr, "ranktop dump: --max-frames wants 1..1000000, got '%s'\n", optarg);
                return 2;
            }
            o->py.max_frames = (uint32_t)v;
        } else if (c == 'h') {
            dump_usage(stdout);
            return 0;
        } else if (c != 'p') {
            dump_usage(stderr);
            return 2;
        }
    }
    if (optind < argc || o->npids == 0) {
        fprintf(stderr, "ranktop dump: %s\n",
                optind < argc ? "unexpected argument" : "no process given: use -p PID");
        dump_usage(stderr);
        return 2;
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
    return s == PYTHREAD_RUNNING ? "running" : s == PYTHREAD_IDLE ? "idle" : "unknown";
}

static json_object *thread_json(const struct pythread *t)
{
    json_object *o = json_object_new_object(), *frames = json_object_new_array();

    json_object_object_add(o, "tid", t->tid > 0 ? json_object_new_int(t->tid) : NULL);
    json_object_object_add(o, "name", t->name ? json_object_new_string(t->name) : NULL);
    json_object_object_add(o, "gil", json_object_new_boolean(t->gil));
    json_object_object_add(o, "state", json_object_new_string(state_name(t->state)));
    for (uint32_t i = 0; i < t->nframes; i++) {
        const struct pyframe *f = &t->frames[i];
        json_object *fo = json_object_new_object();

        json_object_object_add(fo, "function", json_object_new_string(f->function));
        json_object_object_add(fo, "file", json_object_new_string(f->file));
        json_object_object_add(fo, "line", f->line > 0 ? json_object_new_int(f->line) : NULL);
        json_object_array_add(frames, fo);
    }
    json_object_object_add(o, "frames", frames);
    /* Added keys: why a thread has no frames. "error" is set when its stack could not be read
     * whole (never returned partial); "no_python" when it has no Python frame at all. */
    json_object_object_add(
        o, "error", t->status < 0 ? json_object_new_string(app_status_str(t->status)) : NULL);
    json_object_object_add(o, "no_python", json_object_new_boolean(t->no_python));
    return o;
}

static json_object *process_json(int pid, int rank, const char *python, const char *error,
                                 const struct pysample *s)
{
    json_object *o = json_object_new_object(), *threads = json_object_new_array();

    json_object_object_add(o, "pid", json_object_new_int(pid));
    json_object_object_add(o, "rank", rank >= 0 ? json_object_new_int(rank) : NULL);
    json_object_object_add(o, "python", python ? json_object_new_string(python) : NULL);
    json_object_object_add(o, "error", error ? json_object_new_string(error) : NULL);
    for (uint32_t i = 0; s && i < s->nthreads; i++)
        json_object_array_add(threads, thread_json(&s->threads[i]));
    json_object_object_add(o, "threads", threads);
    return o;
}

static void thread_text(const struct pythread *t)
{
    printf("\nThread %d \"%s\" (%s%s)\n", t->tid, t->name ? t->name : "?", state_name(t->state),
           t->gil ? ", holds GIL" : "");
    if (t->status < 0)
        printf("    (stack unreadable: %s)\n", app_status_str(t->status));
    else if (t->no_python)
        printf("    (no Python frame)\n");
    for (uint32_t i = 0; i < t->nframes; i++) {
        const struct pyframe *f = &t->frames[i];

        if (f->line > 0)
            printf("    %s (%s:%d)\n", f->function, f->file, f->line);
        else
            printf("    %s (%s)\n", f->function, f->file);
    }
    if (t->truncated)
        printf("    ... (truncated at %u frames)\n", t->nframes);
}

static void process_text(int pid, int rank, const char *python, const char *error,
                         const struct pysample *s)
{
    char cmd[512] = "";

    procenv_cmdline(pid, cmd, sizeof(cmd));
    if (rank >= 0)
        printf("Process %d (rank %d): %s\n", pid, rank, cmd);
    else
        printf("Process %d: %s\n", pid, cmd);
    if (python)
        printf("Python %s\n", python);
    if (error)
        printf("error: %s\n", error);
    for (uint32_t i = 0; s && i < s->nthreads; i++)
        thread_text(&s->threads[i]);
}

/* Reads one process and emits it; returns 0 when it was read. */
static int dump_one(const struct dump_opts *o, int pid, json_object *arr, bool first)
{
    struct app_err err = {0};
    struct pyproc *p = NULL;
    const struct pysample *s = NULL;
    struct rank_ident id;
    int rank, rc;

    /* The same launcher precedence as discovery: torchrun, MPI flavours, Horovod, Slurm. */
    rank = procscan_ident(pid, &id) == 0 ? id.rank : -1;
    rc = pyproc_open(pid, &o->py, &p, &err);
    if (rc == 0)
        rc = take_sample(p, &s, &err);
    if (rc < 0)
        s = NULL;
    if (o->json) {
        json_object_array_add(
            arr, process_json(pid, rank, p ? pyproc_version(p) : NULL, rc < 0 ? err.msg : NULL, s));
    } else {
        if (!first)
            fputs("\n", stdout);
        process_text(pid, rank, p ? pyproc_version(p) : NULL, rc < 0 ? err.msg : NULL, s);
    }
    if (rc < 0 && o->json)
        fprintf(stderr, "ranktop: %s\n", err.msg);
    pyproc_free(p);
    return rc;
}

int cmd_dump(int argc, char **argv)
{
    struct dump_opts o = {0};
    json_object *root = NULL, *arr = NULL;
    int rc = parse_dump_args(argc, argv, &o), failed = 0;

    if (rc >= 0) {
        free(o.pids);
        return rc;
    }
    if (o.json) {
        root = json_object_new_object();
        arr = json_object_new_array();
        json_object_object_add(root, "processes", arr);
    }
    for (int i = 0; i < o.npids; i++)
        failed += dump_one(&o, o.pids[i], arr, i == 0) < 0;
    if (o.json) {
        puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN |
                                                      JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(root);
    }
    free(o.pids);
    return failed ? 1 : 0;
}
