/* The x86-64 part of the native unwinder (arch.h): registers through PTRACE_GETREGSET with
 * NT_PRSTATUS as struct user_regs_struct, libunwind's x86-64 register numbers, and its x86-64
 * table search. No state; any thread. */
#include "arch.h"

#include <elf.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>

_Static_assert(sizeof(struct user_regs_struct) <= sizeof(((struct arch_regs *)0)->u.raw),
               "struct arch_regs holds x86-64's register set");

int arch_regs_read(int tid, struct arch_regs *r)
{
    struct iovec io = {r->u.raw, sizeof(struct user_regs_struct)};

    return ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRSTATUS, &io) < 0 ? -errno : 0;
}

uint64_t arch_regs_sp(const struct arch_regs *r)
{
    uint64_t sp;

    memcpy(&sp, r->u.raw + offsetof(struct user_regs_struct, rsp), sizeof(sp));
    return sp;
}

/* libunwind's x86-64 register numbers (RAX, RDX, RCX, RBX, RSI, RDI, RBP, RSP, R8-R15, RIP)
 * as places in the kernel's register set. */
static const size_t reg_at[] = {
    offsetof(struct user_regs_struct, rax), offsetof(struct user_regs_struct, rdx),
    offsetof(struct user_regs_struct, rcx), offsetof(struct user_regs_struct, rbx),
    offsetof(struct user_regs_struct, rsi), offsetof(struct user_regs_struct, rdi),
    offsetof(struct user_regs_struct, rbp), offsetof(struct user_regs_struct, rsp),
    offsetof(struct user_regs_struct, r8),  offsetof(struct user_regs_struct, r9),
    offsetof(struct user_regs_struct, r10), offsetof(struct user_regs_struct, r11),
    offsetof(struct user_regs_struct, r12), offsetof(struct user_regs_struct, r13),
    offsetof(struct user_regs_struct, r14), offsetof(struct user_regs_struct, r15),
    offsetof(struct user_regs_struct, rip),
};

int arch_regs_get(const struct arch_regs *r, unw_regnum_t reg, unw_word_t *val)
{
    if (reg < 0 || (size_t)reg >= sizeof(reg_at) / sizeof(reg_at[0]))
        return -UNW_EBADREG;
    memcpy(val, r->u.raw + reg_at[reg], sizeof(*val));
    return 0;
}

extern int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip,
                                              unw_dyn_info_t *di, unw_proc_info_t *pi,
                                              int need_unwind_info, void *arg);

int arch_search_table(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di, unw_proc_info_t *pi,
                      int need_unwind_info, void *arg)
{
    return _Ux86_64_dwarf_search_unwind_table(as, ip, di, pi, need_unwind_info, arg);
}

/* x86-64 glibc starts threads at a local label of clone3/clone (no symbol of its own), so the
 * shared names cover it. */
bool arch_is_thread_start(const char *fn)
{
    (void)fn;
    return false;
}
