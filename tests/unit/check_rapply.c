/* Tests for the head's side of agent streams (src/engine/engine_rapply.c, engine_rkeys.c):
 * the per-host bounds and lookups, fed with parsed lines as engine_remote.c feeds them. What a
 * hostile line claims (a stack of 65 536 frames, an id far past the table) costs what its bytes
 * bring; a host past its budget is cut off; live ranks and threads per host are capped; a rank
 * number claimed twice is found across hosts; agent times are range-checked (the UBSan build
 * catches an overflow); a second hello cuts the host off; close ticks are skipped.
 * White-box: a bare struct engine with only its history. Single-threaded. */
#include "engine_remote_priv.h"
#include "recorder_priv.h"
#include "tsupport.h"

#include <check.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOW 1000000000000ll /* the head's clock in these tests: 1000 s */

static struct engine *E;
static struct rclaims C;

static void setup(void)
{
    E = calloc(1, sizeof(*E));
    pthread_mutex_init(&E->lock, NULL);
    history_init(&E->hist, 1000, 0, "head");
    memset(&C, 0, sizeof(C));
}

static void teardown(void)
{
    history_fini(&E->hist);
    engine_live_free(E);
    pthread_mutex_destroy(&E->lock);
    free(E);
    rclaims_free(&C);
}

static void link_init(struct rlink *l, const char *name, int slot)
{
    memset(l, 0, sizeof(*l));
    l->e = E;
    snprintf(l->name, sizeof(l->name), "%s", name);
    rsource_init(&l->src, slot, name, &C);
}

static void link_fini(struct rlink *l)
{
    rsource_fini(&l->src);
}

/* Parses one line and hands it on as the remote collector does: noted on its link, then
 * applied by the recorder at head time now (a one-event batch of link 0: l), and a source
 * the recorder cut off cuts the host off. The line must parse. */
static void feed_at(struct rlink *l, const char *line, int64_t now)
{
    struct record_event m;
    struct app_err err = {0};
    uint32_t link = 0;
    struct engine_rbatch b = {&m, &link, 1, 1};
    bool tick;

    ck_assert_msg(agentproto_parse(line, strlen(line), &m, &err) == 0, "%s: %s", line, err.msg);
    if (l->refused || !rlink_note(l, &m, &tick))
        return;
    E->rl = l;
    E->nrl = 1;
    pthread_mutex_lock(&E->lock);
    engine_remote_apply_locked(E, &b, (uint64_t)now);
    pthread_mutex_unlock(&E->lock);
    E->rl = NULL;
    E->nrl = 0;
    if (l->src_cut)
        rlink_cut(l);
}

static void feed(struct rlink *l, const char *line)
{
    feed_at(l, line, NOW);
}

static void feedf(struct rlink *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void feedf(struct rlink *l, const char *fmt, ...)
{
    char line[AGENTPROTO_LINE_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    feed(l, line);
}

static void hello(struct rlink *l, int64_t mono)
{
    feedf(l,
          "{\"t\":\"hello\",\"proto\":[1,0],\"ver\":\"t\",\"host\":\"agent-says\",\"mono\":%lld}",
          (long long)mono);
    ck_assert(l->src.hello);
}

/* A link to host name in slot that has said hello at the agent's clock mono: where every test
 * starts. */
static void link_open(struct rlink *l, const char *name, int slot, int64_t mono)
{
    link_init(l, name, slot);
    hello(l, mono);
}

/* The link's last error names text (a failure quotes both, which tells the call apart). */
static void error_has(const struct rlink *l, const char *text)
{
    ck_assert_msg(strstr(l->src.error, text), "error lacks \"%s\": %s", text, l->src.error);
}

/* 10 000 stacks that each claim 65 536 frames and bring one: the head once reserved 256 KiB for
 * each (2.5 GB); now each holds a few ids. A complete stack still arrives whole. */
START_TEST(test_pending_stack_costs_its_bytes)
{
    struct rlink l;

    link_open(&l, "n1", 1, 1);
    for (int i = 0; i < 10000; i++)
        feedf(&l, "{\"t\":\"s\",\"id\":%d,\"n\":65536,\"at\":0,\"f\":[0]}", i);
    ck_assert_msg(l.src.mem < 10000 * 128, "%zu bytes held", l.src.mem);
    ck_assert(!l.refused);
    feed(&l, "{\"t\":\"f\",\"id\":0,\"fn\":\"a\"}");
    feed(&l, "{\"t\":\"s\",\"id\":5,\"n\":3,\"at\":0,\"f\":[0,0]}");
    feed(&l, "{\"t\":\"s\",\"id\":5,\"n\":3,\"at\":2,\"f\":[0]}");
    ck_assert_uint_ne(l.src.stacks[5].head, HSTACK_NONE);
    ck_assert_str_eq(l.src.error, "");
    link_fini(&l);
}
END_TEST

/* A table grows with the definitions received: an id far past them is refused (one line can no
 * longer make a table of a million entries). */
START_TEST(test_ids_follow_definitions)
{
    struct rlink l;

    link_open(&l, "n1", 1, 1);
    feed(&l, "{\"t\":\"th\",\"id\":5000,\"p\":1,\"i\":1}");
    error_has(&l, "thread id 5000 out of range");
    ck_assert_uint_lt(l.src.nthreads, 2048);
    feed(&l, "{\"t\":\"f\",\"id\":1000000,\"fn\":\"x\"}");
    error_has(&l, "frame id 1000000 out of range");
    ck_assert_uint_le(l.src.nframes, 65536);
    for (int i = 0; i < 2000; i++)
        feedf(&l, "{\"t\":\"th\",\"id\":%d,\"p\":1,\"i\":%d}", i, i + 1);
    feed(&l, "{\"t\":\"th\",\"id\":2900,\"p\":1,\"i\":9}"); /* within the slack now */
    ck_assert(l.src.threads[2900].defined);
    ck_assert(!l.refused);
    link_fini(&l);
}
END_TEST

/* Frames with long texts until the host's 32 MiB budget is spent: it is cut off for good, its
 * tables freed; another host goes on. */
START_TEST(test_budget_cuts_the_host_off)
{
    struct rlink l, ok;
    char fn[241];
    int i;

    memset(fn, 'x', sizeof(fn) - 1);
    fn[sizeof(fn) - 1] = '\0';
    link_open(&l, "hog", 1, 1);
    link_open(&ok, "n2", 2, 1);
    for (i = 0; i < 200000 && !l.refused; i++) {
        feedf(&l, "{\"t\":\"f\",\"id\":%d,\"fn\":\"%s%d\",\"file\":\"%s\"}", i, fn, i, fn);
        ck_assert_uint_le(l.src.mem, RSOURCE_MEM_MAX);
    }
    ck_assert(l.refused && l.cut);
    ck_assert_msg(i > 50000, "cut after %d frames", i);
    error_has(&l, "past 32 MiB: host cut off");
    ck_assert_ptr_null(l.src.frames);
    ck_assert_int_eq(l.state, ENGINE_HOST_DOWN);
    feed(&ok, "{\"t\":\"f\",\"id\":0,\"fn\":\"a\"}");
    ck_assert_str_eq(ok.src.error, "");
    link_fini(&l);
    link_fini(&ok);
}
END_TEST

/* 2 000 ranks on one host: 1 024 are kept, the cut is said once; an exit makes room. Lookups
 * are hashed: 1 024 ranks and their threads take no scan of every rank (not timed here; the
 * figures are in the report). */
START_TEST(test_ranks_per_host_capped)
{
    struct rlink l;

    link_open(&l, "n1", 1, 1);
    for (int p = 1; p <= 2000; p++)
        feedf(&l, "{\"t\":\"r\",\"p\":%d,\"rank\":%d}", p, p);
    ck_assert_uint_eq(l.src.nkeys, RSOURCE_MAX_RANKS);
    ck_assert_uint_eq(E->hist.nranks, RSOURCE_MAX_RANKS);
    error_has(&l, "more than 1024 live ranks on this host: pid 1025 and later");
    feed(&l, "{\"t\":\"r\",\"p\":7,\"rank\":7,\"x\":true,\"xc\":0,\"ts\":5}");
    feed(&l, "{\"t\":\"r\",\"p\":3000,\"rank\":3000}");
    ck_assert_uint_eq(l.src.nkeys, RSOURCE_MAX_RANKS + 1);
    ck_assert_uint_eq(l.src.nlive, RSOURCE_MAX_RANKS);
    /* A thread of a rank past the cap is not recorded (and costs no scan). */
    feed(&l, "{\"t\":\"f\",\"id\":0,\"fn\":\"a\"}");
    feed(&l, "{\"t\":\"s\",\"id\":0,\"n\":1,\"f\":[0]}");
    feed(&l, "{\"t\":\"th\",\"id\":0,\"p\":1999,\"i\":1}");
    feed(&l, "{\"t\":\"o\",\"th\":0,\"s\":0,\"ts\":10}");
    feed(&l, "{\"t\":\"th\",\"id\":1,\"p\":3000,\"i\":1}");
    feed(&l, "{\"t\":\"o\",\"th\":1,\"s\":0,\"ts\":10}");
    ck_assert_uint_eq(E->hist.ranks[E->hist.nranks - 1].nthreads, 1);
    link_fini(&l);
}
END_TEST

/* A rank number two live processes claim is found across hosts, through the hash of rank
 * numbers, also after the history moved its ranks; an exited claimant no longer counts. */
START_TEST(test_claims_across_hosts)
{
    struct rlink a, b;

    link_open(&a, "a", 1, 1);
    link_open(&b, "b", 2, 1);
    for (int p = 1; p <= 100; p++)
        feedf(&a, "{\"t\":\"r\",\"p\":%d,\"rank\":%d}", p, p);
    ck_assert_str_eq(a.src.error, "");
    feed(&b, "{\"t\":\"r\",\"p\":500,\"rank\":42}");
    error_has(&b, "rank 42 is claimed twice: a pid 42 and b pid 500");
    feed(&a, "{\"t\":\"r\",\"p\":7,\"rank\":7,\"x\":true,\"ts\":5}");
    b.src.error[0] = '\0';
    feed(&b, "{\"t\":\"r\",\"p\":501,\"rank\":7}");
    ck_assert_str_eq(b.src.error, "");
    /* Renumbered: a's pid 8 now claims 300, which b's new rank then finds. */
    feed(&a, "{\"t\":\"r\",\"p\":8,\"rank\":300}");
    feed(&b, "{\"t\":\"r\",\"p\":502,\"rank\":300}");
    error_has(&b, "rank 300 is claimed twice: a pid 8");
    /* The history drops a rank and moves the others: the index is rebuilt, not trusted. */
    memmove(&E->hist.ranks[0], &E->hist.ranks[1], (E->hist.nranks - 1) * sizeof(struct hrank));
    E->hist.nranks--;
    b.src.error[0] = '\0';
    feed(&b, "{\"t\":\"r\",\"p\":503,\"rank\":50}");
    error_has(&b, "rank 50 is claimed twice: a pid 50");
    link_fini(&a);
    link_fini(&b);
}
END_TEST

/* A hello at clock 0, then times up to 2^63 - 1: no overflow (the UBSan build halts on one),
 * the time is held at the head's now + 10 s and said; a time before the history is its start. */
START_TEST(test_times_range_checked)
{
    struct rlink l;
    const struct hthread *t;

    link_open(&l, "n1", 1, 0);
    feed(&l, "{\"t\":\"f\",\"id\":0,\"fn\":\"a\"}");
    feed(&l, "{\"t\":\"s\",\"id\":0,\"n\":1,\"f\":[0]}");
    feed(&l, "{\"t\":\"r\",\"p\":7,\"rank\":0,\"x\":false,\"ts\":9223372036854775807}");
    feed(&l, "{\"t\":\"th\",\"id\":0,\"p\":7,\"i\":1,\"m\":true}");
    feed(&l, "{\"t\":\"o\",\"th\":0,\"s\":0,\"ts\":1000}");
    feed(&l, "{\"t\":\"o\",\"th\":0,\"s\":-1,\"ts\":9223372036854775807}");
    feed(&l, "{\"t\":\"k\",\"ts\":9223372036854775807}");
    error_has(&l, "past the agent's clock");
    ck_assert_uint_le(E->hist.ranks[0].start, NOW + RSOURCE_FUTURE_NS);
    t = &E->hist.ranks[0].threads[0];
    ck_assert_uint_ge(t->nruns, 1);
    ck_assert_uint_le(history_run(t, t->nruns - 1)->t1, NOW + RSOURCE_FUTURE_NS);
    /* A pong with an absurd clock is not believed; one that fits the hello's clock is. */
    feed_at(&l, "{\"t\":\"pong\",\"h\":1000000000000,\"a\":9000000000000000000}", NOW + 1000);
    error_has(&l, "ping answered with a clock");
    ck_assert_int_eq(l.src.offset_ns, NOW);
    feed_at(&l, "{\"t\":\"pong\",\"h\":1000000000000,\"a\":400}", NOW + 1000);
    ck_assert_int_eq(l.src.offset_ns, NOW + 100);
    link_fini(&l);
}
END_TEST

/* Devices per host: at most 256 (their array grows by doubling), each updated in place; device
 * series per host at most 256, the rest dropped and said. */
START_TEST(test_devices_and_series_capped)
{
    struct rlink l;

    link_open(&l, "n1", 1, 1);
    for (int i = 0; i < 300; i++)
        feedf(&l, "{\"t\":\"d\",\"k\":\"gpu\",\"i\":%d,\"name\":\"G\",\"u\":%d}", i, i % 100);
    feed(&l, "{\"t\":\"d\",\"k\":\"gpu\",\"i\":3,\"name\":\"H\",\"u\":7}");
    ck_assert_uint_gt(E->ndevlists, (size_t)l.src.slot);
    ck_assert_uint_eq(E->devs[l.src.slot].n, 256);
    ck_assert_str_eq(E->devs[l.src.slot].d[3].name, "H");
    ck_assert_str_eq(E->devs[l.src.slot].d[3].host, "n1");
    for (int i = 0; i < 300; i++)
        feedf(&l, "{\"t\":\"c\",\"p\":0,\"id\":%d,\"n\":\"gpu%d\",\"v\":1,\"ts\":5}",
              (int)SERIES_DEV_UTIL, i);
    ck_assert_uint_eq(l.src.nseries, RSOURCE_MAX_SERIES);
    ck_assert_uint_eq(E->hist.nseries, RSOURCE_MAX_SERIES);
    error_has(&l, "more than 256 device series");
    /* A rank's series only for a rank the host defined. */
    feed(&l, "{\"t\":\"c\",\"p\":77,\"id\":2,\"v\":1,\"ts\":5}");
    ck_assert_uint_eq(E->hist.nseries, RSOURCE_MAX_SERIES);
    link_fini(&l);
}
END_TEST

/* A second hello is a protocol error: the host is cut off, its clock and name stay the head's. */
START_TEST(test_second_hello)
{
    struct rlink l;

    link_open(&l, "n1", 1, 1);
    feed(&l, "{\"t\":\"hello\",\"proto\":[1,0],\"ver\":\"x\",\"host\":\"impostor\",\"mono\":9}");
    ck_assert(l.refused && l.cut);
    error_has(&l, "second hello");
    ck_assert_str_eq(l.src.host, "n1");
    ck_assert_int_eq(l.src.offset_ns, NOW - 1);
    link_fini(&l);
}
END_TEST

/* Ticks visit every thread: one closer than 5 ms to the last is skipped. */
START_TEST(test_close_ticks_skipped)
{
    struct rlink l;

    link_open(&l, "n1", 1, 1);
    feed(&l, "{\"t\":\"k\",\"ts\":100000000}");
    ck_assert_int_eq(l.src.last_tick, 100000000);
    feed(&l, "{\"t\":\"k\",\"ts\":100000001}");
    ck_assert_int_eq(l.src.last_tick, 100000000);
    feed(&l, "{\"t\":\"k\",\"ts\":110000000}");
    ck_assert_int_eq(l.src.last_tick, 110000000);
    link_fini(&l);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rapply");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_pending_stack_costs_its_bytes);
    tcase_add_test(tc, test_ids_follow_definitions);
    tcase_add_test(tc, test_budget_cuts_the_host_off);
    tcase_add_test(tc, test_ranks_per_host_capped);
    tcase_add_test(tc, test_claims_across_hosts);
    tcase_add_test(tc, test_times_range_checked);
    tcase_add_test(tc, test_devices_and_series_capped);
    tcase_add_test(tc, test_second_hello);
    tcase_add_test(tc, test_close_ticks_skipped);
    suite_add_tcase(s, tc);
    return ts_run(s);
}
