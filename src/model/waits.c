/* The kind-of-wait table and classifier (ranktop/model/waits.h). A rules file is parsed line by
 * line into rules, each a kind and the conditions that one frame must meet (a Python frame's
 * module, file and function; a native frame's symbol and object); the classifier walks a
 * thread's frames innermost first and takes the first rule that matches, after the facts that
 * outrank any frame (dead, stopped, collecting garbage) and before those that only say what the
 * kernel sees (I/O, the GIL, plain host code).
 *
 * Invariants: a parsed table is never changed, so any thread may classify against it; the
 * built-in one is parsed once under pthread_once and lives until exit. Patterns are fnmatch(3)
 * globs without FNM_PATHNAME: `*` crosses `/`. Every input is bounded (line length, rule
 * count) and a bad line is an error naming ORIGIN:LINE, never a crash. No I/O. */
#include "ranktop/model/waits.h"

#include "ranktop/base/util.h"

#include <fnmatch.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#define WAITS_LINE_MAX 1024   /* bytes in one line of a rules file */
#define WAITS_RULES_MAX 10000 /* rules in one table */

/* The embedded data/waits.rules (data/embed.sh, at build time). */
extern const unsigned char waits_rules[];
extern const size_t waits_rules_len;

static const char *const kind_names[WAIT_KINDS] = {
    "unknown", "collective", "data", "device", "gc", "gil", "host", "io", "stopped", "dead",
};

enum cond { C_MODULE, C_FILE, C_FUNC, C_SYMBOL, C_OBJECT, C_COUNT };

static const char *const cond_names[C_COUNT] = {"module", "file", "func", "symbol", "object"};

struct wrule {
    enum wait_kind kind;
    char *pat[C_COUNT]; /* NULL: no condition; module holds the path form, "torch/distributed" */
    char *module;       /* the module condition as written (dotted), for reasons */
    bool native;        /* conditions on native frames (symbol, object), else on Python frames */
    char *where;        /* "ORIGIN:LINE" */
    char *text;         /* the conditions as written, for reasons */
};

struct waits {
    struct wrule *rules;
    size_t n, cap;
};

const char *wait_kind_name(enum wait_kind k)
{
    return (int)k >= 0 && k < WAIT_KINDS ? kind_names[k] : "unknown";
}

int wait_kind_parse(const char *s)
{
    for (int k = 0; k < WAIT_KINDS; k++)
        if (!strcmp(s, kind_names[k]))
            return k;
    return -1;
}

void wait_facts_init(struct wait_facts *f)
{
    *f = (struct wait_facts){.in_gc = -1, .holds_gil = -1, .syscall = -1};
}

static void rule_fini(struct wrule *r)
{
    for (int c = 0; c < C_COUNT; c++)
        free(r->pat[c]);
    free(r->module);
    free(r->where);
    free(r->text);
}

void waits_free(struct waits *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++)
        rule_fini(&w->rules[i]);
    free(w->rules);
    free(w);
}

size_t waits_count(const struct waits *w)
{
    return w ? w->n : 0;
}

/* ---- Parsing ---- */

struct pline {
    const char *origin;
    int line;
    struct app_err *err;
};

__attribute__((format(printf, 2, 3))) static int bad(const struct pline *p, const char *fmt, ...)
{
    char msg[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return app_err_set(p->err, APP_E_PARSE, "%s:%d: %s", p->origin, p->line, msg);
}

/* A dotted module name ("torch.distributed") into the path form the files show
 * ("torch/distributed"); an error for anything else (globs, empty parts). */
static int module_path(const struct pline *p, const char *m, char **out)
{
    size_t n = strlen(m);

    if (strpbrk(m, "*?[]/\\"))
        return bad(p, "module takes a dotted name (torch.distributed), not a pattern: "
                      "use file GLOB for patterns");
    if (!n || m[0] == '.' || m[n - 1] == '.' || strstr(m, ".."))
        return bad(p, "module '%s' is not a dotted name", m);
    *out = x_strdup(m);
    for (char *c = *out; *c; c++)
        if (*c == '.')
            *c = '/';
    return 0;
}

static int set_cond(const struct pline *p, struct wrule *r, const char *field, const char *pat)
{
    int c = 0;

    while (c < C_COUNT && strcmp(field, cond_names[c]))
        c++;
    if (c == C_COUNT)
        return bad(p, "unknown condition '%s' (module, file, func, symbol or object)", field);
    if (!pat)
        return bad(p, "'%s' needs a pattern after it", field);
    if (r->pat[c])
        return bad(p, "'%s' given twice", field);
    if (c == C_MODULE) {
        if (module_path(p, pat, &r->pat[c]) < 0)
            return APP_E_PARSE;
        r->module = x_strdup(pat);
    } else {
        r->pat[c] = x_strdup(pat);
    }
    return 0;
}

/* Splits line (a writable copy, NUL-terminated) into at most max words; a word starting with
 * '#' starts a comment. Returns the count, or max + 1 when there are more. */
static int split_words(char *line, char **words, int max)
{
    char *save = NULL;
    int n = 0;

    for (char *s = strtok_r(line, " \t", &save); s && *s != '#'; s = strtok_r(NULL, " \t", &save)) {
        if (n == max)
            return max + 1;
        words[n++] = s;
    }
    return n;
}

static void rule_text(struct wrule *r, const struct pline *p)
{
    char text[WAITS_LINE_MAX] = "", where[300];
    size_t used = 0;

    for (int c = 0; c < C_COUNT; c++) {
        const char *v = c == C_MODULE ? r->module : r->pat[c];

        if (v && used < sizeof(text))
            used += (size_t)snprintf(text + used, sizeof(text) - used, "%s%s %s", used ? " " : "",
                                     cond_names[c], v);
    }
    snprintf(where, sizeof(where), "%s:%d", p->origin, p->line);
    r->text = x_strdup(text);
    r->where = x_strdup(where);
}

/* One rule from its words: KIND FIELD PATTERN [FIELD PATTERN]... */
static int parse_rule(const struct pline *p, char **words, int n, struct wrule *r)
{
    int k = wait_kind_parse(words[0]);

    *r = (struct wrule){0};
    if (k < 0 || k == WAIT_UNKNOWN)
        return bad(p, "unknown kind '%s' (collective, data, device, gc, gil, host or io)",
                   words[0]);
    if (k == WAIT_STOPPED || k == WAIT_DEAD)
        return bad(p, "'%s' comes from the process's state, not from its frames", words[0]);
    r->kind = (enum wait_kind)k;
    if (n < 3)
        return bad(p, "a rule is KIND FIELD PATTERN [FIELD PATTERN]...");
    for (int i = 1; i < n; i += 2)
        if (set_cond(p, r, words[i], i + 1 < n ? words[i + 1] : NULL) < 0)
            return APP_E_PARSE;
    r->native = r->pat[C_SYMBOL] || r->pat[C_OBJECT];
    if (r->native && (r->pat[C_MODULE] || r->pat[C_FILE] || r->pat[C_FUNC]))
        return bad(p, "a rule is about a Python frame (module, file, func) or a native one "
                      "(symbol, object), not both");
    rule_text(r, p);
    return 0;
}

static int add_rule(struct waits *w, const struct pline *p, const struct wrule *r)
{
    if (w->n == WAITS_RULES_MAX)
        return app_err_set(p->err, APP_E_LIMIT, "%s:%d: more than %d rules", p->origin, p->line,
                           WAITS_RULES_MAX);
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->rules = x_reallocarray(w->rules, w->cap, sizeof(*w->rules));
    }
    w->rules[w->n++] = *r;
    return 0;
}

static void copy_rule(struct wrule *dst, const struct wrule *src)
{
    *dst = *src;
    for (int c = 0; c < C_COUNT; c++)
        dst->pat[c] = src->pat[c] ? x_strdup(src->pat[c]) : NULL;
    dst->module = src->module ? x_strdup(src->module) : NULL;
    dst->where = x_strdup(src->where);
    dst->text = x_strdup(src->text);
}

/* The `builtin` line: the built-in table's rules, here. */
static int add_builtin(struct waits *w, const struct pline *p, bool in_builtin)
{
    const struct waits *b;

    if (in_builtin)
        return bad(p, "'builtin' inside the built-in table");
    b = waits_builtin();
    for (size_t i = 0; i < b->n; i++) {
        struct wrule r;

        copy_rule(&r, &b->rules[i]);
        if (add_rule(w, p, &r) < 0) {
            rule_fini(&r);
            return APP_E_LIMIT;
        }
    }
    return 0;
}

static int parse_line(struct waits *w, const struct pline *p, char *line, bool in_builtin)
{
    char *words[32];
    int n = split_words(line, words, 31);
    struct wrule r;

    if (n == 0)
        return 0;
    if (n > 31)
        return bad(p, "too many words");
    if (!strcmp(words[0], "builtin"))
        return n == 1 ? add_builtin(w, p, in_builtin) : bad(p, "'builtin' stands alone");
    if (parse_rule(p, words, n, &r) < 0 || add_rule(w, p, &r) < 0) {
        rule_fini(&r);
        return p->err ? p->err->code : APP_E_PARSE;
    }
    return 0;
}

static int parse_all(const char *buf, size_t len, const char *origin, bool in_builtin,
                     struct waits *w, struct app_err *err)
{
    struct pline p = {origin, 0, err};
    size_t at = 0;

    while (at < len) {
        const char *nl = memchr(buf + at, '\n', len - at);
        size_t n = (nl ? (size_t)(nl - (buf + at)) : len - at), keep = n;
        char line[WAITS_LINE_MAX + 1];
        int rc;

        p.line++;
        if (n > WAITS_LINE_MAX)
            return bad(&p, "line longer than %d bytes", WAITS_LINE_MAX);
        memcpy(line, buf + at, n);
        line[n] = 0;
        if (strlen(line) != n)
            return bad(&p, "a NUL byte: not a text file");
        if (n && line[n - 1] == '\r')
            line[--keep] = 0;
        if ((rc = parse_line(w, &p, line, in_builtin)) < 0)
            return rc;
        at += n + 1;
    }
    return 0;
}

int waits_parse(const char *buf, size_t len, const char *origin, struct waits **out,
                struct app_err *err)
{
    struct app_err local;
    struct waits *w = x_calloc(1, sizeof(*w));
    int rc = parse_all(buf, len, origin ? origin : "rules", false, w, err ? err : &local);

    if (rc < 0) {
        waits_free(w);
        w = NULL;
    }
    *out = w;
    return rc;
}

static struct waits *builtin_table;

static void builtin_parse(void)
{
    struct app_err err;
    struct waits *w = x_calloc(1, sizeof(*w));

    /* A built-in table that does not parse is a build mistake (check_waits catches it); the
     * binary still runs, classifying by the process's state alone. */
    if (parse_all((const char *)waits_rules, waits_rules_len, "waits.rules", true, w, &err) < 0) {
        waits_free(w);
        w = x_calloc(1, sizeof(*w));
    }
    builtin_table = w;
}

const struct waits *waits_builtin(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    pthread_once(&once, builtin_parse);
    return builtin_table;
}

/* ---- Matching ---- */

/* Whether a Python frame's file is module m (path form "torch/distributed") or inside it:
 * ".../torch/distributed/x.py", ".../torch/distributed.py", a relative "torch/distributed/...",
 * or a frozen module ("<frozen torch.distributed.x>"). */
static bool module_match(const char *m, const char *file)
{
    size_t n = strlen(m);

    if (!strncmp(file, "<frozen ", 8)) {
        const char *name = file + 8;

        for (size_t i = 0; i < n; i++)
            if (name[i] != (m[i] == '/' ? '.' : m[i]))
                return false;
        return name[n] == '.' || name[n] == '>';
    }
    for (const char *s = strstr(file, m); s; s = strstr(s + 1, m)) {
        if (s != file && s[-1] != '/')
            continue;
        if (s[n] == '/' || !strcmp(s + n, ".py"))
            return true;
    }
    return false;
}

static bool glob(const char *pat, const char *s)
{
    return s && fnmatch(pat, s, 0) == 0;
}

/* A function name or, for a qualified one ("Stream.synchronize"), its last part. */
static bool func_match(const char *pat, const char *fn)
{
    const char *dot = fn ? strrchr(fn, '.') : NULL;

    return glob(pat, fn) || (dot && glob(pat, dot + 1));
}

/* A native frame without a symbol is named "OBJECT+0xOFFSET": no symbol to match. */
static bool native_has_symbol(const struct hframe *fr)
{
    const char *base = fr->file ? strrchr(fr->file, '/') : NULL;
    size_t n;

    base = base ? base + 1 : fr->file;
    n = base ? strlen(base) : 0;
    return fr->function &&
           !(n && !strncmp(fr->function, base, n) && !strncmp(fr->function + n, "+0x", 3));
}

static bool rule_match(const struct wrule *r, const struct hframe *fr)
{
    if (r->native != fr->native)
        return false;
    if (r->native)
        return (!r->pat[C_SYMBOL] ||
                (native_has_symbol(fr) && glob(r->pat[C_SYMBOL], fr->function))) &&
               (!r->pat[C_OBJECT] || glob(r->pat[C_OBJECT], fr->file));
    return (!r->pat[C_MODULE] || (fr->file && module_match(r->pat[C_MODULE], fr->file))) &&
           (!r->pat[C_FILE] || glob(r->pat[C_FILE], fr->file)) &&
           (!r->pat[C_FUNC] || func_match(r->pat[C_FUNC], fr->function));
}

/* ---- Syscalls ---- */

/* The syscalls the classifier names, by this architecture's numbers (sys/syscall.h), and
 * whether each waits for I/O. Sleeps, futexes and child waits are named but are not I/O. */
static const struct {
    int nr;
    const char *name;
    bool io;
} syscalls[] = {
#define IO(x)                                                                                      \
    {                                                                                              \
        SYS_##x, #x, true                                                                          \
    }
#define NOT_IO(x)                                                                                  \
    {                                                                                              \
        SYS_##x, #x, false                                                                         \
    }
    IO(read),
    IO(write),
    IO(readv),
    IO(writev),
    IO(pread64),
    IO(pwrite64),
    IO(preadv),
    IO(pwritev),
    IO(preadv2),
    IO(pwritev2),
    IO(sendfile),
    IO(splice),
    IO(tee),
    IO(copy_file_range),
    IO(pselect6),
    IO(ppoll),
    IO(epoll_pwait),
    IO(accept),
    IO(accept4),
    IO(connect),
    IO(sendto),
    IO(recvfrom),
    IO(sendmsg),
    IO(recvmsg),
    IO(sendmmsg),
    IO(recvmmsg),
    IO(io_getevents),
    IO(openat),
    IO(flock),
    IO(fsync),
    IO(fdatasync),
    IO(sync),
    IO(syncfs),
    IO(sync_file_range),
#ifdef SYS_poll
    IO(poll),
    IO(select),
    IO(epoll_wait),
    IO(open),
#endif
#ifdef SYS_epoll_pwait2
    IO(epoll_pwait2),
#endif
#ifdef SYS_io_pgetevents
    IO(io_pgetevents),
#endif
#ifdef SYS_io_uring_enter
    IO(io_uring_enter),
#endif
    NOT_IO(futex),
    NOT_IO(nanosleep),
    NOT_IO(clock_nanosleep),
    NOT_IO(wait4),
    NOT_IO(waitid),
    NOT_IO(rt_sigtimedwait),
    NOT_IO(rt_sigsuspend),
    NOT_IO(sched_yield),
    NOT_IO(ioctl),
#ifdef SYS_pause
    NOT_IO(pause),
#endif
#undef IO
#undef NOT_IO
};

static int syscall_index(int nr)
{
    for (size_t i = 0; nr >= 0 && i < sizeof(syscalls) / sizeof(syscalls[0]); i++)
        if (syscalls[i].nr == nr)
            return (int)i;
    return -1;
}

const char *waits_syscall_name(int nr)
{
    int i = syscall_index(nr);

    return i < 0 ? NULL : syscalls[i].name;
}

bool waits_syscall_io(int nr)
{
    int i = syscall_index(nr);

    return i >= 0 && syscalls[i].io;
}

/* ---- Classifying ---- */

__attribute__((format(printf, 3, 4))) static void say(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;

    if (!why || !len)
        return;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
}

/* "read", else "syscall 123", else "" (none or unknown). */
static const char *syscall_words(int nr, char *buf, size_t len)
{
    const char *name = waits_syscall_name(nr);

    if (nr < 0)
        return "";
    if (name)
        return name;
    snprintf(buf, len, "syscall %d", nr);
    return buf;
}

static enum wait_kind by_state(const struct wait_facts *f, char *why, size_t whylen)
{
    if (f->exited) {
        const char *sig = app_signal_name(f->exit_signal);

        if (f->exit_signal > 0)
            say(why, whylen, "signal %d%s%s%s", f->exit_signal, sig ? " (" : "", sig ? sig : "",
                sig ? ")" : "");
        else
            say(why, whylen, f->exit_code >= 0 ? "exit status %d" : "exited", f->exit_code);
        return WAIT_DEAD;
    }
    if (f->state == 'Z' || f->state == 'X') {
        say(why, whylen, "state %c (exited, not yet reaped)", f->state);
        return WAIT_DEAD;
    }
    if (f->state == 'T' || f->state == 't') {
        say(why, whylen, "state %c (%s)", f->state, f->state == 'T' ? "stopped" : "traced");
        return WAIT_STOPPED;
    }
    if (f->in_gc == 1) {
        say(why, whylen, "the interpreter is collecting garbage");
        return WAIT_GC;
    }
    return WAIT_UNKNOWN;
}

static enum wait_kind by_frames(const struct waits *w, const struct wait_facts *f, char *why,
                                size_t whylen)
{
    for (size_t i = 0; f->frames && i < f->nframes; i++)
        for (size_t j = 0; j < w->n; j++)
            if (rule_match(&w->rules[j], &f->frames[i])) {
                say(why, whylen, "%s %s: %s", w->rules[j].where, w->rules[j].text,
                    f->frames[i].function ? f->frames[i].function : "?");
                return w->rules[j].kind;
            }
    return WAIT_UNKNOWN;
}

static enum wait_kind by_kernel(const struct wait_facts *f, char *why, size_t whylen)
{
    char buf[32];
    const char *sc = syscall_words(f->syscall, buf, sizeof(buf));
    const char *wchan = f->wchan && *f->wchan && strcmp(f->wchan, "0") ? f->wchan : NULL;

    if (f->state == 'D' || (f->state != 'R' && !f->no_fds && waits_syscall_io(f->syscall))) {
        say(why, whylen, "state %c%s%s%s%s", f->state ? f->state : '?', *sc ? " in " : "", sc,
            wchan ? ", wchan " : "", wchan ? wchan : "");
        return WAIT_IO;
    }
    if (f->holds_gil == 0 && f->state != 'R' && f->syscall >= 0 && f->syscall == (int)SYS_futex) {
        say(why, whylen, "no GIL, sleeping in futex");
        return WAIT_GIL;
    }
    if (f->nframes) {
        say(why, whylen, "no rule matched%s%s%s", *sc ? "; in " : "", sc,
            *sc && f->no_fds ? " over no descriptor (a sleep)" : "");
        return WAIT_HOST;
    }
    return WAIT_UNKNOWN;
}

enum wait_kind waits_classify(const struct waits *w, const struct wait_facts *f, char *why,
                              size_t whylen)
{
    enum wait_kind k;

    say(why, whylen, "nothing known");
    if (!w)
        w = waits_builtin();
    if ((k = by_state(f, why, whylen)) != WAIT_UNKNOWN)
        return k;
    if ((k = by_frames(w, f, why, whylen)) != WAIT_UNKNOWN)
        return k;
    return by_kernel(f, why, whylen);
}

enum wait_kind waits_classify_stack(const struct waits *w, const struct history *h, uint32_t stack,
                                    const struct wait_facts *f, char *why, size_t whylen)
{
    struct wait_facts g = *f;
    struct hframe *fr = NULL;
    enum wait_kind k;

    g.frames = NULL;
    g.nframes = 0;
    if (stack != HSTACK_NONE && stack < h->nstacks) {
        const uint32_t *ids = history_stack_frames(h, stack);
        size_t n = h->stacks[stack].nframes;

        fr = x_calloc(n ? n : 1, sizeof(*fr));
        for (size_t i = 0; i < n; i++)
            fr[i] = h->frames[ids[n - 1 - i]];
        g.frames = fr;
        g.nframes = n;
    }
    k = waits_classify(w, &g, why, whylen);
    free(fr);
    return k;
}
