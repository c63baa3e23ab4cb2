/* --waits FILE: a user's rules file read (a regular file, bounded) and parsed once at start-up;
 * a file that does not parse is a usage error naming FILE:LINE, before anything is sampled. */
#include "cli_waits.h"

#include "cli.h"

#include "ranktop/base/util.h"

#include <stdio.h>
#include <stdlib.h>

int cli_waits_load(const char *path, const char *cmd, struct waits **out)
{
    struct app_err err = {0};
    char *buf = NULL;
    size_t len = 0;
    int rc;

    *out = NULL;
    rc = file_read_regular(path, CLI_WAITS_MAX_BYTES, &buf, &len);
    if (rc < 0) {
        fprintf(stderr, "%s: --waits %s: %s\n", cli_who(cmd), text_safe(path),
                rc == APP_E_NOTREG ? "not a regular file" : app_status_str(rc));
        return CLI_EXIT_USAGE;
    }
    if (len >= CLI_WAITS_MAX_BYTES) {
        free(buf);
        fprintf(stderr, "%s: --waits %s: larger than %u MiB\n", cli_who(cmd), text_safe(path),
                CLI_WAITS_MAX_BYTES >> 20);
        return CLI_EXIT_USAGE;
    }
    rc = waits_parse(buf, len, path, out, &err);
    free(buf);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", cli_who(cmd), text_safe(err.msg));
        return CLI_EXIT_USAGE;
    }
    return 0;
}

const struct waits *cli_waits_table(const struct waits *user)
{
    return user ? user : waits_builtin();
}

void cli_wait_read(int pid, int tid, int in_gc, int holds_gil, struct cli_wait *w)
{
    *w = (struct cli_wait){.in_gc = in_gc, .holds_gil = holds_gil};
    if (procwait_read(pid, tid > 0 ? tid : pid, &w->pw, NULL) < 0)
        w->pw = (struct procwait){.syscall = -1};
}

void cli_wait_classify(const struct waits *table, const struct pyframe *py, size_t npy,
                       const struct merged_frame *m, size_t nm, struct cli_wait *w)
{
    size_t n = m ? nm : npy;
    struct hframe *fr = x_calloc(n ? n : 1, sizeof(*fr));
    struct wait_facts f;

    for (size_t i = 0; i < n; i++) {
        const struct pyframe *p = m ? (m[i].native ? NULL : m[i].py) : &py[i];

        if (p)
            fr[i] = (struct hframe){p->function, p->file, p->line, false};
        else /* native: its symbol, or none (the rules match no symbol then) */
            fr[i] = (struct hframe){m[i].nat->function ? m[i].nat->function : "", m[i].nat->object,
                                    0, true};
    }
    wait_facts_init(&f);
    f.frames = fr;
    f.nframes = n;
    f.in_gc = w->in_gc;
    f.holds_gil = w->holds_gil;
    f.state = w->pw.state;
    f.syscall = w->pw.syscall;
    f.wchan = w->pw.wchan[0] ? w->pw.wchan : NULL;
    f.no_fds = w->pw.no_fds;
    w->kind = waits_classify(table, &f, w->why, sizeof(w->why));
    free(fr);
}
