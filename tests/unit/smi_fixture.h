/* Fixture-driven checks shared by check_nvsmi_parse.c and check_npusmi_parse.c.
 *
 * A fixture is tests/data/<tool>/<name>.txt, the tool's output byte for byte, with a sidecar
 * <name>.txt.expected of "key=value" lines read by eye from the fixture ("!" = unknown; "#"
 * starts a comment). Keys: parser (which parser reads the file), prefix=no (a cut copy of
 * this file need not parse to a prefix of the whole: several snapshots), status (0 or an APP_E_
 * name), msg_contains, devices, procs, maps, skipped, tool_version, driver_version, cuda_version,
 * devN.<field>, procN.<field>, mapN.<field>; the field names are those of the tables below.
 * Besides the sidecar check, each fixture is cut at many points and randomly damaged, and the
 * parser must never crash and must return either an error or a sane (prefix) result. Buffers
 * are exact-size heap copies, so AddressSanitizer sees any read past the end. Header-only:
 * every function here is used by both test programs. */
#ifndef RANKTOP_TEST_SMI_FIXTURE_H
#define RANKTOP_TEST_SMI_FIXTURE_H

#include <check.h>
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ranktop/devices/devices.h"
#include "ranktop/base/status.h"
#include "ranktop/base/util.h"

typedef int (*fx_parse_fn)(const char *buf, size_t len, struct smi_result *r, struct app_err *err);

struct fx_parser {
    const char *name; /* the sidecar's parser= value */
    fx_parse_fn fn;
    bool prefix_stable; /* a cut output parses to a prefix of the full result */
    bool ids;           /* every device record carries its index */
};

struct fx_list {
    char dir[4096];
    char **names; /* sorted *.txt file names */
    size_t n;
};

enum fx_type { FX_INT, FX_I64, FX_DBL, FX_STR, FX_KIND };

struct fx_field {
    const char *key;
    uint32_t bit; /* 0: always valid */
    enum fx_type type;
    size_t off;
    size_t size; /* FX_STR: array size */
};

#define FX_DEV(k, b, t, m)                                                                         \
    {                                                                                              \
        k, b, t, offsetof(struct smi_device, m), sizeof(((struct smi_device *)0)->m)               \
    }
#define FX_PROC(k, b, t, m)                                                                        \
    {                                                                                              \
        k, b, t, offsetof(struct smi_proc, m), sizeof(((struct smi_proc *)0)->m)                   \
    }
#define FX_MAP(k, b, t, m)                                                                         \
    {                                                                                              \
        k, b, t, offsetof(struct smi_chipmap, m), sizeof(((struct smi_chipmap *)0)->m)             \
    }

static const struct fx_field fx_dev_fields[] = {
    FX_DEV("kind", 0, FX_KIND, kind),
    FX_DEV("index", SMI_DEV_INDEX, FX_INT, index),
    FX_DEV("chip", SMI_DEV_CHIP, FX_INT, chip),
    FX_DEV("logic_id", SMI_DEV_LOGIC_ID, FX_INT, logic_id),
    FX_DEV("phy_id", SMI_DEV_PHY_ID, FX_INT, phy_id),
    FX_DEV("name", SMI_DEV_NAME, FX_STR, name),
    FX_DEV("uuid", SMI_DEV_UUID, FX_STR, uuid),
    FX_DEV("bus_id", SMI_DEV_BUS_ID, FX_STR, bus_id),
    FX_DEV("health", SMI_DEV_HEALTH, FX_STR, health),
    FX_DEV("util_pct", SMI_DEV_UTIL, FX_I64, util_pct),
    FX_DEV("mem_used_mb", SMI_DEV_MEM_USED, FX_I64, mem_used_mb),
    FX_DEV("mem_total_mb", SMI_DEV_MEM_TOTAL, FX_I64, mem_total_mb),
    FX_DEV("hbm_used_mb", SMI_DEV_HBM_USED, FX_I64, hbm_used_mb),
    FX_DEV("hbm_total_mb", SMI_DEV_HBM_TOTAL, FX_I64, hbm_total_mb),
    FX_DEV("ddr_used_mb", SMI_DEV_DDR_USED, FX_I64, ddr_used_mb),
    FX_DEV("ddr_total_mb", SMI_DEV_DDR_TOTAL, FX_I64, ddr_total_mb),
    FX_DEV("power_w", SMI_DEV_POWER, FX_DBL, power_w),
    FX_DEV("temp_c", SMI_DEV_TEMP, FX_I64, temp_c),
};

static const struct fx_field fx_proc_fields[] = {
    FX_PROC("kind", 0, FX_KIND, kind),
    FX_PROC("pid", SMI_PROC_PID, FX_INT, pid),
    FX_PROC("dev", SMI_PROC_DEV, FX_INT, dev_index),
    FX_PROC("chip", SMI_PROC_CHIP, FX_INT, chip),
    FX_PROC("container_pid", SMI_PROC_CONTAINER_PID, FX_INT, container_pid),
    FX_PROC("gi", SMI_PROC_GI, FX_INT, gi),
    FX_PROC("ci", SMI_PROC_CI, FX_INT, ci),
    FX_PROC("type", SMI_PROC_TYPE, FX_STR, type),
    FX_PROC("name", SMI_PROC_NAME, FX_STR, name),
    FX_PROC("uuid", SMI_PROC_UUID, FX_STR, gpu_uuid),
    FX_PROC("bus_id", SMI_PROC_BUS_ID, FX_STR, gpu_bus_id),
    FX_PROC("mem_mb", SMI_PROC_MEM, FX_I64, mem_mb),
    FX_PROC("sm_pct", SMI_PROC_SM, FX_I64, sm_pct),
    FX_PROC("memutil_pct", SMI_PROC_MEMUTIL, FX_I64, memutil_pct),
};

static const struct fx_field fx_map_fields[] = {
    FX_MAP("npu", SMI_DEV_INDEX, FX_INT, npu_id),
    FX_MAP("chip", SMI_DEV_CHIP, FX_INT, chip_id),
    FX_MAP("logic_id", SMI_DEV_LOGIC_ID, FX_INT, logic_id),
    FX_MAP("phy_id", SMI_DEV_PHY_ID, FX_INT, phy_id),
    FX_MAP("name", SMI_DEV_NAME, FX_STR, name),
};

#define FX_NFIELDS(a) (sizeof(a) / sizeof((a)[0]))

/* ---- fixture files ---- */

static int fx_cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void fx_list_load(struct fx_list *l, const char *tool)
{
    const char *root = getenv("RANKTOP_SRCDIR");
    struct dirent *e;
    DIR *d;

    snprintf(l->dir, sizeof(l->dir), "%s/tests/data/%s", root ? root : ".", tool);
    l->names = NULL;
    l->n = 0;
    d = opendir(l->dir);
    if (!d)
        return;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);

        if (n > 4 && strcmp(e->d_name + n - 4, ".txt") == 0) {
            l->names = x_reallocarray(l->names, l->n + 1, sizeof(*l->names));
            l->names[l->n++] = x_strdup(e->d_name);
        }
    }
    closedir(d);
    if (l->n)
        qsort(l->names, l->n, sizeof(*l->names), fx_cmp_names);
}

/* The whole file in an exact-size heap buffer (one byte for an empty file), or NULL. */
static char *fx_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, n = 0;

    if (!f)
        return NULL;
    for (;;) {
        if (n == cap)
            buf = x_reallocarray(buf, cap = cap ? cap * 2 : 4096, 1);
        size_t got = fread(buf + n, 1, cap - n, f);

        if (!got)
            break;
        n += got;
    }
    fclose(f);
    *len = n;
    return x_reallocarray(buf, n ? n : 1, 1);
}

static size_t fx_count_lines(const char *buf, size_t len)
{
    size_t n = 1;

    for (size_t i = 0; i < len; i++)
        n += buf[i] == '\n';
    return n;
}

/* ---- values as the sidecar writes them ---- */

static void fx_format(const void *rec, const struct fx_field *f, uint32_t valid, char *out,
                      size_t cap)
{
    const char *p = (const char *)rec + f->off;

    if (f->type == FX_KIND) {
        snprintf(out, cap, "%s", smi_kind_name(*(const enum smi_kind *)(const void *)p));
    } else if (f->bit && !(valid & f->bit)) {
        snprintf(out, cap, "!");
    } else if (f->type == FX_INT) {
        snprintf(out, cap, "%d", *(const int *)(const void *)p);
    } else if (f->type == FX_I64) {
        snprintf(out, cap, "%lld", (long long)*(const int64_t *)(const void *)p);
    } else if (f->type == FX_DBL) {
        snprintf(out, cap, "%g", *(const double *)(const void *)p);
    } else {
        snprintf(out, cap, "%s", p);
    }
}

/* "dev3.util_pct" against one record array. False when the key is not of that array. */
static bool fx_record_value(const char *key, const char *prefix, const void *base, size_t n,
                            size_t size, size_t valid_off, const struct fx_field *fields,
                            size_t nfields, char *out, size_t cap)
{
    size_t plen = strlen(prefix);
    char *dot;
    unsigned long i;

    if (strncmp(key, prefix, plen) != 0 || key[plen] < '0' || key[plen] > '9')
        return false;
    i = strtoul(key + plen, &dot, 10);
    if (*dot != '.')
        return false;
    if (i >= n) {
        snprintf(out, cap, "(no record %lu: only %zu)", i, n);
        return true;
    }
    for (size_t f = 0; f < nfields; f++) {
        if (strcmp(dot + 1, fields[f].key) == 0) {
            const char *rec = (const char *)base + i * size;

            fx_format(rec, &fields[f], *(const uint32_t *)(const void *)(rec + valid_off), out,
                      cap);
            return true;
        }
    }
    snprintf(out, cap, "(unknown field '%s')", dot + 1);
    return true;
}

static const char *fx_str_or_bang(const char *s)
{
    return s[0] ? s : "!";
}

/* The value of a sidecar key in r, or false for an unknown key. */
static bool fx_value(const struct smi_result *r, const char *key, char *out, size_t cap)
{
    if (!strcmp(key, "devices"))
        return snprintf(out, cap, "%zu", r->ndevs), true;
    if (!strcmp(key, "procs"))
        return snprintf(out, cap, "%zu", r->nprocs), true;
    if (!strcmp(key, "maps"))
        return snprintf(out, cap, "%zu", r->nmaps), true;
    if (!strcmp(key, "skipped"))
        return snprintf(out, cap, "%u", r->skipped), true;
    if (!strcmp(key, "tool_version"))
        return snprintf(out, cap, "%s", fx_str_or_bang(r->tool_version)), true;
    if (!strcmp(key, "driver_version"))
        return snprintf(out, cap, "%s", fx_str_or_bang(r->driver_version)), true;
    if (!strcmp(key, "cuda_version"))
        return snprintf(out, cap, "%s", fx_str_or_bang(r->cuda_version)), true;
    return fx_record_value(key, "dev", r->devs, r->ndevs, sizeof(*r->devs),
                           offsetof(struct smi_device, valid), fx_dev_fields,
                           FX_NFIELDS(fx_dev_fields), out, cap) ||
           fx_record_value(key, "proc", r->procs, r->nprocs, sizeof(*r->procs),
                           offsetof(struct smi_proc, valid), fx_proc_fields,
                           FX_NFIELDS(fx_proc_fields), out, cap) ||
           fx_record_value(key, "map", r->maps, r->nmaps, sizeof(*r->maps),
                           offsetof(struct smi_chipmap, valid), fx_map_fields,
                           FX_NFIELDS(fx_map_fields), out, cap);
}

static int fx_status_of(const char *s)
{
    static const struct {
        const char *name;
        int code;
    } names[] = {
        {"0", 0},
        {"APP_OK", APP_OK},
        {"APP_E_NOTFOUND", APP_E_NOTFOUND},
        {"APP_E_PERM", APP_E_PERM},
        {"APP_E_PARSE", APP_E_PARSE},
        {"APP_E_IO", APP_E_IO},
        {"APP_E_LIMIT", APP_E_LIMIT},
    };

    for (size_t i = 0; i < FX_NFIELDS(names); i++)
        if (!strcmp(s, names[i].name))
            return names[i].code;
    return 1; /* matches nothing */
}

/* ---- sidecars ---- */

struct fx_report {
    char text[8192];
    size_t len;
    unsigned checked;
};

static void fx_mismatch(struct fx_report *rep, const char *key, const char *want, const char *got)
{
    int n = snprintf(rep->text + rep->len, sizeof(rep->text) - rep->len,
                     "\n    %s: expected '%s', got '%s'", key, want, got);

    if (n > 0 && rep->len + (size_t)n < sizeof(rep->text))
        rep->len += (size_t)n;
}

static void fx_check_key(struct fx_report *rep, const struct smi_result *r, int rc,
                         const struct app_err *err, const char *key, const char *want)
{
    char got[512];

    rep->checked++;
    if (!strcmp(key, "parser") || !strcmp(key, "prefix"))
        return;
    if (!strcmp(key, "status")) {
        if (fx_status_of(want) != rc)
            snprintf(got, sizeof(got), "%d (%.400s)", rc, err->msg),
                fx_mismatch(rep, key, want, got);
    } else if (!strcmp(key, "msg_contains")) {
        if (!strstr(err->msg, want))
            fx_mismatch(rep, key, want, err->msg);
    } else if (!fx_value(r, key, got, sizeof(got))) {
        fx_mismatch(rep, key, want, "(unknown key)");
    } else if (strcmp(got, want) != 0) {
        fx_mismatch(rep, key, want, got);
    }
}

/* The value of key in name.expected (static storage), or NULL when absent. */
static const char *fx_sidecar_get(const char *dir, const char *name, const char *key)
{
    static char value[64];
    char path[8192], line[1024];
    size_t klen = strlen(key);
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s.expected", dir, name);
    f = fopen(path, "r");
    if (!f)
        return NULL;
    value[0] = '\0';
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, key, klen) && line[klen] == '=')
            sscanf(line + klen + 1, "%63s", value);
    fclose(f);
    return value[0] ? value : NULL;
}

static const char *fx_sidecar_parser(const char *dir, const char *name)
{
    return fx_sidecar_get(dir, name, "parser");
}

static void fx_check_sidecar(struct fx_report *rep, const char *path, const struct smi_result *r,
                             int rc, const struct app_err *err)
{
    char line[1024];
    FILE *f = fopen(path, "r");

    ck_assert_msg(f != NULL, "missing sidecar %s", path);
    while (fgets(line, sizeof(line), f)) {
        size_t n = strcspn(line, "\r\n");
        char *eq;

        line[n] = '\0';
        while (n && (line[n - 1] == ' ' || line[n - 1] == '\t'))
            line[--n] = '\0';
        if (!n || line[0] == '#' || !(eq = strchr(line, '=')))
            continue;
        *eq = '\0';
        fx_check_key(rep, r, rc, err, line, eq + 1);
    }
    fclose(f);
}

static const struct fx_parser *fx_find_parser(const struct fx_parser *ps, size_t np,
                                              const char *name)
{
    for (size_t i = 0; name && i < np; i++)
        if (!strcmp(ps[i].name, name))
            return &ps[i];
    return NULL;
}

/* The per-fixture test: parse, then compare every sidecar key. */
static void fx_run_fixture(const struct fx_list *l, size_t i, const struct fx_parser *ps, size_t np)
{
    const char *name = l->names[i];
    const char *pname = fx_sidecar_parser(l->dir, name);
    const struct fx_parser *p = fx_find_parser(ps, np, pname);
    struct fx_report rep = {.len = 0, .checked = 0};
    struct app_err err = {0, ""};
    struct smi_result r;
    char path[8192];
    size_t len;
    char *buf;
    int rc;

    ck_assert_msg(p != NULL, "%s: no sidecar, or no known parser= line in it", name);
    snprintf(path, sizeof(path), "%s/%s", l->dir, name);
    buf = fx_read(path, &len);
    ck_assert_msg(buf != NULL, "%s: cannot read", path);
    smi_result_init(&r);
    rc = p->fn(buf, len, &r, &err);
    snprintf(path, sizeof(path), "%s/%s.expected", l->dir, name);
    fx_check_sidecar(&rep, path, &r, rc, &err);
    ck_assert_msg(rep.len == 0, "%s (parser %s, %u keys): %s", name, p->name, rep.checked,
                  rep.text);
    ck_assert_msg(rep.checked >= 3, "%s: the sidecar asserts almost nothing", name);
    smi_result_fini(&r);
    free(buf);
}

/* ---- robustness ---- */

static bool fx_terminated(const char *s, size_t size)
{
    return memchr(s, '\0', size) != NULL;
}

/* Unknown fields hold their sentinel, never 0; known ids are non-negative. */
static void fx_sane_record(const char *what, const void *rec, const struct fx_field *fields,
                           size_t nf, uint32_t valid)
{
    for (size_t f = 0; f < nf; f++) {
        const char *p = (const char *)rec + fields[f].off;
        bool known = !fields[f].bit || (valid & fields[f].bit);

        if (fields[f].type == FX_STR) {
            ck_assert_msg(fx_terminated(p, fields[f].size), "%s.%s unterminated", what,
                          fields[f].key);
            ck_assert_msg(known || !p[0], "%s.%s unknown but not empty", what, fields[f].key);
        } else if (fields[f].type == FX_INT) {
            int v = *(const int *)(const void *)p;

            ck_assert_msg(known ? v >= 0 : v == -1, "%s.%s = %d", what, fields[f].key, v);
        } else if (fields[f].type == FX_I64) {
            int64_t v = *(const int64_t *)(const void *)p;

            ck_assert_msg(known ? v >= 0 : v == -1, "%s.%s = %lld", what, fields[f].key,
                          (long long)v);
        } else if (fields[f].type == FX_DBL) {
            double v = *(const double *)(const void *)p;

            ck_assert_msg(known ? v >= 0 : v == -1.0, "%s.%s = %g", what, fields[f].key, v);
        }
    }
}

static void fx_sane(const char *label, const struct fx_parser *p, const struct smi_result *r,
                    int rc, size_t nlines)
{
    ck_assert_msg(rc == 0 || (rc < 0 && rc >= APP_E_LIMIT), "%s: rc %d", label, rc);
    ck_assert_msg(r->ndevs <= nlines && r->nprocs <= nlines && r->nmaps <= nlines,
                  "%s: %zu devices, %zu procs from %zu lines", label, r->ndevs, r->nprocs, nlines);
    ck_assert_msg(fx_terminated(r->msg, sizeof(r->msg)), "%s: msg unterminated", label);
    for (size_t i = 0; i < r->ndevs; i++) {
        ck_assert_msg(!p->ids || (r->devs[i].valid & SMI_DEV_INDEX), "%s: dev%zu without index",
                      label, i);
        fx_sane_record(label, &r->devs[i], fx_dev_fields, FX_NFIELDS(fx_dev_fields),
                       r->devs[i].valid);
    }
    for (size_t i = 0; i < r->nprocs; i++) {
        ck_assert_msg(r->procs[i].pid > 0, "%s: proc%zu pid %d", label, i, r->procs[i].pid);
        fx_sane_record(label, &r->procs[i], fx_proc_fields, FX_NFIELDS(fx_proc_fields),
                       r->procs[i].valid);
    }
    for (size_t i = 0; i < r->nmaps; i++)
        fx_sane_record(label, &r->maps[i], fx_map_fields, FX_NFIELDS(fx_map_fields),
                       r->maps[i].valid);
}

/* A parse of a cut output must be a prefix of the parse of the whole output. */
static void fx_prefix_of(const char *label, const struct smi_result *cut,
                         const struct smi_result *full)
{
    ck_assert_msg(cut->ndevs <= full->ndevs && cut->nprocs <= full->nprocs,
                  "%s: %zu/%zu devices, %zu/%zu procs", label, cut->ndevs, full->ndevs, cut->nprocs,
                  full->nprocs);
    for (size_t i = 0; i < cut->ndevs; i++) {
        ck_assert_msg(cut->devs[i].index == full->devs[i].index, "%s: dev%zu index %d != %d", label,
                      i, cut->devs[i].index, full->devs[i].index);
        ck_assert_msg(!(cut->devs[i].valid & SMI_DEV_CHIP) ||
                          cut->devs[i].chip == full->devs[i].chip,
                      "%s: dev%zu chip", label, i);
    }
    for (size_t i = 0; i < cut->nprocs; i++)
        ck_assert_msg(cut->procs[i].pid == full->procs[i].pid &&
                          cut->procs[i].dev_index == full->procs[i].dev_index,
                      "%s: proc%zu pid %d != %d", label, i, cut->procs[i].pid, full->procs[i].pid);
}

/* Parses a private exact-size copy of buf[0, len). */
static int fx_parse_copy(const struct fx_parser *p, const char *buf, size_t len,
                         struct smi_result *r, struct app_err *err)
{
    char *copy = x_malloc(len ? len : 1);
    int rc;

    memcpy(copy, buf, len);
    smi_result_reset(r);
    rc = p->fn(copy, len, r, err);
    free(copy);
    return rc;
}

/* Loads fixture i and its parser; returns the buffer (caller frees). */
static char *fx_load(const struct fx_list *l, size_t i, const struct fx_parser *ps, size_t np,
                     const struct fx_parser **p, size_t *len)
{
    char path[8192];
    char *buf;

    *p = fx_find_parser(ps, np, fx_sidecar_parser(l->dir, l->names[i]));
    ck_assert_msg(*p != NULL, "%s: no parser", l->names[i]);
    snprintf(path, sizeof(path), "%s/%s", l->dir, l->names[i]);
    buf = fx_read(path, len);
    ck_assert_msg(buf != NULL, "%s: cannot read", path);
    return buf;
}

/* Cut points for fixture buf: both sides of every newline, the middle of every line, and
 * about 150 evenly spread bytes. Returns how many were stored in at[] (in any order). */
static size_t fx_cut_points(const char *buf, size_t len, size_t *at, size_t max)
{
    size_t n = 0, line_start = 0, step = len / 150 + 1;

    for (size_t i = 0; i <= len && n + 4 <= max; i++) {
        if (i % step == 0)
            at[n++] = i;
        if (i < len && buf[i] == '\n') {
            at[n++] = i;
            at[n++] = i + 1;
            at[n++] = line_start + (i - line_start) / 2;
            line_start = i + 1;
        }
    }
    at[n++] = len;
    return n;
}

/* Cuts fixture i at many points (see fx_cut_points) and parses each prefix. */
static void fx_run_truncated(const struct fx_list *l, size_t i, const struct fx_parser *ps,
                             size_t np)
{
    static size_t at[4096];
    const struct fx_parser *p;
    struct smi_result full, cut;
    struct app_err err;
    char label[512];
    size_t len, ncut;
    char *buf = fx_load(l, i, ps, np, &p, &len);
    bool prefix;
    int full_rc;

    smi_result_init(&full);
    smi_result_init(&cut);
    full_rc = fx_parse_copy(p, buf, len, &full, &err);
    prefix = p->prefix_stable && full_rc == 0;
    if (fx_sidecar_get(l->dir, l->names[i], "prefix"))
        prefix = false;
    ncut = fx_cut_points(buf, len, at, sizeof(at) / sizeof(at[0]));
    for (size_t c = 0; c < ncut; c++) {
        int rc = fx_parse_copy(p, buf, at[c], &cut, &err);

        snprintf(label, sizeof(label), "%s cut at %zu of %zu", l->names[i], at[c], len);
        fx_sane(label, p, &cut, rc, fx_count_lines(buf, at[c]));
        if (prefix)
            fx_prefix_of(label, &cut, &full);
    }
    smi_result_fini(&full);
    smi_result_fini(&cut);
    free(buf);
}

/* Damages fixture i in 100 seeded ways (1 to 4 bytes replaced by characters that matter to
 * the parsers, or by random bytes) and parses each. */
static void fx_run_mutated(const struct fx_list *l, size_t i, const struct fx_parser *ps, size_t np)
{
    static const char evil[] = "|+=-/ \t\n\r09N[]%:.,#\0\xff";
    const struct fx_parser *p;
    struct smi_result r;
    struct app_err err;
    char label[512];
    size_t len;
    char *buf = fx_load(l, i, ps, np, &p, &len);
    uint64_t seed = 0x9e3779b97f4a7c15ull ^ (i * 1315423911u);

    smi_result_init(&r);
    for (unsigned m = 0; len && m < 100; m++) {
        char *copy = x_malloc(len);
        unsigned nflip;

        memcpy(copy, buf, len);
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        nflip = 1 + (unsigned)(seed >> 60) % 4;
        for (unsigned k = 0; k < nflip; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            copy[(seed >> 33) % len] =
                (seed & 1) ? evil[(seed >> 8) % (sizeof(evil) - 1)] : (char)(seed >> 16);
        }
        smi_result_reset(&r);
        snprintf(label, sizeof(label), "%s mutation %u", l->names[i], m);
        fx_sane(label, p, &r, p->fn(copy, len, &r, &err), fx_count_lines(copy, len));
        free(copy);
    }
    smi_result_fini(&r);
    free(buf);
}

/* Every parser on fixture i: whatever the input, no crash and a sane result. */
static void fx_run_all_parsers(const struct fx_list *l, size_t i, const struct fx_parser *ps,
                               size_t np)
{
    const struct fx_parser *own;
    struct smi_result r;
    struct app_err err;
    char label[512];
    size_t len;
    char *buf = fx_load(l, i, ps, np, &own, &len);

    smi_result_init(&r);
    for (size_t k = 0; k < np; k++) {
        int rc = fx_parse_copy(&ps[k], buf, len, &r, &err);

        snprintf(label, sizeof(label), "%s through %s", l->names[i], ps[k].name);
        fx_sane(label, &ps[k], &r, rc, fx_count_lines(buf, len));
    }
    smi_result_fini(&r);
    free(buf);
}

/* Every sidecar has its fixture, and at least min fixtures are present. */
static void fx_check_inventory(const struct fx_list *l, size_t min)
{
    struct dirent *e;
    DIR *d = opendir(l->dir);

    ck_assert_msg(d != NULL, "cannot open %s (is RANKTOP_SRCDIR set?)", l->dir);
    ck_assert_msg(l->n >= min, "%s: %zu fixtures, expected at least %zu", l->dir, l->n, min);
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        bool found = false;

        if (n <= 9 || strcmp(e->d_name + n - 9, ".expected") != 0)
            continue;
        for (size_t i = 0; i < l->n && !found; i++)
            found = strlen(l->names[i]) == n - 9 && !strncmp(l->names[i], e->d_name, n - 9);
        ck_assert_msg(found, "%s has no fixture", e->d_name);
    }
    closedir(d);
}

/* ---- the fixture-driven test case ----------------------------------------------------------
 * One tool's fixtures and parsers, set by fx_tcase before the suite runs; Check forks each test
 * after that, so every test process sees them. */
static struct {
    struct fx_list list;
    const struct fx_parser *ps;
    size_t np, min;
} fx_suite;

START_TEST(fx_test_fixture)
{
    fx_run_fixture(&fx_suite.list, (size_t)_i, fx_suite.ps, fx_suite.np);
}
END_TEST

START_TEST(fx_test_truncated)
{
    fx_run_truncated(&fx_suite.list, (size_t)_i, fx_suite.ps, fx_suite.np);
}
END_TEST

START_TEST(fx_test_mutated)
{
    fx_run_mutated(&fx_suite.list, (size_t)_i, fx_suite.ps, fx_suite.np);
}
END_TEST

START_TEST(fx_test_all_parsers)
{
    fx_run_all_parsers(&fx_suite.list, (size_t)_i, fx_suite.ps, fx_suite.np);
}
END_TEST

START_TEST(fx_test_inventory)
{
    fx_check_inventory(&fx_suite.list, fx_suite.min);
}
END_TEST

/* Loads tests/data/TOOL and returns the case that runs every fixture through ps (np parsers):
 * expected values, truncations, mutations, every parser on every file, and an inventory of at
 * least min fixtures. */
static TCase *fx_tcase(const char *tool, const struct fx_parser *ps, size_t np, size_t min)
{
    TCase *tc = tcase_create("fixtures");
    int n;

    fx_list_load(&fx_suite.list, tool);
    fx_suite.ps = ps;
    fx_suite.np = np;
    fx_suite.min = min;
    n = (int)fx_suite.list.n;
    tcase_add_test(tc, fx_test_inventory);
    tcase_add_loop_test(tc, fx_test_fixture, 0, n);
    tcase_add_loop_test(tc, fx_test_truncated, 0, n);
    tcase_add_loop_test(tc, fx_test_mutated, 0, n);
    tcase_add_loop_test(tc, fx_test_all_parsers, 0, n);
    return tc;
}

#endif
