/* Unit tests of collectors/devices/dcmi.c against the fake libdcmi (tests/fake/fake_dcmi.c).
 *
 * The fake serves tests/fake/data/dcmi_*.txt, whose values were read off recorded npu-smi
 * tables (the files name their source), so the assertions are the numbers npu-smi printed.
 * meson sets RANKTOP_DCMI_LIB to the fake, FAKE_DCMI_OLD_LIB to its old-name build,
 * RANKTOP_NVML_LIB to a library that is not DCMI, and RANKTOP_SRCDIR. Check forks per test. */
#include "dcmi.h"

#include <check.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ranktop/devices/devices.h"
#include "ranktop/base/status.h"
#include "tsupport.h"

#define A3 "dcmi_a3_ascend910_25.2.0.txt"
#define P310 "dcmi_310p3_25.5.2.txt"

static void serve(const char *name)
{
    const char *src = getenv("RANKTOP_SRCDIR");
    char path[4096];

    ck_assert_msg(src != NULL, "RANKTOP_SRCDIR not set (run through meson test)");
    snprintf(path, sizeof(path), "%s/tests/fake/data/%s", src, name);
    setenv("FAKE_DCMI_FILE", path, 1);
}

static struct dcmi *open_ok(void)
{
    struct dcmi *d = NULL;
    struct app_err err = {0};
    int rc = dcmi_open(&d, &err);

    ck_assert_msg(rc == 0, "dcmi_open: %d %s", rc, err.msg);
    return d;
}

static void collect(struct dcmi *d, struct smi_result *r)
{
    struct app_err err;

    smi_result_reset(r);
    ck_assert_int_eq(dcmi_collect(d, r, &err), 0);
}

/* How often the fake saw an entry point called (fake_dcmi_calls, found in the loaded fake). */
static unsigned calls(const char *fn)
{
    void *h = dlopen(getenv("RANKTOP_DCMI_LIB"), RTLD_NOW | RTLD_NOLOAD);
    void *sym = h ? dlsym(h, "fake_dcmi_calls") : NULL;
    unsigned (*f)(const char *);

    ck_assert_msg(sym != NULL, "fake_dcmi_calls not found");
    memcpy(&f, &sym, sizeof(sym));
    dlclose(h);
    return f(fn);
}

static void assert_chip(const struct smi_device *v, int card, int chip, int64_t hbm_used,
                        double power, int64_t temp)
{
    ck_assert_int_eq(v->kind, SMI_KIND_NPU);
    ck_assert(smi_dev_has(v, SMI_DEV_INDEX | SMI_DEV_CHIP));
    ck_assert_int_eq(v->index, card);
    ck_assert_int_eq(v->chip, chip);
    ck_assert(smi_dev_has(v, SMI_DEV_NAME));
    ck_assert_str_eq(v->name, "Ascend910");
    ck_assert(smi_dev_has(v, SMI_DEV_HEALTH));
    ck_assert_str_eq(v->health, "OK");
    ck_assert(smi_dev_has(v, SMI_DEV_UTIL) && v->util_pct == 0);
    ck_assert(smi_dev_has(v, SMI_DEV_HBM_USED | SMI_DEV_HBM_TOTAL | SMI_DEV_MEM_USED |
                                 SMI_DEV_MEM_TOTAL));
    ck_assert_int_eq(v->hbm_used_mb, hbm_used);
    ck_assert_int_eq(v->mem_used_mb, hbm_used);
    ck_assert_int_eq(v->hbm_total_mb, 65536);
    ck_assert_int_eq(v->mem_total_mb, 65536);
    ck_assert(!smi_dev_has(v, SMI_DEV_DDR_USED)); /* HBM chip: DDR not asked */
    if (power < 0) {
        ck_assert(!smi_dev_has(v, SMI_DEV_POWER));
    } else {
        ck_assert(smi_dev_has(v, SMI_DEV_POWER));
        ck_assert_double_eq_tol(v->power_w, power, 1e-9);
    }
    ck_assert(smi_dev_has(v, SMI_DEV_TEMP) && v->temp_c == temp);
    ck_assert(!smi_dev_has(v, SMI_DEV_LOGIC_ID)); /* not in the recorded table */
}

static void assert_a3(const struct smi_result *r)
{
    ck_assert_uint_eq(r->ndevs, 4);
    assert_chip(&r->devs[0], 0, 0, 3133, 162.8, 37);
    assert_chip(&r->devs[1], 0, 1, 2876, -1, 37);
    assert_chip(&r->devs[2], 1, 0, 3116, 167.1, 38);
    assert_chip(&r->devs[3], 1, 1, 10568, -1, 38);
    ck_assert_uint_eq(r->nprocs, 1);
    ck_assert_int_eq(r->procs[0].kind, SMI_KIND_NPU);
    ck_assert(
        smi_proc_has(&r->procs[0], SMI_PROC_PID | SMI_PROC_DEV | SMI_PROC_CHIP | SMI_PROC_MEM));
    ck_assert_int_eq(r->procs[0].pid, 990711);
    ck_assert_int_eq(r->procs[0].dev_index, 1);
    ck_assert_int_eq(r->procs[0].chip, 1);
    ck_assert_int_eq(r->procs[0].mem_mb, 7746);
    ck_assert(!smi_proc_has(&r->procs[0], SMI_PROC_NAME));
    ck_assert_str_eq(r->driver_version, "25.2.0");
}

START_TEST(test_a3_two_cards_two_chips)
{
    struct dcmi *d;
    struct smi_result r;

    serve(A3);
    d = open_ok();
    smi_result_init(&r);
    collect(d, &r);
    assert_a3(&r);
    ck_assert_str_eq(r.msg, "");
    dcmi_close(d);
    smi_result_fini(&r);
}
END_TEST

/* Unsupported answers (power on the second chips) are not asked again; supported ones are. */
START_TEST(test_unsupported_not_requeried)
{
    struct dcmi *d;
    struct smi_result r;

    serve(A3);
    d = open_ok();
    smi_result_init(&r);
    for (int i = 0; i < 5; i++) {
        collect(d, &r);
        assert_a3(&r);
    }
    /* 2 chips with power x 5 passes + 2 chips without power x 1 pass. */
    ck_assert_uint_eq(calls("dcmi_get_device_power_info"), 2 * 5 + 2);
    ck_assert_uint_eq(calls("dcmi_get_device_temperature"), 4 * 5);
    ck_assert_uint_eq(calls("dcmi_get_device_logic_id"), 4); /* once, at open */
    ck_assert_uint_eq(calls("dcmi_get_device_memory_info_v3"), 0);
    dcmi_close(d);
    smi_result_fini(&r);
}
END_TEST

START_TEST(test_310p_ddr_large_card_id)
{
    struct dcmi *d;
    struct smi_result r;
    const struct smi_device *v;

    serve(P310);
    d = open_ok();
    smi_result_init(&r);
    collect(d, &r);
    collect(d, &r);
    ck_assert_uint_eq(r.ndevs, 1);
    v = &r.devs[0];
    ck_assert_int_eq(v->index, 32896);
    ck_assert_int_eq(v->chip, 0);
    ck_assert_str_eq(v->name, "310P3");
    ck_assert(!smi_dev_has(v, SMI_DEV_POWER)); /* NA */
    ck_assert_int_eq(v->temp_c, 54);
    ck_assert(!smi_dev_has(v, SMI_DEV_HBM_USED) && !smi_dev_has(v, SMI_DEV_HBM_TOTAL));
    ck_assert(smi_dev_has(v, SMI_DEV_DDR_USED | SMI_DEV_DDR_TOTAL));
    ck_assert_int_eq(v->ddr_used_mb, 1904);
    ck_assert_int_eq(v->ddr_total_mb, 44213);
    ck_assert_int_eq(v->mem_used_mb, 1904);
    ck_assert_int_eq(v->mem_total_mb, 44213);
    ck_assert_uint_eq(r.nprocs, 0);
    ck_assert_uint_eq(calls("dcmi_get_device_hbm_info"), 1); /* -8255 once, then not asked */
    ck_assert_uint_eq(calls("dcmi_get_device_memory_info_v3"), 2);
    dcmi_close(d);
    smi_result_fini(&r);
}
END_TEST

START_TEST(test_old_names)
{
    struct dcmi *d;
    struct smi_result r;

    setenv("RANKTOP_DCMI_LIB", getenv("FAKE_DCMI_OLD_LIB"), 1);
    serve(A3);
    d = open_ok();
    smi_result_init(&r);
    collect(d, &r);
    assert_a3(&r);
    ck_assert_str_eq(dcmi_path(d), getenv("FAKE_DCMI_OLD_LIB"));
    dcmi_close(d);
    smi_result_fini(&r);
}
END_TEST

START_TEST(test_pid_map)
{
    struct dcmi *d;
    struct smi_result r;

    serve(A3);
    setenv("FAKE_DCMI_PID_MAP", "990711:1234", 1);
    d = open_ok();
    smi_result_init(&r);
    collect(d, &r);
    ck_assert_uint_eq(r.nprocs, 1);
    ck_assert_int_eq(r.procs[0].pid, 1234);
    dcmi_close(d);
    smi_result_fini(&r);
}
END_TEST

struct worker {
    struct dcmi *d;
    int bad;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    struct smi_result r;
    struct app_err err;

    smi_result_init(&r);
    for (int i = 0; i < 200; i++) {
        smi_result_reset(&r);
        if (dcmi_collect(w->d, &r, &err) != 0 || r.ndevs != 4 || r.nprocs != 1 ||
            r.procs[0].mem_mb != 7746)
            w->bad++;
    }
    smi_result_fini(&r);
    return NULL;
}

/* Two handles in two threads: the module's lock serialises the library calls. */
START_TEST(test_two_threads)
{
    struct worker w[2] = {{0}, {0}};
    pthread_t t[2];

    serve(A3);
    for (int i = 0; i < 2; i++)
        w[i].d = open_ok();
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, work, &w[i]), 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(w[i].bad, 0);
        dcmi_close(w[i].d);
    }
}
END_TEST

static int open_fails(struct app_err *err)
{
    struct dcmi *d = NULL;
    int rc = dcmi_open(&d, err);

    ck_assert(d == NULL);
    ck_assert_int_eq(err->code, rc);
    return rc;
}

START_TEST(test_library_absent)
{
    struct app_err err;

    setenv("RANKTOP_DCMI_LIB", "/nonexistent/libdcmi.so", 1);
    ck_assert_int_eq(open_fails(&err), APP_E_NOTFOUND);
    ck_assert_msg(strstr(err.msg, "/nonexistent/libdcmi.so") && strstr(err.msg, "not found"),
                  "msg: %s", err.msg);
}
END_TEST

/* $ASCEND_DRIVER_HOME/lib64/driver/libdcmi.so is on the search path. */
START_TEST(test_search_path_driver_home)
{
    char dir[] = "/tmp/ranktop_dcmiXXXXXX", sub[256], lib[300];
    struct dcmi *d;

    ck_assert(mkdtemp(dir) != NULL);
    snprintf(sub, sizeof(sub), "%s/lib64", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    snprintf(sub, sizeof(sub), "%s/lib64/driver", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    snprintf(lib, sizeof(lib), "%s/libdcmi.so", sub);
    ck_assert_int_eq(symlink(getenv("RANKTOP_DCMI_LIB"), lib), 0);
    unsetenv("RANKTOP_DCMI_LIB");
    setenv("ASCEND_DRIVER_HOME", dir, 1);
    serve(A3);
    d = open_ok();
    ck_assert_str_eq(dcmi_path(d), lib);
    dcmi_close(d);
    unlink(lib);
    rmdir(sub);
    snprintf(sub, sizeof(sub), "%s/lib64", dir);
    rmdir(sub);
    rmdir(dir);
}
END_TEST

/* Nothing on the search path. meson puts the fake's directory on LD_LIBRARY_PATH, which the
 * last candidate (plain "libdcmi.so") then finds; only without it can "not found" be seen. */
START_TEST(test_search_path_nothing_found)
{
    struct app_err err;
    void *h = dlopen("libdcmi.so", RTLD_NOW | RTLD_LOCAL);

    unsetenv("RANKTOP_DCMI_LIB");
    setenv("ASCEND_DRIVER_HOME", "/nonexistent/ascend", 1);
    if (h) {
        struct dcmi *d = open_ok();

        ck_assert_str_eq(dcmi_path(d), "libdcmi.so");
        dcmi_close(d);
        dlclose(h);
        return;
    }
    ck_assert_int_eq(open_fails(&err), APP_E_NOTFOUND);
    ck_assert_msg(strstr(err.msg, "libdcmi.so not found"), "msg: %s", err.msg);
}
END_TEST

START_TEST(test_not_dcmi)
{
    struct app_err err;

    setenv("RANKTOP_DCMI_LIB", getenv("RANKTOP_NVML_LIB"), 1);
    ck_assert_int_eq(open_fails(&err), APP_E_NOTFOUND);
    ck_assert_msg(strstr(err.msg, "no symbol dcmi_init"), "msg: %s", err.msg);
}
END_TEST

START_TEST(test_init_error)
{
    struct app_err err;

    serve(A3);
    setenv("FAKE_DCMI_INIT_ERROR", "-8009", 1);
    ck_assert_int_eq(open_fails(&err), APP_E_IO);
    ck_assert_msg(strstr(err.msg, "dcmi_init") && strstr(err.msg, "ioctl failed") &&
                      strstr(err.msg, "(-8009)"),
                  "msg: %s", err.msg);
    setenv("FAKE_DCMI_INIT_ERROR", "-8002", 1);
    ck_assert_int_eq(open_fails(&err), APP_E_PERM);
}
END_TEST

static Suite *dcmi_suite(void)
{
    Suite *s = suite_create("dcmi");
    TCase *v = tcase_create("values");
    TCase *e = tcase_create("errors");

    tcase_add_test(v, test_a3_two_cards_two_chips);
    tcase_add_test(v, test_unsupported_not_requeried);
    tcase_add_test(v, test_310p_ddr_large_card_id);
    tcase_add_test(v, test_old_names);
    tcase_add_test(v, test_pid_map);
    tcase_add_test(v, test_two_threads);
    suite_add_tcase(s, v);
    tcase_add_test(e, test_library_absent);
    tcase_add_test(e, test_search_path_driver_home);
    tcase_add_test(e, test_search_path_nothing_found);
    tcase_add_test(e, test_not_dcmi);
    tcase_add_test(e, test_init_error);
    suite_add_tcase(s, e);
    return s;
}

int main(void)
{
    return ts_run(dcmi_suite());
}
