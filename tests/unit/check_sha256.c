/* Tests for SHA-256 (src/base/sha256.c): the FIPS 180-4 / NIST example vectors, every length
 * around the padding boundary fed whole and in odd pieces, and a real file (this test's own
 * binary) against what the system's sha256sum prints, since a node checks what the head ships
 * with that tool. Single-threaded. */
#include "ranktop/base/sha256.h"
#include "tsupport.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void hex_of(const struct sha256 *in, char out[65])
{
    struct sha256 s = *in;
    unsigned char d[32];

    sha256_done(&s, d);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

START_TEST(test_vectors)
{
    static const struct {
        const char *in, *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopq"
         "rlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    char hex[65];

    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        sha256_hex(v[i].in, strlen(v[i].in), hex);
        ck_assert_str_eq(hex, v[i].hex);
    }
}
END_TEST

/* A million 'a', fed in pieces of 1000 (the NIST long vector). */
START_TEST(test_million)
{
    struct sha256 s;
    char a[1000], hex[65];

    memset(a, 'a', sizeof(a));
    sha256_init(&s);
    for (int i = 0; i < 1000; i++)
        sha256_feed(&s, a, sizeof(a));
    hex_of(&s, hex);
    ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

/* Every length 0..200 (both sides of the 55/56/64-byte padding cases), fed whole and fed in
 * pieces of 1, 7 and 63 bytes: the same digest each way. */
START_TEST(test_pieces)
{
    unsigned char data[200];
    static const size_t step[] = {1, 7, 63};

    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (unsigned char)(i * 131 + 7);
    for (size_t len = 0; len <= sizeof(data); len++) {
        char whole[65], part[65];

        sha256_hex(data, len, whole);
        for (size_t k = 0; k < 3; k++) {
            struct sha256 s;

            sha256_init(&s);
            for (size_t at = 0; at < len; at += step[k])
                sha256_feed(&s, data + at, len - at < step[k] ? len - at : step[k]);
            hex_of(&s, part);
            ck_assert_msg(!strcmp(whole, part), "len %zu step %zu", len, step[k]);
        }
    }
}
END_TEST

/* This test's own binary (hundreds of KiB of arbitrary bytes) against sha256sum. */
START_TEST(test_sha256sum)
{
    FILE *f = fopen("/proc/self/exe", "rb"), *p;
    char *buf = NULL, hex[65], want[65] = "", cmd[4200], path[4096] = "";
    size_t len = 0, cap = 0, n;

    ck_assert(f != NULL);
    do {
        if (len == cap)
            buf = realloc(buf, cap = cap ? cap * 2 : 65536);
        ck_assert(buf != NULL);
        n = fread(buf + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    fclose(f);
    ck_assert_uint_gt(len, 4096);
    sha256_hex(buf, len, hex);
    free(buf);
    /* The file by its path: under qemu-user, /proc/PID/exe of this process is qemu to any
     * other process (sha256sum), while our own reads of /proc/self/exe see the test. */
    n = (size_t)readlink("/proc/self/exe", path, sizeof(path) - 1);
    ck_assert(n > 0 && n < sizeof(path) - 1 && !strchr(path, '\''));
    path[n] = '\0';
    snprintf(cmd, sizeof(cmd), "sha256sum < '%s'", path);
    p = popen(cmd, "r");
    ck_assert(p != NULL);
    ck_assert_int_eq(fscanf(p, "%64s", want), 1);
    pclose(p);
    ck_assert_str_eq(hex, want);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sha256");
    TCase *tc = tcase_create("sha256");

    tcase_add_test(tc, test_vectors);
    tcase_add_test(tc, test_million);
    tcase_add_test(tc, test_pieces);
    tcase_add_test(tc, test_sha256sum);
    suite_add_tcase(s, tc);
    return ts_run(s);
}
