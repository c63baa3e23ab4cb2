/* The table behind series ids: the display name and export key of every counter series, and
 * the look-up of a series in a history by id. The table is constant, so any thread may read
 * it; history_series reads a history that its caller keeps still (its own copy, or the
 * engine's under the engine lock). */
#include "ranktop/model/history.h"

#include <stddef.h>

struct series_def {
    const char *name; /* NULL: named per device by the writer */
    const char *key;
};

static const struct series_def series_defs[SERIES_COUNT] = {
    [SERIES_NONE] = {NULL, ""},
    [SERIES_CPU] = {"cpu", "pct"},
    [SERIES_RSS] = {"rss", "MiB"},
    [SERIES_PSS] = {"pss", "MiB"},
    [SERIES_USS] = {"uss", "MiB"},
    [SERIES_SWAP] = {"swap", "MiB"},
    [SERIES_GIL_BUSY] = {"GIL busy", "pct"},
    [SERIES_GIL_SWITCHES] = {"GIL switches", "per_s"},
    [SERIES_GIL_WAITERS] = {"GIL waiters", "avg"},
    [SERIES_GIL_DROP] = {"GIL drop requests", "pending_pct"},
    [SERIES_GC] = {"in GC", "pct"},
    [SERIES_DEV_UTIL] = {NULL, "util_pct"},
    [SERIES_NPU_AICORE] = {NULL, "aicore_pct"},
    [SERIES_DEV_MEM] = {NULL, "used_mib"},
    [SERIES_STACKS_LOST] = {"stacks lost", "count"},
    [SERIES_EXECS] = {"exec", "count"},
    [SERIES_TASKS] = {"asyncio tasks", "count"},
};

const char *series_name(enum series_id id)
{
    return id > SERIES_NONE && id < SERIES_COUNT ? series_defs[id].name : NULL;
}

const char *series_key(enum series_id id)
{
    return id > SERIES_NONE && id < SERIES_COUNT ? series_defs[id].key : "";
}

const struct hseries *history_series(const struct history *h, enum series_id id, int pid)
{
    if (id == SERIES_NONE)
        return NULL;
    for (size_t i = 0; i < h->nseries; i++)
        if (h->series[i].id == id && h->series[i].pid == pid)
            return &h->series[i];
    return NULL;
}
