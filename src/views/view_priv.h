/* What the view models share inside src/views and nobody else needs. */
#ifndef RANKTOP_VIEW_PRIV_H
#define RANKTOP_VIEW_PRIV_H

#include "ranktop/views/view.h"

/* view_rank_wait's answers over one history, by (stack, facts): the rank table asks it for
 * every rank, and most ranks wait alike. Keeps at most n answers (view_wait_memo_init). */
struct view_wait_memo_entry {
    uint32_t stack;
    struct wait_facts f;
    enum wait_kind kind;
    char why[sizeof(((struct view_table_row *)0)->wait_why)];
};

struct view_wait_memo {
    size_t *slot; /* entry index + 1, 0 = empty */
    size_t mask;
    struct view_wait_memo_entry *e;
    size_t n, cap;
};

void view_wait_memo_init(struct view_wait_memo *m, size_t n);
void view_wait_memo_fini(struct view_wait_memo *m);

/* view_rank_wait, answered from m when a rank with the same stack and facts was asked before;
 * why must be a view_table_row's wait_why or NULL (else m is not used). */
enum wait_kind view_wait_memo_get(struct view_wait_memo *m, const struct history *h,
                                  const struct hrank *hr, uint32_t stack,
                                  const struct engine_rank_live *l, const struct waits *w,
                                  char *why, size_t whylen);

/* An index by pid: sorted by pid, then by position, so the first entry of a pid is the first
 * in the indexed array's order. */
struct view_by_pid {
    int pid;
    size_t at;
};

void view_by_pid_sort(struct view_by_pid *v, size_t n);

/* The n live records indexed by pid (sorted; malloc'd, n entries). */
struct view_by_pid *view_live_index(const struct engine_rank_live *live, size_t n);

/* The first entry for pid, or NULL; the others follow it. */
const struct view_by_pid *view_by_pid_find(const struct view_by_pid *v, size_t n, int pid);

#endif
