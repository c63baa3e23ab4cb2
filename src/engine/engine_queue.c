/* The hand-over from this node's collectors to the one writer of the history, and that writer.
 *
 * Each collector (discovery, sampler, memory, GIL, exit, and the remote collector for other
 * hosts' streams, whose events carry their host) is the single producer of its queue:
 * at the end of a pass it hands its batch of record events over (engine_emit_buf swaps its
 * buffer with the queue's empty one; engine_emit copies a few events), which holds the
 * queue's lock for a swap or a copy, never longer, and wakes the recorder through wake_fd
 * when the queue was empty. No collector writes the history or waits for anyone who reads it.
 *
 * The recorder thread (engine_recorder_main) takes every queue's batch (a swap under the
 * queue's lock), then applies them in queue order through the recorder (recorder_apply, source
 * 0, or the host's source) under the engine lock, which it holds only while applying: other
 * threads still read a few history figures (engine_get_stats) and each host's source state
 * (its error line, clock, ranks) under it. It
 * keeps the history within its window and memory cap (history_trim), and builds the readers'
 * views (engine_view.c) when one is asked for, at most every ENGINE_VIEW_PERIOD_NS: copying the
 * history is its work, off every collector's path. Events of one queue are applied in the
 * order they were handed over; across queues there is no order, and none is needed (a rank's
 * exit status and its end come in either order, recorder.h).
 *
 * In an agent (engine_opts.wire) no recorder runs and nothing writes the history: the agent's
 * writer takes the queues' events for the wire (engine_take, engine_wire.c). */
#include "engine_priv.h"

#include "ranktop/base/util.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TRIM_EVERY_NS (1000000000ull)
#define TRIM_SOON_NS (50000000ull) /* the least time between two trims */
#define IDLE_WAIT_MS 100           /* the recorder's longest sleep: trims and stop are due */
/* Bytes a batch buffer keeps once applied: a burst (an agent's backlog, thousands of runs at
 * once) grows the buffers it passes through, which then go back to the allocator instead of
 * staying the size of the burst in every queue. */
#define KEEP_BYTES (256u << 10)
#define KEEP_EVENTS 4096 /* the remote batches' (whole events) */

void engine_queues_init(struct engine *e)
{
    for (int i = 0; i < ENGINE_NQ; i++)
        pthread_mutex_init(&e->q[i].lock, NULL);
    pthread_mutex_init(&e->rq_lock, NULL);
}

void engine_queues_fini(struct engine *e)
{
    for (int i = 0; i < ENGINE_NQ; i++) {
        pthread_mutex_destroy(&e->q[i].lock);
        engine_evbuf_free(&e->q[i].full);
    }
    pthread_mutex_destroy(&e->rq_lock);
    free(e->rq.ev);
    free(e->rq.link);
}

static void grow(struct engine_evbuf *b, size_t want)
{
    if (want <= b->cap)
        return;
    b->cap = b->cap ? b->cap : 4096;
    while (b->cap < want)
        b->cap *= 2;
    b->buf = x_reallocarray(b->buf, b->cap, 1);
}

/* Appends the n bytes of packed events at p, count events more (0: one engine_evbuf_add
 * counted already). */
static void append(struct engine_evbuf *b, const unsigned char *p, size_t n, size_t count)
{
    grow(b, b->len + n);
    if (n)
        memcpy(b->buf + b->len, p, n);
    b->len += n;
    b->n += count;
}

void engine_evbuf_seal(struct engine_evbuf *b)
{
    if (!b->staged)
        return;
    b->staged = false;
    append(b, (const unsigned char *)&b->stage, record_event_size(b->stage.type), 0);
}

struct record_event *engine_evbuf_add(struct engine_evbuf *b, enum record_type type)
{
    engine_evbuf_seal(b);
    b->staged = true;
    b->n++;
    b->stage.type = type;
    return &b->stage;
}

void engine_evbuf_push(struct engine_evbuf *b, const struct record_event *ev)
{
    engine_evbuf_seal(b);
    append(b, (const unsigned char *)ev, record_event_size(ev->type), 1);
}

const struct record_event *engine_evbuf_next(const struct engine_evbuf *b, size_t *off)
{
    const struct record_event *ev;

    if (*off >= b->len)
        return NULL;
    ev = (const struct record_event *)(const void *)(b->buf + *off);
    *off += record_event_size(ev->type);
    return ev;
}

void engine_evbuf_clear(struct engine_evbuf *b)
{
    b->len = b->n = 0;
    b->staged = false;
    if (b->cap > KEEP_BYTES) {
        free(b->buf);
        b->buf = NULL;
        b->cap = 0;
    }
}

void engine_evbuf_free(struct engine_evbuf *b)
{
    free(b->buf);
    *b = (struct engine_evbuf){0};
}

void engine_wake(struct engine *e)
{
    uint64_t one = 1;

    /* The counter only grows until the recorder reads it: a failed write (EAGAIN, a full
     * counter) leaves it readable, so the recorder wakes all the same. */
    if (e->wake_fd >= 0 && write(e->wake_fd, &one, sizeof(one)) < 0)
        e->wake_fails++;
}

void engine_emit(struct engine *e, enum engine_qid qid, const struct record_event *ev, size_t n)
{
    struct engine_queue *q = &e->q[qid];
    bool was_empty;

    if (!n)
        return;
    pthread_mutex_lock(&q->lock);
    was_empty = q->full.n == 0;
    for (size_t i = 0; i < n; i++)
        engine_evbuf_push(&q->full, &ev[i]);
    pthread_mutex_unlock(&q->lock);
    if (was_empty)
        engine_wake(e);
}

void engine_emit_buf(struct engine *e, enum engine_qid qid, struct engine_evbuf *b)
{
    struct engine_queue *q = &e->q[qid];
    bool was_empty;

    if (!b->n)
        return;
    engine_evbuf_seal(b);
    pthread_mutex_lock(&q->lock);
    was_empty = q->full.n == 0;
    if (was_empty) { /* the usual case: the recorder took the last batch */
        struct engine_evbuf t = q->full;

        q->full = *b;
        *b = t;
    } else {
        append(&q->full, b->buf, b->len, b->n);
    }
    pthread_mutex_unlock(&q->lock);
    engine_evbuf_clear(b);
    if (was_empty)
        engine_wake(e);
}

static void rgrow(struct engine_rbatch *b, size_t want)
{
    if (want <= b->cap)
        return;
    b->cap = b->cap ? b->cap : 64;
    while (b->cap < want)
        b->cap *= 2;
    b->ev = x_reallocarray(b->ev, b->cap, sizeof(*b->ev));
    b->link = x_reallocarray(b->link, b->cap, sizeof(*b->link));
}

void engine_remote_emit(struct engine *e, struct engine_rbatch *b)
{
    struct engine_rbatch *q = &e->rq;
    bool was_empty;

    if (!b->n)
        return;
    pthread_mutex_lock(&e->rq_lock);
    was_empty = q->n == 0;
    if (was_empty) {
        struct engine_rbatch t = *q;

        *q = *b;
        *b = t;
    } else {
        rgrow(q, q->n + b->n);
        memcpy(q->ev + q->n, b->ev, b->n * sizeof(*b->ev));
        memcpy(q->link + q->n, b->link, b->n * sizeof(*b->link));
        q->n += b->n;
    }
    pthread_mutex_unlock(&e->rq_lock);
    b->n = 0;
    if (b->cap > KEEP_EVENTS) {
        free(b->ev);
        free(b->link);
        *b = (struct engine_rbatch){0};
    }
    if (was_empty)
        engine_wake(e);
}

bool engine_queue_full(struct engine *e, enum engine_qid qid)
{
    bool full;

    pthread_mutex_lock(&e->q[qid].lock);
    full = e->q[qid].full.n >= ENGINE_QUEUE_MAX;
    pthread_mutex_unlock(&e->q[qid].lock);
    return full;
}

bool engine_rqueue_full(struct engine *e)
{
    bool full;

    pthread_mutex_lock(&e->rq_lock);
    full = e->rq.n >= ENGINE_QUEUE_MAX;
    pthread_mutex_unlock(&e->rq_lock);
    return full;
}

/* Takes the remote queue's batch into *into (emptied first). */
static void rtake(struct engine *e, struct engine_rbatch *into)
{
    struct engine_rbatch t;

    into->n = 0;
    pthread_mutex_lock(&e->rq_lock);
    t = e->rq;
    e->rq = *into;
    *into = t;
    pthread_mutex_unlock(&e->rq_lock);
}

/* Takes q's batch into *into (emptied first), leaving the queue an empty buffer. */
static void take_one(struct engine_queue *q, struct engine_evbuf *into)
{
    struct engine_evbuf t;

    engine_evbuf_clear(into);
    pthread_mutex_lock(&q->lock);
    t = q->full;
    q->full = *into;
    *into = t;
    pthread_mutex_unlock(&q->lock);
}

void engine_take(struct engine *e, struct engine_evbuf *out)
{
    struct engine_evbuf got = {0};

    engine_evbuf_seal(out);
    for (int i = 0; i < ENGINE_NQ; i++) {
        take_one(&e->q[i], &got);
        append(out, got.buf, got.len, got.n);
    }
    engine_evbuf_free(&got);
}

/* What the recorder takes in one pass: every local queue's batch and the remote one. */
struct taken {
    struct engine_evbuf q[ENGINE_NQ];
    struct engine_rbatch r;
};

/* Applies the batches taken, keeps the history within its bounds; engine lock held. */
static void apply_locked(struct engine *e, struct taken *got, uint64_t *trim_at)
{
    uint64_t now = clock_mono_ns();

    for (int i = 0; i < ENGINE_NQ; i++)
        if (got->q[i].n)
            engine_local_apply_locked(e, &got->q[i], now);
    if (got->r.n)
        engine_remote_apply_locked(e, &got->r, now);
    /* Every second, and at once (at most every TRIM_SOON_NS) when new frames and stacks have
     * taken the history past its budget: the memory cap holds between the regular trims. */
    if (now >= *trim_at ||
        (now + TRIM_EVERY_NS - TRIM_SOON_NS >= *trim_at && history_over_budget(&e->hist))) {
        history_trim(&e->hist, now);
        *trim_at = now + TRIM_EVERY_NS;
    }
    if (e->hist.nranks > (size_t)e->ranks_seen)
        e->ranks_seen = (int)e->hist.nranks;
}

static void recorder_pass(struct engine *e, struct taken *got, uint64_t *trim_at)
{
    for (int i = 0; i < ENGINE_NQ; i++)
        take_one(&e->q[i], &got->q[i]);
    rtake(e, &got->r);
    pthread_mutex_lock(&e->lock);
    apply_locked(e, got, trim_at);
    pthread_mutex_unlock(&e->lock);
    for (int i = 0; i < ENGINE_NQ; i++)
        engine_evbuf_clear(&got->q[i]);
    got->r.n = 0;
    if (got->r.cap > KEEP_EVENTS) {
        free(got->r.ev);
        free(got->r.link);
        got->r = (struct engine_rbatch){0};
    }
}

static void taken_free(struct taken *got)
{
    for (int i = 0; i < ENGINE_NQ; i++)
        engine_evbuf_free(&got->q[i]);
    free(got->r.ev);
    free(got->r.link);
}

void engine_recorder_drain(struct engine *e)
{
    struct taken got = {0};
    uint64_t trim_at = UINT64_MAX - TRIM_EVERY_NS; /* no trim: the last records stay */

    recorder_pass(e, &got, &trim_at);
    taken_free(&got);
}

/* Whether a reader waits for a view (under view_lock). */
static bool view_wanted(struct engine *e)
{
    bool want;

    pthread_mutex_lock(&e->view_lock);
    want = e->view_want;
    pthread_mutex_unlock(&e->view_lock);
    return want;
}

void *engine_recorder_main(void *arg)
{
    struct engine *e = arg;
    struct taken got = {0};
    uint64_t trim_at = clock_mono_ns() + TRIM_EVERY_NS;

    for (;;) {
        struct pollfd pf[2] = {{e->wake_fd, POLLIN, 0}, {e->stop_fd, POLLIN, 0}};
        uint64_t count;

        if (poll(pf, 2, IDLE_WAIT_MS) < 0 && errno != EINTR)
            break;
        if (pf[1].revents & POLLIN)
            break; /* engine_stop applies what the collectors hand over last */
        if ((pf[0].revents & POLLIN) && read(e->wake_fd, &count, sizeof(count)) < 0)
            count = 0;
        recorder_pass(e, &got, &trim_at);
        /* This thread is the history's one writer: the copy takes no lock. */
        if (view_wanted(e))
            engine_view_publish(e, true);
    }
    pthread_mutex_lock(&e->view_lock);
    e->rec_running = false;
    pthread_cond_broadcast(&e->view_cond);
    pthread_mutex_unlock(&e->view_lock);
    taken_free(&got);
    return NULL;
}
