/* Remote-shell command templates (--rsh) and the argv built from them for one host.
 *
 * A template is split into words with POSIX sh quoting rules (single quotes, double quotes,
 * backslash) but no shell ever runs it: "ssh -o 'ProxyCommand=ssh -W %%h:%%p bastion'" is
 * three words. In a word, %h stands for the host and %% for a literal %; any other % is an
 * error. Without %h the host goes after the template's words, as ssh expects.
 *
 * The remote command (ranktop agent ...) is appended after the template (and any words the
 * launcher adds). Where the remote end re-parses what it gets as a shell command line (ssh
 * joins its words and the login shell parses them; pdsh's ssh module too), every word of the
 * remote command is quoted for POSIX sh; where the launcher passes argv as is (kubectl exec,
 * srun), words go as they are. Pure (no I/O, no global state): any thread may use it. */
#ifndef RANKTOP_RSH_H
#define RANKTOP_RSH_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_REMOTE)
#error "ranktop/remote/rsh.h belongs to collectors/remote/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>

#include "ranktop/base/status.h"

/* The longest template accepted, in bytes. */
#define RSH_TEMPLATE_MAX 4096

/* A parsed template; free with rsh_tmpl_fini. w holds the words with quoting removed and %%
 * turned into %; where the host goes (a real %h) a word holds the byte RSH_HOST_MARK, which no
 * template may contain otherwise. */
#define RSH_HOST_MARK '\x01'
struct rsh_tmpl {
    char **w;
    size_t n;
    bool has_host; /* some word holds %h */
};

/* Parses text into out. Returns 0, or APP_E_USAGE with one line in err: an empty template,
 * unbalanced quotes, a trailing backslash, a % at the end or before anything but h and %,
 * control bytes other than tab and newline, a text longer than RSH_TEMPLATE_MAX. On error out is
 * left empty. */
int rsh_tmpl_parse(const char *text, struct rsh_tmpl *out, struct app_err *err);
void rsh_tmpl_fini(struct rsh_tmpl *t);

/* The argv for one host: the template's words with each %h replaced by host (or, without %h,
 * host as the next word), then the words of extra (the launcher's own, as they are), then the
 * words of cmd, each quoted by rsh_quote when shell is set. extra and cmd are NULL-terminated
 * and may be NULL; host may be NULL for launchers that name hosts elsewhere: then no host word
 * is added and a %h stays "%h" (pdsh's exec module replaces it itself). NULL-terminated; free
 * with rsh_argv_free. */
char **rsh_argv(const struct rsh_tmpl *t, const char *host, const char *const *extra,
                const char *const *cmd, bool shell);
void rsh_argv_free(char **v);

/* word quoted for POSIX sh, newly allocated: unchanged when every byte is one no shell treats
 * specially ([A-Za-z0-9._/:@%+,-], not empty; = is quoted, so that a first word is never an
 * assignment), else wrapped in '...' with each ' written as
 * '\''. */
char *rsh_quote(const char *word);

/* The last lines a remote shell wrote on stderr, kept for its error line: at most
 * RSH_TAIL_LINES lines that are not blank, oldest first, each cut at RSH_TAIL_LINE - 1 bytes
 * (on a UTF-8 boundary), tabs made spaces and other control bytes '?' (the text comes from
 * another node and ends up on a terminal). Zero-initialise; nothing to free. */
#define RSH_TAIL_LINES 3
#define RSH_TAIL_LINE 160
struct rsh_tail {
    char line[RSH_TAIL_LINES][RSH_TAIL_LINE];
    unsigned n; /* lines held */
};

/* Adds one line (len bytes, no newline needed; a trailing CR or blanks are dropped); a blank
 * line is ignored. When the tail is full the oldest line goes. */
void rsh_tail_add(struct rsh_tail *t, const char *line, size_t len);

/* Adds every line of text (len bytes; NULs in it end nothing and become spaces): only the
 * last RSH_TAIL_LINES lines that are not blank are looked at, so a large text costs one
 * backward scan over them. */
void rsh_tail_feed(struct rsh_tail *t, const char *text, size_t len);

/* The tail's lines joined with " | " into out (len bytes, at least 1): when they do not all
 * fit, older lines are left out first, then the last line is cut. "" for an empty tail. */
void rsh_tail_join(const struct rsh_tail *t, char *out, size_t len);

/* The remote shell's own words for its end, one line in out (len bytes, at least 1):
 * "NAME exited with status N" (sig 0) or "NAME was killed by signal N" (sig > 0), then ": "
 * and the tail's lines (rsh_tail_join, within what is left of out) when it holds any. NAME
 * is the last path component of prog (argv[0] as it ran), "the remote shell" without one. */
void rsh_explain(char *out, size_t len, const char *prog, int status, int sig,
                 const struct rsh_tail *t);

#endif
