/* The monitor's `c` key: the text of `ranktop dump --core` on a dead rank's core, written next
 * to the exports. The UI runs no tools itself; it calls this through ui_opts on its export
 * thread. The dump runs as a child of this very binary (/proc/self/exe), so the monitor needs no
 * PATH and reads the core with the same code as the command line; its output is written to
 * OUT.tmp.<pid> and renamed over OUT, so a reader never sees half a file. */
#include "cli.h"
#include "ranktop/devices/exec.h"
#include "ranktop/base/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CORE_DUMP_MS 120000 /* reading a large core on a busy node */

static int write_all(const char *out, const char *text, size_t len, struct app_err *err)
{
    char tmp[4200];
    FILE *f;
    bool ok;

    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", out, (int)getpid());
    if (!(f = fopen(tmp, "w")))
        return app_err_set(err, APP_E_IO, "cannot write %s: %s", tmp, strerror(errno));
    ok = fwrite(text, 1, len, f) == len;
    ok &= fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, out) != 0) {
        int e = errno;

        unlink(tmp);
        return app_err_set(err, APP_E_IO, "cannot write %s: %s", out, strerror(e));
    }
    return 0;
}

int cli_core_text(const char *core, const char *out, struct app_err *err)
{
    const char *argv[] = {"/proc/self/exe", "dump", "--core", core, NULL};
    struct exec_result res = {0};
    int rc = exec_run(argv, CORE_DUMP_MS, &res, err);

    if (rc == 0 && res.status != 0)
        rc = app_err_set(err, APP_E_IO, "dump --core %s: %.*s", core, (int)strcspn(res.err, "\n"),
                         res.err);
    if (rc == 0)
        rc = write_all(out, res.out, res.out_len, err);
    exec_result_fini(&res);
    return rc;
}
