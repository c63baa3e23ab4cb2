/* Kinds of wait for `ranktop watch` (watch_waits.h): the rules (ranktop/model/waits.h) over a
 * rank's main-thread stack as last sampled, with what the watcher knows besides: the exit of a dead
 * rank, and for a rank of this node its main thread's /proc state, syscall and wait channel
 * (cli_wait_read). The report prefers dump's verdict for the ranks dump read (it sees native
 * frames and the GC flag); this one serves the others and every straggler tick. Main thread. */
#include "watch_waits.h"

#include "cli_waits.h"

#include "ranktop/views/view.h"

#include <stdio.h>
#include <string.h>

void watch_wait_of(const void *waits, const struct history *h, const struct hrank *r, uint64_t now,
                   struct watch_wait *out)
{
    const struct hthread *t = view_main_thread(r);
    uint32_t stack = view_thread_stack(h, t);
    struct wait_facts f;
    struct cli_wait cw;
    enum wait_kind k;

    (void)now;
    memset(out, 0, sizeof(*out));
    wait_facts_init(&f);
    if (r->exited) {
        f.exited = true;
        f.exit_code = r->exit_code;
        f.exit_signal = r->exit_signal;
    } else if (history_key_pid(r->pid) == r->pid && (!r->host[0] || !strcmp(r->host, h->host))) {
        cli_wait_read(r->pid, r->pid, -1, -1, &cw);
        f.state = cw.pw.state;
        f.syscall = cw.pw.syscall;
        f.wchan = cw.pw.wchan[0] ? cw.pw.wchan : NULL;
        f.no_fds = cw.pw.no_fds;
    }
    k = waits_classify_stack(cli_waits_table(waits), h, stack, &f, out->why, sizeof(out->why));
    out->kind = wait_kind_name(k);
}
