/* The hang report of `ranktop watch`: one directory holding report.txt, report.json (schema
 * 1, doc/watch-report.md, data/watch-report.schema.json) and the window's traces, written
 * into a hidden temp directory beside its final name and renamed into place, so a reader (or
 * a watcher killed half-way) never sees half a report under the final name. Main thread. */
#ifndef RANKTOP_WATCH_REPORT_H
#define RANKTOP_WATCH_REPORT_H

#include "ranktop/engine/engine.h"
#include "ranktop/views/view.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define WATCH_REPORT_SCHEMA 1

/* Why a report is written; also the first word of its directory's name. */
enum watch_why {
    WATCH_HANG,      /* the hang verdict (ranktop-hang-...) */
    WATCH_EXIT,      /* a rank died by a signal or an exit status while others live */
    WATCH_ONDEMAND,  /* SIGUSR1 (ranktop-ondemand-...) */
    WATCH_STRAGGLER, /* --slow-after (ranktop-straggler-...) */
};

/* A straggler's figures: the rank, the share of the judged ticks it was the odd one out, and
 * each rank's share of ticks per kind of wait (names and shares parallel, per rank). */
struct watch_shares {
    int rank;
    double odd_share;
    size_t nranks;
    const int *ranks;         /* rank ids */
    size_t nkinds;            /* kinds per rank */
    const char *const *kinds; /* their names */
    const double *share;      /* nranks x nkinds, row by rank */
};

struct watch_report_in {
    enum watch_why why;
    const struct engine_view *v;   /* what the report shows (held by the caller) */
    uint64_t now;                  /* CLOCK_MONOTONIC ns of the judgement */
    const struct view_hang *hang;  /* the verdict at now */
    int dead_key;                  /* WATCH_EXIT: the key of the rank that died */
    const struct watch_shares *sh; /* WATCH_STRAGGLER, else NULL */
    uint64_t hang_after_ns;
    double rate_hz;
    bool exit_known;        /* exit statuses are being learnt (engine_exit_listening) */
    const char *self;       /* this binary, to run `dump --native --async -j` on the ranks */
    double dump_timeout;    /* seconds the dump may take */
    const char *version;    /* ranktop's */
    const void *waits;      /* the user's wait-kind rules (struct waits), NULL: built-in */
    const char *waits_file; /* their file, passed on to dump; NULL */
};

/* Writes one report into dir. final gets its directory's path. Returns 0, or a negative
 * status with err set; nothing is left under a final name on failure. */
int watch_report_write(const char *dir, const struct watch_report_in *in, char *final, size_t len,
                       struct app_err *err);

/* Starts path with argv and envp (NULL: this environment), stdout to out (created or
 * truncated; NULL: /dev/null) and stderr to err (NULL: with stdout), in a process group of its own,
 * with default signal dispositions and nothing blocked (the watcher blocks the signals it takes).
 */
int watch_spawn(const char *path, char *const argv[], char *const envp[], const char *out,
                const char *err, pid_t *pid);

/* Waits for pid at most timeout seconds, then kills its process group. Returns its wait
 * status, or -1 when it was killed for the time. */
int watch_reap(pid_t pid, double timeout);

struct json_object;
/* report.txt, rendered from report.json's object (watch_text.c); the caller frees it. */
char *watch_report_text(struct json_object *root);

/* Removes the temp directories of reports that processes no longer running left in dir (a
 * watcher killed while writing). Returns how many. */
int watch_report_clean(const char *dir);

#endif
