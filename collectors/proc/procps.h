/* The procps library's reading of one process's memory, whichever library the build links
 * (meson option procps; README, "Building"): procps_libproc2.c, procps_libprocps.c or
 * procps_none.c implements it, and only memstat.c calls it, as its fallback when
 * /proc/PID/smaps_rollup is unreadable. Any thread may call it: a variant whose library keeps
 * state serialises it itself. */
#ifndef RANKTOP_PROCPS_H
#define RANKTOP_PROCPS_H

#include "ranktop/proc/memstat.h"

/* Fills RSS, SWAP and ANON (KiB) from the library's view of /proc/PID/status and statm. 0,
 * APP_E_GONE (gone or a zombie, with a message in err), or APP_E_IO when the library failed or
 * none is built in: the caller then reads /proc/PID/status itself. */
int procps_read(int pid, struct memstat *out, struct app_err *err);

#endif
