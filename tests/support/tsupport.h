/* What the Check suites share: the failure report of the sampler suites, a watchdog, the list
 * of CPython interpreters to test against, child processes that die with the test, and the
 * Check main. Test code only; any thread that Check runs a test on (one at a time). */
#ifndef RANKTOP_TSUPPORT_H
#define RANKTOP_TSUPPORT_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- failure report ----------------------------------------------------------------------
 * Sampler suites note every failure (stderr, and a summary kept for the final assertion)
 * instead of stopping at the first, so one run shows the whole matrix of interpreters. */
void ts_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ts_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int ts_failures(void);
/* The failures noted so far, one a line (truncated to what an assertion message holds). */
const char *ts_failure_summary(void);
void ts_failures_reset(void);
/* Kills every child (a failed assertion _exits the forked test), then asserts that no
 * failure was noted, quoting the summary. */
void ts_assert_clean(void);

/* ---- watchdog ----------------------------------------------------------------------------
 * Exits the test process with status 3 and the name of what hung, after `seconds`. */
void ts_watchdog_arm(const char *what, unsigned seconds);
void ts_watchdog_disarm(void);

/* ---- interpreters ------------------------------------------------------------------------ */
#define TS_MAX_PYTHONS 16

struct ts_python {
    char *path;
    bool required; /* a failure of this one fails the suite */
};

struct ts_pylist {
    int n;
    struct ts_python v[TS_MAX_PYTHONS];
};

/* RANKTOP_PYTHONS (blank-separated paths, all required) or pyenv's 3.8-3.13 plus Debian's
 * /usr/bin/python3.11 and, where tests/sid_chroot.sh built its chroot, Debian sid's python3.14
 * and python3.15 (required). pyenv minors from `required_minor` on are required (a missing one is a
 * noted failure); Debian's is required when `debian_required`. */
void ts_pythons_discover(struct ts_pylist *l, int required_minor, bool debian_required);
/* pyenv's 3.6 and 3.7 (the reader must refuse them); may be empty. */
void ts_pythons_unsupported(struct ts_pylist *l);
void ts_pylist_free(struct ts_pylist *l);
/* $RANKTOP_SRCDIR/tests/py/SCRIPT. */
void ts_script_path(char *out, size_t n, const char *script);

/* ---- child processes ---------------------------------------------------------------------
 * Each child gets a fresh OUTDIR (mode 0755) and PR_SET_PDEATHSIG(SIGKILL), so no target
 * outlives the test; stdin is /dev/null. At most TS_MAX_CHILDREN at once. */
#define TS_MAX_CHILDREN 64

struct ts_child {
    bool used; /* slot taken; ts_child_kill frees it */
    pid_t pid;
    bool reaped;
    int status; /* wait status once reaped */
    char dir[64];
};

struct ts_child *ts_child_new(void);
void ts_child_exec(struct ts_child *c, const char *const argv[]);
bool ts_child_exited(struct ts_child *c);
/* Kills and reaps the child, removes its OUTDIR and frees the slot. */
void ts_child_kill(struct ts_child *c);
void ts_children_kill_all(void);
/* Waits up to 60 s for OUTDIR/ready; a child that exits first (its OUTDIR/error quoted) or
 * the deadline is a noted failure. */
bool ts_child_wait_ready(struct ts_child *c, const char *label);
/* python -E -S tests/py/SCRIPT [ARGS...] OUTDIR; args may be NULL. */
struct ts_child *ts_target_start(const char *python, const char *script, const char *const *args);

/* ---- Check cases ----------------------------------------------------------------------------
 * Adds a one-test case whose checked fixture starts with no failure noted and ends with every
 * child killed (also when the test dies in an assertion). */
void ts_add_case(Suite *s, const char *name, const TTest *test, int timeout_s);

/* ---- Check main ----------------------------------------------------------------------------
 * Runs the suite and returns the process exit status (0 when every test passed). */
int ts_run(Suite *s);

#endif
