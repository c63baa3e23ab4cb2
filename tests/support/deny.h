/* A seccomp filter that refuses process_vm_readv with EPERM and allows every other system
 * call, as some container runtimes' default profiles do. Shared by check_rmem and the
 * deny_vm_readv wrapper of the e2e tests (header only: both are single files). */
#ifndef RANKTOP_TESTS_DENY_H
#define RANKTOP_TESTS_DENY_H

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define DENY_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define DENY_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "deny.h: no audit architecture for this build"
#endif

/* Installs the filter on the calling thread (and what it execs). Returns 0 or -errno. No
 * privilege is needed: no_new_privs first, as the kernel asks of an unprivileged filter. */
static inline int deny_vm_readv(void)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, DENY_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof(code) / sizeof(code[0])), code};

    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -errno;
    if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
        return -errno;
    return 0;
}

#endif
