/* Tests for rmem_readv (collectors/proc/rmem.c) against a real child process: ranges close
 * enough to be read as one (out of order, overlapping, touching, a few bytes apart) must come
 * back byte for byte as single reads give them, and a call with a range the child has not
 * mapped must report exactly the leading ranges an uncoalesced call reads. The child is a fork
 * of this process parked in pause(), so its memory at the test's addresses is a known pattern.
 * The same again under a seccomp filter that refuses process_vm_readv (tests/support/deny.h):
 * the reader turns to /proc/PID/mem and says why; a real refusal stays APP_E_PERM; a target
 * that exits reads as APP_E_GONE through either reader. Single-threaded. */
#include "ranktop/proc/rmem.h"
#include "deny.h"
#include "tsupport.h"

#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#define AREA (64 * 1024)

static uint8_t *area;  /* the pattern, at the same address in the child */
static uint8_t *holed; /* three pages, the middle one unmapped in both */
static pid_t child;

static void child_start(void)
{
    long pg = sysconf(_SC_PAGESIZE);

    area = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    holed =
        mmap(NULL, (size_t)(3 * pg), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(area != MAP_FAILED && holed != MAP_FAILED);
    for (size_t i = 0; i < AREA; i++)
        area[i] = (uint8_t)(i * 7 + (i >> 8));
    memset(holed, 0xA5, (size_t)(3 * pg));
    ck_assert_int_eq(munmap(holed + pg, (size_t)pg), 0);
    child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        for (;;)
            pause();
    }
}

static void child_stop(void)
{
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
}

/* Reads n ranges at offsets off[i] (lengths len[i]) of area in one call and singly; both must
 * equal the pattern. */
static void check_ranges(struct rmem *m, const size_t *off, const size_t *len, int n)
{
    struct rmem_iov iov[16];
    uint8_t buf[16][4096];
    int done = -1;

    for (int i = 0; i < n; i++)
        iov[i] = (struct rmem_iov){(uint64_t)(uintptr_t)(area + off[i]), buf[i], len[i]};
    ck_assert_int_eq(rmem_readv(m, iov, n, &done), 0);
    ck_assert_int_eq(done, n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(!memcmp(buf[i], area + off[i], len[i]), "range %d (offset %zu) differs", i,
                      off[i]);
}

START_TEST(test_close_ranges)
{
    struct rmem *m;
    /* out of order, overlapping, touching, duplicated, a gap under and one over the limit */
    const size_t off[] = {9000, 100, 0, 150, 4000, 4096, 100, 20000, 30000, 30100, 9500};
    const size_t len[] = {200, 80, 64, 300, 96, 512, 80, 1000, 4000, 50, 1};
    const size_t off_again[] = {30100, 9500, 0, 20000, 4096, 100, 30000, 150, 9000, 4000, 60};
    const size_t len_again[] = {50, 1, 64, 1000, 512, 80, 4000, 300, 200, 96, 8};
    uint64_t calls;

    child_start();
    m = rmem_new_pid(child);
    calls = rmem_calls(m);
    check_ranges(m, off, len, (int)(sizeof(off) / sizeof(off[0])));
    if (rmem_reader(m, NULL) &&
        !strcmp(rmem_reader(m, NULL), RMEM_READER_VM)) /* else a preadv a group */
        ck_assert_int_eq(rmem_calls(m) - calls, 1);    /* one system call, coalesced or not */
    /* as many ranges again, in another order: the sort starts from the last call's order */
    check_ranges(m, off_again, len_again, (int)(sizeof(off_again) / sizeof(off_again[0])));
    check_ranges(m, off + 2, len + 2, 1);
    rmem_free(m);
    child_stop();
}
END_TEST

/* More ranges than the insertion sort takes (the qsort path: over 64), in falling order and in
 * pairs that overlap or sit apart beyond the merge gap. */
START_TEST(test_many_ranges)
{
    enum { N = 100 };
    static uint8_t buf[N][256];
    struct rmem_iov iov[N];
    struct rmem *m;
    int done = -1;

    child_start();
    for (int i = 0; i < N; i++) {
        size_t off = (size_t)(N - 1 - i) / 2 * 1000 + (size_t)(i % 2) * 100;

        iov[i] = (struct rmem_iov){(uint64_t)(uintptr_t)(area + off), buf[i], 200};
    }
    m = rmem_new_pid(child);
    ck_assert_int_eq(rmem_readv(m, iov, N, &done), 0);
    ck_assert_int_eq(done, N);
    for (int i = 0; i < N; i++)
        ck_assert_msg(!memcmp(buf[i], (uint8_t *)(uintptr_t)iov[i].addr, 200), "range %d differs",
                      i);
    rmem_free(m);
    child_stop();
}
END_TEST

START_TEST(test_unmapped_range)
{
    long pg = sysconf(_SC_PAGESIZE);
    struct rmem *m;
    uint8_t a[64], b[64], c[64];
    int done = -1;
    struct rmem_iov iov[3];

    child_start();
    /* a ends where the hole begins and b lies in it, 8 bytes on: close enough to be merged */
    iov[0] = (struct rmem_iov){(uint64_t)(uintptr_t)(holed + pg - 64), a, 64};
    iov[1] = (struct rmem_iov){(uint64_t)(uintptr_t)(holed + 2 * pg), c, 64};
    iov[2] = (struct rmem_iov){(uint64_t)(uintptr_t)(holed + pg + 8), b, 64};
    m = rmem_new_pid(child);
    ck_assert_int_lt(rmem_readv(m, iov, 3, &done), 0);
    ck_assert_int_eq(done, 2); /* what one uncoalesced call gives: a and c, not b */
    ck_assert(a[0] == 0xA5 && a[63] == 0xA5 && c[0] == 0xA5 && c[63] == 0xA5);
    /* without the unmapped range, a and c read whole */
    memset(a, 0, sizeof(a));
    memset(c, 0, sizeof(c));
    ck_assert_int_eq(rmem_readv(m, iov, 2, &done), 0);
    ck_assert_int_eq(done, 2);
    ck_assert(a[0] == 0xA5 && c[63] == 0xA5);
    rmem_free(m);
    child_stop();
}
END_TEST

/* The tests above, through /proc/PID/mem: process_vm_readv is refused by a filter, as a
 * container runtime's profile may; the reader says so once it decided. */
START_TEST(test_seccomp_reader)
{
    const size_t off[] = {9000, 100, 0, 150, 4000, 4096, 100, 20000, 30000, 30100, 9500};
    const size_t len[] = {200, 80, 64, 300, 96, 512, 80, 1000, 4000, 50, 1};
    long pg = sysconf(_SC_PAGESIZE);
    const char *why = NULL;
    struct rmem *m;
    uint8_t a[64], b[64], c[64];
    struct rmem_iov iov[3];
    int done = -1;

    child_start();
    if (deny_vm_readv() == -ENOSYS) { /* qemu-user: no seccomp, and no process_vm_readv */
        ts_info("no seccomp here: the filter is not tested");
        child_stop();
        return;
    }
    m = rmem_new_pid(child);
    check_ranges(m, off, len, (int)(sizeof(off) / sizeof(off[0])));
    ck_assert_str_eq(rmem_reader(m, &why), RMEM_READER_MEM);
    ck_assert_ptr_nonnull(why);
    ck_assert_msg(strstr(why, "EPERM") && strstr(why, "seccomp"), "why: %s", why);
    check_ranges(m, off + 4, len + 4, 1);
    /* the holed pages: the same leading ranges as process_vm_readv reads */
    iov[0] = (struct rmem_iov){(uint64_t)(uintptr_t)(holed + pg - 64), a, 64};
    iov[1] = (struct rmem_iov){(uint64_t)(uintptr_t)(holed + 2 * pg), c, 64};
    iov[2] = (struct rmem_iov){(uint64_t)(uintptr_t)(holed + pg + 8), b, 64};
    ck_assert_int_eq(rmem_readv(m, iov, 3, &done), APP_E_STALE);
    ck_assert_int_eq(done, 2);
    ck_assert(a[0] == 0xA5 && c[63] == 0xA5);
    ck_assert_int_eq(rmem_read_some(m, (uint64_t)(uintptr_t)(holed + pg - 16), b, 64), 16);
    ck_assert_int_eq(rmem_read(m, 0xffff800000000000ull, b, 8), APP_E_STALE); /* kernel half */
    rmem_free(m);
    /* a new reader starts with /proc/PID/mem: ranktop's own memory was refused too */
    ck_assert_str_eq(rmem_reader_probe(&why), RMEM_READER_MEM);
    m = rmem_new_pid(child);
    ck_assert_str_eq(rmem_reader(m, NULL), RMEM_READER_MEM);
    /* a target that exits reads as gone, a zombie (its file open already) and reaped */
    ck_assert_int_eq(rmem_read(m, (uint64_t)(uintptr_t)area, a, 8), 0);
    kill(child, SIGKILL);
    ck_assert_int_eq(waitid(P_PID, (id_t)child, &(siginfo_t){0}, WEXITED | WNOWAIT), 0);
    ck_assert_int_eq(rmem_read(m, (uint64_t)(uintptr_t)area, a, 8), APP_E_GONE);
    child_stop();
    ck_assert_int_eq(rmem_read(m, (uint64_t)(uintptr_t)area, a, 8), APP_E_GONE);
    rmem_free(m);
}
END_TEST

/* A reader that may not read the target (nobody reading root's process): APP_E_PERM, filter
 * or not, never process_vm_readv decided. Run in a child that drops to nobody; exits 0 when
 * right. */
static void refused_reader(bool filter)
{
    struct rmem *m;
    uint8_t b[8];
    bool vm;
    int rc;

    if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
        setresuid(65534, 65534, 65534) < 0)
        _exit(3);
    rc = filter ? deny_vm_readv() : 0;
    if (rc < 0 && rc != -ENOSYS) /* qemu-user has no seccomp */
        _exit(4);
    m = rmem_new_pid(child);
    rc = rmem_read(m, (uint64_t)(uintptr_t)area, b, sizeof(b));
    vm = rmem_reader(m, NULL) && !strcmp(rmem_reader(m, NULL), RMEM_READER_VM);
    _exit(rc != APP_E_PERM ? 1 : vm ? 2 : 0);
}

START_TEST(test_real_refusal)
{
    if (geteuid() != 0) {
        ts_info("not root: nobody's refusal is not tested");
        return;
    }
    child_start();
    for (int filter = 0; filter < 2; filter++) {
        pid_t r = fork();
        int st = -1;

        ck_assert_int_ge(r, 0);
        if (r == 0)
            refused_reader(filter);
        ck_assert_int_eq(waitpid(r, &st, 0), r);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "filter %d: status %#x", filter, st);
    }
    child_stop();
}
END_TEST

static Suite *rmem_suite(void)
{
    Suite *s = suite_create("rmem");
    TCase *tc = tcase_create("coalesce");

    tcase_add_test(tc, test_close_ranges);
    tcase_add_test(tc, test_many_ranges);
    tcase_add_test(tc, test_unmapped_range);
    suite_add_tcase(s, tc);
    tc = tcase_create("proc_mem");
    tcase_add_test(tc, test_seccomp_reader);
    tcase_add_test(tc, test_real_refusal);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ts_run(rmem_suite());
}
