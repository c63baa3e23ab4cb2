/* Native (C/C++) stacks of a process's threads, read from outside, and their merge with the
 * thread's Python stack (issue 11).
 *
 * A thread is stopped only while its own registers and stack are read: PTRACE_SEIZE, then
 * PTRACE_INTERRUPT (never PTRACE_ATTACH and its SIGSTOP), registers through
 * PTRACE_GETREGSET, the top of its stack copied with one process_vm_readv; then detached at
 * once. The copy is unwound by libunwind's remote API (unwind tables from the mapped objects)
 * and named while the thread runs again. If ranktop dies at any moment the kernel detaches and
 * resumes the thread. */
#ifndef RANKTOP_NATIVE_H
#define RANKTOP_NATIVE_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_NATIVE)
#error "ranktop/native/native.h belongs to collectors/native/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/python/pystack.h"
#include "ranktop/base/status.h"

struct native_frame {
    uint64_t ip;          /* the return address (the innermost frame: the stopped pc) */
    const char *function; /* demangled symbol, NULL when no symbol covers ip (owned by ctx) */
    const char *object;   /* path of the mapped object, "" when ip is in no file mapping */
    uint64_t offset;      /* ip's offset in that object's file mapping (load bias removed) */
    bool eval;            /* a CPython evaluation-loop frame (runs Python frames) */
    bool interp;          /* in the interpreter (python binary or libpython) */
};

struct native_stack {
    struct native_frame *frames; /* innermost first */
    size_t n;
    uint64_t stopped_ns; /* how long the thread was stopped (interrupt to detach) */
};

struct native_ctx;

/* Prepares to read pid's native stacks (maps, objects, an unwinder address space). Returns 0
 * or a negative status with err filled. */
int native_open(int pid, struct native_ctx **out, struct app_err *err);
void native_close(struct native_ctx *c);

/* Why some frames may lack names, said once per object since the last call: an object or
 * debug file that is no regular file (a FIFO, a device: never read), or whose symbol tables
 * are over what one object's symbols may cost. Lines ending in '\n', scrubbed of control
 * characters; NULL when there is nothing new. The caller frees the string. */
char *native_take_notes(struct native_ctx *c);

/* Called while the thread is stopped, after its registers and stack were copied: the place to
 * read the same thread's Python stack so that both stacks are of one instant. Keep it short:
 * its time counts as stopped time. */
struct native_hook {
    void (*while_stopped)(void *arg, int tid);
    void *arg;
};

/* Stops thread tid, copies its registers and the top of its stack, runs hook (may be NULL),
 * resumes it; then unwinds the copy and names the frames while the thread runs. Returns 0,
 * or APP_E_PERM (cannot trace: Yama ptrace_scope, another user, already traced by a
 * debugger; err says which), APP_E_GONE (the thread exited), APP_E_TIMEOUT (it did not stop
 * within a second), APP_E_IO. The hook runs only when 0 is returned. */
int native_unwind(struct native_ctx *c, int tid, const struct native_hook *hook,
                  struct native_stack *out, struct app_err *err);
void native_stack_fini(struct native_stack *s);

/* Unwinds the first thread of an ELF core file of this machine (NT_PRSTATUS registers, the
 * memory its PT_LOAD segments hold) with the accessors native_unwind uses, the non-PIE
 * program's own ELF supplying its text and unwind tables. Fills out's ips, innermost first
 * (no names). Returns 0, or a negative status (unreadable, malformed, another machine). */
int native_core_unwind(const char *core, const char *program, struct native_stack *out,
                       struct app_err *err);

/* Native stacks of the threads of an ELF core (ranktop/proc/corefile.h): each NT_PRSTATUS
 * thread's registers unwound over the core's memory image, with the unwind tables and symbols
 * of the mapped files the core's loader found. */
struct corefile;
struct native_core;
struct native_core *native_core_open(const struct corefile *c);
/* Unwinds and names the core's thread i (in its NT_PRSTATUS order) into out. Names are owned
 * by nc. */
void native_core_thread(struct native_core *nc, size_t i, struct native_stack *out);
void native_core_close(struct native_core *nc);

/* One frame of a merged stack: a Python frame, or a native frame kept around them. */
struct merged_frame {
    bool native;
    const struct pyframe *py;       /* when !native (borrowed from the Python sample) */
    const struct native_frame *nat; /* when native (borrowed from the native stack) */
};

/* Merges a thread's native and Python stacks, innermost first: every evaluation-loop frame is
 * replaced in place by the Python frames it runs (up to and including the next entry frame),
 * other interpreter frames are dropped except the blocking ones (time, sleep, locks, GIL),
 * and native frames outside the interpreter stay. When the two do not line up (an unwind cut
 * short, a frame popped in between), the Python frames left over follow the native ones. The
 * result (*out, *n) is freed by the caller. */
void native_merge(const struct native_stack *nat, const struct pythread *py,
                  struct merged_frame **out, size_t *n);

#endif
