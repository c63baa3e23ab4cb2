/* Tests for tfile_open and tfile_map (collectors/proc/tfile.c), on files made here in a fresh
 * directory: a regular file opens with its size; a FIFO (no writer), a character device and a
 * directory are refused at once as APP_E_NOTREG (the FIFO would block a plain open() for
 * good); a file over the bound is APP_E_LIMIT; a link is refused with TFILE_NOFOLLOW and
 * followed without it; and under a root, an absolute link resolves inside that root, not in
 * ours (where the kernel, or the emulator, has openat2: qemu-user 7.2 answers ENOSYS, and
 * tfile then opens the joined path, links and all, so that part is skipped, saying so).
 * Single-threaded. */
#include "ranktop/proc/tfile.h"
#include "tsupport.h"

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* As in tfile.c: glibc before 2.32 (Debian 11's, where the libprocps build runs) names no
 * SYS_openat2; the kernel's number is 437 on every architecture. */
#ifndef SYS_openat2
#ifdef __NR_openat2
#define SYS_openat2 __NR_openat2
#else
#define SYS_openat2 437
#endif
#endif

static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/check_tfile.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* dir/name, created with text when text is not NULL. */
static const char *at(const char *name, const char *text)
{
    static char path[160];

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (text) {
        FILE *f = fopen(path, "w");

        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
    }
    return path;
}

/* The status tfile_open gives root + path; the size of what it opened in *size. */
static int open_status(const char *root, const char *path, unsigned flags, uint64_t max,
                       uint64_t *size)
{
    struct app_err err = {0};
    int fd = tfile_open(root, path, flags, max, size, &err);

    if (fd < 0) {
        ck_assert_int_eq(err.code, fd);
        ck_assert(err.msg[0]);
        return fd;
    }
    close(fd);
    return 0;
}

START_TEST(test_regular_and_bound)
{
    uint64_t size = 0;
    struct tfile_map m;
    struct app_err err = {0};

    ck_assert_int_eq(open_status(NULL, at("f", "hello"), 0, 5, &size), 0);
    ck_assert_uint_eq(size, 5);
    ck_assert_int_eq(open_status(NULL, at("f", NULL), 0, 4, &size), APP_E_LIMIT);
    ck_assert_int_eq(open_status(NULL, at("none", NULL), 0, 4, &size), APP_E_NOTFOUND);
    ck_assert_int_eq(tfile_map(NULL, at("f", NULL), 0, 1 << 20, &m, &err), 0);
    ck_assert_uint_eq(m.len, 5);
    ck_assert_int_eq(memcmp(m.p, "hello", 5), 0);
    tfile_unmap(&m);
    at("empty", "");
    ck_assert_int_eq(tfile_map(NULL, at("empty", NULL), 0, 1 << 20, &m, &err), APP_E_IO);
}
END_TEST

START_TEST(test_not_regular)
{
    uint64_t size = 0;

    ck_assert_int_eq(mkfifo(at("fifo", NULL), 0600), 0);
    /* A plain open() would wait here for a writer; the test would time out. */
    ck_assert_int_eq(open_status(NULL, at("fifo", NULL), 0, 1 << 20, &size), APP_E_NOTREG);
    ck_assert_int_eq(open_status(dir, "/fifo", 0, 1 << 20, &size), APP_E_NOTREG);
    ck_assert_int_eq(open_status(NULL, "/dev/null", 0, 1 << 20, &size), APP_E_NOTREG);
    ck_assert_int_eq(open_status(NULL, dir, 0, 1 << 20, &size), APP_E_NOTREG);
}
END_TEST

/* Whether this kernel (or emulator) has openat2, which keeps links inside a root. */
static bool have_openat2(void)
{
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC};
    int fd = (int)syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));

    if (fd >= 0)
        close(fd);
    return fd >= 0 || errno != ENOSYS;
}

START_TEST(test_links)
{
    uint64_t size = 0;
    char target[160];

    snprintf(target, sizeof(target), "%s", at("real", "12345678"));
    ck_assert_int_eq(symlink(target, at("link", NULL)), 0);
    ck_assert_int_eq(open_status(NULL, at("link", NULL), 0, 1 << 20, &size), 0);
    ck_assert_uint_eq(size, 8);
    ck_assert_int_eq(open_status(NULL, at("link", NULL), TFILE_NOFOLLOW, 1 << 20, &size),
                     APP_E_NOTREG);
    if (!have_openat2()) {
        fprintf(stderr, "check_tfile: links under a root not checked: openat2 is ENOSYS here "
                        "(qemu-user), so tfile opens the joined path, links and all\n");
        return;
    }
    /* Inside dir as a root, "/real" is dir/real: an absolute link stays in the root. */
    ck_assert_int_eq(symlink("/real", at("abs", NULL)), 0);
    size = 0;
    ck_assert_int_eq(open_status(dir, "/abs", 0, 1 << 20, &size), 0);
    ck_assert_uint_eq(size, 8);
    ck_assert_int_eq(open_status(dir, "/abs", TFILE_NOFOLLOW, 1 << 20, &size), APP_E_NOTREG);
    /* Nor does ".." leave it. */
    ck_assert_int_eq(symlink("../../../../../../real", at("up", NULL)), 0);
    size = 0;
    ck_assert_int_eq(open_status(dir, "/up", 0, 1 << 20, &size), 0);
    ck_assert_uint_eq(size, 8);
}
END_TEST

/* A file truncated while it is mapped: reading its vanished pages raises SIGBUS, which
 * tfile_guard turns into an error (the old code died of it), also inside a nested guard and
 * with every signal blocked (as in libunwind's callbacks); reads after it are guarded again. */
struct shrink {
    const char *path;
    const struct tfile_map *m, *inner;
    unsigned sum;
    int inner_rc;
};

static int read_all(void *arg)
{
    struct shrink *k = arg;

    for (size_t i = 0; i < k->m->len; i += 4096)
        k->sum += k->m->p[i];
    return 7;
}

static int shrink_then_read(void *arg)
{
    struct shrink *k = arg;

    ck_assert_int_eq(truncate(k->path, 0), 0);
    return read_all(k);
}

static int nested(void *arg)
{
    struct shrink *k = arg, in = {k->path, k->inner, NULL, 0, 0};
    struct app_err err = {0};

    k->inner_rc = tfile_guard(k->inner, shrink_then_read, &in, "inner", &err);
    return read_all(k); /* the outer mapping is whole: read to the end, still guarded */
}

static const char *big(const char *name)
{
    const char *path = at(name, NULL);
    FILE *f = fopen(path, "w");

    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 64 * 1024; i++)
        fputc('x', f);
    ck_assert_int_eq(fclose(f), 0);
    return path;
}

START_TEST(test_guard_shrink)
{
    struct tfile_map m, m2;
    struct app_err err = {0};
    const char *path = big("shrinks");
    struct shrink k = {path, &m, NULL, 0, 0};
    sigset_t all, old;

    ck_assert_int_eq(tfile_map(NULL, path, 0, 1 << 20, &m, &err), 0);
    ck_assert_int_eq(tfile_guard(&m, read_all, &k, path, &err), 7);
    ck_assert_uint_eq(k.sum, 16u * 'x');
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    ck_assert_int_eq(tfile_guard(&m, shrink_then_read, &k, path, &err), APP_E_IO);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    ck_assert_ptr_nonnull(strstr(err.msg, "shrank"));
    tfile_unmap(&m);
    /* Nested: the inner file shrinks, the outer is read whole after it. */
    ck_assert_int_eq(tfile_map(NULL, big("outer"), 0, 1 << 20, &m, &err), 0);
    ck_assert_int_eq(tfile_map(NULL, big("inner"), 0, 1 << 20, &m2, &err), 0);
    k = (struct shrink){at("inner", NULL), &m, &m2, 0, 0};
    ck_assert_int_eq(tfile_guard(&m, nested, &k, "outer", &err), 7);
    ck_assert_int_eq(k.inner_rc, APP_E_IO);
    ck_assert_uint_eq(k.sum, 16u * 'x');
    tfile_unmap(&m2);
    tfile_unmap(&m);
}
END_TEST

static Suite *tfile_suite(void)
{
    Suite *s = suite_create("tfile");
    TCase *tc = tcase_create("tfile");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_regular_and_bound);
    tcase_add_test(tc, test_not_regular);
    tcase_add_test(tc, test_links);
    tcase_add_test(tc, test_guard_shrink);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ts_run(tfile_suite());
}
