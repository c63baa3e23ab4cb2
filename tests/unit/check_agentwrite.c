/* Tests for the agent stream's writer (agentproto_write in collectors/remote/agentproto.c), with
 * the parser beside it as the contract: every event type written and parsed back gives the same
 * event, field by field; hostile values (quotes, control bytes, bytes that are not UTF-8, texts
 * at and past their field's size, texts without a NUL, figures that are not finite, integers at
 * their extremes, deep stacks in chunks) keep every line one line below AGENTPROTO_LINE_MAX
 * and parse back as the parser's limits say; a recorded agent stream parsed, written and parsed
 * again gives the same events and the same bytes (so the writer formats as the agent always
 * has); batches take whole lines only. Single-threaded. */
#include "ranktop/remote/agentproto.h"
#include "tsupport.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOP_ID (AGENTPROTO_ID_MAX - 1)

/* Writes m and checks the line's shape: one line, newline-terminated, within the limit. */
static size_t write_line(const struct record_event *m, char *buf)
{
    size_t n = agentproto_write(buf, AGENTPROTO_LINE_MAX, m);

    if (n == 0)
        return 0;
    ck_assert_uint_lt(n, AGENTPROTO_LINE_MAX);
    ck_assert_uint_eq(strlen(buf), n);
    ck_assert_msg(buf[n - 1] == '\n', "%s", buf);
    ck_assert_msg(memchr(buf, '\n', n - 1) == NULL, "%s", buf);
    return n;
}

/* Writes m and parses the line back into out; the parser's status. Lines go to the parser in
 * allocations of exactly their length, so the sanitizer builds catch a read past the end. */
static int cycle(const struct record_event *m, struct record_event *out, struct app_err *err)
{
    char buf[AGENTPROTO_LINE_MAX];
    size_t n = write_line(m, buf);
    char *copy;
    int rc;

    ck_assert_msg(n > 0, "type %d: nothing written", m->type);
    copy = malloc(n - 1 ? n - 1 : 1);
    memcpy(copy, buf, n - 1);
    rc = agentproto_parse(copy, n - 1, out, err);
    free(copy);
    return rc;
}

static void same_hello(const struct record_hello *a, const struct record_hello *b)
{
    ck_assert_int_eq(a->major, b->major);
    ck_assert_int_eq(a->minor, b->minor);
    ck_assert_str_eq(a->version, b->version);
    ck_assert_str_eq(a->host, b->host);
    ck_assert_str_eq(a->node, b->node);
    ck_assert_str_eq(a->boot_id, b->boot_id);
    ck_assert_int_eq(a->pid, b->pid);
    ck_assert_int_eq(a->mono_ns, b->mono_ns);
    ck_assert_int_eq(a->wall_us, b->wall_us);
    ck_assert_double_eq(a->rate_hz, b->rate_hz);
}

static void same_stack(const struct record_stack *a, const struct record_stack *b)
{
    ck_assert_uint_eq(a->id, b->id);
    ck_assert_uint_eq(a->n, b->n);
    ck_assert_uint_eq(a->at, b->at);
    ck_assert_uint_eq(a->nchunk, b->nchunk);
    for (uint32_t i = 0; i < a->nchunk; i++)
        ck_assert_uint_eq(a->frames[i], b->frames[i]);
}

static void same_rank(const struct record_rank *a, const struct record_rank *b)
{
    ck_assert_int_eq(a->pid, b->pid);
    ck_assert_int_eq(a->rank, b->rank);
    ck_assert_int_eq(a->local_rank, b->local_rank);
    ck_assert_int_eq(a->world_size, b->world_size);
    ck_assert_str_eq(a->device, b->device);
    ck_assert_str_eq(a->python, b->python);
    ck_assert_int_eq(a->exited, b->exited);
    ck_assert_int_eq(a->exit_code, b->exit_code);
    ck_assert_int_eq(a->exit_signal, b->exit_signal);
    ck_assert_int_eq(a->ts, b->ts);
}

static void same_thread(const struct record_thread *a, const struct record_thread *b)
{
    ck_assert_uint_eq(a->id, b->id);
    ck_assert_int_eq(a->pid, b->pid);
    ck_assert_int_eq(a->worker, b->worker);
    ck_assert(a->ident == b->ident);
    ck_assert_int_eq(a->tid, b->tid);
    ck_assert_int_eq(a->main, b->main);
    ck_assert_str_eq(a->name, b->name);
}

static void same_live(const struct record_live *a, const struct record_live *b)
{
    ck_assert_int_eq(a->pid, b->pid);
    ck_assert_int_eq(a->dev_mem_mb, b->dev_mem_mb);
    ck_assert_double_eq(a->gil_busy_pct, b->gil_busy_pct);
    ck_assert_double_eq(a->gil_switches, b->gil_switches);
    ck_assert_double_eq(a->gil_waiters, b->gil_waiters);
    ck_assert_double_eq(a->gc_pct, b->gc_pct);
    ck_assert_uint_eq(a->set, b->set);
    ck_assert_int_eq(a->in_gc, b->in_gc);
    ck_assert_int_eq(a->syscall, b->syscall);
    ck_assert_uint_eq(a->nshares, b->nshares);
    for (size_t i = 0; i < a->nshares; i++) {
        ck_assert(a->shares[i].ident == b->shares[i].ident);
        ck_assert_double_eq(a->shares[i].pct, b->shares[i].pct);
    }
}

static void same_device(const struct record_device *a, const struct record_device *b)
{
    ck_assert_int_eq(a->npu, b->npu);
    ck_assert_int_eq(a->index, b->index);
    ck_assert_int_eq(a->chip, b->chip);
    ck_assert_str_eq(a->name, b->name);
    ck_assert_int_eq(a->util_pct, b->util_pct);
    ck_assert_int_eq(a->mem_used_mb, b->mem_used_mb);
    ck_assert_int_eq(a->mem_total_mb, b->mem_total_mb);
    ck_assert_int_eq(a->temp_c, b->temp_c);
    ck_assert_double_eq(a->power_w, b->power_w);
}

static void same_tick(const struct record_tick *a, const struct record_tick *b)
{
    ck_assert_uint_eq(a->seq, b->seq);
    ck_assert_int_eq(a->ts, b->ts);
    ck_assert_uint_eq(a->passes, b->passes);
    ck_assert_uint_eq(a->stacks, b->stacks);
    ck_assert_uint_eq(a->errors, b->errors);
    ck_assert_uint_eq(a->lost, b->lost);
}

/* Field by field: every field the wire carries for a's type. */
static void same(const struct record_event *a, const struct record_event *b)
{
    ck_assert_int_eq(a->type, b->type);
    switch (a->type) {
    case RECORD_HELLO:
        same_hello(&a->u.hello, &b->u.hello);
        break;
    case RECORD_FRAME:
        ck_assert_uint_eq(a->u.frame.id, b->u.frame.id);
        ck_assert_str_eq(a->u.frame.function, b->u.frame.function);
        ck_assert_str_eq(a->u.frame.file, b->u.frame.file);
        ck_assert_int_eq(a->u.frame.line, b->u.frame.line);
        ck_assert_int_eq(a->u.frame.native, b->u.frame.native);
        break;
    case RECORD_STACK:
        same_stack(&a->u.stack, &b->u.stack);
        break;
    case RECORD_RANK:
        same_rank(&a->u.rank, &b->u.rank);
        break;
    case RECORD_THREAD:
        same_thread(&a->u.thread, &b->u.thread);
        break;
    case RECORD_RUN:
    case RECORD_GONE:
        ck_assert_uint_eq(a->u.run.thread, b->u.run.thread);
        ck_assert_int_eq(a->u.run.stack, b->u.run.stack);
        ck_assert_int_eq(a->u.run.ts, b->u.run.ts);
        break;
    case RECORD_TICK:
        same_tick(&a->u.tick, &b->u.tick);
        break;
    case RECORD_COUNTER:
        ck_assert_int_eq(a->u.counter.pid, b->u.counter.pid);
        ck_assert_int_eq(a->u.counter.id, b->u.counter.id);
        ck_assert_str_eq(a->u.counter.name, b->u.counter.name);
        ck_assert_double_eq(a->u.counter.v, b->u.counter.v);
        ck_assert_int_eq(a->u.counter.ts, b->u.counter.ts);
        break;
    case RECORD_LIVE:
        same_live(&a->u.live, &b->u.live);
        break;
    case RECORD_DEVICE:
        same_device(&a->u.device, &b->u.device);
        break;
    case RECORD_PONG:
        ck_assert_int_eq(a->u.pong.head_ns, b->u.pong.head_ns);
        ck_assert_int_eq(a->u.pong.agent_ns, b->u.pong.agent_ns);
        break;
    case RECORD_ERROR:
    case RECORD_BYE:
        ck_assert_str_eq(a->u.text, b->u.text);
        break;
    case RECORD_EXIT:
        ck_assert_int_eq(a->u.exit.pid, b->u.exit.pid);
        ck_assert_int_eq(a->u.exit.code, b->u.exit.code);
        ck_assert_int_eq(a->u.exit.signal, b->u.exit.signal);
        ck_assert_str_eq(a->u.exit.core, b->u.exit.core);
        break;
    default: /* no wire form */
        break;
    }
}

static void round_trip(const struct record_event *m)
{
    struct record_event back;
    struct app_err err = {0};

    ck_assert_msg(cycle(m, &back, &err) == 0, "type %d: %s", m->type, err.msg);
    same(m, &back);
}

/* One event of every type the wire carries, with values the wire carries exactly. */
static size_t every_type(struct record_event *ev)
{
    size_t n = 0;

    memset(ev, 0, 16 * sizeof(*ev));
    ev[n].type = RECORD_HELLO;
    ev[n].u.hello = (struct record_hello){1,
                                          0,
                                          "0.9.1",
                                          "n01",
                                          "gpu-node-1",
                                          "90b788e0-6332",
                                          4242,
                                          123456789012345,
                                          1795604485735134,
                                          100};
    ev[++n].type = RECORD_FRAME;
    ev[n].u.frame = (struct record_frame){7, "all_reduce", "/x/c10d.py", 1541, false};
    ev[++n].type = RECORD_FRAME;
    ev[n].u.frame = (struct record_frame){TOP_ID, "ncclKernel", "libnccl.so.2", 0, true};
    ev[++n].type = RECORD_STACK;
    ev[n].u.stack = (struct record_stack){.id = 3, .n = 3, .nchunk = 3, .frames = {7, 8, 9}};
    ev[++n].type = RECORD_STACK; /* a thread with no frame yet */
    ev[n].u.stack = (struct record_stack){.id = 4};
    ev[++n].type = RECORD_RANK;
    ev[n].u.rank = (struct record_rank){4242, 3, 1, 8, "gpu 3", "3.11.7", true, -1, 11, 5};
    ev[++n].type = RECORD_RANK;
    ev[n].u.rank = (struct record_rank){4243, -1, -1, -1, "", "3.13.0", false, -1, 0, 77};
    ev[++n].type = RECORD_THREAD;
    ev[n].u.thread =
        (struct record_thread){2, 4242, 4300, 139722512968576ull, 4250, true, "Main", false, 0};
    ev[++n].type = RECORD_RUN;
    ev[n].u.run = (struct record_run){2, -1, 9};
    ev[++n].type = RECORD_RUN;
    ev[n].u.run = (struct record_run){2, 3, 10};
    ev[++n].type = RECORD_GONE;
    ev[n].u.run = (struct record_run){2, -1, 11};
    ev[++n].type = RECORD_TICK;
    ev[n].u.tick = (struct record_tick){4, 12, 3, 2, 1, 7};
    ev[++n] = record_counter_event(2, 4242, 13, 13.5);
    ev[++n] = record_counter_event(900, 0, 14, -2.25e9);
    snprintf(ev[n].u.counter.name, sizeof(ev[n].u.counter.name), "gpu3 mem");
    ev[++n].type = RECORD_LIVE;
    /* What a line carries: device memory, GIL and (known) GC parts; no GC flag, wait or stop. */
    ev[n].u.live =
        (struct record_live){.pid = 1,
                             .dev_mem_mb = 81920,
                             .gil_busy_pct = 97.5,
                             .gil_switches = 3,
                             .gil_waiters = 0.5,
                             .nshares = 2,
                             .shares = {{5, 97.5}, {6, 2.25}},
                             .gc_pct = 12.5,
                             .set = RECORD_LIVE_DEVMEM | RECORD_LIVE_GIL | RECORD_LIVE_GC,
                             .in_gc = -1,
                             .syscall = -1};
    ev[++n].type = RECORD_DEVICE;
    ev[n].u.device =
        (struct record_device){true, 2, 1, "Ascend 910B", 50, 1024, 65536, 40, 90.5, false, false};
    return n + 1;
}

START_TEST(every_type_round_trips)
{
    struct record_event ev[16], m;
    size_t n = every_type(ev);

    for (size_t i = 0; i < n; i++)
        round_trip(&ev[i]);
    memset(&m, 0, sizeof(m));
    m.type = RECORD_PONG;
    m.u.pong = (struct record_pong){5, 2100696099085};
    round_trip(&m);
    m.type = RECORD_ERROR;
    snprintf(m.u.text, sizeof(m.u.text), "nvidia-smi: not found on PATH");
    round_trip(&m);
    m.type = RECORD_BYE;
    snprintf(m.u.text, sizeof(m.u.text), "cannot start: no such rank");
    round_trip(&m);
    m.type = RECORD_DEVICE; /* a GPU with unknown figures */
    m.u.device = (struct record_device){false, 0, -1, "H100", -1, -1, -1, -1, -1, false, false};
    round_trip(&m);
    memset(&m, 0, sizeof(m));
    m.type = RECORD_EXIT; /* killed by SIGSEGV, and a normal exit */
    m.u.exit = (struct record_exit){4242, -1, 11, ""};
    round_trip(&m);
    m.u.exit = (struct record_exit){4244, -1, 11, "/scratch/core \"a\\b\" \xc3\xa9.4244"};
    round_trip(&m);
    m.u.exit = (struct record_exit){4245, -1, 6, "systemd-coredump (coredumpctl)"};
    round_trip(&m);
    m.u.exit = (struct record_exit){4243, 3, 0, ""};
    round_trip(&m);
    memset(&m, 0, sizeof(m));
    m.type = RECORD_FORGET;
    round_trip(&m);
}
END_TEST

/* Events with no wire form, and figures the wire cannot carry, write nothing. */
START_TEST(nothing_to_write)
{
    char buf[AGENTPROTO_LINE_MAX] = "x";
    struct record_event m = {.type = RECORD_TASKS};

    ck_assert_uint_eq(agentproto_write(buf, sizeof(buf), &m), 0);
    m.type = RECORD_UNKNOWN;
    ck_assert_uint_eq(agentproto_write(buf, sizeof(buf), &m), 0);
    m = record_counter_event(2, 1, 1, NAN);
    ck_assert_uint_eq(agentproto_write(buf, sizeof(buf), &m), 0);
    m.u.counter.v = INFINITY;
    ck_assert_uint_eq(agentproto_write(buf, sizeof(buf), &m), 0);
    m.u.counter.v = -1e300;
    ck_assert_uint_eq(agentproto_write(buf, sizeof(buf), &m), 0);
    /* A buffer too small for the line: nothing, rather than half a line. */
    m.u.counter.v = 1;
    ck_assert_uint_eq(agentproto_write(buf, 10, &m), 0);
}
END_TEST

/* A text the parser gives back for text written to the wire: its first bytes, at least min. */
static void prefix(const char *got, const char *want, size_t min)
{
    size_t n = strlen(got);

    ck_assert_msg(n >= min, "'%s' is shorter than %zu", got, min);
    ck_assert_msg(n <= strlen(want) && !memcmp(got, want, n), "'%s' is not a prefix of '%s'", got,
                  want);
}

static void fill(char *s, size_t size, const char *unit)
{
    size_t k = strlen(unit), o = 0;

    while (o + k < size) {
        memcpy(s + o, unit, k);
        o += k;
    }
    s[o] = '\0';
}

/* Texts at their field's size (UTF-8 included) come back whole; texts that escape to more than
 * the line has room for come back cut, never to nothing. */
START_TEST(texts_at_their_limits)
{
    struct record_event m = {.type = RECORD_FRAME}, back;
    struct app_err err = {0};
    char want[512];

    fill(m.u.frame.function, sizeof(m.u.frame.function), "\xc3\xa9");
    fill(m.u.frame.file, sizeof(m.u.frame.file), "b");
    ck_assert_uint_eq(strlen(m.u.frame.file), RECORD_TEXT - 1);
    round_trip(&m);
    /* Quotes and backslashes take two bytes each on the wire, control bytes six. */
    fill(m.u.frame.function, sizeof(m.u.frame.function), "\"");
    fill(m.u.frame.file, sizeof(m.u.frame.file), "\x01");
    ck_assert_int_eq(cycle(&m, &back, &err), 0);
    prefix(back.u.frame.function, m.u.frame.function, 100);
    fill(want, sizeof(m.u.frame.file), "?"); /* the parser scrubs control bytes */
    prefix(back.u.frame.file, want, 70);
    fill(m.u.frame.function, sizeof(m.u.frame.function), "\\");
    fill(m.u.frame.file, sizeof(m.u.frame.file), "\x7f\x1b");
    ck_assert_int_eq(cycle(&m, &back, &err), 0);
    prefix(back.u.frame.function, m.u.frame.function, 100);
    prefix(back.u.frame.file, want, 70);

    m.type = RECORD_THREAD;
    memset(&m.u, 0, sizeof(m.u));
    m.u.thread = (struct record_thread){.id = 1, .pid = 2, .ident = UINT64_MAX};
    fill(m.u.thread.name, sizeof(m.u.thread.name), "n");
    round_trip(&m);
    fill(m.u.thread.name, sizeof(m.u.thread.name), "\x02");
    ck_assert_int_eq(cycle(&m, &back, &err), 0);
    prefix(back.u.thread.name, want, 10);

    m.type = RECORD_ERROR;
    fill(m.u.text, sizeof(m.u.text), "e");
    round_trip(&m);
    fill(m.u.text, sizeof(m.u.text), "\"\x03");
    ck_assert_int_eq(cycle(&m, &back, &err), 0);
    ck_assert_uint_ge(strlen(back.u.text), 60);

    /* A core's path comes whole or not at all (a cut path names another file); the exit
     * itself always comes. */
    memset(&m, 0, sizeof(m));
    m.type = RECORD_EXIT;
    m.u.exit = (struct record_exit){.pid = 7, .code = -1, .signal = 11};
    fill(m.u.exit.core, sizeof(m.u.exit.core), "\"");
    round_trip(&m);
    fill(m.u.exit.core, sizeof(m.u.exit.core), "\xc3\xa9");
    round_trip(&m);
    for (int i = 0; i < 3; i++) {
        const char *bad[] = {"/tmp/core\x01", "/tmp/\xff", "/tmp/\xc2\x85"};

        snprintf(m.u.exit.core, sizeof(m.u.exit.core), "%s", bad[i]);
        ck_assert_int_eq(cycle(&m, &back, &err), 0);
        ck_assert_int_eq(back.u.exit.signal, 11);
        ck_assert_str_eq(back.u.exit.core, "");
    }
}
END_TEST

/* The other texts of every type at their size, the hello's included. */
START_TEST(every_text_at_its_size)
{
    struct record_event ev[16];
    size_t n = every_type(ev);

    fill(ev[0].u.hello.version, sizeof(ev[0].u.hello.version), "v");
    fill(ev[0].u.hello.host, sizeof(ev[0].u.hello.host), "h");
    fill(ev[0].u.hello.node, sizeof(ev[0].u.hello.node), "\xe2\x82\xac");
    fill(ev[0].u.hello.boot_id, sizeof(ev[0].u.hello.boot_id), "b");
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == RECORD_RANK) {
            fill(ev[i].u.rank.device, sizeof(ev[i].u.rank.device), "d");
            fill(ev[i].u.rank.python, sizeof(ev[i].u.rank.python), "p");
        }
        if (ev[i].type == RECORD_COUNTER)
            fill(ev[i].u.counter.name, sizeof(ev[i].u.counter.name), "c");
        if (ev[i].type == RECORD_DEVICE)
            fill(ev[i].u.device.name, sizeof(ev[i].u.device.name), "g");
        round_trip(&ev[i]);
    }
}
END_TEST

/* Bytes that are not UTF-8 arrive as U+FFFD; C0 and C1 controls as '?'. */
START_TEST(not_utf8_nor_printable)
{
    struct record_event m = {.type = RECORD_DEVICE}, back;
    struct app_err err = {0};

    snprintf(m.u.device.name, sizeof(m.u.device.name),
             "a\xff\xfe"
             "b\xc0\xaf"
             "c\x1b[2J\xc2\x9b");
    ck_assert_int_eq(cycle(&m, &back, &err), 0);
    ck_assert_str_eq(back.u.device.name, "a\xef\xbf\xbd\xef\xbf\xbd"
                                         "b\xef\xbf\xbd\xef\xbf\xbd"
                                         "c?[2J?");
}
END_TEST

/* A producer that filled a text field to its last byte, with no NUL: read within the field. */
START_TEST(texts_without_nul)
{
    struct record_event m = {.type = RECORD_FRAME}, back;
    struct app_err err = {0};
    char want[RECORD_TEXT];

    memset(m.u.frame.function, 'a', sizeof(m.u.frame.function));
    memset(m.u.frame.file, 'b', sizeof(m.u.frame.file));
    ck_assert_int_eq(cycle(&m, &back, &err), 0);
    fill(want, sizeof(want), "a");
    ck_assert_str_eq(back.u.frame.function, want);
    m.type = RECORD_THREAD;
    memset(&m.u, 0, sizeof(m.u));
    m.u.thread.pid = 1;
    memset(m.u.thread.name, 'n', sizeof(m.u.thread.name));
    ck_assert_int_eq(cycle(&m, &back, &err), 0);
    ck_assert_uint_eq(strlen(back.u.thread.name), sizeof(m.u.thread.name) - 1);
}
END_TEST

/* The deepest stack the parser takes, in chunks of AGENTPROTO_CHUNK ids of the widest ids: each
 * chunk one line, and the chunks parsed back give the stack. */
START_TEST(deep_stack_in_chunks)
{
    uint32_t n = 65536, *ids = malloc(n * sizeof(*ids)), *got = calloc(n, sizeof(*ids));
    uint32_t lines = 0;

    for (uint32_t i = 0; i < n; i++)
        ids[i] = TOP_ID - i % 1000;
    for (uint32_t at = 0; at == 0 || at < n; at += AGENTPROTO_CHUNK, lines++) {
        struct record_event m = {.type = RECORD_STACK}, back;
        struct app_err err = {0};

        m.u.stack = (struct record_stack){.id = TOP_ID, .n = n, .at = at};
        m.u.stack.nchunk = n - at < AGENTPROTO_CHUNK ? n - at : AGENTPROTO_CHUNK;
        memcpy(m.u.stack.frames, ids + at, m.u.stack.nchunk * sizeof(*ids));
        ck_assert_int_eq(cycle(&m, &back, &err), 0);
        same(&m, &back);
        memcpy(got + back.u.stack.at, back.u.stack.frames, back.u.stack.nchunk * sizeof(*ids));
    }
    ck_assert_uint_eq(lines, (n + AGENTPROTO_CHUNK - 1) / AGENTPROTO_CHUNK);
    ck_assert(!memcmp(ids, got, n * sizeof(*ids)));
    free(ids);
    free(got);
}
END_TEST

/* Figures the wire cannot carry: the parser's default in their place, a share left out, the
 * shares capped; the widest live line still fits. */
START_TEST(hostile_figures)
{
    struct record_event m = {.type = RECORD_LIVE}, back;
    struct app_err err = {0};
    char buf[AGENTPROTO_LINE_MAX];

    m.u.live = (struct record_live){.pid = 1,
                                    .dev_mem_mb = -1,
                                    .gil_busy_pct = NAN,
                                    .gil_switches = INFINITY,
                                    .gil_waiters = 1e300,
                                    .gc_pct = -INFINITY,
                                    .nshares = 1000};
    for (size_t i = 0; i < RECORD_SHARES; i++)
        m.u.live.shares[i].ident = UINT64_MAX - i, m.u.live.shares[i].pct = -1e15;
    ck_assert_int_eq(cycle(&m, &back, &err), 0);
    ck_assert_double_eq(back.u.live.gil_busy_pct, -1);
    ck_assert_double_eq(back.u.live.gil_switches, 0);
    ck_assert_double_eq(back.u.live.gil_waiters, -1);
    ck_assert_double_eq(back.u.live.gc_pct, -1);
    ck_assert_uint_eq(back.u.live.nshares, RECORD_SHARES);
    ck_assert(back.u.live.shares[3].ident == UINT64_MAX - 3);
    m.u.live.shares[3].pct = NAN;
    ck_assert_int_eq(cycle(&m, &back, &err), 0);
    ck_assert_uint_eq(back.u.live.nshares, RECORD_SHARES - 1);
    ck_assert(back.u.live.shares[3].ident == UINT64_MAX - 4);
    m.type = RECORD_DEVICE;
    memset(&m.u, 0, sizeof(m.u));
    m.u.device.power_w = NAN;
    ck_assert_int_eq(cycle(&m, &back, &err), 0);
    ck_assert_double_eq(back.u.device.power_w, -1);
    m.type = RECORD_HELLO;
    memset(&m.u, 0, sizeof(m.u));
    m.u.hello.rate_hz = -INFINITY;
    ck_assert_uint_gt(write_line(&m, buf), 0);
}
END_TEST

/* Raw bytes make a bool field hold a value no bool has (undefined behaviour to read, which
 * UBSan stops at): each is set from its byte's low bit, as a real event would carry. */
static void bools_valid(struct record_event *m)
{
    bool *b;

    switch (m->type) {
    case RECORD_FRAME:
        b = &m->u.frame.native;
        break;
    case RECORD_RANK:
        b = &m->u.rank.exited;
        break;
    case RECORD_THREAD:
        m->u.thread.task = (*(unsigned char *)&m->u.thread.task & 1) != 0;
        b = &m->u.thread.main;
        break;
    case RECORD_DEVICE:
        b = &m->u.device.npu;
        break;
    default:
        return;
    }
    *b = (*(unsigned char *)b & 1) != 0;
}

/* Integers at their extremes: the line still fits; the parser refuses what is out of its range. */
START_TEST(hostile_integers)
{
    for (int type = RECORD_HELLO; type <= RECORD_BYE; type++) {
        for (int v = 0; v < 3; v++) {
            static const unsigned char pattern[3] = {0xff, 0x80, 0x7f};
            struct record_event m, back;
            struct app_err err = {0};
            char buf[AGENTPROTO_LINE_MAX];

            memset(&m, pattern[v], sizeof(m));
            m.type = (enum record_type)type;
            bools_valid(&m);
            if (write_line(&m, buf)) {
                int rc = agentproto_parse(buf, strlen(buf) - 1, &back, &err);

                ck_assert(rc == 0 || rc == APP_E_PARSE);
            }
        }
    }
}
END_TEST

/* Random bytes in every field of every type: one line within the limit, or none; never a
 * crash, and the parser reads it or refuses it with a reason. */
START_TEST(random_events)
{
    unsigned seed = 2026;

    for (int i = 0; i < 20000; i++) {
        struct record_event m, back;
        struct app_err err = {0};
        char buf[AGENTPROTO_LINE_MAX];
        unsigned char *p = (unsigned char *)&m;

        for (size_t k = 0; k < sizeof(m); k++)
            p[k] = (unsigned char)(rand_r(&seed) % 5 ? rand_r(&seed) % 128 : rand_r(&seed) % 256);
        m.type = (enum record_type)(rand_r(&seed) % (RECORD_TASKS + 1));
        bools_valid(&m);
        if (write_line(&m, buf)) {
            int rc = agentproto_parse(buf, strlen(buf) - 1, &back, &err);

            ck_assert(rc == 0 || rc == APP_E_PARSE);
        }
    }
}
END_TEST

/* A recorded agent stream (written by the agent's own encoder): parsed, written and parsed
 * again gives the same events, and the writer gives back the recorded bytes. */
START_TEST(golden_stream)
{
    char path[4096], line[4096], buf[AGENTPROTO_LINE_MAX];
    FILE *f;
    size_t n = 0;

    snprintf(path, sizeof(path), "%s/tests/data/agent/one_rank_50hz.jsonl",
             getenv("RANKTOP_SRCDIR"));
    ck_assert_msg((f = fopen(path, "r")) != NULL, "%s", path);
    while (fgets(line, sizeof(line), f)) {
        struct record_event m, back;
        struct app_err err = {0};
        size_t len = strcspn(line, "\n");

        size_t wlen;
        char *node;

        ck_assert_msg(agentproto_parse(line, len, &m, &err) == 0, "%s: %s", line, err.msg);
        wlen = agentproto_write(buf, sizeof(buf), &m);
        ck_assert_uint_gt(wlen, 0);
        ck_assert_int_eq(agentproto_parse(buf, wlen - 1, &back, &err), 0);
        /* The recording's hello predates its "node" field (written empty outside Slurm). */
        if (m.type == RECORD_HELLO && (node = strstr(buf, ",\"node\":\"\"")) != NULL) {
            memmove(node, node + 10, strlen(node + 10) + 1);
            wlen -= 10;
        }
        ck_assert_msg(wlen == len + 1 && !memcmp(buf, line, len + 1), "recorded %.*s\nwritten  %s",
                      (int)len, line, buf);
        same(&m, &back);
        n++;
    }
    fclose(f);
    ck_assert_uint_ge(n, 200);
}
END_TEST

/* A batch takes whole lines only, and a full buffer stops it where the next call goes on. */
START_TEST(batches)
{
    struct record_event ev[17];
    size_t n = every_type(ev), done = 0, used, total = 0;
    char one[AGENTPROTO_LINE_MAX], all[16384] = "", part[AGENTPROTO_LINE_MAX + 200];

    ev[n++] = (struct record_event){.type = RECORD_TASKS}; /* consumed, nothing written */
    for (size_t i = 0; i < n; i++)
        if (agentproto_write(one, sizeof(one), &ev[i]))
            strcat(all, one);
    while (done < n) {
        size_t k = agentproto_write_batch(part, 200, ev + done, n - done, &used);

        ck_assert_uint_gt(k, 0);
        ck_assert_uint_lt(used, 200);
        ck_assert_uint_eq(strlen(part), used);
        ck_assert(used == 0 || part[used - 1] == '\n');
        ck_assert(!memcmp(all + total, part, used));
        total += used;
        done += k;
    }
    ck_assert_uint_eq(total, strlen(all));
    ck_assert_uint_eq(agentproto_write_batch(part, sizeof(part), ev, n, &used), n);
    ck_assert_uint_eq(agentproto_write_batch(part, 10, ev, n, &used), 0);
    ck_assert_uint_eq(used, 0);
}
END_TEST

/* Record texts are filled with whole UTF-8 sequences only. */
START_TEST(copy_text_cuts_between_sequences)
{
    char dst[6];

    agentproto_copy_text(dst, sizeof(dst), "abcd\xc3\xa9");
    ck_assert_str_eq(dst, "abcd");
    agentproto_copy_text(dst, sizeof(dst), "ab\xe2\x82\xac!");
    ck_assert_str_eq(dst, "ab\xe2\x82\xac");
    agentproto_copy_text(dst, sizeof(dst), "abc");
    ck_assert_str_eq(dst, "abc");
    agentproto_copy_text(dst, sizeof(dst), "abcdefgh");
    ck_assert_str_eq(dst, "abcde");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("agentwrite");

    ts_add_case(s, "every_type_round_trips", every_type_round_trips, 60);
    ts_add_case(s, "nothing_to_write", nothing_to_write, 60);
    ts_add_case(s, "texts_at_their_limits", texts_at_their_limits, 60);
    ts_add_case(s, "every_text_at_its_size", every_text_at_its_size, 60);
    ts_add_case(s, "not_utf8_nor_printable", not_utf8_nor_printable, 60);
    ts_add_case(s, "texts_without_nul", texts_without_nul, 60);
    ts_add_case(s, "deep_stack_in_chunks", deep_stack_in_chunks, 120);
    ts_add_case(s, "hostile_figures", hostile_figures, 60);
    ts_add_case(s, "hostile_integers", hostile_integers, 60);
    ts_add_case(s, "random_events", random_events, 300);
    ts_add_case(s, "golden_stream", golden_stream, 60);
    ts_add_case(s, "batches", batches, 60);
    ts_add_case(s, "copy_text_cuts_between_sequences", copy_text_cuts_between_sequences, 60);
    return ts_run(s);
}
