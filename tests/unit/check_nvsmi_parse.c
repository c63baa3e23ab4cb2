/* Unit tests of the nvidia-smi parsers (collectors/devices/nvsmi_parse.c).
 *
 * One Check test per fixture in tests/data/nvidia-smi, asserting every key of its .expected
 * sidecar; per fixture also many cut points, 100 damaged copies, and every parser on it (see
 * smi_fixture.h). Then direct tests of the CSV forms with and without header and units, of
 * error outputs through every parser, and of result reuse. Fixtures are found through
 * RANKTOP_SRCDIR (set by meson). */
#include "nvsmi_parse.h"
#include "smi_text.h"

#include "smi_fixture.h"
#include "tsupport.h"

static const struct fx_parser parsers[] = {
    {"table", nvsmi_parse_table, true, true},
    {"query_gpu", nvsmi_parse_query_gpu, true, true},
    {"query_apps", nvsmi_parse_query_apps, true, true},
    {"pmon", nvsmi_parse_pmon, true, true},
};
#define NPARSERS (sizeof(parsers) / sizeof(parsers[0]))

START_TEST(test_unknown_is_never_zero)
{
    static const char *const unknown[] = {
        "N/A", "[N/A]", "NA", "-", "", "   ", "[Not Supported]", "[Unknown Error]", "ERR!"};
    int64_t v = 7;
    double d = 7.0;

    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        struct smi_span s = smi_text_span(unknown[i], strlen(unknown[i]));

        ck_assert_msg(smi_text_unknown(s), "'%s' should be unknown", unknown[i]);
        ck_assert_msg(!smi_text_int(s, "MiB", &v) && v == 7, "'%s' parsed as int", unknown[i]);
        ck_assert_msg(!smi_text_double(s, "W", &d) && d == 7.0, "'%s' as double", unknown[i]);
    }
    ck_assert(smi_text_int(smi_text_span("0", 1), NULL, &v) && v == 0);
}
END_TEST

START_TEST(test_numbers)
{
    int64_t v = -1;
    double d = -1;

    ck_assert(smi_text_int(smi_text_span(" 19818MiB ", 10), "MiB", &v) && v == 19818);
    ck_assert(smi_text_int(smi_text_span("19818 MiB", 9), "MiB", &v) && v == 19818);
    ck_assert(!smi_text_int(smi_text_span("12 GiB", 6), "MiB", &v));
    ck_assert(!smi_text_int(smi_text_span("-1", 2), NULL, &v));
    ck_assert(!smi_text_int(smi_text_span("1x0", 3), "%", &v));
    ck_assert(!smi_text_int(smi_text_span("99999999999999999999999", 23), NULL, &v));
    ck_assert(!smi_text_int(smi_text_span("1000000000000001", 16), NULL, &v));
    ck_assert(smi_text_int(smi_text_span("57.5", 4), NULL, &v) && v == 58);
    ck_assert(smi_text_double(smi_text_span("631.95 W", 8), "W", &d) && d > 631.94 && d < 631.96);
    /* Only the given length is read: the digits after it are not part of the number. */
    ck_assert(smi_text_int(smi_text_span("12345", 2), NULL, &v) && v == 12);
}
END_TEST

/* The same two GPUs in the four --format=csv variants give the same records. */
START_TEST(test_query_gpu_forms_agree)
{
    static const char *const forms[] = {
        "index, uuid, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB], "
        "power.draw [W]\n0, GPU-a, NVIDIA H100 80GB HBM3, 100 %, 19818 MiB, 81559 MiB, "
        "631.95 W\n1, GPU-b, NVIDIA H100 80GB HBM3, [N/A], 59 MiB, 81559 MiB, [N/A]\n",
        "index, uuid, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB], "
        "power.draw [W]\n0, GPU-a, NVIDIA H100 80GB HBM3, 100, 19818, 81559, 631.95\n"
        "1, GPU-b, NVIDIA H100 80GB HBM3, [N/A], 59, 81559, [N/A]\n",
        "0, GPU-a, NVIDIA H100 80GB HBM3, 100 %, 19818 MiB, 81559 MiB, 631.95 W\n"
        "1, GPU-b, NVIDIA H100 80GB HBM3, [N/A], 59 MiB, 81559 MiB, [N/A]\n",
        "0, GPU-a, NVIDIA H100 80GB HBM3, 100, 19818, 81559, 631.95\r\n"
        "1, GPU-b, NVIDIA H100 80GB HBM3, [N/A], 59, 81559, [N/A]",
    };
    struct smi_result r;

    smi_result_init(&r);
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        smi_result_reset(&r);
        ck_assert_int_eq(nvsmi_parse_query_gpu(forms[i], strlen(forms[i]), &r, NULL), 0);
        ck_assert_msg(r.ndevs == 2, "form %zu: %zu devices", i, r.ndevs);
        ck_assert_str_eq(r.devs[0].uuid, "GPU-a");
        ck_assert_int_eq(r.devs[0].util_pct, 100);
        ck_assert_int_eq(r.devs[0].mem_used_mb, 19818);
        ck_assert_int_eq(r.devs[0].mem_total_mb, 81559);
        ck_assert(r.devs[0].power_w > 631.9 && r.devs[0].power_w < 632.0);
        ck_assert_int_eq(r.devs[1].index, 1);
        ck_assert(!smi_dev_has(&r.devs[1], SMI_DEV_UTIL) && r.devs[1].util_pct == -1);
        ck_assert(!smi_dev_has(&r.devs[1], SMI_DEV_POWER));
        ck_assert(!smi_dev_has(&r.devs[1], SMI_DEV_TEMP));
    }
    smi_result_fini(&r);
}
END_TEST

START_TEST(test_query_apps_forms_agree)
{
    static const char *const forms[] = {
        "pid, process_name, used_gpu_memory [MiB], gpu_uuid\n"
        "5260, /usr/bin/python, 80404 MiB, GPU-a\n5261, python3, [N/A], GPU-b\n",
        "pid, process_name, used_gpu_memory [MiB], gpu_uuid\n"
        "5260, /usr/bin/python, 80404, GPU-a\n5261, python3, [N/A], GPU-b\n",
        "5260, /usr/bin/python, 80404 MiB, GPU-a\n5261, python3, [N/A], GPU-b\n",
        "5260, /usr/bin/python, 80404, GPU-a\n5261, python3, [N/A], GPU-b\n",
    };
    struct smi_result r;

    smi_result_init(&r);
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        smi_result_reset(&r);
        ck_assert_int_eq(nvsmi_parse_query_apps(forms[i], strlen(forms[i]), &r, NULL), 0);
        ck_assert_msg(r.nprocs == 2, "form %zu: %zu procs", i, r.nprocs);
        ck_assert_int_eq(r.procs[0].pid, 5260);
        ck_assert_str_eq(r.procs[0].name, "/usr/bin/python");
        ck_assert_int_eq(r.procs[0].mem_mb, 80404);
        ck_assert_str_eq(r.procs[0].gpu_uuid, "GPU-a");
        ck_assert(!smi_proc_has(&r.procs[0], SMI_PROC_DEV));
        ck_assert(!smi_proc_has(&r.procs[1], SMI_PROC_MEM) && r.procs[1].mem_mb == -1);
    }
    /* No compute process at all: noheader prints nothing, which is success. */
    smi_result_reset(&r);
    ck_assert_int_eq(nvsmi_parse_query_apps("", 0, &r, NULL), 0);
    ck_assert_int_eq(r.nprocs, 0);
    smi_result_fini(&r);
}
END_TEST

/* nvidia-smi prints its failure the same way whatever it was asked. */
START_TEST(test_errors_through_every_parser)
{
    static const struct {
        const char *text;
        int code;
    } cases[] = {
        {"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make "
         "sure that the latest NVIDIA driver is installed and running.\n",
         APP_E_IO},
        {"No devices were found\n", APP_E_NOTFOUND},
        {"Failed to initialize NVML: Driver/library version mismatch\n", APP_E_IO},
        {"Failed to initialize NVML: Insufficient Permissions\n", APP_E_PERM},
    };
    struct app_err err;
    struct smi_result r;

    smi_result_init(&r);
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        for (size_t p = 0; p < NPARSERS; p++) {
            int rc = parsers[p].fn(cases[c].text, strlen(cases[c].text), &r, &err);

            ck_assert_msg(rc == cases[c].code, "case %zu via %s: %d", c, parsers[p].name, rc);
            ck_assert_int_eq(err.code, rc);
            ck_assert_int_eq(r.status, rc);
            ck_assert_msg(strncmp(err.msg, "nvidia-smi", 10) == 0 && !strchr(err.msg, '\n'),
                          "message '%s'", err.msg);
        }
    }
    smi_result_fini(&r);
}
END_TEST

START_TEST(test_result_reuse)
{
    static const char csv[] = "0, GPU-a, A, 1, 2, 3, 4.0, 5\n";
    struct smi_result r;

    smi_result_init(&r);
    ck_assert_int_eq(nvsmi_parse_query_gpu(csv, sizeof(csv) - 1, &r, NULL), 0);
    ck_assert_int_eq(nvsmi_parse_query_gpu(csv, sizeof(csv) - 1, &r, NULL), 0);
    ck_assert_int_eq(r.ndevs, 2); /* parsers append */
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(nvsmi_parse_query_gpu(csv, sizeof(csv) - 1, &r, NULL), 0);
    ck_assert_int_eq(r.ndevs, 102);
    smi_result_reset(&r);
    ck_assert_int_eq(r.ndevs, 0);
    ck_assert_ptr_nonnull(r.devs);
    smi_result_fini(&r);
    ck_assert_ptr_null(r.devs);
    smi_result_fini(&r); /* twice is harmless */
}
END_TEST

static Suite *nvsmi_suite(void)
{
    Suite *s = suite_create("nvsmi_parse");
    TCase *unit = tcase_create("direct");

    /* The 20 shared fixtures plus synthetic and malformed ones. */
    suite_add_tcase(s, fx_tcase("nvidia-smi", parsers, NPARSERS, 30));
    tcase_add_test(unit, test_unknown_is_never_zero);
    tcase_add_test(unit, test_numbers);
    tcase_add_test(unit, test_query_gpu_forms_agree);
    tcase_add_test(unit, test_query_apps_forms_agree);
    tcase_add_test(unit, test_errors_through_every_parser);
    tcase_add_test(unit, test_result_reuse);
    suite_add_tcase(s, unit);
    return s;
}

int main(void)
{
    return ts_run(nvsmi_suite());
}
