/* Sampler tests against real CPython processes: the pyproc reader on every interpreter.
 *
 * Each test forks its Python targets (the scripts in tests/py) as children of the Check test
 * process, so ptrace rules (Yama scope 1 included) let the reader look at them, waits for the
 * target's OUTDIR/ready, samples through include/ranktop/python/pystack.h and compares what it
 * reads with the ground truth the target wrote itself. Interpreters: pyenv's 3.8-3.13 and Debian's
 * /usr/bin/python3.11, all required (a missing one fails), or exactly $RANKTOP_PYTHONS.
 *
 * Children get PR_SET_PDEATHSIG(SIGKILL): in CK_FORK mode a failed ck_assert _exits without
 * running teardown, so that is what guarantees no target outlives its test; the normal path
 * kills and reaps them in ts_children_kill_all() (also the checked teardown). Failures are
 * collected per interpreter, printed to stderr in full and summarised in one final assertion,
 * so a single run shows every interpreter's mismatches. Single-threaded, like every Check test
 * process; the SIGALRM watchdog turns a hung pyproc_sample into a named failure. */
#include <check.h>
#include <errno.h>
#include <grp.h>
#include <json-c/json.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ranktop/base/hash.h"
#include "ranktop/python/pystack.h"
#include "ranktop/base/status.h"
#include "ranktop/base/util.h"
#include "tsupport.h"

#define MAX_TRUTH_THREADS 16
#define DEFAULT_MAX_FRAMES 4096
#define DEFAULT_MAX_THREADS 4096
#define FRAME_DIFF_LINES 8 /* frame mismatches printed per thread */
#define PICK_SAMPLES 20    /* samples tried to find one with every blocked thread */
#define GIL_SAMPLES 50
#define EXIT_SAMPLES 10000
#define EXIT_WALL_NS (30ull * 1000000000ull)
#define EXIT_AFTER_MS "200" /* exits_soon.py's life after ready */
#define CHURN_SAMPLES 2000
#define CHURN_WALL_NS (90ull * 1000000000ull)
#define WATCHDOG_S 300
#define STARTING_ROUNDS 8 /* start-ups raced per interpreter */
#define LABEL_MAX 256

static const char *str_or_null(const char *s)
{
    return s ? s : "(null)";
}

static bool str_eq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

static bool utf8_valid(const char *s)
{
    const unsigned char *u = (const unsigned char *)s;

    while (*u) {
        int n = *u < 0x80           ? 0
                : (*u >> 5) == 0x6  ? 1
                : (*u >> 4) == 0xe  ? 2
                : (*u >> 3) == 0x1e ? 3
                                    : -1;
        if (n < 0)
            return false;
        for (int i = 1; i <= n; i++)
            if ((u[i] & 0xc0) != 0x80)
                return false;
        u += n + 1;
    }
    return true;
}

/* How often each status came back, for the log. */
struct histo {
    int n[16]; /* index -status; the last slot collects anything beyond */
};

static void histo_add(struct histo *h, int rc)
{
    int i = rc > 0 ? 15 : -rc;

    h->n[i < 15 ? i : 15]++;
}

static const char *histo_text(const struct histo *h, char *out, size_t n)
{
    size_t len = 0;

    out[0] = 0;
    for (int i = 0; i < 16 && len < n; i++)
        if (h->n[i])
            len += (size_t)snprintf(out + len, n - len, "%s%s %d", len ? ", " : "",
                                    i == 15 ? "other" : app_status_str(-i), h->n[i]);
    return out;
}

/* ---- child processes -------------------------------------------------------------------- */

/* A Python (any version, 2.7 included) that writes OUTDIR/ready and sleeps two minutes. */
static struct ts_child *sleeper_start(const char *python)
{
    static const char code[] = "import sys, time\nopen(sys.argv[1], 'w').close()\n"
                               "time.sleep(120)\n";
    struct ts_child *c = ts_child_new();
    char ready[PATH_MAX];

    snprintf(ready, sizeof(ready), "%s/ready", c->dir);
    const char *argv[] = {python, "-E", "-S", "-c", code, ready, NULL};
    ts_child_exec(c, argv);
    return c;
}

/* ---- ground truth (truth.json from known_state.py) -------------------------------------- */

struct tframe {
    const char *function, *file;
    int line;
};

struct tthread {
    uint64_t ident;
    int native_id;
    const char *name, *role;
    bool spinning;
    size_t nframes;
    struct tframe *frames;
};

struct truth {
    json_object *root; /* owns every string below */
    const char *python;
    size_t nthreads;
    struct tthread threads[MAX_TRUTH_THREADS];
};

static json_object *json_get(json_object *o, const char *key)
{
    json_object *v = NULL;

    return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static const char *json_str(json_object *o, const char *key)
{
    json_object *v = json_get(o, key);

    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static bool truth_frames_load(struct tthread *tt, json_object *jf)
{
    if (!jf || !json_object_is_type(jf, json_type_array))
        return false;
    tt->nframes = json_object_array_length(jf);
    tt->frames = tt->nframes ? x_calloc(tt->nframes, sizeof(*tt->frames)) : NULL;
    for (size_t i = 0; i < tt->nframes; i++) {
        json_object *f = json_object_array_get_idx(jf, i);
        json_object *line = json_get(f, "line");

        tt->frames[i].function = json_str(f, "function");
        tt->frames[i].file = json_str(f, "file");
        tt->frames[i].line = line ? json_object_get_int(line) : -1;
        if (!tt->frames[i].function || !tt->frames[i].file || !line)
            return false;
    }
    return true;
}

static bool truth_thread_load(struct tthread *tt, json_object *jt)
{
    json_object *ident = json_get(jt, "ident"), *native = json_get(jt, "native_id");

    tt->name = json_str(jt, "name");
    tt->role = json_str(jt, "role");
    tt->spinning = str_eq(json_str(jt, "state"), "spinning");
    if (!ident || !native || !tt->name || !tt->role)
        return false;
    tt->ident = (uint64_t)json_object_get_int64(ident);
    tt->native_id = json_object_get_int(native);
    return truth_frames_load(tt, json_get(jt, "frames"));
}

static void truth_free(struct truth *t)
{
    for (size_t i = 0; i < t->nthreads; i++)
        free(t->threads[i].frames);
    if (t->root)
        json_object_put(t->root);
    memset(t, 0, sizeof(*t));
}

static bool truth_load(struct truth *t, const char *dir, const char *label)
{
    char path[PATH_MAX];
    json_object *threads;

    memset(t, 0, sizeof(*t));
    snprintf(path, sizeof(path), "%s/truth.json", dir);
    t->root = json_object_from_file(path);
    threads = t->root ? json_get(t->root, "threads") : NULL;
    t->python = t->root ? json_str(t->root, "python") : NULL;
    if (!threads || !t->python || !json_object_is_type(threads, json_type_array)) {
        ts_fail("%s: cannot parse %s: %s", label, path, json_util_get_last_err());
        return false;
    }
    for (size_t i = 0; i < json_object_array_length(threads); i++) {
        if (t->nthreads == MAX_TRUTH_THREADS ||
            !truth_thread_load(&t->threads[t->nthreads++], json_object_array_get_idx(threads, i))) {
            ts_fail("%s: malformed thread %zu in %s", label, i, path);
            return false;
        }
    }
    return true;
}

/* Runs one(python) for every interpreter (pyenv's 3.8+ and Debian's), each under the
 * watchdog, then asserts that nothing failed. */
static void each_python(void (*one)(const char *python))
{
    struct ts_pylist l;

    ts_pythons_discover(&l, 8, true);
    for (int i = 0; i < l.n; i++) {
        ts_watchdog_arm(l.v[i].path, WATCHDOG_S);
        one(l.v[i].path);
        ts_watchdog_disarm();
    }
    ts_pylist_free(&l);
    ts_assert_clean();
}

/* ---- sample checks ---------------------------------------------------------------------- */

static const struct pythread *sample_thread(const struct pysample *s, uint64_t ident)
{
    for (uint32_t i = 0; i < s->nthreads; i++)
        if (s->threads[i].ident == ident)
            return &s->threads[i];
    return NULL;
}

/* Every blocked thread of the truth is in s with a complete stack. */
static bool sample_complete(const struct pysample *s, const struct truth *t)
{
    for (size_t i = 0; i < t->nthreads; i++) {
        const struct pythread *th = sample_thread(s, t->threads[i].ident);

        if (!t->threads[i].spinning && (!th || th->status != 0))
            return false;
    }
    return true;
}

static void thread_sanity(const char *label, const struct pythread *th)
{
    if (th->nframes > DEFAULT_MAX_FRAMES || (th->nframes && !th->frames)) {
        ts_fail("%s: thread %d: %u frames, frames=%p", label, th->tid, th->nframes,
                (const void *)th->frames);
        return;
    }
    if (th->name && !utf8_valid(th->name))
        ts_fail("%s: thread %d: name is not UTF-8", label, th->tid);
    for (uint32_t i = 0; i < th->nframes; i++) {
        const struct pyframe *f = &th->frames[i];

        if (!f->function || !f->file || !utf8_valid(f->function) || !utf8_valid(f->file) ||
            f->line < 0)
            ts_fail("%s: thread %d frame %u: function %s file %s line %d (NULL, bad UTF-8 or "
                    "negative line)",
                    label, th->tid, i, f->function ? "set" : "NULL", f->file ? "set" : "NULL",
                    f->line);
    }
}

/* Invariants of any successful sample, whatever the target does. */
static void sample_sanity(const char *label, const struct pysample *s)
{
    int holders = 0;

    if (s->nthreads > DEFAULT_MAX_THREADS || (s->nthreads && !s->threads)) {
        ts_fail("%s: sample with %u threads, threads=%p", label, s->nthreads,
                (const void *)s->threads);
        return;
    }
    if (s->dropped > s->torn)
        ts_fail("%s: sample dropped %u stacks but saw only %u torn walks", label, s->dropped,
                s->torn);
    for (uint32_t i = 0; i < s->nthreads; i++) {
        holders += s->threads[i].gil;
        thread_sanity(label, &s->threads[i]);
    }
    if (holders > 1)
        ts_fail("%s: %d threads hold the GIL in one sample", label, holders);
    if (holders && !s->gil_locked)
        ts_fail("%s: a thread holds the GIL but gil_locked is false", label);
}

static void sample_dump(const struct pysample *s)
{
    for (uint32_t i = 0; s && i < s->nthreads; i++) {
        const struct pythread *th = &s->threads[i];

        ts_info("  got thread ident 0x%llx tid %d name '%s' status %d frames %u%s",
                (unsigned long long)th->ident, th->tid, str_or_null(th->name), th->status,
                th->nframes, th->truncated ? " (truncated)" : "");
    }
}

static bool frame_eq(const struct tframe *want, const struct pyframe *got)
{
    return str_eq(want->function, got->function) && str_eq(want->file, got->file) &&
           want->line == got->line;
}

static void frames_compare(const char *who, const struct tthread *want, const struct pythread *got)
{
    size_t n = want->nframes > got->nframes ? want->nframes : got->nframes;
    int shown = 0, bad = 0;

    if (want->nframes != got->nframes || got->truncated)
        ts_fail("%s: frame count: expected %zu, got %u%s", who, want->nframes, got->nframes,
                got->truncated ? " (truncated)" : "");
    for (size_t i = 0; i < n; i++) {
        const struct tframe *w = i < want->nframes ? &want->frames[i] : NULL;
        const struct pyframe *g = i < got->nframes ? &got->frames[i] : NULL;

        if (w && g && frame_eq(w, g))
            continue;
        bad++;
        if (shown++ < FRAME_DIFF_LINES)
            ts_fail("%s: frame %zu: expected %s (%s:%d), got %s (%s:%d)", who, i,
                    w ? w->function : "nothing", w ? w->file : "-", w ? w->line : 0,
                    g ? str_or_null(g->function) : "nothing", g ? str_or_null(g->file) : "-",
                    g ? g->line : 0);
    }
    if (bad > FRAME_DIFF_LINES)
        ts_fail("%s: ... %d frame mismatches in all", who, bad);
}

/* Name and TID of any truth thread; frames too when it is blocked. */
static void thread_compare(const char *label, const struct tthread *want,
                           const struct pythread *got)
{
    char who[LABEL_MAX + 256];

    snprintf(who, sizeof(who), "%s thread '%s' (%s, ident 0x%llx)", label, want->name, want->role,
             (unsigned long long)want->ident);
    if (!got) {
        ts_fail("%s: missing from the sample", who);
        return;
    }
    if (!str_eq(want->name, got->name))
        ts_fail("%s: name: expected '%s', got '%s'", who, want->name, str_or_null(got->name));
    if (got->tid != want->native_id)
        ts_fail("%s: tid: expected %d (native_id), got %d", who, want->native_id, got->tid);
    if (!want->spinning)
        frames_compare(who, want, got);
}

/* ---- a. known state --------------------------------------------------------------------- */

static void version_check(const char *label, const struct pyproc *p, const struct truth *t)
{
    const char *v = pyproc_version(p);

    if (!str_eq(v, t->python))
        ts_fail("%s: version: expected '%s', got '%s'", label, t->python, str_or_null(v));
}

/* Finds a sample with every blocked thread, then compares it with the truth. */
static void stacks_check(const char *label, struct pyproc *p, const struct truth *t)
{
    const struct pysample *s = NULL;
    struct app_err err = {0};
    int rc = 0, i;

    for (i = 0; i < PICK_SAMPLES; i++) {
        rc = pyproc_sample(p, &s, &err);
        if (rc == 0)
            sample_sanity(label, s);
        if (rc == 0 && sample_complete(s, t))
            break;
        if (rc != 0)
            ts_info("%s: sample %d: %s (%s)", label, i, app_status_str(rc), err.msg);
        usleep(20000);
    }
    if (i == PICK_SAMPLES) {
        ts_fail("%s: none of %d samples had every blocked thread (last status %s)", label,
                PICK_SAMPLES, app_status_str(rc));
        sample_dump(rc == 0 ? s : NULL);
        return;
    }
    for (size_t k = 0; k < t->nthreads; k++)
        thread_compare(label, &t->threads[k], sample_thread(s, t->threads[k].ident));
}

struct tally {
    int present, gil, running, idle;
};

static void tally_judge(const char *label, const struct tthread *tt, const struct tally *ty, int n)
{
    ts_info("%s: thread '%s': present %d/%d, GIL %d, running %d, idle %d", label, tt->name,
            ty->present, n, ty->gil, ty->running, ty->idle);
    if (tt->spinning && (ty->present * 2 <= n || ty->gil * 2 <= n || ty->running * 2 <= n))
        ts_fail("%s: spinner '%s' should be present, hold the GIL and run in most of %d "
                "samples: present %d, GIL %d, running %d",
                label, tt->name, n, ty->present, ty->gil, ty->running);
    if (!tt->spinning && (ty->idle * 2 <= n || ty->gil * 2 > n))
        ts_fail("%s: blocked thread '%s' should be idle without the GIL in most of %d "
                "samples: idle %d, GIL %d",
                label, tt->name, n, ty->idle, ty->gil);
}

/* Over GIL_SAMPLES samples the spinner holds the GIL and runs; blocked threads idle. */
static void gil_check(const char *label, struct pyproc *p, const struct truth *t)
{
    struct tally ty[MAX_TRUTH_THREADS] = {{0}};
    const struct pysample *s;
    struct app_err err = {0};
    int ok = 0;

    for (int i = 0; i < GIL_SAMPLES; i++) {
        usleep(4000);
        if (pyproc_sample(p, &s, &err) != 0)
            continue;
        ok++;
        sample_sanity(label, s);
        for (size_t k = 0; k < t->nthreads; k++) {
            const struct pythread *th = sample_thread(s, t->threads[k].ident);

            ty[k].present += th != NULL;
            ty[k].gil += th && th->gil;
            ty[k].running += th && th->state == PYTHREAD_RUNNING;
            ty[k].idle += th && th->state == PYTHREAD_IDLE;
        }
    }
    if (ok * 5 < GIL_SAMPLES * 4)
        ts_fail("%s: only %d of %d samples succeeded (last: %s)", label, ok, GIL_SAMPLES, err.msg);
    for (size_t k = 0; ok && k < t->nthreads; k++)
        tally_judge(label, &t->threads[k], &ty[k], ok);
}

static void known_state_one(const char *python)
{
    struct ts_child *c = ts_target_start(python, "known_state.py", NULL);
    struct pyproc *p = NULL;
    struct app_err err = {0};
    struct truth t;
    char label[LABEL_MAX];
    int rc;

    memset(&t, 0, sizeof(t));
    if (!ts_child_wait_ready(c, python) || !truth_load(&t, c->dir, python))
        goto out;
    snprintf(label, sizeof(label), "Python %s (%s)", t.python, python);
    rc = pyproc_open(c->pid, NULL, &p, &err);
    if (rc != 0) {
        ts_fail("%s: pyproc_open: %s: %s", label, app_status_str(rc), err.msg);
        goto out;
    }
    version_check(label, p, &t);
    stacks_check(label, p, &t);
    gil_check(label, p, &t);
out:
    if (p)
        pyproc_free(p);
    truth_free(&t);
    ts_child_kill(c);
}

START_TEST(test_known_state)
{
    struct ts_pylist l;

    ts_pythons_discover(&l, 8, true);
    for (int i = 0; i < l.n; i++) {
        ts_info("known state: %s", l.v[i].path);
        ts_watchdog_arm(l.v[i].path, WATCHDOG_S);
        known_state_one(l.v[i].path);
        ts_watchdog_disarm();
    }
    ts_pylist_free(&l);
    ts_assert_clean();
}
END_TEST

/* ---- b. the target exits while we sample -------------------------------------------------- */

/* Waits until c exits without reaping it, so its PID stays a zombie. */
static bool child_wait_exit_nowait(struct ts_child *c, uint64_t ns)
{
    uint64_t deadline = clock_mono_ns() + ns;
    siginfo_t si;

    do {
        memset(&si, 0, sizeof(si));
        if (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid)
            return true;
        usleep(2000);
    } while (clock_mono_ns() < deadline);
    return false;
}

static bool exit_tolerated(int rc)
{
    return rc == 0 || rc == APP_E_STALE || rc == APP_E_EXITING || rc == APP_E_GONE;
}

/* Samples until APP_E_GONE, giving up only once both EXIT_SAMPLES samples and EXIT_WALL_NS
 * have passed: a loaded machine may stretch the target's shutdown past any fixed sample count.
 * Returns the last status. */
static int exit_loop(const char *label, struct pyproc *p)
{
    const struct pysample *s;
    struct app_err err = {0};
    struct histo h = {{0}};
    int rc = 0, i, odd = 0;
    char text[256];
    uint64_t deadline = clock_mono_ns() + EXIT_WALL_NS;

    for (i = 0; rc != APP_E_GONE && (i < EXIT_SAMPLES || clock_mono_ns() < deadline); i++) {
        rc = pyproc_sample(p, &s, &err);
        histo_add(&h, rc);
        if (rc == 0)
            sample_sanity(label, s);
        else if (!exit_tolerated(rc) && odd++ < 3)
            ts_fail("%s: sample %d: unexpected %s (%s)", label, i, app_status_str(rc), err.msg);
    }
    ts_info("%s: %d samples: %s", label, i, histo_text(&h, text, sizeof(text)));
    return rc;
}

/* Once the target has exited, as a zombie and after reaping, the reader says GONE. */
static void exit_after(const char *label, struct pyproc *p, struct ts_child *c)
{
    const struct pysample *s;
    struct app_err err = {0};
    int rc;

    if (!child_wait_exit_nowait(c, 30ull * 1000000000ull)) {
        ts_fail("%s: exits_soon.py did not exit within 30 s", label);
        return;
    }
    rc = pyproc_sample(p, &s, &err);
    if (rc != APP_E_GONE)
        ts_fail("%s: sample of the exited (zombie) target: expected %s, got %s (%s)", label,
                app_status_str(APP_E_GONE), app_status_str(rc), err.msg);
    ts_child_exited(c);
    rc = pyproc_sample(p, &s, &err);
    if (rc != APP_E_GONE)
        ts_fail("%s: sample of the reaped target: expected %s, got %s (%s)", label,
                app_status_str(APP_E_GONE), app_status_str(rc), err.msg);
    if (!WIFEXITED(c->status) || WEXITSTATUS(c->status) != 0)
        ts_fail("%s: exits_soon.py ended with wait status 0x%x", label, c->status);
}

static void exit_one(const char *python)
{
    struct ts_child *c =
        ts_target_start(python, "exits_soon.py", (const char *const[]){EXIT_AFTER_MS, NULL});
    struct pyproc *p = NULL;
    struct app_err err = {0};
    int rc;

    if (!ts_child_wait_ready(c, python))
        goto out;
    rc = pyproc_open(c->pid, NULL, &p, &err);
    if (rc != 0) {
        ts_fail("%s: pyproc_open (target lives %s ms more): %s: %s", python, EXIT_AFTER_MS,
                app_status_str(rc), err.msg);
        goto out;
    }
    rc = exit_loop(python, p);
    if (rc != APP_E_GONE && rc != 0)
        ts_fail("%s: the loop ended on %s, expected %s or success", python, app_status_str(rc),
                app_status_str(APP_E_GONE));
    exit_after(python, p, c);
out:
    if (p)
        pyproc_free(p);
    ts_child_kill(c);
}

START_TEST(test_exit_while_sampling)
{
    each_python(exit_one);
}
END_TEST

/* Starts script under python and opens a reader on it (a few tries: a thread list caught
 * mid-change is torn). *p is NULL, with the failure noted, when either fails; the child is
 * the caller's to kill. */
static struct ts_child *target_open(const char *python, const char *script, const char *const *args,
                                    struct pyproc **p)
{
    struct ts_child *c = ts_target_start(python, script, args);
    struct app_err err = {0};
    int rc = APP_E_STALE;

    *p = NULL;
    if (!ts_child_wait_ready(c, python))
        return c;
    for (int i = 0; i < 5 && rc == APP_E_STALE; i++)
        rc = pyproc_open(c->pid, NULL, p, &err);
    if (rc != 0) {
        ts_fail("%s: pyproc_open: %s: %s", python, app_status_str(rc), err.msg);
        *p = NULL;
    }
    return c;
}

/* ---- c. thread churn -------------------------------------------------------------------- */

struct churn {
    int calls, ok, stale, stacks;
    uint64_t reads, torn, dropped;
    size_t ntids, cap;
    int *tids; /* every nonzero TID seen, with repeats */
    /* chain_key against the frames themselves, thread by thread between consecutive samples */
    struct churn_key {
        uint64_t ident, key, text;
    } prev[64];
    size_t nprev;
    int key_same, key_bad, key_spurious;
};

/* A digest of the frames' text (function, file, line), to hold chain_key against. */
static uint64_t frames_text(const struct pythread *t)
{
    uint64_t h = t->nframes;

    for (uint32_t i = 0; i < t->nframes; i++)
        h = hash_mix(
            hash_mix(hash_mix(h, hash_str(t->frames[i].function)), hash_str(t->frames[i].file)),
            (uint64_t)t->frames[i].line);
    return h;
}

/* Equal keys must mean equal frames (the sampler then reuses its interned stack); code
 * objects are freed and their addresses reused here. */
static void churn_keys(struct churn *ch, const char *label, const struct pysample *s)
{
    size_t n = 0;
    struct churn_key cur[64];

    for (uint32_t i = 0; i < s->nthreads && n < 64; i++) {
        const struct pythread *t = &s->threads[i];

        if (t->status != 0)
            continue;
        cur[n] = (struct churn_key){t->ident, t->chain_key, frames_text(t)};
        for (size_t k = 0; k < ch->nprev; k++) {
            if (ch->prev[k].ident != t->ident)
                continue;
            /* The other way round (frames equal, key changed: a code object read into the
             * cache again) only costs an interning. */
            if (ch->prev[k].key == cur[n].key && ch->prev[k].text != cur[n].text && !ch->key_bad++)
                ts_fail("%s: thread %llx: chain_key unchanged while its frames changed", label,
                        (unsigned long long)t->ident);
            ch->key_spurious += ch->prev[k].key != cur[n].key && ch->prev[k].text == cur[n].text;
            ch->key_same += ch->prev[k].key == cur[n].key;
        }
        n++;
    }
    memcpy(ch->prev, cur, n * sizeof(cur[0]));
    ch->nprev = n;
}

static void churn_add(struct churn *ch, const struct pysample *s)
{
    ch->reads += s->reads;
    ch->torn += s->torn;
    ch->dropped += s->dropped;
    for (uint32_t i = 0; i < s->nthreads; i++) {
        ch->stacks++;
        if (!s->threads[i].tid)
            continue;
        if (ch->ntids == ch->cap) {
            ch->cap = ch->cap ? 2 * ch->cap : 4096;
            ch->tids = x_reallocarray(ch->tids, ch->cap, sizeof(*ch->tids));
        }
        ch->tids[ch->ntids++] = s->threads[i].tid;
    }
}

static int int_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return (x > y) - (x < y);
}

static size_t churn_distinct_tids(struct churn *ch)
{
    size_t n = 0;

    if (!ch->ntids)
        return 0;
    qsort(ch->tids, ch->ntids, sizeof(*ch->tids), int_cmp);
    for (size_t i = 0; i < ch->ntids; i++)
        n += i == 0 || ch->tids[i] != ch->tids[i - 1];
    return n;
}

/* How a run of samples goes: up to `want` calls, `pause_us` apart, within `wall_ns`. Each
 * successful sample goes to on_sample(ctx, s), a torn thread list counts in *stale; any other
 * error ends the run as a noted failure, and so does a run that could not make `want` calls. */
struct sample_run {
    int want;
    uint64_t wall_ns;
    unsigned pause_us;
    void (*on_sample)(void *ctx, const char *label, const struct pysample *s);
    void *ctx;
};

static void sample_run(const char *label, struct pyproc *p, const struct sample_run *r, int *calls,
                       int *stale)
{
    uint64_t deadline = clock_mono_ns() + r->wall_ns;
    const struct pysample *s;
    struct app_err err = {0};

    for (; *calls < r->want && clock_mono_ns() < deadline; usleep(r->pause_us)) {
        int rc = pyproc_sample(p, &s, &err);

        ++*calls;
        if (rc == APP_E_STALE) {
            ++*stale;
        } else if (rc != 0) {
            ts_fail("%s: sample %d: %s (%s)", label, *calls, app_status_str(rc), err.msg);
            return;
        } else {
            r->on_sample(r->ctx, label, s);
        }
    }
    if (*calls < r->want)
        ts_fail("%s: only %d samples in %llu s", label, *calls,
                (unsigned long long)(r->wall_ns / 1000000000ull));
}

static void churn_sample(void *ctx, const char *label, const struct pysample *s)
{
    struct churn *ch = ctx;

    ch->ok++;
    sample_sanity(label, s);
    churn_add(ch, s);
    churn_keys(ch, label, s);
}

static void churn_loop(const char *label, struct pyproc *p, struct churn *ch)
{
    struct sample_run r = {CHURN_SAMPLES, CHURN_WALL_NS, 500, churn_sample, ch};

    sample_run(label, p, &r, &ch->calls, &ch->stale);
}

static void churn_judge(const char *label, const struct pyproc_stats *st, struct churn *ch)
{
    size_t tids = churn_distinct_tids(ch);

    ts_info("%s: %d calls, %d ok, %d torn samples; stacks %d, torn walks %llu, dropped %llu; "
            "%zu distinct TIDs; stats: samples %llu reads %llu bytes %llu torn %llu dropped %llu "
            "code hits %llu misses %llu; %d unchanged chain keys, %d changed over equal frames",
            label, ch->calls, ch->ok, ch->stale, ch->stacks, (unsigned long long)ch->torn,
            (unsigned long long)ch->dropped, tids, (unsigned long long)st->samples,
            (unsigned long long)st->reads, (unsigned long long)st->bytes,
            (unsigned long long)st->torn, (unsigned long long)st->dropped,
            (unsigned long long)st->code_hits, (unsigned long long)st->code_misses, ch->key_same,
            ch->key_spurious);
    if (ch->key_same == 0)
        ts_fail("%s: no thread kept its chain key between samples", label);
    if (st->samples < (uint64_t)ch->ok || st->samples > (uint64_t)ch->calls)
        ts_fail("%s: stats.samples %llu outside [%d ok, %d calls]", label,
                (unsigned long long)st->samples, ch->ok, ch->calls);
    if (st->reads < ch->reads || st->reads < (uint64_t)ch->ok || st->bytes < st->reads)
        ts_fail("%s: stats.reads %llu / bytes %llu inconsistent with %llu reads in samples", label,
                (unsigned long long)st->reads, (unsigned long long)st->bytes,
                (unsigned long long)ch->reads);
    if (st->dropped > st->torn || st->torn < ch->torn || st->dropped < ch->dropped)
        ts_fail("%s: stats torn %llu / dropped %llu inconsistent with samples' %llu / %llu", label,
                (unsigned long long)st->torn, (unsigned long long)st->dropped,
                (unsigned long long)ch->torn, (unsigned long long)ch->dropped);
    if (st->code_hits <= st->code_misses)
        ts_fail("%s: code cache: %llu hits <= %llu misses after %d samples", label,
                (unsigned long long)st->code_hits, (unsigned long long)st->code_misses, ch->ok);
    if (ch->stale * 10 > ch->calls || ch->dropped * 10 > (uint64_t)ch->stacks)
        ts_fail("%s: too many torn reads: %d of %d samples, %llu of %d stacks dropped", label,
                ch->stale, ch->calls, (unsigned long long)ch->dropped, ch->stacks);
    if (tids < 10)
        ts_fail("%s: only %zu distinct TIDs seen: the thread churn is not reflected", label, tids);
}

static void churn_one(const char *python)
{
    struct churn ch = {0};
    struct pyproc_stats st = {0};
    struct pyproc *p;
    struct ts_child *c = target_open(python, "churn.py", NULL, &p);

    if (!p)
        goto out;
    churn_loop(python, p, &ch);
    pyproc_get_stats(p, &st);
    churn_judge(python, &st, &ch);
out:
    free(ch.tids);
    if (p)
        pyproc_free(p);
    ts_child_kill(c);
}

START_TEST(test_thread_churn)
{
    each_python(churn_one);
}
END_TEST

/* ---- d. errors a user can act on -------------------------------------------------------- */

static bool msg_has(const char *msg, const char *needle)
{
    return strcasestr(msg, needle) != NULL;
}

/* Opens pid expecting failure `want`; returns false (and notes it) otherwise. */
static bool open_expect(const char *label, int pid, int want, struct app_err *err)
{
    struct pyproc *p = NULL;
    int rc;

    memset(err, 0, sizeof(*err));
    rc = pyproc_open(pid, NULL, &p, err);
    if (p)
        pyproc_free(p);
    ts_info("%s: pyproc_open(%d) = %s: %s", label, pid, app_status_str(rc), err->msg);
    if (rc != want) {
        ts_fail("%s: pyproc_open(%d): expected %s, got %s (%s)", label, pid, app_status_str(want),
                app_status_str(rc), err->msg);
        return false;
    }
    if (err->code != rc || !err->msg[0])
        ts_fail("%s: err.code %d / empty message for status %s", label, err->code,
                app_status_str(rc));
    return true;
}

START_TEST(test_open_no_such_process)
{
    struct app_err err;
    pid_t pid = fork();

    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(0);
    waitpid(pid, NULL, 0);
    ck_assert_msg(kill(pid, 0) < 0 && errno == ESRCH, "PID %d was reused", (int)pid);
    if (open_expect("reaped PID", pid, APP_E_NOTFOUND, &err) &&
        !msg_has(err.msg, "no such process"))
        ts_fail("no such process: message does not say \"no such process\": %s", err.msg);
    ts_assert_clean();
}
END_TEST

static bool exe_is(int pid, const char *suffix)
{
    char link[64], target[PATH_MAX];
    ssize_t n;

    snprintf(link, sizeof(link), "/proc/%d/exe", pid);
    n = readlink(link, target, sizeof(target) - 1);
    if (n <= 0)
        return false;
    target[n] = 0;
    return n >= (ssize_t)strlen(suffix) && strcmp(target + n - strlen(suffix), suffix) == 0;
}

START_TEST(test_open_not_python)
{
    static const char *const argv[] = {"/bin/sleep", "30", NULL};
    struct ts_child *c = ts_child_new();
    uint64_t deadline = clock_mono_ns() + 10ull * 1000000000ull;
    struct app_err err;

    ts_child_exec(c, argv);
    while (!exe_is(c->pid, "/sleep") && clock_mono_ns() < deadline)
        usleep(1000);
    ck_assert_msg(exe_is(c->pid, "/sleep"), "sleep did not start");
    open_expect("sleep 30", c->pid, APP_E_NOTPY, &err);
    open_expect("this test (C, no libpython)", getpid(), APP_E_NOTPY, &err);
    ts_assert_clean();
}
END_TEST

/* "3.7" from ".../versions/3.7.16/bin/python3". */
static void version_from_path(const char *path, char *out, size_t n)
{
    const char *v = strstr(path, "/versions/");
    int major = 0, minor = 0;

    if (v && sscanf(v + strlen("/versions/"), "%d.%d", &major, &minor) == 2)
        snprintf(out, n, "%d.%d", major, minor);
    else
        snprintf(out, n, "?");
}

static void unsupported_one(const char *python)
{
    struct ts_child *c = sleeper_start(python);
    struct app_err err;
    char version[32];

    version_from_path(python, version, sizeof(version));
    if (!ts_child_wait_ready(c, python) || !open_expect(python, c->pid, APP_E_VERSION, &err))
        goto out;
    if (!msg_has(err.msg, version))
        ts_fail("%s: message does not name version %s: %s", python, version, err.msg);
    if (!msg_has(err.msg, pyproc_supported_range()))
        ts_fail("%s: message does not give the supported range '%s': %s", python,
                pyproc_supported_range(), err.msg);
out:
    ts_child_kill(c);
}

START_TEST(test_open_unsupported_version)
{
    struct ts_pylist l;

    ts_pythons_unsupported(&l);
    if (l.n == 0)
        ts_info("no pyenv 3.6 or 3.7 interpreter here: unsupported-version case not run");
    for (int i = 0; i < l.n; i++)
        unsupported_one(l.v[i].path);
    ts_pylist_free(&l);
    ts_assert_clean();
}
END_TEST

/* In a child that drops to nobody, opens pid; sends back the status and message. */
static void open_as_nobody(int pid, int *rc, struct app_err *err)
{
    int fds[2];
    pid_t k;

    ck_assert_int_eq(pipe(fds), 0);
    fflush(NULL);
    k = fork();
    ck_assert_int_ge(k, 0);
    if (k == 0) {
        struct pyproc *p = NULL;

        close(fds[0]);
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(2);
        memset(err, 0, sizeof(*err));
        *rc = pyproc_open(pid, NULL, &p, err);
        if (write(fds[1], rc, sizeof(*rc)) < 0 || write(fds[1], err, sizeof(*err)) < 0)
            _exit(3);
        _exit(0);
    }
    close(fds[1]);
    *rc = 1;
    if (read(fds[0], rc, sizeof(*rc)) != (ssize_t)sizeof(*rc) ||
        read(fds[0], err, sizeof(*err)) != (ssize_t)sizeof(*err))
        *rc = 1;
    close(fds[0]);
    waitpid(k, NULL, 0);
    err->msg[sizeof(err->msg) - 1] = 0;
}

START_TEST(test_open_permission_denied)
{
    struct ts_pylist l;
    struct ts_child *c;
    struct app_err err = {0};
    int rc;

    if (geteuid() != 0) {
        ts_info("not root: the permission-denied case needs to drop to uid 65534; not run");
        return;
    }
    ts_pythons_discover(&l, 8, true);
    ck_assert_msg(l.n > 0, "no interpreter:\n%s", ts_failure_summary());
    c = sleeper_start(l.v[0].path);
    if (ts_child_wait_ready(c, l.v[0].path)) {
        open_as_nobody(c->pid, &rc, &err);
        ts_info("as nobody: pyproc_open = %s: %s", rc == 1 ? "(child failed)" : app_status_str(rc),
                err.msg);
        if (rc != APP_E_PERM)
            ts_fail("uid 65534 opening root's %s: expected %s, got %s (%s)", l.v[0].path,
                    app_status_str(APP_E_PERM), app_status_str(rc), err.msg);
        else if (!msg_has(err.msg, "ptrace_scope") || !msg_has(err.msg, "CAP_SYS_PTRACE"))
            ts_fail("permission message must name ptrace_scope and CAP_SYS_PTRACE: %s", err.msg);
    }
    ts_pylist_free(&l);
    ts_assert_clean();
}
END_TEST

static bool starting_tolerated(int rc)
{
    return rc == APP_E_STARTING || rc == APP_E_NOTPY || rc == APP_E_STALE || rc == APP_E_IO ||
           rc == APP_E_NOTFOUND;
}

/* After a successful open, samples until one succeeds; only "starting" may come first. */
static void starting_sample(const char *python, struct pyproc *p, uint64_t deadline)
{
    const struct pysample *s;
    struct app_err err = {0};
    struct histo h = {{0}};
    char text[256];
    int rc;

    do {
        rc = pyproc_sample(p, &s, &err);
        histo_add(&h, rc);
    } while (rc == APP_E_STARTING && clock_mono_ns() < deadline);
    if (rc != 0)
        ts_fail("%s: sampling right after start-up: %s (%s); statuses: %s", python,
                app_status_str(rc), err.msg, histo_text(&h, text, sizeof(text)));
}

/* Opens a just-forked interpreter in a tight loop until it succeeds; adds to h. */
static void starting_one(const char *python, struct histo *h)
{
    /* Start-up takes what the machine gives it: on a loaded one, seconds. The deadline only
     * bounds a reader that never gets past "starting"; the target outlives it. */
    static const char code[] = "import time; time.sleep(60)";
    const char *argv[] = {python, "-E", "-S", "-c", code, NULL};
    uint64_t deadline = clock_mono_ns() + 30ull * 1000000000ull;
    struct ts_child *c = ts_child_new();
    struct pyproc *p = NULL;
    struct app_err err = {0};
    int rc = -1;

    ts_child_exec(c, argv);
    while (clock_mono_ns() < deadline) {
        rc = pyproc_open(c->pid, NULL, &p, &err);
        histo_add(h, rc);
        if (rc == 0 || !starting_tolerated(rc))
            break;
    }
    if (rc != 0)
        ts_fail("%s: open during start-up ended on %s (%s)", python, app_status_str(rc), err.msg);
    else
        starting_sample(python, p, deadline);
    if (p)
        pyproc_free(p);
    ts_child_kill(c);
}

START_TEST(test_open_while_starting)
{
    struct ts_pylist l;

    ts_pythons_discover(&l, 8, true);
    for (int i = 0; i < l.n; i++) {
        struct histo h = {{0}};
        char text[256];

        ts_watchdog_arm(l.v[i].path, WATCHDOG_S);
        for (int round = 0; round < STARTING_ROUNDS; round++)
            starting_one(l.v[i].path, &h);
        ts_watchdog_disarm();
        ts_info("%s: open attempts over %d start-ups: %s", l.v[i].path, STARTING_ROUNDS,
                histo_text(&h, text, sizeof(text)));
    }
    ts_pylist_free(&l);
    ts_assert_clean();
}
END_TEST

/* ---- d. exact under motion --------------------------------------------------------------
 * tests/py/motion.py keeps its main thread recursing and returning through C re-entries
 * (ctypes callbacks, map, sorted with a key); it is sampled thousands of times on every
 * interpreter. Every stack returned as a sample must be whole: not empty, `<module>` of the
 * script at the bottom, and only names the target lists as its ground truth. A walk that
 * cannot be made whole must come back as an error (status < 0), and those must stay rare. */

#define MOTION_SAMPLES 4000
#define MOTION_WALL_NS (120ull * 1000000000ull)
#define MAX_NAMES 32
#define MOTION_WATCHDOG_S 240
/* Stacks lost as torn, of all main-thread stacks. motion.py rewrites its whole stack every
 * microsecond or so, faster than one process_vm_readv copies it when the target runs on
 * another CPU at the same time: 5-25 % are lost on an idle 2-core machine (under 1 % when
 * the machine is busy and the two rarely run at once). The limit only catches a reader that
 * drops everything; the exactness checks above are the point of this test. */
#define LOST_PCT_MAX 60.0

struct mtruth {
    char script[4096];
    char names[MAX_NAMES][64];
    int n;
};

struct mtally {
    const struct mtruth *truth;
    struct pyproc *p;
    int calls, samples, stacks, lost, bad;
    uint64_t torn;
};

static bool mtruth_load(const char *dir, struct mtruth *t)
{
    char path[256], line[64];
    FILE *f;

    snprintf(path, sizeof(path), "%s/names", dir);
    f = fopen(path, "r");
    if (!f)
        return false;
    t->n = 0;
    while (t->n < MAX_NAMES && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        snprintf(t->names[t->n++], sizeof(t->names[0]), "%s", line);
    }
    fclose(f);
    ts_script_path(t->script, sizeof(t->script), "motion.py");
    return t->n > 0;
}

static bool mtruth_has(const struct mtruth *t, const char *name)
{
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->names[i], name) == 0)
            return true;
    return false;
}

/* Why a stack returned as complete is not, or NULL when it is whole. */
static const char *motion_defect(const struct mtruth *t, const struct pythread *th)
{
    const struct pyframe *bottom;

    if (th->nframes == 0)
        return th->no_python ? "empty, flagged as having no Python frame" : "empty";
    bottom = &th->frames[th->nframes - 1];
    if (strcmp(bottom->function, "<module>") != 0 || strcmp(bottom->file, t->script) != 0)
        return "partial: the bottom frame is not <module> of the script";
    for (uint32_t i = 0; i < th->nframes; i++)
        if (strcmp(th->frames[i].file, t->script) == 0 && !mtruth_has(t, th->frames[i].function))
            return "a frame of the script with a name it never defines";
    return NULL;
}

static void motion_judge(void *ctx, const char *label, const struct pysample *s)
{
    struct mtally *ty = ctx;
    const struct mtruth *t = ty->truth;

    ty->samples++;
    ty->torn += s->torn;
    if (s->nthreads != 1) {
        ts_fail("%s: main-only sample with %u threads", label, s->nthreads);
        ty->bad++;
        return;
    }
    if (s->threads[0].status < 0) {
        ty->lost++;
        return;
    }
    ty->stacks++;
    const char *why = motion_defect(t, &s->threads[0]);
    if (why && ty->bad++ < 5) {
        const struct pythread *th = &s->threads[0];

        ts_fail("%s: sample %d returned as complete but %s (%u frames, bottom %s in %s)", label,
                ty->calls, why, th->nframes,
                th->nframes ? th->frames[th->nframes - 1].function : "-",
                th->nframes ? th->frames[th->nframes - 1].file : "-");
    }
}

/* The thread list torn twice is an error, not a sample: counted as lost with the rest. */
static void motion_loop(const char *label, struct mtally *ty)
{
    struct sample_run r = {MOTION_SAMPLES, MOTION_WALL_NS, 200, motion_judge, ty};

    sample_run(label, ty->p, &r, &ty->calls, &ty->lost);
}

static void motion_one(const char *python)
{
    struct ts_child *c = ts_target_start(python, "motion.py", NULL);
    struct pyproc_opts po = {.main_only = true, .no_state = true};
    struct pyproc *p = NULL;
    struct app_err err = {0};
    struct mtruth t = {0};
    struct mtally ty = {0};
    double lost_pct;
    int rc = APP_E_STALE;

    if (!ts_child_wait_ready(c, python))
        goto out;
    if (!mtruth_load(c->dir, &t)) {
        ts_fail("%s: no ground truth in %s/names", python, c->dir);
        goto out;
    }
    for (int i = 0; i < 5 && rc == APP_E_STALE; i++)
        rc = pyproc_open(c->pid, &po, &p, &err);
    if (rc != 0) {
        ts_fail("%s: pyproc_open: %s: %s", python, app_status_str(rc), err.msg);
        goto out;
    }
    ty.truth = &t;
    ty.p = p;
    motion_loop(python, &ty);
    lost_pct = ty.calls ? 100.0 * ty.lost / ty.calls : 0;
    ts_info("%s: %d calls, %d whole stacks, %d lost (%.2f%%), %llu torn walks retried, %d bad",
            python, ty.calls, ty.stacks, ty.lost, lost_pct, (unsigned long long)ty.torn, ty.bad);
    if (lost_pct > LOST_PCT_MAX)
        ts_fail("%s: %.2f%% of main-thread stacks lost as torn (limit %.1f%%)", python, lost_pct,
                LOST_PCT_MAX);
out:
    if (p)
        pyproc_free(p);
    ts_child_kill(c);
}

/* Every interpreter in turn, each under its own watchdog, all failures noted before the end. */
START_TEST(test_exact_under_motion)
{
    struct ts_pylist l;
    int i = 0;

    ts_pythons_discover(&l, 8, true);
    while (i < l.n) {
        const char *python = l.v[i++].path;

        ts_watchdog_arm(python, MOTION_WATCHDOG_S);
        motion_one(python);
        ts_watchdog_disarm();
    }
    ts_pylist_free(&l);
    ts_assert_clean();
}
END_TEST

/* ---- d2. every thread in motion, deep: the shared first read of 3.11+ walks ------------- */

#define ALLMOTION_THREADS "3"
#define ALLMOTION_DEPTH "150" /* a few hundred frames: several 3.11+ data-stack chunks */
#define ALLMOTION_SAMPLES 1500

struct atally {
    struct mtally m;
    int threads_bad;
    uint64_t walked, prefetched;
};

/* Why a worker thread's stack returned as complete is not whole, or NULL. */
static const char *worker_defect(const struct mtruth *t, const struct pythread *th)
{
    const struct pyframe *bottom;
    const char *f;
    size_t n;
    bool loop = false;

    if (th->nframes == 0)
        return "empty";
    bottom = &th->frames[th->nframes - 1];
    f = bottom->function;
    n = strlen(f);
    /* 3.11+ name it by its qualified name, Thread._bootstrap. */
    if ((strcmp(f, "_bootstrap") != 0 && (n < 11 || strcmp(f + n - 11, "._bootstrap") != 0)) ||
        !strstr(bottom->file, "threading"))
        return "partial: the bottom frame is not threading's _bootstrap";
    for (uint32_t i = 0; i < th->nframes; i++) {
        if (strcmp(th->frames[i].file, t->script) != 0)
            continue;
        if (!mtruth_has(t, th->frames[i].function))
            return "a frame of the script with a name it never defines";
        loop |= strcmp(th->frames[i].function, "worker_loop") == 0;
    }
    return loop ? NULL : "no worker_loop frame";
}

static void allmotion_judge(void *ctx, const char *label, const struct pysample *s)
{
    struct atally *ty = ctx;
    int mains = 0;

    ty->m.samples++;
    ty->m.torn += s->torn;
    ty->walked += s->nthreads - s->reused;
    ty->prefetched += s->prefetched;
    if (s->nthreads != 3) {
        if (ty->threads_bad++ < 5)
            ts_fail("%s: sample %d has %u threads, not 3", label, ty->m.calls, s->nthreads);
        return;
    }
    for (uint32_t i = 0; i < s->nthreads; i++) {
        const struct pythread *th = &s->threads[i];
        const char *why;

        if (th->status < 0) {
            ty->m.lost++;
            continue;
        }
        ty->m.stacks++;
        why = th->nframes && !strcmp(th->frames[th->nframes - 1].function, "<module>")
                  ? (mains++ ? "a second thread with <module> at the bottom"
                             : motion_defect(ty->m.truth, th))
                  : worker_defect(ty->m.truth, th);
        if (why && ty->m.bad++ < 5)
            ts_fail("%s: sample %d, thread %u returned as complete but %s (%u frames)", label,
                    ty->m.calls, i, why, th->nframes);
    }
}

static int target_minor(const char *dir)
{
    char path[256];
    int major = 0, minor = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/version", dir);
    f = fopen(path, "r");
    if (!f || fscanf(f, "%d.%d", &major, &minor) != 2)
        minor = -1;
    if (f)
        fclose(f);
    return major == 3 ? minor : -1;
}

static void allmotion_one(const char *python)
{
    const char *args[] = {ALLMOTION_THREADS, ALLMOTION_DEPTH, NULL};
    struct ts_child *c = ts_target_start(python, "motion.py", args);
    struct pyproc_opts po = {.no_state = true};
    struct pyproc *p = NULL;
    struct app_err err = {0};
    struct mtruth t = {0};
    struct atally ty = {0};
    struct sample_run r = {ALLMOTION_SAMPLES, MOTION_WALL_NS, 200, allmotion_judge, &ty};
    int rc = APP_E_STALE, minor, lost = 0;
    double lost_pct;

    if (!ts_child_wait_ready(c, python))
        goto out;
    if (!mtruth_load(c->dir, &t) || (minor = target_minor(c->dir)) < 0) {
        ts_fail("%s: no ground truth in %s", python, c->dir);
        goto out;
    }
    for (int i = 0; i < 5 && rc == APP_E_STALE; i++)
        rc = pyproc_open(c->pid, &po, &p, &err);
    if (rc != 0) {
        ts_fail("%s: pyproc_open: %s: %s", python, app_status_str(rc), err.msg);
        goto out;
    }
    ty.m.truth = &t;
    ty.m.p = p;
    sample_run(python, p, &r, &ty.m.calls, &lost);
    lost_pct = ty.m.stacks + ty.m.lost ? 100.0 * ty.m.lost / (ty.m.stacks + ty.m.lost) : 100;
    ts_info("%s: %d calls, %d whole stacks, %d lost (%.2f%%), %llu of %llu walks prefetched, "
            "%d bad",
            python, ty.m.calls, ty.m.stacks, ty.m.lost, lost_pct, (unsigned long long)ty.prefetched,
            (unsigned long long)ty.walked, ty.m.bad);
    if (lost_pct > LOST_PCT_MAX)
        ts_fail("%s: %.2f%% of thread stacks lost as torn (limit %.1f%%)", python, lost_pct,
                LOST_PCT_MAX);
    /* 3.11+ walks of a sample share one first read; a reader that never took it, or took
     * bytes that were not the ones its walk asked for, shows here or as bad stacks above. */
    if (minor >= 11 && ty.prefetched * 2 < ty.walked)
        ts_fail("%s: only %llu of %llu walks took the shared first read", python,
                (unsigned long long)ty.prefetched, (unsigned long long)ty.walked);
    if (minor < 11 && ty.prefetched)
        ts_fail("%s: %llu walks prefetched on 3.%d (frame objects)", python,
                (unsigned long long)ty.prefetched, minor);
out:
    if (p)
        pyproc_free(p);
    ts_child_kill(c);
}

START_TEST(test_all_threads_motion)
{
    struct ts_pylist l;

    ts_pythons_discover(&l, 8, true);
    for (int i = 0; i < l.n; i++) {
        ts_watchdog_arm(l.v[i].path, MOTION_WATCHDOG_S);
        allmotion_one(l.v[i].path);
        ts_watchdog_disarm();
    }
    ts_pylist_free(&l);
    ts_assert_clean();
}
END_TEST

/* ---- suite -------------------------------------------------------------------------------- */

/* ---- e. frames recycled at the same addresses (issue 12's chain reuse) ---------------- */

#define REUSE_STEPS 48
#define REUSE_SAMPLES 4

/* The main thread's frames against the target's own truth for step k ([function, line],
 * innermost first); returns false after noting the first difference. */
/* The target writes its truth a moment before it reaches the point it waits at, and on a
 * loaded machine that moment can last: a step first samples quietly until one whole sample
 * matches (for at most SETTLE_NS), then holds every further sample to the truth, reporting. A
 * reader that is wrong stays wrong and is reported; a target still on its way is not. */
#define SETTLE_NS (10ull * 1000000000ull)
static bool compare_quiet;
#define CMP_FAIL(...)                                                                              \
    do {                                                                                           \
        if (!compare_quiet)                                                                        \
            ts_fail(__VA_ARGS__);                                                                  \
    } while (0)

static bool reuse_compare(const char *label, int k, json_object *want, const struct pythread *t)
{
    size_t n = json_object_array_length(want);

    if (t->nframes != n) {
        char got[1024] = "";

        for (uint32_t i = 0; i < t->nframes && strlen(got) < sizeof(got) - 80; i++)
            snprintf(got + strlen(got), sizeof(got) - strlen(got), " %s:%d",
                     str_or_null(t->frames[i].function), t->frames[i].line);
        CMP_FAIL("%s: step %d: %u frames (%s), the target says %zu: %s", label, k, t->nframes, got,
                 n, json_object_to_json_string(want));
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        json_object *f = json_object_array_get_idx(want, i);
        const char *fn = json_object_get_string(json_object_array_get_idx(f, 0));
        int line = json_object_get_int(json_object_array_get_idx(f, 1));

        if (!str_eq(fn, t->frames[i].function) || line != t->frames[i].line) {
            CMP_FAIL("%s: step %d frame %zu: %s:%d, the target is in %s:%d", label, k, i,
                     str_or_null(t->frames[i].function), t->frames[i].line, fn, line);
            return false;
        }
    }
    return true;
}

/* A sample against a step's truth: -1 when it is not whole (skipped), else whether it matches
 * (a mismatch is reported unless compare_quiet). */
typedef int (*truth_check)(const char *label, int k, json_object *want, const struct pysample *s);

/* Waits for OUTDIR/truth.k, lets the target settle on it (SETTLE_NS), then holds
 * REUSE_SAMPLES whole samples to it. False when the truth never came or a sample differed. */
static bool truth_step(const char *label, struct ts_child *c, struct pyproc *p, int k,
                       truth_check check)
{
    char path[PATH_MAX];
    uint64_t deadline = clock_mono_ns() + 30ull * 1000000000ull;
    json_object *want = NULL;
    bool ok = true;

    snprintf(path, sizeof(path), "%s/truth.%d", c->dir, k);
    while (!(want = json_object_from_file(path)) && clock_mono_ns() < deadline)
        usleep(2000);
    if (!want) {
        ts_fail("%s: step %d: no truth file", label, k);
        return false;
    }
    compare_quiet = true;
    for (uint64_t end = clock_mono_ns() + SETTLE_NS; compare_quiet && clock_mono_ns() < end;) {
        const struct pysample *s;

        if (pyproc_sample(p, &s, NULL) == 0 && check(label, k, want, s) == 1)
            compare_quiet = false;
        else
            usleep(1000);
    }
    compare_quiet = false;
    for (int i = 0, got = 0; ok && got < REUSE_SAMPLES && i < 50 * REUSE_SAMPLES; i++) {
        const struct pysample *s;
        int r;

        if (pyproc_sample(p, &s, NULL) != 0 || (r = check(label, k, want, s)) < 0)
            continue;
        got++;
        ok = r == 1;
    }
    json_object_put(want);
    return ok;
}

/* frame_reuse.py: the only thread, main, against the truth. */
static int reuse_check(const char *label, int k, json_object *want, const struct pysample *s)
{
    if (!s->nthreads || s->threads[s->nthreads - 1].status != 0)
        return -1;
    return reuse_compare(label, k, want, &s->threads[s->nthreads - 1]);
}

/* One step: wait for its truth, sample it a few times with the same reader, let it go on. */
static bool reuse_step(const char *label, struct ts_child *c, struct pyproc *p, int k)
{
    char path[PATH_MAX];
    bool ok = truth_step(label, c, p, k, reuse_check);
    FILE *f;

    snprintf(path, sizeof(path), "%s/go.%d", c->dir, k);
    f = fopen(path, "w");
    if (f)
        fclose(f);
    return ok && f;
}

static void reuse_one(const char *python)
{
    const char *args[] = {"48", NULL};
    struct pyproc *p;
    struct ts_child *c = target_open(python, "frame_reuse.py", args, &p);

    if (!p)
        goto out;
    for (int k = 0; k < REUSE_STEPS && reuse_step(python, c, p, k); k++)
        ;
out:
    if (p)
        pyproc_free(p);
    ts_child_kill(c);
}

/* ---- f. threads the GIL shows have not run: their last walk reused (issue 12) ---------- */

#define QUIET_STEPS 24

/* Every thread of one sample against step k's truth ({ident: [[function, line], ...]}). */
static bool quiet_compare(const char *label, int k, json_object *want, const struct pysample *s)
{
    if (s->nthreads != (uint32_t)json_object_object_length(want)) {
        CMP_FAIL("%s: step %d: %u threads, the target has %d", label, k, s->nthreads,
                 json_object_object_length(want));
        return false;
    }
    for (uint32_t i = 0; i < s->nthreads; i++) {
        const struct pythread *t = &s->threads[i];
        char id[32];
        json_object *frames;

        snprintf(id, sizeof(id), "%" PRIu64, t->ident);
        if (!json_object_object_get_ex(want, id, &frames)) {
            CMP_FAIL("%s: step %d: thread %s is not the target's", label, k, id);
            return false;
        }
        if (!reuse_compare(label, k, frames, t))
            return false;
    }
    return true;
}

/* gil_quiet.py: every thread against the truth, in samples where every thread is whole. */
static int quiet_check(const char *label, int k, json_object *want, const struct pysample *s)
{
    for (uint32_t j = 0; j < s->nthreads; j++)
        if (s->threads[j].status != 0)
            return -1;
    return quiet_compare(label, k, want, s);
}

/* One step: wait for its truth, compare a few whole samples with it, let the target go on. */
static bool quiet_step(const char *label, struct ts_child *c, struct pyproc *p, int k)
{
    char path[PATH_MAX];
    bool ok = truth_step(label, c, p, k, quiet_check);
    FILE *f;

    snprintf(path, sizeof(path), "%s/go", c->dir);
    f = fopen(path, "w");
    if (f && fputc('x', f) == EOF)
        ok = false;
    if (f)
        fclose(f);
    return ok && f;
}

/* With no_state (the engine's kind of reader) a still process also has its whole last sample
 * reused, on the word of its CPU clock; without, only threads the GIL shows idle are. */
static void quiet_run(const char *python, bool no_state)
{
    char steps[16];
    const char *args[] = {steps, NULL};
    struct pyproc_opts po = {.no_state = no_state};
    struct pyproc_stats st = {0};
    struct pyproc *p = NULL;
    struct app_err err = {0};
    struct ts_child *c;
    int k = 0, rc = APP_E_STALE;

    snprintf(steps, sizeof(steps), "%d", QUIET_STEPS);
    c = ts_target_start(python, "gil_quiet.py", args);
    if (!ts_child_wait_ready(c, python))
        goto out;
    for (int i = 0; i < 5 && rc == APP_E_STALE; i++)
        rc = pyproc_open(c->pid, &po, &p, &err);
    if (rc != 0) {
        ts_fail("%s: pyproc_open: %s: %s", python, app_status_str(rc), err.msg);
        p = NULL;
        goto out;
    }
    while (k < QUIET_STEPS && quiet_step(python, c, p, k))
        k++;
    pyproc_get_stats(p, &st);
    ts_info("%s%s: %d steps, %" PRIu64 " samples, %" PRIu64 " thread stacks reused, %" PRIu64
            " reads",
            python, no_state ? " (no_state)" : "", k, st.samples, st.reused, st.reads);
    /* Four parked workers per sample, sampled again and again between the target's moves:
     * most of their stacks must have come from the reuse, or it never ran. A still process
     * (no_state) has its main thread's stack reused too. */
    if (k == QUIET_STEPS &&
        st.reused < (uint64_t)QUIET_STEPS * REUSE_SAMPLES * (no_state ? 5 : 2) / 2)
        ts_fail("%s: %" PRIu64 " thread stacks reused in %" PRIu64 " samples", python, st.reused,
                st.samples);
out:
    if (p)
        pyproc_free(p);
    ts_child_kill(c);
}

static void quiet_one(const char *python)
{
    quiet_run(python, false);
    quiet_run(python, true);
}

START_TEST(test_gil_quiet)
{
    each_python(quiet_one);
}
END_TEST

START_TEST(test_frame_reuse)
{
    each_python(reuse_one);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pystack");

    ts_add_case(s, "known_state", test_known_state, 900);
    ts_add_case(s, "exit_while_sampling", test_exit_while_sampling, 900);
    ts_add_case(s, "thread_churn", test_thread_churn, 900);
    ts_add_case(s, "frame_reuse", test_frame_reuse, 900);
    ts_add_case(s, "gil_quiet", test_gil_quiet, 900);
    ts_add_case(s, "exact_under_motion", test_exact_under_motion, 1500);
    ts_add_case(s, "all_threads_motion", test_all_threads_motion, 1500);
    ts_add_case(s, "no_such_process", test_open_no_such_process, 900);
    ts_add_case(s, "not_python", test_open_not_python, 900);
    ts_add_case(s, "unsupported_version", test_open_unsupported_version, 900);
    ts_add_case(s, "permission_denied", test_open_permission_denied, 900);
    ts_add_case(s, "starting", test_open_while_starting, 900);
    return ts_run(s);
}
