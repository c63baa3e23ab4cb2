/* Tests for the agent stream's head side (collectors/remote/agentproto.c): every message type
 * parsed from the lines an agent writes, hostile lines refused with a reason (garbage,
 * truncation, wrong types, out-of-range ids, huge arrays), unknown types and fields ignored,
 * the line framer (split writes, CRLF, oversized lines dropped and counted, resync at the next
 * newline), and the JSON string writer (escapes, control bytes, cuts that never split an escape
 * or a UTF-8 sequence). Lines are copied into allocations of exactly their length so the
 * sanitizer builds catch a read past the end. Single-threaded. */
#include "ranktop/remote/agentproto.h"
#include "tsupport.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse(const char *text, struct record_event *m, struct app_err *err)
{
    size_t n = strlen(text);
    char *copy = malloc(n ? n : 1);
    int rc;

    memcpy(copy, text, n);
    rc = agentproto_parse(copy, n, m, err);
    free(copy);
    return rc;
}

static void ok(const char *text, enum record_type type, struct record_event *m)
{
    struct app_err err = {0};

    ck_assert_msg(parse(text, m, &err) == 0, "%s: %s", text, err.msg);
    ck_assert_int_eq(m->type, type);
}

static void refused(const char *text, const char *why)
{
    struct record_event m;
    struct app_err err = {0};

    ck_assert_msg(parse(text, &m, &err) == APP_E_PARSE, "accepted: %s", text);
    ck_assert_msg(strstr(err.msg, why), "%s: '%s' lacks '%s'", text, err.msg, why);
}

START_TEST(messages)
{
    struct record_event m;

    ok("{\"t\":\"hello\",\"proto\":[1,0],\"ver\":\"0.1.0\",\"host\":\"n01\",\"boot\":\"b\","
       "\"pid\":42,\"mono\":123456789012345,\"wall\":1,\"rate\":10}",
       RECORD_HELLO, &m);
    ck_assert_int_eq(m.u.hello.major, 1);
    ck_assert_str_eq(m.u.hello.host, "n01");
    ck_assert_int_eq(m.u.hello.mono_ns, 123456789012345);
    ok("{\"t\":\"f\",\"id\":7,\"fn\":\"all_reduce\",\"file\":\"/x/c10d.py\",\"ln\":1541}",
       RECORD_FRAME, &m);
    ck_assert_str_eq(m.u.frame.function, "all_reduce");
    ck_assert_int_eq(m.u.frame.line, 1541);
    ok("{\"t\":\"s\",\"id\":3,\"n\":3,\"at\":0,\"f\":[7,8,9]}", RECORD_STACK, &m);
    ck_assert_uint_eq(m.u.stack.nchunk, 3);
    ck_assert_uint_eq(m.u.stack.frames[2], 9);
    ok("{\"t\":\"r\",\"p\":4242,\"rank\":3,\"dev\":\"gpu 3\",\"py\":\"3.11.7\",\"x\":true,"
       "\"xc\":-1,\"xs\":11,\"ts\":5}",
       RECORD_RANK, &m);
    ck_assert(m.u.rank.exited);
    ck_assert_int_eq(m.u.rank.exit_signal, 11);
    ok("{\"t\":\"th\",\"id\":0,\"p\":4242,\"w\":0,\"i\":139722512968576,\"tid\":4250,\"m\":true,"
       "\"name\":\"MainThread\"}",
       RECORD_THREAD, &m);
    ck_assert(m.u.thread.ident == 139722512968576ull);
    ok("{\"t\":\"o\",\"th\":0,\"s\":-1,\"ts\":9}", RECORD_RUN, &m);
    ck_assert_int_eq(m.u.run.stack, -1);
    ok("{\"t\":\"g\",\"th\":0,\"ts\":9}", RECORD_GONE, &m);
    ok("{\"t\":\"k\",\"seq\":4,\"ts\":10,\"n\":3,\"st\":2,\"er\":1,\"lo\":0}", RECORD_TICK, &m);
    ck_assert_uint_eq(m.u.tick.passes, 3);
    ok("{\"t\":\"c\",\"p\":4242,\"id\":2,\"v\":13.5,\"ts\":11}", RECORD_COUNTER, &m);
    ck_assert_double_eq(m.u.counter.v, 13.5);
    ok("{\"t\":\"l\",\"p\":1,\"dm\":-1,\"gb\":97.5,\"gs\":3,\"gw\":0.5,\"sh\":[[5,97.5],[6,2]]}",
       RECORD_LIVE, &m);
    ck_assert_uint_eq(m.u.live.nshares, 2);
    ok("{\"t\":\"d\",\"k\":\"npu\",\"i\":0,\"c\":1,\"name\":\"910B\",\"u\":50,\"mu\":1,\"mt\":2,"
       "\"tc\":40,\"pw\":90.5}",
       RECORD_DEVICE, &m);
    ck_assert(m.u.device.npu);
    ok("{\"t\":\"pong\",\"h\":1,\"a\":2}", RECORD_PONG, &m);
    ok("{\"t\":\"err\",\"msg\":\"nvidia-smi: not found\"}", RECORD_ERROR, &m);
    /* A newer agent's message type and fields: ignored, not an error. */
    ok("{\"t\":\"native\",\"frames\":[1,2]}", RECORD_UNKNOWN, &m);
    ok("{\"t\":\"o\",\"th\":0,\"s\":1,\"ts\":9,\"future\":{\"x\":[1]}}", RECORD_RUN, &m);
}
END_TEST

START_TEST(hostile)
{
    char big[2000];
    struct record_event m;

    refused("", "not one JSON value");
    refused("garbage", "not one JSON value");
    refused("{\"t\":\"k\",\"ts\":1", "not one JSON value");     /* truncated */
    refused("{\"t\":\"k\",\"ts\":1} {}", "not one JSON value"); /* two values */
    refused("[1,2]", "string 't'");
    refused("{\"t\":5}", "string 't'");
    refused("{\"t\":\"k\"}", "'ts' is missing");
    refused("{\"t\":\"k\",\"ts\":\"soon\"}", "'ts' is not an integer");
    refused("{\"t\":\"k\",\"ts\":-5}", "'ts' is out of range");
    refused("{\"t\":\"f\",\"id\":99999999,\"fn\":\"x\"}", "'id' is out of range");
    refused("{\"t\":\"s\",\"id\":1,\"n\":2,\"f\":[1,2,3]}", "more frames");
    refused("{\"t\":\"s\",\"id\":1,\"n\":2,\"f\":[1,\"x\"]}", "bad frame id");
    refused("{\"t\":\"s\",\"id\":1,\"n\":100000,\"f\":[]}", "'n' is out of range");
    refused("{\"t\":\"hello\",\"proto\":\"1\",\"ver\":\"x\",\"host\":\"h\",\"mono\":1}", "proto");
    refused("{\"t\":\"c\",\"p\":1,\"id\":2,\"v\":1e308,\"ts\":1}", "'v' is out of range");
    refused("{\"t\":\"d\",\"k\":\"tpu\",\"i\":0}", "neither gpu nor npu");
    refused("{\"t\":\"l\",\"p\":1,\"sh\":[[1]]}", "bad share");
    refused("{\"t\":\"r\",\"p\":0}", "'p' is out of range");
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    refused(big, "line of");
    /* Control bytes in a name never reach the terminal. */
    ok("{\"t\":\"hello\",\"proto\":[1,0],\"ver\":\"1\",\"host\":\"a\\u001b[2Jb\",\"mono\":1}",
       RECORD_HELLO, &m);
    ck_assert_str_eq(m.u.hello.host, "a?[2Jb");
    /* Nor do C1 controls (U+009B is a one-character CSI; U+0085 a next-line): each becomes one
     * '?', while other non-ASCII text stays. */
    ok("{\"t\":\"d\",\"k\":\"gpu\",\"i\":0,\"name\":\"G\\u009b2J\\u0085\\u00e9\\u00a0x\"}",
       RECORD_DEVICE, &m);
    ck_assert_str_eq(m.u.device.name, "G?2J?\xc3\xa9\xc2\xa0x");
}
END_TEST

static long next_line(struct agentproto_lines *l, char *out, size_t len)
{
    const char *line;
    long n = agentproto_lines_next(l, &line);

    if (n >= 0)
        snprintf(out, len, "%.*s", (int)n, line);
    return n;
}

START_TEST(framing)
{
    struct agentproto_lines l;
    char buf[256], big[300];

    agentproto_lines_init(&l, 100);
    agentproto_lines_feed(&l, "{\"a\"", 4);
    ck_assert_int_eq(next_line(&l, buf, sizeof(buf)), -1); /* no newline yet */
    agentproto_lines_feed(&l, ":1}\r\n{\"b\":2}\n{\"c\"", 17);
    ck_assert_int_eq(next_line(&l, buf, sizeof(buf)), 7);
    ck_assert_str_eq(buf, "{\"a\":1}");
    ck_assert_int_eq(next_line(&l, buf, sizeof(buf)), 7);
    ck_assert_str_eq(buf, "{\"b\":2}");
    ck_assert_int_eq(next_line(&l, buf, sizeof(buf)), -1);
    /* An oversized line, first unfinished and then ended: dropped whole, counted once. */
    memset(big, 'x', sizeof(big));
    agentproto_lines_feed(&l, big, 150);
    ck_assert_int_eq(next_line(&l, buf, sizeof(buf)), -1);
    agentproto_lines_feed(&l, big, 150);
    agentproto_lines_feed(&l, "\nok\n", 4);
    ck_assert_int_eq(next_line(&l, buf, sizeof(buf)), 2);
    ck_assert_str_eq(buf, "ok");
    ck_assert_uint_eq(l.oversized, 1);
    /* One that arrives whole in one write. */
    agentproto_lines_feed(&l, big, 120);
    agentproto_lines_feed(&l, "\n\n", 2);
    ck_assert_int_eq(next_line(&l, buf, sizeof(buf)), 0); /* the empty line after it */
    ck_assert_uint_eq(l.oversized, 2);
    agentproto_lines_fini(&l);
}
END_TEST

START_TEST(json_strings)
{
    char buf[64];
    struct record_event m;
    char line[128];

    ck_assert_uint_eq(agentproto_json_str(buf, sizeof(buf), "a\"b\\c\n\x01"), 21);
    ck_assert_str_eq(buf, "\"a\\\"b\\\\c\\u000a\\u0001\"");
    /* Cut to fit: never half an escape, never half a UTF-8 sequence, always quoted. */
    ck_assert_uint_eq(agentproto_json_str(buf, 8, "abc\n"), 5);
    ck_assert_str_eq(buf, "\"abc\"");
    agentproto_json_str(buf, 8, "ab\xc3\xa9\xc3\xa9");
    ck_assert_str_eq(buf, "\"ab\xc3\xa9\"");
    /* What the writer makes, the parser reads back. */
    agentproto_json_str(buf, sizeof(buf), "tab\there \"q\" \xe2\x82\xac");
    snprintf(line, sizeof(line), "{\"t\":\"err\",\"msg\":%s}", buf);
    ok(line, RECORD_ERROR, &m);
    ck_assert_str_eq(m.u.text, "tab?here \"q\" \xe2\x82\xac");
}
END_TEST

/* Random lines built from the grammar's own bytes: refused or parsed, never a crash. */
START_TEST(random_lines)
{
    static const char alphabet[] = "{}[]\":,0123456789-.tefnsolrkgcdhpwaiux\\ ";
    struct agentproto_lines l;
    unsigned seed = 12345;

    agentproto_lines_init(&l, 512);
    for (int i = 0; i < 20000; i++) {
        char text[200];
        size_t n = (size_t)(rand_r(&seed) % (sizeof(text) - 1));
        struct record_event m;
        struct app_err err = {0};
        const char *line;
        long len;

        for (size_t k = 0; k < n; k++)
            text[k] = rand_r(&seed) % 9 ? alphabet[rand_r(&seed) % (sizeof(alphabet) - 1)]
                                        : (char)(rand_r(&seed) % 256);
        agentproto_lines_feed(&l, text, n);
        while ((len = agentproto_lines_next(&l, &line)) >= 0) {
            int rc = agentproto_parse(line, (size_t)len, &m, &err);

            ck_assert(rc == 0 || rc == APP_E_PARSE);
        }
    }
    agentproto_lines_fini(&l);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("agentproto");

    ts_add_case(s, "messages", messages, 60);
    ts_add_case(s, "hostile", hostile, 60);
    ts_add_case(s, "framing", framing, 60);
    ts_add_case(s, "json_strings", json_strings, 60);
    ts_add_case(s, "random_lines", random_lines, 300);
    return ts_run(s);
}
