/* The kind of wait a rank or thread is in: a table of rules (pattern on a frame's module, file,
 * function, native symbol or object -> kind), its parser, and a pure classifier over what is
 * known of one thread (its frames, the interpreter's GC flag, whether it holds the GIL, its
 * /proc state and syscall, whether the rank died).
 *
 * The rules file format is documented at the top of data/waits.rules, which is also the
 * built-in table (embedded into the binary at build time). A parsed table is immutable: any
 * thread may classify against it; waits_builtin() is parsed once, on first use, thread-safely.
 * Nothing here does I/O. */
#ifndef RANKTOP_WAITS_H
#define RANKTOP_WAITS_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_MODEL)
#error "ranktop/model/waits.h belongs to src/model/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/model/history.h"
#include "ranktop/base/status.h"

enum wait_kind {
    WAIT_UNKNOWN = 0,
    WAIT_COLLECTIVE,
    WAIT_DATA,
    WAIT_DEVICE,
    WAIT_GC,
    WAIT_GIL,
    WAIT_HOST,
    WAIT_IO,
    WAIT_STOPPED,
    WAIT_DEAD,
    WAIT_KINDS
};

/* "unknown","collective","data","device","gc","gil","host","io","stopped","dead"; "unknown" for
 * an out-of-range value. */
const char *wait_kind_name(enum wait_kind k);

/* The kind named s (one of the names above), or -1. */
int wait_kind_parse(const char *s);

struct waits; /* a parsed rule table */

/* Parses a rules file's text (len bytes; need not be NUL-terminated). origin names it in errors
 * ("FILE:LINE: ...") and in the reasons waits_classify gives. Returns 0 and a table in *out,
 * or APP_E_PARSE (APP_E_LIMIT for a file over the bounds) with err set and *out NULL. */
int waits_parse(const char *buf, size_t len, const char *origin, struct waits **out,
                struct app_err *err);

void waits_free(struct waits *w);

/* The number of rules in w. */
size_t waits_count(const struct waits *w);

/* The built-in table (data/waits.rules embedded into the binary at build time, as data/embed.sh
 * does for demo_job.py, so a portable binary copied alone has it). Never NULL. */
const struct waits *waits_builtin(void);

struct wait_facts {
    /* innermost first (as the stack readers return them and history_intern_stack takes them;
     * history_stack_frames gives a stack outermost first: waits_classify_stack turns it);
     * native frames have native=true, file = object */
    const struct hframe *frames;
    size_t nframes;
    int in_gc;         /* 1 the interpreter is collecting, 0 not, -1 unknown */
    int holds_gil;     /* 1, 0, -1 unknown */
    char state;        /* the thread's /proc state letter (R S D T t Z ...), 0 unknown */
    int syscall;       /* the syscall number it sleeps in (/proc/PID/task/TID/syscall), -1 none or
                          unknown */
    const char *wchan; /* NULL unknown */
    /* The syscall is a select or poll over no descriptor: a sleep (time.sleep before 3.11),
     * not I/O. */
    bool no_fds;
    bool exited; /* a dead rank: */
    int exit_code, exit_signal;
};

/* Facts that know nothing: no frames, every figure unknown. */
void wait_facts_init(struct wait_facts *f);

/* The kind of wait, and in why (may be NULL) a short reason ("waits.rules:12 module
 * torch.distributed.distributed_c10d: all_reduce", "state D in read", "signal 11 (SIGSEGV)").
 * Precedence: dead > stopped > gc > frame rules (frames innermost first; for one frame the
 * table's rules in order; the first match decides) > io (state D, or sleeping in an I/O
 * syscall) > gil (not holding the GIL while sleeping on a futex) > host (frames that match
 * nothing). Unknown stays unknown: never guessed. w NULL is the built-in table. */
enum wait_kind waits_classify(const struct waits *w, const struct wait_facts *f, char *why,
                              size_t whylen);

/* waits_classify over the stack with id `stack` of h (HSTACK_NONE: no frames) and the other
 * facts in f (f->frames and f->nframes are ignored). */
enum wait_kind waits_classify_stack(const struct waits *w, const struct history *h, uint32_t stack,
                                    const struct wait_facts *f, char *why, size_t whylen);

/* The name of syscall nr on this machine's architecture ("read", "futex"), NULL when not in
 * the small table of names the classifier knows. */
const char *waits_syscall_name(int nr);

/* Whether syscall nr waits for I/O (read, recv, poll, select, epoll, ...): the classifier's io. */
bool waits_syscall_io(int nr);

#endif
