/* The --waits option every command that names kinds of wait takes (dump, the monitor, record):
 * reading the user's rules file, and the kind of one live thread as dump and the reports see
 * it (frames, /proc state and syscall, the GC flag). Main thread only. */
#ifndef RANKTOP_CLI_WAITS_H
#define RANKTOP_CLI_WAITS_H

#include "ranktop/native/native.h"
#include "ranktop/proc/procwait.h"
#include "ranktop/python/pystack.h"
#include "ranktop/model/waits.h"

#define CLI_WAITS_MAX_BYTES (4u << 20) /* a rules file larger than this is refused */

/* Reads and parses the rules file path into *out. On failure prints "ranktop CMD: FILE:LINE:
 * why" (or why it could not be read) and returns CLI_EXIT_USAGE; 0 on success. */
int cli_waits_load(const char *path, const char *cmd, struct waits **out);

/* What dump knows of one thread's wait: the kernel's view (read before the frames are
 * classified, so that both describe about the same instant) and the verdict. */
struct cli_wait {
    struct procwait pw;   /* state 0 / syscall -1 / wchan "" when unknown */
    int in_gc, holds_gil; /* 1, 0, -1 unknown */
    enum wait_kind kind;
    char why[256];
};

/* Reads thread tid of pid's state, syscall and wait channel into w (unknown where it cannot),
 * and keeps in_gc and holds_gil for the verdict. */
void cli_wait_read(int pid, int tid, int in_gc, int holds_gil, struct cli_wait *w);

/* The verdict on w's facts and the thread's frames: Python frames py[0..npy) innermost first,
 * or, when merged is not NULL, the merged native and Python frames m[0..nm). */
void cli_wait_classify(const struct waits *table, const struct pyframe *py, size_t npy,
                       const struct merged_frame *m, size_t nm, struct cli_wait *w);

/* The table to classify with: the user's when one was loaded, else the built-in one. */
const struct waits *cli_waits_table(const struct waits *user);

#endif
