/* Tests for live figures and devices as record events (src/engine/engine_live.c): this node's
 * collectors hand RECORD_LIVE and RECORD_DEVICE events to the recorder as source 0, exactly as
 * another host's agent does, and the recorder applies both into the same tables. The same
 * batch applied for source 0 and for a remote source gives the same view figures (rank table:
 * GIL %, DEV MiB, GC %, state and kind of wait; GIL pane; devices but for their host); a live
 * event sets only its parts; this node's device list is replaced each discovery pass while a
 * host's devices are kept; the agent's writer folds the parts into one wire line per rank,
 * which a head applies as the local path does for what the wire carries; and a 1.1 agent's
 * lines apply as before. White-box: a bare struct engine with its history, its local source
 * and one host's link. Single-threaded. */
#include "engine_remote_priv.h"
#include "tsupport.h"

#include "ranktop/views/view.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEAD0 5000000000000ll /* the history's clock at both sources' hello: 5000 s */
#define PID 4242
#define MAIN_IDENT 7
#define OTHER_IDENT 99

static struct engine *E;
static struct rlink L; /* host "n1", slot 1 */

/* As the recorder applies a local queue's batch: packed as a collector hands it over. */
static void apply_local(const struct record_event *ev, size_t n)
{
    struct engine_evbuf b = {0};

    for (size_t i = 0; i < n; i++)
        engine_evbuf_push(&b, &ev[i]);
    pthread_mutex_lock(&E->lock);
    engine_local_apply_locked(E, &b, (uint64_t)HEAD0 + 1000);
    pthread_mutex_unlock(&E->lock);
    engine_evbuf_free(&b);
}

/* As the recorder applies the remote collector's batch: every event tagged with link 0. */
static void apply_remote(const struct record_event *ev, size_t n)
{
    struct engine_rbatch b = {(struct record_event *)ev, calloc(n ? n : 1, sizeof(uint32_t)), n, n};

    pthread_mutex_lock(&E->lock);
    engine_remote_apply_locked(E, &b, (uint64_t)HEAD0 + 1000);
    pthread_mutex_unlock(&E->lock);
    free(b.link);
}

static struct record_event hello(void)
{
    struct record_event m = {.type = RECORD_HELLO};

    m.u.hello.major = 1;
    m.u.hello.minor = 1;
    m.u.hello.mono_ns = HEAD0;
    return m;
}

static void setup(void)
{
    struct record_event h = hello();

    E = calloc(1, sizeof(*E));
    pthread_mutex_init(&E->lock, NULL);
    history_init(&E->hist, (uint64_t)HEAD0, 0, "here");
    rsource_init(&E->local, 0, "here", &E->local_claims);
    memset(&L, 0, sizeof(L));
    L.e = E;
    snprintf(L.name, sizeof(L.name), "n1");
    rsource_init(&L.src, 1, "n1", &E->rclaims);
    E->rl = &L;
    E->nrl = 1;
    apply_local(&h, 1);
    apply_remote(&h, 1);
}

static void teardown(void)
{
    history_fini(&E->hist);
    rsource_fini(&E->local);
    rsource_fini(&L.src);
    rclaims_free(&E->local_claims);
    rclaims_free(&E->rclaims);
    engine_live_free(E);
    pthread_mutex_destroy(&E->lock);
    free(E);
}

/* A rank (rank number rank) with its main thread showing one stack, and a second thread. */
static size_t rank_events(struct record_event *ev, int rank)
{
    size_t n = 0;

    ev[n] = (struct record_event){.type = RECORD_FRAME};
    snprintf(ev[n].u.frame.function, sizeof(ev[n].u.frame.function), "train");
    snprintf(ev[n].u.frame.file, sizeof(ev[n].u.frame.file), "t.py");
    ev[n++].u.frame.line = 3;
    ev[n++] =
        (struct record_event){.type = RECORD_STACK, .u.stack = {.id = 0, .n = 1, .nchunk = 1}};
    ev[n++] = (struct record_event){
        .type = RECORD_RANK,
        .u.rank = {.pid = PID, .rank = rank, .local_rank = -1, .world_size = 2, .ts = HEAD0}};
    ev[n++] = (struct record_event){
        .type = RECORD_THREAD,
        .u.thread = {.id = 0, .pid = PID, .ident = MAIN_IDENT, .tid = PID, .main = true}};
    ev[n] = (struct record_event){
        .type = RECORD_THREAD, .u.thread = {.id = 1, .pid = PID, .ident = OTHER_IDENT, .tid = 9}};
    snprintf(ev[n++].u.thread.name, sizeof(ev[n].u.thread.name), "loader");
    ev[n++] = (struct record_event){.type = RECORD_RUN,
                                    .u.run = {.thread = 0, .stack = 0, .ts = HEAD0 + 100}};
    ev[n++] = (struct record_event){.type = RECORD_RUN,
                                    .u.run = {.thread = 1, .stack = 0, .ts = HEAD0 + 100}};
    ev[n++] = (struct record_event){.type = RECORD_TICK, .u.tick = {.seq = 1, .ts = HEAD0 + 900}};
    return n;
}

static struct record_event live(uint32_t set)
{
    struct record_event m = {.type = RECORD_LIVE};

    m.u.live = (struct record_live){.pid = PID, .set = set, .dev_mem_mb = -1, .syscall = -1};
    return m;
}

static struct record_event device(bool npu, int index, int chip, int64_t util, bool first)
{
    struct record_event m = {.type = RECORD_DEVICE};

    m.u.device = (struct record_device){.npu = npu,
                                        .index = index,
                                        .chip = chip,
                                        .util_pct = util,
                                        .mem_used_mb = 1000 + index,
                                        .mem_total_mb = 80000,
                                        .temp_c = 40,
                                        .power_w = 250.5,
                                        .first = first};
    snprintf(m.u.device.name, sizeof(m.u.device.name), npu ? "Ascend 910B" : "H100");
    return m;
}

/* What the collectors of a node tell of its rank: discovery's device memory and devices, the
 * GIL thread's second (shares: the loader thread holds the GIL most), the memory thread's wait,
 * the sampler's stop, then a later GIL second and device memory that replace theirs. */
static size_t figure_events(struct record_event *ev)
{
    size_t n = 0;

    ev[n] = live(RECORD_LIVE_DEVMEM);
    ev[n++].u.live.dev_mem_mb = 4096;
    ev[n++] = device(false, 0, -1, 10, true);
    ev[n++] = device(false, 1, -1, 20, false);
    ev[n] = live(RECORD_LIVE_GIL | RECORD_LIVE_GC);
    ev[n].u.live.gil_busy_pct = 20;
    ev[n].u.live.gil_switches = 100;
    ev[n].u.live.gil_waiters = 0.25;
    ev[n].u.live.gc_pct = 10;
    ev[n++].u.live.in_gc = 0;
    ev[n] = live(RECORD_LIVE_WAIT);
    ev[n].u.live.state = 'S';
    ev[n].u.live.syscall = 7; /* poll on x86-64, something else elsewhere: both paths alike */
    ev[n++].u.live.no_fds = true;
    ev[n] = live(RECORD_LIVE_STOPPED);
    ev[n++].u.live.stopped = false;
    ev[n] = live(RECORD_LIVE_GIL | RECORD_LIVE_GC);
    ev[n].u.live.gil_busy_pct = 92.5;
    ev[n].u.live.gil_switches = 340;
    ev[n].u.live.gil_waiters = 1.5;
    ev[n].u.live.gc_pct = 75;
    ev[n].u.live.in_gc = 1;
    ev[n].u.live.nshares = 2;
    ev[n].u.live.shares[0].ident = OTHER_IDENT;
    ev[n].u.live.shares[0].pct = 70;
    ev[n].u.live.shares[1].ident = MAIN_IDENT;
    ev[n++].u.live.shares[1].pct = 22.5;
    ev[n] = live(RECORD_LIVE_DEVMEM);
    ev[n++].u.live.dev_mem_mb = 8192;
    return n;
}

/* The views' figures of both ranks: the engine's view copy, the rank table and the GIL pane. */
struct seen {
    struct engine_view v;
    struct view_table t;
    struct view_gil g;
    const struct view_table_row *row[2]; /* this node's rank, the host's */
    const struct view_gil_row *gil[2];
};

static void look(struct seen *s)
{
    struct view_table_in in = {0};

    memset(s, 0, sizeof(*s));
    engine_live_view(E, &s->v, false);
    in.live = s->v.live;
    in.nlive = s->v.nlive;
    view_table(&E->hist, (uint64_t)HEAD0 + 1000, &in, &s->t);
    view_gil(&E->hist, &s->t, s->v.live, s->v.nlive, &s->g);
    for (size_t i = 0; i < s->t.n; i++) {
        int k = s->t.rows[i].pid == PID ? 0 : s->t.rows[i].pid == engine_key(1, PID) ? 1 : -1;

        ck_assert_int_ge(k, 0);
        s->row[k] = &s->t.rows[i];
        s->gil[k] = &s->g.rows[i];
    }
    ck_assert_ptr_nonnull(s->row[0]);
    ck_assert_ptr_nonnull(s->row[1]);
}

static void unlook(struct seen *s)
{
    view_gil_fini(&s->g);
    view_table_fini(&s->t);
    free(s->v.live);
    free(s->v.devs);
}

static void unlook_snapshot(struct seen *s)
{
    free(s->v.live);
    free(s->v.devs);
}

static void same_double(double a, double b)
{
    ck_assert(isnan(a) ? isnan(b) : a == b);
}

/* The figures the wire carries (device memory, GIL, GC %), in both rows. */
static void same_wire_figures(const struct seen *s)
{
    const struct view_table_row *a = s->row[0], *b = s->row[1];

    ck_assert_int_eq(a->dev_mem_mb, b->dev_mem_mb);
    same_double(a->gil, b->gil);
    same_double(a->gc, b->gc);
    ck_assert_str_eq(a->gil_holder, b->gil_holder);
    same_double(a->gil_holder_pct, b->gil_holder_pct);
    same_double(s->gil[0]->busy_pct, s->gil[1]->busy_pct);
    same_double(s->gil[0]->switches_per_s, s->gil[1]->switches_per_s);
    same_double(s->gil[0]->waiters, s->gil[1]->waiters);
    same_double(s->gil[0]->gc_pct, s->gil[1]->gc_pct);
    ck_assert_str_eq(s->gil[0]->shares, s->gil[1]->shares);
}

/* n devices of this node first, then the host's: equal but for the host's name. */
static void same_devices(const struct seen *s, size_t n)
{
    ck_assert_uint_eq(s->v.ndevs, 2 * n);
    for (size_t i = 0; i < n; i++) {
        struct smi_device a = s->v.devs[i], b = s->v.devs[n + i];

        ck_assert_str_eq(a.host, "");
        ck_assert_str_eq(b.host, "n1");
        memset(a.host, 0, sizeof(a.host));
        memset(b.host, 0, sizeof(b.host));
        ck_assert(!memcmp(&a, &b, sizeof(a)));
    }
}

/* A packed batch gives back every event as it was added, whatever its type, in order: events
 * filled after engine_evbuf_add (the staged one) and pushed whole alike, the last one staged
 * until the batch is read; it is smaller than whole events. */
START_TEST(evbuf_packs)
{
    struct engine_evbuf b = {0};
    struct record_event want[2 * (RECORD_TASKS + 1)];
    const struct record_event *ev;
    size_t n = 0, off = 0, bytes = 0;

    for (int t = RECORD_UNKNOWN; t <= RECORD_TASKS; t++) {
        for (int k = 0; k < 2; k++) {
            struct record_event *m = &want[n];

            memset(m, 0, sizeof(*m));
            m->type = (enum record_type)t;
            /* distinct bytes over the whole of the member */
            for (size_t j = 0; j + offsetof(struct record_event, u) < record_event_size(m->type);
                 j++)
                ((unsigned char *)&m->u)[j] = (unsigned char)(n * 31 + j);
            if (k)
                engine_evbuf_push(&b, m);
            else
                memcpy(&engine_evbuf_add(&b, m->type)->u, &m->u,
                       record_event_size(m->type) - offsetof(struct record_event, u));
            bytes += record_event_size(m->type);
            n++;
        }
    }
    ck_assert_uint_eq(b.n, n);
    engine_evbuf_seal(&b);
    ck_assert_uint_eq(b.len, bytes);
    ck_assert_uint_lt(b.len, n * sizeof(struct record_event) / 2);
    for (size_t i = 0; i < n; i++) {
        ev = engine_evbuf_next(&b, &off);
        ck_assert_ptr_nonnull(ev);
        ck_assert_int_eq(ev->type, want[i].type);
        ck_assert_int_eq(memcmp(&ev->u, &want[i].u,
                                record_event_size(ev->type) - offsetof(struct record_event, u)),
                         0);
    }
    ck_assert_ptr_null(engine_evbuf_next(&b, &off));
    engine_evbuf_clear(&b);
    ck_assert_uint_eq(b.n, 0);
    off = 0;
    ck_assert_ptr_null(engine_evbuf_next(&b, &off));
    engine_evbuf_free(&b);
}
END_TEST

START_TEST(local_as_remote)
{
    struct record_event ev[32];
    size_t n = rank_events(ev, 0), nf;
    struct seen s;

    apply_local(ev, n);
    n = rank_events(ev, 1);
    apply_remote(ev, n);
    nf = figure_events(ev);
    apply_local(ev, nf);
    apply_remote(ev, nf);
    look(&s);
    /* The later parts replaced the earlier; the others kept theirs. */
    ck_assert_int_eq(s.row[0]->dev_mem_mb, 8192);
    ck_assert_double_eq(s.row[0]->gil, 92.5);
    ck_assert_double_eq(s.row[0]->gc, 75);
    ck_assert_str_eq(s.row[0]->gil_holder, "loader");
    ck_assert_double_eq(s.gil[0]->waiters, 1.5);
    same_wire_figures(&s);
    ck_assert_str_eq(s.row[0]->state, s.row[1]->state);
    ck_assert_int_eq(s.row[0]->wait, s.row[1]->wait);
    ck_assert_str_eq(s.row[0]->wait_why, s.row[1]->wait_why);
    ck_assert_uint_eq(s.v.nlive, 2);
    ck_assert_int_eq(s.v.live[0].state, 'S');
    ck_assert_int_eq(s.v.live[0].in_gc, 1);
    s.v.live[1].pid = s.v.live[0].pid;
    ck_assert(!memcmp(&s.v.live[0], &s.v.live[1], sizeof(s.v.live[0])));
    same_devices(&s, 2);
    unlook(&s);

    /* Stopped: the sampler's part alone changes the state column. */
    ev[0] = live(RECORD_LIVE_STOPPED);
    ev[0].u.live.stopped = true;
    apply_local(ev, 1);
    apply_remote(ev, 1);
    look(&s);
    ck_assert_str_eq(s.row[0]->state, "stopped");
    ck_assert_str_eq(s.row[1]->state, "stopped");
    ck_assert_int_eq(s.row[0]->dev_mem_mb, 8192);
    same_wire_figures(&s);
    unlook(&s);
}
END_TEST

/* This node's discovery sends its whole list each pass (first), or that it found none; a
 * host's devices are updated one at a time and kept. A device of this node without an index
 * is kept as it comes (none is the same as another). */
/* Copies of the devices and live records, as record's notices take them. */
static void snapshot(struct seen *s)
{
    memset(s, 0, sizeof(*s));
    engine_snapshot_live(E, &s->v.devs, &s->v.ndevs, &s->v.live, &s->v.nlive);
}

START_TEST(device_lists)
{
    struct record_event ev[2];
    struct seen s;

    ev[0] = device(false, 0, -1, 10, true);
    ev[1] = device(false, 1, -1, 20, false);
    apply_local(ev, 2);
    ev[0].u.device.first = false; /* the wire has no list: a host's devices come one by one */
    apply_remote(ev, 2);
    ev[0] = device(false, 1, -1, 30, true); /* gpu0 is not in this pass */
    apply_local(ev, 1);
    ev[0].u.device.first = false;
    apply_remote(ev, 1);
    snapshot(&s);
    ck_assert_uint_eq(s.v.ndevs, 3);
    ck_assert_int_eq(s.v.devs[0].index, 1);
    ck_assert_int_eq(s.v.devs[0].util_pct, 30);
    ck_assert_int_eq(s.v.devs[1].index, 0); /* the host's: kept, and updated in place */
    ck_assert_int_eq(s.v.devs[2].util_pct, 30);
    unlook_snapshot(&s);
    /* A pass that found none: this node has none. */
    ev[0] = (struct record_event){.type = RECORD_DEVICE, .u.device = {.first = true, .none = true}};
    apply_local(ev, 1);
    snapshot(&s);
    ck_assert_uint_eq(s.v.ndevs, 2);
    ck_assert_str_eq(s.v.devs[0].host, "n1");
    unlook_snapshot(&s);
    /* Two chips without an index stay two devices. */
    ev[0] = device(true, -1, 0, 5, true);
    ev[1] = device(true, -1, 1, 6, false);
    apply_local(ev, 2);
    snapshot(&s);
    ck_assert_uint_eq(s.v.ndevs, 4);
    ck_assert(!(s.v.devs[0].valid & SMI_DEV_INDEX));
    ck_assert_int_eq(s.v.devs[1].chip, 1);
    ck_assert(s.v.devs[1].valid & SMI_DEV_CHIP);
    unlook_snapshot(&s);
}
END_TEST

/* Splits the agent's output into parsed events (the tick's included); count[type]: how many. */
static size_t parse_all(const struct engine_out *o, struct record_event *out, size_t max,
                        size_t *count)
{
    size_t n = 0;

    memset(count, 0, (RECORD_TASKS + 1) * sizeof(*count));
    for (size_t at = 0; at < o->len;) {
        const char *nl = memchr(o->buf + at, '\n', o->len - at);
        size_t len = (size_t)(nl - (o->buf + at)) + 1;
        struct app_err err = {0};

        ck_assert_ptr_nonnull(nl);
        ck_assert_uint_lt(len, AGENTPROTO_LINE_MAX);
        ck_assert_uint_lt(n, max);
        ck_assert_msg(agentproto_parse(o->buf + at, len, &out[n], &err) == 0, "%s", err.msg);
        count[out[n].type]++;
        n++;
        at += len;
    }
    return n;
}

/* An agent's collectors emit the same events; its writer folds the live parts into one line
 * per rank, and the head applies the lines: the figures the wire carries are the local path's.
 * The parts it has no field for (wait, stop) stay off the wire and unknown on the head. */
START_TEST(through_the_wire)
{
    struct engine *a = calloc(1, sizeof(*a));
    struct engine_wire *w = engine_wire_new();
    struct engine_out o = {0};
    struct record_event ev[32], lines[64];
    size_t n, nl, count[RECORD_TASKS + 1];
    struct seen s;

    pthread_mutex_init(&a->lock, NULL);
    engine_queues_init(a);
    a->wake_fd = -1;
    n = rank_events(ev, 0);
    apply_local(ev, n);
    n = rank_events(ev, 1);
    engine_emit(a, ENGINE_Q_SAMPLER, ev, n);
    n = figure_events(ev);
    apply_local(ev, n);
    engine_emit(a, ENGINE_Q_GIL, ev, n);
    engine_wire_tick(a, w, &o);
    nl = parse_all(&o, lines, 64, count);
    ck_assert_uint_eq(count[RECORD_LIVE], 1); /* six parts, one line */
    ck_assert_uint_eq(count[RECORD_DEVICE], 2);
    apply_remote(lines, nl);
    look(&s);
    same_wire_figures(&s);
    same_devices(&s, 2);
    ck_assert_int_eq(s.row[0]->dev_mem_mb, 8192);
    ck_assert_str_eq(s.row[1]->gil_holder, "loader");
    ck_assert_uint_eq(s.v.nlive, 2);
    ck_assert_int_eq(s.v.live[1].state, 0); /* no wire form */
    ck_assert_int_eq(s.v.live[1].in_gc, -1);
    unlook(&s);
    /* Nothing told since: no live line (the next second's would be the first); a discovery
     * pass's devices within the second stay off the wire too. */
    o.len = 0;
    ev[0] = device(false, 0, -1, 50, true);
    engine_emit(a, ENGINE_Q_DISCOVERY, ev, 1);
    engine_wire_tick(a, w, &o);
    parse_all(&o, lines, 64, count);
    ck_assert_uint_eq(count[RECORD_LIVE], 0);
    ck_assert_uint_eq(count[RECORD_DEVICE], 0);
    ck_assert_uint_eq(count[RECORD_TICK], 1);

    engine_out_fini(&o);
    engine_wire_free(w);
    engine_queues_fini(a);
    pthread_mutex_destroy(&a->lock);
    free(a);
}
END_TEST

/* A 1.1 agent's lines: a whole record each, GC % only when it changed (a line without it keeps
 * the last); wait and stop unknown. */
START_TEST(old_agent_lines)
{
    static const char *const line[] = {
        "{\"t\":\"l\",\"p\":4242,\"dm\":100,\"gb\":50.00,\"gs\":3.00,\"gw\":0.50,\"gc\":12.00,"
        "\"sh\":[[99,60.00]]}\n",
        "{\"t\":\"l\",\"p\":4242,\"dm\":-1,\"gb\":40.00,\"gs\":2.00,\"gw\":-1.00,\"sh\":[]}\n",
    };
    struct record_event ev[16];
    size_t n = rank_events(ev, 1);
    struct seen s;

    apply_remote(ev, n);
    for (size_t i = 0; i < 2; i++) {
        struct app_err err = {0};

        ck_assert_int_eq(agentproto_parse(line[i], strlen(line[i]), &ev[0], &err), 0);
        apply_remote(ev, 1);
    }
    n = rank_events(ev, 0);
    apply_local(ev, n);
    look(&s);
    ck_assert_uint_eq(s.v.nlive, 1);
    ck_assert_int_eq(s.v.live[0].pid, engine_key(1, PID));
    ck_assert_int_eq(s.v.live[0].dev_mem_mb, -1);
    ck_assert_double_eq(s.v.live[0].gil_busy_pct, 40);
    ck_assert_double_eq(s.v.live[0].gil_waiters, -1);
    ck_assert_double_eq(s.v.live[0].gc_pct, 12);
    ck_assert_int_eq(s.v.live[0].in_gc, -1);
    ck_assert_uint_eq(s.v.live[0].nshares, 0);
    ck_assert_int_eq(s.v.live[0].syscall, -1);
    ck_assert(!s.v.live[0].stopped);
    unlook(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("live");
    TCase *tc = tcase_create("live");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, evbuf_packs);
    tcase_add_test(tc, local_as_remote);
    tcase_add_test(tc, device_lists);
    tcase_add_test(tc, through_the_wire);
    tcase_add_test(tc, old_agent_lines);
    suite_add_tcase(s, tc);
    return ts_run(s);
}
