/* procps_read in a build without a procps library (meson -Dprocps=none, or auto where neither
 * libproc2 nor libprocps was found). It always defers to the caller's own /proc/PID/status
 * reader, which gives the same three figures (RSS, SWAP, ANON); a figure status lacks stays
 * unset, i.e. shown as missing. Stateless; any thread. */
#include "procps.h"

int procps_read(int pid, struct memstat *out, struct app_err *err)
{
    (void)pid;
    (void)out;
    return app_err_set(err, APP_E_IO, "built without a procps library");
}
