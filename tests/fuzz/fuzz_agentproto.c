/* libFuzzer entry point for the head's reader of agent streams: the input is a byte stream
 * fed to the line framer in chunks whose sizes the input's first byte chooses, and every
 * complete line is parsed. Each parse must return 0 or APP_E_PARSE, leave every string
 * NUL-terminated and free of control bytes (C0 and C1), and keep counts within their arrays;
 * and what it accepted, written again by the agent's writer, must be one line within the limit
 * that the parser accepts. Anything else aborts, which libFuzzer reports as a crash. */
#include "ranktop/remote/agentproto.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_text(const char *s, size_t len)
{
    const char *end = memchr(s, '\0', len);

    if (!end)
        abort();
    for (; s < end; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f ||
            ((unsigned char)s[0] == 0xC2 && (unsigned char)s[1] >= 0x80 &&
             (unsigned char)s[1] <= 0x9F)) /* a C1 control, U+0080..U+009F */
            abort();
}

static void check(const struct record_event *m)
{
    switch (m->type) {
    case RECORD_HELLO:
        check_text(m->u.hello.host, sizeof(m->u.hello.host));
        check_text(m->u.hello.version, sizeof(m->u.hello.version));
        break;
    case RECORD_FRAME:
        check_text(m->u.frame.function, sizeof(m->u.frame.function));
        check_text(m->u.frame.file, sizeof(m->u.frame.file));
        if (m->u.frame.id >= AGENTPROTO_ID_MAX)
            abort();
        break;
    case RECORD_STACK:
        if (m->u.stack.nchunk > AGENTPROTO_CHUNK ||
            m->u.stack.at + m->u.stack.nchunk > m->u.stack.n)
            abort();
        break;
    case RECORD_LIVE:
        if (m->u.live.nshares > AGENTPROTO_SHARES)
            abort();
        break;
    case RECORD_THREAD:
        check_text(m->u.thread.name, sizeof(m->u.thread.name));
        break;
    default:
        break;
    }
}

/* An accepted event written back: every field is within the parser's ranges, so the line must
 * parse (texts may come back cut, where escapes took the room). */
static void rewrite(const struct record_event *m)
{
    char buf[AGENTPROTO_LINE_MAX];
    struct record_event back;
    struct app_err err = {0};
    size_t n = agentproto_write(buf, sizeof(buf), m);

    if (m->type == RECORD_UNKNOWN)
        return;
    if (n == 0 || n >= AGENTPROTO_LINE_MAX || buf[n - 1] != '\n' || memchr(buf, '\n', n - 1))
        abort();
    if (agentproto_parse(buf, n - 1, &back, &err) != 0 || back.type != m->type)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct agentproto_lines l;
    size_t chunk = size ? (size_t)data[0] % 64 + 1 : 1;
    const char *line;
    long len;

    agentproto_lines_init(&l, 2048);
    for (size_t at = size ? 1 : 0; at < size; at += chunk) {
        size_t n = size - at < chunk ? size - at : chunk;
        char *copy = malloc(n); /* exact size: a read past the end is caught */

        memcpy(copy, data + at, n);
        agentproto_lines_feed(&l, copy, n);
        free(copy);
        while ((len = agentproto_lines_next(&l, &line)) >= 0) {
            struct record_event m;
            struct app_err err = {0};
            int rc = agentproto_parse(line, (size_t)len, &m, &err);

            if (rc != 0 && rc != APP_E_PARSE)
                abort();
            if (rc == 0) {
                check(&m);
                rewrite(&m);
            }
        }
    }
    agentproto_lines_fini(&l);
    return 0;
}
