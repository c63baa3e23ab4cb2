/* Storage that a history shares with its clones (history_share.c): reference-counted buffers
 * and the append-only arrays kept in them (a thread's sealed runs, a series' points). */
#ifndef RANKTOP_HISTORY_SHARE_H
#define RANKTOP_HISTORY_SHARE_H

#include "ranktop/model/history.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* A buffer of cap elements and its holders' count: the writer's history and every clone that
 * shares it. What a holder sees of it never changes: the writer appends past every clone's
 * end, and moves or rewrites elements only while it is the one holder. */
struct hbuf {
    atomic_size_t refs;
    size_t cap; /* elements */
    max_align_t data[];
};

struct hbuf *hbuf_new(size_t cap, size_t size);
struct hbuf *hbuf_ref(struct hbuf *b);
void hbuf_release(struct hbuf *b);

/* Room for `want` elements in an append-only table (frames, stacks, stack_frames) that clones
 * share: *data points at b's elements, n of them in use, *cap of room; grows by doubling from
 * min, into a new buffer when b has other holders. */
void table_room(struct hbuf **b, void **data, size_t n, size_t *cap, size_t want, size_t size,
                size_t min);

/* A generation of the interning tables (one per compaction, history.h's gen) and what keeps
 * interned strings alive for clones: a generation that ends keeps the strings it dropped
 * (hgen_bury) and holds the next generation, so a clone that holds its generation keeps every
 * string its frames point at, whatever later compactions drop. */
struct hgen;
struct hgen *hgen_new(void);
struct hgen *hgen_ref(struct hgen *g);
void hgen_release(struct hgen *g);
/* Hands g the strings of strs[0..n) that are not NULL, to free when g goes. */
void hgen_bury(struct hgen *g, char **strs, size_t n);
/* g is followed by next (a compaction): g holds a reference to it. */
void hgen_link(struct hgen *g, struct hgen *next);

/* A thread's sealed runs: unshared (owned by this history alone, so writable in place: a
 * compaction renumbers their stacks), the first d dropped (trim), their buffer's bytes. */
struct hrun *runs_own(struct hthread *t);
void runs_drop_front(struct hthread *t, size_t d);
size_t runs_bytes(const struct hthread *t);
/* The runs of t, a copy of a thread record, become the copy's too (one more holder). */
void runs_share(struct hthread *t);

/* A series' points: append one, drop the first d, share them with a copy of the record,
 * free them (a series built by hand owns a plain array: buf NULL). */
void series_push(struct hseries *s, uint64_t t, double v);
void series_drop_front(struct hseries *s, size_t d);
void series_share(struct hseries *s);
void series_free(struct hseries *s);

#endif
