/* Environment variables of another process (/proc/PID/environ). */
#ifndef RANKTOP_PROCENV_H
#define RANKTOP_PROCENV_H

#include <stddef.h>

/* Finds NAME in an environ image (NUL-separated NAME=value entries, `len` bytes). Pure.
 * Returns a pointer into buf to the value (NUL-terminated within len) or NULL. */
const char *procenv_find(const char *buf, size_t len, const char *name);

/* Copies the value of NAME in process pid's initial environment into out (at most outlen-1
 * bytes). Returns 0, APP_E_NOTFOUND when unset, or another negative app_status. */
int procenv_get(int pid, const char *name, char *out, size_t outlen);

/* Parses a decimal int value of NAME; returns 0 and *val, or a negative status. */
int procenv_get_int(int pid, const char *name, int *val);

/* The command line, arguments joined by spaces (cut to outlen-1 bytes). */
int procenv_cmdline(int pid, char *out, size_t outlen);

#endif
