/* The threads of a rank that have no Python thread state (NCCL's watchdog and proxy threads,
 * CUDA's, c10d's heartbeat, a C library's pthreads), sampled natively beside its Python
 * threads while the monitor's native toggle is on for that rank (the Rank view's `n`, shown
 * with `t`): a hang often sits in one of them.
 *
 * Each such thread is found in /proc/PID/task (the tids the Python sample does not name),
 * named by its comm, stopped on its own and unwound like a Python thread's native stack
 * (collectors/native), and interned as a stack of native frames. Its history identity is a
 * made-up ident, ENGINE_NATALL_IDENT | tid: pthread_t values are addresses below 2^63, so it
 * never meets a Python thread's. Only toggled ranks: record --native keeps its Python threads
 * only. On the sampler thread, with the slot's native context. */
#include "engine_priv.h"

#include "ranktop/native/native.h"
#include "ranktop/proc/procscan.h"
#include "ranktop/base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NATALL_MAX_TASKS 4096

static bool python_tid(const struct engine_tview *tv, size_t n, int tid)
{
    for (size_t i = 0; i < n; i++)
        if (tv[i].tid == tid)
            return true;
    return false;
}

/* The native stack as history frames (innermost first) interned; "OBJECT+0xOFF" names a
 * frame without a symbol, as engine_native.c does. */
static uint32_t intern_native(struct engine_sintern *si, struct engine_evbuf *out,
                              const struct native_stack *st)
{
    size_t n = st->n ? st->n : 1;
    struct hframe *f = x_calloc(n, sizeof(*f));
    char *names = x_calloc(n, ENGINE_NATIVE_NAME);
    uint32_t id;

    for (size_t i = 0; i < st->n; i++) {
        const struct native_frame *nf = &st->frames[i];
        const char *base = strrchr(nf->object, '/');
        char *name = names + i * ENGINE_NATIVE_NAME;

        if (!nf->function)
            snprintf(name, ENGINE_NATIVE_NAME, "%s+0x%llx", base ? base + 1 : "?",
                     (unsigned long long)(base ? nf->offset : nf->ip));
        f[i] = (struct hframe){nf->function ? nf->function : name, nf->object, 0, true};
    }
    id = engine_sintern_stack(si, out, f, (uint32_t)st->n);
    free(f);
    free(names);
    return id;
}

size_t engine_natall_sample(struct native_ctx *ctx, int pid, const struct engine_tview *tv,
                            size_t nthreads, struct engine_tview *others, uint32_t *ids, size_t max,
                            struct engine_sintern *si, struct engine_evbuf *out)
{
    int *tids = x_calloc(NATALL_MAX_TASKS, sizeof(*tids));
    size_t ntids = procscan_threads(pid, tids, NATALL_MAX_TASKS), k = 0;

    for (size_t i = 0; i < ntids && k < max && ctx; i++) {
        struct engine_tview *v = &others[k];
        struct native_stack st;
        struct app_err err = {0};

        if (python_tid(tv, nthreads, tids[i]))
            continue;
        *v =
            (struct engine_tview){.ident = ENGINE_NATALL_IDENT | (uint64_t)tids[i], .tid = tids[i]};
        if (procscan_thread_comm(pid, tids[i], v->name, sizeof(v->name)) < 0)
            continue; /* exited meanwhile */
        if (native_unwind(ctx, tids[i], NULL, &st, &err) < 0) {
            if (err.code == APP_E_PERM)
                break;
            continue;
        }
        ids[k++] = intern_native(si, out, &st);
        native_stack_fini(&st);
    }
    free(tids);
    return k;
}
