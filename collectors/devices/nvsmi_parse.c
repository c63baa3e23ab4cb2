/* nvidia-smi output parsers: the CSV query forms, the default table, pmon, error messages.
 *
 * Owns the knowledge of nvidia-smi's layouts from driver 390 to 610. The table parser is a
 * line state machine: rows starting with "GPU", "Processes:" or "MIG devices:" open a header,
 * the +====+ line closes it, and the header's column names decide whether the rows below are
 * GPUs (one record per block of rows between borders, row k read with header row k),
 * processes (one record per row) or something to skip. Nothing depends on column offsets or
 * widths; values are matched to header names (see smi_text_cols_assign). Invariants: a record
 * is appended only when its first row was complete (closed by '|'), so a cut-off output gives
 * a prefix of the full result; unknown values never become 0. Pure; any thread. */
#include "nvsmi_parse.h"

#include "smi_text.h"

#include <string.h>

#define CSV_MAX_FIELDS 512
#define TOOL "nvidia-smi"

enum nv_state { NV_NONE, NV_HEADER, NV_DEVS, NV_PROCS, NV_SKIP };

struct nv_table {
    enum nv_state state;
    struct smi_hdr hdr;
    size_t k;          /* row number inside the current block */
    bool have_dev;     /* dev holds a device whose first row was read */
    bool seen_gpu_hdr; /* a GPU table header was found */
    size_t first_dev;  /* r->ndevs and r->nprocs when the parse started */
    size_t first_proc;
    struct smi_device dev;
    struct smi_cols pcols; /* process table columns */
    size_t pname;          /* index of "Process name" in pcols, or pcols.n */
};

/* ---- errors ---- */

static int error_line(struct smi_span line, struct smi_result *r, struct app_err *err)
{
    char quoted[200];

    smi_text_copy(line, quoted, sizeof(quoted));
    if (smi_text_starts(line, "NVIDIA-SMI has failed")) {
        if (smi_text_find(line, "couldn't communicate with the NVIDIA driver", NULL))
            return smi_text_fail(r, err, APP_E_IO,
                                 TOOL ": couldn't communicate with the NVIDIA driver "
                                      "(is the driver loaded?)");
        return smi_text_fail(r, err, APP_E_IO, TOOL ": %s", quoted);
    }
    if (smi_text_starts(line, "No devices were found"))
        return smi_text_fail(r, err, APP_E_NOTFOUND,
                             TOOL ": no devices were found (driver loaded, no usable GPU)");
    if (smi_text_starts(line, "Failed to initialize NVML")) {
        if (smi_text_find(line, "Insufficient Permissions", NULL))
            return smi_text_fail(r, err, APP_E_PERM, TOOL ": %s", quoted);
        return smi_text_fail(r, err, APP_E_IO, TOOL ": %s", quoted);
    }
    return 0;
}

int nvsmi_parse_error(const char *buf, size_t len, struct smi_result *r, struct app_err *err)
{
    struct smi_lines it;
    struct smi_span line;
    int rc;

    smi_text_lines_init(&it, buf, len);
    while (smi_text_next_line(&it, &line))
        if (smi_text_line_kind(line) == SMI_LINE_TEXT && (rc = error_line(line, r, err)) < 0)
            return rc;
    return 0;
}

/* ---- CSV query forms ---- */

/* Splits a CSV line at commas; returns the field count (only max are stored). */
static size_t csv_split(struct smi_span line, struct smi_span *f, size_t max)
{
    size_t n = 0, start = 0;

    for (size_t i = 0; i <= line.n; i++) {
        if (i < line.n && line.p[i] != ',')
            continue;
        if (n < max)
            f[n] = smi_text_trim(smi_text_span(line.p + start, i - start));
        n++;
        start = i + 1;
    }
    return n;
}

/* A header line starts with a column name, a data line with a number (or a placeholder). */
static bool csv_is_header(struct smi_span first)
{
    int64_t v;

    return !smi_text_unknown(first) && !smi_text_int(first, NULL, &v);
}

enum gpu_col {
    GC_NONE,
    GC_INDEX,
    GC_UUID,
    GC_NAME,
    GC_UTIL,
    GC_MEM_USED,
    GC_MEM_TOTAL,
    GC_POWER,
    GC_TEMP,
    GC_BUS_ID,
};

static enum gpu_col gpu_col_of(struct smi_span name)
{
    static const struct {
        const char *key;
        enum gpu_col col;
    } map[] = {
        {"index", GC_INDEX},
        {"uuid", GC_UUID},
        {"name", GC_NAME},
        {"utilization.gpu", GC_UTIL},
        {"memory.used", GC_MEM_USED},
        {"memory.total", GC_MEM_TOTAL},
        {"power.draw", GC_POWER},
        {"temperature.gpu", GC_TEMP},
        {"pci.bus_id", GC_BUS_ID},
    };
    struct smi_span key = smi_text_key(name);

    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (smi_text_eq(key, map[i].key))
            return map[i].col;
    return GC_NONE;
}

static void gpu_set(struct smi_device *d, enum gpu_col col, struct smi_span v)
{
    int64_t i;

    switch (col) {
    case GC_INDEX:
        if (smi_text_int(v, NULL, &i) && i <= 0x7fffffff)
            d->index = (int)i, d->valid |= SMI_DEV_INDEX;
        break;
    case GC_UUID:
        if (!smi_text_unknown(v))
            smi_text_copy(v, d->uuid, sizeof(d->uuid)), d->valid |= SMI_DEV_UUID;
        break;
    case GC_NAME:
        if (!smi_text_unknown(v))
            smi_text_copy(v, d->name, sizeof(d->name)), d->valid |= SMI_DEV_NAME;
        break;
    case GC_BUS_ID:
        if (!smi_text_unknown(v))
            smi_text_copy(v, d->bus_id, sizeof(d->bus_id)), d->valid |= SMI_DEV_BUS_ID;
        break;
    case GC_UTIL:
        if (smi_text_int(v, "%", &d->util_pct))
            d->valid |= SMI_DEV_UTIL;
        break;
    case GC_MEM_USED:
        if (smi_text_int(v, "MiB", &d->mem_used_mb))
            d->valid |= SMI_DEV_MEM_USED;
        break;
    case GC_MEM_TOTAL:
        if (smi_text_int(v, "MiB", &d->mem_total_mb))
            d->valid |= SMI_DEV_MEM_TOTAL;
        break;
    case GC_POWER:
        if (smi_text_double(v, "W", &d->power_w))
            d->valid |= SMI_DEV_POWER;
        break;
    case GC_TEMP:
        if (smi_text_int(v, "C", &d->temp_c))
            d->valid |= SMI_DEV_TEMP;
        break;
    case GC_NONE:
        break;
    }
}

static void gpu_csv_row(struct smi_result *r, const int *cols, size_t ncols, struct smi_span line,
                        unsigned lineno)
{
    struct smi_span f[CSV_MAX_FIELDS];
    struct smi_device d;
    size_t n = csv_split(line, f, CSV_MAX_FIELDS);

    /* Fields past CSV_MAX_FIELDS are ignored, as they are in the header. Without a header
     * the query may stop after power.draw or after temperature.gpu. */
    n = n < CSV_MAX_FIELDS ? n : CSV_MAX_FIELDS;
    if (n != ncols && !(ncols == 8 && n == 7 && cols[0] == GC_INDEX && cols[7] == GC_TEMP)) {
        smi_text_skip(r, lineno);
        return;
    }
    smi_device_init(&d, SMI_KIND_GPU);
    for (size_t i = 0; i < n; i++)
        gpu_set(&d, (enum gpu_col)cols[i], f[i]);
    if (!smi_dev_has(&d, SMI_DEV_INDEX)) {
        smi_text_skip(r, lineno);
        return;
    }
    smi_result_add_device(r, &d);
}

/* One CSV query form: its default column order (no header line), how a header names a column,
 * and how a data row becomes a record. */
struct csv_form {
    const int *dflt;
    size_t ndflt;
    int (*col_of)(struct smi_span name);
    void (*row)(struct smi_result *r, const int *cols, size_t ncols, struct smi_span line,
                unsigned lineno);
};

/* Reads a --format=csv output: columns from the header line when there is one, else the
 * form's default order; blank lines skipped. Returns the number of lines read. */
static unsigned csv_parse(const char *buf, size_t len, struct smi_result *r,
                          const struct csv_form *form)
{
    int cols[CSV_MAX_FIELDS];
    struct smi_span f[CSV_MAX_FIELDS], line;
    struct smi_lines it;
    size_t ncols = 0;

    smi_text_lines_init(&it, buf, len);
    while (smi_text_next_line(&it, &line)) {
        if (!smi_text_trim(line).n)
            continue;
        if (!ncols) {
            size_t n = csv_split(line, f, CSV_MAX_FIELDS);

            if (csv_is_header(f[0])) {
                ncols = n < CSV_MAX_FIELDS ? n : CSV_MAX_FIELDS;
                for (size_t i = 0; i < ncols; i++)
                    cols[i] = form->col_of(f[i]);
                continue;
            }
            ncols = form->ndflt;
            memcpy(cols, form->dflt, ncols * sizeof(int));
        }
        form->row(r, cols, ncols, line, it.lineno);
    }
    return it.lineno;
}

static int gpu_col_int(struct smi_span name)
{
    return (int)gpu_col_of(name);
}

int nvsmi_parse_query_gpu(const char *buf, size_t len, struct smi_result *r, struct app_err *err)
{
    static const int dflt[] = {GC_INDEX,    GC_UUID,      GC_NAME,  GC_UTIL,
                               GC_MEM_USED, GC_MEM_TOTAL, GC_POWER, GC_TEMP};
    static const struct csv_form form = {dflt, sizeof(dflt) / sizeof(dflt[0]), gpu_col_int,
                                         gpu_csv_row};
    size_t before = r->ndevs;
    unsigned lines;
    int rc = nvsmi_parse_error(buf, len, r, err);

    if (rc < 0)
        return rc;
    lines = csv_parse(buf, len, r, &form);
    if (r->ndevs == before)
        return smi_text_fail(r, err, APP_E_PARSE, TOOL " --query-gpu: no GPU rows in %u line(s)",
                             lines);
    return smi_text_done(r, err, TOOL);
}

enum app_col { AC_NONE, AC_PID, AC_NAME, AC_MEM, AC_UUID, AC_BUS_ID };

static enum app_col app_col_of(struct smi_span name)
{
    struct smi_span key = smi_text_key(name);

    if (smi_text_eq(key, "pid"))
        return AC_PID;
    if (smi_text_eq(key, "process_name") || smi_text_eq(key, "name"))
        return AC_NAME;
    if (smi_text_eq(key, "used_memory") || smi_text_eq(key, "used_gpu_memory"))
        return AC_MEM;
    if (smi_text_eq(key, "gpu_uuid"))
        return AC_UUID;
    if (smi_text_eq(key, "gpu_bus_id"))
        return AC_BUS_ID;
    return AC_NONE;
}

static void app_set(struct smi_proc *p, enum app_col col, struct smi_span v)
{
    int64_t i;

    switch (col) {
    case AC_PID:
        if (smi_text_int(v, NULL, &i) && i > 0 && i <= 0x7fffffff)
            p->pid = (int)i, p->valid |= SMI_PROC_PID;
        break;
    case AC_NAME:
        if (!smi_text_unknown(v))
            smi_text_copy(v, p->name, sizeof(p->name)), p->valid |= SMI_PROC_NAME;
        break;
    case AC_MEM:
        if (smi_text_int(v, "MiB", &p->mem_mb))
            p->valid |= SMI_PROC_MEM;
        break;
    case AC_UUID:
        if (!smi_text_unknown(v))
            smi_text_copy(v, p->gpu_uuid, sizeof(p->gpu_uuid)), p->valid |= SMI_PROC_UUID;
        break;
    case AC_BUS_ID:
        if (!smi_text_unknown(v))
            smi_text_copy(v, p->gpu_bus_id, sizeof(p->gpu_bus_id)), p->valid |= SMI_PROC_BUS_ID;
        break;
    case AC_NONE:
        break;
    }
}

/* One CSV process row. Windows paths may hold commas: extra fields belong to the name. */
static void app_csv_row(struct smi_result *r, const int *cols, size_t ncols, struct smi_span line,
                        unsigned lineno)
{
    struct smi_span f[CSV_MAX_FIELDS];
    struct smi_proc p;
    size_t n = csv_split(line, f, CSV_MAX_FIELDS), extra, j = 0;
    size_t pname = ncols;

    for (size_t i = 0; i < ncols; i++)
        if (cols[i] == AC_NAME)
            pname = i;
    extra = n > ncols ? n - ncols : 0;
    if (n < ncols || n > CSV_MAX_FIELDS || (extra && pname == ncols)) {
        smi_text_skip(r, lineno);
        return;
    }
    smi_proc_init(&p, SMI_KIND_GPU);
    for (size_t i = 0; i < ncols; i++, j++) {
        struct smi_span v = f[j];

        if (i == pname && extra) {
            j += extra;
            v.n = (size_t)(f[j].p + f[j].n - v.p);
        }
        app_set(&p, (enum app_col)cols[i], v);
    }
    if (!smi_proc_has(&p, SMI_PROC_PID)) {
        smi_text_skip(r, lineno);
        return;
    }
    smi_result_add_proc(r, &p);
}

static int app_col_int(struct smi_span name)
{
    return (int)app_col_of(name);
}

int nvsmi_parse_query_apps(const char *buf, size_t len, struct smi_result *r, struct app_err *err)
{
    static const int dflt[] = {AC_PID, AC_NAME, AC_MEM, AC_UUID};
    static const struct csv_form form = {dflt, sizeof(dflt) / sizeof(dflt[0]), app_col_int,
                                         app_csv_row};
    int rc = nvsmi_parse_error(buf, len, r, err);

    if (rc < 0)
        return rc;
    csv_parse(buf, len, r, &form);
    return smi_text_done(r, err, TOOL);
}

/* ---- the default table ---- */

static void nv_version(struct smi_result *r, struct smi_span line)
{
    struct smi_span w;

    if (smi_text_word_after(line, "NVIDIA-SMI", &w))
        smi_text_copy(w, r->tool_version, sizeof(r->tool_version));
    if (smi_text_word_after(line, "Driver Version:", &w) ||
        smi_text_word_after(line, "KMD Version:", &w))
        smi_text_copy(w, r->driver_version, sizeof(r->driver_version));
    if (smi_text_word_after(line, "CUDA Version:", &w) ||
        smi_text_word_after(line, "CUDA UMD Version:", &w))
        smi_text_copy(w, r->cuda_version, sizeof(r->cuda_version));
}

static void nv_dev_field(void *ctx, struct smi_span key, struct smi_span v)
{
    struct smi_device *d = ctx;
    struct smi_span a, b;

    if (smi_text_eq(key, "GPU")) {
        gpu_set(d, GC_INDEX, v);
    } else if (smi_text_eq(key, "Name")) {
        gpu_set(d, GC_NAME, v);
    } else if (smi_text_eq(key, "Bus-Id")) {
        gpu_set(d, GC_BUS_ID, v);
    } else if (smi_text_eq(key, "Temp")) {
        gpu_set(d, GC_TEMP, v);
    } else if (smi_text_eq(key, "GPU-Util")) {
        gpu_set(d, GC_UTIL, v);
    } else if (smi_text_eq(key, "Pwr:Usage/Cap")) {
        if (smi_text_pair(v, &a, &b))
            gpu_set(d, GC_POWER, a);
    } else if (smi_text_eq(key, "Memory-Usage")) {
        if (smi_text_pair(v, &a, &b)) {
            gpu_set(d, GC_MEM_USED, a);
            gpu_set(d, GC_MEM_TOTAL, b);
        }
    }
}

static void nv_flush_dev(struct nv_table *t, struct smi_result *r)
{
    if (t->have_dev && smi_dev_has(&t->dev, SMI_DEV_INDEX))
        smi_result_add_device(r, &t->dev);
    t->have_dev = false;
}

static void nv_dev_row(struct nv_table *t, struct smi_result *r, struct smi_span line,
                       unsigned lineno)
{
    size_t k = t->k++;

    if (k >= t->hdr.nrows || (k > 0 && !t->have_dev))
        return;
    if (k == 0) {
        nv_flush_dev(t, r);
        smi_device_init(&t->dev, SMI_KIND_GPU);
    }
    if (!smi_text_hdr_visit(&t->hdr, k, line, nv_dev_field, &t->dev)) {
        smi_text_skip(r, lineno);
        return;
    }
    if (k == 0 && !smi_dev_has(&t->dev, SMI_DEV_INDEX))
        smi_text_skip(r, lineno);
    else if (k == 0)
        t->have_dev = true;
}

static void nv_proc_set(struct smi_proc *p, struct smi_span key, struct smi_span v)
{
    int64_t i;

    if (smi_text_eq(key, "GPU") && smi_text_int(v, NULL, &i) && i <= 0x7fffffff)
        p->dev_index = (int)i, p->valid |= SMI_PROC_DEV;
    else if (smi_text_eq(key, "GI") && smi_text_int(v, NULL, &i) && i <= 0x7fffffff)
        p->gi = (int)i, p->valid |= SMI_PROC_GI;
    else if (smi_text_eq(key, "CI") && smi_text_int(v, NULL, &i) && i <= 0x7fffffff)
        p->ci = (int)i, p->valid |= SMI_PROC_CI;
    else if (smi_text_eq(key, "PID"))
        app_set(p, AC_PID, v);
    else if (smi_text_eq(key, "Type") && !smi_text_unknown(v))
        smi_text_copy(v, p->type, sizeof(p->type)), p->valid |= SMI_PROC_TYPE;
    else if (smi_text_eq(key, "Process name"))
        app_set(p, AC_NAME, v);
    else if (smi_text_starts(key, "GPU Memory") || smi_text_eq(key, "Usage") ||
             smi_text_eq(key, "Memory"))
        app_set(p, AC_MEM, v);
}

/* Whitespace tokens of s, at most max (the last one absorbs the rest). */
static size_t word_split(struct smi_span s, struct smi_span *w, size_t max)
{
    size_t n = 0, i = 0;

    while (i < s.n) {
        size_t start;

        while (i < s.n && (s.p[i] == ' ' || s.p[i] == '\t'))
            i++;
        if (i >= s.n)
            break;
        start = i;
        while (i < s.n && s.p[i] != ' ' && s.p[i] != '\t')
            i++;
        if (n == max)
            w[n - 1].n = i - (size_t)(w[n - 1].p - s.p);
        else
            w[n++] = smi_text_span(s.p + start, i - start);
    }
    return n;
}

/* A process row: the columns left of "Process name" take one word each from the left, those
 * right of it one word each from the right, and the name is what lies between (it may hold
 * blanks, or overflow its column as 390's "...ware/MATLAB/.../MATLAB   389MiB" does). */
static void nv_proc_row(struct nv_table *t, struct smi_result *r, struct smi_span line,
                        unsigned lineno)
{
    struct smi_span cells[SMI_TEXT_MAX_CELLS], w[32], body;
    size_t nl = t->pname, nr = t->pcols.n - (t->pname < t->pcols.n ? t->pname + 1 : t->pname);
    size_t nc, nw;
    struct smi_proc p;
    bool closed;

    if (smi_text_find(line, "No running processes found", NULL))
        return;
    nc = smi_text_cells(line, cells, SMI_TEXT_MAX_CELLS, &closed);
    if (!closed || !nc) {
        smi_text_skip(r, lineno);
        return;
    }
    body = smi_text_span(cells[0].p, (size_t)(cells[nc - 1].p + cells[nc - 1].n - cells[0].p));
    nw = word_split(body, w, 32);
    if (nw < nl + nr || nw == 32) {
        smi_text_skip(r, lineno);
        return;
    }
    smi_proc_init(&p, SMI_KIND_GPU);
    for (size_t i = 0; i < nl; i++)
        nv_proc_set(&p, smi_text_key(t->pcols.name[i]), w[i]);
    for (size_t i = 0; i < nr; i++)
        nv_proc_set(&p, smi_text_key(t->pcols.name[t->pname + 1 + i]), w[nw - nr + i]);
    if (t->pname < t->pcols.n && nw > nl + nr) {
        const char *end = w[nw - nr - 1].p + w[nw - nr - 1].n;

        app_set(&p, AC_NAME, smi_text_span(w[nl].p, (size_t)(end - w[nl].p)));
    }
    if (!smi_proc_has(&p, SMI_PROC_PID)) {
        smi_text_skip(r, lineno);
        return;
    }
    smi_result_add_proc(r, &p);
}

/* Sets up the process columns from the header row that names PID. */
static bool nv_proc_header(struct nv_table *t)
{
    for (size_t i = 0; i < t->hdr.nrows; i++) {
        const struct smi_hrow *row = &t->hdr.rows[i];

        for (size_t j = 0; row->ncells && j < row->cols[0].n; j++) {
            if (!smi_text_eq(row->cols[0].name[j], "PID"))
                continue;
            t->pcols = row->cols[0];
            t->pname = t->pcols.n;
            for (size_t c = 0; c < t->pcols.n; c++)
                if (smi_text_eq(t->pcols.name[c], "Process name"))
                    t->pname = c;
            return true;
        }
    }
    return false;
}

/* The +====+ line under a header: decide what the rows below are. */
static void nv_classify(struct nv_table *t)
{
    const struct smi_hrow *first = &t->hdr.rows[0];
    bool gpu_first =
        first->ncells && first->cols[0].n && smi_text_eq(first->cols[0].name[0], "GPU");

    if (smi_text_find(first->line, "MIG devices", NULL))
        t->state = NV_SKIP;
    else if (smi_text_hdr_has(&t->hdr, "PID"))
        t->state = nv_proc_header(t) ? NV_PROCS : NV_SKIP;
    else if (gpu_first && smi_text_hdr_has(&t->hdr, "Name"))
        t->state = NV_DEVS, t->seen_gpu_hdr = true;
    else
        t->state = NV_SKIP;
}

static bool nv_header_start(struct smi_span line)
{
    struct smi_span cells[SMI_TEXT_MAX_CELLS];
    struct smi_cols cols;
    bool closed;

    if (!smi_text_cells(line, cells, SMI_TEXT_MAX_CELLS, &closed))
        return false;
    if (smi_text_starts(cells[0], "Processes:") || smi_text_starts(cells[0], "MIG devices"))
        return true;
    smi_text_cols_split(cells[0], &cols);
    return cols.n && smi_text_eq(cols.name[0], "GPU");
}

static void nv_row(struct nv_table *t, struct smi_result *r, struct smi_span line, unsigned lineno)
{
    if (smi_text_find(line, "NVIDIA-SMI ", NULL)) {
        /* A second snapshot (nvidia-smi -l) replaces the first. */
        nv_flush_dev(t, r);
        r->ndevs = t->first_dev;
        r->nprocs = t->first_proc;
        nv_version(r, line);
        t->state = NV_NONE;
    } else if (t->state == NV_HEADER) {
        if (!smi_text_hdr_add(&t->hdr, line))
            t->state = NV_NONE;
    } else if (nv_header_start(line)) {
        nv_flush_dev(t, r);
        smi_text_hdr_reset(&t->hdr);
        smi_text_hdr_add(&t->hdr, line);
        t->state = NV_HEADER;
    } else if (t->state == NV_DEVS) {
        nv_dev_row(t, r, line, lineno);
    } else if (t->state == NV_PROCS) {
        nv_proc_row(t, r, line, lineno);
    }
}

static void nv_line(struct nv_table *t, struct smi_result *r, struct smi_span line, unsigned lineno)
{
    switch (smi_text_line_kind(line)) {
    case SMI_LINE_ROW:
        nv_row(t, r, line, lineno);
        return;
    case SMI_LINE_BORDER_EQ:
        if (t->state == NV_HEADER) {
            nv_classify(t);
            t->k = 0;
            return;
        }
        break;
    case SMI_LINE_BORDER:
        if (t->state == NV_HEADER)
            return; /* the MIG devices table has one between its title and header */
        break;
    case SMI_LINE_BLANK:
    case SMI_LINE_TEXT:
        if (t->state == NV_HEADER)
            t->state = NV_NONE;
        break;
    }
    nv_flush_dev(t, r);
    t->k = 0;
}

/* No GPU table: a GPU nvidia-smi could not reach, or some other text (quoted). */
static int nv_no_table(const char *buf, size_t len, struct smi_result *r, struct app_err *err)
{
    static const char *const lost[] = {"Unable to determine the device handle", "GPU is lost",
                                       "Unknown Error"};
    struct smi_lines it;
    struct smi_span line, first = {buf, 0};
    char quoted[120];

    smi_text_lines_init(&it, buf, len);
    while (smi_text_next_line(&it, &line)) {
        if (!first.n && smi_text_trim(line).n)
            first = line;
        for (size_t i = 0; i < sizeof(lost) / sizeof(lost[0]); i++) {
            if (smi_text_find(line, lost[i], NULL)) {
                smi_text_copy(line, quoted, sizeof(quoted));
                return smi_text_fail(r, err, APP_E_IO, TOOL ": %s", quoted);
            }
        }
    }
    smi_text_copy(first, quoted, sizeof(quoted));
    return smi_text_fail(r, err, APP_E_PARSE,
                         TOOL ": no GPU table in the output (%u line(s)%s%s%s)", it.lineno,
                         quoted[0] ? ", the first: '" : "", quoted, quoted[0] ? "'" : "");
}

int nvsmi_parse_table(const char *buf, size_t len, struct smi_result *r, struct app_err *err)
{
    struct nv_table t;
    struct smi_lines it;
    struct smi_span line;
    int rc = nvsmi_parse_error(buf, len, r, err);

    if (rc < 0)
        return rc;
    memset(&t, 0, sizeof(t));
    t.first_dev = r->ndevs;
    t.first_proc = r->nprocs;
    smi_text_lines_init(&it, buf, len);
    while (smi_text_next_line(&it, &line))
        nv_line(&t, r, line, it.lineno);
    nv_flush_dev(&t, r);
    if (!t.seen_gpu_hdr)
        return nv_no_table(buf, len, r, err);
    if (r->ndevs == t.first_dev)
        return smi_text_fail(r, err, APP_E_PARSE,
                             TOOL ": the GPU table has no rows (output cut short?)");
    return smi_text_done(r, err, TOOL);
}

/* ---- pmon ---- */

static void pmon_set(struct smi_proc *p, struct smi_span key, struct smi_span v)
{
    if (smi_text_eq(key, "gpu"))
        nv_proc_set(p, smi_text_span("GPU", 3), v);
    else if (smi_text_eq(key, "pid"))
        app_set(p, AC_PID, v);
    else if (smi_text_eq(key, "type"))
        nv_proc_set(p, smi_text_span("Type", 4), v);
    else if (smi_text_eq(key, "sm") && smi_text_int(v, NULL, &p->sm_pct))
        p->valid |= SMI_PROC_SM;
    else if (smi_text_eq(key, "mem") && smi_text_int(v, NULL, &p->memutil_pct))
        p->valid |= SMI_PROC_MEMUTIL;
    else if (smi_text_eq(key, "fb"))
        app_set(p, AC_MEM, v);
    else if (smi_text_eq(key, "command"))
        app_set(p, AC_NAME, v);
}

/* Keeps one record per (gpu, pid) among those this parse appended (from index first). */
static void pmon_store(struct smi_result *r, size_t first, const struct smi_proc *p)
{
    for (size_t i = first; i < r->nprocs; i++) {
        if (r->procs[i].pid == p->pid && r->procs[i].dev_index == p->dev_index) {
            r->procs[i] = *p;
            return;
        }
    }
    smi_result_add_proc(r, p);
}

static void pmon_row(struct smi_result *r, size_t first, const struct smi_span *cols, size_t ncols,
                     struct smi_span line, unsigned lineno)
{
    struct smi_span w[32];
    size_t nw = word_split(line, w, ncols < 32 ? ncols : 32);
    struct smi_proc p;

    if (nw + 1 < ncols || ncols > 32) {
        smi_text_skip(r, lineno);
        return;
    }
    smi_proc_init(&p, SMI_KIND_GPU);
    for (size_t i = 0; i < nw; i++)
        pmon_set(&p, cols[i], w[i]);
    if (!smi_proc_has(&p, SMI_PROC_PID)) {
        smi_text_skip(r, lineno);
        return;
    }
    pmon_store(r, first, &p);
}

int nvsmi_parse_pmon(const char *buf, size_t len, struct smi_result *r, struct app_err *err)
{
    struct smi_span cols[32], line;
    struct smi_lines it;
    size_t ncols = 0, first = r->nprocs;
    int rc = nvsmi_parse_error(buf, len, r, err);

    if (rc < 0)
        return rc;
    smi_text_lines_init(&it, buf, len);
    while (smi_text_next_line(&it, &line)) {
        struct smi_span s = smi_text_trim(line);

        if (!s.n)
            continue;
        if (s.p[0] == '#') {
            if (!ncols)
                ncols = word_split(smi_text_span(s.p + 1, s.n - 1), cols, 32);
            continue;
        }
        if (!ncols)
            return smi_text_fail(r, err, APP_E_PARSE,
                                 TOOL " pmon: data before the '# gpu pid ...' header");
        pmon_row(r, first, cols, ncols, s, it.lineno);
    }
    if (!ncols)
        return smi_text_fail(r, err, APP_E_PARSE, TOOL " pmon: no header line");
    return smi_text_done(r, err, TOOL);
}
