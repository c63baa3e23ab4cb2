/* /proc enumeration for discovery: every process with its parent, Python detection, launcher
 * identity from the environment, and PID-namespace translation. */
#ifndef RANKTOP_PROCSCAN_H
#define RANKTOP_PROCSCAN_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_PROC)
#error "ranktop/proc/procscan.h belongs to collectors/proc/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/proc/procenv.h"

struct pslist {
    int *pid, *ppid;
    int *nsinner; /* the PID in the process's own innermost namespace (NSpid's last value) */
    size_t n;
};

/* Lists every process visible in /proc with its parent (sorted by pid). */
int procscan_list(struct pslist *out);
void procscan_list_fini(struct pslist *l);

/* Index of pid in the list, or -1. */
long procscan_find(const struct pslist *l, int pid);

/* True when pid runs CPython: its executable is a python binary, or it maps libpython or a
 * python binary (run through ld.so or an emulator). */
bool procscan_is_python(int pid);
/* Whether a path's last component names a python executable: python, python3, python3.11,
 * python3.11d (also with the kernel's " (deleted)"); not python-config. */
bool procscan_python_name(const char *path);
/* Whether /proc/PID/comm (readable for every process) names a Python interpreter: a hint for
 * processes whose executable and maps cannot be read. */
bool procscan_comm_python(int pid);

/* What tells one program image of a process from the next: an exec keeps the pid and the
 * start time but changes the executable file or, with address-space randomisation, where the
 * stack starts; a reused pid changes the start time. */
struct proc_image {
    uint64_t dev, ino;   /* of the executable */
    uint64_t start_time; /* clock ticks after boot */
    uint64_t start_stack;
};

/* Whether tid is a thread of pid now (/proc/PID/task/TID exists; tid in our PID namespace). */
bool procscan_thread_of(int pid, int tid);

/* The state letter of /proc/PID/stat ('R', 'S', 'T' stopped, 't' traced, 'Z' zombie...), or
 * 0 when it cannot be read. */
char procscan_state(int pid);

/* Reads pid's image identity. Returns 0 or a negative status (APP_E_GONE when it exited). */
int procscan_image(int pid, struct proc_image *out);
bool proc_image_same(const struct proc_image *a, const struct proc_image *b);

/* Executable path (or comm when that is unreadable). Returns 0 or a negative status. */
int procscan_name(int pid, char *out, size_t len);

/* Launcher identity from /proc/PID/environ. Returns 0 or a negative status. */
int procscan_ident(int pid, struct rank_ident *id);

/* Appends every descendant of root (children, grandchildren...) to *out. */
void procscan_descendants(const struct pslist *l, int root, int **out, size_t *n);

/* Maps a PID printed by a tool that lives in another PID namespace (a container) to ours: the
 * unique process whose innermost NSpid equals it. Returns 0 when there is none or several. */
int procscan_from_inner(const struct pslist *l, int inner);

/* User + system CPU time of pid in clock ticks (sysconf(_SC_CLK_TCK) per second). */
int procscan_cpu_ticks(int pid, uint64_t *ticks);

/* The kernel ids of pid's threads now (/proc/PID/task), ascending, at most max of them.
 * Returns how many were put in tids (0 when the process is gone or unreadable). */
size_t procscan_threads(int pid, int *tids, size_t max);

/* A thread's comm (/proc/PID/task/TID/comm, at most 15 bytes, control characters scrubbed)
 * and its state letter (as procscan_state; 0 when unreadable). Returns 0 or a negative
 * status (APP_E_GONE when the thread exited), out "" then. */
int procscan_thread_comm(int pid, int tid, char *out, size_t len);
char procscan_thread_state(int pid, int tid);

#endif
