/* Text helpers shared by the nvidia-smi and npu-smi parsers: lines, box-drawn table rows,
 * header columns, and "unknown"-aware number parsing.
 *
 * Everything works on spans into the caller's buffer, which need not be NUL-terminated; no
 * function reads outside [p, p + n). Pure, no allocation, any thread. */
#ifndef RANKTOP_SMI_TEXT_H
#define RANKTOP_SMI_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/devices/devices.h"
#include "ranktop/base/status.h"

struct smi_span {
    const char *p;
    size_t n;
};

enum smi_line_kind {
    SMI_LINE_BLANK,     /* only blanks */
    SMI_LINE_TEXT,      /* anything that is not a table line */
    SMI_LINE_ROW,       /* starts with '|' */
    SMI_LINE_BORDER,    /* +----+ or |----| */
    SMI_LINE_BORDER_EQ, /* +====+ : ends a header */
};

struct smi_lines {
    const char *p, *end;
    unsigned lineno; /* 1-based number of the line last returned */
};

#define SMI_TEXT_MAX_COLS 8  /* columns named in one header cell */
#define SMI_TEXT_MAX_CELLS 8 /* '|'-separated cells in one row */

/* The column names of one header cell, split at runs of two or more blanks, with their
 * offsets from the start of the cell. */
struct smi_cols {
    size_t n;
    struct smi_span name[SMI_TEXT_MAX_COLS];
    size_t start[SMI_TEXT_MAX_COLS];
};

#define SMI_TEXT_MAX_HROWS 6 /* header rows of one table */

/* The header rows of a box-drawn table (the rows above its +====+ line). */
struct smi_hdr {
    size_t nrows;
    struct smi_hrow {
        struct smi_span line;
        size_t ncells;
        struct smi_cols cols[SMI_TEXT_MAX_CELLS];
    } rows[SMI_TEXT_MAX_HROWS];
};

/* Receives one (column name without unit, value) pair of a data row. */
typedef void (*smi_field_fn)(void *ctx, struct smi_span key, struct smi_span val);

void smi_text_lines_init(struct smi_lines *it, const char *buf, size_t len);
/* Next line without its "\n" or "\r\n"; false at the end. */
bool smi_text_next_line(struct smi_lines *it, struct smi_span *line);
enum smi_line_kind smi_text_line_kind(struct smi_span line);

/* Splits a table row into the cells between '|' characters (text before the first and after
 * the last '|' is dropped). *closed says whether the row ended with '|': a row cut short by
 * a truncated output has not. Returns the number of cells stored (at most max). */
size_t smi_text_cells(struct smi_span line, struct smi_span *cells, size_t max, bool *closed);

void smi_text_cols_split(struct smi_span cell, struct smi_cols *cols);
/* Assigns the values of a data cell to the columns of its header cell: vals[i] is the text
 * under cols->name[i] (possibly empty). Values are whitespace-separated; "a / b" pairs are
 * one value; single-blank-separated words ("GeForce GTX 108...") are one value when that
 * makes the count match; otherwise each value goes to the column it starts under. */
void smi_text_cols_assign(struct smi_span cell, const struct smi_cols *cols, struct smi_span *vals);

void smi_text_hdr_reset(struct smi_hdr *h);
/* Adds a header row; false when the table has more header rows than we keep. */
bool smi_text_hdr_add(struct smi_hdr *h, struct smi_span line);
/* Whether some header column is named key (unit ignored, case-insensitive). */
bool smi_text_hdr_has(const struct smi_hdr *h, const char *key);
/* Matches the cells of a data row to the cells of header row k and calls fn for every column.
 * Returns false, calling nothing, when the row is not closed by '|' (a cut-off line). */
bool smi_text_hdr_visit(const struct smi_hdr *h, size_t k, struct smi_span line, smi_field_fn fn,
                        void *ctx);

struct smi_span smi_text_span(const char *p, size_t n);
struct smi_span smi_text_trim(struct smi_span s);
/* A header name without its unit: "Power(W)" -> "Power", "memory.used [MiB]" -> "memory.used". */
struct smi_span smi_text_key(struct smi_span s);
/* Case-insensitive comparison of the trimmed span with a literal. */
bool smi_text_eq(struct smi_span s, const char *lit);
bool smi_text_starts(struct smi_span s, const char *lit);
/* Case-sensitive substring search; *at gets the offset when not NULL. */
bool smi_text_find(struct smi_span s, const char *lit, size_t *at);
/* Blank, N/A, [N/A], NA, -, or any other "[...]" placeholder ([Not Supported]). */
bool smi_text_unknown(struct smi_span s);

/* A non-negative decimal with an optional unit suffix (case-insensitive, blank allowed before
 * it; unit may be NULL). False for unknown, malformed or out-of-range text. */
bool smi_text_int(struct smi_span s, const char *unit, int64_t *out);
bool smi_text_double(struct smi_span s, const char *unit, double *out);
/* Splits "a / b" at its '/'. */
bool smi_text_pair(struct smi_span s, struct smi_span *a, struct smi_span *b);
/* Copies the trimmed span into dst (always NUL-terminated, truncated to fit). */
void smi_text_copy(struct smi_span s, char *dst, size_t cap);
/* The blank-separated word following lit in s ("Version:" -> "23.0.rc1"). */
bool smi_text_word_after(struct smi_span s, const char *lit, struct smi_span *word);

/* Counts a recognised data line that could not be used (cut short, malformed). */
void smi_text_skip(struct smi_result *r, unsigned lineno);

/* End of a parse: record the outcome in r and err. smi_text_fail returns code; smi_text_done
 * returns 0 and notes skipped lines in r->msg. */
int smi_text_fail(struct smi_result *r, struct app_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int smi_text_done(struct smi_result *r, struct app_err *err, const char *tool);

#endif
