/* Shipping the ranktop binary to a node through the remote shell's stdin (ranktop/remote/ship.h):
 * the node's script, the parsing of its one request line, the binaries the head sends
 * (loaded and hashed once per architecture), and the shipped binary's cleanup of itself.
 *
 * Invariants: the script is one line without single quotes or backslashes (rsh_quote wraps it
 * in '...' for ssh's login shell, srun and kubectl pass it as is); a binary is read whole, at
 * most SHIP_MAX_BYTES, and its header names exactly the bytes sent. The cache's lock guards
 * its list; a loaded ship_bin never changes or moves (an array of pointers would be needed to
 * grow: the list is allocated once, one slot per architecture asked, at most 8). */
#include "ranktop/remote/ship.h"

#include "ranktop/base/sha256.h"
#include "ranktop/base/util.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#define SHIP_ARCHES 8

/* Each step fails with one "ranktop-ship:" line on stderr and SHIP_EXIT. $1... are the
 * program's arguments ($0 is "sh"). The binary is run, not exec'd, so that the EXIT trap
 * still removes the directory when it cannot start (a noexec /tmp: exit 126). */
static const char script[] =
    "e() { echo \"ranktop-ship: $*\" >&2; exit 125; }; "
    "command -v sha256sum >/dev/null 2>&1 || e \"this node has no sha256sum to check the "
    "binary with (coreutils or busybox)\"; "
    "m=$(uname -m) || e \"uname -m failed\"; "
    "d=$(mktemp -d \"${TMPDIR:-/tmp}/ranktop.XXXXXX\") || e \"mktemp -d failed in "
    "${TMPDIR:-/tmp}\"; "
    "c() { rm -rf \"$d\"; }; trap c EXIT; trap \"exit 129\" HUP; trap \"exit 130\" INT; "
    "trap \"exit 143\" TERM; "
    "echo \"ranktop-ship need $m\"; "
    "read -r n s a || e \"the head sent no binary\"; "
    "[ \"$n\" -gt 0 ] 2>/dev/null || e \"the head has no ranktop for $m\"; "
    "head -c \"$n\" > \"$d/ranktop\" || e \"writing $d/ranktop failed\"; "
    "w=$(wc -c < \"$d/ranktop\"); "
    "[ $w -eq \"$n\" ] || e \"got $w of $n bytes of the binary\"; "
    "[ \"$a\" = \"$m\" ] || e \"the head sent a binary for $a, this node is $m (one srun step "
    "gets one binary: reach mixed architectures with ssh)\"; "
    "h=$(sha256sum < \"$d/ranktop\"); h=${h%% *}; "
    "[ \"$h\" = \"$s\" ] || e \"not run: SHA-256 mismatch: the head sent $s, this node got $h\"; "
    "chmod 700 \"$d/ranktop\"; "
    "RANKTOP_SHIPPED=$d \"$d/ranktop\" \"$@\"; r=$?; "
    "[ $r -ne 126 ] || echo \"ranktop-ship: $d/ranktop would not run (a noexec mount? set TMPDIR "
    "on the node)\" >&2; "
    "exit $r";

const char **ship_cmd(const char *const *cmd)
{
    size_t n = 0;
    const char **v;

    while (cmd && cmd[n])
        n++;
    v = x_calloc(n + 5, sizeof(char *));
    v[0] = "sh";
    v[1] = "-c";
    v[2] = script;
    v[3] = "sh";
    for (size_t i = 1; i < n; i++) /* cmd[0], the program, is the binary shipped */
        v[3 + i] = cmd[i];
    return v;
}

static bool arch_ok(const char *s, size_t n)
{
    if (n == 0 || n >= SHIP_ARCH_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' || s[i] == '.'))
            return false;
    return true;
}

bool ship_need(const char *line, size_t len, char arch[SHIP_ARCH_MAX])
{
    size_t k = strlen(SHIP_NEED);

    while (len && line[len - 1] == '\r')
        len--;
    if (len <= k || memcmp(line, SHIP_NEED, k) || !arch_ok(line + k, len - k))
        return false;
    memcpy(arch, line + k, len - k);
    arch[len - k] = '\0';
    return true;
}

void ship_cache_init(struct ship_cache *c, const char *version, const char *const *dirs,
                     size_t ndirs)
{
    struct utsname u;
    ssize_t n;

    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->lock, NULL);
    n = readlink("/proc/self/exe", c->self, sizeof(c->self) - 1);
    c->self[n > 0 ? n : 0] = '\0';
    if (uname(&u) == 0)
        snprintf(c->self_arch, sizeof(c->self_arch), "%.31s", u.machine);
    c->version = version;
    for (size_t i = 0; i < ndirs && c->ndirs < SHIP_DIRS_MAX; i++)
        if (dirs[i] && dirs[i][0])
            snprintf(c->dirs[c->ndirs++], sizeof(c->dirs[0]), "%s", dirs[i]);
    c->bins = x_calloc(SHIP_ARCHES, sizeof(*c->bins));
}

void ship_cache_fini(struct ship_cache *c)
{
    for (size_t i = 0; i < c->nbins; i++)
        free(c->bins[i].data);
    free(c->bins);
    pthread_mutex_destroy(&c->lock);
    memset(c, 0, sizeof(*c));
}

/* How well a file name fits: 3 ranktop-VERSION-linux-ARCH, 2 the same VERSION with a git
 * describe suffix (ranktop-VERSION-N-gHASH[-dirty]-linux-ARCH, as release names a build
 * between tags), 1 any ranktop-*-linux-ARCH, 0 none. */
static int fit(const char *name, const char *version, const char *arch)
{
    size_t nl = strlen(name), vl = strlen(version), al = strlen(arch);

    if (nl < 8 + 7 + al + 1 || strncmp(name, "ranktop-", 8) ||
        strncmp(name + nl - al - 7, "-linux-", 7) || strcmp(name + nl - al, arch))
        return 0;
    if (nl == 8 + vl + 7 + al && !strncmp(name + 8, version, vl))
        return 3;
    return !strncmp(name + 8, version, vl) && name[8 + vl] == '-' ? 2 : 1;
}

/* The best-fitting regular file in dir (fit; among equals the last in byte order). Any
 * version ships: the agent protocol says whether the head can use it. */
static bool find_in(const char *dir, const char *version, const char *arch, char *out, size_t len)
{
    char best[256] = "";
    int best_fit = 0;
    struct stat st;
    struct dirent *de;
    DIR *d;

    if (!(d = opendir(dir)))
        return false;
    while ((de = readdir(d))) {
        int f = fit(de->d_name, version, arch);

        if (f && strlen(de->d_name) < sizeof(best) &&
            (f > best_fit || (f == best_fit && strcmp(de->d_name, best) > 0))) {
            snprintf(best, sizeof(best), "%s", de->d_name);
            best_fit = f;
        }
    }
    closedir(d);
    return best[0] && snprintf(out, len, "%s/%s", dir, best) < (int)len && stat(out, &st) == 0 &&
           S_ISREG(st.st_mode);
}

static void load(struct ship_cache *c, struct ship_bin *b)
{
    char sum[65];
    bool found = false;
    size_t at;

    if (!strcmp(b->arch, c->self_arch) && c->self[0]) {
        snprintf(b->path, sizeof(b->path), "%s", c->self);
        found = true;
    }
    for (size_t i = 0; !found && i < c->ndirs; i++)
        found = find_in(c->dirs[i], c->version, b->arch, b->path, sizeof(b->path));
    snprintf(b->header, sizeof(b->header), "0 - %s\n", b->arch);
    if (!found) {
        at = (size_t)snprintf(b->why, sizeof(b->why),
                              "--ship: no ranktop for %s (no ranktop-*-linux-%s in", b->arch,
                              b->arch);
        for (size_t i = 0; i < c->ndirs && at < sizeof(b->why); i++)
            at += (size_t)snprintf(b->why + at, sizeof(b->why) - at, "%s %s", i ? "," : "",
                                   c->dirs[i]);
        if (at < sizeof(b->why))
            snprintf(b->why + at, sizeof(b->why) - at, "%s; --ship-dir names another)",
                     c->ndirs ? "" : " no directory");
        return;
    }
    if (file_read_regular(b->path, SHIP_MAX_BYTES, &b->data, &b->len) < 0 || b->len == 0) {
        free(b->data);
        b->data = NULL;
        snprintf(b->why, sizeof(b->why), "--ship: cannot read %.300s", b->path);
        return;
    }
    sha256_hex(b->data, b->len, sum);
    snprintf(b->header, sizeof(b->header), "%zu %s %s\n", b->len, sum, b->arch);
}

const struct ship_bin *ship_cache_get(struct ship_cache *c, const char *arch)
{
    static struct ship_bin none = {.header = "0 - none\n", .why = "--ship: too many architectures"};
    struct ship_bin *b = NULL;

    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->nbins && !b; i++)
        if (!strcmp(c->bins[i].arch, arch))
            b = &c->bins[i];
    if (!b && c->nbins < SHIP_ARCHES) {
        b = &c->bins[c->nbins++];
        snprintf(b->arch, sizeof(b->arch), "%s", arch);
        load(c, b); /* under the lock: other hosts of this arch wait for the one read */
    }
    pthread_mutex_unlock(&c->lock);
    return b ? b : &none;
}

void ship_cleanup(void)
{
    const char *dir = getenv("RANKTOP_SHIPPED");
    char mine[PATH_MAX + 16];
    struct stat me, file;

    if (!dir || !dir[0])
        return;
    snprintf(mine, sizeof(mine), "%s/ranktop", dir);
    /* Only the binary that runs, in the directory named: a stray variable deletes nothing.
     * Compared by inode, not path: TMPDIR may hold a symlink or a trailing slash. */
    if (stat("/proc/self/exe", &me) == 0 && stat(mine, &file) == 0 && me.st_dev == file.st_dev &&
        me.st_ino == file.st_ino) {
        unlink(mine);
        rmdir(dir);
    }
    unsetenv("RANKTOP_SHIPPED");
}
