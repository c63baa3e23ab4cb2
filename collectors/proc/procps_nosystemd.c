/* libsystemd's pid and session queries, answered "not supported", for the portable build only.
 *
 * The static libprocps.a and libproc2.a have one object (readproc) that calls these when a
 * caller asks for systemd fields (PROC_FILLSYSTEMD, the PIDS_SD_* items). procps_read asks only
 * for status and statm, so they are never reached; libsystemd ships no static archive, and
 * linking the shared one would tie the binary to it. Each answers -ENOSYS, which procps takes as
 * "no value" (the field reads "-"), so a future caller asking for them gets empty fields rather
 * than a wrong answer. No state, any thread. */
#include <errno.h>
#include <sys/types.h>

/* libsystemd's prototypes, which no header here declares (systemd's headers are not a build
 * dependency). */
int sd_pid_get_machine_name(pid_t pid, char **name);
int sd_pid_get_owner_uid(pid_t pid, uid_t *uid);
int sd_pid_get_session(pid_t pid, char **session);
int sd_pid_get_slice(pid_t pid, char **slice);
int sd_pid_get_unit(pid_t pid, char **unit);
int sd_pid_get_user_unit(pid_t pid, char **unit);
int sd_session_get_seat(const char *session, char **seat);

int sd_pid_get_machine_name(pid_t pid, char **name)
{
    (void)pid;
    (void)name;
    return -ENOSYS;
}

int sd_pid_get_owner_uid(pid_t pid, uid_t *uid)
{
    (void)pid;
    (void)uid;
    return -ENOSYS;
}

int sd_pid_get_session(pid_t pid, char **session)
{
    (void)pid;
    (void)session;
    return -ENOSYS;
}

int sd_pid_get_slice(pid_t pid, char **slice)
{
    (void)pid;
    (void)slice;
    return -ENOSYS;
}

int sd_pid_get_unit(pid_t pid, char **unit)
{
    (void)pid;
    (void)unit;
    return -ENOSYS;
}

int sd_pid_get_user_unit(pid_t pid, char **unit)
{
    (void)pid;
    (void)unit;
    return -ENOSYS;
}

int sd_session_get_seat(const char *session, char **seat)
{
    (void)session;
    (void)seat;
    return -ENOSYS;
}
