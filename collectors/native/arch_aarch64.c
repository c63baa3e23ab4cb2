/* The aarch64 part of the native unwinder (arch.h): registers through PTRACE_GETREGSET with
 * NT_PRSTATUS as struct user_pt_regs (x0-x30, sp, pc, pstate), libunwind's aarch64 register
 * numbers (UNW_AARCH64_X0 = 0 .. X30 = 30, SP = 31, PC = 32, PSTATE = 33: the same order as
 * the kernel's set, which this file checks at compile time), and its aarch64 table search.
 * No state; any thread.
 *
 * Not handled: return addresses signed with pointer authentication (-mbranch-protection=
 * pac-ret); libunwind strips the PAC bits only from 1.8.3 on, and an unwind through such code
 * stops at the first signed address (its frames end there; nothing crashes). */
#include "arch.h"

#include <asm/ptrace.h>
#include <elf.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>

_Static_assert(sizeof(struct user_pt_regs) <= sizeof(((struct arch_regs *)0)->u.raw),
               "struct arch_regs holds aarch64's register set");
_Static_assert(UNW_AARCH64_X0 == 0 && UNW_AARCH64_X30 == 30 && UNW_AARCH64_SP == 31 &&
                   UNW_AARCH64_PC == 32 && UNW_AARCH64_PSTATE == 33,
               "libunwind numbers aarch64's registers in the kernel's order");
_Static_assert(offsetof(struct user_pt_regs, sp) == 31 * 8 &&
                   offsetof(struct user_pt_regs, pc) == 32 * 8 &&
                   offsetof(struct user_pt_regs, pstate) == 33 * 8,
               "user_pt_regs is 34 consecutive 64-bit registers");

int arch_regs_read(int tid, struct arch_regs *r)
{
    struct iovec io = {r->u.raw, sizeof(struct user_pt_regs)};

    return ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRSTATUS, &io) < 0 ? -errno : 0;
}

uint64_t arch_regs_sp(const struct arch_regs *r)
{
    uint64_t sp;

    memcpy(&sp, r->u.raw + offsetof(struct user_pt_regs, sp), sizeof(sp));
    return sp;
}

int arch_regs_get(const struct arch_regs *r, unw_regnum_t reg, unw_word_t *val)
{
    if (reg < UNW_AARCH64_X0 || reg > UNW_AARCH64_PSTATE)
        return -UNW_EBADREG;
    memcpy(val, r->u.raw + (size_t)reg * 8, sizeof(*val));
    return 0;
}

extern int _Uaarch64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip,
                                               unw_dyn_info_t *di, unw_proc_info_t *pi,
                                               int need_unwind_info, void *arg);

int arch_search_table(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di, unw_proc_info_t *pi,
                      int need_unwind_info, void *arg)
{
    return _Uaarch64_dwarf_search_unwind_table(as, ip, di, pi, need_unwind_info, arg);
}

/* aarch64 glibc starts a thread at thread_start, a local function of clone.S and clone3.S
 * (named only where the full symbol table is at hand; otherwise it reads as clone3). */
bool arch_is_thread_start(const char *fn)
{
    return fn && !strcmp(fn, "thread_start");
}
