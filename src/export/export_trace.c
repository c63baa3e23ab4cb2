/* Chrome trace JSON (object form) for Perfetto, chrome://tracing and speedscope, following
 * the rules tests/tools/trace_check.py checks: one process lane per rank, one thread lane per
 * exported thread, sampled stacks as B/E slices, counters as C, rank start and exit as
 * process-scoped instants.
 *
 * Ids: a lane's pid is the rank's real OS pid and its main thread's tid is that pid; other
 * threads carry their kernel tids (older Perfetto merges tids 0 and 1, so no small ids). A pid
 * that repeats in one trace (two nodes, or a pid reused after an exit) is disambiguated as
 * xplan_init says, and the lane's name says so ("shown as N").
 *
 * Slice names: a slice is named like a collapsed-stack frame, "function (file:line)" (native
 * frames "symbol (object)"), with "cat" "sampled" or "native" and no args at all. speedscope
 * keys a Chrome frame by name plus JSON(args) and shows that key as the frame's name, so args
 * that vary (a line) split one function into many noisy frames; with no args, the name is
 * the whole key. One slice is one run of (function, file, line): slices come from the
 * difference of consecutive runs compared root first on all three, so when a frame moves to
 * another line its slice ends and a new one begins there, and a slice's line is where the
 * frame was for all of it, as in the speedscope and collapsed exports.
 *
 * otherData holds the wall-clock start, host, tool and version, the sampling interval, runs
 * dropped by the history bound, thread stacks lost as torn, and counters_unavailable
 * ({"gpu": "why"}) for requested counters that could not be had.
 *
 * Invariants of the output: per (pid, tid) timestamps never decrease in file order; B/E nest
 * strictly, each E carries exactly the name of the B it closes and no args; nothing is left
 * open. Events are written as text straight into the output buffer:
 * for an hour of 64 ranks that is tens of millions of events, and a json-c tree of them would
 * cost gigabytes. Runs on the caller's thread. */
#include "export_priv.h"

#include "ranktop/base/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* An E carries its B's name and nothing else: readers match E to B by stack (Perfetto,
 * catapult) or by name and args (speedscope), and leaving out "cat" saves a tenth of an
 * hour-long file, whose export time is bound by the disk. */
struct cw {
    struct xbuf *b;
    const struct xplan *p;
    const struct history *h;
    bool first;             /* no event written yet: the next one needs no separator */
    struct xbuf tail;       /* per frame: ,"name":LABEL (what follows "ts":N, less the end) */
    size_t *off;            /* nframes + 1 offsets into tail.p; equal: not kept, made on use */
    struct xbuf one, label; /* a frame's ,"name":LABEL made on use, and its label */
    long *series_lane;
    struct xopen open;           /* the lane's open slices */
    char head_b[64], head_e[64]; /* {"ph":"B","pid":P,"tid":T,"ts": */
    size_t len_b, len_e;
};

static void cw_sep(struct cw *w)
{
    xb_put(w->b, w->first ? "\n" : ",\n", w->first ? 1 : 2);
    w->first = false;
}

static void cw_ts(struct cw *w, uint64_t t)
{
    xb_us(w->b, t > w->h->t0 ? t - w->h->t0 : 0);
}

/* ,"name":LABEL of frame i, appended to b. */
static void cw_name(struct xbuf *b, struct xbuf *label, const struct hframe *f)
{
    label->len = 0;
    xframe_label(label, f);
    xb_put(label, "", 1);
    xb_puts(b, ",\"name\":");
    xb_jstr(b, label->p);
}

/* Pre-renders, for every frame, what follows "ts":N in its B and E events but their ends, as
 * long as these fit the history's budget (a share of --memory-cap, history_budget): frames
 * beyond it are rendered on use, so that an export of many long names stays within the cap. */
static void cw_frame_tails(struct cw *w)
{
    const struct history *h = w->h;
    size_t most = h->mem_cap ? history_budget(h) : SIZE_MAX;
    struct xbuf label;

    xb_init(&label, NULL);
    xb_init(&w->tail, NULL);
    xb_init(&w->one, NULL);
    xb_init(&w->label, NULL);
    w->off = x_calloc(h->nframes + 1, sizeof(*w->off));
    for (size_t i = 0; i < h->nframes; i++) {
        w->off[i] = w->tail.len;
        if (w->tail.len < most)
            cw_name(&w->tail, &label, &h->frames[i]);
    }
    w->off[h->nframes] = w->tail.len;
    xb_fini(&label);
}

static void cw_slice(void *ctx, bool begin, uint32_t frame, uint64_t t)
{
    struct cw *w = ctx;
    const struct hframe *f = &w->h->frames[frame];

    cw_sep(w);
    if (begin)
        xb_put(w->b, w->head_b, w->len_b);
    else
        xb_put(w->b, w->head_e, w->len_e);
    cw_ts(w, t);
    if (w->off[frame + 1] > w->off[frame]) {
        xb_put(w->b, w->tail.p + w->off[frame], w->off[frame + 1] - w->off[frame]);
    } else {
        w->one.len = 0;
        cw_name(&w->one, &w->label, f);
        xb_put(w->b, w->one.p, w->one.len);
    }
    /* A native frame (--native) is told apart by its category: viewers filter on it. */
    if (!begin)
        xb_puts(w->b, "}");
    else
        xb_puts(w->b, f->native ? ",\"cat\":\"native\"}" : ",\"cat\":\"sampled\"}");
}

static void cw_thread(struct cw *w, const struct xlane *l, const struct xthread *x)
{
    struct xiter it;
    struct xseg seg;
    uint64_t end = 0;

    w->len_b = (size_t)snprintf(w->head_b, sizeof(w->head_b),
                                "{\"ph\":\"B\",\"pid\":%d,\"tid\":%d,\"ts\":", l->pid, x->tid);
    w->len_e = (size_t)snprintf(w->head_e, sizeof(w->head_e),
                                "{\"ph\":\"E\",\"pid\":%d,\"tid\":%d,\"ts\":", l->pid, x->tid);
    w->open.n = 0;
    xiter_init(&it, w->p, l->r, x->t);
    while (xiter_next(&it, &seg)) {
        xopen_move(&w->open, w->h, seg.stack, seg.s, cw_slice, w);
        end = seg.e;
    }
    xopen_move(&w->open, w->h, HSTACK_NONE, end, cw_slice, w);
}

static void cw_meta(struct cw *w, int pid, int tid, const char *what, const char *name,
                    long sort_index)
{
    cw_sep(w);
    xb_puts(w->b, "{\"ph\":\"M\",\"pid\":");
    xb_i64(w->b, pid);
    if (tid >= 0) {
        xb_puts(w->b, ",\"tid\":");
        xb_i64(w->b, tid);
    }
    xb_puts(w->b, ",\"ts\":0,\"name\":\"");
    xb_puts(w->b, what);
    if (name) {
        xb_puts(w->b, "\",\"args\":{\"name\":");
        xb_jstr(w->b, name);
    } else {
        xb_puts(w->b, "\",\"args\":{\"sort_index\":");
        xb_i64(w->b, sort_index);
    }
    xb_puts(w->b, "}}");
}

static void cw_lane_meta(struct cw *w, const struct xlane *l)
{
    char name[128];

    cw_meta(w, l->pid, -1, "process_name", l->name, 0);
    cw_meta(w, l->pid, -1, "process_sort_index", NULL, l->order);
    for (size_t i = 0; i < l->nth; i++) {
        const struct xthread *x = &l->th[i];

        if (x->t->tid > 0)
            snprintf(name, sizeof(name), "%s (tid %d)", x->name, x->t->tid);
        else
            snprintf(name, sizeof(name), "%s", x->name);
        cw_meta(w, l->pid, x->tid, "thread_name", name, 0);
        cw_meta(w, l->pid, x->tid, "thread_sort_index", NULL, x->order);
    }
}

/* Process-scoped events of one lane, merged into time order: a cursor per counter series and
 * the rank's start and exit instants. */
struct pstream {
    const struct hseries **s;
    size_t *i, ns;
    uint64_t inst_t[2];
    const char *inst_what[2];
    size_t ninst, iinst;
    struct xwait *wait; /* the rank's changes of kind of wait (export_waits.c) */
    size_t nwait, iwait;
};

static bool in_window(const struct export_opts *o, uint64_t t)
{
    return (!o->from || t >= o->from) && (!o->to || t <= o->to);
}

/* Advances series cursor k to its next exportable point; false when it has none left. */
static bool ps_ready(const struct cw *w, struct pstream *ps, size_t k)
{
    const struct hseries *s = ps->s[k];

    for (; ps->i[k] < s->n; ps->i[k]++) {
        const struct hpoint *pt = &s->pts[ps->i[k]];

        if (w->p->o->to && pt->t > w->p->o->to)
            break;
        if (in_window(w->p->o, pt->t) && isfinite(pt->v))
            return true;
    }
    ps->i[k] = s->n;
    return false;
}

static void cw_counter(struct cw *w, int pid, const struct hseries *s, const struct hpoint *pt,
                       uint64_t t)
{
    cw_sep(w);
    xb_puts(w->b, "{\"ph\":\"C\",\"pid\":");
    xb_i64(w->b, pid);
    xb_puts(w->b, ",\"ts\":");
    cw_ts(w, t);
    xb_puts(w->b, ",\"name\":");
    xb_jstr(w->b, s->name);
    xb_puts(w->b, ",\"args\":{");
    xb_jstr(w->b, s->key[0] ? s->key : "value");
    xb_puts(w->b, ":");
    xb_dbl(w->b, pt->v);
    xb_puts(w->b, "}}");
}

static void cw_instant(struct cw *w, int pid, const char *label, const char *what, uint64_t t)
{
    cw_sep(w);
    xb_puts(w->b, "{\"ph\":\"i\",\"s\":\"p\",\"pid\":");
    xb_i64(w->b, pid);
    xb_puts(w->b, ",\"ts\":");
    cw_ts(w, t);
    xb_puts(w->b, ",\"name\":\"");
    xb_jesc(w->b, label);
    xb_puts(w->b, " ");
    xb_puts(w->b, what);
    xb_puts(w->b, "\"}");
}

/* "rank 3 wait: data", args {"kind": "data", "why": "waits.rules:40 module ..."}. */
static void cw_wait(struct cw *w, int pid, const char *label, const struct xwait *x, uint64_t t)
{
    cw_sep(w);
    xb_puts(w->b, "{\"ph\":\"i\",\"s\":\"p\",\"pid\":");
    xb_i64(w->b, pid);
    xb_puts(w->b, ",\"ts\":");
    cw_ts(w, t);
    xb_puts(w->b, ",\"name\":\"");
    xb_jesc(w->b, label);
    xb_puts(w->b, " wait: ");
    xb_puts(w->b, wait_kind_name(x->kind));
    xb_puts(w->b, "\",\"args\":{\"kind\":");
    xb_jstr(w->b, wait_kind_name(x->kind));
    xb_puts(w->b, ",\"why\":");
    xb_jstr(w->b, x->why);
    xb_puts(w->b, "}}");
}

static void ps_init(struct cw *w, struct pstream *ps, long lane, const struct xlane *l)
{
    const struct history *h = w->h;

    memset(ps, 0, sizeof(*ps));
    ps->s = x_calloc(h->nseries ? h->nseries : 1, sizeof(*ps->s));
    ps->i = x_calloc(h->nseries ? h->nseries : 1, sizeof(*ps->i));
    for (size_t k = 0; k < h->nseries; k++)
        if (w->series_lane[k] == lane)
            ps->s[ps->ns++] = &h->series[k];
    if (l && l->start && in_window(w->p->o, l->start)) {
        ps->inst_t[ps->ninst] = l->start;
        ps->inst_what[ps->ninst++] = "started";
    }
    if (l && l->r->exited && in_window(w->p->o, l->r->end)) {
        ps->inst_t[ps->ninst] = l->r->end;
        ps->inst_what[ps->ninst++] = "exited";
    }
    if (l)
        ps->nwait = xwaits_lane(w->p, l, &ps->wait);
}

static void cw_process_events(struct cw *w, int pid, long lane, const struct xlane *l)
{
    struct pstream ps;
    uint64_t last = 0;

    ps_init(w, &ps, lane, l);
    for (;;) {
        long best = -1; /* series index, -2 for the next instant, -3 the next wait */
        uint64_t bt = UINT64_MAX;

        if (ps.iinst < ps.ninst)
            best = -2, bt = ps.inst_t[ps.iinst];
        if (ps.iwait < ps.nwait && ps.wait[ps.iwait].t < bt)
            best = -3, bt = ps.wait[ps.iwait].t;
        for (size_t k = 0; k < ps.ns; k++)
            if (ps_ready(w, &ps, k) && ps.s[k]->pts[ps.i[k]].t < bt)
                best = (long)k, bt = ps.s[k]->pts[ps.i[k]].t;
        if (best == -1)
            break;
        /* Series are appended in time order; should one not be, keep the lane monotonic. */
        last = bt > last ? bt : last;
        if (best == -2)
            cw_instant(w, pid, l->label, ps.inst_what[ps.iinst++], last);
        else if (best == -3)
            cw_wait(w, pid, l->label, &ps.wait[ps.iwait++], last);
        else
            cw_counter(w, pid, ps.s[best], &ps.s[best]->pts[ps.i[best]++], last);
    }
    free(ps.s);
    free(ps.i);
    free(ps.wait);
}

/* The sampler's per-rank count of thread stacks lost as torn (SERIES_STACKS_LOST):
 * cumulative values, so the window's loss is the last value in it less the last one before
 * it, summed over ranks. */
static uint64_t cw_stacks_lost(const struct cw *w)
{
    const struct export_opts *o = w->p->o;
    double sum = 0;

    for (size_t k = 0; k < w->h->nseries; k++) {
        const struct hseries *s = &w->h->series[k];
        double before = 0, last = 0;

        if (s->id != SERIES_STACKS_LOST || !s->pid)
            continue;
        for (size_t i = 0; i < s->n && (!o->to || s->pts[i].t <= o->to); i++) {
            if (o->from && s->pts[i].t < o->from)
                before = s->pts[i].v;
            last = s->pts[i].v;
        }
        sum += last > before ? last - before : 0;
    }
    return (uint64_t)sum;
}

/* ,"counters_unavailable":{"gpu":"why",...} for the requested counters that could not be had. */
static void cw_unavailable(struct xbuf *b, const char *const *u)
{
    if (!u || !u[0])
        return;
    xb_puts(b, ",\"counters_unavailable\":{");
    for (size_t i = 0; u[i] && u[i + 1]; i += 2) {
        xb_puts(b, i ? "," : "");
        xb_jstr(b, u[i]);
        xb_put(b, ":", 1);
        xb_jstr(b, u[i + 1]);
    }
    xb_put(b, "}", 1);
}

static void cw_other_data(struct cw *w)
{
    const struct history *h = w->h;

    xb_puts(w->b, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"wall_clock_start_us\":");
    xb_i64(w->b, h->wall_t0_us);
    xb_puts(w->b, ",\"host\":");
    xb_jstr(w->b, h->host);
    xb_puts(w->b, ",\"tool\":\"ranktop\",\"version\":");
    xb_jstr(w->b, w->p->o->version ? w->p->o->version : "");
    xb_puts(w->b, ",\"interval_us\":");
    xb_us(w->b, w->p->o->interval_ns);
    xb_puts(w->b, ",\"dropped_runs\":");
    xb_u64(w->b, h->dropped_runs);
    xb_puts(w->b, ",\"stacks_lost\":");
    xb_u64(w->b, cw_stacks_lost(w));
    if (h->task_lane_cap) { /* tasks were read: what the lane cap left out */
        xb_puts(w->b, ",\"task_lanes\":{\"cap_per_rank\":");
        xb_u64(w->b, h->task_lane_cap);
        xb_puts(w->b, ",\"ended_folded\":");
        xb_u64(w->b, h->tasks_folded);
        xb_puts(w->b, ",\"live_unlaned_max\":");
        xb_u64(w->b, h->tasks_unlaned_max);
        xb_put(w->b, "}", 1);
    }
    cw_unavailable(w->b, w->p->o->unavailable);
    xb_puts(w->b, "}}\n");
}

/* True when a series without a rank lane has a point to show: the devices lane is needed. */
static bool cw_need_devices(const struct cw *w)
{
    for (size_t k = 0; k < w->h->nseries; k++) {
        const struct hseries *s = &w->h->series[k];

        for (size_t i = 0; w->series_lane[k] == -1 && i < s->n; i++)
            if (in_window(w->p->o, s->pts[i].t) && isfinite(s->pts[i].v))
                return true;
    }
    return false;
}

void export_chrome(struct xbuf *b, const struct xplan *p)
{
    struct cw w = {.b = b, .p = p, .h = p->h, .first = true};
    int dev_pid = p->dev_pid;
    char dev_name[96];
    bool devices;

    cw_frame_tails(&w);
    w.series_lane = x_calloc(p->h->nseries ? p->h->nseries : 1, sizeof(*w.series_lane));
    for (size_t k = 0; k < p->h->nseries; k++)
        w.series_lane[k] = xplan_series_lane(p, &p->h->series[k]);
    devices = cw_need_devices(&w);
    snprintf(dev_name, sizeof(dev_name), "%s%sdevices", p->h->host, p->h->host[0] ? " " : "");
    xb_puts(b, "{\"traceEvents\":[");
    for (size_t i = 0; i < p->nlane; i++)
        cw_lane_meta(&w, &p->lane[i]);
    if (devices) {
        cw_meta(&w, dev_pid, -1, "process_name", dev_name, 0);
        cw_meta(&w, dev_pid, -1, "process_sort_index", NULL, (long)p->nlane + 1);
    }
    for (size_t i = 0; i < p->nlane; i++) {
        for (size_t k = 0; k < p->lane[i].nth; k++)
            cw_thread(&w, &p->lane[i], &p->lane[i].th[k]);
        cw_process_events(&w, p->lane[i].pid, (long)i, &p->lane[i]);
    }
    if (devices)
        cw_process_events(&w, dev_pid, -1, NULL);
    cw_other_data(&w);
    xb_fini(&w.tail);
    xb_fini(&w.one);
    xb_fini(&w.label);
    free(w.off);
    free(w.series_lane);
    free(w.open.f);
}
