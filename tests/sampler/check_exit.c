/* How a rank ended, learnt by the engine from the kernel's process-event connector.
 *
 * Each case starts tests/py/exit_on_cue.py (the test is its parent only to get the ground
 * truth: the engine watches it like any rank, with -p), waits until the engine samples it,
 * makes it end (sys.exit(3), sys.exit(0), a real SIGSEGV through ctypes, SIGKILL from here),
 * reaps it for the wait status the kernel reported to us, and then expects the engine's
 * history record of that pid to carry the same exit code or signal, and to be marked exited.
 * Every wait has a generous deadline; nothing is timed. The exit cases are left out, saying
 * why, where the connector is refused (no CAP_NET_ADMIN, not in the initial namespaces) or no
 * interpreter is found; the zombie-image case always runs. Core
 * dumps are off so the SIGSEGV case writes none. Single-threaded test code; the engine runs
 * its own threads. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ranktop/engine/engine.h"
#include "ranktop/proc/procexit.h"
#include "ranktop/proc/procscan.h"
#include "ranktop/base/status.h"
#include "ranktop/base/util.h"
#include "tsupport.h"

#define DEADLINE_S 60

static const char *python;

enum how { EXIT_3, EXIT_0, SEGV, SIGKILLED, NHOW };

static const char *const how_name[NHOW] = {"exit 3", "exit 0", "segv", "SIGKILL"};

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

    nanosleep(&ts, NULL);
}

/* The latest rank record of pid in a copy of the history (copied into *out); false when the
 * engine has none. */
static bool rank_of(struct engine *e, int pid, struct hrank *out)
{
    struct history h;
    bool found = false;

    engine_clone_history(e, &h);
    for (size_t i = 0; i < h.nranks; i++)
        if (h.ranks[i].pid == pid) {
            *out = h.ranks[i];
            found = true;
        }
    out->threads = NULL;
    out->nthreads = 0;
    history_fini(&h);
    return found;
}

static struct engine *watch(int *pid)
{
    struct engine_opts o = {.rate_hz = 20};
    struct app_err err = {0};
    struct engine *e;

    o.disc.pids = pid;
    o.disc.npids = 1;
    o.disc.dev.nvidia_smi = "/nonexistent";
    o.disc.dev.npu_smi = "/nonexistent";
    o.disc.dev.no_nvml = true;
    o.disc.dev.no_dcmi = true;
    ck_assert_msg(engine_start(&o, &e, &err) == 0, "engine_start: %s", err.msg);
    return e;
}

static void make_it_end(struct ts_child *c, enum how how)
{
    char path[128], tmp[136];
    FILE *f;

    if (how == SIGKILLED) {
        kill(c->pid, SIGKILL);
        return;
    }
    /* Written aside and renamed: the target reads the cue as soon as the name exists, and
     * once read an empty file it had caught between creation and write. */
    snprintf(path, sizeof(path), "%s/cue", c->dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s\n", how == SEGV ? "segv" : how == EXIT_3 ? "exit 3" : "exit 0");
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(rename(tmp, path), 0);
}

START_TEST(test_exit_status)
{
    enum how how = (enum how)_i;
    struct ts_child *c = ts_target_start(python, "exit_on_cue.py", NULL);
    uint64_t end = clock_mono_ns() + (uint64_t)DEADLINE_S * 1000000000u;
    struct hrank r;
    struct engine *e;
    char why[200];
    int pid;

    ck_assert(ts_child_wait_ready(c, how_name[how]));
    pid = c->pid;
    e = watch(&pid);
    ck_assert_msg(engine_exit_listening(e, 10000, why, sizeof(why)), "not listening: %s", why);
    while (!rank_of(e, pid, &r) && clock_mono_ns() < end)
        sleep_ms(20);
    ck_assert_msg(rank_of(e, pid, &r), "%s: the engine never sampled pid %d", how_name[how], pid);
    make_it_end(c, how);
    while (!ts_child_exited(c) && clock_mono_ns() < end)
        sleep_ms(20);
    ck_assert_msg(c->reaped, "%s: the target did not end", how_name[how]);
    while (rank_of(e, pid, &r) && !(r.exited && (r.exit_code >= 0 || r.exit_signal > 0)) &&
           clock_mono_ns() < end)
        sleep_ms(20);
    engine_stop(e);
    engine_free(e);
    ts_info("%s: wait status 0x%x, recorded exit_code %d exit_signal %d exited %d", how_name[how],
            c->status, r.exit_code, r.exit_signal, r.exited);
    ck_assert_msg(r.exited, "%s: the rank is not marked exited", how_name[how]);
    if (WIFEXITED(c->status)) {
        ck_assert_int_eq(r.exit_code, WEXITSTATUS(c->status));
        ck_assert_int_eq(r.exit_signal, 0);
    } else {
        ck_assert(WIFSIGNALED(c->status));
        ck_assert_int_eq(r.exit_code, -1);
        ck_assert_int_eq(r.exit_signal, WTERMSIG(c->status));
    }
    /* The cases end the way they were told to (the ground truth is not vacuous). */
    ck_assert(how == SEGV        ? WTERMSIG(c->status) == SIGSEGV
              : how == SIGKILLED ? WTERMSIG(c->status) == SIGKILL
                                 : WEXITSTATUS(c->status) == (how == EXIT_3 ? 3 : 0));
}
END_TEST

/* A process that has exited but is not reaped keeps its /proc/PID/stat, but no executable or
 * address space: that is no new program image (which would make the sampler drop the rank's
 * reader as if it had exec'd, and never mark it exited), but a process gone. */
START_TEST(test_zombie_image)
{
    struct proc_image self, im;
    siginfo_t si;
    pid_t pid;

    ck_assert_int_eq(procscan_image(getpid(), &self), 0);
    ck_assert(self.ino != 0 && self.start_time != 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(5);
    /* WNOWAIT: waits for the exit but leaves the child a zombie. */
    ck_assert_int_eq(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
    ck_assert_int_eq(procscan_state(pid), 'Z');
    ck_assert_int_eq(procscan_image(pid, &im), APP_E_GONE);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    ck_assert_int_eq(procscan_image(pid, &im), APP_E_GONE);
}
END_TEST

/* The connector is refused without CAP_NET_ADMIN or outside the initial namespaces. */
static bool connector_allowed(void)
{
    struct app_err err = {0};
    int fd = procexit_open(2000, &err);

    if (fd < 0) {
        fprintf(stderr, "check_exit: %s; exit cases skipped\n", err.msg);
        return false;
    }
    procexit_close(fd);
    return true;
}

int main(void)
{
    Suite *s = suite_create("exit");
    struct rlimit no_core = {0, 0};
    struct ts_pylist l;
    TCase *tc = tcase_create("image");
    int rc;

    setrlimit(RLIMIT_CORE, &no_core);
    tcase_add_test(tc, test_zombie_image);
    suite_add_tcase(s, tc);
    /* The exit cases need an interpreter and the connector; the image case needs neither. */
    ts_pythons_discover(&l, 99, false);
    if (l.n == 0)
        fprintf(stderr, "check_exit: no python3; exit cases skipped\n");
    if (l.n && connector_allowed()) {
        python = l.v[l.n - 1].path;
        tc = tcase_create("exit");
        tcase_set_timeout(tc, 4 * DEADLINE_S);
        tcase_add_loop_test(tc, test_exit_status, 0, NHOW);
        suite_add_tcase(s, tc);
    }
    rc = ts_run(s);
    ts_pylist_free(&l);
    return rc;
}
