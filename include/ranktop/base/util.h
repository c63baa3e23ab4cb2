/* Allocation, clock and small string helpers used by every layer.
 *
 * Out of memory is fatal: the x_ allocators call app_fatal(), which runs the registered
 * terminal-restore hook (set by the UI) before aborting, so the user's terminal is never left
 * in curses mode. All functions are thread-safe. */
#ifndef RANKTOP_UTIL_H
#define RANKTOP_UTIL_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_BASE)
#error "ranktop/base/util.h belongs to src/base/, a layer this one may not use"
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdbool.h>

void *x_malloc(size_t n);
void *x_calloc(size_t nmemb, size_t size);
void *x_reallocarray(void *p, size_t nmemb, size_t size);
char *x_strdup(const char *s);
char *x_strndup(const char *s, size_t n);

/* Prints "ranktop: fatal: ..." after restoring the terminal, then aborts. */
_Noreturn void app_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Registers the function app_fatal calls before printing (the UI's terminal restore). */
void app_set_fatal_hook(void (*hook)(void));

/* The short name of a signal ("SIGSEGV") for signals 1-15, NULL for others. Async-signal-safe
 * (a table). */
const char *app_signal_name(int sig);

/* Runs that hook, if one is registered (the crash report's first step). */
void app_restore_terminal(void);

/* Installs the crash report (crash.c): a fault or abort of ranktop restores the terminal,
 * prints the version, signal, address, thread and backtrace to stderr, and ends with the
 * signal's default action. Called once by main, before any thread starts; nothing is
 * installed in sanitizer builds. */
void app_crash_install(const char *version);

/* For a command that keeps SIGINT, SIGTERM, SIGHUP and SIGQUIT at their default action:
 * starts a thread that never blocks them, so that they end the process at once even while
 * every other thread blocks them (libunwind does, around the unwinder's file reads) or waits
 * in a system call (termsig.c). Called once by main, before the command runs. */
void app_term_sink_start(void);

/* Monotonic and CPU clocks in nanoseconds. */
uint64_t clock_mono_ns(void);
uint64_t clock_thread_cpu_ns(void);
uint64_t clock_process_cpu_ns(void);

/* The kernel's page size, sysconf(_SC_PAGESIZE): 4 KiB on x86-64; 4, 16 or 64 KiB on aarch64
 * (RHEL and openEuler on Kunpeng use 64 KiB). Never assume 4096 where a page matters. */
size_t sys_page_size(void);

/* qsort that accepts an empty or NULL array (C leaves qsort(NULL, 0, ...) undefined, and
 * UBSan says so); arrays of fewer than two elements are left as they are. */
void x_qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));

/* Reads a whole small file (at most max bytes) into a NUL-terminated heap buffer.
 * Returns 0 or a negative app_status; *len gets the byte count. */
int file_read_all(const char *path, size_t max, char **out, size_t *len);
/* file_read_all for a path the user names: APP_E_NOTREG unless it is a regular file, and a
 * FIFO or device is never waited on (nor read). */
int file_read_regular(const char *path, size_t max, char **out, size_t *len);

/* Appends one formatted line (heap-allocated) to the string vector (*v, *n). */
void strv_addf(char ***v, size_t *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void strv_addv(char ***v, size_t *n, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* Replaces every control byte of s (below 0x20, and 0x7f) by '?', in place: text that comes
 * from another process or node must not move a terminal's cursor. Returns s. */
char *str_scrub(char *s);

/* Length of the valid UTF-8 sequence at s (2..4; overlong forms, surrogates and code points
 * past U+10FFFF are not), or 0 when the bytes there are not one. */
size_t utf8_valid_len(const unsigned char *s);

/* A heap copy of s that is valid UTF-8: every byte that does not belong to a valid sequence
 * becomes U+FFFD. For JSON, which must be UTF-8 (json-c copies bytes as they are). */
char *utf8_fix(const char *s);

/* s made safe for a terminal, for text output of names that come from a target, a device
 * file or another node: control bytes and bytes that are not UTF-8 become \xNN, C1 controls
 * \u00NN, so nothing can move the cursor, retitle the window or forge a line. The result
 * lives in a small per-thread ring (8 results; long text cut at 8 KB with "..."). */
const char *text_safe(const char *s);

/* A Python file's short, package-relative name, as py-spy shows it: the part after the last
 * site-packages/ or dist-packages/ ("/usr/lib/python3/dist-packages/torch/nn/modules/module.py"
 * -> "torch/nn/modules/module.py"), or after the standard library's lib/pythonX.Y/
 * ("/usr/lib/python3.11/threading.py" -> "threading.py"); any other file as it is. A suffix
 * of file (never NULL for a non-NULL file; no copy). Any thread. */
const char *path_short(const char *file);

/* Appends UTF-8 for code point cp to dst (at most 4 bytes); returns bytes written. Invalid or
 * surrogate code points become U+FFFD. */
size_t utf8_put(char *dst, uint32_t cp);

#endif
