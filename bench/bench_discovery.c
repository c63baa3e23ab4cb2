/* bench_discovery: the cost of one device refresh through NVML calls versus spawning
 * nvidia-smi and parsing its output.
 *
 * No GPU here, so both sides are fakes serving the same recorded H100 capture (1 GPU, 3
 * compute processes, driver 590.48.01): tests/fake/libnvidia-ml.so.1 through
 * collectors/devices/nvml.c, and tests/fake/nvidia-smi (a POSIX sh script that cats the recording)
 * through exec_run and the project parsers. Rows:
 *   nvml kept     nvml_collect on a handle opened once (how ranktop uses NVML);
 *   nvml reopen   nvml_open + nvml_collect + nvml_close per refresh (the fake re-reads its
 *                 CSV files at each nvmlInit, so this is an upper bound of the fake, not NVML);
 *   smi table     one spawn of the default table + nvsmi_parse_table;
 *   smi queries   two spawns (--query-gpu, --query-compute-apps) + their CSV parsers.
 * Wall is the monotonic clock; CPU is this process's user+system time plus that of its
 * reaped children (getrusage RUSAGE_CHILDREN), so a spawn's fork/exec/sh cost is counted.
 * A real nvidia-smi costs far more than the fake script (10-20 ms healthy, seconds without
 * persistence mode: docs devices.md 2.1); these figures are the floor of the spawn path.
 * Usage: bench_discovery [N] (default 300 refreshes per row). Not a test. */
#include "ranktop/devices/exec.h"
#include "nvml.h"
#include "nvsmi_parse.h"
#include "ranktop/devices/devices.h"
#include "ranktop/base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#ifndef BENCH_FAKE_NVML
#define BENCH_FAKE_NVML "build/tests/fake/libnvidia-ml.so.1"
#endif
#ifndef BENCH_FAKE_SMI
#define BENCH_FAKE_SMI "tests/fake/nvidia-smi"
#endif
#ifndef BENCH_DATA
#define BENCH_DATA "tests/data/nvidia-smi"
#endif

#define GPU_CSV "csv_query-gpu_590.48.01_h100_all_fields_header_units.txt"
#define APPS_CSV "csv_query-compute-apps_590.48.01_h100_mig_header_units.txt"
#define TABLE "590.48.01_h100_3procs_100pct.txt"
#define TIMEOUT_MS 5000

struct meter {
    uint64_t wall, cpu;
};

static uint64_t cpu_ns(void)
{
    struct rusage self, kids;

    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    return ((uint64_t)(self.ru_utime.tv_sec + self.ru_stime.tv_sec + kids.ru_utime.tv_sec +
                       kids.ru_stime.tv_sec)) *
               1000000000u +
           ((uint64_t)(self.ru_utime.tv_usec + self.ru_stime.tv_usec + kids.ru_utime.tv_usec +
                       kids.ru_stime.tv_usec)) *
               1000u;
}

static struct meter meter_start(void)
{
    return (struct meter){clock_mono_ns(), cpu_ns()};
}

static void report(const char *row, struct meter m0, int n, const struct smi_result *r)
{
    double wall = (double)(clock_mono_ns() - m0.wall) / 1000.0 / n;
    double cpu = (double)(cpu_ns() - m0.cpu) / 1000.0 / n;

    printf("%-13s %10.1f %10.1f   %zu GPU, %zu procs\n", row, wall, cpu, r->ndevs, r->nprocs);
}

static const char *data(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", getenv("BENCH_DATA") ? getenv("BENCH_DATA") : BENCH_DATA, name);
    return buf;
}

/* Points the fake library and the fake tool at the recorded capture. */
static void setup_env(void)
{
    char buf[4096];

    if (!getenv("RANKTOP_NVML_LIB"))
        setenv("RANKTOP_NVML_LIB", BENCH_FAKE_NVML, 1);
    setenv("FAKE_NVML_GPUS", data(buf, sizeof(buf), GPU_CSV), 1);
    setenv("FAKE_NVML_APPS", data(buf, sizeof(buf), APPS_CSV), 1);
    setenv("FAKE_SMI_FIXTURE", data(buf, sizeof(buf), TABLE), 1);
    setenv("FAKE_SMI_QUERY_GPU", data(buf, sizeof(buf), GPU_CSV), 1);
    setenv("FAKE_SMI_QUERY_APPS", data(buf, sizeof(buf), APPS_CSV), 1);
}

static int bench_nvml_kept(int n, struct smi_result *r)
{
    struct app_err err;
    struct nvml *h;
    struct meter m;

    if (nvml_open(&h, &err) < 0) {
        fprintf(stderr, "bench_discovery: %s\n", err.msg);
        return -1;
    }
    m = meter_start();
    for (int i = 0; i < n; i++) {
        smi_result_reset(r);
        if (nvml_collect(h, r, &err) < 0)
            fprintf(stderr, "bench_discovery: %s\n", err.msg);
    }
    report("nvml kept", m, n, r);
    nvml_close(h);
    return 0;
}

static void bench_nvml_reopen(int n, struct smi_result *r)
{
    struct app_err err;
    struct meter m = meter_start();

    for (int i = 0; i < n; i++) {
        struct nvml *h;

        smi_result_reset(r);
        if (nvml_open(&h, &err) < 0 || nvml_collect(h, r, &err) < 0)
            fprintf(stderr, "bench_discovery: %s\n", err.msg);
        nvml_close(h);
    }
    report("nvml reopen", m, n, r);
}

typedef int (*parse_fn)(const char *, size_t, struct smi_result *, struct app_err *);

static void spawn_parse(const char *const argv[], parse_fn fn, struct smi_result *r)
{
    struct exec_result res;
    struct app_err err;

    if (exec_run(argv, TIMEOUT_MS, &res, &err) < 0 || res.status != 0)
        fprintf(stderr, "bench_discovery: %s: %s\n", argv[0], err.msg);
    else if (fn(res.out, res.out_len, r, &err) < 0)
        fprintf(stderr, "bench_discovery: parse: %s\n", err.msg);
    exec_result_fini(&res);
}

static void bench_smi(int n, const char *smi, struct smi_result *r)
{
    const char *const table[] = {smi, NULL};
    const char *const gpu[] = {smi,
                               "--query-gpu=index,uuid,name,utilization.gpu,memory.used,"
                               "memory.total,power.draw,temperature.gpu",
                               "--format=csv,noheader,nounits", NULL};
    const char *const apps[] = {smi, "--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
                                "--format=csv,noheader,nounits", NULL};
    struct meter m = meter_start();

    for (int i = 0; i < n; i++) {
        smi_result_reset(r);
        spawn_parse(table, nvsmi_parse_table, r);
    }
    report("smi table", m, n, r);
    m = meter_start();
    for (int i = 0; i < n; i++) {
        smi_result_reset(r);
        spawn_parse(gpu, nvsmi_parse_query_gpu, r);
        spawn_parse(apps, nvsmi_parse_query_apps, r);
    }
    report("smi queries", m, n, r);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 300;
    const char *smi = getenv("BENCH_FAKE_SMI") ? getenv("BENCH_FAKE_SMI") : BENCH_FAKE_SMI;
    struct smi_result r;

    if (n <= 0)
        n = 300;
    setup_env();
    smi_result_init(&r);
    printf("bench_discovery: %d refreshes per row (nvml kept: %d); fixtures %s, %s, %s\n", n,
           n * 10, GPU_CSV, APPS_CSV, TABLE);
    printf("%-13s %10s %10s\n", "source", "wall us", "CPU us");
    if (bench_nvml_kept(n * 10, &r) == 0)
        bench_nvml_reopen(n, &r);
    bench_smi(n, smi, &r);
    smi_result_fini(&r);
    return 0;
}
