/* Private to collectors/native: what differs between the architectures the native unwinder
 * runs on. Each one has its own file (arch_x86_64.c, arch_aarch64.c), and meson compiles the
 * one of the host; unwind.c sees only this interface. */
#ifndef RANKTOP_NATIVE_ARCH_H
#define RANKTOP_NATIVE_ARCH_H

#include <libunwind.h>
#include <stdbool.h>
#include <stdint.h>

/* The registers of one stopped thread, as the kernel's NT_PRSTATUS register set lays them out
 * for this architecture (struct user_regs_struct on x86-64, struct user_pt_regs on aarch64).
 * Kept as bytes, so that unwind.c needs no architecture's headers; each arch file checks at
 * compile time that its set fits. */
struct arch_regs {
    union {
        unsigned char raw[512];
        uint64_t align;
    } u;
};

/* Reads tid's registers (tid stopped by our ptrace interrupt). Returns 0, or -errno. */
int arch_regs_read(int tid, struct arch_regs *r);

/* The stack pointer of a register set. */
uint64_t arch_regs_sp(const struct arch_regs *r);

/* libunwind's register number reg from a register set: 0, or -UNW_EBADREG for a register
 * that is not in the set (floating point, vector, or out of range). */
int arch_regs_get(const struct arch_regs *r, unw_regnum_t reg, unw_word_t *val);

/* libunwind's own search of a remote .eh_frame_hdr table: exported by the architecture's
 * libunwind (_U<arch>_dwarf_search_unwind_table) for libunwind-ptrace, not declared in its
 * public headers. */
int arch_search_table(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di, unw_proc_info_t *pi,
                      int need_unwind_info, void *arg);

/* Whether fn names code that starts a thread on this architecture's glibc beyond the names
 * shared by all of them (merge.c's list). */
bool arch_is_thread_start(const char *fn);

#endif
