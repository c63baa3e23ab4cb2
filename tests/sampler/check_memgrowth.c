/* Memory figures of a real Python process that grows by a known amount.
 *
 * Each test forks tests/py/alloc_growth.py (stdin/stdout pipes; PR_SET_PDEATHSIG so no target
 * outlives a failed test), waits for "ready PID", reads it through ranktop/proc/memstat.h, sends
 * "grow" (one 100 MiB bytearray, every page touched, address echoed back) and reads it again:
 * the RSS / USS / PSS deltas must be within 15 % of 100 MiB, memstat_read_status must agree on
 * RSS, and memstat_top_growth must name the mapping that holds the new buffer. Further tests: a
 * zombie and a reaped target read as APP_E_GONE; an unprivileged reader (a child that drops to
 * uid 65534 when run as root) gets the libproc2 fallback (RSS, no PSS/USS) and APP_E_PERM from
 * smaps. The cost of each reader is printed to stderr. Interpreter: $RANKTOP_PYTHON, else
 * /usr/bin/python3, else python3 on PATH; exit 77 (skip) without one. Single-threaded. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ranktop/proc/memstat.h"
#include "ranktop/base/status.h"
#include "ranktop/base/util.h"
#include "tsupport.h"

#define GROW_BYTES (100u << 20)
#define GROW_KB ((int64_t)(GROW_BYTES >> 10))
#define TOLERANCE 0.15
#define LINE_TIMEOUT_MS 60000
#define TIMING_LOOPS 200

static const char *python;

struct target {
    pid_t pid;
    int to, from; /* the child's stdin (write end) and stdout (read end) */
};

/* ---- the target ------------------------------------------------------------------------- */

static void target_exec(int in, int out)
{
    const char *src = getenv("RANKTOP_SRCDIR");
    char script[4096], size[32];

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    snprintf(script, sizeof(script), "%s/tests/py/alloc_growth.py", src ? src : ".");
    snprintf(size, sizeof(size), "%u", GROW_BYTES);
    execlp(python, python, "-S", script, size, (char *)NULL);
    _exit(127);
}

/* Reads one line from the target into buf (without '\n'); false on EOF or timeout. */
static bool target_line(struct target *t, char *buf, size_t cap)
{
    size_t n = 0;

    while (n + 1 < cap) {
        struct pollfd p = {t->from, POLLIN, 0};
        char c;

        if (poll(&p, 1, LINE_TIMEOUT_MS) <= 0 || read(t->from, &c, 1) != 1)
            return false;
        if (c == '\n')
            break;
        buf[n++] = c;
    }
    buf[n] = '\0';
    return true;
}

static void target_start(struct target *t)
{
    int in[2], out[2];
    char line[128];

    ck_assert_int_eq(pipe(in), 0);
    ck_assert_int_eq(pipe(out), 0);
    t->pid = fork();
    ck_assert_int_ge(t->pid, 0);
    if (t->pid == 0) {
        close(in[1]);
        close(out[0]);
        target_exec(in[0], out[1]);
    }
    close(in[0]);
    close(out[1]);
    t->to = in[1];
    t->from = out[0];
    ck_assert_msg(target_line(t, line, sizeof(line)), "no 'ready' from %s", python);
    ck_assert_msg(strncmp(line, "ready ", 6) == 0, "target said '%s'", line);
}

/* Sends "grow" and returns the address of the new buffer. */
static uint64_t target_grow(struct target *t)
{
    char line[128];
    unsigned long long addr = 0;

    ck_assert_int_eq(write(t->to, "grow\n", 5), 5);
    ck_assert_msg(target_line(t, line, sizeof(line)), "no 'grown' from the target");
    ck_assert_msg(sscanf(line, "grown 0x%llx", &addr) == 1, "target said '%s'", line);
    return addr;
}

static void target_stop(struct target *t)
{
    if (t->pid > 0) {
        kill(t->pid, SIGKILL);
        waitpid(t->pid, NULL, 0);
    }
    close(t->to);
    close(t->from);
    t->pid = -1;
}

static void assert_grew(const char *what, int64_t before, int64_t after)
{
    int64_t d = after - before;

    ts_info("%s: %" PRId64 " -> %" PRId64 " kB (delta %" PRId64 " kB, expected %" PRId64 ")", what,
            before, after, d, GROW_KB);
    ck_assert_msg(d >= (int64_t)(GROW_KB * (1 - TOLERANCE)) &&
                      d <= (int64_t)(GROW_KB * (1 + TOLERANCE)),
                  "%s grew by %" PRId64 " kB, expected %" PRId64 " kB +-15%%", what, d, GROW_KB);
}

/* The label memstat_top_growth should give the mapping holding addr. */
static void expected_label(const struct memmap *v, size_t n, uint64_t addr, char *buf, size_t cap)
{
    for (size_t i = 0; i < n; i++) {
        if (addr < v[i].start || addr >= v[i].end)
            continue;
        snprintf(buf, cap, "%s", v[i].path[0] ? v[i].path : "anon");
        return;
    }
    ck_abort_msg("no mapping holds 0x%" PRIx64, addr);
}

static void assert_top_growth(const struct memmap *b, size_t nb, const struct memmap *a, size_t na,
                              uint64_t addr)
{
    struct memgrowth g[5];
    char want[280];
    unsigned long long lo, hi;
    size_t k = memstat_top_growth(b, nb, a, na, g, 5);

    ck_assert_uint_ge(k, 1);
    for (size_t i = 0; i < k; i++)
        ts_info("growth %zu: %s %+" PRId64 " kB", i, g[i].label, g[i].delta_kb);
    expected_label(a, na, addr, want, sizeof(want));
    if (strcmp(want, "anon") == 0) {
        ck_assert_int_eq(sscanf(g[0].label, "anon 0x%llx-0x%llx", &lo, &hi), 2);
        ck_assert_msg(lo <= addr && addr < hi, "%s misses 0x%" PRIx64, g[0].label, addr);
    } else
        ck_assert_str_eq(g[0].label, want);
    assert_grew("top mapping", g[0].before_kb, g[0].after_kb);
}

static double usec_per_call(int (*fn)(int, void *), int pid, void *arg)
{
    struct timespec a, b;

    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < TIMING_LOOPS; i++)
        ck_assert_int_eq(fn(pid, arg), 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / 1e3 /
           TIMING_LOOPS;
}

static int time_read(int pid, void *arg)
{
    return memstat_read(pid, arg, NULL);
}

static int time_read_maps(int pid, void *arg)
{
    struct memmap *v;
    size_t n;
    int rc = memstat_read_maps(pid, &v, &n, NULL);

    *(size_t *)arg = n;
    free(v);
    return rc;
}

static int time_read_status(int pid, void *arg)
{
    return memstat_read_status(pid, arg, NULL);
}

static void report_timing(int pid)
{
    struct memstat m;
    size_t n = 0;
    double st = usec_per_call(time_read_status, pid, &m);
    double r = usec_per_call(time_read, pid, &m);
    double s = usec_per_call(time_read_maps, pid, &n);

    ts_info("timing: memstat_read_status %.1f us, memstat_read %.1f us, memstat_read_maps %.1f us "
            "(%zu mappings, RSS %" PRId64 " kB)",
            st, r, s, n, m.rss_kb);
}

START_TEST(grows_100mib)
{
    struct target t;
    struct memstat b, a, st;
    struct memmap *mb, *ma;
    size_t nb, na;
    struct app_err err = {0};
    uint64_t addr;

    target_start(&t);
    ck_assert_msg(memstat_read(t.pid, &b, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(b.valid,
                      MEMSTAT_RSS | MEMSTAT_PSS | MEMSTAT_USS | MEMSTAT_SWAP | MEMSTAT_ANON);
    ck_assert_msg(memstat_read_maps(t.pid, &mb, &nb, &err) == 0, "%s", err.msg);
    addr = target_grow(&t);
    ck_assert_msg(memstat_read(t.pid, &a, &err) == 0, "%s", err.msg);
    ck_assert_msg(memstat_read_maps(t.pid, &ma, &na, &err) == 0, "%s", err.msg);
    assert_grew("RSS", b.rss_kb, a.rss_kb);
    assert_grew("USS", b.uss_kb, a.uss_kb);
    assert_grew("PSS", b.pss_kb, a.pss_kb);
    assert_grew("anon", b.anon_kb, a.anon_kb);
    ck_assert_msg(memstat_read_status(t.pid, &st, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(st.valid, MEMSTAT_RSS | MEMSTAT_SWAP | MEMSTAT_ANON);
    ck_assert_int_le(llabs(st.rss_kb - a.rss_kb), 2048); /* same counters, read a moment later */
    assert_top_growth(mb, nb, ma, na, addr);
    report_timing(t.pid);
    free(mb);
    free(ma);
    target_stop(&t);
}
END_TEST

/* ---- gone ------------------------------------------------------------------------------- */

static bool is_zombie(pid_t pid)
{
    char path[64], buf[512];
    FILE *f;
    bool z = false;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f && fgets(buf, sizeof(buf), f)) {
        const char *rp = strrchr(buf, ')');

        z = rp && rp[1] == ' ' && rp[2] == 'Z';
    }
    if (f)
        fclose(f);
    return z;
}

START_TEST(zombie_and_reaped_are_gone)
{
    struct target t;
    struct memstat m;
    struct memmap *v;
    size_t n;
    struct app_err err = {0};

    target_start(&t);
    kill(t.pid, SIGKILL);
    for (int i = 0; i < 5000 && !is_zombie(t.pid); i++)
        usleep(1000);
    ck_assert(is_zombie(t.pid));
    ck_assert_int_eq(memstat_read(t.pid, &m, &err), APP_E_GONE);
    ck_assert_int_eq(memstat_read_status(t.pid, &m, &err), APP_E_GONE);
    ck_assert_int_eq(memstat_read_maps(t.pid, &v, &n, &err), APP_E_GONE);
    ck_assert_ptr_null(v);
    waitpid(t.pid, NULL, 0);
    ck_assert_int_eq(memstat_read(t.pid, &m, &err), APP_E_GONE);
    ck_assert_int_eq(memstat_read_status(t.pid, &m, &err), APP_E_GONE);
    ck_assert_int_eq(memstat_read_maps(t.pid, &v, &n, &err), APP_E_GONE);
    ts_info("reaped: %s", err.msg);
    t.pid = -1;
    target_stop(&t);
}
END_TEST

/* ---- unprivileged reader ---------------------------------------------------------------- */

struct unpriv_result {
    int read_rc, maps_rc;
    struct memstat m;
    double usec;
};

/* In a child that dropped to uid/gid 65534: read pid the way a non-root ranktop would. */
static void unpriv_child(int pid, int fd)
{
    struct unpriv_result r;
    struct memmap *v;
    size_t n;
    struct timespec a, b;

    memset(&r, 0, sizeof(r));
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)
        _exit(2);
    r.read_rc = memstat_read(pid, &r.m, NULL);
    r.maps_rc = memstat_read_maps(pid, &v, &n, NULL);
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < TIMING_LOOPS; i++)
        memstat_read(pid, &r.m, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    r.usec = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / 1e3 /
             TIMING_LOOPS;
    _exit(write(fd, &r, sizeof(r)) == (ssize_t)sizeof(r) ? 0 : 3);
}

static void unpriv_read(int pid, struct unpriv_result *r)
{
    int fd[2], status;
    pid_t c;

    ck_assert_int_eq(pipe(fd), 0);
    c = fork();
    ck_assert_int_ge(c, 0);
    if (c == 0) {
        close(fd[0]);
        unpriv_child(pid, fd[1]);
    }
    close(fd[1]);
    ck_assert_int_eq(read(fd[0], r, sizeof(*r)), (ssize_t)sizeof(*r));
    close(fd[0]);
    ck_assert_int_eq(waitpid(c, &status, 0), c);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

START_TEST(unprivileged_fallback)
{
    struct target t;
    struct unpriv_result r;
    struct memstat full;
    struct app_err err = {0};

    if (geteuid() != 0) {
        ts_info("unprivileged_fallback: needs root to drop to another uid; skipped");
        return;
    }
    target_start(&t);
    target_grow(&t);
    ck_assert_msg(memstat_read(t.pid, &full, &err) == 0, "%s", err.msg);
    unpriv_read(t.pid, &r);
    ts_info("unprivileged: read %d, maps %d, valid 0x%x, RSS %" PRId64 " kB (rollup %" PRId64
            " kB), %.1f us per memstat_read",
            r.read_rc, r.maps_rc, r.m.valid, r.m.rss_kb, full.rss_kb, r.usec);
    ck_assert_int_eq(r.read_rc, 0);
    ck_assert_uint_eq(r.m.valid, MEMSTAT_RSS | MEMSTAT_SWAP | MEMSTAT_ANON);
    ck_assert_int_ge(r.m.rss_kb, full.rss_kb - 2048);
    ck_assert_int_le(r.m.rss_kb, full.rss_kb + 2048);
    ck_assert_int_ge(r.m.anon_kb, GROW_KB);
    ck_assert_int_eq(r.maps_rc, APP_E_PERM);
    target_stop(&t);
}
END_TEST

static const char *find_python(void)
{
    const char *env = getenv("RANKTOP_PYTHON");

    if (env && *env)
        return env;
    if (access("/usr/bin/python3", X_OK) == 0)
        return "/usr/bin/python3";
    return system("command -v python3 >/dev/null 2>&1") == 0 ? "python3" : NULL;
}

int main(void)
{
    Suite *s = suite_create("memgrowth");
    TCase *tc = tcase_create("memgrowth");

    python = find_python();
    if (!python) {
        fprintf(stderr, "check_memgrowth: no python3; skipped\n");
        return 77;
    }
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, grows_100mib);
    tcase_add_test(tc, zombie_and_reaped_are_gone);
    tcase_add_test(tc, unprivileged_fallback);
    suite_add_tcase(s, tc);
    return ts_run(s);
}
