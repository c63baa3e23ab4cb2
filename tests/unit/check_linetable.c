/* Tests for pyline_lookup (collectors/python/pylinetable.c).
 *
 * Fixtures in tests/data/linetables/py3X.txt hold real tables and the lines CPython itself
 * reports for every bytecode offset (written by tests/py/gen_linetables.py; the format is
 * described there). Each table is copied into an allocation of exactly its length so that
 * the sanitizer builds catch any read past the end. One Check test per minor version runs a
 * fixture; the hand-written cases cover truncated, zeroed, 0xff and oversized-varint tables.
 * Single-threaded; RANKTOP_SRCDIR (set by meson) locates the fixtures. */
#include "pylinetable.h"
#include "tsupport.h"

#include <check.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE_MIN_MINOR 8
#define FIXTURE_MAX_MINOR 13 /* 3.8 .. 3.13 must all be present */
#define MAX_REPORTED 10      /* mismatches printed before the count */

/* One code object of a fixture, with the running totals for the file. */
struct fixture {
    int minor;
    char name[128];
    int firstlineno;
    long code_len;
    size_t table_len;
    uint8_t *table; /* exactly table_len bytes */
    long *off;      /* recorded offsets of this code object and their lines */
    int *want;
    size_t n, cap;
    long n_code, n_offsets, n_noline, n_bad;
};

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Exact-size copy so ASan flags over-reads; malloc(0) is a valid zero-byte object there. */
static uint8_t *dup_exact(const uint8_t *src, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);

    ck_assert_ptr_nonnull(p);
    if (n)
        memcpy(p, src, n);
    return p;
}

static uint8_t *hex_decode(const char *hex, size_t n)
{
    uint8_t *out = malloc(n ? n : 1);

    ck_assert_ptr_nonnull(out);
    if (strcmp(hex, "-") == 0) {
        ck_assert_uint_eq(n, 0);
        return out;
    }
    ck_assert_uint_eq(strlen(hex), 2 * n);
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

        ck_assert_msg(hi >= 0 && lo >= 0, "bad hex digit in table");
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return out;
}

static void check_offset(struct fixture *f, long off, int want)
{
    int got = pyline_lookup(f->minor, f->table, f->table_len, f->firstlineno, off);

    f->n_offsets++;
    f->n_noline += want == 0;
    if (got != want && f->n_bad++ < MAX_REPORTED)
        fprintf(stderr, "py3%d %s (first %d): offset %ld: got %d want %d\n", f->minor, f->name,
                f->firstlineno, off, got, want);
    /* Instructions are 2-byte aligned, so the odd byte belongs to the same unit. */
    got = pyline_lookup(f->minor, f->table, f->table_len, f->firstlineno, off + 1);
    if (got != want && f->n_bad++ < MAX_REPORTED)
        fprintf(stderr, "py3%d %s: odd offset %ld: got %d want %d\n", f->minor, f->name, off + 1,
                got, want);
}

static void record_offset(struct fixture *f, long off, int want)
{
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 256;
        f->off = realloc(f->off, f->cap * sizeof(*f->off));
        f->want = realloc(f->want, f->cap * sizeof(*f->want));
        ck_assert(f->off != NULL && f->want != NULL);
    }
    f->off[f->n] = off;
    f->want[f->n++] = want;
}

/* A prefix of a real table decodes every entry it holds completely and nothing else: for
 * 3.10+ each offset gives the full table's answer or 0 (lnotab has no end to check). */
static void check_prefix(const struct fixture *f, size_t len)
{
    uint8_t *t = dup_exact(f->table, len);

    for (size_t i = 0; i < f->n; i++) {
        int got = pyline_lookup(f->minor, t, len, f->firstlineno, f->off[i]);

        if (f->minor >= 10)
            ck_assert_msg(got == f->want[i] || got == 0, "py3%d %s cut at %zu: offset %ld: %d",
                          f->minor, f->name, len, f->off[i], got);
        else
            ck_assert_int_ge(got, 0);
    }
    free(t);
}

/* Runs once per code object: recorded offsets, cut tables, past-the-end offsets and the
 * not-started frame. */
static void check_code_end(struct fixture *f)
{
    size_t len = f->table_len, cuts[] = {0, 1, len / 4, len / 2, len - 1};
    int first = f->firstlineno;

    for (size_t i = 0; i < f->n; i++)
        check_offset(f, f->off[i], f->want[i]);
    ck_assert_msg(f->n_bad == 0, "py3%d: %ld mismatches up to %s (first ones on stderr)", f->minor,
                  f->n_bad, f->name);
    for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]) && len > 0; k++)
        check_prefix(f, cuts[k]);
    ck_assert_int_eq(pyline_lookup(f->minor, f->table, f->table_len, first, -1), first);
    if (f->minor >= 10) {
        ck_assert_int_eq(pyline_lookup(f->minor, f->table, f->table_len, first, f->code_len), 0);
        ck_assert_int_eq(pyline_lookup(f->minor, f->table, f->table_len, first, LONG_MAX), 0);
    }
    free(f->table);
    f->table = NULL;
    f->n = 0;
    f->n_code++;
}

static void parse_code_line(struct fixture *f, const char *line)
{
    static char hex[1 << 20];
    int n = sscanf(line, "code %127s %d %ld %zu %1048575s", f->name, &f->firstlineno, &f->code_len,
                   &f->table_len, hex);

    ck_assert_msg(n == 5, "bad code line: %s", line);
    f->table = hex_decode(hex, f->table_len);
}

static void parse_line(struct fixture *f, const char *line)
{
    long off;
    int want, major, minor, micro;

    if (line[0] == '#' || line[0] == '\n')
        return;
    if (sscanf(line, "python %d %d %d", &major, &minor, &micro) == 3) {
        ck_assert_int_eq(major, 3);
        ck_assert_int_eq(minor, f->minor);
    } else if (strncmp(line, "code ", 5) == 0) {
        ck_assert_ptr_null(f->table);
        parse_code_line(f, line);
    } else if (strncmp(line, "end", 3) == 0) {
        ck_assert_ptr_nonnull(f->table);
        check_code_end(f);
    } else {
        ck_assert_msg(sscanf(line, "%ld %d", &off, &want) == 2, "bad line: %s", line);
        ck_assert_ptr_nonnull(f->table);
        record_offset(f, off, want);
    }
}

static void run_fixture(int minor)
{
    struct fixture f = {.minor = minor};
    const char *src = getenv("RANKTOP_SRCDIR");
    char path[4096], *line = NULL;
    size_t cap = 0;
    FILE *fp;

    ck_assert_msg(src != NULL, "RANKTOP_SRCDIR is not set");
    snprintf(path, sizeof(path), "%s/tests/data/linetables/py3%d.txt", src, minor);
    fp = fopen(path, "r");
    ck_assert_msg(fp != NULL, "missing fixture %s", path);
    while (getline(&line, &cap, fp) > 0)
        parse_line(&f, line);
    free(line);
    free(f.off);
    free(f.want);
    fclose(fp);
    ck_assert_ptr_null(f.table);
    printf("py3%d: %ld code objects, %ld offsets (%ld with no line), %ld mismatches\n", minor,
           f.n_code, f.n_offsets, f.n_noline, f.n_bad);
    ck_assert_int_gt(f.n_code, 0);
    ck_assert_int_eq(f.n_bad, 0);
}

/* _i is the minor version: one test per fixture file that must exist. */
START_TEST(test_fixture)
{
    run_fixture(_i);
}
END_TEST

/* Fixtures for versions newer than FIXTURE_MAX_MINOR run when someone adds them. */
START_TEST(test_fixture_extra)
{
    const char *src = getenv("RANKTOP_SRCDIR");
    char path[4096];
    struct dirent *de;
    DIR *d;
    int minor;

    ck_assert_msg(src != NULL, "RANKTOP_SRCDIR is not set");
    snprintf(path, sizeof(path), "%s/tests/data/linetables", src);
    d = opendir(path);
    ck_assert_msg(d != NULL, "missing %s", path);
    while ((de = readdir(d)) != NULL)
        if (sscanf(de->d_name, "py3%d.txt", &minor) == 1 && minor > FIXTURE_MAX_MINOR)
            run_fixture(minor);
    closedir(d);
}
END_TEST

static int lookup(int minor, const uint8_t *src, size_t n, int first, long off)
{
    uint8_t *t = dup_exact(src, n);
    int line = pyline_lookup(minor, t, n, first, off);

    free(t);
    return line;
}

START_TEST(test_negative_offset)
{
    static const uint8_t t[] = {0x80, 0x00};

    for (int minor = 8; minor <= 14; minor++) {
        ck_assert_int_eq(lookup(minor, t, sizeof(t), 42, -1), 42);
        ck_assert_int_eq(lookup(minor, t, sizeof(t), 42, LONG_MIN), 42);
        ck_assert_int_eq(pyline_lookup(minor, NULL, 0, 7, -2), 7);
    }
    ck_assert_int_eq(lookup(7, t, sizeof(t), 42, 0), 0);
}
END_TEST

START_TEST(test_lnotab)
{
    static const uint8_t t[] = {2, 1, 4, 2, 0, 0xff};

    ck_assert_int_eq(lookup(8, t, sizeof(t), 10, 0), 10);
    ck_assert_int_eq(lookup(8, t, sizeof(t), 10, 2), 11);
    ck_assert_int_eq(lookup(8, t, sizeof(t), 10, 5), 11);
    ck_assert_int_eq(lookup(9, t, sizeof(t), 10, 6), 12);
    /* co_lnotab has no end: the last line covers every later offset. */
    ck_assert_int_eq(lookup(9, t, sizeof(t), 10, LONG_MAX), 12);
    ck_assert_int_eq(pyline_lookup(8, NULL, 0, 10, 100), 10);
    /* Truncated mid-pair: fine before the cut, 0 once the cut pair applies. */
    ck_assert_int_eq(lookup(8, t, 3, 10, 5), 11);
    ck_assert_int_eq(lookup(8, t, 3, 10, 6), 0);
}
END_TEST

START_TEST(test_lnotab_garbage)
{
    uint8_t t[256];

    memset(t, 0, sizeof(t));
    ck_assert_int_eq(lookup(8, t, sizeof(t), 10, 1000), 10);
    memset(t, 0xff, sizeof(t));
    ck_assert_int_eq(lookup(8, t, sizeof(t), 1000, 0), 1000);
    ck_assert_int_eq(lookup(8, t, sizeof(t), 1000, 255 * 10), 990);
    /* Lines at or below zero are "no line". */
    ck_assert_int_eq(lookup(8, t, sizeof(t), 1, 255), 0);
    ck_assert_int_eq(lookup(8, t, sizeof(t), 1, LONG_MAX), 0);
    t[0] = 0;
    t[1] = 0x7f;
    ck_assert_int_eq(lookup(8, t, 2, INT_MAX, 0), 0);
    t[1] = 0x80;
    ck_assert_int_eq(lookup(8, t, 2, INT_MIN + 10, 0), 0);
}
END_TEST

START_TEST(test_linetable310)
{
    /* [0,4) +1, [4,6) no line, [6,12) +2: the -128 entry still advances the address. */
    static const uint8_t t[] = {4, 1, 2, 0x80, 6, 2};

    ck_assert_int_eq(lookup(10, t, sizeof(t), 10, 0), 11);
    ck_assert_int_eq(lookup(10, t, sizeof(t), 10, 3), 11);
    ck_assert_int_eq(lookup(10, t, sizeof(t), 10, 4), 0);
    ck_assert_int_eq(lookup(10, t, sizeof(t), 10, 6), 13);
    ck_assert_int_eq(lookup(10, t, sizeof(t), 10, 11), 13);
    ck_assert_int_eq(lookup(10, t, sizeof(t), 10, 12), 0);
    ck_assert_int_eq(lookup(10, t, sizeof(t), 10, LONG_MAX), 0);
    /* Truncated: the cut pair is ignored. */
    ck_assert_int_eq(lookup(10, t, 3, 10, 0), 11);
    ck_assert_int_eq(lookup(10, t, 3, 10, 4), 0);
    ck_assert_int_eq(lookup(10, t, 0, 10, 0), 0);
}
END_TEST

START_TEST(test_linetable310_garbage)
{
    static const uint8_t big[] = {0, 127, 2, 0};
    uint8_t t[256];

    memset(t, 0, sizeof(t));
    ck_assert_int_eq(lookup(10, t, sizeof(t), 10, 0), 0);
    memset(t, 0xff, sizeof(t));
    /* Pairs (255, -1): pair k covers [255k, 255k + 255) with line first - k - 1. */
    ck_assert_int_eq(lookup(10, t, sizeof(t), 5, 0), 4);
    ck_assert_int_eq(lookup(10, t, sizeof(t), 5, 255 * 3), 1);
    ck_assert_int_eq(lookup(10, t, sizeof(t), 5, 255 * 4), 0);
    ck_assert_int_eq(lookup(10, t, sizeof(t), 5, 255 * 128), 0);
    ck_assert_int_eq(lookup(10, big, sizeof(big), INT_MAX - 100, 0), 0);
}
END_TEST

/* Every form once, firstlineno 100:
 * [0,2) short 100 | [2,6) one-line +1 101 | [6,8) no-column +3 104 | [8,10) long -2 102 |
 * [10,16) none | [16,18) one-line +0 102 (the none entry left the line alone). */
static const uint8_t loc_all[] = {
    0x80, 0x05, 0xd9, 0x02, 0x05, 0xe8, 0x06, 0xf0, 0x05, 0x00, 0x01, 0x04, 0xfa, 0xd0, 0x00, 0x01,
};

START_TEST(test_locations)
{
    static const long off[] = {0, 1, 2, 5, 6, 8, 9, 10, 15, 16, 17, 18, LONG_MAX};
    static const int want[] = {100, 100, 101, 101, 104, 102, 102, 0, 0, 102, 102, 0, 0};

    for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++)
        for (int minor = 11; minor <= 14; minor++)
            ck_assert_int_eq(lookup(minor, loc_all, sizeof(loc_all), 100, off[i]), want[i]);
    /* Cut inside the long form: entries before it still resolve. */
    ck_assert_int_eq(lookup(11, loc_all, 10, 100, 6), 104);
    ck_assert_int_eq(lookup(11, loc_all, 10, 100, 8), 0);
    ck_assert_int_eq(lookup(11, loc_all, 1, 100, 0), 0);
    ck_assert_int_eq(pyline_lookup(11, NULL, 0, 100, 0), 0);
}
END_TEST

START_TEST(test_locations_garbage)
{
    static const uint8_t zero_first[] = {0x00, 0x80, 0x05};
    static const uint8_t zero_later[] = {0x80, 0x05, 0x00, 0x80, 0x05};
    static const uint8_t high_column[] = {0x80, 0x85};
    uint8_t t[256];

    ck_assert_int_eq(lookup(11, zero_first, sizeof(zero_first), 100, 0), 0);
    ck_assert_int_eq(lookup(11, zero_later, sizeof(zero_later), 100, 0), 100);
    ck_assert_int_eq(lookup(11, zero_later, sizeof(zero_later), 100, 2), 0);
    ck_assert_int_eq(lookup(12, high_column, sizeof(high_column), 100, 0), 0);
    memset(t, 0, sizeof(t));
    ck_assert_int_eq(lookup(12, t, sizeof(t), 100, 0), 0);
    /* 0xff is "no location, 8 units": no line anywhere, and nothing past the table. */
    memset(t, 0xff, sizeof(t));
    for (long off = 0; off < 256 * 16 + 64; off += 7)
        ck_assert_int_eq(lookup(13, t, sizeof(t), 100, off), 0);
}
END_TEST

START_TEST(test_locations_varints)
{
    static const uint8_t cut[] = {0xe8, 0x46};
    static const uint8_t cut_long[] = {0xf0, 0x02, 0x00, 0x41};
    static const uint8_t six_groups[] = {0xe8, 0x7e, 0x7f, 0x7f, 0x7f, 0x7f, 0x3f};
    /* Two no-column entries of +2^30 each (svarint 2^31 = groups 0,0,0,0,0,2). */
    static const uint8_t climb[] = {0xe8, 0x40, 0x40, 0x40, 0x40, 0x40, 0x02,
                                    0xe8, 0x40, 0x40, 0x40, 0x40, 0x40, 0x02};
    uint8_t t[64];

    ck_assert_int_eq(lookup(11, cut, sizeof(cut), 100, 0), 0);
    ck_assert_int_eq(lookup(11, cut, 1, 100, 0), 0);
    ck_assert_int_eq(lookup(12, cut_long, sizeof(cut_long), 100, 0), 0);
    ck_assert_int_eq(lookup(13, six_groups, sizeof(six_groups), 100, 0), 0);
    ck_assert_int_eq(lookup(13, climb, sizeof(climb), 1, 0), (1 << 30) + 1);
    ck_assert_int_eq(lookup(13, climb, sizeof(climb), 1, 2), 0);
    /* A varint that never ends. */
    memset(t, 0x7f, sizeof(t));
    t[0] = 0xe8;
    ck_assert_int_eq(lookup(11, t, sizeof(t), 100, 0), 0);
    t[sizeof(t) - 1] = 0x00;
    ck_assert_int_eq(lookup(11, t, sizeof(t), 100, 0), 0);
}
END_TEST

static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Random tables: no crash, no sanitizer report, results in range. */
START_TEST(test_random_tables)
{
    uint32_t seed = 12345;
    uint8_t buf[96];

    for (int round = 0; round < 1000; round++) {
        size_t n = lcg(&seed) % sizeof(buf);
        int first = 1 + (int)(lcg(&seed) % 1000);
        uint8_t *t;

        for (size_t i = 0; i < n; i++)
            buf[i] = (uint8_t)lcg(&seed);
        if (round % 3 == 0)
            for (size_t i = 0; i < n; i++)
                buf[i] |= 0x80; /* mostly entry starts for the 3.11+ decoder */
        t = dup_exact(buf, n);
        for (int minor = 8; minor <= 13; minor++)
            for (long off = 0; off < (long)n * 20; off += 5)
                ck_assert_int_ge(pyline_lookup(minor, t, n, first, off), 0);
        free(t);
    }
}
END_TEST

static Suite *linetable_suite(void)
{
    Suite *s = suite_create("linetable");
    TCase *fix = tcase_create("fixtures");
    TCase *hand = tcase_create("hand");

    tcase_add_loop_test(fix, test_fixture, FIXTURE_MIN_MINOR, FIXTURE_MAX_MINOR + 1);
    tcase_add_test(fix, test_fixture_extra);
    tcase_add_test(hand, test_negative_offset);
    tcase_add_test(hand, test_lnotab);
    tcase_add_test(hand, test_lnotab_garbage);
    tcase_add_test(hand, test_linetable310);
    tcase_add_test(hand, test_linetable310_garbage);
    tcase_add_test(hand, test_locations);
    tcase_add_test(hand, test_locations_garbage);
    tcase_add_test(hand, test_locations_varints);
    tcase_add_test(hand, test_random_tables);
    suite_add_tcase(s, fix);
    suite_add_tcase(s, hand);
    return s;
}

int main(void)
{
    return ts_run(linetable_suite());
}
