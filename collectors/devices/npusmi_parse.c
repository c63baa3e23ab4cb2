/* npu-smi output parsers: `info` (device and process tables), `info -t usages`, `info -m`.
 *
 * Owns the knowledge of npu-smi's layouts from 20.x to 26.x. The `info` parser is a line
 * state machine like the nvidia-smi one: a row whose first column is "NPU" opens a header, the
 * +====+ line closes it, and the header names decide what follows: chips (two rows per chip,
 * row k read with header row k, blocks separated by any border) or processes (one per row).
 * Blank lines between the tables, "..." lines of abridged copies, trailing blanks and a
 * missing final border are all harmless. Invariants: a record is appended only when its first
 * row was complete; unknown values (NA, -, blank) never become 0. Pure; any thread. */
#include "npusmi_parse.h"

#include "smi_text.h"

#include <string.h>

#define TOOL "npu-smi"

enum np_state { NP_NONE, NP_HEADER, NP_DEVS, NP_PROCS, NP_SKIP };

struct np_table {
    enum np_state state;
    struct smi_hdr hdr;
    size_t k;          /* row number inside the current chip block */
    bool have_dev;     /* dev holds a chip whose first row was read */
    bool have_card;    /* card holds the card row of the current block */
    bool seen_dev_hdr; /* a device table header was found */
    struct smi_device dev;
    struct smi_device card; /* the card row alone, for the extra rows of multi-die cards */
};

static bool small_int(struct smi_span v, int *out)
{
    int64_t i;

    if (!smi_text_int(v, NULL, &i) || i > 0x7fffffff)
        return false;
    *out = (int)i;
    return true;
}

/* Device memory: HBM where the chip has it (A2/A3 print Memory-Usage 0 / 0), else DDR. */
static void np_select_mem(struct smi_device *d)
{
    d->valid &= ~(uint32_t)(SMI_DEV_MEM_USED | SMI_DEV_MEM_TOTAL);
    d->mem_used_mb = d->mem_total_mb = -1;
    if (smi_dev_has(d, SMI_DEV_HBM_TOTAL) && d->hbm_total_mb > 0) {
        d->mem_total_mb = d->hbm_total_mb;
        d->valid |= SMI_DEV_MEM_TOTAL;
        if (smi_dev_has(d, SMI_DEV_HBM_USED))
            d->mem_used_mb = d->hbm_used_mb, d->valid |= SMI_DEV_MEM_USED;
    } else if (smi_dev_has(d, SMI_DEV_DDR_TOTAL)) {
        d->mem_total_mb = d->ddr_total_mb;
        d->valid |= SMI_DEV_MEM_TOTAL;
        if (smi_dev_has(d, SMI_DEV_DDR_USED))
            d->mem_used_mb = d->ddr_used_mb, d->valid |= SMI_DEV_MEM_USED;
    }
}

static void set_pair(struct smi_device *d, struct smi_span v, int64_t *used, int64_t *total,
                     uint32_t used_bit, uint32_t total_bit)
{
    struct smi_span a, b;

    if (!smi_text_pair(v, &a, &b))
        return;
    if (smi_text_int(a, "MB", used))
        d->valid |= used_bit;
    if (smi_text_int(b, "MB", total))
        d->valid |= total_bit;
}

static void set_text(struct smi_device *d, struct smi_span v, char *dst, size_t cap, uint32_t bit)
{
    if (smi_text_unknown(v))
        return;
    smi_text_copy(v, dst, cap);
    d->valid |= bit;
}

static void np_dev_field(void *ctx, struct smi_span key, struct smi_span v)
{
    struct smi_device *d = ctx;

    if ((smi_text_eq(key, "NPU") || smi_text_eq(key, "NPU ID")) && small_int(v, &d->index))
        d->valid |= SMI_DEV_INDEX;
    else if (smi_text_eq(key, "Chip") && small_int(v, &d->chip))
        d->valid |= SMI_DEV_CHIP;
    else if (smi_text_eq(key, "Device") && small_int(v, &d->logic_id))
        d->valid |= SMI_DEV_LOGIC_ID;
    else if (smi_text_eq(key, "Phy-ID") && small_int(v, &d->phy_id))
        d->valid |= SMI_DEV_PHY_ID;
    else if (smi_text_eq(key, "Name"))
        set_text(d, v, d->name, sizeof(d->name), SMI_DEV_NAME);
    else if (smi_text_eq(key, "Health"))
        set_text(d, v, d->health, sizeof(d->health), SMI_DEV_HEALTH);
    else if (smi_text_eq(key, "Bus-Id"))
        set_text(d, v, d->bus_id, sizeof(d->bus_id), SMI_DEV_BUS_ID);
    else if (smi_text_eq(key, "Power") && smi_text_double(v, "W", &d->power_w))
        d->valid |= SMI_DEV_POWER;
    else if (smi_text_eq(key, "Temp") && smi_text_int(v, "C", &d->temp_c))
        d->valid |= SMI_DEV_TEMP;
    else if ((smi_text_eq(key, "AICore") || smi_text_eq(key, "NPU Util")) &&
             smi_text_int(v, "%", &d->util_pct))
        d->valid |= SMI_DEV_UTIL;
    else if (smi_text_eq(key, "Memory-Usage"))
        set_pair(d, v, &d->ddr_used_mb, &d->ddr_total_mb, SMI_DEV_DDR_USED, SMI_DEV_DDR_TOTAL);
    else if (smi_text_eq(key, "HBM-Usage"))
        set_pair(d, v, &d->hbm_used_mb, &d->hbm_total_mb, SMI_DEV_HBM_USED, SMI_DEV_HBM_TOTAL);
}

static void np_proc_field(void *ctx, struct smi_span key, struct smi_span v)
{
    struct smi_proc *p = ctx;
    int pid;

    if ((smi_text_eq(key, "NPU") || smi_text_eq(key, "NPU ID")) && small_int(v, &p->dev_index))
        p->valid |= SMI_PROC_DEV;
    else if (smi_text_eq(key, "Chip") && small_int(v, &p->chip))
        p->valid |= SMI_PROC_CHIP;
    else if (smi_text_eq(key, "Process id") && small_int(v, &pid) && pid > 0)
        p->pid = pid, p->valid |= SMI_PROC_PID;
    else if (smi_text_eq(key, "Process id in container") && small_int(v, &pid) && pid > 0)
        p->container_pid = pid, p->valid |= SMI_PROC_CONTAINER_PID;
    else if (smi_text_eq(key, "Process name") && !smi_text_unknown(v))
        smi_text_copy(v, p->name, sizeof(p->name)), p->valid |= SMI_PROC_NAME;
    else if (smi_text_eq(key, "Process memory") && smi_text_int(v, "MB", &p->mem_mb))
        p->valid |= SMI_PROC_MEM;
}

static void np_flush_dev(struct np_table *t, struct smi_result *r)
{
    if (t->have_dev && smi_dev_has(&t->dev, SMI_DEV_INDEX)) {
        np_select_mem(&t->dev);
        smi_result_add_device(r, &t->dev);
    }
    t->have_dev = false;
}

/* Row k of a chip block. A block normally holds a card row and one chip row; a card with
 * several dies may print one more chip row per die under the same card row, so rows past the
 * header start a new chip that inherits the card row's fields. */
static void np_dev_row(struct np_table *t, struct smi_result *r, struct smi_span line,
                       unsigned lineno)
{
    size_t k = t->k++;
    bool extra = k > 0 && k >= t->hdr.nrows;
    struct smi_device next;

    if (k > 0 && !extra) {
        if (t->have_dev && !smi_text_hdr_visit(&t->hdr, k, line, np_dev_field, &t->dev))
            smi_text_skip(r, lineno);
        return;
    }
    if (extra && !t->have_card)
        return;
    if (extra)
        next = t->card;
    else
        smi_device_init(&next, SMI_KIND_NPU), t->have_card = false;
    if (!smi_text_hdr_visit(&t->hdr, extra ? t->hdr.nrows - 1 : 0, line, np_dev_field, &next) ||
        !smi_dev_has(&next, SMI_DEV_INDEX)) {
        smi_text_skip(r, lineno);
        return;
    }
    np_flush_dev(t, r);
    t->dev = next;
    t->have_dev = true;
    if (!extra)
        t->card = next, t->have_card = true;
}

static void np_proc_row(struct np_table *t, struct smi_result *r, struct smi_span line,
                        unsigned lineno)
{
    struct smi_proc p;

    if (smi_text_find(line, "No running processes found", NULL))
        return;
    smi_proc_init(&p, SMI_KIND_NPU);
    if (!smi_text_hdr_visit(&t->hdr, 0, line, np_proc_field, &p) ||
        !smi_proc_has(&p, SMI_PROC_PID)) {
        smi_text_skip(r, lineno);
        return;
    }
    smi_result_add_proc(r, &p);
}

static void np_version(struct smi_result *r, struct smi_span line)
{
    struct smi_span w;

    if (smi_text_word_after(line, "npu-smi", &w))
        smi_text_copy(w, r->tool_version, sizeof(r->tool_version));
    if (smi_text_word_after(line, "Version:", &w))
        smi_text_copy(w, r->driver_version, sizeof(r->driver_version));
}

static bool np_header_start(struct smi_span line)
{
    struct smi_span cells[SMI_TEXT_MAX_CELLS];
    struct smi_cols cols;
    bool closed;

    if (!smi_text_cells(line, cells, SMI_TEXT_MAX_CELLS, &closed))
        return false;
    smi_text_cols_split(cells[0], &cols);
    return cols.n && (smi_text_eq(cols.name[0], "NPU") || smi_text_eq(cols.name[0], "NPU ID"));
}

static void np_row(struct np_table *t, struct smi_result *r, struct smi_span line, unsigned lineno)
{
    struct smi_span cells[1];
    bool closed;

    if (smi_text_cells(line, cells, 1, &closed) && smi_text_starts(cells[0], "npu-smi ")) {
        np_version(r, line);
        t->state = NP_NONE;
    } else if (t->state == NP_HEADER) {
        if (!smi_text_hdr_add(&t->hdr, line))
            t->state = NP_NONE;
    } else if (np_header_start(line)) {
        np_flush_dev(t, r);
        smi_text_hdr_reset(&t->hdr);
        smi_text_hdr_add(&t->hdr, line);
        t->state = NP_HEADER;
    } else if (t->state == NP_DEVS) {
        np_dev_row(t, r, line, lineno);
    } else if (t->state == NP_PROCS) {
        np_proc_row(t, r, line, lineno);
    }
}

static void np_classify(struct np_table *t)
{
    if (smi_text_hdr_has(&t->hdr, "Process id"))
        t->state = NP_PROCS;
    else if (smi_text_hdr_has(&t->hdr, "Name"))
        t->state = NP_DEVS, t->seen_dev_hdr = true;
    else
        t->state = NP_SKIP;
}

static void np_line(struct np_table *t, struct smi_result *r, struct smi_span line, unsigned lineno)
{
    switch (smi_text_line_kind(line)) {
    case SMI_LINE_ROW:
        np_row(t, r, line, lineno);
        return;
    case SMI_LINE_BORDER_EQ:
        if (t->state == NP_HEADER) {
            np_classify(t);
            t->k = 0;
            return;
        }
        break;
    case SMI_LINE_BORDER:
        if (t->state == NP_HEADER)
            return;
        break;
    case SMI_LINE_BLANK:
    case SMI_LINE_TEXT:
        if (t->state == NP_HEADER)
            t->state = NP_NONE;
        break;
    }
    np_flush_dev(t, r);
    t->k = 0;
    t->have_card = false;
}

/* The first text line holding one of the needles. */
static bool np_find_line(const char *buf, size_t len, const char *const *needles, size_t n,
                         struct smi_span *found)
{
    struct smi_lines it;
    struct smi_span line;

    smi_text_lines_init(&it, buf, len);
    while (smi_text_next_line(&it, &line)) {
        if (smi_text_line_kind(line) != SMI_LINE_TEXT)
            continue;
        for (size_t i = 0; i < n; i++) {
            if (smi_text_find(line, needles[i], NULL)) {
                *found = line;
                return true;
            }
        }
    }
    return false;
}

/* Without a device table: an npu-smi / DCMI failure message (the DCMI line first: a
 * "DrvMngGetConsoleLogLevel failed" line often precedes it), or something else. */
static int np_no_table(const char *buf, size_t len, struct smi_result *r, struct app_err *err,
                       unsigned nlines)
{
    static const char *const dcmi[] = {"dcmi", "DCMI"};
    static const char *const failure[] = {"fail",  "Fail",   "error",     "Error",
                                          "ERROR", "ret is", "not exist", "No such"};
    struct smi_span line;
    char quoted[200];

    if (np_find_line(buf, len, dcmi, 2, &line) ||
        np_find_line(buf, len, failure, sizeof(failure) / sizeof(failure[0]), &line)) {
        smi_text_copy(line, quoted, sizeof(quoted));
        return smi_text_fail(r, err, APP_E_IO, TOOL ": %s", quoted);
    }
    return smi_text_fail(r, err, APP_E_PARSE, TOOL ": no device table in the output (%u line(s))",
                         nlines);
}

int npusmi_parse_info(const char *buf, size_t len, struct smi_result *r, struct app_err *err)
{
    struct np_table t;
    struct smi_lines it;
    struct smi_span line;
    size_t before = r->ndevs;

    memset(&t, 0, sizeof(t));
    smi_text_lines_init(&it, buf, len);
    while (smi_text_next_line(&it, &line))
        np_line(&t, r, line, it.lineno);
    np_flush_dev(&t, r);
    if (!t.seen_dev_hdr)
        return np_no_table(buf, len, r, err, it.lineno);
    if (r->ndevs == before)
        return smi_text_fail(r, err, APP_E_PARSE,
                             TOOL ": the device table has no rows (output cut short?)");
    return smi_text_done(r, err, TOOL);
}

/* ---- info -t usages ---- */

struct np_usages {
    int64_t aicore, hbm_cap, hbm_rate, hbm_used, ddr_cap, ddr_rate;
    int npu, chip;
    unsigned known; /* recognised lines */
    bool repeated;  /* a figure came twice: several chips */
};

static void usage_num(struct np_usages *u, struct smi_span v, int64_t *slot)
{
    int64_t x;

    u->known++;
    if (*slot != -1)
        u->repeated = true;
    if (smi_text_int(v, NULL, &x))
        *slot = x;
    else
        *slot = -2; /* seen, unknown */
}

static void usage_line(struct np_usages *u, struct smi_span key, struct smi_span v)
{
    int id;

    if (smi_text_eq(key, "Aicore Usage Rate"))
        usage_num(u, v, &u->aicore);
    else if (smi_text_eq(key, "HBM Capacity"))
        usage_num(u, v, &u->hbm_cap);
    else if (smi_text_eq(key, "HBM Usage Rate"))
        usage_num(u, v, &u->hbm_rate);
    else if (smi_text_eq(key, "HBM Usage") || smi_text_eq(key, "HBM Used"))
        usage_num(u, v, &u->hbm_used);
    else if (smi_text_eq(key, "Memory Capacity") || smi_text_eq(key, "DDR Capacity"))
        usage_num(u, v, &u->ddr_cap);
    else if (smi_text_eq(key, "Memory Usage Rate") || smi_text_eq(key, "DDR Usage Rate"))
        usage_num(u, v, &u->ddr_rate);
    else if (smi_text_eq(key, "NPU ID") && small_int(v, &id))
        u->npu = id;
    else if (smi_text_eq(key, "Chip ID") && small_int(v, &id)) {
        if (u->chip >= 0 && u->chip != id)
            u->repeated = true;
        u->chip = id;
    }
}

/* used = capacity x rate %, rounded; only when both are known. */
static void usage_apply(struct smi_device *d, int64_t cap, int64_t rate, int64_t used,
                        int64_t *d_used, int64_t *d_total, uint32_t used_bit, uint32_t total_bit)
{
    if (cap >= 0) {
        *d_total = cap;
        d->valid |= total_bit;
    }
    if (used >= 0) {
        *d_used = used;
        d->valid |= used_bit;
    } else if (cap >= 0 && rate >= 0 && rate <= 100) {
        *d_used = (cap * rate + 50) / 100;
        d->valid |= used_bit;
    }
}

int npusmi_parse_usages(const char *buf, size_t len, struct smi_device *dev, struct app_err *err)
{
    struct np_usages u = {-1, -1, -1, -1, -1, -1, -1, -1, 0, false};
    struct smi_lines it;
    struct smi_span line;

    smi_text_lines_init(&it, buf, len);
    while (smi_text_next_line(&it, &line)) {
        const char *colon = memchr(line.p, ':', line.n);
        size_t at;

        if (!colon)
            continue;
        at = (size_t)(colon - line.p);
        usage_line(&u, smi_text_key(smi_text_span(line.p, at)),
                   smi_text_trim(smi_text_span(colon + 1, line.n - at - 1)));
    }
    if (!u.known)
        return app_err_set(err, APP_E_PARSE, TOOL " -t usages: no usage figures in the output");
    if (u.repeated)
        return app_err_set(err, APP_E_PARSE,
                           TOOL " -t usages: the output holds several chips (pass -c CHIP)");
    if (u.npu >= 0 && !smi_dev_has(dev, SMI_DEV_INDEX))
        dev->index = u.npu, dev->valid |= SMI_DEV_INDEX;
    if (u.chip >= 0 && !smi_dev_has(dev, SMI_DEV_CHIP))
        dev->chip = u.chip, dev->valid |= SMI_DEV_CHIP;
    if (u.aicore >= 0)
        dev->util_pct = u.aicore, dev->valid |= SMI_DEV_UTIL;
    usage_apply(dev, u.hbm_cap, u.hbm_rate, u.hbm_used, &dev->hbm_used_mb, &dev->hbm_total_mb,
                SMI_DEV_HBM_USED, SMI_DEV_HBM_TOTAL);
    usage_apply(dev, u.ddr_cap, u.ddr_rate, -1, &dev->ddr_used_mb, &dev->ddr_total_mb,
                SMI_DEV_DDR_USED, SMI_DEV_DDR_TOTAL);
    np_select_mem(dev);
    return app_err_set(err, 0, "%s", "");
}

/* ---- info -m ---- */

static void map_field(struct smi_chipmap *m, struct smi_span key, struct smi_span v)
{
    if (smi_text_eq(key, "NPU ID") && small_int(v, &m->npu_id))
        m->valid |= SMI_DEV_INDEX;
    else if (smi_text_eq(key, "Chip ID") && small_int(v, &m->chip_id))
        m->valid |= SMI_DEV_CHIP;
    else if (smi_text_eq(key, "Chip Logic ID") && small_int(v, &m->logic_id))
        m->valid |= SMI_DEV_LOGIC_ID;
    else if (smi_text_eq(key, "Chip Phy-ID") && small_int(v, &m->phy_id))
        m->valid |= SMI_DEV_PHY_ID;
    else if (smi_text_eq(key, "Chip Name") && !smi_text_unknown(v))
        smi_text_copy(v, m->name, sizeof(m->name)), m->valid |= SMI_DEV_NAME;
}

static void map_row(struct smi_result *r, const struct smi_cols *cols, struct smi_span line,
                    unsigned lineno)
{
    struct smi_span vals[SMI_TEXT_MAX_COLS];
    struct smi_chipmap m;

    smi_chipmap_init(&m);
    smi_text_cols_assign(line, cols, vals);
    for (size_t i = 0; i < cols->n; i++) {
        if (!smi_text_trim(vals[i]).n) { /* a cut or damaged row */
            smi_text_skip(r, lineno);
            return;
        }
        map_field(&m, cols->name[i], smi_text_trim(vals[i]));
    }
    if ((m.valid & (SMI_DEV_INDEX | SMI_DEV_CHIP)) != (SMI_DEV_INDEX | SMI_DEV_CHIP)) {
        smi_text_skip(r, lineno);
        return;
    }
    smi_result_add_map(r, &m);
}

int npusmi_parse_mapping(const char *buf, size_t len, struct smi_result *r, struct app_err *err)
{
    struct smi_cols cols = {0};
    struct smi_lines it;
    struct smi_span line;

    smi_text_lines_init(&it, buf, len);
    while (smi_text_next_line(&it, &line)) {
        if (!smi_text_trim(line).n)
            continue;
        if (cols.n) {
            map_row(r, &cols, line, it.lineno);
            continue;
        }
        smi_text_cols_split(line, &cols);
        if (!cols.n || !smi_text_eq(cols.name[0], "NPU ID"))
            return smi_text_fail(r, err, APP_E_PARSE,
                                 TOOL " info -m: line %u is not the 'NPU ID  Chip ID ...' header",
                                 it.lineno);
    }
    if (!cols.n)
        return smi_text_fail(r, err, APP_E_PARSE, TOOL " info -m: empty output");
    return smi_text_done(r, err, TOOL);
}
