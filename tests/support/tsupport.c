/* The shared half of the Check suites (see tsupport.h): failure notes, watchdog, interpreter
 * discovery, children and the Check main. State is per test process: Check forks each test,
 * so the failure summary and the child slots start empty in every test. */
#include "tsupport.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ranktop/base/util.h"

#define SUMMARY_MAX 3500      /* Check truncates assertion messages at BUFSIZ */
#define STDERR_FAIL_LINES 300 /* past this, failures are counted, not printed */
#define READY_TIMEOUT_NS (60ull * 1000000000ull)

/* ---- failure report ------------------------------------------------------------------- */

static struct {
    int nfail;
    bool truncated;
    size_t len;
    char summary[SUMMARY_MAX];
} failures;

void ts_fail(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    size_t n;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (++failures.nfail <= STDERR_FAIL_LINES)
        fprintf(stderr, "FAIL: %s\n", line);
    n = strlen(line);
    if (failures.len + n + 2 < sizeof(failures.summary)) {
        memcpy(failures.summary + failures.len, line, n);
        failures.len += n;
        failures.summary[failures.len++] = '\n';
        failures.summary[failures.len] = 0;
    } else if (!failures.truncated && failures.len + 5 < sizeof(failures.summary)) {
        failures.truncated = true;
        memcpy(failures.summary + failures.len, "...\n", 5);
    }
}

void ts_info(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fputs("  ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int ts_failures(void)
{
    return failures.nfail;
}

const char *ts_failure_summary(void)
{
    return failures.summary;
}

void ts_failures_reset(void)
{
    memset(&failures, 0, sizeof(failures));
}

void ts_assert_clean(void)
{
    ts_children_kill_all();
    ck_assert_msg(failures.nfail == 0, "%d failure(s), all of them on stderr:\n%s", failures.nfail,
                  failures.summary);
}

/* ---- watchdog ------------------------------------------------------------------------- */

static const char *volatile watchdog_what = "";

static void watchdog_fire(int sig)
{
    static const char pre[] = ": watchdog: no progress within the deadline in: ";
    const char *me = program_invocation_short_name, *what = watchdog_what;

    (void)sig;
    /* Only async-signal-safe calls here: write and _exit. */
    if (write(2, me, strlen(me)) < 0 || write(2, pre, sizeof(pre) - 1) < 0 ||
        write(2, what, strlen(what)) < 0 || write(2, "\n", 1) < 0)
        _exit(3);
    _exit(3);
}

void ts_watchdog_arm(const char *what, unsigned seconds)
{
    watchdog_what = what;
    signal(SIGALRM, watchdog_fire);
    alarm(seconds);
}

void ts_watchdog_disarm(void)
{
    alarm(0);
}

/* ---- interpreters ----------------------------------------------------------------------- */

static void pylist_add(struct ts_pylist *l, const char *path, bool required)
{
    if (l->n < TS_MAX_PYTHONS)
        l->v[l->n++] = (struct ts_python){x_strdup(path), required};
}

void ts_pylist_free(struct ts_pylist *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->v[i].path);
    l->n = 0;
}

static void pyenv_root(char *out, size_t n)
{
    const char *env = getenv("PYENV_ROOT");
    FILE *f;

    if (env && *env) {
        snprintf(out, n, "%s", env);
        return;
    }
    out[0] = 0;
    f = popen("pyenv root 2>/dev/null", "r");
    if (f) {
        if (!fgets(out, (int)n, f))
            out[0] = 0;
        pclose(f);
    }
    out[strcspn(out, "\n")] = 0;
    if (!out[0])
        snprintf(out, n, "%s/.pyenv", getenv("HOME") ? getenv("HOME") : "/root");
}

/* Adds every executable match of pattern; returns how many. */
static int pylist_glob(struct ts_pylist *l, const char *pattern, bool required)
{
    glob_t g;
    int added = 0;

    if (glob(pattern, 0, NULL, &g) != 0)
        return 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        if (access(g.gl_pathv[i], X_OK) == 0) {
            pylist_add(l, g.gl_pathv[i], required);
            added++;
        }
    }
    globfree(&g);
    return added;
}

static void pythons_from_env(struct ts_pylist *l, const char *list)
{
    char *copy = x_strdup(list), *save = NULL;

    for (char *tok = strtok_r(copy, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
        if (access(tok, X_OK) != 0)
            ts_fail("RANKTOP_PYTHONS names %s, which is not an executable", tok);
        else
            pylist_add(l, tok, true);
    }
    free(copy);
    if (l->n == 0)
        ts_fail("RANKTOP_PYTHONS is set but names no usable interpreter");
}

/* Debian sid's python3.14 and python3.15 through the in-place wrappers of the chroot that
 * tests/sid_chroot.sh builds ($RANKTOP_SID_CHROOT, else /var/cache/ranktop/sid-chroot):
 * required where that chroot exists, absent otherwise (the e2e test sid_pythons says so). */
static void sid_pythons(struct ts_pylist *l)
{
    const char *dir = getenv("RANKTOP_SID_CHROOT");
    char path[PATH_MAX];

    if (!dir || !*dir)
        dir = "/var/cache/ranktop/sid-chroot";
    for (int minor = 14; minor <= 15; minor++) {
        snprintf(path, sizeof(path), "%s.bin/python3.%d", dir, minor);
        if (access(path, X_OK) == 0)
            pylist_add(l, path, true);
    }
}

void ts_pythons_discover(struct ts_pylist *l, int required_minor, bool debian_required)
{
    const char *env = getenv("RANKTOP_PYTHONS");
    char root[PATH_MAX], pattern[PATH_MAX + 64];

    l->n = 0;
    if (env && *env) {
        pythons_from_env(l, env);
        return;
    }
    pyenv_root(root, sizeof(root));
    for (int minor = 8; minor <= 13; minor++) {
        bool required = minor >= required_minor;

        snprintf(pattern, sizeof(pattern), "%s/versions/3.%d.*/bin/python3", root, minor);
        if (pylist_glob(l, pattern, required) == 0 && required)
            ts_fail("missing interpreter: no %s (install it with pyenv, or set RANKTOP_PYTHONS)",
                    pattern);
    }
    if (access("/usr/bin/python3.11", X_OK) == 0)
        pylist_add(l, "/usr/bin/python3.11", debian_required);
    else if (debian_required)
        ts_fail("missing interpreter: /usr/bin/python3.11 (Debian's static, non-PIE build)");
    sid_pythons(l);
}

void ts_pythons_unsupported(struct ts_pylist *l)
{
    char root[PATH_MAX], pattern[PATH_MAX + 64];

    l->n = 0;
    pyenv_root(root, sizeof(root));
    for (int minor = 6; minor <= 7; minor++) {
        snprintf(pattern, sizeof(pattern), "%s/versions/3.%d.*/bin/python3", root, minor);
        pylist_glob(l, pattern, false);
    }
}

void ts_script_path(char *out, size_t n, const char *script)
{
    const char *src = getenv("RANKTOP_SRCDIR");

    snprintf(out, n, "%s/tests/py/%s", src && *src ? src : ".", script);
}

/* ---- child processes -------------------------------------------------------------------- */

static struct ts_child children[TS_MAX_CHILDREN];

static void dir_remove(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[PATH_MAX];

    if (!d)
        return;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

struct ts_child *ts_child_new(void)
{
    struct ts_child *c = children;

    while (c < children + TS_MAX_CHILDREN && c->used)
        c++;
    ck_assert_msg(c < children + TS_MAX_CHILDREN, "more than %d live children", TS_MAX_CHILDREN);
    memset(c, 0, sizeof(*c));
    c->used = true;
    snprintf(c->dir, sizeof(c->dir), "/tmp/ranktop-test.XXXXXX");
    ck_assert_msg(mkdtemp(c->dir) != NULL, "mkdtemp: %s", strerror(errno));
    /* Readable by the unprivileged user some tests switch to. */
    chmod(c->dir, 0755);
    return c;
}

void ts_child_exec(struct ts_child *c, const char *const argv[])
{
    pid_t parent = getpid();

    fflush(NULL);
    c->pid = fork();
    ck_assert_msg(c->pid >= 0, "fork: %s", strerror(errno));
    if (c->pid > 0)
        return;
    /* The target must die with this test process, even when it dies in an assertion. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    int fd = open("/dev/null", O_RDONLY);
    if (fd >= 0)
        dup2(fd, 0);
    execv(argv[0], (char *const *)argv);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

bool ts_child_exited(struct ts_child *c)
{
    if (!c->reaped && waitpid(c->pid, &c->status, WNOHANG) == c->pid)
        c->reaped = true;
    return c->reaped;
}

void ts_child_kill(struct ts_child *c)
{
    if (c->pid > 0 && !c->reaped) {
        kill(c->pid, SIGKILL);
        while (waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR)
            ;
        c->reaped = true;
    }
    if (c->dir[0]) {
        dir_remove(c->dir);
        c->dir[0] = 0;
    }
    c->used = false;
}

void ts_children_kill_all(void)
{
    for (int i = 0; i < TS_MAX_CHILDREN; i++)
        if (children[i].used)
            ts_child_kill(&children[i]);
}

static void file_snippet(const char *path, char *out, size_t n)
{
    FILE *f = fopen(path, "r");
    size_t got = 0;

    if (f) {
        got = fread(out, 1, n - 1, f);
        fclose(f);
    }
    out[got] = 0;
    out[strcspn(out, "\n")] = 0;
}

bool ts_child_wait_ready(struct ts_child *c, const char *label)
{
    char ready[PATH_MAX], err[PATH_MAX], why[256];
    uint64_t deadline = clock_mono_ns() + READY_TIMEOUT_NS;

    snprintf(ready, sizeof(ready), "%s/ready", c->dir);
    snprintf(err, sizeof(err), "%s/error", c->dir);
    while (access(ready, F_OK) != 0) {
        if (ts_child_exited(c)) {
            file_snippet(err, why, sizeof(why));
            ts_fail("%s: target exited (wait status 0x%x) before it was ready%s%s", label,
                    c->status, why[0] ? ": " : "", why);
            return false;
        }
        if (clock_mono_ns() > deadline) {
            ts_fail("%s: target not ready after %llu s", label,
                    (unsigned long long)(READY_TIMEOUT_NS / 1000000000ull));
            return false;
        }
        usleep(2000);
    }
    return true;
}

struct ts_child *ts_target_start(const char *python, const char *script, const char *const *args)
{
    struct ts_child *c = ts_child_new();
    const char *argv[16];
    char path[PATH_MAX];
    int n = 0;

    ts_script_path(path, sizeof(path), script);
    argv[n++] = python;
    argv[n++] = "-E";
    argv[n++] = "-S";
    argv[n++] = path;
    for (int i = 0; args && args[i] && n < 14; i++)
        argv[n++] = args[i];
    argv[n++] = c->dir;
    argv[n] = NULL;
    ts_child_exec(c, argv);
    return c;
}

/* ---- Check cases ------------------------------------------------------------------------ */

static void case_setup(void)
{
    ts_failures_reset();
}

void ts_add_case(Suite *s, const char *name, const TTest *test, int timeout_s)
{
    TCase *tc = tcase_create(name);

    tcase_add_checked_fixture(tc, case_setup, ts_children_kill_all);
    tcase_set_timeout(tc, timeout_s);
    tcase_add_test(tc, test);
    suite_add_tcase(s, tc);
}

/* ---- Check main ------------------------------------------------------------------------- */

int ts_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
