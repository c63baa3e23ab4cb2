/* Remote-shell templates: the --rsh text split into words as POSIX sh splits a simple command
 * (quote removal only: no expansion of any kind, no shell runs), %h marked where the host goes,
 * and the argv for one host, with the remote command quoted for the shells that re-parse it;
 * and the one line that says how a remote shell ended (its status and its last stderr lines).
 *
 * Invariants: a parsed word never holds RSH_HOST_MARK except where the template said %h; the
 * argv's words are copies (the template can be freed while an argv lives). Pure: any thread. */
#include "ranktop/remote/rsh.h"

#include "ranktop/base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A word being built: bytes so far, and whether a quote made it exist even when empty. */
struct word {
    char *b;
    size_t n, cap;
    bool quoted;
};

static void word_put(struct word *w, char c)
{
    if (w->n + 2 > w->cap) {
        w->cap = w->cap ? w->cap * 2 : 32;
        w->b = x_reallocarray(w->b, w->cap, 1);
    }
    w->b[w->n++] = c;
    w->b[w->n] = '\0';
}

static void tmpl_push(struct rsh_tmpl *t, struct word *w)
{
    if (!w->n && !w->quoted)
        return;
    t->w = x_reallocarray(t->w, t->n + 2, sizeof(*t->w));
    t->w[t->n++] = w->b ? w->b : x_strdup("");
    t->w[t->n] = NULL;
    *w = (struct word){0};
}

/* One byte of a word, % sequences resolved; *s is advanced past what was used. */
static int put_char(struct rsh_tmpl *t, struct word *w, const char **s, struct app_err *err)
{
    char c = **s;

    if ((unsigned char)c < 0x20 && c != '\t' && c != '\n')
        return app_err_set(err, APP_E_USAGE, "--rsh: a control character in the command");
    (*s)++;
    if (c != '%') {
        word_put(w, c);
        return 0;
    }
    if (**s == '%') {
        word_put(w, '%');
    } else if (**s == 'h') {
        word_put(w, RSH_HOST_MARK);
        t->has_host = true;
    } else {
        return app_err_set(err, APP_E_USAGE, "%s",
                           **s ? "--rsh: '%' must be followed by h (the host) or % (a '%')"
                               : "--rsh: '%' at the end (write %% for a '%')");
    }
    (*s)++;
    return 0;
}

/* The inside of a quoted part, *s just past its opening quote; leaves *s past the closing one. */
static int quoted(struct rsh_tmpl *t, struct word *w, const char **s, char q, struct app_err *err)
{
    w->quoted = true;
    while (**s != q) {
        if (!**s)
            return app_err_set(err, APP_E_USAGE, "--rsh: unbalanced %s quote",
                               q == '\'' ? "single" : "double");
        /* In double quotes a backslash escapes only $ ` " \ and newline (which it removes). */
        if (q == '"' && **s == '\\' && (*s)[1] && strchr("$`\"\\\n", (*s)[1])) {
            (*s)++;
            if (**s == '\n') {
                (*s)++;
                continue;
            }
        }
        if (put_char(t, w, s, err) < 0)
            return APP_E_USAGE;
    }
    (*s)++;
    return 0;
}

static int split(const char *s, struct rsh_tmpl *t, struct app_err *err)
{
    struct word w = {0};
    int rc = 0;

    while (*s && rc == 0) {
        if (*s == ' ' || *s == '\t' || *s == '\n') {
            tmpl_push(t, &w);
            s++;
        } else if (*s == '\'' || *s == '"') {
            char q = *s++;

            rc = quoted(t, &w, &s, q, err);
        } else if (*s == '\\') {
            if (!s[1])
                rc = app_err_set(err, APP_E_USAGE, "--rsh: a backslash at the end");
            else if (s[1] == '\n') /* a line continuation: removed */
                s += 2;
            else {
                s++;
                rc = put_char(t, &w, &s, err);
            }
        } else {
            rc = put_char(t, &w, &s, err);
        }
    }
    if (rc == 0)
        tmpl_push(t, &w);
    free(w.b);
    return rc;
}

int rsh_tmpl_parse(const char *text, struct rsh_tmpl *out, struct app_err *err)
{
    memset(out, 0, sizeof(*out));
    if (!text || strnlen(text, RSH_TEMPLATE_MAX + 1) > RSH_TEMPLATE_MAX)
        return app_err_set(err, APP_E_USAGE, "--rsh: longer than %d bytes", RSH_TEMPLATE_MAX);
    if (split(text, out, err) < 0) {
        rsh_tmpl_fini(out);
        return APP_E_USAGE;
    }
    if (!out->n) {
        rsh_tmpl_fini(out);
        return app_err_set(err, APP_E_USAGE, "--rsh is empty");
    }
    return 0;
}

void rsh_tmpl_fini(struct rsh_tmpl *t)
{
    for (size_t i = 0; t->w && i < t->n; i++)
        free(t->w[i]);
    free(t->w);
    memset(t, 0, sizeof(*t));
}

/* A template word with each host mark replaced by host; without a host, by "%h" again (pdsh's
 * exec module substitutes it itself). */
static char *fill(const char *word, const char *host)
{
    size_t hl, n = 1;

    if (!host)
        host = "%h";
    hl = strlen(host);
    char *out, *o;

    for (const char *c = word; *c; c++)
        n += *c == RSH_HOST_MARK ? hl : 1;
    o = out = x_malloc(n);
    for (const char *c = word; *c; c++) {
        if (*c == RSH_HOST_MARK) {
            memcpy(o, host, hl);
            o += hl;
        } else {
            *o++ = *c;
        }
    }
    *o = '\0';
    return out;
}

static size_t count(const char *const *v)
{
    size_t n = 0;

    while (v && v[n])
        n++;
    return n;
}

char **rsh_argv(const struct rsh_tmpl *t, const char *host, const char *const *extra,
                const char *const *cmd, bool shell)
{
    char **v = x_calloc(t->n + count(extra) + count(cmd) + 2, sizeof(char *));
    size_t n = 0;

    for (size_t i = 0; i < t->n; i++)
        v[n++] = fill(t->w[i], host);
    if (host && !t->has_host)
        v[n++] = x_strdup(host);
    for (size_t i = 0; extra && extra[i]; i++)
        v[n++] = x_strdup(extra[i]);
    for (size_t i = 0; cmd && cmd[i]; i++)
        v[n++] = shell ? rsh_quote(cmd[i]) : x_strdup(cmd[i]);
    v[n] = NULL;
    return v;
}

void rsh_argv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

char *rsh_quote(const char *word)
{
    static const char safe[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                               "0123456789._/:@%+,-";
    size_t n = 3;
    char *out, *o;

    if (word[0] && strspn(word, safe) == strlen(word))
        return x_strdup(word);
    for (const char *c = word; *c; c++)
        n += *c == '\'' ? 4 : 1;
    o = out = x_malloc(n);
    *o++ = '\'';
    for (const char *c = word; *c; c++) {
        if (*c == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *c;
        }
    }
    *o++ = '\'';
    *o = '\0';
    return out;
}

/* ---- what a remote shell said when it ended ---- */

void rsh_tail_add(struct rsh_tail *t, const char *line, size_t len)
{
    char *o;
    size_t n;

    while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t' ||
                   line[len - 1] == '\n'))
        len--;
    while (len && (*line == ' ' || *line == '\t')) {
        line++;
        len--;
    }
    if (!len)
        return;
    if (t->n == RSH_TAIL_LINES) {
        memmove(t->line[0], t->line[1], sizeof(t->line[0]) * (RSH_TAIL_LINES - 1));
        t->n--;
    }
    o = t->line[t->n++];
    n = len < RSH_TAIL_LINE - 1 ? len : RSH_TAIL_LINE - 1;
    /* A cut line ends before a UTF-8 sequence that would be cut. */
    if (n < len)
        while (n && ((unsigned char)line[n] & 0xC0) == 0x80)
            n--;
    for (size_t i = 0; i < n; i++)
        o[i] = line[i] == '\t' || line[i] == '\0' ? ' ' : line[i];
    o[n] = '\0';
    str_scrub(o);
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return false;
    return true;
}

void rsh_tail_feed(struct rsh_tail *t, const char *text, size_t len)
{
    size_t end = len, start;
    unsigned found = 0;

    /* Back from the end to the start of the last RSH_TAIL_LINES lines that are not blank. */
    for (;;) {
        start = end;
        while (start > 0 && text[start - 1] != '\n')
            start--;
        found += !blank(text + start, end - start);
        if (found == RSH_TAIL_LINES || start == 0)
            break;
        end = start - 1;
    }
    while (start < len) {
        const char *nl = memchr(text + start, '\n', len - start);
        size_t n = nl ? (size_t)(nl - (text + start)) : len - start;

        rsh_tail_add(t, text + start, n);
        start += n + 1;
    }
}

void rsh_tail_join(const struct rsh_tail *t, char *out, size_t len)
{
    unsigned first = 0, n = t ? t->n : 0;
    size_t at = 0;

    out[0] = '\0';
    if (!n)
        return;
    /* Older lines give way to newer ones: the last line is the one that names a cause. */
    for (;; first++) {
        size_t need = 0;

        for (unsigned i = first; i < n; i++)
            need += strlen(t->line[i]) + (i > first ? 3 : 0);
        if (need < len || first + 1 == n)
            break;
    }
    for (unsigned i = first; i < n && at < len; i++)
        at += (size_t)snprintf(out + at, len - at, "%s%s", i > first ? " | " : "", t->line[i]);
}

void rsh_explain(char *out, size_t len, const char *prog, int status, int sig,
                 const struct rsh_tail *t)
{
    const char *name = prog ? strrchr(prog, '/') : NULL;
    size_t at;

    name = name ? name + 1 : prog && prog[0] ? prog : "the remote shell";
    if (sig > 0)
        at = (size_t)snprintf(out, len, "%.40s was killed by signal %d", name, sig);
    else
        at = (size_t)snprintf(out, len, "%.40s exited with status %d", name, status);
    str_scrub(out);
    if (at + 2 >= len || !t || !t->n)
        return;
    memcpy(out + at, ": ", 3);
    rsh_tail_join(t, out + at + 2, len - at - 2);
}
