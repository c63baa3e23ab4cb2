/* The live monitor's terminal UI. Only ui/ touches curses; the UI reads the engine through
 * copies (never waits on a collector) and never reads /proc or runs a tool itself. */
#ifndef RANKTOP_UI_H
#define RANKTOP_UI_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_UI)
#error "ranktop/ui/ui.h belongs to ui/, a layer this one may not use"
#endif

#include <stdbool.h>

#include "ranktop/engine/engine.h"
#include "ranktop/base/status.h"

/* `ranktop -- CMD`: the job the monitor started. The monitor quits once ended(arg) says the
 * job ended (polled on the UI thread); Ctrl-C asks whether to stop the job too, and the answer
 * is left in stop (the caller stops it after ui_run). */
struct ui_job {
    bool (*ended)(void *arg);
    void *arg;
    const char *name; /* CMD, for the question */
    bool stop;        /* the user answered y */
};

struct waits; /* ranktop/model/waits.h */

struct ui_opts {
    struct engine *engine;
    double hang_after_s;    /* --hang-after (default 30) */
    const char *export_dir; /* --export-dir (default ".") */
    bool all_threads;       /* start in all-threads mode */
    const char *title;      /* shown in the header ("demo job", or the discovery mode) */
    struct ui_job *job;     /* the job started with `-- CMD`; NULL for none */
    bool full_filenames;    /* frames' files as full paths (default: package-relative) */
    bool no_lines;          /* -F, --nolineno: frames shown (and exported) without lines */
    bool gil_only;          /* -g: the engine keeps GIL holders' samples only (the header says) */
    /* --waits: the kind-of-wait rules; NULL: the built-in table */
    const struct waits *waits;
    /* c on a dead rank whose core is a file: writes the text of `dump --core core` to out,
     * on the UI's export thread (the UI runs no tools itself). 0, or a negative status with err
     * filled. NULL: c says it cannot. */
    int (*core_text)(const char *core, const char *out, struct app_err *err);
};

/* Opens the terminal (locale, terminfo, curses) on the main thread. It sets environment
 * variables (termopen.c), which no other thread may do or read meanwhile, so it must run before
 * any thread starts: call it before engine_start. 0, or a negative status (no terminal, no
 * terminfo entry) with err filled; ui_restore closes it again. ui_run calls it when it was not
 * called. */
int ui_open(struct app_err *err);

/* Runs the monitor until the user quits or SIGINT/SIGTERM arrives. The terminal is restored
 * on every exit path. Returns 0, or a negative status (no terminal) with err filled. */
int ui_run(const struct ui_opts *o, struct app_err *err);

/* Restores the terminal if curses is active (fatal paths). Async-signal-tolerant. */
void ui_restore(void);

#endif
