/* Export of a recorded history: Chrome trace JSON (Perfetto, chrome://tracing, speedscope),
 * speedscope's own sampled-profile JSON, and collapsed stacks (flamegraph.pl, inferno).
 *
 * The exporters only read the history they are given; pass a private copy made with
 * history_clone() so the engine's lock is never held while a file is written. Any thread may
 * call these functions; they share no state. */
#ifndef RANKTOP_EXPORT_H
#define RANKTOP_EXPORT_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_EXPORT)
#error "ranktop/export/export.h belongs to src/export/, a layer this one may not use"
#endif

#include "ranktop/model/history.h"
#include "ranktop/base/status.h"
#include "ranktop/model/waits.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum export_format {
    EXPORT_CHROME,
    EXPORT_SPEEDSCOPE,
    EXPORT_COLLAPSED,
    EXPORT_FLAMEGRAPH, /* self-contained interactive SVG */
    EXPORT_PERFETTO,   /* Perfetto's protobuf trace */
    EXPORT_NFORMATS
};

struct export_opts {
    enum export_format format;
    bool all_threads;     /* else the interpreters' main threads only */
    uint64_t from, to;    /* CLOCK_MONOTONIC ns window; 0 = unbounded on that side */
    uint64_t interval_ns; /* sampling interval: how long the last sample of a run lasts */
    const char *version;  /* ranktop version for the file's metadata; NULL = "" */
    /* Counters the user asked for that could not be had, for the file's metadata (Chrome:
     * otherData.counters_unavailable {"gpu": "why"}): pairs of a group name and the reason,
     * ended by NULL; NULL = none. */
    const char *const *unavailable;
    /* py-spy's --nolineno and -F: frames named by function and file only, one frame per
     * function (every format). */
    bool no_lines;
    /* Collapsed stacks and the flame graph name files package-relative (path_short:
     * torch/nn/modules/module.py), as dump's text does; the traces (Chrome, speedscope,
     * Perfetto) always keep full paths, which tools resolve. record sets it unless given
     * --full-filenames. */
    bool short_files;
    /* The kind-of-wait rules for the traces' "wait" instants (one per change of a rank's
     * kind); NULL: the built-in table. */
    const struct waits *waits;
};

/* Writes h to path atomically: PATH.tmp.<pid> (export_temp_name), checked writes, fflush,
 * fsync, rename over path, fsync of the directory. Only a regular file is replaced: a path
 * that is anything else is refused (APP_E_NOTREG). On failure the temp file is removed, any
 * previous file at path is left untouched, and err gets one line (APP_E_IO, "cannot write
 * /x/y.json: No space left on device"). Returns 0 or a negative app_status. */
int export_write(const struct history *h, const struct export_opts *o, const char *path,
                 struct app_err *err);

/* Writes h to f in o->format and flushes f (f is not closed). Returns 0, or APP_E_IO with
 * err set ("write error: ...") when a write or the flush failed. */
int export_stream(const struct history *h, const struct export_opts *o, FILE *f,
                  struct app_err *err);

/* Checks, before any sampling, that path can be an export's output: a name (not empty, not a
 * directory), a regular file or nothing yet, in a directory where a temp file can be made.
 * Returns 0, or a negative app_status with a one-line reason in err. */
int export_check_path(const char *path, struct app_err *err);

/* The temp file export_write writes for path in process pid: path + ".tmp." + pid, the name
 * part shortened to keep the whole within NAME_MAX. */
void export_temp_name(const char *path, long pid, char *out, size_t len);

/* Removes temps of path (export_temp_name's shape) left by processes that no longer run (a
 * run killed mid-write); returns how many. */
int export_clean_stale(const char *path);

/* A format name -> enum export_format; -1 for anything else. Our names are "chrome",
 * "speedscope", "collapsed", "flamegraph" and "perfetto"; py-spy's "chrometrace" and "raw"
 * are accepted for chrome and collapsed. */
int export_format_parse(const char *name);

/* The i-th name export_format_parse takes (fmt, when not NULL, gets its format), and the i-th
 * suffix export_format_from_name knows; NULL past the last. For help texts. */
const char *export_format_name(size_t i, int *fmt);
const char *export_format_suffix(size_t i, int *fmt);

/* File name suffix of a format: ".json", ".speedscope.json", ".folded". */
const char *export_format_ext(enum export_format fmt);

/* The format an output name asks for by its suffix, a trailing ".gz" aside (export_write
 * gzips such a file in any format): ".perfetto-trace" or ".pftrace" perfetto,
 * ".speedscope.json" speedscope, ".json" chrome, ".folded" or ".collapsed" collapsed, ".svg"
 * flamegraph; -1 for any other name (the caller's default applies). */
int export_format_from_name(const char *path);

#endif
