/* The program check_native_core unwinds from its core: main -> outer -> inner -> abort(),
 * each a frame of its own (noinline; the empty asm keeps outer's call from being a tail
 * call). Built for the build's machine, static and non-PIE, and run under qemu-user, which
 * writes the core (tests/unit/core/make_core.sh). */
#include <stdlib.h>

__attribute__((noinline)) void inner(void);
__attribute__((noinline)) void outer(void);

void inner(void)
{
    abort();
}

void outer(void)
{
    inner();
    __asm__ volatile("");
}

int main(void)
{
    outer();
    __asm__ volatile("");
    return 0;
}
