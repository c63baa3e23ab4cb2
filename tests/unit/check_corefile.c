/* Tests for the core reader (collectors/proc/corefile.c) on a small core made in memory
 * (core_synth.h): its threads, process, signal and mapped file are read; its memory image
 * reads the dumped pages from the core and the page the core left out from the mapped file,
 * across the seam; a mapped file whose first page differs from the core's copy is refused and
 * said, and --lib-search's folder is looked in first. Then the fuzz-style part: the core cut
 * at every length is refused with a message (never a crash, never accepted), and thousands of
 * cores with random bytes changed in their headers and notes are parsed, opened and read
 * without a crash (run under ASan/UBSan in CI's sanitizer build). */
#include "ranktop/proc/corefile.h"
#include "core_synth.h"
#include "tsupport.h"

#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64], mapped[128], corepath[128];
static uint8_t core[SYN_SIZE];
static size_t notes_end;

static void write_file(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");

    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* A folder with the mapped file (its bytes syn_file_byte, two pages) and the core. */
static void setup(void)
{
    uint8_t file[2 * SYN_PAGE];

    /* In memory where there is a tmpfs: thousands of small files written on a busy disk take
     * seconds of waiting. */
    snprintf(dir, sizeof(dir), "%s/check_corefile.XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(mapped, sizeof(mapped), "%s/prog", dir);
    snprintf(corepath, sizeof(corepath), "%s/core", dir);
    for (size_t i = 0; i < sizeof(file); i++)
        file[i] = syn_file_byte(i);
    write_file(mapped, file, sizeof(file));
    notes_end = syn_core(core, mapped);
    write_file(corepath, core, sizeof(core));
}

static void teardown(void)
{
    char cmd[PATH_MAX + 16];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_whole)
{
    struct corefile *c;
    struct app_err err = {0};
    struct rmem *m;
    uint8_t buf[SYN_PAGE];

    ck_assert_msg(corefile_open(corepath, NULL, &c, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(c->info.nthreads, 2);
    ck_assert_int_eq(c->info.threads[0].tid, 100);
    ck_assert_int_eq(c->info.threads[1].tid, 101);
    ck_assert_int_eq(c->info.pid, 100);
    ck_assert_int_eq(c->info.signo, 11);
    ck_assert_str_eq(c->info.psargs, "prog --x");
    ck_assert_uint_eq(c->info.nmaps, 1);
    ck_assert_int_eq(c->exe_map, 0);
    ck_assert_str_eq(c->map_local[0], mapped);
    ck_assert_ptr_null(c->note);
    m = corefile_mem(c);
    ck_assert_int_eq(rmem_read(m, SYN_DATA, buf, SYN_PAGE), 0);
    for (size_t i = 0; i < SYN_PAGE; i++)
        ck_assert_uint_eq(buf[i], syn_data_byte(i));
    /* Across the seam: the core's copy of the first page, then the file's second page. */
    ck_assert_int_eq(rmem_read(m, SYN_TEXT + 4000, buf, 200), 0);
    for (size_t i = 0; i < 200; i++)
        ck_assert_uint_eq(buf[i], syn_file_byte(4000 + i));
    ck_assert_int_eq(rmem_read(m, SYN_TEXT + 2 * SYN_PAGE - 2, buf, 4), APP_E_STALE);
    ck_assert_int_eq(rmem_read(m, SYN_DATA + SYN_PAGE, buf, 1), APP_E_STALE);
    rmem_free(m);
    corefile_free(c);
}
END_TEST

START_TEST(test_other_build)
{
    struct corefile *c;
    struct app_err err = {0};
    struct core_opts o = {NULL, NULL};
    char libs[128], moved[160];
    uint8_t file[2 * SYN_PAGE];

    for (size_t i = 0; i < sizeof(file); i++)
        file[i] = syn_file_byte(i);
    snprintf(libs, sizeof(libs), "%s/libs", dir);
    ck_assert_int_eq(mkdir(libs, 0755), 0);
    snprintf(moved, sizeof(moved), "%s/prog", libs);
    write_file(moved, file, sizeof(file)); /* the right file, in the search folder */
    file[10] ^= 1;
    write_file(mapped, file, sizeof(file)); /* another build at the recorded path */
    ck_assert_msg(corefile_open(corepath, &o, &c, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(c->map_fd[0], -1);
    ck_assert_ptr_nonnull(c->note);
    ck_assert_msg(strstr(c->note, "is not the file the core mapped"), "%s", c->note);
    corefile_free(c);
    o.lib_search = libs;
    ck_assert_msg(corefile_open(corepath, &o, &c, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(c->map_local[0], moved);
    corefile_free(c);
    o.lib_search = NULL;
    o.exe = moved; /* --exe names the program's file */
    ck_assert_msg(corefile_open(corepath, &o, &c, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(c->map_local[0], moved);
    corefile_free(c);
}
END_TEST

START_TEST(test_truncated)
{
    int fd = open(corepath, O_WRONLY);

    ck_assert_int_ge(fd, 0);
    /* Every length through the notes, then every 61st: the segments are checked as a whole. */
    for (size_t len = SYN_SIZE; len-- > 0;) {
        struct corefile *c = NULL;
        struct app_err err = {0};
        struct core_info ci;
        int rc;

        if (len > notes_end + 8 && len % 61)
            continue;
        ck_assert_int_eq(ftruncate(fd, (off_t)len), 0);
        rc = corefile_open(corepath, NULL, &c, &err);
        ck_assert_msg(rc < 0 && err.msg[0], "a core cut at %zu bytes: %d '%s'", len, rc, err.msg);
        ck_assert_ptr_null(c);
        rc = core_parse_head(core, len, len, &ci, &err); /* the pure parser alone */
        ck_assert_msg(rc < 0 || len >= notes_end, "head cut at %zu accepted", len);
        core_info_fini(&ci);
    }
    close(fd);
}
END_TEST

/* Opens a mutated core and reads its memory at a few places. */
static void open_and_read(const uint8_t *b)
{
    struct corefile *c = NULL;
    struct app_err err = {0};
    uint8_t buf[64];
    int rc;

    write_file(corepath, b, SYN_SIZE);
    rc = corefile_open(corepath, NULL, &c, &err);
    if (rc < 0) {
        ck_assert_msg(err.msg[0], "status %d without a message", rc);
        return;
    }
    for (size_t i = 0; i < c->info.nsegs; i++) {
        struct rmem *m = corefile_mem(c);

        (void)rmem_read(m, c->info.segs[i].vaddr, buf, sizeof(buf));
        (void)rmem_read_some(m, c->info.segs[i].vaddr + c->info.segs[i].memsz - 8, buf,
                             sizeof(buf));
        rmem_free(m);
    }
    corefile_free(c);
}

START_TEST(test_corrupted)
{
    static uint8_t b[SYN_SIZE];
    unsigned seed = 12345;

    for (int round = 0; round < 2000; round++) {
        int flips = 1 + (int)(rand_r(&seed) % 6);

        memcpy(b, core, sizeof(b));
        for (int k = 0; k < flips; k++) {
            size_t at = (size_t)rand_r(&seed) % notes_end;
            int kind = rand_r(&seed) % 4;

            /* Random bytes, and the values that find bugs: 0, all ones, a byte's top. */
            b[at] = kind == 0 ? 0 : kind == 1 ? 0xff : kind == 2 ? 0x80 : (uint8_t)rand_r(&seed);
        }
        open_and_read(b);
    }
}
END_TEST

/* A core whose NT_FILE names MANY_MAPS maps of one file (the mapped file of setup): opened in
 * one pass, one descriptor for them all. Compared pairwise (as the first loader did) they took
 * minutes; a descriptor each would pass the limit of open files. */
#define MANY_MAPS 200000u

START_TEST(test_many_maps)
{
    size_t plen = strlen(mapped) + 1, prs = 112 + SYN_NREGS * 8 + 8;
    size_t fsz = 16 + (size_t)MANY_MAPS * (24 + plen);
    size_t notes = 20 + prs + 20 + ((fsz + 3) & ~(size_t)3), len = 64 + 56 + notes, at = 120, d;
    uint8_t *b = calloc(1, len);
    Elf64_Ehdr eh = {0};
    Elf64_Phdr ph = {0};
    struct corefile *c;
    struct app_err err = {0};
    struct rlimit rl = {64, 64};

    ck_assert_ptr_nonnull(b);
    memcpy(&eh, core, sizeof(eh));
    eh.e_phnum = 1;
    memcpy(b, &eh, sizeof(eh));
    ph = (Elf64_Phdr){.p_type = PT_NOTE, .p_offset = 120, .p_filesz = notes};
    memcpy(b + 64, &ph, sizeof(ph));
    d = syn_note(b, &at, NT_PRSTATUS, prs);
    syn_put32(b + d + 32, 100);
    d = syn_note(b, &at, 0x46494c45u, fsz);
    syn_put64(b + d, MANY_MAPS);
    syn_put64(b + d + 8, SYN_PAGE);
    for (size_t i = 0; i < MANY_MAPS; i++) {
        syn_put64(b + d + 16 + i * 24, SYN_TEXT + i * SYN_PAGE);
        syn_put64(b + d + 16 + i * 24 + 8, SYN_TEXT + (i + 1) * SYN_PAGE);
        memcpy(b + d + 16 + (size_t)MANY_MAPS * 24 + i * plen, mapped, plen);
    }
    write_file(corepath, b, len);
    free(b);
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0); /* this forked test's own limit */
    ck_assert_msg(corefile_open(corepath, NULL, &c, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(c->info.nmaps, MANY_MAPS);
    ck_assert_int_ge(c->map_fd[MANY_MAPS - 1], 0);
    ck_assert_int_eq(c->map_fd[MANY_MAPS - 1], c->map_fd[0]);
    corefile_free(c);
}
END_TEST

static Suite *corefile_suite(void)
{
    Suite *s = suite_create("corefile");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_whole);
    tcase_add_test(tc, test_other_build);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_corrupted);
    tcase_add_test(tc, test_many_maps);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ts_run(corefile_suite());
}
