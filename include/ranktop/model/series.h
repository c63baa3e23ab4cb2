/* Counter series ids: the one list of the counters the engine records and the UI reads. Writers
 * (engine.c, engine_mem.c, engine_gil.c) and readers (views) name a series by its id, so the
 * two sides cannot drift apart on a spelling; the display name and key each id is exported
 * under (Chrome `C` counters, unchanged from the string era) come from one table in
 * src/model/series.c. */
#ifndef RANKTOP_SERIES_H
#define RANKTOP_SERIES_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_MODEL)
#error "ranktop/model/series.h belongs to src/model/, a layer this one may not use"
#endif

enum series_id {
    SERIES_NONE = 0,     /* no known counter: zeroed or hand-built series */
    SERIES_CPU,          /* "cpu" pct: CPU time of the rank, one core = 100 */
    SERIES_RSS,          /* "rss" MiB */
    SERIES_PSS,          /* "pss" MiB */
    SERIES_USS,          /* "uss" MiB */
    SERIES_SWAP,         /* "swap" MiB */
    SERIES_GIL_BUSY,     /* "GIL busy" pct */
    SERIES_GIL_SWITCHES, /* "GIL switches" per_s */
    SERIES_GIL_WAITERS,  /* "GIL waiters" avg */
    SERIES_GIL_DROP,     /* "GIL drop requests" pending_pct */
    SERIES_GC,           /* "in GC" pct */
    SERIES_DEV_UTIL,     /* per GPU, named "gpuN": util_pct */
    SERIES_NPU_AICORE,   /* per NPU chip, named "npuN.M": aicore_pct */
    SERIES_DEV_MEM,      /* per device, named "gpuN mem": used_mib */
    SERIES_STACKS_LOST,  /* "stacks lost" count: thread stacks lost as torn so far (cumulative) */
    SERIES_EXECS,        /* "exec" count: new program images the rank exec'd, re-attached to */
    SERIES_TASKS,        /* "asyncio tasks" count: live tasks at each task read, laned or not */
    SERIES_COUNT
};

/* Display name of a per-rank series ("rss"); NULL for per-device ids, whose writer names each
 * series after its device, and for SERIES_NONE or an id out of range. */
const char *series_name(enum series_id id);

/* Key of the series' value in exports ("MiB", "util_pct"); "" for SERIES_NONE or out of range. */
const char *series_key(enum series_id id);

#endif
