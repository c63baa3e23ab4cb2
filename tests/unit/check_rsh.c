/* Tests for remote-shell templates (collectors/remote/rsh.c): words split as POSIX sh splits
 * them (checked against the real /bin/sh on the same text), %h and %% wherever they stand, the
 * host last without %h, every malformed template refused with a message, and the remote
 * command quoted so that the real /bin/sh gives back every word byte-exact and runs nothing
 * a word holds. Random bytes never crash the parser (the sanitizer builds catch a stray
 * read). Single-threaded. */
#include "ranktop/remote/rsh.h"
#include "tsupport.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The words of v joined with '|' into out. */
static void join(char *const *v, char *out, size_t n)
{
    size_t used = 0;

    out[0] = '\0';
    for (size_t i = 0; v[i]; i++) {
        int w = snprintf(out + used, n - used, "%s%s", i ? "|" : "", v[i]);

        ck_assert(w >= 0 && (size_t)w < n - used);
        used += (size_t)w;
    }
}

/* The argv for host h from template text, joined with '|'. */
static const char *argv_of(const char *text, const char *h, const char *const *cmd, bool shell)
{
    static char out[2048];
    struct app_err err = {0};
    struct rsh_tmpl t;
    char **v;

    ck_assert_msg(rsh_tmpl_parse(text, &t, &err) == 0, "%s: %s", text, err.msg);
    v = rsh_argv(&t, h, NULL, cmd, shell);
    join(v, out, sizeof(out));
    rsh_argv_free(v);
    rsh_tmpl_fini(&t);
    return out;
}

START_TEST(test_split)
{
    ck_assert_str_eq(argv_of("ssh -T", "n1", NULL, false), "ssh|-T|n1");
    ck_assert_str_eq(argv_of("  ssh\t -o  BatchMode=yes \n", "n1", NULL, false),
                     "ssh|-o|BatchMode=yes|n1");
    /* The example of the manual: one -o argument, %% a literal %. */
    ck_assert_str_eq(argv_of("ssh -o 'ProxyCommand=ssh -W %%h:%%p bastion'", "n1", NULL, false),
                     "ssh|-o|ProxyCommand=ssh -W %h:%p bastion|n1");
    ck_assert_str_eq(argv_of("a\" b \\\" \\$ \\x\"c 'd\"e' f\\ g ''", "H", NULL, false),
                     "a b \" $ \\xc|d\"e|f g||H");
    ck_assert_str_eq(argv_of("a\\\nb", "H", NULL, false), "ab|H");
}
END_TEST

START_TEST(test_host)
{
    const char *cmd[] = {"ranktop", "agent", NULL};

    ck_assert_str_eq(argv_of("kubectl exec -i %h --", "w-0", cmd, false),
                     "kubectl|exec|-i|w-0|--|ranktop|agent");
    ck_assert_str_eq(argv_of("ssh -l me%h%%x %h.example", "n7", NULL, false),
                     "ssh|-l|men7%x|n7.example");
    ck_assert_str_eq(argv_of("ssh '%h'", "n7", NULL, false), "ssh|n7");
    ck_assert_str_eq(argv_of("ssh", "n7", cmd, true), "ssh|n7|ranktop|agent");
}
END_TEST

START_TEST(test_extra)
{
    const char *extra[] = {"-n", "ns", "--", NULL}, *cmd[] = {"r", NULL};
    struct app_err err = {0};
    struct rsh_tmpl t;
    char **v, out[256];

    ck_assert_int_eq(rsh_tmpl_parse("kubectl exec -i", &t, &err), 0);
    ck_assert(!t.has_host);
    v = rsh_argv(&t, "p", extra, cmd, false);
    join(v, out, sizeof(out));
    ck_assert_str_eq(out, "kubectl|exec|-i|p|-n|ns|--|r");
    rsh_argv_free(v);
    v = rsh_argv(&t, NULL, NULL, cmd, false); /* launchers that name hosts elsewhere */
    join(v, out, sizeof(out));
    ck_assert_str_eq(out, "kubectl|exec|-i|r");
    rsh_argv_free(v);
    rsh_tmpl_fini(&t);
    /* pdsh's exec module takes %h itself: without a host it is handed on as it was. */
    ck_assert_int_eq(rsh_tmpl_parse("pdsh -R exec -- ssh %h", &t, &err), 0);
    v = rsh_argv(&t, NULL, NULL, cmd, true);
    join(v, out, sizeof(out));
    ck_assert_str_eq(out, "pdsh|-R|exec|--|ssh|%h|r");
    rsh_argv_free(v);
    rsh_tmpl_fini(&t);
}
END_TEST

static const char *const bad[] = {
    "",       "   \t\n",  "ssh 'x", "ssh \"x", "ssh x\\", "ssh %",      "ssh %x",
    "ssh a%", "ssh \x02", "'%'",    "\"%\"",   "ssh '%h", "ssh \"\\\"", "ssh -o '%%h%'",
};

START_TEST(test_bad)
{
    struct app_err err = {0};
    struct rsh_tmpl t;

    ck_assert_int_eq(rsh_tmpl_parse(bad[_i], &t, &err), APP_E_USAGE);
    ck_assert_msg(!strncmp(err.msg, "--rsh", 5), "'%s': %s", bad[_i], err.msg);
    ck_assert_ptr_null(t.w);
    ck_assert_uint_eq(t.n, 0);
}
END_TEST

START_TEST(test_too_long)
{
    char *text = malloc(RSH_TEMPLATE_MAX + 2);
    struct app_err err = {0};
    struct rsh_tmpl t;

    memset(text, 'a', RSH_TEMPLATE_MAX + 1);
    text[RSH_TEMPLATE_MAX + 1] = '\0';
    ck_assert_int_eq(rsh_tmpl_parse(text, &t, &err), APP_E_USAGE);
    text[RSH_TEMPLATE_MAX] = '\0';
    ck_assert_int_eq(rsh_tmpl_parse(text, &t, &err), 0);
    ck_assert_uint_eq(t.n, 1);
    rsh_tmpl_fini(&t);
    free(text);
}
END_TEST

/* What the real /bin/sh makes of line: each word it sees, one per line, in out. A word that
 * ran something (echo PWNED) would add a line of its own, and the words would not match. */
static void sh_words(const char *line, char *out, size_t n)
{
    char script[4096];
    int fd[2];
    pid_t pid;
    ssize_t got;
    size_t used = 0;

    snprintf(script, sizeof(script), "printf '%%s\\n' %s", line);
    ck_assert_int_eq(pipe(fd), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        execl("/bin/sh", "sh", "-c", script, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    while (used + 1 < n && (got = read(fd[0], out + used, n - 1 - used)) > 0)
        used += (size_t)got;
    out[used] = '\0';
    close(fd[0]);
    waitpid(pid, NULL, 0);
}

static const char *const words[] = {
    "/opt/my tools/ranktop",
    "x;echo PWNED",
    "$(echo PWNED)",
    "`echo PWNED`",
    "it's",
    "a\"b",
    "back\\slash",
    "",
    "-n",
    "~root",
    "*",
    "new\nline",
    "FOO=bar",
    "%h%%",
    "tab\there",
    "'",
    "&& echo PWNED",
    "ü",
};

START_TEST(test_quote_sh)
{
    const char *w = words[_i];
    char *q = rsh_quote(w), want[512], got[512];

    snprintf(want, sizeof(want), "%s\n", w);
    sh_words(q, got, sizeof(got));
    ck_assert_msg(!strcmp(got, want), "'%s' quoted as %s gave '%s'", w, q, got);
    free(q);
}
END_TEST

/* All the words of a remote command in one line, as ssh sends it: the shell sees them all. */
START_TEST(test_quote_line)
{
    char line[2048] = "", want[2048] = "", got[2048];
    size_t n = sizeof(words) / sizeof(words[0]);
    char **v;
    struct rsh_tmpl t;
    struct app_err err = {0};
    const char *cmd[sizeof(words) / sizeof(words[0]) + 1];

    for (size_t i = 0; i < n; i++)
        cmd[i] = words[i];
    cmd[n] = NULL;
    ck_assert_int_eq(rsh_tmpl_parse("ssh", &t, &err), 0);
    v = rsh_argv(&t, "h", NULL, cmd, true);
    for (size_t i = 2; v[i]; i++) { /* after "ssh h": what sshd hands the login shell */
        strcat(line, " ");
        strcat(line, v[i]);
        strcat(want, words[i - 2]);
        strcat(want, "\n");
    }
    sh_words(line, got, sizeof(got));
    ck_assert_str_eq(got, want);
    rsh_argv_free(v);
    rsh_tmpl_fini(&t);
}
END_TEST

START_TEST(test_random)
{
    char text[64];
    struct app_err err = {0};
    unsigned seed = 7;

    for (int k = 0; k < 20000; k++) {
        size_t n = (size_t)(rand_r(&seed) % 63);
        struct rsh_tmpl t;

        for (size_t i = 0; i < n; i++) /* mostly the bytes that matter */
            text[i] = "ab %h'\"\\\t\n\x01"[rand_r(&seed) % 12];
        text[n] = '\0';
        if (rsh_tmpl_parse(text, &t, &err) == 0) {
            char **v = rsh_argv(&t, "host", NULL, NULL, false);

            for (size_t i = 0; v[i]; i++)
                ck_assert_ptr_null(strchr(v[i], RSH_HOST_MARK));
            rsh_argv_free(v);
            rsh_tmpl_fini(&t);
        }
    }
}
END_TEST

/* A remote shell's end in one line: its name, its status or signal, its last stderr lines. */
START_TEST(test_explain)
{
    struct rsh_tail t = {0};
    char out[512];

    rsh_explain(out, sizeof(out), "/usr/bin/ssh", 255, 0, &t);
    ck_assert_str_eq(out, "ssh exited with status 255");
    rsh_tail_feed(&t, "Permission denied (publickey).\r\n", 32);
    rsh_explain(out, sizeof(out), "ssh", 255, 0, &t);
    ck_assert_str_eq(out, "ssh exited with status 255: Permission denied (publickey).");
    rsh_explain(out, sizeof(out), "kubectl", 0, 9, &t);
    ck_assert_str_eq(out, "kubectl was killed by signal 9: Permission denied (publickey).");
    rsh_explain(out, sizeof(out), NULL, 1, 0, NULL);
    ck_assert_str_eq(out, "the remote shell exited with status 1");
}
END_TEST

/* The last three lines that are not blank, oldest first, scrubbed; a NUL ends no line. */
START_TEST(test_tail)
{
    static const char text[] = "one\ntwo\n\n  three\t\r\n\x1b[31mred\0x\n   \n\n";
    struct rsh_tail t = {0};
    char out[512];

    rsh_tail_feed(&t, text, sizeof(text) - 1);
    ck_assert_uint_eq(t.n, 3);
    rsh_explain(out, sizeof(out), "sh", 127, 0, &t);
    ck_assert_str_eq(out, "sh exited with status 127: two | three | ?[31mred x");
    rsh_tail_add(&t, "four", 4);
    rsh_tail_add(&t, " \t\r", 3);
    rsh_explain(out, sizeof(out), "sh", 127, 0, &t);
    ck_assert_str_eq(out, "sh exited with status 127: three | ?[31mred x | four");
    rsh_tail_join(&t, out, sizeof(out));
    ck_assert_str_eq(out, "three | ?[31mred x | four");
    rsh_tail_join(&t, out, 8);
    ck_assert_str_eq(out, "four");
    memset(&t, 0, sizeof(t));
    rsh_tail_feed(&t, "\n\n", 2);
    rsh_tail_feed(&t, "", 0);
    ck_assert_uint_eq(t.n, 0);
    rsh_tail_join(&t, out, sizeof(out));
    ck_assert_str_eq(out, "");
}
END_TEST

/* Bounds: a long line is cut on a UTF-8 boundary; a small buffer drops older lines first,
 * then cuts the last; a megabyte of stderr costs only its end. */
START_TEST(test_tail_bounds)
{
    struct rsh_tail t = {0};
    char line[400], out[64], *big;
    size_t n = 1 << 20;

    memset(line, 'a', sizeof(line));
    memcpy(line + RSH_TAIL_LINE - 2, "\xc3\xbc", 2); /* ü straddles the cut */
    rsh_tail_add(&t, line, sizeof(line));
    ck_assert_uint_eq(strlen(t.line[0]), RSH_TAIL_LINE - 2);
    rsh_tail_add(&t, "older", 5);
    rsh_tail_add(&t, "the cause", 9);
    rsh_explain(out, sizeof(out), "ssh", 255, 0, &t);
    ck_assert_str_eq(out, "ssh exited with status 255: older | the cause");
    rsh_explain(out, 40, "ssh", 255, 0, &t);
    ck_assert_str_eq(out, "ssh exited with status 255: the cause");
    rsh_explain(out, 32, "ssh", 255, 0, &t);
    ck_assert_str_eq(out, "ssh exited with status 255: the");
    big = malloc(n);
    ck_assert_ptr_nonnull(big);
    for (size_t i = 0; i < n; i++)
        big[i] = i % 100 == 99 ? '\n' : 'x';
    memset(&t, 0, sizeof(t));
    rsh_tail_feed(&t, big, n);
    ck_assert_uint_eq(t.n, 3);
    free(big);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rsh");
    TCase *tc = tcase_create("rsh");

    tcase_add_test(tc, test_split);
    tcase_add_test(tc, test_host);
    tcase_add_test(tc, test_extra);
    tcase_add_loop_test(tc, test_bad, 0, sizeof(bad) / sizeof(bad[0]));
    tcase_add_test(tc, test_too_long);
    tcase_add_loop_test(tc, test_quote_sh, 0, sizeof(words) / sizeof(words[0]));
    tcase_add_test(tc, test_quote_line);
    tcase_add_test(tc, test_random);
    tcase_add_test(tc, test_explain);
    tcase_add_test(tc, test_tail);
    tcase_add_test(tc, test_tail_bounds);
    suite_add_tcase(s, tc);
    return ts_run(s);
}
