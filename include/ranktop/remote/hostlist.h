/* Host lists: Slurm / pdsh host-list expressions ("node[01-04,07],gpu[1-2]") and hostfiles
 * expanded into plain host names, in input order with duplicates kept, as `scontrol show
 * hostnames` prints them; and the check that a name is safe to hand to a remote shell. Pure
 * (no I/O, no global state), so any thread may use it. */
#ifndef RANKTOP_HOSTLIST_H
#define RANKTOP_HOSTLIST_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_REMOTE)
#error "ranktop/remote/hostlist.h belongs to collectors/remote/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>

#include "ranktop/base/status.h"

/* The most hosts one list may hold (Slurm's MAX_SLURM_NODES). */
#define HOSTLIST_MAX 65536

/* A list of host names; free with hostlist_free. Start from `struct hostlist l = {0}` and
 * change it only through the functions below (the capacity of v is implied by n). */
struct hostlist {
    char **v;
    size_t n;
};

/* Appends the hosts of expr (Slurm / pdsh syntax) to out. Returns 0, or a negative enum
 * app_status (APP_E_USAGE for bad syntax, APP_E_LIMIT past HOSTLIST_MAX hosts) with one line
 * in err. On error out is left as it was passed. An empty (or NULL) expr adds no host. */
int hostlist_expand(const char *expr, struct hostlist *out, struct app_err *err);

/* Parses a hostfile already read into buf (len bytes, need not be NUL-terminated): one host or
 * hostlist expression per line, `#` starts a comment, blank lines skipped, surrounding blanks
 * (and a CR) trimmed. Errors name the line number; on error out is left as it was passed. */
int hostlist_parse_file(const char *buf, size_t len, struct hostlist *out, struct app_err *err);

/* True when name is safe to hand to a remote shell as a host word: 1..253 bytes of
 * [A-Za-z0-9._-] plus an optional user@ prefix ([A-Za-z0-9._-]+@, the user at most 64 bytes),
 * neither part starting with '-' or '.'. NULL is not safe. */
bool hostlist_name_ok(const char *name);

/* Drops every name that appears earlier in the list, keeping the first occurrences in their
 * order (a host given twice is one host). Linear time. */
void hostlist_dedup(struct hostlist *l);

/* Frees every name and the vector; leaves an empty list that may be reused. */
void hostlist_free(struct hostlist *l);

#endif
