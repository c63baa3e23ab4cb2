/* Shipping ranktop to a node that has none (--ship): the remote command becomes a small POSIX
 * sh script, run as `sh -c SCRIPT sh RANKTOP-ARGS...`, which talks to the head over the remote
 * shell's own stdin and stdout:
 *
 *   node -> head   one line "ranktop-ship need ARCH" (its uname -m), first on stdout
 *   head -> node   one line "SIZE SHA256 ARCH", then exactly SIZE bytes of the binary
 *                  (SIZE 0: the head has none for ARCH, and says so itself)
 *
 * The script makes a private directory (mktemp -d, mode 0700), reads the bytes with head -c,
 * checks their count and SHA-256 with the node's sha256sum, and runs the binary with
 * RANKTOP_SHIPPED=DIR in its environment, which makes it delete itself and DIR as it starts
 * (ship_cleanup): nothing is left on the node however it ends, even killed. The script also
 * removes DIR on its own exit, for the paths where the binary never ran. The head must write
 * nothing after the binary until the program it ran has spoken (an agent's hello): head -c in
 * busybox reads through stdio and could swallow what follows in the pipe.
 *
 * The script's failures go to stderr as one line starting "ranktop-ship:" with exit status
 * SHIP_EXIT. ship_cache_get is thread-safe; the rest is pure. */
#ifndef RANKTOP_SHIP_H
#define RANKTOP_SHIP_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_REMOTE)
#error "ranktop/remote/ship.h belongs to collectors/remote/, a layer this one may not use"
#endif

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "ranktop/base/status.h"

#define SHIP_EXIT 125
#define SHIP_NEED "ranktop-ship need "
#define SHIP_ARCH_MAX 32
#define SHIP_MAX_BYTES (512u << 20) /* the largest binary shipped */
#define SHIP_DIRS_MAX 4

/* The remote command that ships: {"sh", "-c", SCRIPT, "sh", cmd[1]...}, NULL-terminated (cmd[0],
 * the program, is what gets shipped); the words are borrowed from cmd and a static script
 * (free only the array). The script has no
 * newline, backslash or single quote, so that a login shell of any kind takes it quoted. */
const char **ship_cmd(const char *const *cmd);

/* The ARCH of a "ranktop-ship need ARCH" line (len bytes, no newline) into arch; false when
 * the line is something else or ARCH is not a plain name ([A-Za-z0-9_.-], 1-31 bytes). */
bool ship_need(const char *line, size_t len, char arch[SHIP_ARCH_MAX]);

/* One binary ready to send: the header line and the bytes. */
struct ship_bin {
    char arch[SHIP_ARCH_MAX];
    char path[4096]; /* where it came from */
    char *data;      /* NULL: none for this arch (why says why) */
    size_t len;
    char header[128]; /* "SIZE SHA256 ARCH\n", or "0 - ARCH\n" when there is none */
    char why[400];
};

/* Binaries loaded once per architecture, shared by every host (and thread). self is the
 * head's own binary and self_arch its uname -m; dirs are searched, in order, for
 * ranktop-*-linux-ARCH (this version's name first) for any other architecture. */
struct ship_cache {
    pthread_mutex_t lock;
    char self[4096], self_arch[SHIP_ARCH_MAX];
    char dirs[SHIP_DIRS_MAX][4096];
    size_t ndirs;
    const char *version;
    struct ship_bin *bins;
    size_t nbins;
};

/* Prepares the cache (self from /proc/self/exe, self_arch from uname); dirs borrowed. */
void ship_cache_init(struct ship_cache *c, const char *version, const char *const *dirs,
                     size_t ndirs);
void ship_cache_fini(struct ship_cache *c);
/* The binary for arch, loaded (and hashed) on first use; borrowed until ship_cache_fini.
 * Never NULL: a missing binary is a ship_bin with data NULL and why set. */
const struct ship_bin *ship_cache_get(struct ship_cache *c, const char *arch);

/* Called first thing by main: when RANKTOP_SHIPPED names the directory this binary runs from,
 * removes the binary and the directory (a running program needs neither on Linux) and unsets
 * the variable. Anything else is left alone. */
void ship_cleanup(void);

#endif
