/* Tests for the host-list expander (collectors/remote/hostlist.c): Slurm's examples and padding
 * rules, suffixes and several bracket groups, order and duplicates, every syntax error and the
 * host limit, hostfiles with comments, blank lines and CRLF, the remote-shell name check, and
 * random bytes that must never crash it (the sanitizer builds catch a stray read).
 *
 * Hostfile buffers are copied into allocations of exactly their length, with no NUL after, so
 * a read past the end shows under ASan. Single-threaded. */
#include "ranktop/remote/hostlist.h"
#include "tsupport.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The names of l joined by single spaces into out. */
static void join(const struct hostlist *l, char *out, size_t n)
{
    size_t used = 0;

    out[0] = '\0';
    for (size_t i = 0; i < l->n; i++) {
        int w = snprintf(out + used, n - used, "%s%s", i ? " " : "", l->v[i]);

        ck_assert(w >= 0 && (size_t)w < n - used);
        used += (size_t)w;
    }
}

/* Expands expr into a fresh list and checks the names against want (space-separated). */
static void expect(const char *expr, const char *want)
{
    struct hostlist l = {0};
    struct app_err err = {0};
    char got[8192];
    int rc = hostlist_expand(expr, &l, &err);

    ck_assert_msg(rc == 0, "'%s': rc %d: %s", expr, rc, err.msg);
    join(&l, got, sizeof(got));
    ck_assert_msg(!strcmp(got, want), "'%s' gave '%s', want '%s'", expr, got, want);
    hostlist_free(&l);
}

/* Expands expr into a list already holding one name: it must fail with code, a message
 * holding needle, and leave the list as it was. */
static void expect_err(const char *expr, int code, const char *needle)
{
    struct hostlist l = {0};
    struct app_err err = {0};
    int rc;

    ck_assert_int_eq(hostlist_expand("keep", &l, &err), 0);
    rc = hostlist_expand(expr, &l, &err);
    ck_assert_msg(rc == code, "'%s': rc %d, want %d (%s)", expr, rc, code, err.msg);
    ck_assert_msg(strstr(err.msg, needle), "'%s': message '%s' lacks '%s'", expr, err.msg, needle);
    ck_assert_uint_eq(l.n, 1);
    ck_assert_str_eq(l.v[0], "keep");
    hostlist_free(&l);
}

/* Parses text as a hostfile held in an allocation of exactly its length. */
static int parse_file(const char *text, size_t len, struct hostlist *l, struct app_err *err)
{
    char *buf = malloc(len ? len : 1);
    int rc;

    ck_assert_ptr_nonnull(buf);
    memcpy(buf, text, len);
    rc = hostlist_parse_file(buf, len, l, err);
    free(buf);
    return rc;
}

START_TEST(test_slurm_examples)
{
    expect("node[01-04,07],gpu[1-2]", "node01 node02 node03 node04 node07 gpu1 gpu2");
    expect("n[01-10]", "n01 n02 n03 n04 n05 n06 n07 n08 n09 n10");
    expect("n[1-10]", "n1 n2 n3 n4 n5 n6 n7 n8 n9 n10");
    expect("n[001-3]", "n001 n002 n003");
    expect("n[1-3]-ib", "n1-ib n2-ib n3-ib");
    expect("r[0-1]_b[0-1]", "r0_b0 r0_b1 r1_b0 r1_b1");
    expect("gpu01", "gpu01");
    expect("user@n[1-2]", "user@n1 user@n2");
}
END_TEST

/* The width is LO's digits as written; HI's width and the value's own digits do not matter. */
START_TEST(test_padding)
{
    expect("n[08-11]", "n08 n09 n10 n11");
    expect("n[0010-12]", "n0010 n0011 n0012");
    expect("n[9-11]", "n9 n10 n11");
    expect("n[1-003]", "n1 n2 n3");
    expect("n[007]", "n007");
    expect("n[0]", "n0");
    expect("n[1,02-03,004]", "n1 n02 n03 n004");
    expect("n[1000000000]", "n1000000000");
    expect("[1-2]", "1 2");
}
END_TEST

START_TEST(test_groups_and_suffixes)
{
    expect("a[1-2]b[7,9]c", "a1b7c a1b9c a2b7c a2b9c");
    expect("x[1]y[2]z[3]", "x1y2z3");
    expect("rack[0-1]_n[01-02].ib", "rack0_n01.ib rack0_n02.ib rack1_n01.ib rack1_n02.ib");
    expect("a[1-2][5-6]", "a15 a16 a25 a26");
}
END_TEST

/* Input order kept, duplicates kept, separators: comma, space, tab, newline, runs of them. */
START_TEST(test_order_and_separators)
{
    expect("b,a,b", "b a b");
    expect("n[3,1,1-2]", "n3 n1 n1 n2");
    expect("a b\tc\nd,,e , f", "a b c d e f");
    expect("  n[1-2]\t,\n m ", "n1 n2 m");
    expect("", "");
    expect(" ,\t\n,, ", "");
}
END_TEST

/* hostlist_expand appends; NULL is an empty expression. */
START_TEST(test_appends)
{
    struct hostlist l = {0};
    struct app_err err = {0};
    char got[256];

    ck_assert_int_eq(hostlist_expand("b", &l, &err), 0);
    ck_assert_int_eq(hostlist_expand(NULL, &l, &err), 0);
    ck_assert_int_eq(hostlist_expand("a[1-2]", &l, &err), 0);
    join(&l, got, sizeof(got));
    ck_assert_str_eq(got, "b a1 a2");
    hostlist_free(&l);
    ck_assert_uint_eq(l.n, 0);
    ck_assert_ptr_null(l.v);
    hostlist_free(&l);
}
END_TEST

START_TEST(test_syntax_errors)
{
    expect_err("n[1-3", APP_E_USAGE, "'[' without ']'");
    expect_err("a,n[1-3,b", APP_E_USAGE, "'a,n[1-3,b'");
    expect_err("n1-3]", APP_E_USAGE, "']' without '['");
    expect_err("n[1-[2]]", APP_E_USAGE, "nested '['");
    expect_err("feature{gpu}", APP_E_USAGE, "'{'");
    expect_err("n}", APP_E_USAGE, "'{'");
    expect_err("n[3-1]", APP_E_USAGE, "runs backwards");
    expect_err("n[3-1]", APP_E_USAGE, "'n[3-1]'");
    expect_err("n[1,,2]", APP_E_USAGE, "empty item");
    expect_err("n[]", APP_E_USAGE, "empty item");
    expect_err("n[,1]", APP_E_USAGE, "empty item");
    expect_err("n[1,]", APP_E_USAGE, "empty item");
    expect_err("n[1-]", APP_E_USAGE, "empty upper bound");
    expect_err("n[-1]", APP_E_USAGE, "unexpected '-'");
    expect_err("n[1--2]", APP_E_USAGE, "unexpected '-'");
    expect_err("n[1-2-3]", APP_E_USAGE, "unexpected '-'");
    expect_err("n[a]", APP_E_USAGE, "unexpected 'a'");
    expect_err("n[1x]", APP_E_USAGE, "unexpected 'x'");
    expect_err("n[1, 2]", APP_E_USAGE, "unexpected ' '");
    expect_err("n[+1]", APP_E_USAGE, "unexpected '+'");
    expect_err("n[1\x01]", APP_E_USAGE, "byte 0x01");
    expect_err("n[0-999999999999]", APP_E_USAGE, "larger than 10^9");
    expect_err("n[1000000001]", APP_E_USAGE, "larger than 10^9");
    expect_err("n[99999999999999999999999]", APP_E_USAGE, "larger than 10^9");
    /* The syntax error of a later token undoes the hosts of the earlier ones. */
    expect_err("a,b,c[", APP_E_USAGE, "'[' without ']'");
}
END_TEST

/* Every name must be a safe host word; the message names the bad one. */
START_TEST(test_bad_names)
{
    struct hostlist l = {0};
    struct app_err err = {0};
    char expr[600];

    expect_err("-oProxyCommand=x", APP_E_USAGE, "'-oProxyCommand=x'");
    expect_err("a;b", APP_E_USAGE, "bad host name 'a;b'");
    expect_err("n[1-2];x", APP_E_USAGE, "bad host name 'n1;x'");
    expect_err("$(x)", APP_E_USAGE, "bad host name");
    expect_err(".hidden", APP_E_USAGE, "bad host name");
    expect_err("@host", APP_E_USAGE, "bad host name");
    expect_err("a\rb", APP_E_USAGE, "bad host name 'a?b'");
    /* 251 + 2 digits = 253 bytes is fine, 252 + 2 is one too many. */
    memset(expr, 'a', 251);
    strcpy(expr + 251, "[98-99]");
    ck_assert_int_eq(hostlist_expand(expr, &l, &err), 0);
    ck_assert_uint_eq(l.n, 2);
    ck_assert_uint_eq(strlen(l.v[1]), 253);
    hostlist_free(&l);
    memset(expr, 'a', 252);
    strcpy(expr + 252, "[8-10]");
    expect_err(expr, APP_E_USAGE, "bad host name");
    /* Far too long: cut and refused, whatever the groups would add. */
    memset(expr, 'a', 590);
    strcpy(expr + 590, "[1-2]");
    expect_err(expr, APP_E_USAGE, "bad host name");
    memset(expr, 'a', 300);
    strcpy(expr + 300, "[0000000000000000000000000000000000000000000001]");
    expect_err(expr, APP_E_USAGE, "bad host name");
}
END_TEST

START_TEST(test_limit)
{
    struct hostlist l = {0};
    struct app_err err = {0};

    expect_err("a[0-99999]", APP_E_LIMIT, "more than 65536 hosts");
    expect_err("a[0-999999999]b[0-999999999]c[0-999999999]", APP_E_LIMIT, "more than");
    expect_err("a[0-299]b[0-299]", APP_E_LIMIT, "more than");
    expect_err("a[0-65534],b,c", APP_E_LIMIT, "more than"); /* 1 kept + 65535 + 1 + 1 */
    /* A syntax error after the limit is still a syntax error. */
    expect_err("a[0-99999]b[x]", APP_E_USAGE, "unexpected 'x'");
    ck_assert_int_eq(hostlist_expand("a[0-65535]", &l, &err), 0);
    ck_assert_uint_eq(l.n, HOSTLIST_MAX);
    ck_assert_str_eq(l.v[0], "a0");
    ck_assert_str_eq(l.v[HOSTLIST_MAX - 1], "a65535");
    ck_assert_int_eq(hostlist_expand("b", &l, &err), APP_E_LIMIT);
    ck_assert_uint_eq(l.n, HOSTLIST_MAX);
    ck_assert_int_eq(hostlist_expand("", &l, &err), 0);
    hostlist_free(&l);
}
END_TEST

/* A host given twice is one host: the first occurrences stay, in their order; appending after
 * a dedup still works (the vector's capacity is implied by its count). */
START_TEST(test_dedup)
{
    struct hostlist l = {0};
    char got[512];

    ck_assert_int_eq(hostlist_expand("b,a,b,n[1-3],a,n2,c,b", &l, NULL), 0);
    hostlist_dedup(&l);
    join(&l, got, sizeof(got));
    ck_assert_str_eq(got, "b a n1 n2 n3 c");
    ck_assert_int_eq(hostlist_expand("d,a,n[1-40]", &l, NULL), 0);
    hostlist_dedup(&l);
    ck_assert_uint_eq(l.n, 6 + 1 + 37);
    ck_assert_str_eq(l.v[6], "d");
    ck_assert_str_eq(l.v[l.n - 1], "n40");
    hostlist_free(&l);
    hostlist_dedup(&l); /* an empty list */
    ck_assert_uint_eq(l.n, 0);
    /* Many names: linear, not quadratic (65 536 names, each twice). */
    ck_assert_int_eq(hostlist_expand("h[0-32767],h[0-32767]", &l, NULL), 0);
    hostlist_dedup(&l);
    ck_assert_uint_eq(l.n, 32768);
    ck_assert_str_eq(l.v[32767], "h32767");
    hostlist_free(&l);
}
END_TEST

START_TEST(test_name_ok)
{
    char name[330];

    ck_assert(hostlist_name_ok("gpu01"));
    ck_assert(hostlist_name_ok("user@node-b.example.org"));
    ck_assert(hostlist_name_ok("a"));
    ck_assert(hostlist_name_ok("10.0.0.1"));
    ck_assert(hostlist_name_ok("n_1.ib-0"));
    ck_assert(hostlist_name_ok("first.last_x@h"));
    ck_assert(!hostlist_name_ok("-oProxyCommand=x"));
    ck_assert(!hostlist_name_ok("a b"));
    ck_assert(!hostlist_name_ok("a;b"));
    ck_assert(!hostlist_name_ok("$(x)"));
    ck_assert(!hostlist_name_ok("`x`"));
    ck_assert(!hostlist_name_ok(""));
    ck_assert(!hostlist_name_ok(NULL));
    ck_assert(!hostlist_name_ok(".a"));
    ck_assert(!hostlist_name_ok("a\nb"));
    ck_assert(!hostlist_name_ok("a/b"));
    ck_assert(!hostlist_name_ok("h\xc3\xa4"));
    ck_assert(!hostlist_name_ok("user@"));
    ck_assert(!hostlist_name_ok("@host"));
    ck_assert(!hostlist_name_ok("-u@h"));
    ck_assert(!hostlist_name_ok(".u@h"));
    ck_assert(!hostlist_name_ok("u@-h"));
    ck_assert(!hostlist_name_ok("a@b@c"));
    memset(name, 'a', 253);
    name[253] = '\0';
    ck_assert(hostlist_name_ok(name));
    name[253] = 'a';
    name[254] = '\0';
    ck_assert(!hostlist_name_ok(name));
    /* The user part is at most 64 bytes, on top of a full-length host. */
    memset(name, 'u', 64);
    name[64] = '@';
    memset(name + 65, 'h', 253);
    name[318] = '\0';
    ck_assert(hostlist_name_ok(name));
    memset(name, 'u', 65);
    name[65] = '@';
    name[66] = 'h';
    name[67] = '\0';
    ck_assert(!hostlist_name_ok(name));
}
END_TEST

START_TEST(test_hostfile)
{
    static const char text[] = "# the job's nodes\n"
                               "\n"
                               "node[1-2]   # rack 1\n"
                               "  gpu01\t\r\n"
                               "\r\n"
                               "   \t  \n"
                               "user@h a,b\n"
                               "#last\n"
                               "tail";
    struct hostlist l = {0};
    struct app_err err = {0};
    char got[256];

    ck_assert_int_eq(parse_file(text, sizeof(text) - 1, &l, &err), 0);
    join(&l, got, sizeof(got));
    ck_assert_str_eq(got, "node1 node2 gpu01 user@h a b tail");
    /* The last line is cut by len, not by a NUL. */
    ck_assert_int_eq(parse_file("x\ny\nzz", 5, &l, &err), 0);
    join(&l, got, sizeof(got));
    ck_assert_str_eq(got, "node1 node2 gpu01 user@h a b tail x y z");
    hostlist_free(&l);
    ck_assert_int_eq(parse_file("", 0, &l, &err), 0);
    ck_assert_int_eq(hostlist_parse_file(NULL, 0, &l, &err), 0);
    ck_assert_int_eq(parse_file("# only\n\n", 8, &l, &err), 0);
    ck_assert_uint_eq(l.n, 0);
    hostlist_free(&l);
}
END_TEST

/* A bad line fails the whole file with its number, and keeps none of its hosts. */
START_TEST(test_hostfile_errors)
{
    static const char bad[] = "a\r\n# c\nn[1-\nb\n";
    static const char nul[] = "a\nb\0c\n";
    static const char nul_comment[] = "a # \0 \n";
    static const char many[] = "a[0-40000]\nb[0-40000]\n";
    struct hostlist l = {0};
    struct app_err err = {0};

    ck_assert_int_eq(hostlist_expand("keep", &l, &err), 0);
    ck_assert_int_eq(parse_file(bad, sizeof(bad) - 1, &l, &err), APP_E_USAGE);
    ck_assert_msg(strstr(err.msg, "line 3: ") && strstr(err.msg, "'[' without ']'"), "%s", err.msg);
    ck_assert_uint_eq(l.n, 1);
    ck_assert_int_eq(parse_file(nul, sizeof(nul) - 1, &l, &err), APP_E_USAGE);
    ck_assert_msg(strstr(err.msg, "line 2: ") && strstr(err.msg, "NUL"), "%s", err.msg);
    ck_assert_uint_eq(l.n, 1);
    ck_assert_int_eq(parse_file(nul_comment, sizeof(nul_comment) - 1, &l, &err), 0);
    ck_assert_uint_eq(l.n, 2);
    ck_assert_int_eq(parse_file(many, sizeof(many) - 1, &l, &err), APP_E_LIMIT);
    ck_assert_msg(strstr(err.msg, "line 2: "), "%s", err.msg);
    ck_assert_uint_eq(l.n, 2);
    ck_assert_int_eq(parse_file("ok\n-bad\n", 8, &l, &err), APP_E_USAGE);
    ck_assert_msg(strstr(err.msg, "line 2: ") && strstr(err.msg, "'-bad'"), "%s", err.msg);
    ck_assert_str_eq(l.v[0], "keep");
    ck_assert_str_eq(l.v[1], "a");
    ck_assert_uint_eq(l.n, 2);
    hostlist_free(&l);
}
END_TEST

/* A small xorshift generator, so a failure replays from its seed. */
static uint32_t rnd(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* Random strings, mostly of the grammar's own bytes, never crash the parser: each ends in
 * success with safe names, or in an error with a message and the list untouched. */
START_TEST(test_hostile_input)
{
    static const char alphabet[] = "[]-,0123456789ab@ \t\n{}#.\r_";
    uint32_t seed = 0x9e3779b9u;
    char buf[64];

    for (int iter = 0; iter < 20000; iter++) {
        struct hostlist l = {0};
        struct app_err err = {0};
        size_t len = rnd(&seed) % (sizeof(buf) - 1);
        int rc;

        for (size_t i = 0; i < len; i++) {
            uint32_t r = rnd(&seed);

            buf[i] = (r & 0x300) ? alphabet[r % (sizeof(alphabet) - 1)] : (char)(r >> 24);
        }
        buf[len] = '\0';
        rc = iter & 1 ? hostlist_expand(buf, &l, &err) : parse_file(buf, len, &l, &err);
        ck_assert_msg(rc == 0 || rc == APP_E_USAGE || rc == APP_E_LIMIT, "rc %d", rc);
        if (rc == 0) {
            ck_assert_uint_le(l.n, HOSTLIST_MAX);
            for (size_t i = 0; i < l.n; i++)
                ck_assert(hostlist_name_ok(l.v[i]));
        } else {
            ck_assert_uint_eq(l.n, 0);
            ck_assert(err.msg[0] != '\0');
        }
        hostlist_free(&l);
    }
}
END_TEST

static Suite *hostlist_suite(void)
{
    Suite *s = suite_create("hostlist");
    TCase *tc = tcase_create("expand");

    tcase_add_test(tc, test_slurm_examples);
    tcase_add_test(tc, test_padding);
    tcase_add_test(tc, test_groups_and_suffixes);
    tcase_add_test(tc, test_order_and_separators);
    tcase_add_test(tc, test_appends);
    tcase_add_test(tc, test_syntax_errors);
    tcase_add_test(tc, test_bad_names);
    tcase_add_test(tc, test_name_ok);
    tcase_add_test(tc, test_dedup);
    suite_add_tcase(s, tc);
    tc = tcase_create("hostfile");
    tcase_add_test(tc, test_hostfile);
    tcase_add_test(tc, test_hostfile_errors);
    suite_add_tcase(s, tc);
    /* These allocate 65536 names or loop 20000 times: slow under the sanitizers. */
    ts_add_case(s, "limit", test_limit, 60);
    ts_add_case(s, "hostile", test_hostile_input, 120);
    return s;
}

int main(void)
{
    return ts_run(hostlist_suite());
}
