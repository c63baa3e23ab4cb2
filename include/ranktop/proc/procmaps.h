/* /proc/PID/maps as records: a pure parser plus a reader. */
#ifndef RANKTOP_PROCMAPS_H
#define RANKTOP_PROCMAPS_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_PROC)
#error "ranktop/proc/procmaps.h belongs to collectors/proc/, a layer this one may not use"
#endif

#include <stddef.h>
#include <stdint.h>

#include "ranktop/base/status.h"

struct procmap {
    uint64_t start, end, offset;
    char perms[5];
    uint64_t inode;
    uint64_t dev; /* makedev(major, minor) of the maps line */
    char *path;   /* "" for anonymous mappings; " (deleted)" kept as the kernel prints it */
};

struct procmaps {
    struct procmap *v;
    size_t n;
};

/* Parses the text of a maps file. Pure; malformed lines are skipped. The result owns its
 * strings; release with procmaps_fini. */
int procmaps_parse(const char *buf, size_t len, struct procmaps *out);

/* Reads /proc/PID/maps. APP_E_NOTFOUND when the process does not exist. */
int procmaps_read(int pid, struct procmaps *out, struct app_err *err);

void procmaps_fini(struct procmaps *m);

/* A path (at most n bytes, into out) through which this process opens the file mapped at m,
 * verified to be that file where the kernel allows: the target's root, ours, or map_files.
 * APP_E_NOTFOUND (anonymous, gone, or too long a path) or APP_E_PERM. */
int procmaps_file_path(int pid, const struct procmap *m, char *out, size_t n);

#endif
