/* Tests for corepath_expand (collectors/proc/corepath.c): kernel.core_pattern texts expanded
 * for one process as the kernel names its core file, the systemd helper, other pipes, fields
 * that are not known, and paths that do not fit. Single-threaded. */
#include "ranktop/proc/corepath.h"
#include "tsupport.h"

#include <check.h>
#include <string.h>

struct pattern_case {
    const char *pattern;
    int uses_pid;
    int kind;
    const char *path;
};

static const struct pattern_case cases[] = {
    {"/tmp/core.%p\n", 0, COREPATH_FILE, "/tmp/core.4242"},
    {"/c/%e-%P-%i-%I-%s-%t-%u-%g-%c-%%-%h", 0, COREPATH_FILE,
     "/c/py!thon-4242-4242-4242-11-1700000000-1000-100-0-%-node!1"},
    {"/c/%E.core", 0, COREPATH_FILE, "/c/!usr!bin!python3.core"},
    {"core", 0, COREPATH_FILE, "/work/run/core"},
    {"core", 1, COREPATH_FILE, "/work/run/core.4242"},
    {"/c/core.%p", 1, COREPATH_FILE, "/c/core.4242"},
    {"/c/x%q%", 0, COREPATH_FILE, "/c/x"}, /* the kernel drops an unknown field */
    {"|/usr/lib/systemd/systemd-coredump %P %u %g %s %t %c %h", 0, COREPATH_SYSTEMD,
     COREPATH_SYSTEMD_TEXT},
    {"|/usr/share/apport/apport -p%p -s%s", 0, COREPATH_UNKNOWN, ""},
    {"|/bin/systemd-coredumpx", 0, COREPATH_UNKNOWN, ""},
    {"/c/%C/core", 0, COREPATH_UNKNOWN, ""},
    {"", 0, COREPATH_UNKNOWN, ""},
};

static struct corepath_info info(int uses_pid)
{
    return (struct corepath_info){.pid = 4242,
                                  .uid = 1000,
                                  .gid = 100,
                                  .signal = 11,
                                  .time = 1700000000,
                                  .core_limit = 0,
                                  .comm = "py/thon",
                                  .exe = "/usr/bin/python3",
                                  .host = "node/1",
                                  .cwd = "/work/run",
                                  .core_uses_pid = uses_pid};
}

START_TEST(test_pattern)
{
    const struct pattern_case *c = &cases[_i];
    struct corepath_info in = info(c->uses_pid);
    char out[256] = "junk";

    ck_assert_int_eq(corepath_expand(c->pattern, strlen(c->pattern), &in, out, sizeof(out)),
                     c->kind);
    ck_assert_str_eq(out, c->path);
}
END_TEST

/* Fields that are gone (the process was reaped before its name was read) and a relative
 * pattern whose directory is not known. */
START_TEST(test_unknown_fields)
{
    struct corepath_info in = info(0);
    char out[64];

    in.comm = "";
    ck_assert_int_eq(corepath_expand("/c/%e", 5, &in, out, sizeof(out)), COREPATH_UNKNOWN);
    ck_assert_str_eq(out, "");
    in.uid = -1;
    ck_assert_int_eq(corepath_expand("/c/%u", 5, &in, out, sizeof(out)), COREPATH_UNKNOWN);
    in.cwd = "";
    ck_assert_int_eq(corepath_expand("core.%p", 7, &in, out, sizeof(out)), COREPATH_FILE);
    ck_assert_str_eq(out, "core.4242");
}
END_TEST

/* A path longer than the buffer is unknown, never a truncated name; the pattern is read only
 * as far as plen even without a NUL. */
START_TEST(test_bounds)
{
    struct corepath_info in = info(0);
    char out[12], pat[8] = {'/', 'c', '/', '%', 'p', 'X', 'X', 'X'};

    ck_assert_int_eq(corepath_expand("/core/%p/%p/%p", 14, &in, out, sizeof(out)),
                     COREPATH_UNKNOWN);
    ck_assert_str_eq(out, "");
    ck_assert_int_eq(corepath_expand(pat, 5, &in, out, sizeof(out)), COREPATH_FILE);
    ck_assert_str_eq(out, "/c/4242");
    for (size_t n = 0; n <= 5; n++)
        corepath_expand(pat, n, &in, out, sizeof(out));
}
END_TEST

static Suite *corepath_suite(void)
{
    Suite *s = suite_create("corepath");
    TCase *tc = tcase_create("expand");

    tcase_add_loop_test(tc, test_pattern, 0, (int)(sizeof(cases) / sizeof(cases[0])));
    tcase_add_test(tc, test_unknown_fields);
    tcase_add_test(tc, test_bounds);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ts_run(corepath_suite());
}
