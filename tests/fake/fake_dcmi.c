/* A stand-in libdcmi.so that serves values from a small key=value file through the DCMI ABI.
 *
 * dcmi_init reads the file named by FAKE_DCMI_FILE: "#" comments, `driver=VERSION`, and per
 * chip `CARD.CHIP.KEY=VALUE` with KEY one of name, health (0 OK .. 3), aicore (%), hbm_total,
 * hbm_used, ddr_total, ddr_used (MB), temp (C), power (tenths of a watt), logic, phy, and
 * proc=PID:MB (repeatable; served in bytes as DCMI does). A key that is absent, or has the
 * value "unsupported", makes its call answer -8255 (DCMI_ERR_CODE_NOT_SUPPORT), the way a
 * 310P answers for power or HBM. Cards are listed in the order they first appear.
 *
 * Knobs: FAKE_DCMI_INIT_ERROR=N makes dcmi_init return N; FAKE_DCMI_PID_MAP="old:new,..."
 * rewrites PIDs. fake_dcmi_calls(name) (not DCMI) tells how often an entry point was called,
 * so tests can see that unsupported calls are not repeated. Built with -DFAKE_DCMI_OLD it
 * exports only the older names (dcmi_get_card_list, dcmi_get_hbm_info, no
 * dcmi_get_device_id_in_card). Single-threaded test use only. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CHIPS 64
#define MAX_PROCS 64
#define UNSUPPORTED (-8255)
#define BAD_PARAM (-8001)
#define NO_DEVICE (-8008)
#define NONE (-1LL) /* key absent or "unsupported" */

enum field {
    F_HEALTH,
    F_AICORE,
    F_HBM_T,
    F_HBM_U,
    F_DDR_T,
    F_DDR_U,
    F_TEMP,
    F_POWER,
    F_LOGIC,
    F_PHY,
    F_N
};

static const char *const field_names[F_N] = {"health",    "aicore",   "hbm_total", "hbm_used",
                                             "ddr_total", "ddr_used", "temp",      "power",
                                             "logic",     "phy"};

struct fchip {
    int card, chip;
    char name[32];
    long long f[F_N];
    int npids;
    int pids[MAX_PROCS];
    unsigned long mb[MAX_PROCS];
};

struct hbm_info {
    unsigned long long size;
    unsigned int freq;
    unsigned long long usage;
    int temp;
    unsigned int bw;
};

struct mem_v3 {
    unsigned long long size, available;
    unsigned int freq;
    unsigned long hp_size, hp_total, hp_free;
    unsigned int util;
    unsigned char reserve[60];
};

struct proc_mem {
    int pid;
    unsigned long mem;
};

struct chip_info_v2 {
    unsigned char type[32], name[32], ver[32];
    unsigned int aicore_cnt;
    unsigned char npu_name[32];
};

/* The exported ABI (prototypes keep -Wmissing-prototypes quiet). */
int dcmi_init(void);
int dcmi_get_driver_version(char *buf, unsigned int len);
int dcmi_get_device_num_in_card(int card, int *n);
int dcmi_get_device_utilization_rate(int card, int chip, int type, unsigned int *rate);
int dcmi_get_device_memory_info_v3(int card, int chip, struct mem_v3 *m);
int dcmi_get_device_temperature(int card, int chip, int *t);
int dcmi_get_device_power_info(int card, int chip, int *p);
int dcmi_get_device_resource_info(int card, int chip, struct proc_mem *p, int *n);
int dcmi_get_device_chip_info_v2(int card, int chip, struct chip_info_v2 *info);
int dcmi_get_device_health(int card, int chip, unsigned int *h);
int dcmi_get_device_logic_id(int *logic, int card, int chip);
int dcmi_get_device_phyid_from_logicid(unsigned int logic, unsigned int *phy);
unsigned fake_dcmi_calls(const char *name);
#ifdef FAKE_DCMI_OLD
int dcmi_get_card_list(int *n, int *list, int len);
int dcmi_get_hbm_info(int card, int chip, struct hbm_info *h);
#else
int dcmi_get_card_num_list(int *n, int *list, int len);
int dcmi_get_device_id_in_card(int card, int *max, int *mcu, int *cpu);
int dcmi_get_device_hbm_info(int card, int chip, struct hbm_info *h);
#endif

static struct fchip chips[MAX_CHIPS];
static int nchips;
static char driver[64];

/* Call counters for fake_dcmi_calls. */
static struct {
    const char *name;
    unsigned n;
} calls[32];

static void count(const char *name)
{
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
        if (!calls[i].name)
            calls[i].name = name;
        if (strcmp(calls[i].name, name) == 0) {
            calls[i].n++;
            return;
        }
    }
}

unsigned fake_dcmi_calls(const char *name)
{
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]) && calls[i].name; i++)
        if (strcmp(calls[i].name, name) == 0)
            return calls[i].n;
    return 0;
}

static int map_pid(int pid)
{
    const char *m = getenv("FAKE_DCMI_PID_MAP");

    while (m && *m) {
        char *end;
        long from = strtol(m, &end, 10), to;

        if (*end != ':')
            break;
        to = strtol(end + 1, &end, 10);
        if (from == pid)
            return (int)to;
        if (*end != ',')
            break;
        m = end + 1;
    }
    return pid;
}

static struct fchip *find(int card, int chip, bool create)
{
    for (int i = 0; i < nchips; i++)
        if (chips[i].card == card && chips[i].chip == chip)
            return &chips[i];
    if (!create || nchips == MAX_CHIPS)
        return NULL;
    memset(&chips[nchips], 0, sizeof(chips[0]));
    chips[nchips].card = card;
    chips[nchips].chip = chip;
    for (int f = 0; f < F_N; f++)
        chips[nchips].f[f] = NONE;
    return &chips[nchips++];
}

static void set_key(struct fchip *c, const char *key, const char *val)
{
    if (strcmp(key, "name") == 0) {
        snprintf(c->name, sizeof(c->name), "%s", val);
        return;
    }
    if (strcmp(key, "proc") == 0) {
        if (c->npids < MAX_PROCS && strchr(val, ':')) {
            c->pids[c->npids] = map_pid(atoi(val));
            c->mb[c->npids++] = strtoul(strchr(val, ':') + 1, NULL, 10);
        }
        return;
    }
    for (int f = 0; f < F_N; f++)
        if (strcmp(key, field_names[f]) == 0)
            c->f[f] = strcmp(val, "unsupported") == 0 ? NONE : atoll(val);
}

static void parse_line(char *line)
{
    char *eq = strchr(line, '='), *dot1, *dot2;
    struct fchip *c;

    line[strcspn(line, "\r\n")] = '\0';
    if (!eq || *line == '#')
        return;
    *eq = '\0';
    if (strcmp(line, "driver") == 0) {
        snprintf(driver, sizeof(driver), "%s", eq + 1);
        return;
    }
    dot1 = strchr(line, '.');
    dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
    if (!dot2)
        return;
    c = find(atoi(line), atoi(dot1 + 1), true);
    if (c)
        set_key(c, dot2 + 1, eq + 1);
}

int dcmi_init(void)
{
    const char *path = getenv("FAKE_DCMI_FILE");
    const char *fail = getenv("FAKE_DCMI_INIT_ERROR");
    char line[512];
    FILE *f;

    count(__func__);
    if (fail && *fail)
        return atoi(fail);
    nchips = 0;
    driver[0] = '\0';
    if (!path || !*path)
        return 0;
    f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "fake_dcmi: cannot open %s\n", path);
        return -8005;
    }
    while (fgets(line, sizeof(line), f))
        parse_line(line);
    fclose(f);
    return 0;
}

int dcmi_get_driver_version(char *buf, unsigned int len)
{
    count(__func__);
    if (!driver[0])
        return UNSUPPORTED;
    snprintf(buf, len, "%s", driver);
    return 0;
}

static int card_list(int *n, int *list, int len)
{
    *n = 0;
    for (int i = 0; i < nchips; i++) {
        bool seen = false;

        for (int k = 0; k < *n; k++)
            seen |= list[k] == chips[i].card;
        if (!seen && *n < len)
            list[(*n)++] = chips[i].card;
    }
    return 0;
}

int dcmi_get_device_num_in_card(int card, int *n)
{
    count(__func__);
    *n = 0;
    for (int i = 0; i < nchips; i++)
        *n += chips[i].card == card;
    return *n ? 0 : NO_DEVICE;
}

/* One numeric field of one chip, or the error its call answers. */
static int get(int card, int chip, enum field f, long long *v)
{
    struct fchip *c = find(card, chip, false);

    if (!c)
        return NO_DEVICE;
    if (c->f[f] == NONE)
        return UNSUPPORTED;
    *v = c->f[f];
    return 0;
}

int dcmi_get_device_utilization_rate(int card, int chip, int type, unsigned int *rate)
{
    long long v = 0;
    int rc;

    count(__func__);
    if (type != 2)
        return UNSUPPORTED;
    rc = get(card, chip, F_AICORE, &v);
    if (rc == 0)
        *rate = (unsigned int)v;
    return rc;
}

static int hbm(int card, int chip, struct hbm_info *h)
{
    long long t = 0, u = 0;
    int rc = get(card, chip, F_HBM_T, &t);

    if (rc == 0)
        rc = get(card, chip, F_HBM_U, &u);
    if (rc == 0) {
        memset(h, 0, sizeof(*h));
        h->size = (unsigned long long)t;
        h->usage = (unsigned long long)u;
    }
    return rc;
}

int dcmi_get_device_memory_info_v3(int card, int chip, struct mem_v3 *m)
{
    long long t = 0, u = 0;
    int rc;

    count(__func__);
    rc = get(card, chip, F_DDR_T, &t);
    if (rc == 0)
        rc = get(card, chip, F_DDR_U, &u);
    if (rc == 0) {
        memset(m, 0, sizeof(*m));
        m->size = (unsigned long long)t;
        m->available = (unsigned long long)(t - u);
    }
    return rc;
}

int dcmi_get_device_temperature(int card, int chip, int *t)
{
    long long v = 0;
    int rc;

    count(__func__);
    rc = get(card, chip, F_TEMP, &v);
    if (rc == 0)
        *t = (int)v;
    return rc;
}

int dcmi_get_device_power_info(int card, int chip, int *p)
{
    long long v = 0;
    int rc;

    count(__func__);
    rc = get(card, chip, F_POWER, &v);
    if (rc == 0)
        *p = (int)v;
    return rc;
}

int dcmi_get_device_health(int card, int chip, unsigned int *h)
{
    long long v = 0;
    int rc;

    count(__func__);
    rc = get(card, chip, F_HEALTH, &v);
    if (rc == 0)
        *h = (unsigned int)v;
    return rc;
}

/* The caller's array holds MAX_PROC_NUM_IN_DEVICE (64) entries; *n is only written. */
int dcmi_get_device_resource_info(int card, int chip, struct proc_mem *p, int *n)
{
    struct fchip *c = find(card, chip, false);

    count(__func__);
    if (!c)
        return NO_DEVICE;
    for (int i = 0; i < c->npids; i++) {
        p[i].pid = c->pids[i];
        p[i].mem = c->mb[i] * 1024ul * 1024ul;
    }
    *n = c->npids;
    return 0;
}

int dcmi_get_device_chip_info_v2(int card, int chip, struct chip_info_v2 *info)
{
    struct fchip *c = find(card, chip, false);

    count(__func__);
    if (!c)
        return NO_DEVICE;
    memset(info, 0, sizeof(*info));
    snprintf((char *)info->type, sizeof(info->type), "%s", "Ascend");
    snprintf((char *)info->name, sizeof(info->name), "%s", c->name);
    return 0;
}

int dcmi_get_device_logic_id(int *logic, int card, int chip)
{
    long long v = 0;
    int rc;

    count(__func__);
    rc = get(card, chip, F_LOGIC, &v);
    if (rc == 0)
        *logic = (int)v;
    return rc;
}

int dcmi_get_device_phyid_from_logicid(unsigned int logic, unsigned int *phy)
{
    count(__func__);
    for (int i = 0; i < nchips; i++) {
        if (chips[i].f[F_LOGIC] == (long long)logic) {
            if (chips[i].f[F_PHY] == NONE)
                return UNSUPPORTED;
            *phy = (unsigned int)chips[i].f[F_PHY];
            return 0;
        }
    }
    return BAD_PARAM;
}

#ifdef FAKE_DCMI_OLD
int dcmi_get_card_list(int *n, int *list, int len)
{
    count(__func__);
    return card_list(n, list, len);
}

int dcmi_get_hbm_info(int card, int chip, struct hbm_info *h)
{
    count(__func__);
    return hbm(card, chip, h);
}
#else
int dcmi_get_card_num_list(int *n, int *list, int len)
{
    count(__func__);
    return card_list(n, list, len);
}

int dcmi_get_device_id_in_card(int card, int *max, int *mcu, int *cpu)
{
    count(__func__);
    *mcu = *cpu = -1;
    return dcmi_get_device_num_in_card(card, max);
}

int dcmi_get_device_hbm_info(int card, int chip, struct hbm_info *h)
{
    count(__func__);
    return hbm(card, chip, h);
}
#endif
