/* Tests for --ship's pieces (collectors/remote/ship.c): the request line's parser refuses
 * anything but a plain architecture name; the script holds nothing a login shell of another
 * kind would read differently (no newline, backslash or single quote); the cache picks the
 * head's own binary for its architecture, this version's file from a directory for another,
 * and names the directories it searched when there is none. The script itself runs under the
 * real /bin/sh on a prepared stdin: a good stream runs the shipped program (with its
 * arguments, RANKTOP_SHIPPED set) and leaves no directory; a flipped byte, a short stream, a
 * binary for another architecture and "none" each fail with exit 125 and one clear line.
 * Single-threaded. */
#include "ranktop/base/sha256.h"
#include "ranktop/remote/ship.h"
#include "tsupport.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

START_TEST(test_need)
{
    static const char *const bad[] = {
        "",
        "ranktop-ship need ",
        "ranktop-ship need x86 64",
        "ranktop-ship need $(id)",
        "ranktop-ship need a;b",
        "ranktop-ship needx86_64",
        "hello",
        "ranktop-ship need aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
    char arch[SHIP_ARCH_MAX];

    ck_assert(ship_need("ranktop-ship need x86_64", 24, arch));
    ck_assert_str_eq(arch, "x86_64");
    ck_assert(ship_need("ranktop-ship need aarch64\r", 26, arch));
    ck_assert_str_eq(arch, "aarch64");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(!ship_need(bad[i], strlen(bad[i]), arch), "%s", bad[i]);
}
END_TEST

START_TEST(test_cmd)
{
    const char *const cmd[] = {"ranktop", "agent", "--rate", "10", NULL};
    const char **v = ship_cmd(cmd);

    ck_assert_str_eq(v[0], "sh");
    ck_assert_str_eq(v[1], "-c");
    ck_assert_str_eq(v[3], "sh");
    ck_assert_str_eq(v[4], "agent");
    ck_assert_str_eq(v[6], "10");
    ck_assert_ptr_null(v[7]);
    ck_assert(!strpbrk(v[2], "'\\\n"));
    free(v);
}
END_TEST

static char dir[64];

static void make_file(const char *name, const char *text)
{
    char path[256];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    ck_assert(f != NULL);
    fputs(text, f);
    fclose(f);
    chmod(path, 0755);
}

static void dir_setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/check_ship.XXXXXX");
    ck_assert(mkdtemp(dir) != NULL);
}

static void dir_teardown(void)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_cache)
{
    const char *const dirs[] = {dir};
    struct ship_cache c;
    const struct ship_bin *b;
    struct utsname u;
    char want[65];

    make_file("ranktop-0.1.0-linux-riscv64", "old");
    make_file("ranktop-9.9.9-linux-riscv64", "this version");
    make_file("ranktop-0.1.0-linux-mips", "only one");
    make_file("ranktop-9.9.9-3-gabc-linux-arm", "between tags");
    make_file("ranktop-zzz-linux-arm", "another version");
    make_file("ranktop-9.9.9-linux-arm.sig", "not a binary");
    ship_cache_init(&c, "9.9.9", dirs, 1);
    ck_assert_int_eq(uname(&u), 0);
    b = ship_cache_get(&c, u.machine); /* the head's own */
    ck_assert_ptr_nonnull(b->data);
    ck_assert_uint_gt(b->len, 1000);
    b = ship_cache_get(&c, "riscv64");
    ck_assert_str_eq(b->data, "this version");
    sha256_hex("this version", 12, want);
    ck_assert(strstr(b->header, want) != NULL);
    ck_assert(!strncmp(b->header, "12 ", 3));
    ck_assert_ptr_eq(ship_cache_get(&c, "riscv64"), b); /* loaded once */
    ck_assert_str_eq(ship_cache_get(&c, "mips")->data, "only one");
    ck_assert_str_eq(ship_cache_get(&c, "arm")->data, "between tags");
    b = ship_cache_get(&c, "s390x");
    ck_assert_ptr_null(b->data);
    ck_assert_str_eq(b->header, "0 - s390x\n");
    ck_assert(strstr(b->why, "no ranktop for s390x") && strstr(b->why, dir));
    ship_cache_fini(&c);
}
END_TEST

/* Runs the script under /bin/sh with stdin from a file holding header + body (the bytes the
 * head would send) and the arguments "a b"; returns the exit status, stdout and stderr. */
static int run_script(const char *header, const char *body, size_t blen, char *out, char *err)
{
    const char *const cmd[] = {"ranktop", "a b", "c", NULL};
    const char **v = ship_cmd(cmd);
    char in[128], o[128], e[128];
    FILE *f;
    pid_t pid;
    int st;

    snprintf(in, sizeof(in), "%s/in", dir);
    snprintf(o, sizeof(o), "%s/out", dir);
    snprintf(e, sizeof(e), "%s/err", dir);
    f = fopen(in, "w");
    fputs(header, f);
    fwrite(body, 1, blen, f);
    fclose(f);
    pid = fork();
    if (pid == 0) {
        setenv("TMPDIR", dir, 1);
        if (!freopen(in, "r", stdin) || !freopen(o, "w", stdout) || !freopen(e, "w", stderr))
            _exit(99);
        execv("/bin/sh", (char *const *)v);
        _exit(98);
    }
    waitpid(pid, &st, 0);
    free(v);
    f = fopen(o, "r");
    out[fread(out, 1, 511, f)] = '\0';
    fclose(f);
    f = fopen(e, "r");
    err[fread(err, 1, 511, f)] = '\0';
    fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Entries of dir named ranktop.*: what the script left. */
static int leftovers(void)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;

    while ((de = readdir(d)))
        n += !strncmp(de->d_name, "ranktop.", 8);
    closedir(d);
    return n;
}

START_TEST(test_script)
{
    /* The "binary": a script that shows its arguments and that it was told to clean up. */
    static const char prog[] =
        "#!/bin/sh\necho \"ran [$1] [$2] shipped=${RANKTOP_SHIPPED:+yes}\"\n";
    char bad[sizeof(prog)], header[160], out[512], err[512], sum[65];
    char machine[64] = "";
    FILE *p = popen("uname -m", "r");

    /* The architecture the script's own uname -m says (under qemu-user this test is aarch64,
     * the shell the script runs in is the host's). */
    ck_assert(p != NULL && fscanf(p, "%63s", machine) == 1);
    pclose(p);
    sha256_hex(prog, strlen(prog), sum);
    snprintf(header, sizeof(header), "%zu %s %s\n", strlen(prog), sum, machine);
    ck_assert_int_eq(run_script(header, prog, strlen(prog), out, err), 0);
    ck_assert_msg(strstr(out, "ranktop-ship need ") == out, "%s", out);
    ck_assert_msg(strstr(out, "\nran [a b] [c] shipped=yes\n") != NULL, "%s / %s", out, err);
    ck_assert_int_eq(leftovers(), 0);

    memcpy(bad, prog, sizeof(prog));
    bad[20] ^= 0x20;
    ck_assert_int_eq(run_script(header, bad, strlen(prog), out, err), SHIP_EXIT);
    ck_assert_msg(strstr(err, "ranktop-ship: not run: SHA-256 mismatch") && !strstr(out, "ran ["),
                  "%s", err);
    ck_assert_int_eq(leftovers(), 0);

    ck_assert_int_eq(run_script(header, prog, 10, out, err), SHIP_EXIT);
    ck_assert_msg(strstr(err, "got 10 of") != NULL, "%s", err);

    snprintf(header, sizeof(header), "%zu %s not%s\n", strlen(prog), sum, machine);
    ck_assert_int_eq(run_script(header, prog, strlen(prog), out, err), SHIP_EXIT);
    ck_assert_msg(strstr(err, "the head sent a binary for not") != NULL, "%s", err);

    snprintf(header, sizeof(header), "0 - %s\n", machine);
    ck_assert_int_eq(run_script(header, "", 0, out, err), SHIP_EXIT);
    ck_assert_msg(strstr(err, "the head has no ranktop for") != NULL, "%s", err);
    ck_assert_int_eq(run_script("", "", 0, out, err), SHIP_EXIT);
    ck_assert_msg(strstr(err, "the head sent no binary") != NULL, "%s", err);
    ck_assert_int_eq(leftovers(), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ship");
    TCase *tc = tcase_create("ship");

    tcase_add_checked_fixture(tc, dir_setup, dir_teardown);
    tcase_add_test(tc, test_need);
    tcase_add_test(tc, test_cmd);
    tcase_add_test(tc, test_cache);
    tcase_add_test(tc, test_script);
    suite_add_tcase(s, tc);
    return ts_run(s);
}
