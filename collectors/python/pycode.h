/* Code-object cache of the stack reader: remote code address -> (function, file, line table).
 *
 * Entries are validated on every use against a fresh copy of the code object's header, so a
 * freed code object whose address is reused (lambdas, exec, reloads) is noticed and resolved
 * again. One cache per attached process, owned by that process's sampling thread. */
#ifndef RANKTOP_PYCODE_H
#define RANKTOP_PYCODE_H

#include <stddef.h>
#include <stdint.h>

#include "abi/pyabi.h"
#include "ranktop/proc/rmem.h"

#define PYCODE_MEMO 4

struct pycode {
    uint64_t addr;   /* remote address; 0 = empty slot */
    uint8_t key[48]; /* header fields that identify the object (type, names, table...) */
    char *function;  /* UTF-8 (qualname on 3.11+) */
    char *file;
    uint8_t *table; /* line table copy */
    size_t table_len;
    int firstlineno;
    int firsttraceable; /* 3.11+: code units before the first traceable instruction */
    /* Memo of the last lookups: a recursive function's callers sit at its call site while the
     * innermost frame moves, and threads run the same code at other places. */
    long last_q[PYCODE_MEMO];
    int last_line[PYCODE_MEMO];
    unsigned last_next; /* the memo entry the next miss replaces */
    uint64_t serial;    /* unique per filling, in the whole process: equal serials mean the
                         * same strings, line table and first line */
    uint64_t checked;   /* the cache epoch in which its header was last read and matched */
};

struct pycode_cache {
    struct pycode *slots;
    size_t cap, used;
    uint64_t hits, misses;
    uint64_t changes; /* slots filled or released: unchanged means every entry is as it was */
    /* One sample: a code object's header is read once per epoch, however many frames (deep
     * recursion) or threads run it; pycode_cache_next_epoch starts the next one. */
    uint64_t epoch;
    void **grave; /* strings of replaced slots, freed by pycode_cache_collect */
    size_t ngrave, capgrave;
    /* Headers read ahead in this epoch, in the same system call as the frames that name
     * them (pycode_prefetch_add): the first `npre_ok` of `npre` came back whole. */
    struct pycode_pre *pre;
    size_t npre, npre_ok;
    uint64_t pre_epoch;
};

#define PYCODE_PRE_MAX 64
#define PYCODE_HDR_MAX 256

struct pycode_pre {
    uint64_t addr;
    uint8_t hdr[PYCODE_HDR_MAX];
};

void pycode_cache_init(struct pycode_cache *c);

/* A buffer for the header of the code object at addr, to be read ahead in this epoch (with
 * the frames that name it); NULL when addr is 0, already asked for, or the table is full. */
uint8_t *pycode_prefetch_add(struct pycode_cache *c, uint64_t addr);
/* How many headers were asked for in this epoch so far: the `base` of the next batch. */
size_t pycode_prefetch_count(struct pycode_cache *c);
/* Of the batch asked for from `base` on, the first nok were read whole. A batch counts only
 * when every header asked for before it came back (the valid ones stay a prefix). */
void pycode_prefetch_done(struct pycode_cache *c, size_t base, size_t nok);
void pycode_cache_fini(struct pycode_cache *c);

/* Frees what replaced entries left behind; call when no frame of the previous sample is in
 * use any more (at the start of a sample). */
void pycode_cache_collect(struct pycode_cache *c);

/* Drops every entry (callers do this between samples when the cache is full). */
void pycode_cache_clear(struct pycode_cache *c);

/* Starts a new sample: headers validated before are read again when next met. */
void pycode_cache_next_epoch(struct pycode_cache *c);

/* Resolves n code addresses (duplicates allowed): one batched read of their headers, then a
 * cache hit or a fresh resolution per address. out[i] is the entry (borrowed until the next
 * clear) or NULL when code[i] is not a valid code object (torn). pycode_type is the remote
 * address of PyCode_Type (0: not checked). Returns the number of NULL results, or a negative
 * status when the process is gone or unreadable. */
int pycode_resolve(struct pycode_cache *c, struct rmem *m, const struct py_layout *L,
                   uint64_t pycode_type, const uint64_t *code, size_t n, struct pycode **out);

/* pycode_resolve for code objects known to be alive since they were last resolved (frames of
 * a thread that has not run since): cache lookups only, no read. out[i] is NULL where the
 * cache no longer holds code[i]; returns the number of those. */
int pycode_resolve_alive(struct pycode_cache *c, const uint64_t *code, size_t n,
                         struct pycode **out);

/* Line for byte offset q into the code's bytecode (memoised). */
int pycode_line(struct pycode *e, int minor, long q);

#endif
