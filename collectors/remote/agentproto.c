/* The agent stream's two ends: the head's reader (line framing, and the parser of one line into
 * a record event) and the agent's writer of a record event as its line, side by side so that
 * they share one set of field names, formats and limits.
 *
 * Everything an agent writes is untrusted (a remote node, a different build, a broken link):
 * lines are capped, every field is checked for type and range, strings are cut to their
 * buffers, ids are bounded by AGENTPROTO_ID_MAX so that no message can make the head allocate
 * without limit. The writer keeps every line below AGENTPROTO_LINE_MAX by construction. Pure: a
 * buffer in, a buffer out, no I/O, no global state; any thread. */
#include "ranktop/remote/agentproto.h"
#include "ranktop/base/util.h"

#include <json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- line framing ---- */

void agentproto_lines_init(struct agentproto_lines *l, size_t max)
{
    memset(l, 0, sizeof(*l));
    l->max = max;
}

void agentproto_lines_fini(struct agentproto_lines *l)
{
    free(l->buf);
    memset(l, 0, sizeof(*l));
}

void agentproto_lines_feed(struct agentproto_lines *l, const char *data, size_t n)
{
    if (n == 0) /* nothing to add (and buf may still be NULL) */
        return;
    /* Compact first: the unread tail moves to the front, the returned line is consumed. */
    l->off += l->pending;
    l->pending = 0;
    if (l->off) {
        memmove(l->buf, l->buf + l->off, l->len - l->off);
        l->len -= l->off;
        l->off = 0;
    }
    if (l->len + n > l->cap) {
        l->cap = l->len + n + 4096;
        l->buf = x_reallocarray(l->buf, l->cap, 1);
    }
    memcpy(l->buf + l->len, data, n);
    l->len += n;
}

long agentproto_lines_next(struct agentproto_lines *l, const char **line)
{
    l->off += l->pending;
    l->pending = 0;
    for (;;) {
        char *p = l->buf + l->off, *nl = l->len > l->off ? memchr(p, '\n', l->len - l->off) : NULL;
        size_t n;

        if (!nl) {
            /* An unfinished line already past the cap will be discarded: keep no more of it. */
            if (l->len - l->off > l->max) {
                l->oversized += !l->skipping;
                l->skipping = true;
                l->off = l->len = 0;
            }
            return -1;
        }
        n = (size_t)(nl - p);
        if (l->skipping || n > l->max) {
            l->oversized += !l->skipping;
            l->skipping = false;
            l->off += n + 1;
            continue;
        }
        l->pending = n + 1;
        *nl = '\0';
        if (n && p[n - 1] == '\r')
            p[--n] = '\0';
        *line = p;
        return (long)n;
    }
}

/* ---- JSON strings ---- */

size_t agentproto_json_str(char *buf, size_t len, const char *text)
{
    size_t o = 0;

    if (len < 3) {
        if (len)
            buf[0] = '\0';
        return 0;
    }
    buf[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)text; *p;) {
        char esc[8];
        size_t n = 0;

        if (*p == '"' || *p == '\\')
            n = (size_t)snprintf(esc, sizeof(esc), "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            n = (size_t)snprintf(esc, sizeof(esc), "\\u%04x", *p);
        if (n) { /* an escape goes whole or not at all */
            if (o + n + 2 > len)
                break;
            memcpy(buf + o, esc, n);
            o += n;
            p++;
            continue;
        }
        n = *p < 0x80 ? 1 : utf8_valid_len(p);
        if (!n) { /* not UTF-8: U+FFFD in its place, so that the line stays valid JSON */
            if (o + 3 + 2 > len)
                break;
            memcpy(buf + o, "\xEF\xBF\xBD", 3);
            o += 3;
            p++;
            continue;
        }
        if (o + n + 2 > len)
            break;
        memcpy(buf + o, p, n);
        o += n;
        p += n;
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return o;
}

/* ---- fields ---- */

struct rd {
    struct json_object *o;
    struct app_err *err;
    int rc;
};

static void bad(struct rd *r, const char *key, const char *why)
{
    if (r->rc == 0)
        r->rc = app_err_set(r->err, APP_E_PARSE, "field '%s' %s", key, why);
}

/* An integer field within [lo, hi]; dflt when absent and optional. */
static int64_t get_int(struct rd *r, const char *key, int64_t lo, int64_t hi, bool need,
                       int64_t dflt)
{
    struct json_object *v;
    int64_t x;

    if (!json_object_object_get_ex(r->o, key, &v) || json_object_is_type(v, json_type_null)) {
        if (need)
            bad(r, key, "is missing");
        return dflt;
    }
    if (!json_object_is_type(v, json_type_int)) {
        bad(r, key, "is not an integer");
        return dflt;
    }
    x = json_object_get_int64(v);
    if (x < lo || x > hi) {
        bad(r, key, "is out of range");
        return dflt;
    }
    return x;
}

static uint64_t get_u64(struct rd *r, const char *key)
{
    struct json_object *v;

    if (!json_object_object_get_ex(r->o, key, &v) || !json_object_is_type(v, json_type_int)) {
        bad(r, key, "is missing or not an integer");
        return 0;
    }
    return json_object_get_uint64(v);
}

static double get_num(struct rd *r, const char *key, double dflt)
{
    struct json_object *v;
    double x;

    if (!json_object_object_get_ex(r->o, key, &v) || json_object_is_type(v, json_type_null))
        return dflt;
    if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double)) {
        bad(r, key, "is not a number");
        return dflt;
    }
    x = json_object_get_double(v);
    if (!isfinite(x) || fabs(x) > 1e15) {
        bad(r, key, "is out of range");
        return dflt;
    }
    return x;
}

static bool get_bool(struct rd *r, const char *key)
{
    struct json_object *v;

    if (!json_object_object_get_ex(r->o, key, &v))
        return false;
    if (!json_object_is_type(v, json_type_boolean)) {
        bad(r, key, "is not a boolean");
        return false;
    }
    return json_object_get_boolean(v);
}

/* Remote text reaches terminals and JSON output: every C0 control byte and DEL becomes '?', and
 * so does every C1 control (U+0080..U+009F, two bytes in UTF-8: a CSI is U+009B). */
static void scrub(char *s)
{
    char *w = s;

    str_scrub(s);
    for (const char *r = s; *r; r++) {
        if ((unsigned char)r[0] == 0xC2 && (unsigned char)r[1] >= 0x80 &&
            (unsigned char)r[1] <= 0x9F) {
            *w++ = '?';
            r++;
            continue;
        }
        *w++ = *r;
    }
    *w = '\0';
}

/* A string field, cut to len - 1 bytes; "" when absent and optional. */
static void get_str(struct rd *r, const char *key, char *out, size_t len, bool need)
{
    struct json_object *v;

    out[0] = '\0';
    if (!json_object_object_get_ex(r->o, key, &v)) {
        if (need)
            bad(r, key, "is missing");
        return;
    }
    if (!json_object_is_type(v, json_type_string)) {
        bad(r, key, "is not a string");
        return;
    }
    snprintf(out, len, "%s", json_object_get_string(v));
    scrub(out);
}

#define ID_MAX (AGENTPROTO_ID_MAX - 1)
#define PID_MAX 4194304
#define NS_MAX INT64_MAX

/* ---- messages ---- */

static void parse_hello(struct rd *r, struct record_hello *h)
{
    struct json_object *v;

    if (!json_object_object_get_ex(r->o, "proto", &v) || !json_object_is_type(v, json_type_array) ||
        json_object_array_length(v) < 2 ||
        !json_object_is_type(json_object_array_get_idx(v, 0), json_type_int) ||
        !json_object_is_type(json_object_array_get_idx(v, 1), json_type_int)) {
        bad(r, "proto", "is not [major, minor]");
        return;
    }
    h->major = (int)json_object_get_int(json_object_array_get_idx(v, 0));
    h->minor = (int)json_object_get_int(json_object_array_get_idx(v, 1));
    get_str(r, "ver", h->version, sizeof(h->version), true);
    get_str(r, "host", h->host, sizeof(h->host), true);
    get_str(r, "node", h->node, sizeof(h->node), false);
    get_str(r, "boot", h->boot_id, sizeof(h->boot_id), false);
    h->pid = (int)get_int(r, "pid", 1, PID_MAX, false, 0);
    h->mono_ns = get_int(r, "mono", 0, NS_MAX, true, 0);
    h->wall_us = get_int(r, "wall", 0, NS_MAX, false, 0);
    h->rate_hz = get_num(r, "rate", 0);
}

static void parse_stack(struct rd *r, struct record_stack *s)
{
    struct json_object *v;
    size_t n;

    s->id = (uint32_t)get_int(r, "id", 0, ID_MAX, true, 0);
    s->n = (uint32_t)get_int(r, "n", 0, 65536, true, 0);
    s->at = (uint32_t)get_int(r, "at", 0, 65536, false, 0);
    if (!json_object_object_get_ex(r->o, "f", &v) || !json_object_is_type(v, json_type_array)) {
        bad(r, "f", "is not an array");
        return;
    }
    n = json_object_array_length(v);
    if (n > AGENTPROTO_CHUNK || s->at + n > s->n) {
        bad(r, "f", "holds more frames than the stack");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        struct json_object *e = json_object_array_get_idx(v, i);
        int64_t x = json_object_is_type(e, json_type_int) ? json_object_get_int64(e) : -1;

        if (x < 0 || x > ID_MAX) {
            bad(r, "f", "holds a bad frame id");
            return;
        }
        s->frames[i] = (uint32_t)x;
    }
    s->nchunk = (uint32_t)n;
}

static void parse_rank(struct rd *r, struct record_rank *k)
{
    k->pid = (int)get_int(r, "p", 1, PID_MAX, true, 0);
    k->rank = (int)get_int(r, "rank", -1, 1 << 24, false, -1);
    k->local_rank = (int)get_int(r, "lrank", -1, 1 << 24, false, -1);
    k->world_size = (int)get_int(r, "world", -1, 1 << 24, false, -1);
    get_str(r, "dev", k->device, sizeof(k->device), false);
    get_str(r, "py", k->python, sizeof(k->python), false);
    k->exited = get_bool(r, "x");
    k->exit_code = (int)get_int(r, "xc", -1, 255, false, -1);
    k->exit_signal = (int)get_int(r, "xs", 0, 128, false, 0);
    k->ts = get_int(r, "ts", 0, NS_MAX, false, 0);
}

static void parse_thread(struct rd *r, struct record_thread *t)
{
    t->id = (uint32_t)get_int(r, "id", 0, ID_MAX, true, 0);
    t->pid = (int)get_int(r, "p", 1, PID_MAX, true, 0);
    t->worker = (int)get_int(r, "w", 0, PID_MAX, false, 0);
    t->ident = get_u64(r, "i");
    t->tid = (int)get_int(r, "tid", 0, PID_MAX, false, 0);
    t->main = get_bool(r, "m");
    get_str(r, "name", t->name, sizeof(t->name), false);
}

static void parse_live(struct rd *r, struct record_live *l)
{
    struct json_object *v;

    l->pid = (int)get_int(r, "p", 1, PID_MAX, true, 0);
    l->dev_mem_mb = get_int(r, "dm", -1, INT64_C(1) << 40, false, -1);
    l->gil_busy_pct = get_num(r, "gb", -1);
    l->gil_switches = get_num(r, "gs", 0);
    l->gil_waiters = get_num(r, "gw", -1);
    l->gc_pct = get_num(r, "gc", -1);
    /* A line is a whole record of what the wire carries; "gc" only when it changed (and never
     * from a 1.1 agent before GC % existed): a line without it keeps the last one. */
    l->set = RECORD_LIVE_DEVMEM | RECORD_LIVE_GIL | (l->gc_pct >= 0 ? RECORD_LIVE_GC : 0);
    l->in_gc = -1;
    l->syscall = -1;
    if (!json_object_object_get_ex(r->o, "sh", &v))
        return;
    if (!json_object_is_type(v, json_type_array)) {
        bad(r, "sh", "is not an array");
        return;
    }
    for (size_t i = 0; i < json_object_array_length(v) && l->nshares < AGENTPROTO_SHARES; i++) {
        struct json_object *e = json_object_array_get_idx(v, i), *a, *b;

        if (!json_object_is_type(e, json_type_array) || json_object_array_length(e) != 2 ||
            !json_object_is_type(a = json_object_array_get_idx(e, 0), json_type_int) ||
            (!json_object_is_type(b = json_object_array_get_idx(e, 1), json_type_double) &&
             !json_object_is_type(b, json_type_int))) {
            bad(r, "sh", "holds a bad share");
            return;
        }
        l->shares[l->nshares].ident = json_object_get_uint64(a);
        l->shares[l->nshares++].pct = json_object_get_double(b);
    }
}

static void parse_device(struct rd *r, struct record_device *d)
{
    char kind[8];

    get_str(r, "k", kind, sizeof(kind), true);
    if (r->rc == 0 && strcmp(kind, "gpu") && strcmp(kind, "npu"))
        bad(r, "k", "is neither gpu nor npu");
    d->npu = !strcmp(kind, "npu");
    d->index = (int)get_int(r, "i", 0, 65535, true, 0);
    d->chip = (int)get_int(r, "c", -1, 65535, false, -1);
    get_str(r, "name", d->name, sizeof(d->name), false);
    d->util_pct = get_int(r, "u", -1, 100, false, -1);
    d->mem_used_mb = get_int(r, "mu", -1, INT64_C(1) << 40, false, -1);
    d->mem_total_mb = get_int(r, "mt", -1, INT64_C(1) << 40, false, -1);
    d->temp_c = get_int(r, "tc", -1, 1000, false, -1);
    d->power_w = get_num(r, "pw", -1);
}

static void parse_body(struct rd *r, struct record_event *m)
{
    switch (m->type) {
    case RECORD_HELLO:
        parse_hello(r, &m->u.hello);
        break;
    case RECORD_FRAME:
        m->u.frame.id = (uint32_t)get_int(r, "id", 0, ID_MAX, true, 0);
        get_str(r, "fn", m->u.frame.function, sizeof(m->u.frame.function), true);
        get_str(r, "file", m->u.frame.file, sizeof(m->u.frame.file), false);
        m->u.frame.line = (int)get_int(r, "ln", 0, 1 << 30, false, 0);
        m->u.frame.native = get_bool(r, "nat");
        break;
    case RECORD_STACK:
        parse_stack(r, &m->u.stack);
        break;
    case RECORD_RANK:
        parse_rank(r, &m->u.rank);
        break;
    case RECORD_THREAD:
        parse_thread(r, &m->u.thread);
        break;
    case RECORD_RUN:
        m->u.run.thread = (uint32_t)get_int(r, "th", 0, ID_MAX, true, 0);
        m->u.run.stack = get_int(r, "s", -1, ID_MAX, true, -1);
        m->u.run.ts = get_int(r, "ts", 0, NS_MAX, true, 0);
        break;
    case RECORD_GONE:
        m->u.run.thread = (uint32_t)get_int(r, "th", 0, ID_MAX, true, 0);
        m->u.run.stack = -1;
        m->u.run.ts = get_int(r, "ts", 0, NS_MAX, true, 0);
        break;
    case RECORD_TICK:
        m->u.tick.seq = (uint64_t)get_int(r, "seq", 0, NS_MAX, false, 0);
        m->u.tick.ts = get_int(r, "ts", 0, NS_MAX, true, 0);
        m->u.tick.passes = (uint64_t)get_int(r, "n", 0, NS_MAX, false, 0);
        m->u.tick.stacks = (uint64_t)get_int(r, "st", 0, NS_MAX, false, 0);
        m->u.tick.errors = (uint64_t)get_int(r, "er", 0, NS_MAX, false, 0);
        m->u.tick.lost = (uint64_t)get_int(r, "lo", 0, NS_MAX, false, 0);
        break;
    case RECORD_COUNTER:
        m->u.counter.pid = (int)get_int(r, "p", 0, PID_MAX, true, 0);
        m->u.counter.id = (int)get_int(r, "id", 1, 1000, true, 0);
        get_str(r, "n", m->u.counter.name, sizeof(m->u.counter.name), false);
        m->u.counter.v = get_num(r, "v", NAN);
        m->u.counter.ts = get_int(r, "ts", 0, NS_MAX, true, 0);
        if (r->rc == 0 && isnan(m->u.counter.v))
            bad(r, "v", "is missing");
        break;
    case RECORD_LIVE:
        parse_live(r, &m->u.live);
        break;
    case RECORD_DEVICE:
        parse_device(r, &m->u.device);
        break;
    case RECORD_PONG:
        m->u.pong.head_ns = get_int(r, "h", 0, NS_MAX, true, 0);
        m->u.pong.agent_ns = get_int(r, "a", 0, NS_MAX, true, 0);
        break;
    case RECORD_ERROR:
    case RECORD_BYE:
        get_str(r, "msg", m->u.text, sizeof(m->u.text), false);
        break;
    case RECORD_EXIT:
        m->u.exit.pid = (int)get_int(r, "p", 1, PID_MAX, true, 0);
        m->u.exit.code = (int)get_int(r, "xc", -1, 255, true, -1);
        m->u.exit.signal = (int)get_int(r, "xs", 0, 128, true, 0);
        get_str(r, "core", m->u.exit.core, sizeof(m->u.exit.core), false);
        break;
    case RECORD_FORGET:
    case RECORD_TASKS: /* no wire form: never parsed */
    case RECORD_UNKNOWN:
        break;
    }
}

static const char *const type_names[] = {
    [RECORD_HELLO] = "hello", [RECORD_FRAME] = "f", [RECORD_STACK] = "s",  [RECORD_RANK] = "r",
    [RECORD_THREAD] = "th",   [RECORD_RUN] = "o",   [RECORD_GONE] = "g",   [RECORD_TICK] = "k",
    [RECORD_COUNTER] = "c",   [RECORD_LIVE] = "l",  [RECORD_DEVICE] = "d", [RECORD_PONG] = "pong",
    [RECORD_ERROR] = "err",   [RECORD_BYE] = "bye", [RECORD_EXIT] = "x",   [RECORD_FORGET] = "fg",
};

int agentproto_parse(const char *line, size_t len, struct record_event *m, struct app_err *err)
{
    struct json_tokener *tok;
    struct json_object *o, *t;
    struct rd r = {.err = err};

    memset(m, 0, sizeof(*m));
    if (len >= AGENTPROTO_LINE_MAX)
        return app_err_set(err, APP_E_PARSE, "line of %zu bytes (limit %d)", len,
                           AGENTPROTO_LINE_MAX - 1);
    tok = json_tokener_new_ex(8);
    o = json_tokener_parse_ex(tok, line, (int)len);
    if (!o || json_tokener_get_error(tok) != json_tokener_success ||
        json_tokener_get_parse_end(tok) != len) {
        json_tokener_free(tok);
        json_object_put(o);
        return app_err_set(err, APP_E_PARSE, "not one JSON value");
    }
    json_tokener_free(tok);
    r.o = o;
    if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, "t", &t) ||
        !json_object_is_type(t, json_type_string)) {
        json_object_put(o);
        return app_err_set(err, APP_E_PARSE, "not an object with a string 't'");
    }
    for (size_t i = 1; i < sizeof(type_names) / sizeof(type_names[0]); i++)
        if (!strcmp(json_object_get_string(t), type_names[i]))
            m->type = (enum record_type)i;
    parse_body(&r, m);
    json_object_put(o);
    return r.rc;
}

/* ---- the writer ----
 *
 * One line per event, in the field names and number formats the parser above reads. Each text
 * goes through agentproto_json_str into a buffer of its own size, and those sizes (with the
 * widest integers and figures) keep every line below AGENTPROTO_LINE_MAX: a frame, the longest
 * line, is at most 810 bytes with its newline, a live line with 16 shares 841. */

#define FIG_MAX 1e15 /* the parser's bound on a number */

void agentproto_copy_text(char *dst, size_t len, const char *text)
{
    size_t n = strnlen(text, len - 1);

    /* Back up to the start of a UTF-8 sequence when the cut falls inside one. */
    if (text[n] != '\0')
        while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
            n--;
    memcpy(dst, text, n);
    dst[n] = '\0';
}

/* A record's text field as a JSON string in out; read only within the field's size, since a
 * producer may have filled it to the last byte. */
static void jstr(char *out, size_t outlen, const char *field, size_t size)
{
    char t[RECORD_TEXT + 1];

    if (size > RECORD_TEXT)
        size = RECORD_TEXT;
    memcpy(t, field, size);
    t[size] = '\0';
    agentproto_json_str(out, outlen, t);
}

#define JSTR(buf, field) jstr(buf, sizeof(buf), field, sizeof(field))

/* x, or dflt when the wire cannot carry it (the parser would refuse the line). */
static double fig(double x, double dflt)
{
    return isfinite(x) && fabs(x) <= FIG_MAX ? x : dflt;
}

static int write_hello(char *b, size_t len, const struct record_hello *h)
{
    char ver[48], host[96], node[96], boot[80], pid[24] = "";

    JSTR(ver, h->version);
    JSTR(host, h->host);
    JSTR(node, h->node);
    JSTR(boot, h->boot_id);
    if (h->pid) /* 0: unknown, and then absent, as the parser takes it */
        snprintf(pid, sizeof(pid), ",\"pid\":%d", h->pid);
    return snprintf(b, len,
                    "{\"t\":\"hello\",\"proto\":[%d,%d],\"ver\":%s,\"host\":%s,\"node\":%s,"
                    "\"boot\":%s%s,\"mono\":%lld,\"wall\":%lld,\"rate\":%g}\n",
                    h->major, h->minor, ver, host, node, boot, pid, (long long)h->mono_ns,
                    (long long)h->wall_us, fig(h->rate_hz, 0));
}

static int write_frame(char *b, size_t len, const struct record_frame *f)
{
    char fn[AGENTPROTO_TEXT + 8], file[480];

    JSTR(fn, f->function);
    JSTR(file, f->file);
    return snprintf(b, len, "{\"t\":\"f\",\"id\":%u,\"fn\":%s,\"file\":%s,\"ln\":%d%s}\n", f->id,
                    fn, file, f->line, f->native ? ",\"nat\":true" : "");
}

static int write_stack(char *b, size_t len, const struct record_stack *s)
{
    uint32_t n = s->nchunk < AGENTPROTO_CHUNK ? s->nchunk : AGENTPROTO_CHUNK;
    size_t k = (size_t)snprintf(b, len, "{\"t\":\"s\",\"id\":%u,\"n\":%u,\"at\":%u,\"f\":[", s->id,
                                s->n, s->at);

    /* 60 ids of at most 10 digits and a comma fit the line: len is AGENTPROTO_LINE_MAX. */
    for (uint32_t i = 0; i < n && k < len; i++)
        k += (size_t)snprintf(b + k, len - k, "%s%u", i ? "," : "", s->frames[i]);
    if (k < len)
        k += (size_t)snprintf(b + k, len - k, "]}\n");
    return (int)k;
}

/* lrank and world go out only when known (the agent does not learn them today). */
static int write_rank(char *b, size_t len, const struct record_rank *r)
{
    char dev[48], py[40], lw[48] = "";

    JSTR(dev, r->device);
    JSTR(py, r->python);
    if (r->local_rank >= 0 || r->world_size >= 0)
        snprintf(lw, sizeof(lw), ",\"lrank\":%d,\"world\":%d", r->local_rank, r->world_size);
    return snprintf(b, len,
                    "{\"t\":\"r\",\"p\":%d,\"rank\":%d%s,\"dev\":%s,\"py\":%s,\"x\":%s,\"xc\":%d,"
                    "\"xs\":%d,\"ts\":%lld}\n",
                    r->pid, r->rank, lw, dev, py, r->exited ? "true" : "false", r->exit_code,
                    r->exit_signal, (long long)r->ts);
}

static int write_thread(char *b, size_t len, const struct record_thread *t)
{
    char name[96];

    JSTR(name, t->name);
    return snprintf(b, len,
                    "{\"t\":\"th\",\"id\":%u,\"p\":%d,\"w\":%d,\"i\":%llu,\"tid\":%d,\"m\":%s,"
                    "\"name\":%s}\n",
                    t->id, t->pid, t->worker, (unsigned long long)t->ident, t->tid,
                    t->main ? "true" : "false", name);
}

static int write_run(char *b, size_t len, const struct record_event *m)
{
    if (m->type == RECORD_GONE)
        return snprintf(b, len, "{\"t\":\"g\",\"th\":%u,\"ts\":%lld}\n", m->u.run.thread,
                        (long long)m->u.run.ts);
    return snprintf(b, len, "{\"t\":\"o\",\"th\":%u,\"s\":%lld,\"ts\":%lld}\n", m->u.run.thread,
                    (long long)m->u.run.stack, (long long)m->u.run.ts);
}

/* A counter's name goes out only when it has one (a device's series: the head needs it). */
static int write_counter(char *b, size_t len, const struct record_counter *c)
{
    char name[80] = "";

    if (!isfinite(c->v) || fabs(c->v) > FIG_MAX)
        return 0;
    if (c->name[0]) {
        memcpy(name, ",\"n\":", 5);
        jstr(name + 5, sizeof(name) - 5, c->name, sizeof(c->name));
    }
    return snprintf(b, len, "{\"t\":\"c\",\"p\":%d,\"id\":%d%s,\"v\":%.6g,\"ts\":%lld}\n", c->pid,
                    c->id, name, c->v, (long long)c->ts);
}

/* A share the wire cannot carry is left out rather than refusing the whole line. "gc" only
 * when known: a line without it reads as unknown, as an older agent's does. */
static int write_live(char *b, size_t len, const struct record_live *l)
{
    char sh[AGENTPROTO_SHARES * 44 + 4], gc[32] = "";
    size_t k = 0, n = l->nshares < AGENTPROTO_SHARES ? l->nshares : AGENTPROTO_SHARES;

    for (size_t j = 0; j < n; j++)
        if (isfinite(l->shares[j].pct) && fabs(l->shares[j].pct) <= FIG_MAX)
            k += (size_t)snprintf(sh + k, sizeof(sh) - k, "%s[%llu,%.2f]", k ? "," : "",
                                  (unsigned long long)l->shares[j].ident, l->shares[j].pct);
    sh[k] = '\0';
    if (fig(l->gc_pct, -1) >= 0)
        snprintf(gc, sizeof(gc), ",\"gc\":%.2f", l->gc_pct);
    return snprintf(b, len,
                    "{\"t\":\"l\",\"p\":%d,\"dm\":%lld,\"gb\":%.2f,\"gs\":%.2f,\"gw\":%.2f%s,"
                    "\"sh\":[%s]}\n",
                    l->pid, (long long)l->dev_mem_mb, fig(l->gil_busy_pct, -1),
                    fig(l->gil_switches, 0), fig(l->gil_waiters, -1), gc, sh);
}

static int write_device(char *b, size_t len, const struct record_device *d)
{
    char name[128];

    JSTR(name, d->name);
    return snprintf(
        b, len,
        "{\"t\":\"d\",\"k\":\"%s\",\"i\":%d,\"c\":%d,\"name\":%s,\"u\":%lld,\"mu\":%lld,"
        "\"mt\":%lld,\"tc\":%lld,\"pw\":%.1f}\n",
        d->npu ? "npu" : "gpu", d->index, d->chip, name, (long long)d->util_pct,
        (long long)d->mem_used_mb, (long long)d->mem_total_mb, (long long)d->temp_c,
        fig(d->power_w, -1));
}

static int write_tick(char *b, size_t len, const struct record_tick *k)
{
    return snprintf(b, len,
                    "{\"t\":\"k\",\"seq\":%llu,\"ts\":%lld,\"n\":%llu,\"st\":%llu,\"er\":%llu,"
                    "\"lo\":%llu}\n",
                    (unsigned long long)k->seq, (long long)k->ts, (unsigned long long)k->passes,
                    (unsigned long long)k->stacks, (unsigned long long)k->errors,
                    (unsigned long long)k->lost);
}

static int write_text(char *b, size_t len, const struct record_event *m)
{
    char msg[AGENTPROTO_TEXT + 64];

    JSTR(msg, m->u.text);
    return snprintf(b, len, "{\"t\":\"%s\",\"msg\":%s}\n", type_names[m->type], msg);
}

/* Whether a core's path crosses the wire unchanged: UTF-8 without control characters (the
 * parser would scrub those, and a changed path names another file). Such a path takes at most
 * two bytes a byte escaped, so the line has room for it whole. */
static bool wire_path(const char *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        const unsigned char *c = (const unsigned char *)p + i;
        size_t k = *c < 0x80 ? 1 : utf8_valid_len(c);

        if (!k || *c < 0x20 || *c == 0x7f || (k > 1 && c[0] == 0xc2 && c[1] < 0xa0))
            return false;
        i += k;
    }
    return true;
}

/* An exit; "core" only when a core's place is known and crosses the wire whole (older heads
 * ignore the field). */
static int write_exit(char *b, size_t len, const struct record_exit *x)
{
    char core[RECORD_TEXT * 2 + 16] = "";
    size_t n = strnlen(x->core, sizeof(x->core) - 1);

    if (n && wire_path(x->core, n)) {
        char s[RECORD_TEXT * 2 + 2];

        JSTR(s, x->core);
        snprintf(core, sizeof(core), ",\"core\":%s", s);
    }
    return snprintf(b, len, "{\"t\":\"x\",\"p\":%d,\"xc\":%d,\"xs\":%d%s}\n", x->pid,
                    x->code < -1 || x->code > 255 ? -1 : x->code,
                    x->signal < 0 || x->signal > 128 ? 0 : x->signal, core);
}

/* The line of m into b[0..AGENTPROTO_LINE_MAX); its length, or 0 for none. */
static size_t format(char *b, const struct record_event *m)
{
    const size_t len = AGENTPROTO_LINE_MAX;
    int n = 0;

    switch (m->type) {
    case RECORD_HELLO:
        n = write_hello(b, len, &m->u.hello);
        break;
    case RECORD_FRAME:
        n = write_frame(b, len, &m->u.frame);
        break;
    case RECORD_STACK:
        n = write_stack(b, len, &m->u.stack);
        break;
    case RECORD_RANK:
        n = write_rank(b, len, &m->u.rank);
        break;
    case RECORD_THREAD:
        n = write_thread(b, len, &m->u.thread);
        break;
    case RECORD_RUN:
    case RECORD_GONE:
        n = write_run(b, len, m);
        break;
    case RECORD_TICK:
        n = write_tick(b, len, &m->u.tick);
        break;
    case RECORD_COUNTER:
        n = write_counter(b, len, &m->u.counter);
        break;
    case RECORD_LIVE:
        n = write_live(b, len, &m->u.live);
        break;
    case RECORD_DEVICE:
        n = write_device(b, len, &m->u.device);
        break;
    case RECORD_PONG:
        n = snprintf(b, len, "{\"t\":\"pong\",\"h\":%lld,\"a\":%lld}\n",
                     (long long)m->u.pong.head_ns, (long long)m->u.pong.agent_ns);
        break;
    case RECORD_ERROR:
    case RECORD_BYE:
        n = write_text(b, len, m);
        break;
    case RECORD_EXIT:
        n = write_exit(b, len, &m->u.exit);
        break;
    case RECORD_FORGET:
        n = snprintf(b, len, "{\"t\":\"fg\"}\n");
        break;
    default: /* this node's own events (RECORD_TASKS) have no wire form */
        break;
    }
    /* The field sizes above make this impossible; a cut line would not be JSON. */
    return n > 0 && (size_t)n < len ? (size_t)n : 0;
}

size_t agentproto_write(char *buf, size_t len, const struct record_event *m)
{
    char b[AGENTPROTO_LINE_MAX];
    size_t n = format(b, m);

    if (n == 0 || n >= len)
        return 0;
    memcpy(buf, b, n + 1);
    return n;
}

size_t agentproto_write_batch(char *buf, size_t len, const struct record_event *ev, size_t n,
                              size_t *used)
{
    char b[AGENTPROTO_LINE_MAX];
    size_t i, o = 0;

    for (i = 0; i < n; i++) {
        size_t k = format(b, &ev[i]);

        if (o + k + 1 > len)
            break;
        memcpy(buf + o, b, k);
        o += k;
    }
    if (len)
        buf[o] = '\0';
    *used = o;
    return i;
}
