/* procps_read through libproc2 (procps-ng 4: Debian 12+, Ubuntu 24.04+).
 *
 * Owns proc2_lock, which serialises every call into libproc2: it keeps internal buffers and
 * does not promise thread safety. Any thread may call procps_read. */
#include "procps.h"

#include <libproc2/pids.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t proc2_lock = PTHREAD_MUTEX_INITIALIZER;

static bool proc_exists(int pid)
{
    char path[32];

    snprintf(path, sizeof(path), "/proc/%d", pid);
    return access(path, F_OK) == 0;
}

static void proc2_store(struct pids_stack *s, struct memstat *out)
{
    /* Item order as in procps_read's items[]: state, VmRSS, VmSwap, RssAnon, statm resident. */
    unsigned long rss = PIDS_VAL(1, ul_int, s, NULL);

    memset(out, 0, sizeof(*out));
    out->rss_kb = (int64_t)(rss ? rss : PIDS_VAL(4, ul_int, s, NULL));
    out->swap_kb = (int64_t)PIDS_VAL(2, ul_int, s, NULL);
    out->anon_kb = (int64_t)PIDS_VAL(3, ul_int, s, NULL);
    out->valid = MEMSTAT_RSS | MEMSTAT_SWAP | MEMSTAT_ANON;
}

int procps_read(int pid, struct memstat *out, struct app_err *err)
{
    enum pids_item items[] = {PIDS_STATE, PIDS_VM_RSS, PIDS_VM_SWAP, PIDS_VM_RSS_ANON,
                              PIDS_MEM_RES};
    struct pids_info *info = NULL;
    struct pids_fetch *f;
    unsigned these = (unsigned)pid;
    int rc = APP_E_IO;

    pthread_mutex_lock(&proc2_lock);
    if (procps_pids_new(&info, items, (int)(sizeof(items) / sizeof(items[0]))) < 0)
        goto out;
    f = procps_pids_select(info, &these, 1, PIDS_SELECT_PID);
    if (!f || !f->counts)
        goto out;
    if (f->counts->total == 0)
        rc = proc_exists(pid) ? APP_E_IO : APP_E_GONE;
    else if (PIDS_VAL(0, s_ch, f->stacks[0], info) == 'Z')
        rc = APP_E_GONE;
    else {
        proc2_store(f->stacks[0], out);
        rc = 0;
    }
out:
    procps_pids_unref(&info);
    pthread_mutex_unlock(&proc2_lock);
    if (rc == APP_E_GONE)
        app_err_set(err, rc, "process %d is gone", pid);
    return rc;
}
