/* The crash report: when ranktop itself faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL) or aborts,
 * the terminal is restored first (the fatal hook), then one block goes to stderr -- the
 * version, the signal, the faulting address and thread, and the crashing thread's backtrace
 * (object+offset for each frame, which addr2line turns into lines) -- and the signal is
 * raised again with its default action, so the exit status and any core dump are the usual
 * ones. A crash in a user's job is then a report they can file, not a bare "Segmentation
 * fault".
 *
 * Invariants: the handler only writes with write(2) into a stack buffer and calls backtrace,
 * whose unwinder is loaded at install time (its first call may allocate); a second crash
 * while one is being reported goes straight to the default action. Sanitizer builds keep
 * their own, better reports: nothing is installed there. Installed once by main before any
 * thread starts; the handler runs on whichever thread crashed, on an alternate stack on the
 * main thread (a stack overflow there still gets its report). */
#include "ranktop/base/util.h"

#include <execinfo.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CRASH_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CRASH_SANITIZED 1
#endif
#endif

#ifndef CRASH_SANITIZED

#define CRASH_FRAMES 64

static const char *crash_version = "";
static atomic_flag crash_busy = ATOMIC_FLAG_INIT;

/* A line builder over a fixed buffer: no allocation, no stdio. */
struct line {
    char b[256];
    size_t n;
};

static void put_s(struct line *l, const char *s)
{
    while (*s && l->n < sizeof(l->b) - 1)
        l->b[l->n++] = *s++;
}

static void put_u(struct line *l, unsigned long long v, unsigned base)
{
    char d[24];
    int k = 0;

    do {
        d[k++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v && k < (int)sizeof(d));
    if (base == 16)
        put_s(l, "0x");
    while (k > 0 && l->n < sizeof(l->b) - 1)
        l->b[l->n++] = d[--k];
}

static void flush(struct line *l)
{
    ssize_t w = write(STDERR_FILENO, l->b, l->n);

    (void)w; /* nothing better to do when stderr is gone */
    l->n = 0;
}

static void on_crash(int sig, siginfo_t *si, void *uc)
{
    void *frames[CRASH_FRAMES];
    struct line l = {.n = 0};
    int n;

    (void)uc;
    if (atomic_flag_test_and_set(&crash_busy)) /* another thread is reporting */
        return;                                /* SA_RESETHAND: the default action follows */
    app_restore_terminal();
    put_s(&l, "\nranktop ");
    put_s(&l, crash_version);
    put_s(&l, ": crashed: ");
    put_s(&l, app_signal_name(sig) ? app_signal_name(sig) : "signal");
    if (si->si_code <= 0) { /* sent (kill, raise, abort), not a fault: no address */
        put_s(&l, " sent by process ");
        put_u(&l, (unsigned long long)(unsigned)si->si_pid, 10);
    } else {
        put_s(&l, " at address ");
        put_u(&l, (unsigned long long)(uintptr_t)si->si_addr, 16);
    }
    put_s(&l, " in thread ");
    put_u(&l, (unsigned long long)syscall(SYS_gettid), 10);
    put_s(&l, "; backtrace:\n");
    flush(&l);
    n = backtrace(frames, CRASH_FRAMES);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    put_s(&l, "Please report this with the lines above (`addr2line -f -e OBJECT OFFSET` names "
              "each frame).\n");
    flush(&l);
    raise(sig); /* delivered with the default action once this handler returns */
}

void app_crash_install(const char *version)
{
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    static char altstack[64 * 1024];
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof(altstack)};
    struct sigaction sa;
    void *warm[2];

    crash_version = version;
    /* backtrace is libunwind's when it is linked before libc (its reads of the stack are
     * validated: a report from a smashed stack stops short instead of faulting again), else
     * glibc's, whose unwinder is loaded by this first call, not inside the handler. */
    (void)backtrace(warm, 2);
    sigaltstack(&ss, NULL);
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_crash;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaction(sigs[i], &sa, NULL);
}

#else /* the sanitizer's own handlers stay */

void app_crash_install(const char *version)
{
    (void)version;
}

#endif
