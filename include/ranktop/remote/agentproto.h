/* The agent stream: what `ranktop agent` writes on stdout and the head reads, one JSON object
 * per line. This contract holds the limits, the writer that formats a record event
 * (ranktop/model/record.h: the message shapes are the model's record vocabulary) as its line, and
 * the head's parser, which takes one line and fills a record event; neither does I/O.
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
#error "ranktop/remote/agentproto.h belongs to collectors/remote/, a layer this one may not use"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranktop/model/record.h"
#include "ranktop/base/status.h"

#define AGENTPROTO_MAJOR 1
#define AGENTPROTO_MINOR 1       /* 1: exit statuses ("x") and forgotten ids ("fg") */
#define AGENTPROTO_LINE_MAX 1024 /* bytes of a line with its newline, exclusive */
/* The wire's limits are the record vocabulary's. */
#define AGENTPROTO_ID_MAX RECORD_ID_MAX
#define AGENTPROTO_CHUNK RECORD_CHUNK
#define AGENTPROTO_SHARES RECORD_SHARES
#define AGENTPROTO_TEXT RECORD_TEXT

/* Parses one line (without its newline) into a record event (ranktop/model/record.h). Returns 0
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

/* Formats event m as its line, newline included, into buf (NUL-terminated; a buffer of
 * AGENTPROTO_LINE_MAX bytes always suffices). Returns the line's length, or 0 when nothing was
 * written: the line does not fit len, the event has no wire form (RECORD_TASKS, RECORD_UNKNOWN),
 * or it is a counter point whose value the wire cannot carry (not finite, or past 1e15).
 * Texts are cut and escaped as agentproto_json_str does (bytes that are not UTF-8 become
 * U+FFFD), each to its field's room, so that every line is shorter than AGENTPROTO_LINE_MAX; a
 * stack event carries one chunk of at most AGENTPROTO_CHUNK frame ids (record_stack.nchunk), a live
 * event at most AGENTPROTO_SHARES shares. Other figures out of the wire's range are written as
 * their parser's default. Integers are written as they are: ids and pids within the parser's ranges
 * are the caller's to keep. Pure; any thread. */
size_t agentproto_write(char *buf, size_t len, const struct record_event *m);

/* Formats ev[0..n) as agentproto_write does, one after the other into buf[0..len), as many
 * whole lines as fit; *used gets the bytes written (buf NUL-terminated when len > 0). Returns
 * how many events were consumed (written, or with nothing to write): fewer than n when buf is
 * full. */
size_t agentproto_write_batch(char *buf, size_t len, const struct record_event *ev, size_t n,
                              size_t *used);

/* Copies text into a record's text field of len bytes, cut (at a UTF-8 sequence's start, never
 * inside one) to len - 1 bytes. */
void agentproto_copy_text(char *dst, size_t len, const char *text);

#endif
