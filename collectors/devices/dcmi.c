/* Ascend DCMI through dlopen: our own copies of the few structs, entry points looked up by
 * name with the older names as fallbacks (see docs devices.md 2.4; the file search and the
 * binding are dlib.c's).
 *
 * Owns one dlopen handle (mapped RTLD_NODELETE: DCMI has no shutdown, so it is never
 * unmapped) and the chip list read at open: card ids from dcmi_get_card_num_list (or the older
 * dcmi_get_card_list), chips per card from dcmi_get_device_id_in_card (NPU chips only; the
 * MCU and CPU are counted separately there) or else dcmi_get_device_num_in_card. Per chip it
 * keeps the static facts (name, logic and physical id, read once) and a bit per call that
 * answered -8255 "not supported", which is then never asked again; and a scratch array for
 * process lists, far larger than the 64 entries one call returns (the call is not told its
 * size).
 *
 * Threads: every call into libdcmi happens with dcmi_lock held (nputop does the same: DCMI's
 * thread safety is not documented); the lock is held for one chip's calls at a time and
 * released before records are appended to the caller's result. A handle is used by one
 * thread at a time. */
#include "dcmi.h"

#include "dlib.h"
#include "ranktop/base/util.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DCMI_OK 0
#define DCMI_ERR_PERM (-8002)
#define DCMI_ERR_UNSUPPORTED (-8255)
#define DCMI_MAX_CARDS 64
#define DCMI_MAX_CHIPS 16   /* per card; A3 and 310P Duo have 2 */
#define DCMI_PROC_ROOM 1024 /* MAX_PROC_NUM_IN_DEVICE is 64, but the call is not told our size */
#define DCMI_UTIL_AICORE 2  /* dcmi_get_device_utilization_rate input_type */
#define DCMI_CANDIDATES 10  /* 3 variables x 2 folders, 4 fixed places */

/* struct dcmi_hbm_info (sizes in MB). */
struct dcmi_hbm {
    unsigned long long size;
    unsigned int freq;
    unsigned long long usage;
    int temp;
    unsigned int bw_util;
};

/* struct dcmi_get_memory_info_stru (sizes in MB). */
struct dcmi_mem_v3 {
    unsigned long long size, available;
    unsigned int freq;
    unsigned long hugepage_size, hugepages_total, hugepages_free;
    unsigned int util;
    unsigned char reserve[60];
};

/* struct dcmi_proc_mem_info (memory in bytes). */
struct dcmi_proc {
    int pid;
    unsigned long mem;
};

/* struct dcmi_chip_info_v2. */
struct dcmi_chip_v2 {
    unsigned char type[32], name[32], ver[32];
    unsigned int aicore_cnt;
    unsigned char npu_name[32];
};

_Static_assert(sizeof(struct dcmi_hbm) == 32, "dcmi_hbm_info layout");
_Static_assert(sizeof(struct dcmi_proc) == 16, "dcmi_proc_mem_info layout");

/* One bit per optional call, set when a chip answered "not supported". */
enum dcmi_call {
    CALL_UTIL = 1u << 0,
    CALL_HBM = 1u << 1,
    CALL_MEM = 1u << 2,
    CALL_TEMP = 1u << 3,
    CALL_POWER = 1u << 4,
    CALL_PROCS = 1u << 5,
    CALL_HEALTH = 1u << 6,
};

struct dcmi_chip {
    int card, chip;
    int logic_id, phy_id; /* -1 unknown */
    char name[64];        /* "" unknown */
    unsigned unsupported; /* enum dcmi_call bits */
};

struct dcmi {
    void *lib;
    char path[512];
    char driver[32];
    int (*init)(void);
    int (*cards)(int *, int *, int);
    int (*chips_id)(int, int *, int *, int *);
    int (*chips_num)(int, int *);
    int (*util)(int, int, int, unsigned int *);
    int (*hbm)(int, int, struct dcmi_hbm *);
    int (*mem_v3)(int, int, struct dcmi_mem_v3 *);
    int (*temp)(int, int, int *);
    int (*power)(int, int, int *);
    int (*procs)(int, int, struct dcmi_proc *, int *);
    int (*chip_info)(int, int, struct dcmi_chip_v2 *);
    int (*health)(int, int, unsigned int *);
    int (*logic_id)(int *, int, int);
    int (*phy_id)(unsigned int, unsigned int *);
    int (*driver_version)(char *, unsigned int);
    const char *cards_sym;
    struct dcmi_chip *chips;
    size_t nchips;
    struct dcmi_proc scratch[DCMI_PROC_ROOM]; /* scratch for one chip's process list */
};

static pthread_mutex_t dcmi_lock = PTHREAD_MUTEX_INITIALIZER;

/* The names of dcmi_interface_api.h's error codes (DCMI_ERROR_CODE_BASE - n). */
static const char *errname(int rc)
{
    switch (rc) {
    case -8001:
        return "invalid parameter";
    case DCMI_ERR_PERM:
        return "operation not permitted";
    case -8005:
        return "internal error";
    case -8006:
        return "timed out";
    case -8007:
        return "invalid device id";
    case -8008:
        return "device does not exist";
    case -8009:
        return "ioctl failed (is the driver loaded?)";
    case -8012:
        return "not ready";
    case -8013:
        return "not supported in a container";
    case -8017:
        return "upgrading";
    case -8020:
        return "resource occupied";
    case DCMI_ERR_UNSUPPORTED:
        return "not supported";
    default:
        return "error";
    }
}

static int dcmi_fail(const struct dcmi *d, const char *call, int rc, struct app_err *err)
{
    return app_err_set(err, rc == DCMI_ERR_PERM ? APP_E_PERM : APP_E_IO, "DCMI (%s): %s: %s (%d)",
                       d->path, call, errname(rc), rc);
}

static const struct dlib_spec dcmi_spec = {
    .who = "DCMI",
    .env = "RANKTOP_DCMI_LIB",
    .flags = RTLD_NODELETE,
    .fallback = "libdcmi.so",
    .hint = " (no Ascend driver; set RANKTOP_DCMI_LIB?)",
    .what = "a DCMI library",
};

/* Looks up every entry point, the older names as fallbacks. dcmi_init is blamed first; the
 * chip count is required in one of its two forms, which the table cannot say, so it is
 * checked after (and blamed before the card list, as it always was). */
static int load_all(struct dcmi *d, struct app_err *err)
{
    const struct dlib_sym syms[] = {
        {&d->init, DLIB_NAMES("dcmi_init"), "dcmi_init", NULL},
        {&d->cards, DLIB_NAMES("dcmi_get_card_num_list", "dcmi_get_card_list"),
         "dcmi_get_card_num_list", &d->cards_sym},
        {&d->chips_id, DLIB_NAMES("dcmi_get_device_id_in_card"), NULL, NULL},
        {&d->chips_num, DLIB_NAMES("dcmi_get_device_num_in_card"), NULL, NULL},
        {&d->util, DLIB_NAMES("dcmi_get_device_utilization_rate"), NULL, NULL},
        {&d->hbm, DLIB_NAMES("dcmi_get_device_hbm_info", "dcmi_get_hbm_info"), NULL, NULL},
        {&d->mem_v3, DLIB_NAMES("dcmi_get_device_memory_info_v3"), NULL, NULL},
        {&d->temp, DLIB_NAMES("dcmi_get_device_temperature"), NULL, NULL},
        {&d->power, DLIB_NAMES("dcmi_get_device_power_info"), NULL, NULL},
        {&d->procs, DLIB_NAMES("dcmi_get_device_resource_info"), NULL, NULL},
        {&d->chip_info, DLIB_NAMES("dcmi_get_device_chip_info_v2"), NULL, NULL},
        {&d->health, DLIB_NAMES("dcmi_get_device_health"), NULL, NULL},
        {&d->logic_id, DLIB_NAMES("dcmi_get_device_logic_id"), NULL, NULL},
        {&d->phy_id, DLIB_NAMES("dcmi_get_device_phyid_from_logicid"), NULL, NULL},
        {&d->driver_version, DLIB_NAMES("dcmi_get_driver_version"), NULL, NULL},
    };
    const char *missing = dlib_bind(d->lib, syms, sizeof(syms) / sizeof(syms[0]));

    if (d->init && !d->chips_id && !d->chips_num)
        missing = "dcmi_get_device_num_in_card";
    if (missing)
        return dlib_missing(&dcmi_spec, d->path, missing, err);
    return 0;
}

/* The search path: each of the Ascend variables' lib64/driver/ and lib64/ (empty when the
 * variable is unset), then the driver's fixed places and the loader's own path. */
static void candidates(char paths[][512], const char *list[], size_t n)
{
    static const char *const envs[] = {"ASCEND_DRIVER_HOME", "ASCEND_INSTALL_PATH",
                                       "ASCEND_HOME_PATH"};
    static const char *const subs[] = {"lib64/driver/libdcmi.so", "lib64/libdcmi.so"};
    static const char *const fixed[] = {"/usr/local/Ascend/driver/lib64/driver/libdcmi.so",
                                        "/usr/local/Ascend/driver/lib64/libdcmi.so",
                                        "/usr/local/dcmi/libdcmi.so", "libdcmi.so"};
    const size_t nenv = 3 * 2;

    for (size_t i = 0; i < n; i++) {
        const char *root = i < nenv ? getenv(envs[i / 2]) : NULL;

        paths[i][0] = '\0';
        if (i >= nenv)
            snprintf(paths[i], 512, "%s", fixed[i - nenv]);
        else if (root && *root)
            snprintf(paths[i], 512, "%s/%s", root, subs[i % 2]);
        list[i] = paths[i];
    }
}

static int open_lib(struct dcmi *d, struct app_err *err)
{
    char paths[DCMI_CANDIDATES][512];
    const char *list[DCMI_CANDIDATES];

    candidates(paths, list, DCMI_CANDIDATES);
    return dlib_open(&dcmi_spec, list, DCMI_CANDIDATES, &d->lib, d->path, sizeof(d->path), err);
}

/* Chips of one card: NPU chips only when dcmi_get_device_id_in_card is there. */
static int chips_in_card(struct dcmi *d, int card, int *n)
{
    int mcu = -1, cpu = -1, rc = DCMI_ERR_UNSUPPORTED;

    if (d->chips_id)
        rc = d->chips_id(card, n, &mcu, &cpu);
    if (rc != DCMI_OK && d->chips_num)
        rc = d->chips_num(card, n);
    return rc;
}

static void add_chip(struct dcmi *d, int card, int chip)
{
    struct dcmi_chip *c;

    d->chips = x_reallocarray(d->chips, d->nchips + 1, sizeof(*d->chips));
    c = &d->chips[d->nchips++];
    memset(c, 0, sizeof(*c));
    c->card = card;
    c->chip = chip;
    c->logic_id = c->phy_id = -1;
}

/* Lists every chip; called with dcmi_lock held. */
static int enumerate(struct dcmi *d, struct app_err *err)
{
    int list[DCMI_MAX_CARDS], ncards = 0, rc;

    rc = d->cards(&ncards, list, DCMI_MAX_CARDS);
    if (rc != DCMI_OK)
        return dcmi_fail(d, d->cards_sym, rc, err);
    if (ncards > DCMI_MAX_CARDS)
        ncards = DCMI_MAX_CARDS;
    for (int i = 0; i < ncards; i++) {
        int n = 0;

        rc = chips_in_card(d, list[i], &n);
        if (rc != DCMI_OK)
            return dcmi_fail(d, "dcmi_get_device_id_in_card", rc, err);
        for (int chip = 0; chip < n && chip < DCMI_MAX_CHIPS; chip++)
            add_chip(d, list[i], chip);
    }
    return 0;
}

static void copy_name(char *dst, size_t cap, const unsigned char *src, size_t len)
{
    size_t n = strnlen((const char *)src, len);

    while (n && src[n - 1] == ' ')
        n--;
    snprintf(dst, cap, "%.*s", (int)n, (const char *)src);
}

/* Facts that do not change: name, logic id, physical id. Called with dcmi_lock held. */
static void read_static(struct dcmi *d, struct dcmi_chip *c)
{
    struct dcmi_chip_v2 info;
    unsigned int phy = 0;

    memset(&info, 0, sizeof(info));
    if (d->chip_info && d->chip_info(c->card, c->chip, &info) == DCMI_OK) {
        copy_name(c->name, sizeof(c->name), info.name, sizeof(info.name));
        if (!c->name[0])
            copy_name(c->name, sizeof(c->name), info.npu_name, sizeof(info.npu_name));
    }
    if (d->logic_id && d->logic_id(&c->logic_id, c->card, c->chip) != DCMI_OK)
        c->logic_id = -1;
    if (c->logic_id >= 0 && d->phy_id && d->phy_id((unsigned)c->logic_id, &phy) == DCMI_OK)
        c->phy_id = (int)phy;
}

int dcmi_open(struct dcmi **out, struct app_err *err)
{
    struct dcmi *d = x_calloc(1, sizeof(*d));
    int rc;

    *out = NULL;
    rc = open_lib(d, err);
    if (rc == 0)
        rc = load_all(d, err);
    pthread_mutex_lock(&dcmi_lock);
    if (rc == 0 && (rc = d->init()) != DCMI_OK)
        rc = dcmi_fail(d, "dcmi_init", rc, err);
    if (rc == 0)
        rc = enumerate(d, err);
    for (size_t i = 0; rc == 0 && i < d->nchips; i++)
        read_static(d, &d->chips[i]);
    if (rc == 0 && d->driver_version) {
        char buf[256] = "";

        if (d->driver_version(buf, sizeof(buf)) == DCMI_OK)
            snprintf(d->driver, sizeof(d->driver), "%.*s", (int)sizeof(d->driver) - 1, buf);
    }
    pthread_mutex_unlock(&dcmi_lock);
    if (rc < 0) {
        dcmi_close(d);
        return rc;
    }
    *out = d;
    return 0;
}

const char *dcmi_path(const struct dcmi *d)
{
    return d->path;
}

void dcmi_close(struct dcmi *d)
{
    if (!d)
        return;
    if (d->lib)
        dlclose(d->lib);
    free(d->chips);
    free(d);
}

/* Whether an optional call may be made; a "not supported" answer marks it off for good. */
static bool may(const struct dcmi_chip *c, bool have, unsigned call)
{
    return have && !(c->unsupported & call);
}

static bool answered(struct dcmi_chip *c, unsigned call, int rc)
{
    if (rc == DCMI_ERR_UNSUPPORTED)
        c->unsupported |= call;
    return rc == DCMI_OK;
}

/* HBM where the chip has it; DDR (memory_info_v3) only for chips without HBM. */
static void read_memory(struct dcmi *d, struct dcmi_chip *c, struct smi_device *v)
{
    struct dcmi_hbm h;
    struct dcmi_mem_v3 m;

    memset(&h, 0, sizeof(h));
    if (may(c, d->hbm != NULL, CALL_HBM) && answered(c, CALL_HBM, d->hbm(c->card, c->chip, &h)) &&
        h.size > 0) {
        v->hbm_total_mb = v->mem_total_mb = (int64_t)h.size;
        v->hbm_used_mb = v->mem_used_mb = (int64_t)h.usage;
        v->valid |= SMI_DEV_HBM_TOTAL | SMI_DEV_HBM_USED | SMI_DEV_MEM_TOTAL | SMI_DEV_MEM_USED;
        return;
    }
    memset(&m, 0, sizeof(m));
    if (may(c, d->mem_v3 != NULL, CALL_MEM) &&
        answered(c, CALL_MEM, d->mem_v3(c->card, c->chip, &m)) && m.size > 0 &&
        m.available <= m.size) {
        v->ddr_total_mb = v->mem_total_mb = (int64_t)m.size;
        v->ddr_used_mb = v->mem_used_mb = (int64_t)(m.size - m.available);
        v->valid |= SMI_DEV_DDR_TOTAL | SMI_DEV_DDR_USED | SMI_DEV_MEM_TOTAL | SMI_DEV_MEM_USED;
    }
}

static void read_health(struct dcmi *d, struct dcmi_chip *c, struct smi_device *v)
{
    static const char *const names[] = {"OK", "Warning", "Alarm", "Critical"};
    unsigned int h = 0;

    if (may(c, d->health != NULL, CALL_HEALTH) &&
        answered(c, CALL_HEALTH, d->health(c->card, c->chip, &h)) && h < 4) {
        snprintf(v->health, sizeof(v->health), "%s", names[h]);
        v->valid |= SMI_DEV_HEALTH;
    }
}

/* Utilisation (AICore), temperature, power. */
static void read_sensors(struct dcmi *d, struct dcmi_chip *c, struct smi_device *v)
{
    unsigned int u = 0;
    int t = 0, p = 0;

    if (may(c, d->util != NULL, CALL_UTIL) &&
        answered(c, CALL_UTIL, d->util(c->card, c->chip, DCMI_UTIL_AICORE, &u)) && u <= 100) {
        v->util_pct = u;
        v->valid |= SMI_DEV_UTIL;
    }
    if (may(c, d->temp != NULL, CALL_TEMP) &&
        answered(c, CALL_TEMP, d->temp(c->card, c->chip, &t))) {
        v->temp_c = t;
        v->valid |= SMI_DEV_TEMP;
    }
    if (may(c, d->power != NULL, CALL_POWER) &&
        answered(c, CALL_POWER, d->power(c->card, c->chip, &p)) && p >= 0) {
        v->power_w = p / 10.0; /* tenths of a watt */
        v->valid |= SMI_DEV_POWER;
    }
}

static void fill_device(const struct dcmi_chip *c, struct smi_device *v)
{
    smi_device_init(v, SMI_KIND_NPU);
    v->index = c->card;
    v->chip = c->chip;
    v->valid |= SMI_DEV_INDEX | SMI_DEV_CHIP;
    if (c->logic_id >= 0)
        v->logic_id = c->logic_id, v->valid |= SMI_DEV_LOGIC_ID;
    if (c->phy_id >= 0)
        v->phy_id = c->phy_id, v->valid |= SMI_DEV_PHY_ID;
    if (c->name[0]) {
        snprintf(v->name, sizeof(v->name), "%s", c->name);
        v->valid |= SMI_DEV_NAME;
    }
}

/* One chip's calls, under the lock; the caller appends the records afterwards. Returns the
 * process count (-1 = the list could not be read, rc in *prc). */
static int read_chip(struct dcmi *d, struct dcmi_chip *c, struct smi_device *v,
                     struct dcmi_proc *procs, int *prc)
{
    int n = 0;

    pthread_mutex_lock(&dcmi_lock);
    fill_device(c, v);
    read_health(d, c, v);
    read_sensors(d, c, v);
    read_memory(d, c, v);
    *prc = DCMI_OK;
    if (may(c, d->procs != NULL, CALL_PROCS)) {
        *prc = d->procs(c->card, c->chip, procs, &n);
        if (!answered(c, CALL_PROCS, *prc))
            n = *prc == DCMI_ERR_UNSUPPORTED ? 0 : -1;
    }
    pthread_mutex_unlock(&dcmi_lock);
    return n < 0 ? -1 : n > DCMI_PROC_ROOM ? DCMI_PROC_ROOM : n;
}

static void add_proc(struct smi_result *r, const struct dcmi_chip *c, const struct dcmi_proc *e)
{
    struct smi_proc p;

    smi_proc_init(&p, SMI_KIND_NPU);
    p.pid = e->pid;
    p.dev_index = c->card;
    p.chip = c->chip;
    p.mem_mb = (int64_t)(e->mem / 1024 / 1024); /* bytes, shown in MB as npu-smi does */
    p.valid |= SMI_PROC_PID | SMI_PROC_DEV | SMI_PROC_CHIP | SMI_PROC_MEM;
    smi_result_add_proc(r, &p);
}

int dcmi_collect(struct dcmi *d, struct smi_result *r, struct app_err *err)
{
    (void)err;
    snprintf(r->driver_version, sizeof(r->driver_version), "%s", d->driver);
    for (size_t i = 0; i < d->nchips; i++) {
        struct dcmi_chip *c = &d->chips[i];
        struct smi_device v;
        int prc, n;

        memset(d->scratch, 0, sizeof(d->scratch));
        n = read_chip(d, c, &v, d->scratch, &prc);
        smi_result_add_device(r, &v);
        if (n < 0 && !r->msg[0])
            snprintf(r->msg, sizeof(r->msg),
                     "NPU %d chip %d: dcmi_get_device_resource_info: %s (%d)", c->card, c->chip,
                     errname(prc), prc);
        for (int k = 0; k < n; k++)
            if (d->scratch[k].pid > 0)
                add_proc(r, c, &d->scratch[k]);
    }
    r->status = 0;
    return 0;
}
