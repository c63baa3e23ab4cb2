/* Private to the recorder (recorder.c applies events, rsource.c holds a source's bounds and
 * hashed lookups): the tables a source's ids map through. Same thread as the history. */
#ifndef RANKTOP_RECORDER_PRIV_H
#define RANKTOP_RECORDER_PRIV_H

#include "ranktop/model/recorder.h"

#include <stdbool.h>
#include <stdint.h>

struct rsource_frame {
    char *fn, *file;
    int line;
    bool native;
};

struct rsource_stack {
    uint32_t head; /* the history's stack id; HSTACK_NONE while incomplete */
    uint32_t n, got;
    uint32_t cap; /* ids allocated: grows with the chunks received, never to n up front */
    uint32_t *ids;
};

/* A rank key this source defined and where the history holds it (a cached index, checked on
 * use: the history moves ranks when it drops exited ones). Open addressing, key 0 = empty. */
struct rsource_key {
    int key;
    bool live; /* defined and not exited: counts against RSOURCE_MAX_RANKS */
    size_t ri;
};

struct rsource_thread {
    bool defined, gone;
    int key, worker, tid;
    uint64_t ident; /* a task lane's: history_task_ident */
    bool main;
    bool task;            /* an asyncio task's lane */
    uint64_t task_addr;   /* ... its task object */
    uint64_t task_thread; /* ... the thread running its loop */
    char name[64];
    uint32_t cur;     /* current history stack */
    int64_t cur_wire; /* ... as the source numbers it (-1: none) */
    size_t ri, ti;    /* cached indexes into the history, checked on use */
};

/* The source's rank key set: the entry of key, or NULL. */
struct rsource_key *rsource_key_find(const struct rsource *s, int key);
/* Adds key (not present); NULL when the source's tables would pass RSOURCE_MEM_MAX. */
struct rsource_key *rsource_key_add(struct rsource *s, int key);

/* Whether n more bytes fit the source's budget; when not, the source is cut off
 * (rsource_cut) with an error line naming what. */
bool rsource_budget(struct rsource *s, size_t n, const char *what);

#endif
