/* procps_read through libprocps (procps 3.3: Debian 11, Ubuntu 22.04, RHEL 9), its
 * openproc/readproc interface.
 *
 * Owns procps_lock, which serialises every call into libprocps: readproc keeps internal
 * buffers and does not promise thread safety. Any thread may call procps_read. */
#include "procps.h"

#include <proc/readproc.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t procps_lock = PTHREAD_MUTEX_INITIALIZER;

static void procps_store(const proc_t *p, struct memstat *out)
{
    /* statm counts pages, status KiB; the page size is the kernel's (64 KiB on some aarch64). */
    long page_kb = sysconf(_SC_PAGESIZE) / 1024;

    memset(out, 0, sizeof(*out));
    out->rss_kb = p->vm_rss ? (int64_t)p->vm_rss : (int64_t)p->resident * page_kb;
    out->swap_kb = (int64_t)p->vm_swap;
    out->anon_kb = (int64_t)p->vm_rss_anon;
    out->valid = MEMSTAT_RSS | MEMSTAT_SWAP | MEMSTAT_ANON;
}

int procps_read(int pid, struct memstat *out, struct app_err *err)
{
    pid_t these[2] = {(pid_t)pid, 0};
    char path[32];
    PROCTAB *pt;
    proc_t *p = NULL;
    int rc = APP_E_IO;

    pthread_mutex_lock(&procps_lock);
    pt = openproc(PROC_FILLSTATUS | PROC_FILLMEM | PROC_PID, these);
    if (pt) {
        /* NULL: readproc allocates the record (and the strings status gives it), which
         * freeproc releases whole. */
        p = readproc(pt, NULL);
        closeproc(pt);
    }
    pthread_mutex_unlock(&procps_lock);
    if (p && p->state == 'Z')
        rc = APP_E_GONE;
    else if (p) {
        procps_store(p, out);
        rc = 0;
    } else if (pt) {
        snprintf(path, sizeof(path), "/proc/%d", pid);
        rc = access(path, F_OK) == 0 ? APP_E_IO : APP_E_GONE;
    }
    if (p)
        freeproc(p);
    if (rc == APP_E_GONE)
        app_err_set(err, rc, "process %d is gone", pid);
    return rc;
}
