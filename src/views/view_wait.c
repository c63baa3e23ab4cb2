/* A rank's kind of wait for the monitor's table and HANG banner: its main thread's current
 * stack classified by the rules (ranktop/waits.h), with what the history and the live figures
 * add: the rank's exit, every thread stopped, the main thread's /proc state and syscall, the
 * interpreter collecting garbage. Pure, like every view. */
#include "ranktop/view.h"

enum wait_kind view_rank_wait(const struct history *h, const struct hrank *hr, uint32_t stack,
                              const struct engine_rank_live *l, const struct waits *w, char *why,
                              size_t whylen)
{
    struct wait_facts f;

    wait_facts_init(&f);
    f.exited = hr->exited;
    f.exit_code = hr->exit_code;
    f.exit_signal = hr->exit_signal;
    if (l) {
        /* A zeroed record (no reading yet) knows no state, and then no syscall either. */
        f.state = l->stopped ? 'T' : l->state;
        f.syscall = l->state ? l->syscall : -1;
        f.no_fds = l->no_fds;
        f.in_gc = l->in_gc;
    }
    return waits_classify_stack(w, h, stack, &f, why, whylen);
}
