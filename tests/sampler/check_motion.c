/* Stacks read exactly while they move: tests/py/motion.py keeps its main thread recursing and
 * returning through C re-entries (ctypes callbacks, map, sorted with a key), and this suite
 * samples it thousands of times on every interpreter. Every stack returned as a sample must be
 * whole: not empty, `<module>` of the script at the bottom, and only names the target lists
 * as its ground truth. A walk that cannot be made whole must come back as an error (status
 * < 0), and those must stay rare. Runs on Check's test process, one interpreter at a time. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ranktop/pystack.h"
#include "ranktop/status.h"
#include "ranktop/util.h"
#include "tsupport.h"

#define MOTION_SAMPLES 4000
#define MOTION_WALL_NS (120ull * 1000000000ull)
#define MAX_NAMES 32
#define WATCHDOG_S 240
#define LOST_PCT_MAX 2.0 /* stacks lost as torn, of all main-thread stacks */

struct truth {
    char script[4096];
    char names[MAX_NAMES][64];
    int n;
};

struct tally {
    int calls, samples, stacks, lost, bad;
    uint64_t torn;
};

static bool truth_load(const char *dir, struct truth *t)
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

static bool truth_has(const struct truth *t, const char *name)
{
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->names[i], name) == 0)
            return true;
    return false;
}

/* Why a stack returned as complete is not, or NULL when it is whole. */
static const char *stack_defect(const struct truth *t, const struct pythread *th)
{
    const struct pyframe *bottom;

    if (th->nframes == 0)
        return th->no_python ? "empty, flagged as having no Python frame" : "empty";
    bottom = &th->frames[th->nframes - 1];
    if (strcmp(bottom->function, "<module>") != 0 || strcmp(bottom->file, t->script) != 0)
        return "partial: the bottom frame is not <module> of the script";
    for (uint32_t i = 0; i < th->nframes; i++)
        if (strcmp(th->frames[i].file, t->script) == 0 && !truth_has(t, th->frames[i].function))
            return "a frame of the script with a name it never defines";
    return NULL;
}

static void judge_sample(const char *label, const struct truth *t, const struct pysample *s,
                         struct tally *ty)
{
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
    const char *why = stack_defect(t, &s->threads[0]);
    if (why && ty->bad++ < 5) {
        const struct pythread *th = &s->threads[0];

        ts_fail("%s: sample %d returned as complete but %s (%u frames, bottom %s)", label,
                ty->calls, why, th->nframes,
                th->nframes ? th->frames[th->nframes - 1].function : "-");
    }
}

static void motion_loop(const char *label, const struct truth *t, struct pyproc *p,
                        struct tally *ty)
{
    uint64_t deadline = clock_mono_ns() + MOTION_WALL_NS;
    const struct pysample *s;
    struct app_err err = {0};

    for (; ty->calls < MOTION_SAMPLES && clock_mono_ns() < deadline; usleep(200)) {
        int rc = pyproc_sample(p, &s, &err);

        ty->calls++;
        if (rc == APP_E_STALE) {
            ty->lost++; /* the thread list itself was torn twice: an error, not a sample */
            continue;
        }
        if (rc != 0) {
            ts_fail("%s: sample %d: %s (%s)", label, ty->calls, app_status_str(rc), err.msg);
            return;
        }
        judge_sample(label, t, s, ty);
    }
    if (ty->calls < MOTION_SAMPLES)
        ts_fail("%s: only %d samples in %llu s", label, ty->calls,
                (unsigned long long)(MOTION_WALL_NS / 1000000000ull));
}

static void motion_one(const char *python)
{
    struct ts_child *c = ts_target_start(python, "motion.py", NULL);
    struct pyproc_opts po = {.main_only = true, .no_state = true};
    struct pyproc *p = NULL;
    struct app_err err = {0};
    struct truth t = {0};
    struct tally ty = {0};
    double lost_pct;
    int rc = APP_E_STALE;

    if (!ts_child_wait_ready(c, python))
        goto out;
    if (!truth_load(c->dir, &t)) {
        ts_fail("%s: no ground truth in %s/names", python, c->dir);
        goto out;
    }
    for (int i = 0; i < 5 && rc == APP_E_STALE; i++)
        rc = pyproc_open(c->pid, &po, &p, &err);
    if (rc != 0) {
        ts_fail("%s: pyproc_open: %s: %s", python, app_status_str(rc), err.msg);
        goto out;
    }
    motion_loop(python, &t, p, &ty);
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

START_TEST(test_exact_under_motion)
{
    struct ts_pylist l;

    ts_pythons_discover(&l, 8, true);
    for (int i = 0; i < l.n; i++) {
        ts_watchdog_arm(l.v[i].path, WATCHDOG_S);
        motion_one(l.v[i].path);
        ts_watchdog_disarm();
    }
    ts_pylist_free(&l);
    ts_assert_clean();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("motion");

    ts_add_case(s, "exact_under_motion", test_exact_under_motion, 1500);
    return ts_run(s);
}
