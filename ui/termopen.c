/* Opens the terminal wherever the binary was copied: the terminfo search path and the built-in
 * entry.
 *
 * The portable binary carries a static ncurses whose compiled-in search list is its build
 * machine's (Debian: /etc/terminfo, /lib/terminfo, /usr/share/terminfo). Other layouts keep
 * entries elsewhere (RHEL: /usr/share/terminfo only; some: /usr/lib/terminfo), so when the user
 * has not set TERMINFO_DIRS it is set to all of them; ncurses still looks in $TERMINFO and
 * ~/.terminfo first. When no entry for $TERM exists at all (a container without ncurses-base, a
 * terminal newer than the host's database), the monitor starts anyway with an xterm-256color
 * entry embedded at build time: it is written to a private temporary directory, loaded through
 * TERMINFO (restored afterwards) and removed at once, since ncurses reads an entry only when it
 * loads it. Runs once on the UI thread, before any other curses call and before any other
 * thread starts: setenv while another thread reads the environment (posix_spawn, getenv) is
 * a data race, and may free the environment array under the reader. */
#include "termopen.h"

#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TERMOPEN_DIRS "/etc/terminfo:/lib/terminfo:/usr/share/terminfo:/usr/lib/terminfo"

/* write_all FD: the whole buffer, or -1. */
static int write_all(int fd, const unsigned char *p, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, p, len);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Paths of the private copy of the built-in entry. */
struct entry_paths {
    char dir[256], sub[300], file[400];
};

/* Writes the built-in entry as DIR/<first letter>/<name> (ncurses' directory layout) in a new
 * private directory, DIR under $TMPDIR or /tmp. */
static int write_entry(struct entry_paths *p)
{
    const char *tmp = getenv("TMPDIR");
    int fd, rc;

    if (!tmp || tmp[0] != '/' || strlen(tmp) > 200)
        tmp = "/tmp";
    if (snprintf(p->dir, sizeof(p->dir), "%s/ranktop-terminfo-XXXXXX", tmp) >=
            (int)sizeof(p->dir) ||
        !mkdtemp(p->dir))
        return -1;
    if (snprintf(p->sub, sizeof(p->sub), "%s/%c", p->dir, termopen_fallback_name[0]) >=
            (int)sizeof(p->sub) ||
        snprintf(p->file, sizeof(p->file), "%s/%s", p->sub, termopen_fallback_name) >=
            (int)sizeof(p->file) ||
        mkdir(p->sub, 0700) < 0)
        return -1;
    fd = open(p->file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    rc = fd < 0 ? -1 : write_all(fd, termopen_fallback_entry, termopen_fallback_len);
    if (fd >= 0 && close(fd) < 0)
        rc = -1;
    return rc;
}

/* Loads the built-in entry through TERMINFO, then removes it and restores TERMINFO. */
static SCREEN *open_fallback(void)
{
    struct entry_paths p;
    const char *old = getenv("TERMINFO");
    char *saved = old ? strdup(old) : NULL;
    SCREEN *s = NULL;

    if (termopen_fallback_len == 0 || (old && !saved))
        goto out;
    memset(&p, 0, sizeof(p));
    if (write_entry(&p) == 0 && setenv("TERMINFO", p.dir, 1) == 0)
        s = newterm(termopen_fallback_name, stdout, stdin);
    /* Whatever was created goes; the calls on paths never made fail harmlessly. */
    if (p.file[0])
        unlink(p.file);
    if (p.sub[0])
        rmdir(p.sub);
    if (p.dir[0])
        rmdir(p.dir);
    if (saved)
        setenv("TERMINFO", saved, 1);
    else
        unsetenv("TERMINFO");
out:
    free(saved);
    return s;
}

int termopen_start(char *note, size_t n)
{
    const char *term = getenv("TERM");

    note[0] = '\0';
    if (!getenv("TERMINFO_DIRS"))
        setenv("TERMINFO_DIRS", TERMOPEN_DIRS, 0);
    if (term && *term && newterm(term, stdout, stdin))
        return 0;
    if (open_fallback()) {
        snprintf(note, n, "no terminfo entry for TERM=%s on this host: using the built-in %s",
                 term && *term ? term : "(unset)", termopen_fallback_name);
        return 0;
    }
    snprintf(note, n, "no terminfo entry for TERM=%s (searched $TERMINFO, ~/.terminfo, %s)%s",
             term && *term ? term : "(unset)", getenv("TERMINFO_DIRS"),
             termopen_fallback_len ? "" : "; this build has no built-in entry");
    return -1;
}
