/* Unit tests of the npu-smi parsers (collectors/devices/npusmi_parse.c).
 *
 * One Check test per fixture in tests/data/npu-smi, asserting every key of its .expected
 * sidecar; per fixture also many cut points, 100 damaged copies, and every parser on it (see
 * smi_fixture.h). Then direct tests of `info -t usages` handling. Fixtures are found through
 * RANKTOP_SRCDIR (set by meson). */
#include "npusmi_parse.h"

#include "smi_fixture.h"
#include "tsupport.h"

/* npusmi_parse_usages fills one caller-owned record; present it as a result like the rest. */
static int parse_usages(const char *buf, size_t len, struct smi_result *r, struct app_err *err)
{
    struct smi_device d;
    int rc;

    smi_device_init(&d, SMI_KIND_NPU);
    rc = npusmi_parse_usages(buf, len, &d, err);
    if (rc == 0)
        smi_result_add_device(r, &d);
    r->status = rc;
    return rc;
}

static const struct fx_parser parsers[] = {
    {"info", npusmi_parse_info, true, true},
    {"mapping", npusmi_parse_mapping, true, true},
    /* A cut "NPU ID : 32896" reads as another card: not a prefix. */
    {"usages", parse_usages, false, false},
};
#define NPARSERS (sizeof(parsers) / sizeof(parsers[0]))

/* The caller's card and chip win over the tool's lines; figures without -c are refused. */
START_TEST(test_usages_keeps_caller_ids)
{
    static const char text[] = "\tNPU ID                         : 0\n"
                               "\tChip ID                        : 0\n"
                               "\tAicore Usage Rate(%)           : 33\n"
                               "\tHBM Capacity(MB)               : 65536\n"
                               "\tHBM Usage Rate(%)              : 50\n";
    struct smi_device d;
    struct app_err err;

    smi_device_init(&d, SMI_KIND_NPU);
    d.index = 5, d.chip = 1, d.valid |= SMI_DEV_INDEX | SMI_DEV_CHIP;
    ck_assert_int_eq(npusmi_parse_usages(text, sizeof(text) - 1, &d, &err), 0);
    ck_assert_int_eq(d.index, 5);
    ck_assert_int_eq(d.chip, 1);
    ck_assert_int_eq(d.util_pct, 33);
    ck_assert_int_eq(d.hbm_used_mb, 32768);
    ck_assert_int_eq(d.mem_used_mb, 32768);
    ck_assert_int_eq(d.mem_total_mb, 65536);
    ck_assert(!smi_dev_has(&d, SMI_DEV_DDR_TOTAL));

    smi_device_init(&d, SMI_KIND_NPU);
    ck_assert_int_eq(npusmi_parse_usages("", 0, &d, &err), APP_E_PARSE);
    ck_assert_int_eq(npusmi_parse_usages("hello\n", 6, &d, NULL), APP_E_PARSE);
    ck_assert_int_eq(d.valid, 0);
}
END_TEST

/* A usage figure npu-smi could not read ("NA") stays unknown. */
START_TEST(test_usages_na)
{
    static const char text[] = "\tAicore Usage Rate(%)           : NA\n"
                               "\tHBM Capacity(MB)               : 32768\n"
                               "\tHBM Usage Rate(%)              : NA\n";
    struct smi_device d;

    smi_device_init(&d, SMI_KIND_NPU);
    ck_assert_int_eq(npusmi_parse_usages(text, sizeof(text) - 1, &d, NULL), 0);
    ck_assert(!smi_dev_has(&d, SMI_DEV_UTIL) && d.util_pct == -1);
    ck_assert(smi_dev_has(&d, SMI_DEV_HBM_TOTAL) && d.hbm_total_mb == 32768);
    ck_assert(!smi_dev_has(&d, SMI_DEV_HBM_USED) && d.hbm_used_mb == -1);
    ck_assert(!smi_dev_has(&d, SMI_DEV_MEM_USED) && smi_dev_has(&d, SMI_DEV_MEM_TOTAL));
}
END_TEST

static Suite *npusmi_suite(void)
{
    Suite *s = suite_create("npusmi_parse");
    TCase *unit = tcase_create("direct");

    /* The 14 shared fixtures plus synthetic and malformed ones. */
    suite_add_tcase(s, fx_tcase("npu-smi", parsers, NPARSERS, 24));
    tcase_add_test(unit, test_usages_keeps_caller_ids);
    tcase_add_test(unit, test_usages_na);
    suite_add_tcase(s, unit);
    return s;
}

int main(void)
{
    return ts_run(npusmi_suite());
}
