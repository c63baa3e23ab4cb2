/* Perfetto's native trace (protobuf): a Trace of TracePackets on one packet sequence, read by
 * the Perfetto UI and trace processor without the JSON importer's limits.
 *
 * What is written, in file order: the packet that clears the sequence's incremental state,
 * sets CLOCK_MONOTONIC (the history's clock) as its timestamps' default clock and interns the
 * two categories; clock snapshots (MONOTONIC against REALTIME at t0 and against BOOTTIME now,
 * MONOTONIC being the trace's primary clock); track descriptors: one process track per rank lane
 * (real pid, the lane's name), one thread track per exported thread (real pid and tid, thread
 * name), one counter track per counter series under its rank's process, or under a global "<host>
 * devices" track; then per thread the sampled stacks as TYPE_SLICE_BEGIN/END events, per
 * rank its start and exit as instants, per series its values as TYPE_COUNTER events, and
 * the counters asked for that could not be had as instants on a global "ranktop" track.
 *
 * Slices follow the Chrome exporter (export_trace.c): consecutive runs are compared root
 * first, a slice lasts while its frame keeps function, file, line and kind, ends are written
 * innermost first and everything still open is closed at the thread's last time. A slice's
 * name is the function, interned (InternedData.event_names) on first use, and its source
 * location (file, function, line) is interned per frame (InternedData.source_locations), so
 * an event costs about 20 bytes. Field numbers are those of Perfetto's protos under
 * protos/perfetto/trace/ (tests/data/perfetto/perfetto_subset.proto declares the subset).
 *
 * Packets are built one at a time in a fixed buffer (export_pb.c); strings are cut to
 * PF_STR_MAX bytes, so no packet can outgrow it. Runs on the caller's thread. */
#include "export_pb.h"
#include "export_priv.h"

#include "ranktop/base/hash.h"
#include "ranktop/base/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PF_SEQ 1            /* trusted_packet_sequence_id of every packet */
#define PF_STR_MAX 1024     /* longest string written, in bytes */
#define PF_PACKET_MAX 16384 /* a packet holds at most 4 strings and a few numbers */

/* Field numbers, from Perfetto's protos. */
enum {
    TRACE_PACKET = 1,      /* Trace.packet */
    TP_CLOCK_SNAPSHOT = 6, /* TracePacket */
    TP_TIMESTAMP = 8,
    TP_SEQ_ID = 10,
    TP_TRACK_EVENT = 11,
    TP_INTERNED = 12,
    TP_SEQ_FLAGS = 13,
    TP_DEFAULTS = 59,
    TP_TRACK_DESCRIPTOR = 60,
    TPD_CLOCK_ID = 58, /* TracePacketDefaults.timestamp_clock_id */
    CS_CLOCKS = 1,     /* ClockSnapshot */
    CS_PRIMARY = 2,
    CLK_ID = 1, /* ClockSnapshot.Clock */
    CLK_TS = 2,
    TD_UUID = 1, /* TrackDescriptor */
    TD_NAME = 2,
    TD_PROCESS = 3,
    TD_THREAD = 4,
    TD_PARENT = 5,
    TD_COUNTER = 8,
    PD_PID = 1, /* ProcessDescriptor */
    PD_NAME = 6,
    THD_PID = 1, /* ThreadDescriptor */
    THD_TID = 2,
    THD_NAME = 5,
    TE_CATEGORY_IIDS = 3, /* TrackEvent */
    TE_TYPE = 9,
    TE_NAME_IID = 10,
    TE_TRACK = 11,
    TE_NAME = 23,
    TE_COUNTER = 30,
    TE_DOUBLE_COUNTER = 44,
    TE_SRC_LOC_IID = 34,
    ID_CATEGORIES = 1, /* InternedData */
    ID_EVENT_NAMES = 2,
    ID_SRC_LOCS = 4,
    IN_IID = 1, /* EventCategory, EventName */
    IN_NAME = 2,
    SL_IID = 1, /* SourceLocation */
    SL_FILE = 2,
    SL_FUNCTION = 3,
    SL_LINE = 4,
};

enum { CLOCK_ID_REALTIME = 1, CLOCK_ID_MONOTONIC = 3, CLOCK_ID_BOOTTIME = 6 };
enum { SEQ_CLEARED = 1, SEQ_NEEDS_STATE = 2 };
enum { TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2, TYPE_INSTANT = 3, TYPE_COUNTER = 4 };
enum { CAT_SAMPLED = 1, CAT_NATIVE = 2 }; /* category iids */

/* Interned function names: open addressing, string -> iid. */
struct pf_names {
    const char **key;
    uint64_t *iid;
    size_t mask;
    uint64_t next;
};

/* A frame's BEGIN TrackEvent fields but the track, encoded once (n == 0: not yet). */
struct pf_body {
    uint8_t n;
    uint8_t b[23];
};

struct pw {
    struct xbuf *b;
    const struct xplan *p;
    const struct history *h;
    struct pbuf m;
    uint8_t buf[PF_PACKET_MAX];
    struct pf_names names;
    uint64_t *frame_name;       /* per frame: its name's iid, 0 until first used */
    struct pf_body *begin_body; /* per frame: its BEGIN's fields, once interned */
    uint64_t *lane_uuid;        /* per lane: its process track; thread k is lane_uuid + 1 + k */
    uint64_t *series_uuid;      /* per series: its counter track, 0 = nothing to show */
    uint64_t devices_uuid, next_uuid;
    struct xopen open; /* the lane's open slices */
    uint64_t track;    /* the thread track being written */
    size_t dropped;    /* packets that did not fit (none with PF_STR_MAX strings) */
    bool clock_named;  /* the primary trace clock is set */
};

static void names_init(struct pf_names *n, size_t nframes)
{
    size_t cap = 16;

    while (cap < 2 * nframes + 2)
        cap *= 2;
    n->key = x_calloc(cap, sizeof(*n->key));
    n->iid = x_calloc(cap, sizeof(*n->iid));
    n->mask = cap - 1;
    n->next = 1; /* iid 0 means "not set" */
}

static void names_fini(struct pf_names *n)
{
    free(n->key);
    free(n->iid);
}

/* The iid of s; *fresh tells that it was just assigned (to be interned in this packet). */
static uint64_t names_get(struct pf_names *n, const char *s, bool *fresh)
{
    size_t i = (size_t)hash_str(s) & n->mask;

    while (n->key[i] && !hash_str_same(n->key[i], s))
        i = (i + 1) & n->mask;
    *fresh = !n->key[i];
    if (*fresh) {
        n->key[i] = s;
        n->iid[i] = n->next++;
    }
    return n->iid[i];
}

static void pkt_begin(struct pw *w, uint64_t ts, unsigned flags)
{
    pb_init(&w->m, w->buf, sizeof(w->buf));
    if (ts)
        pb_uint(&w->m, TP_TIMESTAMP, ts);
    pb_uint(&w->m, TP_SEQ_ID, PF_SEQ);
    if (flags)
        pb_uint(&w->m, TP_SEQ_FLAGS, flags);
}

/* Appends the packet as one Trace.packet field. */
static void pkt_end(struct pw *w)
{
    uint8_t head[1 + PB_VARINT_MAX];
    size_t n;

    if (w->m.full) {
        w->dropped++;
        return;
    }
    head[0] = TRACE_PACKET << 3 | 2;
    n = 1 + pb_varint_put(head + 1, w->m.len);
    xb_put(w->b, (const char *)head, n);
    xb_put(w->b, (const char *)w->m.p, w->m.len);
}

/* A clock snapshot of two clocks read at one instant. The first one written also names
 * MONOTONIC the trace's clock: trace processor takes that only before it converts any
 * timestamp, and then needs no conversion for ours. */
static void clock_pair(struct pw *w, uint32_t id_a, uint64_t ts_a, uint32_t id_b, uint64_t ts_b)
{
    size_t snap, c;

    pkt_begin(w, 0, 0);
    snap = pb_begin(&w->m, TP_CLOCK_SNAPSHOT);
    c = pb_begin(&w->m, CS_CLOCKS);
    pb_uint(&w->m, CLK_ID, id_a);
    pb_uint(&w->m, CLK_TS, ts_a);
    pb_end(&w->m, c);
    c = pb_begin(&w->m, CS_CLOCKS);
    pb_uint(&w->m, CLK_ID, id_b);
    pb_uint(&w->m, CLK_TS, ts_b);
    pb_end(&w->m, c);
    if (!w->clock_named)
        pb_uint(&w->m, CS_PRIMARY, CLOCK_ID_MONOTONIC);
    w->clock_named = true;
    pb_end(&w->m, snap);
    pkt_end(w);
}

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void intern_category(struct pw *w, uint64_t iid, const char *name)
{
    size_t e = pb_begin(&w->m, ID_CATEGORIES);

    pb_uint(&w->m, IN_IID, iid);
    pb_str(&w->m, IN_NAME, name, PF_STR_MAX);
    pb_end(&w->m, e);
}

/* The packet that starts the sequence's incremental state (default clock, categories), then
 * the clock snapshots that tie MONOTONIC to REALTIME (at t0) and to BOOTTIME (now). */
static void pf_preamble(struct pw *w)
{
    const struct history *h = w->h;
    uint64_t mono = clock_ns(CLOCK_MONOTONIC), boot = clock_ns(CLOCK_BOOTTIME);
    size_t d, in;

    pkt_begin(w, 0, SEQ_CLEARED);
    d = pb_begin(&w->m, TP_DEFAULTS);
    pb_uint(&w->m, TPD_CLOCK_ID, CLOCK_ID_MONOTONIC);
    pb_end(&w->m, d);
    in = pb_begin(&w->m, TP_INTERNED);
    intern_category(w, CAT_SAMPLED, "sampled");
    intern_category(w, CAT_NATIVE, "native");
    pb_end(&w->m, in);
    pkt_end(w);
    if (h->wall_t0_us > 0)
        clock_pair(w, CLOCK_ID_MONOTONIC, h->t0, CLOCK_ID_REALTIME,
                   (uint64_t)h->wall_t0_us * 1000u);
    clock_pair(w, CLOCK_ID_MONOTONIC, mono, CLOCK_ID_BOOTTIME, boot);
}

/* A TrackDescriptor packet; the caller adds the descriptor's own fields between the two. */
static size_t track_begin(struct pw *w, uint64_t uuid, uint64_t parent)
{
    size_t d;

    pkt_begin(w, w->h->t0, SEQ_NEEDS_STATE);
    d = pb_begin(&w->m, TP_TRACK_DESCRIPTOR);
    pb_uint(&w->m, TD_UUID, uuid);
    if (parent)
        pb_uint(&w->m, TD_PARENT, parent);
    return d;
}

static void track_end(struct pw *w, size_t d)
{
    pb_end(&w->m, d);
    pkt_end(w);
}

static void lane_tracks(struct pw *w, size_t i)
{
    const struct xlane *l = &w->p->lane[i];
    size_t d, sub;

    w->lane_uuid[i] = w->next_uuid++;
    d = track_begin(w, w->lane_uuid[i], 0);
    sub = pb_begin(&w->m, TD_PROCESS);
    pb_int(&w->m, PD_PID, l->pid);
    pb_str(&w->m, PD_NAME, l->name, PF_STR_MAX);
    pb_end(&w->m, sub);
    track_end(w, d);
    for (size_t k = 0; k < l->nth; k++) {
        d = track_begin(w, w->next_uuid++, 0);
        sub = pb_begin(&w->m, TD_THREAD);
        pb_int(&w->m, THD_PID, l->pid);
        pb_int(&w->m, THD_TID, l->th[k].tid);
        pb_str(&w->m, THD_NAME, l->th[k].name, PF_STR_MAX);
        pb_end(&w->m, sub);
        track_end(w, d);
    }
}

static bool pt_shown(const struct export_opts *o, const struct hpoint *pt)
{
    return (!o->from || pt->t >= o->from) && (!o->to || pt->t <= o->to) && isfinite(pt->v);
}

static bool series_shown(const struct export_opts *o, const struct hseries *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (pt_shown(o, &s->pts[i]))
            return true;
    return false;
}

/* A counter track per series with something to show: under its rank's process track, or
 * under the node's devices track, made on first need. Named as Perfetto's JSON importer
 * names a `C` event's series: "<name> <key>". */
static void counter_tracks(struct pw *w)
{
    const struct history *h = w->h;
    char name[96];

    for (size_t k = 0; k < h->nseries; k++) {
        const struct hseries *s = &h->series[k];
        long lane = xplan_series_lane(w->p, s);
        uint64_t parent;
        size_t d;

        if (!series_shown(w->p->o, s))
            continue;
        if (lane < 0 && !w->devices_uuid) {
            snprintf(name, sizeof(name), "%s%sdevices", h->host, h->host[0] ? " " : "");
            w->devices_uuid = w->next_uuid++;
            d = track_begin(w, w->devices_uuid, 0);
            pb_str(&w->m, TD_NAME, name, PF_STR_MAX);
            track_end(w, d);
        }
        parent = lane < 0 ? w->devices_uuid : w->lane_uuid[lane];
        w->series_uuid[k] = w->next_uuid++;
        snprintf(name, sizeof(name), "%s %s", s->name, s->key[0] ? s->key : "value");
        d = track_begin(w, w->series_uuid[k], parent);
        pb_str(&w->m, TD_NAME, name, PF_STR_MAX);
        pb_end(&w->m, pb_begin(&w->m, TD_COUNTER));
        track_end(w, d);
    }
}

/* The interned entries a BEGIN of frame needs that the sequence has not seen yet. */
static void slice_interned(struct pw *w, uint32_t frame, bool new_name, bool new_loc)
{
    const struct hframe *f = &w->h->frames[frame];
    size_t in, e;

    if (!new_name && !new_loc)
        return;
    in = pb_begin(&w->m, TP_INTERNED);
    if (new_name) {
        e = pb_begin(&w->m, ID_EVENT_NAMES);
        pb_uint(&w->m, IN_IID, w->frame_name[frame]);
        pb_str(&w->m, IN_NAME, xframe_fn(f), PF_STR_MAX);
        pb_end(&w->m, e);
    }
    if (new_loc) {
        e = pb_begin(&w->m, ID_SRC_LOCS);
        pb_uint(&w->m, SL_IID, (uint64_t)frame + 1);
        pb_str(&w->m, SL_FILE, xframe_file(f), PF_STR_MAX);
        pb_str(&w->m, SL_FUNCTION, xframe_fn(f), PF_STR_MAX);
        if (f->line > 0)
            pb_uint(&w->m, SL_LINE, (uint64_t)f->line);
        pb_end(&w->m, e);
    }
    pb_end(&w->m, in);
}

/* A whole slice packet straight into the output, for the events that intern nothing (all
 * but a frame's first BEGIN): body is the TrackEvent's fields but its track. Every tag here
 * is below 16, one byte. */
static void pf_event_fast(struct pw *w, const uint8_t *body, size_t n, uint64_t t)
{
    uint8_t head[4 * PB_VARINT_MAX + 8], tail[1 + PB_VARINT_MAX], lead[1 + PB_VARINT_MAX];
    size_t k = 0, tn = 0, ln = 0;

    tail[tn++] = TE_TRACK << 3;
    tn += pb_varint_put(tail + tn, w->track);
    head[k++] = TP_TIMESTAMP << 3;
    k += pb_varint_put(head + k, t);
    head[k++] = TP_SEQ_ID << 3;
    head[k++] = PF_SEQ;
    head[k++] = TP_SEQ_FLAGS << 3;
    head[k++] = SEQ_NEEDS_STATE;
    head[k++] = TP_TRACK_EVENT << 3 | 2;
    k += pb_varint_put(head + k, n + tn);
    lead[ln++] = TRACE_PACKET << 3 | 2;
    ln += pb_varint_put(lead + ln, k + n + tn);
    xb_put(w->b, (const char *)lead, ln);
    xb_put(w->b, (const char *)head, k);
    xb_put(w->b, (const char *)body, n);
    xb_put(w->b, (const char *)tail, tn);
}

/* Fills the frame's BEGIN fields but the track: category, type, name, source location. */
static void begin_body(struct pw *w, uint32_t frame)
{
    struct pf_body *bd = &w->begin_body[frame];
    struct pbuf m;

    pb_init(&m, bd->b, sizeof(bd->b));
    pb_uint(&m, TE_CATEGORY_IIDS, w->h->frames[frame].native ? CAT_NATIVE : CAT_SAMPLED);
    pb_uint(&m, TE_TYPE, TYPE_SLICE_BEGIN);
    pb_uint(&m, TE_NAME_IID, w->frame_name[frame]);
    pb_uint(&m, TE_SRC_LOC_IID, (uint64_t)frame + 1);
    bd->n = (uint8_t)m.len; /* at most 2 + 2 + 6 + 7 bytes: never full */
}

static void pf_slice(void *ctx, bool begin, uint32_t frame, uint64_t t)
{
    struct pw *w = ctx;
    static const uint8_t end[] = {TE_TYPE << 3, TYPE_SLICE_END};
    struct pf_body *bd = &w->begin_body[frame];
    bool new_name = false;
    size_t te;

    if (!begin || bd->n) {
        pf_event_fast(w, begin ? bd->b : end, begin ? bd->n : sizeof(end), t);
        return;
    }
    /* The frame's first BEGIN: its name (unless another frame had it) and source location
     * are interned in this packet. */
    if (!w->frame_name[frame])
        w->frame_name[frame] = names_get(&w->names, xframe_fn(&w->h->frames[frame]), &new_name);
    begin_body(w, frame);
    pkt_begin(w, t, SEQ_NEEDS_STATE);
    te = pb_begin(&w->m, TP_TRACK_EVENT);
    pb_raw(&w->m, bd->b, bd->n);
    pb_uint(&w->m, TE_TRACK, w->track);
    pb_end(&w->m, te);
    slice_interned(w, frame, new_name, true);
    pkt_end(w);
}

static void pf_thread(struct pw *w, const struct xlane *l, size_t k, uint64_t track)
{
    struct xiter it;
    struct xseg seg;
    uint64_t end = 0;

    w->track = track;
    w->open.n = 0;
    xiter_init(&it, w->p, l->r, l->th[k].t);
    while (xiter_next(&it, &seg)) {
        xopen_move(&w->open, w->h, seg.stack, seg.s, pf_slice, w);
        end = seg.e;
    }
    xopen_move(&w->open, w->h, HSTACK_NONE, end, pf_slice, w);
}

static void pf_instant(struct pw *w, uint64_t track, const char *label, const char *what,
                       uint64_t t)
{
    const struct export_opts *o = w->p->o;
    char name[64];
    size_t te;

    if ((o->from && t < o->from) || (o->to && t > o->to))
        return;
    snprintf(name, sizeof(name), "%s %s", label, what);
    pkt_begin(w, t, SEQ_NEEDS_STATE);
    te = pb_begin(&w->m, TP_TRACK_EVENT);
    pb_uint(&w->m, TE_TYPE, TYPE_INSTANT);
    pb_uint(&w->m, TE_TRACK, track);
    pb_str(&w->m, TE_NAME, name, PF_STR_MAX);
    pb_end(&w->m, te);
    pkt_end(w);
}

/* The rank's changes of kind of wait (export_waits.c): "rank 3 wait: data" instants. */
static void pf_waits(struct pw *w, const struct xlane *l, uint64_t track)
{
    struct xwait *x;
    size_t n = xwaits_lane(w->p, l, &x);
    char what[32];

    for (size_t k = 0; k < n; k++) {
        snprintf(what, sizeof(what), "wait: %s", wait_kind_name(x[k].kind));
        pf_instant(w, track, l->label, what, x[k].t);
    }
    free(x);
}

/* The counters asked for that could not be had (export_opts.unavailable): an instant each
 * at the start, "gpu counters unavailable: why", on a global "ranktop" track. */
static void pf_unavailable(struct pw *w)
{
    const char *const *u = w->p->o->unavailable;
    uint64_t t = w->p->o->from > w->h->t0 ? w->p->o->from : w->h->t0;
    uint64_t track = w->next_uuid++;
    char name[512];
    size_t d, te;

    if (!u || !u[0] || !u[1])
        return;
    d = track_begin(w, track, 0);
    pb_str(&w->m, TD_NAME, "ranktop", PF_STR_MAX);
    track_end(w, d);
    for (size_t i = 0; u[i] && u[i + 1]; i += 2) {
        snprintf(name, sizeof(name), "%s counters unavailable: %s", u[i], u[i + 1]);
        pkt_begin(w, t, SEQ_NEEDS_STATE);
        te = pb_begin(&w->m, TP_TRACK_EVENT);
        pb_uint(&w->m, TE_TYPE, TYPE_INSTANT);
        pb_uint(&w->m, TE_TRACK, track);
        pb_str(&w->m, TE_NAME, name, PF_STR_MAX);
        pb_end(&w->m, te);
        pkt_end(w);
    }
}

static void pf_counter_values(struct pw *w, const struct hseries *s, uint64_t track)
{
    for (size_t i = 0; i < s->n; i++) {
        const struct hpoint *pt = &s->pts[i];
        size_t te;

        if (!pt_shown(w->p->o, pt))
            continue;
        pkt_begin(w, pt->t, SEQ_NEEDS_STATE);
        te = pb_begin(&w->m, TP_TRACK_EVENT);
        pb_uint(&w->m, TE_TYPE, TYPE_COUNTER);
        pb_uint(&w->m, TE_TRACK, track);
        /* Counts and MiB as integers (shorter); percentages that need it as doubles. */
        if (pt->v == floor(pt->v) && fabs(pt->v) < 9007199254740992.0)
            pb_int(&w->m, TE_COUNTER, (int64_t)pt->v);
        else
            pb_double(&w->m, TE_DOUBLE_COUNTER, pt->v);
        pb_end(&w->m, te);
        pkt_end(w);
    }
}

static void pf_init(struct pw *w, struct xbuf *b, const struct xplan *p)
{
    const struct history *h = p->h;

    w->b = b;
    w->p = p;
    w->h = h;
    w->next_uuid = 1;
    names_init(&w->names, h->nframes);
    w->frame_name = x_calloc(h->nframes + 1, sizeof(*w->frame_name));
    w->begin_body = x_calloc(h->nframes + 1, sizeof(*w->begin_body));
    w->lane_uuid = x_calloc(p->nlane + 1, sizeof(*w->lane_uuid));
    w->series_uuid = x_calloc(h->nseries + 1, sizeof(*w->series_uuid));
}

static void pf_fini(struct pw *w)
{
    names_fini(&w->names);
    free(w->frame_name);
    free(w->begin_body);
    free(w->lane_uuid);
    free(w->series_uuid);
    free(w->open.f);
}

void export_perfetto_stream(struct xbuf *b, const struct xplan *p)
{
    struct pw *w = x_calloc(1, sizeof(*w)); /* the packet buffer is too large for a stack */

    pf_init(w, b, p);
    pf_preamble(w);
    for (size_t i = 0; i < p->nlane; i++)
        lane_tracks(w, i);
    counter_tracks(w);
    pf_unavailable(w);
    for (size_t i = 0; i < p->nlane; i++) {
        const struct xlane *l = &p->lane[i];

        for (size_t k = 0; k < l->nth; k++)
            pf_thread(w, l, k, w->lane_uuid[i] + 1 + k);
        if (l->start)
            pf_instant(w, w->lane_uuid[i], l->label, "started", l->start);
        if (l->r->exited)
            pf_instant(w, w->lane_uuid[i], l->label, "exited", l->r->end);
        pf_waits(w, l, w->lane_uuid[i]);
    }
    for (size_t k = 0; k < p->h->nseries; k++)
        if (w->series_uuid[k])
            pf_counter_values(w, &p->h->series[k], w->series_uuid[k]);
    pf_fini(w);
    free(w);
}
