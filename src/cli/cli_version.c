/* `ranktop -V`: what this binary is. The version and commit come from git at build time
 * (version.sh through meson's vcs_tag; meson's project version outside git), the architecture
 * and procps library from the configure step; the device and compression libraries are only
 * looked for at run time, so they are named as such. Main thread. */
#include "cli.h"

#include "ranktop/proc/memstat.h"

void cli_version(FILE *f)
{
    fprintf(f,
            "ranktop %s\n"
            "commit: %s\n"
            "architecture: %s\n"
            "procps: %s\n"
            "sanitizers: %s\n"
            "loaded at run time when present: NVML (libnvidia-ml.so.1), DCMI (libdcmi.so), "
            "liblzma.so.5\n",
            cli_vcs_version, cli_vcs_commit, RANKTOP_ARCH, memstat_procps(), RANKTOP_SANITIZE);
}
