/* Tests for the protobuf encoder (src/export/export_pb.c), the Perfetto writer
 * (export_perfetto.c) and gzip output (export_gz.c).
 *
 * The encoder is run on exact-size heap buffers, so a write one byte too far is an ASan error:
 * varints at every length boundary (0, 127, 128, 2^14, 2^32, 2^63, UINT64_MAX) both ways,
 * truncated and over-long varints refused, tags of large field numbers, negative ints as 10
 * bytes, doubles as little-endian bits, nested messages whose length needs one, two and three
 * bytes (the body moves), strings cut at a character boundary with invalid bytes replaced,
 * and a buffer that fills up: `full` set, nothing written past the end, everything after
 * dropped. A small history (two ranks, a stack that changes, a counter) is written as a
 * Perfetto trace: its top level is a sequence of Trace.packet fields that ends exactly at the
 * end of the file, and tests/tools/perfetto_check.py decodes it with protoc against
 * tests/data/perfetto/perfetto_subset.proto and checks tracks, interning and balanced slices.
 * Each format is written to NAME.gz with export_write and read back with zlib: a gzip file
 * (magic, whole member) whose content is what export_stream writes; one that cannot be
 * written whole (RLIMIT_FSIZE) keeps the previous file. RANKTOP_SRCDIR (set by
 * meson) locates the checker; python3 and protoc must be on PATH. Single-threaded. */
#include "export_pb.h"
#include "export_priv.h"

#include "ranktop/export/export.h"
#include "ranktop/model/history.h"
#include "tsupport.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

static uint8_t *exact(size_t n)
{
    uint8_t *p = malloc(n ? n : 1);

    ck_assert_ptr_nonnull(p);
    return p;
}

START_TEST(test_varint)
{
    static const struct {
        uint64_t v;
        size_t len;
    } cases[] = {
        {0, 1},           {1, 1},           {127, 1},        {128, 2},
        {300, 2},         {16383, 2},       {16384, 3},      {(1ull << 21) - 1, 3},
        {1ull << 21, 4},  {UINT32_MAX, 5},  {1ull << 35, 6}, {(1ull << 63) - 1, 9},
        {1ull << 63, 10}, {UINT64_MAX, 10},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t out[PB_VARINT_MAX];
        uint64_t back = 12345;
        size_t n = pb_varint_put(out, cases[i].v);

        ck_assert_uint_eq(n, cases[i].len);
        for (size_t k = 0; k + 1 < n; k++)
            ck_assert(out[k] & 0x80);
        ck_assert(!(out[n - 1] & 0x80));
        ck_assert_uint_eq(pb_varint_get(out, n, &back), n);
        ck_assert(back == cases[i].v);
        /* One byte short: no varint. */
        ck_assert_uint_eq(pb_varint_get(out, n - 1, &back), 0);
    }
    /* 300 = 0xAC 0x02, the wire format's own example. */
    {
        uint8_t out[PB_VARINT_MAX];

        ck_assert_uint_eq(pb_varint_put(out, 300), 2);
        ck_assert_uint_eq(out[0], 0xAC);
        ck_assert_uint_eq(out[1], 0x02);
    }
    /* Eleven continuation bytes: longer than any varint. */
    {
        uint8_t eleven[11];
        uint64_t v;

        memset(eleven, 0x80, sizeof(eleven));
        eleven[10] = 0x01;
        ck_assert_uint_eq(pb_varint_get(eleven, sizeof(eleven), &v), 0);
    }
}
END_TEST

START_TEST(test_fields)
{
    uint8_t *p = exact(64);
    struct pbuf b;
    uint64_t v;
    size_t n;

    pb_init(&b, p, 64);
    pb_uint(&b, 1, 150); /* 08 96 01 */
    ck_assert_uint_eq(b.len, 3);
    ck_assert(p[0] == 0x08 && p[1] == 0x96 && p[2] == 0x01);

    pb_init(&b, p, 64);
    pb_uint(&b, 58, 3); /* tag 58 << 3 = 464: two bytes */
    ck_assert_uint_eq(b.len, 3);
    ck_assert_uint_eq(pb_varint_get(p, 2, &v), 2);
    ck_assert_uint_eq(v, 58u << 3);

    pb_init(&b, p, 64);
    pb_int(&b, 1, -1); /* two's complement in 64 bits: ten bytes of value */
    ck_assert_uint_eq(b.len, 11);
    ck_assert_uint_eq(pb_varint_get(p + 1, 10, &v), 10);
    ck_assert(v == UINT64_MAX);

    pb_init(&b, p, 64);
    pb_double(&b, 44, 1.5); /* tag (44 << 3 | 1) = 353, then 0x3FF8000000000000 LE */
    ck_assert_uint_eq(b.len, 10);
    n = pb_varint_get(p, 2, &v);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(v, 44u << 3 | 1);
    ck_assert(p[2] == 0 && p[8] == 0xF8 && p[9] == 0x3F);

    pb_init(&b, p, 64);
    pb_bytes(&b, 2, "", 0);
    ck_assert_uint_eq(b.len, 2);
    ck_assert(p[0] == 0x12 && p[1] == 0);
    ck_assert(!b.full);
    free(p);
}
END_TEST

/* A nested message with a body of n bytes: its length is the shortest varint of n and the
 * body follows it intact. */
static void nested_case(size_t body)
{
    size_t cap = body + 16;
    uint8_t *p = exact(cap), *payload = exact(body);
    struct pbuf b;
    size_t mark, hl;
    uint64_t len;

    for (size_t i = 0; i < body; i++)
        payload[i] = (uint8_t)(i * 7 + 1);
    pb_init(&b, p, cap);
    mark = pb_begin(&b, 60); /* two-byte tag */
    /* body = one bytes field: tag (1) + length + data */
    {
        uint8_t tmp[PB_VARINT_MAX];
        size_t lenlen = pb_varint_put(tmp, body - 1 - 3);

        ck_assert_uint_le(lenlen, 3);
        pb_bytes(&b, 1, payload, body - 1 - lenlen);
    }
    pb_end(&b, mark);
    ck_assert(!b.full);
    ck_assert_uint_eq(pb_varint_get(p, b.len, &len), 2);
    ck_assert_uint_eq(len, 60u << 3 | 2);
    hl = pb_varint_get(p + 2, b.len - 2, &len);
    ck_assert_uint_ne(hl, 0);
    ck_assert_uint_eq(len, b.len - 2 - hl);
    ck_assert_uint_eq(len, body);
    {
        uint8_t tmp[PB_VARINT_MAX];

        ck_assert_uint_eq(hl, pb_varint_put(tmp, len)); /* shortest form */
    }
    ck_assert_uint_eq(p[2 + hl], 0x0A);
    free(p);
    free(payload);
}

START_TEST(test_nested)
{
    nested_case(5);
    nested_case(127);
    nested_case(128);
    nested_case(300);
    nested_case(16383);
    nested_case(16384);
    nested_case(70000);
    /* Nested twice: inner and outer lengths both right. */
    {
        uint8_t *p = exact(400);
        struct pbuf b;
        size_t outer, inner;
        uint64_t len;

        pb_init(&b, p, 400);
        outer = pb_begin(&b, 1);
        inner = pb_begin(&b, 2);
        for (int i = 0; i < 100; i++)
            pb_uint(&b, 3, 1);
        pb_end(&b, inner);
        pb_end(&b, outer);
        ck_assert(!b.full);
        ck_assert_uint_eq(pb_varint_get(p + 1, 2, &len), 2);
        ck_assert_uint_eq(len, b.len - 3);
        ck_assert_uint_eq(p[3], 0x12);
        ck_assert_uint_eq(pb_varint_get(p + 4, 2, &len), 2);
        ck_assert_uint_eq(len, 200);
        free(p);
    }
}
END_TEST

START_TEST(test_strings)
{
    uint8_t *p = exact(64);
    struct pbuf b;

    pb_init(&b, p, 64);
    pb_str(&b, 2,
           "a\xFF"
           "b",
           100); /* an invalid byte becomes U+FFFD */
    ck_assert_uint_eq(b.len, 2 + 5);
    ck_assert_uint_eq(p[1], 5);
    ck_assert(!memcmp(p + 2,
                      "a\xEF\xBF\xBD"
                      "b",
                      5));

    pb_init(&b, p, 64);
    pb_str(&b, 2, "ab\xE6\x95\xB0", 4); /* "ab数": cut before the 3-byte character */
    ck_assert_uint_eq(p[1], 2);
    ck_assert_uint_eq(b.len, 4);

    pb_init(&b, p, 64);
    pb_str(&b, 2, NULL, 10);
    ck_assert_uint_eq(b.len, 2);
    ck_assert_uint_eq(p[1], 0);
    free(p);
}
END_TEST

START_TEST(test_full)
{
    for (size_t cap = 0; cap < 24; cap++) {
        uint8_t *p = exact(cap);
        struct pbuf b;
        size_t mark;

        pb_init(&b, p, cap);
        pb_uint(&b, 1, 1);
        mark = pb_begin(&b, 2);
        pb_str(&b, 3, "hello, world", 100);
        pb_end(&b, mark);
        pb_uint(&b, 4, UINT64_MAX);
        ck_assert_uint_le(b.len, cap);
        /* 2 + (2 + 14) + 11 = 29 bytes in all: every cap here is too small. */
        ck_assert(b.full);
        free(p);
    }
    /* A body of 128 bytes fills the buffer with its 1-byte length reserved; its real length
     * takes 2 bytes, one more than there is: refused, not overrun. */
    {
        uint8_t *p = exact(130);
        uint8_t data[126];
        struct pbuf b;
        size_t mark;

        memset(data, 'x', sizeof(data));
        pb_init(&b, p, 130);
        mark = pb_begin(&b, 1);
        pb_bytes(&b, 2, data, sizeof(data)); /* body 128: tag + len(1) + 126 */
        ck_assert(!b.full);
        ck_assert_uint_eq(b.len, 130);
        pb_end(&b, mark);
        ck_assert(b.full);
        ck_assert_uint_le(b.len, 130);
        free(p);
    }
}
END_TEST

/* A small history: two ranks, each a main thread whose stack changes, one of them exits; a
 * counter per rank and a node-wide one. */
static void build(struct history *h)
{
    const struct hframe a[] = {{"main", "train.py", 10, false},
                               {"train", "train.py", 20, false},
                               {"step", "train.py", 30, false}};
    const struct hframe b[] = {{"main", "train.py", 10, false}, {"save", "io.py", 5, false}};
    struct hframe inner[3];
    uint32_t s1, s2;

    history_init(h, 1000000000000ull, 1700000000000000ll, "node01");
    for (int i = 0; i < 3; i++)
        inner[i] = a[2 - i];
    s1 = history_intern_stack(h, inner, 3);
    inner[0] = b[1];
    inner[1] = b[0];
    s2 = history_intern_stack(h, inner, 2);
    for (int r = 0; r < 2; r++) {
        struct hrank *rank = history_rank(h, 4000 + r, r, "gpu 0");
        struct hthread *t = history_thread(rank, 1, 4000 + r, "MainThread", true);

        for (int k = 0; k < 10; k++) {
            uint64_t now = h->t0 + 1000 + (uint64_t)k * 100000000ull;

            history_observe(t, k % 4 == 3 ? s2 : s1, now);
            history_counter(h, SERIES_RSS, NULL, 4000 + r, now, 100.5 + k);
        }
        if (r == 1)
            history_rank_exit(rank, h->t0 + 2000000000ull);
    }
    history_counter(h, SERIES_DEV_UTIL, "gpu0", 0, h->t0 + 5000, 87);
}

static struct export_opts opts(enum export_format fmt)
{
    struct export_opts o = {.format = fmt, .interval_ns = 100000000ull, .version = "test"};

    return o;
}

static char *stream_to_mem(const struct history *h, enum export_format fmt,
                           const char *const *unavailable, size_t *len)
{
    struct export_opts o = opts(fmt);
    struct app_err err = {0};
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);

    ck_assert_ptr_nonnull(f);
    o.unavailable = unavailable;
    ck_assert_int_eq(export_stream(h, &o, f, &err), 0);
    fclose(f);
    return buf;
}

START_TEST(test_perfetto)
{
    static const char *const unavailable[] = {"gpu", "no NVIDIA driver (libnvidia-ml.so.1)", NULL};
    struct history h;
    char dir[] = "/tmp/check_pb.XXXXXX", path[128], cmd[512];
    const char *src = getenv("RANKTOP_SRCDIR");
    size_t len, off = 0, packets = 0;
    char *buf;
    FILE *f;

    build(&h);
    buf = stream_to_mem(&h, EXPORT_PERFETTO, unavailable, &len);
    ck_assert_uint_gt(len, 0);
    /* The top level: Trace.packet fields only (tag 0x0A), ending exactly at the end. */
    while (off < len) {
        uint64_t n;
        size_t k;

        ck_assert_uint_eq((uint8_t)buf[off], 0x0A);
        k = pb_varint_get((const uint8_t *)buf + off + 1, len - off - 1, &n);
        ck_assert_uint_ne(k, 0);
        off += 1 + k + n;
        ck_assert_uint_le(off, len);
        packets++;
    }
    ck_assert_uint_gt(packets, 10);
    ck_assert_ptr_nonnull(memmem(buf, len, "MainThread", 10));
    ck_assert_ptr_nonnull(src);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/t.perfetto-trace", dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
    snprintf(cmd, sizeof(cmd),
             "python3 %s/tests/tools/perfetto_check.py %s --fn step --fn save --pid 4000 "
             "--pid 4001 --thread MainThread --counter 'rss MiB' --counter 'gpu0 util_pct' "
             "--instant 'rank 1 exited' --instant 'gpu counters unavailable: no NVIDIA driver' "
             "--min-slices 8",
             src, path);
    ck_assert_int_eq(system(cmd), 0);
    unlink(path);
    rmdir(dir);
    free(buf);
    history_fini(&h);
}
END_TEST

/* The whole gzip file at path, inflated. */
static char *gunzip_file(const char *path, size_t *len)
{
    gzFile g = gzopen(path, "rb");
    size_t cap = 1 << 16;
    char *out = malloc(cap);
    int n;

    ck_assert_ptr_nonnull(g);
    *len = 0;
    while ((n = gzread(g, out + *len, (unsigned)(cap - *len))) > 0) {
        *len += (size_t)n;
        if (*len == cap)
            out = realloc(out, cap *= 2);
    }
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(gzclose(g), Z_OK);
    return out;
}

START_TEST(test_gzip)
{
    static const enum export_format fmts[] = {EXPORT_CHROME, EXPORT_SPEEDSCOPE, EXPORT_COLLAPSED,
                                              EXPORT_PERFETTO};
    struct history h;
    char dir[] = "/tmp/check_pb.XXXXXX", path[128];

    build(&h);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/out.gz", dir);
    for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
        struct export_opts o = opts(fmts[i]);
        struct app_err err = {0};
        size_t plain_len, zlen;
        char *plain = stream_to_mem(&h, fmts[i], NULL, &plain_len), *z;
        unsigned char magic[2] = {0};
        FILE *f;

        ck_assert_int_eq(export_write(&h, &o, path, &err), 0);
        f = fopen(path, "rb");
        ck_assert_ptr_nonnull(f);
        ck_assert_uint_eq(fread(magic, 1, 2, f), 2);
        fclose(f);
        ck_assert(magic[0] == 0x1f && magic[1] == 0x8b);
        z = gunzip_file(path, &zlen);
        /* The same bytes as the plain stream, but for the Perfetto clock snapshot taken at
         * write time (same length: varints of nearby clock readings). */
        ck_assert_uint_eq(zlen, plain_len);
        if (fmts[i] != EXPORT_PERFETTO)
            ck_assert(!memcmp(z, plain, plain_len));
        free(z);
        free(plain);
    }
    unlink(path);
    ck_assert_int_eq(rmdir(dir), 0); /* no temp file left beside it */
    history_fini(&h);
}
END_TEST

/* A gzip file that cannot be written whole (RLIMIT_FSIZE: the failure shows only when the
 * stream is finished, at fclose) leaves the previous file as it was and no temp beside it. */
START_TEST(test_gzip_fail)
{
    struct history h;
    struct export_opts o = opts(EXPORT_CHROME);
    char dir[] = "/tmp/check_pb.XXXXXX", path[128], buf[64] = "";
    pid_t pid;
    FILE *f;
    int st;

    build(&h);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/out.json.gz", dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("previous export", f);
    fclose(f);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct rlimit rl = {64, 64};
        struct app_err err = {0};

        signal(SIGXFSZ, SIG_IGN);
        if (setrlimit(RLIMIT_FSIZE, &rl))
            _exit(3);
        if (export_write(&h, &o, path, &err) != APP_E_IO)
            _exit(1);
        _exit(strstr(err.msg, "File too large") ? 0 : 2);
    }
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 0);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
    fclose(f);
    ck_assert_str_eq(buf, "previous export");
    unlink(path);
    ck_assert_int_eq(rmdir(dir), 0); /* the temp file was removed */
    history_fini(&h);
}
END_TEST

START_TEST(test_format_from_name)
{
    ck_assert_int_eq(export_format_from_name("x.json"), EXPORT_CHROME);
    ck_assert_int_eq(export_format_from_name("x.json.gz"), EXPORT_CHROME);
    ck_assert_int_eq(export_format_from_name("a/x.speedscope.json.gz"), EXPORT_SPEEDSCOPE);
    ck_assert_int_eq(export_format_from_name("x.perfetto-trace"), EXPORT_PERFETTO);
    ck_assert_int_eq(export_format_from_name("x.pftrace.gz"), EXPORT_PERFETTO);
    ck_assert_int_eq(export_format_from_name("x.folded"), EXPORT_COLLAPSED);
    ck_assert_int_eq(export_format_from_name("x.svg"), EXPORT_FLAMEGRAPH);
    ck_assert_int_eq(export_format_from_name("x.gz"), -1);
    ck_assert_int_eq(export_format_from_name("trace"), -1);
    ck_assert_int_eq(export_format_from_name(""), -1);
    ck_assert_int_eq(export_format_from_name(NULL), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pb");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_varint);
    tcase_add_test(tc, test_fields);
    tcase_add_test(tc, test_nested);
    tcase_add_test(tc, test_strings);
    tcase_add_test(tc, test_full);
    tcase_add_test(tc, test_perfetto);
    tcase_add_test(tc, test_gzip);
    tcase_add_test(tc, test_gzip_fail);
    tcase_add_test(tc, test_format_from_name);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
