/* Tests for elf_parse's refusal of targets this build cannot read (collectors/proc/elfsym.c):
 * a 32-bit program, another architecture's, a big-endian one each get APP_E_ARCH with a
 * message that says which, and this build's own 64-bit object passes that check. The headers
 * are built in memory (a parser test: no file, no process). */
#include "ranktop/proc/elfsym.h"
#include "tsupport.h"

#include <check.h>
#include <elf.h>
#include <string.h>

/* An ELF header of the given class, byte order and machine, in a buffer of 256 bytes with no
 * program header: past the architecture check it fails as having no loadable segment. */
static void header(uint8_t *buf, int cls, int data, unsigned machine)
{
    memset(buf, 0, 256);
    memcpy(buf, ELFMAG, SELFMAG);
    buf[EI_CLASS] = (uint8_t)cls;
    buf[EI_DATA] = (uint8_t)data;
    buf[EI_VERSION] = EV_CURRENT;
    buf[16] = ET_DYN;
    if (data == ELFDATA2MSB) {
        buf[18] = (uint8_t)(machine >> 8);
        buf[19] = (uint8_t)machine;
    } else {
        buf[18] = (uint8_t)machine;
        buf[19] = (uint8_t)(machine >> 8);
    }
}

static void refused(int cls, int data, unsigned machine, const char *says)
{
    uint8_t buf[256];
    struct elf_info info;
    struct app_err err = {0};

    header(buf, cls, data, machine);
    ck_assert_int_eq(elf_parse(buf, sizeof(buf), &info, &err), APP_E_ARCH);
    ck_assert_msg(strstr(err.msg, says), "message '%s' does not say '%s'", err.msg, says);
}

START_TEST(test_refusals)
{
#if defined(__x86_64__)
    const char *own = "64-bit x86-64 processes";
    unsigned other = EM_AARCH64;
    const char *other_says = "a program for aarch64: this ranktop reads 64-bit x86-64 processes";
#else
    const char *own = "64-bit aarch64 processes";
    unsigned other = EM_X86_64;
    const char *other_says = "a program for x86-64: this ranktop reads 64-bit aarch64 processes";
#endif
    refused(ELFCLASS32, ELFDATA2LSB, EM_386, "a 32-bit program for x86: ranktop reads");
    refused(ELFCLASS32, ELFDATA2LSB, EM_ARM, "a 32-bit program for arm");
    refused(ELFCLASS32, ELFDATA2LSB, EM_386, own);
    refused(ELFCLASS64, ELFDATA2LSB, other, other_says);
    refused(ELFCLASS64, ELFDATA2MSB, EM_S390, "a big-endian program for s390");
}
END_TEST

START_TEST(test_own_machine)
{
    uint8_t buf[256];
    struct elf_info info;
    struct app_err err = {0};

#if defined(__x86_64__)
    header(buf, ELFCLASS64, ELFDATA2LSB, EM_X86_64);
#else
    header(buf, ELFCLASS64, ELFDATA2LSB, EM_AARCH64);
#endif
    ck_assert_int_eq(elf_parse(buf, sizeof(buf), &info, &err), APP_E_PARSE);
    ck_assert_str_eq(err.msg, "ELF file has no loadable segment");
    ck_assert_int_eq(elf_parse(buf, 12, &info, &err), APP_E_PARSE); /* shorter than a header */
}
END_TEST

static Suite *elfsym_suite(void)
{
    Suite *s = suite_create("elfsym");
    TCase *tc = tcase_create("arch");

    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_own_machine);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ts_run(elfsym_suite());
}
