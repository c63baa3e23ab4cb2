/* Tests for the recorder (src/model/recorder.c): record events applied to a history through
 * recorder_apply, by themselves (this node as source 0, events refused before a hello, a source
 * past its budget cut off) and as a replay: a recorded agent stream applied in batches through
 * recorder_apply gives the same history, and the same exported files, as the head's live path
 * (engine_rapply.c: one line at a time under the engine, as engine_remote.c feeds it).
 * White-box: a bare struct engine with only its history for the live path. Single-threaded. */
#include "engine_remote_priv.h"
#include "recorder_priv.h"
#include "tsupport.h"

#include "ranktop/export/export.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEAD0 5000000000000ull /* the head's clock at the stream's hello: 5000 s */
#define T0 (HEAD0 - 1000000000ull)

/* ---- a history written as text, for comparing two ---- */

static void dump_stack(FILE *f, const struct history *h, uint32_t s)
{
    const uint32_t *ids;

    if (s == HSTACK_NONE || s >= h->nstacks) {
        fprintf(f, "-");
        return;
    }
    ids = history_stack_frames(h, s);
    for (uint32_t i = 0; i < h->stacks[s].nframes; i++) {
        const struct hframe *fr = &h->frames[ids[i]];

        fprintf(f, "%s%s@%s:%d%s", i ? ";" : "", fr->function, fr->file, fr->line,
                fr->native ? "[n]" : "");
    }
}

static void dump_thread(FILE *f, const struct history *h, const struct hthread *t)
{
    fprintf(f, "  thread %llu tid %d '%s' main %d worker %d first %llu last %llu gone %d\n",
            (unsigned long long)t->ident, t->tid, t->name, t->main, t->worker,
            (unsigned long long)t->first, (unsigned long long)t->last, t->gone);
    for (size_t i = 0; i < t->nruns; i++) {
        fprintf(f, "    %llu..%llu ", (unsigned long long)history_run(t, i)->t0,
                (unsigned long long)history_run(t, i)->t1);
        dump_stack(f, h, history_run(t, i)->stack);
        fputc('\n', f);
    }
}

/* Everything a reader or an exporter takes from h, with stacks as their frames' text (the
 * ids may differ between two histories and mean the same). */
static char *dump(const struct history *h)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    ck_assert_ptr_nonnull(f);
    fprintf(f, "t0 %llu host %s\n", (unsigned long long)h->t0, h->host);
    for (size_t i = 0; i < h->nranks; i++) {
        const struct hrank *r = &h->ranks[i];

        fprintf(f, "rank key %d rank %d host %s dev '%s' py %s start %llu end %llu x %d %d %d\n",
                r->pid, r->rank, r->host, r->device, r->python, (unsigned long long)r->start,
                (unsigned long long)r->end, r->exited, r->exit_code, r->exit_signal);
        for (size_t j = 0; j < r->nthreads; j++)
            dump_thread(f, h, &r->threads[j]);
    }
    for (size_t i = 0; i < h->nseries; i++) {
        const struct hseries *s = &h->series[i];

        fprintf(f, "series %d '%s' '%s' pid %d:", (int)s->id, s->name, s->key, s->pid);
        for (size_t j = 0; j < s->n; j++)
            fprintf(f, " %llu=%.17g", (unsigned long long)s->pts[j].t, s->pts[j].v);
        fputc('\n', f);
    }
    fclose(f);
    return buf;
}

/* Asserts a and b are equal, naming where they first differ. */
static void same_text(const char *what, const char *a, size_t na, const char *b, size_t nb)
{
    size_t i = 0;

    while (i < na && i < nb && a[i] == b[i])
        i++;
    ck_assert_msg(na == nb && i == na, "%s differ at byte %zu of %zu/%zu: '%.80s' vs '%.80s'", what,
                  i, na, nb, a + (i < na ? i : na), b + (i < nb ? i : nb));
}

static char *export_text(const struct history *h, enum export_format fmt, size_t *len)
{
    struct export_opts o = {.format = fmt, .all_threads = true, .interval_ns = 20000000};
    struct app_err err = {0};
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);

    ck_assert_ptr_nonnull(f);
    ck_assert_msg(export_stream(h, &o, f, &err) == 0, "%s", err.msg);
    fclose(f);
    return buf;
}

/* Where the part of an export that comes from the history starts: a Perfetto trace opens
 * with clock snapshots taken when it is written (BOOTTIME now), so two exports of one history
 * differ there; its tracks, named after the ranks, follow. */
static size_t content_at(enum export_format fmt, const char *buf, size_t n)
{
    const char *at;

    ck_assert_uint_gt(n, 0);
    if (fmt != EXPORT_PERFETTO)
        return 0;
    at = memmem(buf, n, "rank ", 5);
    ck_assert_ptr_nonnull(at);
    return (size_t)(at - buf);
}

/* ---- a recorded stream, parsed ---- */

struct stream {
    struct record_event *ev;
    uint64_t *now; /* the head's clock each event is applied at */
    size_t n;
};

/* The newest source time an event carries, or -1. */
static int64_t event_ts(const struct record_event *m)
{
    switch (m->type) {
    case RECORD_HELLO:
        return m->u.hello.mono_ns;
    case RECORD_RANK:
        return m->u.rank.ts;
    case RECORD_RUN:
    case RECORD_GONE:
        return m->u.run.ts;
    case RECORD_TICK:
        return m->u.tick.ts;
    case RECORD_COUNTER:
        return m->u.counter.ts;
    default:
        return -1;
    }
}

/* Parses the fixture; the head's clock follows the agent's from HEAD0 at the hello, and is
 * the same for every event between two ticks (one batch): the clock when the batch is read. */
static void stream_load(struct stream *s, const char *name)
{
    char path[4096], line[4096];
    FILE *f;
    int64_t hello = -1, newest = -1;
    size_t batch = 0;

    snprintf(path, sizeof(path), "%s/tests/data/agent/%s", getenv("RANKTOP_SRCDIR"), name);
    ck_assert_msg((f = fopen(path, "r")) != NULL, "%s", path);
    memset(s, 0, sizeof(*s));
    while (fgets(line, sizeof(line), f)) {
        struct app_err err = {0};
        struct record_event *m;
        size_t len = strcspn(line, "\n");

        s->ev = realloc(s->ev, (s->n + 1) * sizeof(*s->ev));
        s->now = realloc(s->now, (s->n + 1) * sizeof(*s->now));
        m = &s->ev[s->n];
        ck_assert_msg(agentproto_parse(line, len, m, &err) == 0, "%s: %s", line, err.msg);
        if (m->type == RECORD_HELLO)
            hello = m->u.hello.mono_ns;
        if (event_ts(m) > newest)
            newest = event_ts(m);
        s->n++;
        if (m->type == RECORD_TICK || m->type == RECORD_HELLO) {
            for (size_t i = batch; i < s->n; i++)
                s->now[i] = HEAD0 + (uint64_t)(newest - hello);
            batch = s->n;
        }
    }
    for (size_t i = batch; i < s->n; i++)
        s->now[i] = HEAD0 + (uint64_t)(newest - hello);
    fclose(f);
    ck_assert_int_ge(hello, 0);
}

static void stream_free(struct stream *s)
{
    free(s->ev);
    free(s->now);
}

/* The head's live path: every event as engine_remote.c hands a host's lines on (noted on the
 * link, then applied by the recorder thread's engine_remote_apply_locked), one at a time. */
static void live_path(struct engine *e, const struct stream *st, struct rclaims *c)
{
    struct rlink l;

    memset(&l, 0, sizeof(l));
    l.e = e;
    snprintf(l.name, sizeof(l.name), "node1");
    rsource_init(&l.src, 1, "node1", c);
    e->rl = &l;
    e->nrl = 1;
    for (size_t i = 0; i < st->n && !l.refused && !l.src_cut; i++) {
        struct record_event m = st->ev[i];
        uint32_t link = 0;
        struct engine_rbatch b = {&m, &link, 1, 1};
        bool tick;

        if (rlink_note(&l, &m, &tick))
            engine_remote_apply_locked(e, &b, st->now[i]);
    }
    e->rl = NULL;
    e->nrl = 0;
    ck_assert_msg(!l.src_cut, "%s", l.src.error);
    rsource_fini(&l.src);
}

/* The replay: each batch (the events read at one head time) through one recorder_apply. */
static void replay(struct history *h, const struct stream *st, struct rclaims *c)
{
    struct rsource s;
    size_t i = 0;

    rsource_init(&s, 1, "node1", c);
    while (i < st->n) {
        size_t j = i;

        while (j < st->n && st->now[j] == st->now[i])
            j++;
        recorder_apply(h, &s, st->ev + i, j - i, st->now[i], NULL);
        i = j;
    }
    ck_assert_msg(!s.cut, "%s", s.error);
    rsource_fini(&s);
}

START_TEST(test_replay_same_history)
{
    struct stream st;
    struct engine *e = calloc(1, sizeof(*e));
    struct history h;
    struct rclaims c1 = {0}, c2 = {0};
    char *a, *b;

    stream_load(&st, "one_rank_50hz.jsonl");
    history_init(&e->hist, T0, 0, "head");
    history_init(&h, T0, 0, "head");
    live_path(e, &st, &c1);
    replay(&h, &st, &c2);

    /* The stream did make a history: ranks, threads with runs, counters. */
    ck_assert_uint_ge(h.nranks, 2);
    ck_assert_uint_ge(h.ranks[0].nthreads, 1);
    ck_assert_uint_ge(h.ranks[0].threads[0].nruns, 1);
    ck_assert_uint_ge(h.nseries, 1);
    ck_assert_int_eq(history_key_pid(h.ranks[0].pid), 21796);
    ck_assert_str_eq(h.ranks[0].host, "node1");

    a = dump(&e->hist);
    b = dump(&h);
    same_text("histories", a, strlen(a), b, strlen(b));
    free(a);
    free(b);
    for (int fmt = 0; fmt < EXPORT_NFORMATS; fmt++) {
        size_t na, nb;
        char *x = export_text(&e->hist, (enum export_format)fmt, &na);
        char *y = export_text(&h, (enum export_format)fmt, &nb);

        size_t ox = content_at((enum export_format)fmt, x, na);
        size_t oy = content_at((enum export_format)fmt, y, nb);

        ck_assert_uint_eq(ox, oy);
        same_text(export_format_ext((enum export_format)fmt), x + ox, na - ox, y + oy, nb - oy);
        free(x);
        free(y);
    }
    history_fini(&e->hist);
    history_fini(&h);
    engine_live_free(e);
    free(e);
    rclaims_free(&c1);
    rclaims_free(&c2);
    stream_free(&st);
}
END_TEST

/* ---- recorder_apply by itself ---- */

static struct record_event ev_hello(int64_t mono)
{
    struct record_event m = {.type = RECORD_HELLO};

    m.u.hello.major = 1;
    m.u.hello.mono_ns = mono;
    return m;
}

START_TEST(test_source_zero)
{
    struct history h;
    struct rclaims c = {0};
    struct rsource s;
    struct record_event ev[8];
    size_t n = 0;

    history_init(&h, T0, 0, "here");
    rsource_init(&s, 0, "here", &c);
    /* This node's clock is the history's: offset 0 when the hello comes at its own time. */
    ev[n++] = ev_hello((int64_t)HEAD0);
    ev[n] = (struct record_event){.type = RECORD_FRAME};
    ev[n].u.frame.id = 0;
    snprintf(ev[n].u.frame.function, sizeof(ev[n].u.frame.function), "train");
    snprintf(ev[n].u.frame.file, sizeof(ev[n].u.frame.file), "t.py");
    n++;
    ev[n++] =
        (struct record_event){.type = RECORD_STACK, .u.stack = {.id = 0, .n = 1, .nchunk = 1}};
    ev[n++] = (struct record_event){
        .type = RECORD_RANK,
        .u.rank = {.pid = 4242, .rank = 3, .local_rank = -1, .world_size = -1, .ts = HEAD0}};
    ev[n++] = (struct record_event){
        .type = RECORD_THREAD,
        .u.thread = {.id = 0, .pid = 4242, .ident = 7, .tid = 4242, .main = true}};
    ev[n++] = (struct record_event){.type = RECORD_RUN,
                                    .u.run = {.thread = 0, .stack = 0, .ts = HEAD0 + 1000}};
    ev[n++] = (struct record_event){.type = RECORD_TICK, .u.tick = {.ts = HEAD0 + 30000000}};
    ck_assert_uint_eq(recorder_apply(&h, &s, ev, n, HEAD0, NULL), 1);
    ck_assert_str_eq(s.error, "");
    ck_assert_int_eq(s.offset_ns, 0);

    /* Source 0's keys are the pids themselves. */
    ck_assert_uint_eq(h.nranks, 1);
    ck_assert_int_eq(h.ranks[0].pid, 4242);
    ck_assert_int_eq(h.ranks[0].rank, 3);
    ck_assert_str_eq(h.ranks[0].host, "here");
    ck_assert_uint_eq(h.ranks[0].nthreads, 1);
    ck_assert_uint_eq(h.ranks[0].threads[0].nruns, 1);
    ck_assert_uint_eq(history_run(&h.ranks[0].threads[0], 0)->t0, HEAD0 + 1000);
    ck_assert_uint_eq(history_run(&h.ranks[0].threads[0], 0)->t1, HEAD0 + 30000000);
    ck_assert_str_eq(
        h.frames[history_stack_frames(&h, history_run(&h.ranks[0].threads[0], 0)->stack)[0]]
            .function,
        "train");
    rsource_fini(&s);
    rclaims_free(&c);
    history_fini(&h);
}
END_TEST

START_TEST(test_refused_and_cut)
{
    struct history h;
    struct rclaims c = {0};
    struct rsource s;
    struct record_event ev[3];

    history_init(&h, T0, 0, "here");
    rsource_init(&s, 2, "n2", &c);
    ev[0] = (struct record_event){.type = RECORD_RANK, .u.rank = {.pid = 5, .rank = 0}};
    ck_assert_uint_eq(recorder_apply(&h, &s, ev, 1, HEAD0, NULL), 0);
    ck_assert_ptr_nonnull(strstr(s.error, "before the hello"));
    ck_assert_uint_eq(h.nranks, 0);

    /* A second hello cuts the source off: what follows in the batch is not applied. */
    ev[0] = ev_hello(100);
    ev[1] = ev_hello(200);
    ev[2] = (struct record_event){.type = RECORD_RANK, .u.rank = {.pid = 5, .rank = 0}};
    ck_assert_uint_eq(recorder_apply(&h, &s, ev, 3, HEAD0, NULL), 0);
    ck_assert(s.cut);
    ck_assert_ptr_nonnull(strstr(s.error, "second hello"));
    ck_assert_uint_eq(h.nranks, 0);
    rsource_fini(&s);
    rclaims_free(&c);
    history_fini(&h);
}
END_TEST

/* This node's collectors (source 0) are trusted: their counters are kept for a rank the
 * sampler made, which no rank event defined; another source's are not. */
START_TEST(test_counters_of_source_zero)
{
    struct history h;
    struct rclaims c = {0};
    struct rsource here, other;
    struct record_event ev[2];

    history_init(&h, T0, 0, "here");
    rsource_init(&here, 0, "here", &c);
    rsource_init(&other, 3, "n3", &c);
    ev[0] = ev_hello((int64_t)HEAD0);
    ev[1] = record_counter_event(SERIES_RSS, 77, (int64_t)HEAD0 + 5, 12.5);
    /* The hello at its own time: offset 0. */
    recorder_apply(&h, &here, ev, 1, HEAD0, NULL);
    recorder_apply(&h, &other, ev, 1, HEAD0, NULL);
    recorder_apply(&h, &here, ev + 1, 1, HEAD0 + 10, NULL);
    recorder_apply(&h, &other, ev + 1, 1, HEAD0 + 10, NULL);
    ck_assert_uint_eq(h.nseries, 1);
    ck_assert_int_eq(h.series[0].pid, 77);
    ck_assert_uint_eq(h.series[0].n, 1);
    ck_assert_uint_eq(h.series[0].pts[0].t, HEAD0 + 5);
    ck_assert(h.series[0].pts[0].v == 12.5);
    rsource_fini(&here);
    rsource_fini(&other);
    rclaims_free(&c);
    history_fini(&h);
}
END_TEST

/* An exit status lands in the latest record of its pid, without marking it exited; another
 * source's status counts only for a rank it defined. */
START_TEST(test_exit_status)
{
    struct history h;
    struct rclaims c = {0};
    struct rsource here, other;
    struct record_event ev[2];
    struct hrank *old;

    history_init(&h, T0, 0, "here");
    rsource_init(&here, 0, "here", &c);
    rsource_init(&other, 3, "n3", &c);
    old = history_rank(&h, 88, 0, "");
    history_rank_exit(old, HEAD0);
    history_rank(&h, 88, 0, ""); /* the pid reused by a restarted rank */
    ev[0] = ev_hello((int64_t)HEAD0);
    ev[1] =
        (struct record_event){.type = RECORD_EXIT, .u.exit = {.pid = 88, .code = -1, .signal = 9}};
    snprintf(ev[1].u.exit.core, sizeof(ev[1].u.exit.core), "/cores/core.88");
    recorder_apply(&h, &other, ev, 2, HEAD0, NULL);
    ck_assert_int_eq(h.ranks[1].exit_signal, 0);
    recorder_apply(&h, &here, ev, 2, HEAD0, NULL);
    ck_assert_uint_eq(h.nranks, 2);
    ck_assert_int_eq(h.ranks[1].exit_code, -1);
    ck_assert_int_eq(h.ranks[1].exit_signal, 9);
    ck_assert_str_eq(h.ranks[1].core, "/cores/core.88"); /* where its core went */
    ck_assert(!h.ranks[1].exited);
    ck_assert_int_eq(h.ranks[0].exit_signal, 0);
    ck_assert_str_eq(h.ranks[0].core, "");
    rsource_fini(&here);
    rsource_fini(&other);
    rclaims_free(&c);
    history_fini(&h);
}
END_TEST

/* This node's sampler sees only that a rank's reads fail: its rank exit says no status, and
 * one the exit thread brought first stays. */
START_TEST(test_exit_before_rank_exit)
{
    struct history h;
    struct rclaims c = {0};
    struct rsource here;
    struct record_event ev[3];

    history_init(&h, T0, 0, "here");
    rsource_init(&here, 0, "here", &c);
    ev[0] = ev_hello((int64_t)HEAD0);
    ev[1] = (struct record_event){
        .type = RECORD_RANK,
        .u.rank = {.pid = 77, .rank = 1, .local_rank = -1, .world_size = -1, .ts = HEAD0}};
    ev[2] =
        (struct record_event){.type = RECORD_EXIT, .u.exit = {.pid = 77, .code = 3, .signal = 0}};
    recorder_apply(&h, &here, ev, 3, HEAD0, NULL);
    ev[0] = ev[1];
    ev[0].u.rank.exited = true;
    ev[0].u.rank.exit_code = -1;
    ev[0].u.rank.ts = HEAD0 + 1000;
    recorder_apply(&h, &here, ev, 1, HEAD0 + 2000, NULL);
    ck_assert_uint_eq(h.nranks, 1);
    ck_assert(h.ranks[0].exited);
    ck_assert_int_eq(h.ranks[0].exit_code, 3);
    ck_assert_int_eq(h.ranks[0].exit_signal, 0);
    rsource_fini(&here);
    rclaims_free(&c);
    history_fini(&h);
}
END_TEST

static struct record_event ev_frame(uint32_t id, const char *fn)
{
    struct record_event m = {.type = RECORD_FRAME};

    m.u.frame.id = id;
    snprintf(m.u.frame.function, sizeof(m.u.frame.function), "%s", fn);
    snprintf(m.u.frame.file, sizeof(m.u.frame.file), "f.py");
    m.u.frame.line = 1;
    return m;
}

/* RECORD_FORGET: the source's frame and stack tables go (and the bytes charged for them); the
 * same ids then name new definitions, and a thread keeps the stack it showed until its next
 * run. */
START_TEST(test_forget)
{
    struct history h;
    struct rclaims c = {0};
    struct rsource s;
    struct record_event ev[8];
    size_t n = 0, mem0;
    const struct hthread *t;

    history_init(&h, T0, 0, "here");
    rsource_init(&s, 0, "here", &c);
    ev[n++] = ev_hello((int64_t)HEAD0);
    ev[n++] = (struct record_event){
        .type = RECORD_RANK,
        .u.rank = {.pid = 55, .rank = 0, .local_rank = -1, .world_size = -1, .ts = HEAD0}};
    ev[n++] = (struct record_event){.type = RECORD_THREAD,
                                    .u.thread = {.id = 0, .pid = 55, .ident = 5, .main = true}};
    recorder_apply(&h, &s, ev, n, HEAD0, NULL);
    mem0 = s.mem;
    n = 0;
    ev[n++] = ev_frame(0, "before");
    ev[n++] = (struct record_event){.type = RECORD_STACK,
                                    .u.stack = {.id = 0, .n = 1, .nchunk = 1, .frames = {0}}};
    ev[n++] = (struct record_event){.type = RECORD_RUN,
                                    .u.run = {.thread = 0, .stack = 0, .ts = HEAD0 + 1000}};
    ev[n++] = (struct record_event){.type = RECORD_FORGET};
    recorder_apply(&h, &s, ev, n, HEAD0 + 1000, NULL);
    ck_assert_str_eq(s.error, "");
    ck_assert_uint_eq(s.nframes, 0);
    ck_assert_uint_eq(s.nstacks, 0);
    ck_assert_uint_eq(s.mem, mem0);
    /* A tick still extends the stack the thread showed. */
    ev[0] = (struct record_event){.type = RECORD_TICK, .u.tick = {.ts = HEAD0 + 20000000}};
    recorder_apply(&h, &s, ev, 1, HEAD0 + 20000000, NULL);
    /* Id 0 referred to before a new definition is undefined, then names the new stack. */
    ev[0] = (struct record_event){.type = RECORD_RUN,
                                  .u.run = {.thread = 0, .stack = 0, .ts = HEAD0 + 30000000}};
    recorder_apply(&h, &s, ev, 1, HEAD0 + 30000000, NULL);
    ck_assert_str_eq(s.error, "agent stream: undefined stack 0");
    n = 0;
    ev[n++] = ev_frame(0, "after");
    ev[n++] = (struct record_event){.type = RECORD_STACK,
                                    .u.stack = {.id = 0, .n = 1, .nchunk = 1, .frames = {0}}};
    ev[n++] = (struct record_event){.type = RECORD_RUN,
                                    .u.run = {.thread = 0, .stack = 0, .ts = HEAD0 + 40000000}};
    recorder_apply(&h, &s, ev, n, HEAD0 + 40000000, NULL);
    t = &h.ranks[0].threads[0];
    ck_assert_uint_eq(t->nruns, 2);
    ck_assert_uint_eq(history_run(t, 0)->t1, HEAD0 + 20000000);
    ck_assert_str_eq(h.frames[history_stack_frames(&h, history_run(t, 0)->stack)[0]].function,
                     "before");
    ck_assert_str_eq(h.frames[history_stack_frames(&h, history_run(t, 1)->stack)[0]].function,
                     "after");
    rsource_fini(&s);
    rclaims_free(&c);
    history_fini(&h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("recorder");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_replay_same_history);
    tcase_add_test(tc, test_source_zero);
    tcase_add_test(tc, test_refused_and_cut);
    tcase_add_test(tc, test_counters_of_source_zero);
    tcase_add_test(tc, test_exit_status);
    tcase_add_test(tc, test_exit_before_rank_exit);
    tcase_add_test(tc, test_forget);
    suite_add_tcase(s, tc);
    return ts_run(s);
}
