/* Tests for the architecture part of the native unwinder (collectors/native/arch.h, the
 * build's arch_ARCH.c): libunwind's register numbers read the right places of the kernel's
 * NT_PRSTATUS register set (a set filled here with a distinct value per register), the stack
 * pointer is the set's, registers outside the set are -UNW_EBADREG, and the thread-start name
 * of aarch64's glibc is known there only. Then arch_regs_read on a child of ours stopped by
 * PTRACE_SEIZE + PTRACE_INTERRUPT: its stack pointer lies in its [stack] mapping. That part is
 * skipped, saying so, where ptrace is ENOSYS (qemu-user, which runs this test in the aarch64
 * cross build) or refused. Single-threaded. */
#include "arch.h"
#include "tsupport.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <sys/user.h>
#define PC_REG UNW_X86_64_RIP
#define SP_REG UNW_X86_64_RSP
#define FP_REG UNW_X86_64_RBP
#define FIRST_BAD 17 /* past RIP */
#elif defined(__aarch64__)
#include <asm/ptrace.h>
#define PC_REG UNW_AARCH64_PC
#define SP_REG UNW_AARCH64_SP
#define FP_REG UNW_AARCH64_X29
#define FIRST_BAD (UNW_AARCH64_PSTATE + 1) /* V0 and on: not in NT_PRSTATUS */
#endif

/* A register set whose 64-bit word i holds 0x1000 + i, and where the pc, sp and frame
 * pointer sit in it. */
static void fill(struct arch_regs *r, uint64_t *pc, uint64_t *sp, uint64_t *fp)
{
    uint64_t w[64];

    for (size_t i = 0; i < 64; i++)
        w[i] = 0x1000 + i;
    memcpy(r->u.raw, w, sizeof(w));
#if defined(__x86_64__)
    *pc = w[offsetof(struct user_regs_struct, rip) / 8];
    *sp = w[offsetof(struct user_regs_struct, rsp) / 8];
    *fp = w[offsetof(struct user_regs_struct, rbp) / 8];
#else
    *pc = w[offsetof(struct user_pt_regs, pc) / 8];
    *sp = w[offsetof(struct user_pt_regs, sp) / 8];
    *fp = w[offsetof(struct user_pt_regs, regs) / 8 + 29];
#endif
}

START_TEST(test_mapping)
{
    struct arch_regs r;
    uint64_t pc, sp, fp;
    unw_word_t v = 0;

    fill(&r, &pc, &sp, &fp);
    ck_assert_int_eq(arch_regs_get(&r, PC_REG, &v), 0);
    ck_assert_uint_eq(v, pc);
    ck_assert_int_eq(arch_regs_get(&r, SP_REG, &v), 0);
    ck_assert_uint_eq(v, sp);
    ck_assert_int_eq(arch_regs_get(&r, FP_REG, &v), 0);
    ck_assert_uint_eq(v, fp);
    ck_assert_uint_eq(arch_regs_sp(&r), sp);
    ck_assert_int_eq(arch_regs_get(&r, FIRST_BAD, &v), -UNW_EBADREG);
    ck_assert_int_eq(arch_regs_get(&r, -1, &v), -UNW_EBADREG);
#if defined(__aarch64__)
    for (int i = 0; i <= 30; i++) { /* x0-x30 are words 0-30 */
        ck_assert_int_eq(arch_regs_get(&r, UNW_AARCH64_X0 + i, &v), 0);
        ck_assert_uint_eq(v, 0x1000u + (unsigned)i);
    }
    ck_assert(arch_is_thread_start("thread_start"));
#else
    ck_assert(!arch_is_thread_start("thread_start"));
#endif
    ck_assert(!arch_is_thread_start("main"));
    ck_assert(!arch_is_thread_start(NULL));
}
END_TEST

/* The [stack] mapping of pid. */
static bool stack_of(int pid, uint64_t *lo, uint64_t *hi)
{
    char path[64], line[512];
    FILE *f;
    bool found = false;

    snprintf(path, sizeof(path), "/proc/%d/maps", pid);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, "[stack]") && sscanf(line, "%" SCNx64 "-%" SCNx64, lo, hi) == 2;
    fclose(f);
    return found;
}

START_TEST(test_read_live)
{
    struct arch_regs r;
    uint64_t lo = 0, hi = 0, sp;
    int st, pid = fork();

    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        for (;;)
            pause();
    }
    if (ptrace(PTRACE_SEIZE, pid, 0, 0) < 0) {
        int e = errno;

        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        fprintf(stderr, "check_native_arch: live registers not read: PTRACE_SEIZE: %s%s\n",
                strerror(e), e == ENOSYS ? " (qemu-user emulates no ptrace)" : "");
        return;
    }
    ck_assert_int_eq(ptrace(PTRACE_INTERRUPT, pid, 0, 0), 0);
    ck_assert_int_eq(waitpid(pid, &st, __WALL), pid);
    ck_assert(WIFSTOPPED(st));
    ck_assert_int_eq(arch_regs_read(pid, &r), 0);
    sp = arch_regs_sp(&r);
    ck_assert(stack_of(pid, &lo, &hi));
    ck_assert_msg(sp >= lo && sp < hi, "sp %" PRIx64 " outside [stack] %" PRIx64 "-%" PRIx64, sp,
                  lo, hi);
    kill(pid, SIGKILL);
    waitpid(pid, &st, __WALL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("native_arch");
    TCase *tc = tcase_create("arch");

    tcase_add_test(tc, test_mapping);
    tcase_add_test(tc, test_read_live);
    suite_add_tcase(s, tc);
    return ts_run(s);
}
