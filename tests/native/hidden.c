/* A shared library whose blocking path runs through static functions: once stripped, only
 * .gnu_debugdata (MiniDebugInfo) or a separate build-id debug file can name them. Built and
 * stripped by tests/e2e/native_symbols.sh; loaded with ctypes by tests/py/hidden_lib.py. */
#include <unistd.h>

void block_here(void);

static __attribute__((noinline)) void hidden_wait_here(void)
{
    for (;;)
        pause();
}

static __attribute__((noinline)) void hidden_caller(void)
{
    hidden_wait_here();
    __asm__ volatile(""); /* no tail call: the caller keeps its frame */
}

void block_here(void)
{
    hidden_caller();
    __asm__ volatile("");
}
