/* deny_vm_readv PROGRAM [ARG...]: runs PROGRAM under a seccomp filter that refuses
 * process_vm_readv with EPERM (tests/support/deny.h), as a container runtime's default
 * profile may: the e2e tests run ranktop through it to check its /proc/PID/mem reader. */
#include "deny.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rc;

    if (argc < 2) {
        fputs("usage: deny_vm_readv PROGRAM [ARG...]\n", stderr);
        return 2;
    }
    if ((rc = deny_vm_readv()) < 0) {
        fprintf(stderr, "deny_vm_readv: cannot install the filter: %s\n", strerror(-rc));
        return 127;
    }
    execvp(argv[1], argv + 1);
    fprintf(stderr, "deny_vm_readv: cannot run %s: %s\n", argv[1], strerror(errno));
    return 127;
}
