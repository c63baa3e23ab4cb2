/* Unit tests of collectors/devices/nvml.c against the fake libnvidia-ml (tests/fake/fake_nvml.c).
 *
 * The fake serves the values of recorded nvidia-smi CSV files (FAKE_NVML_GPUS, FAKE_NVML_APPS),
 * so every assertion below is a number read from a fixture in tests/data/nvidia-smi or from
 * tests/fake/data (values transcribed from a recorded table, see the file headers). meson sets
 * RANKTOP_NVML_LIB to the fake, FAKE_NVML_V1_LIB to its old-driver build, FAKE_DCMI_OLD_LIB to
 * a library that is not NVML, and RANKTOP_SRCDIR. Check forks per test, so setenv in a test
 * does not leak into the next. */
#include "nvml.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ranktop/devices/devices.h"
#include "ranktop/base/status.h"
#include "tsupport.h"

#define H100_GPU "csv_query-gpu_590.48.01_h100_all_fields_header_units.txt"
#define MIG_APPS "csv_query-compute-apps_590.48.01_h100_mig_header_units.txt"
#define WIN_APPS "csv_query-compute-apps_610.62_windows_NA_used_memory.txt"
#define EMPTY_APPS "csv_query-compute-apps_595.71.05_empty_header_only.txt"
#define TWO_GPUS "synthetic_csv_query-gpu_noheader_nounits_8cols.txt"
#define TWO_APPS "synthetic_csv_query-compute-apps_noheader_nounits.txt"
#define ZERO_UUID "GPU-00000000-0000-0000-0000-000000000000"

static char path_buf[8][4096];
static int path_next;

/* tests/data/nvidia-smi/NAME (dir "data") or tests/fake/data/NAME (dir "fake"). */
static const char *fixture(const char *dir, const char *name)
{
    const char *src = getenv("RANKTOP_SRCDIR");
    char *p = path_buf[path_next++ % 8];

    ck_assert_msg(src != NULL, "RANKTOP_SRCDIR not set (run through meson test)");
    snprintf(p, sizeof(path_buf[0]), "%s/tests/%s/%s", src,
             strcmp(dir, "fake") == 0 ? "fake/data" : "data/nvidia-smi", name);
    return p;
}

static void serve(const char *gpus, const char *apps)
{
    setenv("FAKE_NVML_GPUS", gpus ? fixture("data", gpus) : "", 1);
    setenv("FAKE_NVML_APPS", apps ? fixture("data", apps) : "", 1);
}

/* Opens the library, collects once into r (initialised here), closes. */
static void collect(struct smi_result *r)
{
    struct nvml *n = NULL;
    struct app_err err = {0};
    int rc = nvml_open(&n, &err);

    ck_assert_msg(rc == 0, "nvml_open: %d %s", rc, err.msg);
    smi_result_init(r);
    rc = nvml_collect(n, r, &err);
    ck_assert_msg(rc == 0, "nvml_collect: %d %s", rc, err.msg);
    nvml_close(n);
}

static void assert_h100_device(const struct smi_device *d)
{
    ck_assert_int_eq(d->kind, SMI_KIND_GPU);
    ck_assert(smi_dev_has(d, SMI_DEV_INDEX) && d->index == 0);
    ck_assert(smi_dev_has(d, SMI_DEV_NAME));
    ck_assert_str_eq(d->name, "NVIDIA H100 80GB HBM3");
    ck_assert(smi_dev_has(d, SMI_DEV_UUID));
    ck_assert_str_eq(d->uuid, ZERO_UUID);
    ck_assert(smi_dev_has(d, SMI_DEV_UTIL) && d->util_pct == 100);
    ck_assert(smi_dev_has(d, SMI_DEV_MEM_TOTAL) && d->mem_total_mb == 81559);
    ck_assert(smi_dev_has(d, SMI_DEV_POWER));
    ck_assert_double_eq_tol(d->power_w, 631.95, 1e-9);
    ck_assert(smi_dev_has(d, SMI_DEV_TEMP) && d->temp_c == 59);
    ck_assert(!smi_dev_has(d, SMI_DEV_CHIP) && d->chip == -1);
}

static void assert_proc(const struct smi_proc *p, int pid, int dev, int64_t mem_mb)
{
    ck_assert_int_eq(p->kind, SMI_KIND_GPU);
    ck_assert(smi_proc_has(p, SMI_PROC_PID | SMI_PROC_DEV));
    ck_assert_int_eq(p->pid, pid);
    ck_assert_int_eq(p->dev_index, dev);
    if (mem_mb < 0) {
        ck_assert(!smi_proc_has(p, SMI_PROC_MEM));
        ck_assert_int_eq(p->mem_mb, -1);
    } else {
        ck_assert(smi_proc_has(p, SMI_PROC_MEM));
        ck_assert_int_eq(p->mem_mb, mem_mb);
    }
    ck_assert(!smi_proc_has(p, SMI_PROC_NAME)); /* NVML gives no names: /proc does */
}

START_TEST(test_h100_all_fields)
{
    struct smi_result r;
    const struct smi_device *d;

    serve(H100_GPU, MIG_APPS);
    collect(&r);
    ck_assert_uint_eq(r.ndevs, 1);
    d = &r.devs[0];
    assert_h100_device(d);
    ck_assert(smi_dev_has(d, SMI_DEV_MEM_USED) && d->mem_used_mb == 19818);
    ck_assert(smi_dev_has(d, SMI_DEV_BUS_ID));
    ck_assert_str_eq(d->bus_id, "00000000:00:09.0");
    ck_assert_str_eq(r.driver_version, "590.48.01");
    ck_assert_uint_eq(r.nprocs, 3);
    assert_proc(&r.procs[0], 21180, 0, 2296);
    assert_proc(&r.procs[1], 21181, 0, 1272);
    assert_proc(&r.procs[2], 21198, 0, 7484);
    for (size_t i = 0; i < r.nprocs; i++) {
        ck_assert(!smi_proc_has(&r.procs[i], SMI_PROC_GI | SMI_PROC_CI)); /* 0xFFFFFFFF */
        ck_assert(smi_proc_has(&r.procs[i], SMI_PROC_UUID | SMI_PROC_BUS_ID | SMI_PROC_TYPE));
        ck_assert_str_eq(r.procs[i].gpu_uuid, ZERO_UUID);
        ck_assert_str_eq(r.procs[i].gpu_bus_id, "00000000:00:09.0");
        ck_assert_str_eq(r.procs[i].type, "C");
    }
    ck_assert_str_eq(r.msg, "");
    ck_assert_int_eq(r.status, 0);
    smi_result_fini(&r);
}
END_TEST

START_TEST(test_mig_util_unknown_gi_ci)
{
    struct smi_result r;
    const struct smi_device *d;

    setenv("FAKE_NVML_GPUS", fixture("fake", "query-gpu_590.48.01_h100_mig_from_table.csv"), 1);
    setenv("FAKE_NVML_APPS", fixture("fake", "query-compute-apps_590.48.01_h100_mig_gi_ci.csv"), 1);
    collect(&r);
    ck_assert_uint_eq(r.ndevs, 1);
    d = &r.devs[0];
    ck_assert(!smi_dev_has(d, SMI_DEV_UTIL));
    ck_assert_int_eq(d->util_pct, -1);
    ck_assert(smi_dev_has(d, SMI_DEV_MEM_USED) && d->mem_used_mb == 11125);
    ck_assert(smi_dev_has(d, SMI_DEV_MEM_TOTAL) && d->mem_total_mb == 81559);
    ck_assert_double_eq_tol(d->power_w, 432.0, 1e-9);
    ck_assert_int_eq(d->temp_c, 52);
    ck_assert_uint_eq(r.nprocs, 3);
    assert_proc(&r.procs[0], 21180, 0, 2296);
    assert_proc(&r.procs[2], 21198, 0, 7484);
    for (size_t i = 0; i < r.nprocs; i++) {
        ck_assert(smi_proc_has(&r.procs[i], SMI_PROC_GI | SMI_PROC_CI));
        ck_assert_int_eq(r.procs[i].gi, 2);
        ck_assert_int_eq(r.procs[i].ci, 0);
    }
    smi_result_fini(&r);
}
END_TEST

START_TEST(test_wddm_memory_not_available)
{
    struct smi_result r;

    serve(H100_GPU, WIN_APPS);
    collect(&r);
    ck_assert_uint_eq(r.nprocs, 21);
    assert_proc(&r.procs[0], 2140, 0, -1);
    assert_proc(&r.procs[7], 17648, 0, -1);
    assert_proc(&r.procs[8], 15964, 0, -1);
    assert_proc(&r.procs[20], 13820, 0, -1);
    smi_result_fini(&r);
}
END_TEST

START_TEST(test_no_processes)
{
    struct smi_result r;

    serve(H100_GPU, EMPTY_APPS);
    collect(&r);
    ck_assert_uint_eq(r.ndevs, 1);
    ck_assert_uint_eq(r.nprocs, 0);
    ck_assert_str_eq(r.msg, "");
    smi_result_fini(&r);
}
END_TEST

static void assert_two_gpus(const struct smi_result *r, bool first_known)
{
    const struct smi_device *d1 = &r->devs[1];

    ck_assert_uint_eq(r->ndevs, 2);
    if (first_known) {
        ck_assert_str_eq(r->devs[0].name, "NVIDIA A800 80GB PCIe");
        ck_assert_int_eq(r->devs[0].util_pct, 100);
        ck_assert_int_eq(r->devs[0].mem_used_mb, 80407);
        ck_assert_double_eq_tol(r->devs[0].power_w, 89.51, 1e-9);
    }
    ck_assert(smi_dev_has(d1, SMI_DEV_INDEX) && d1->index == 1);
    ck_assert_str_eq(d1->uuid, "GPU-7a2b9c3d-1e4f-4a5b-8c6d-aabbccddeeff");
    ck_assert_int_eq(d1->util_pct, 0);
    ck_assert_int_eq(d1->mem_used_mb, 3);
    ck_assert_int_eq(d1->mem_total_mb, 81920);
    ck_assert(!smi_dev_has(d1, SMI_DEV_POWER)); /* [N/A] */
    ck_assert_int_eq(d1->temp_c, 31);
}

START_TEST(test_same_pid_on_two_gpus)
{
    struct smi_result r;

    serve(TWO_GPUS, TWO_APPS);
    collect(&r);
    assert_two_gpus(&r, true);
    ck_assert_uint_eq(r.nprocs, 3);
    assert_proc(&r.procs[0], 5260, 0, 40404);
    ck_assert_str_eq(r.procs[0].gpu_uuid, "GPU-3f1c8a2e-5b7d-4c1a-9e0f-112233445566");
    assert_proc(&r.procs[1], 5260, 1, 20996);
    assert_proc(&r.procs[2], 5261, 1, -1);
    ck_assert_str_eq(r.procs[2].gpu_uuid, "GPU-7a2b9c3d-1e4f-4a5b-8c6d-aabbccddeeff");
    smi_result_fini(&r);
}
END_TEST

START_TEST(test_pid_map)
{
    struct smi_result r;

    serve(H100_GPU, MIG_APPS);
    setenv("FAKE_NVML_PID_MAP", "21180:4242,21198:77", 1);
    collect(&r);
    ck_assert_uint_eq(r.nprocs, 3);
    assert_proc(&r.procs[0], 4242, 0, 2296);
    assert_proc(&r.procs[1], 21181, 0, 1272);
    assert_proc(&r.procs[2], 77, 0, 7484);
    smi_result_fini(&r);
}
END_TEST

/* Old driver: unversioned symbols only, 16-byte process records, v1 memory (used counts the
 * reserved memory in: total - free = 81559 - 61263), 16-byte legacy bus id. */
START_TEST(test_v1_only_library)
{
    struct smi_result r;

    setenv("RANKTOP_NVML_LIB", getenv("FAKE_NVML_V1_LIB"), 1);
    serve(H100_GPU, MIG_APPS);
    collect(&r);
    ck_assert_uint_eq(r.ndevs, 1);
    assert_h100_device(&r.devs[0]);
    ck_assert_int_eq(r.devs[0].mem_used_mb, 81559 - 61263);
    ck_assert_str_eq(r.devs[0].bus_id, "0000:00:09.0");
    ck_assert_uint_eq(r.nprocs, 3);
    assert_proc(&r.procs[0], 21180, 0, 2296);
    assert_proc(&r.procs[1], 21181, 0, 1272);
    assert_proc(&r.procs[2], 21198, 0, 7484);
    ck_assert(!smi_proc_has(&r.procs[1], SMI_PROC_GI));
    smi_result_fini(&r);
}
END_TEST

START_TEST(test_memory_v2_version_mismatch_falls_back)
{
    struct smi_result r;

    serve(H100_GPU, NULL);
    setenv("FAKE_NVML_MEM_V2_MISMATCH", "1", 1);
    collect(&r);
    ck_assert(smi_dev_has(&r.devs[0], SMI_DEV_MEM_USED | SMI_DEV_MEM_TOTAL));
    ck_assert_int_eq(r.devs[0].mem_used_mb, 81559 - 61263);
    ck_assert_int_eq(r.devs[0].mem_total_mb, 81559);
    smi_result_fini(&r);
}
END_TEST

/* Processes appear between the size query and the fetch, three times: still all read. */
START_TEST(test_process_list_grows)
{
    struct smi_result r;

    serve(H100_GPU, MIG_APPS);
    setenv("FAKE_NVML_RACE", "3", 1);
    collect(&r);
    ck_assert_uint_eq(r.nprocs, 3);
    assert_proc(&r.procs[2], 21198, 0, 7484);
    ck_assert_str_eq(r.msg, "");
    smi_result_fini(&r);
}
END_TEST

/* A list that never stops growing: bounded retries, the GPU kept, a note. */
START_TEST(test_process_list_grows_forever)
{
    struct smi_result r;

    serve(H100_GPU, MIG_APPS);
    setenv("FAKE_NVML_RACE", "1000000", 1);
    collect(&r);
    ck_assert_uint_eq(r.ndevs, 1);
    ck_assert_int_eq(r.devs[0].mem_used_mb, 19818);
    ck_assert_uint_eq(r.nprocs, 0);
    ck_assert_msg(strstr(r.msg, "kept growing") != NULL, "msg: %s", r.msg);
    smi_result_fini(&r);
}
END_TEST

START_TEST(test_lost_gpu_kept_with_note)
{
    struct smi_result r;

    serve(TWO_GPUS, TWO_APPS);
    setenv("FAKE_NVML_LOST_GPU", "0", 1);
    collect(&r);
    ck_assert_uint_eq(r.ndevs, 2);
    ck_assert_uint_eq(r.devs[0].valid, SMI_DEV_INDEX);
    ck_assert_int_eq(r.devs[0].index, 0);
    assert_two_gpus(&r, false);
    ck_assert_uint_eq(r.skipped, 1);
    ck_assert_msg(strstr(r.msg, "GPU 0") && strstr(r.msg, "GPU is lost"), "msg: %s", r.msg);
    ck_assert_uint_eq(r.nprocs, 2); /* GPU 1's two; GPU 0's list cannot be read */
    assert_proc(&r.procs[0], 5260, 1, 20996);
    smi_result_fini(&r);
}
END_TEST

START_TEST(test_collect_twice_reuses_result)
{
    struct nvml *n = NULL;
    struct app_err err;
    struct smi_result r;

    serve(H100_GPU, MIG_APPS);
    ck_assert_int_eq(nvml_open(&n, &err), 0);
    smi_result_init(&r);
    for (int i = 0; i < 3; i++) {
        smi_result_reset(&r);
        ck_assert_int_eq(nvml_collect(n, &r, &err), 0);
        ck_assert_uint_eq(r.ndevs, 1);
        ck_assert_uint_eq(r.nprocs, 3);
        ck_assert_int_eq(r.procs[1].mem_mb, 1272);
    }
    ck_assert_str_eq(nvml_path(n), getenv("RANKTOP_NVML_LIB"));
    nvml_close(n);
    nvml_close(NULL);
    smi_result_fini(&r);
}
END_TEST

static int open_fails(struct app_err *err)
{
    struct nvml *n = (struct nvml *)err; /* must be reset to NULL */
    int rc = nvml_open(&n, err);

    ck_assert(n == NULL);
    ck_assert_int_eq(err->code, rc);
    return rc;
}

START_TEST(test_library_absent)
{
    struct app_err err;

    setenv("RANKTOP_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    ck_assert_int_eq(open_fails(&err), APP_E_NOTFOUND);
    ck_assert_msg(strstr(err.msg, "/nonexistent/libnvidia-ml.so.1") &&
                      strstr(err.msg, "not found") && strstr(err.msg, "RANKTOP_NVML_LIB"),
                  "msg: %s", err.msg);
}
END_TEST

START_TEST(test_not_a_library)
{
    struct app_err err;

    setenv("RANKTOP_NVML_LIB", fixture("data", H100_GPU), 1);
    ck_assert_int_eq(open_fails(&err), APP_E_IO);
    ck_assert_msg(strstr(err.msg, "cannot load"), "msg: %s", err.msg);
}
END_TEST

START_TEST(test_not_nvml)
{
    struct app_err err;

    setenv("RANKTOP_NVML_LIB", getenv("FAKE_DCMI_OLD_LIB"), 1);
    ck_assert_int_eq(open_fails(&err), APP_E_NOTFOUND);
    ck_assert_msg(strstr(err.msg, "no symbol nvmlInit"), "msg: %s", err.msg);
}
END_TEST

START_TEST(test_driver_not_loaded)
{
    struct app_err err;

    serve(H100_GPU, NULL);
    setenv("FAKE_NVML_INIT_ERROR", "9", 1);
    ck_assert_int_eq(open_fails(&err), APP_E_IO);
    ck_assert_msg(strstr(err.msg, "nvmlInit_v2") && strstr(err.msg, "Driver Not Loaded (9)") &&
                      strstr(err.msg, "couldn't communicate with the NVIDIA driver"),
                  "msg: %s", err.msg);
}
END_TEST

START_TEST(test_no_permission)
{
    struct app_err err;

    setenv("FAKE_NVML_INIT_ERROR", "4", 1);
    ck_assert_int_eq(open_fails(&err), APP_E_PERM);
    ck_assert_msg(strstr(err.msg, "Insufficient Permissions (4)"), "msg: %s", err.msg);
}
END_TEST

START_TEST(test_no_gpus)
{
    struct smi_result r;

    serve(NULL, NULL);
    collect(&r);
    ck_assert_uint_eq(r.ndevs, 0);
    ck_assert_uint_eq(r.nprocs, 0);
    smi_result_fini(&r);
}
END_TEST

static Suite *nvml_suite(void)
{
    Suite *s = suite_create("nvml");
    TCase *v = tcase_create("values");
    TCase *e = tcase_create("errors");

    tcase_add_test(v, test_h100_all_fields);
    tcase_add_test(v, test_mig_util_unknown_gi_ci);
    tcase_add_test(v, test_wddm_memory_not_available);
    tcase_add_test(v, test_no_processes);
    tcase_add_test(v, test_same_pid_on_two_gpus);
    tcase_add_test(v, test_pid_map);
    tcase_add_test(v, test_v1_only_library);
    tcase_add_test(v, test_memory_v2_version_mismatch_falls_back);
    tcase_add_test(v, test_process_list_grows);
    tcase_add_test(v, test_collect_twice_reuses_result);
    tcase_add_test(v, test_no_gpus);
    suite_add_tcase(s, v);
    tcase_add_test(e, test_process_list_grows_forever);
    tcase_add_test(e, test_lost_gpu_kept_with_note);
    tcase_add_test(e, test_library_absent);
    tcase_add_test(e, test_not_a_library);
    tcase_add_test(e, test_not_nvml);
    tcase_add_test(e, test_driver_not_loaded);
    tcase_add_test(e, test_no_permission);
    suite_add_tcase(s, e);
    return s;
}

int main(void)
{
    return ts_run(nvml_suite());
}
