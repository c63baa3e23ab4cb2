/* The agent stream: what `ranktop agent` writes on stdout and the head reads, one JSON object
 * per line. The encoder lives with the engine (it reads the history); this contract holds the
 * limits and the head's parser, which takes one line and does no I/O and fills a record event
 * (ranktop/record.h: the message shapes are the model's record vocabulary).
 *
 * Version 1. The first line is a hello (protocol major and minor, ranktop version, host, boot
 * id, the agent's clocks). Then, per tick, only what changed: a frame or a stack is defined
 * once with an id and referred to by id afterwards; a thread is defined once and its runs are
 * sent as "this thread showed stack S from time T on"; a tick line says every live thread
 * still showed its stack at that time. Figures (counters, GIL, devices) come at their own
 * rates. A head refuses another major and ignores fields and message types it does not know.
 * Every line is shorter than AGENTPROTO_LINE_MAX bytes with its newline, because srun forwards
 * output in 1 KiB messages and splits longer lines: a stack too deep for one line is sent in
 * chunks. Agent output is untrusted: the parser bounds and validates every field. */
#ifndef RANKTOP_AGENTPROTO_H
#define RANKTOP_AGENTPROTO_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_REMOTE)
#error "ranktop/agentproto.h belongs to collectors/remote/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/record.h"
#include "ranktop/status.h"

#define AGENTPROTO_MAJOR 1
#define AGENTPROTO_MINOR 0
#define AGENTPROTO_LINE_MAX 1024 /* bytes of a line with its newline, exclusive */
/* The wire's limits are the record vocabulary's. */
#define AGENTPROTO_ID_MAX RECORD_ID_MAX
#define AGENTPROTO_CHUNK RECORD_CHUNK
#define AGENTPROTO_SHARES RECORD_SHARES
#define AGENTPROTO_TEXT RECORD_TEXT

/* Parses one line (without its newline) into a record event (ranktop/record.h). Returns 0
 * with *m filled, or APP_E_PARSE with the reason in err: not JSON, not an object, no type, a
 * field missing, of the wrong type or out of range. A message of an unknown type is 0 with m->type
 * RECORD_UNKNOWN. */
int agentproto_parse(const char *line, size_t len, struct record_event *m, struct app_err *err);

/* Splits a byte stream into lines. Bytes go in as they arrive; complete lines come out
 * without their newline (a trailing '\r' dropped). A line longer than max is discarded whole
 * and counted, and reading resumes at the next newline. */
struct agentproto_lines {
    char *buf;
    size_t off, len, cap, max; /* unread bytes are buf[off..len) */
    size_t pending;            /* bytes of the line last returned, consumed on the next call */
    bool skipping;             /* inside an oversized line */
    uint64_t oversized;        /* lines discarded for their length */
};

void agentproto_lines_init(struct agentproto_lines *l, size_t max);
void agentproto_lines_fini(struct agentproto_lines *l);
/* Appends n bytes. */
void agentproto_lines_feed(struct agentproto_lines *l, const char *data, size_t n);
/* The next complete line: returns its length and points *line at it (valid until the next
 * feed or next call), or -1 when no complete line is buffered. */
long agentproto_lines_next(struct agentproto_lines *l, const char **line);

/* Formats text as a JSON string (quotes included) into buf, escaping as RFC 8259 requires and
 * cutting the text (never an escape or a UTF-8 sequence) so that the result fits in len - 1
 * bytes. Returns the bytes written (without the NUL). */
size_t agentproto_json_str(char *buf, size_t len, const char *text);

#endif
