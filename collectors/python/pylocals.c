/* The arguments and locals of one thread's Python frames, read from outside on request
 * (`dump --locals`, the monitor's locals pane); never part of sampling.
 *
 * It walks the thread's frames itself, simply (one read per frame, every step counted), from
 * the thread state to the outermost frame, keeping the frames the sampler shows (3.12+ entry
 * shims and 3.11+ frames before their first traceable instruction are left out). Names come
 * from the code object: co_varnames, co_cellvars and co_freevars up to 3.10, co_localsplusnames
 * and co_localspluskinds from 3.11; values from the frame's f_localsplus (3.8-3.10) or the
 * interpreter frame's localsplus (3.11+; 3.14+ slots are tagged stack references); cell and
 * free variables are dereferenced through their cell. Unbound slots are left out, as locals()
 * leaves them out. The offsets below were taken with offsetof() from each minor's headers; on
 * 3.13+ they are checked against the target's own _Py_DebugOffsets, and a target that
 * disagrees is refused, never guessed at. A frame whose code or slots changed while it was read
 * reports APP_E_STALE instead of locals, and a value that changed is shown as unreadable
 * (pyrepr.c renders the values). Free-threaded builds are refused (their objects are laid out
 * differently). Runs on the thread that owns the struct pyproc. */
#include "pyproc_priv.h"
#include "pyrepr.h"
#include "pystr.h"

#include "ranktop/base/bytes.h"
#include "ranktop/base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FRAMES_DEFAULT 256
#define STEPS_PER_FRAME 4 /* walk steps allowed per frame asked for (shims, hidden frames) */
#define NAMES_MAX 4096    /* locals of one code object believed */
#define FRAME_HDR 128     /* frame header bytes read (3.8-3.10 PyFrameObject head included) */
#define CODE_HDR 112      /* code object bytes read: every field used lies below */
#define CO_VARARGS 0x4
#define CO_VARKEYWORDS 0x8
#define KIND_HIDDEN 0x10 /* 3.12+: comprehension-inlined names, hidden from locals() */
#define KIND_CELL 0x40
#define KIND_FREE 0x80
#define OWNER_FRAME_OBJECT 2

/* Where the locals live, per minor. */
struct lo {
    uint32_t fr_locals;                             /* f_localsplus / localsplus in the frame */
    uint32_t argcount, kwonly, flags;               /* PyCodeObject ints */
    uint32_t varnames, cellvars, freevars, nlocals; /* 3.8-3.10 */
    uint32_t lp_names, lp_kinds;                    /* 3.11+ */
};

static int lo_for(int minor, struct lo *o)
{
    if (minor >= 8 && minor <= 10) {
        *o = (struct lo){.fr_locals = minor == 10 ? 352 : 360,
                         .argcount = 16,
                         .kwonly = 24,
                         .flags = 36,
                         .varnames = 72,
                         .freevars = 80,
                         .cellvars = 88,
                         .nlocals = 28};
        return 0;
    }
    if (minor == 11) {
        *o = (struct lo){.fr_locals = 72,
                         .argcount = 56,
                         .kwonly = 64,
                         .flags = 48,
                         .lp_names = 96,
                         .lp_kinds = 104};
        return 0;
    }
    if (minor >= 12 && minor <= 15) {
        *o = (struct lo){.fr_locals = minor >= 14 ? 80 : 72,
                         .argcount = 52,
                         .kwonly = 60,
                         .flags = 48,
                         .lp_names = 96,
                         .lp_kinds = 104};
        return 0;
    }
    return APP_E_VERSION;
}

/* 3.13+: the target's _Py_DebugOffsets exports interpreter_frame.localsplus (the slot after
 * instr_ptr) and code_object.argcount, localsplusnames, localspluskinds (the slots after
 * firstlineno). The shape whose instr_ptr and firstlineno slots hold the layout's values is the
 * target's; its locals slots must agree with the table. */
static int lo_check(struct pyproc *p, const struct lo *o)
{
    const struct py_abi *a = pyabi_for_minor(p->L.minor);
    uint8_t dbg[PYABI_DEBUG_OFFSETS_MAX];
    int st;

    if (!a || !a->debug[0])
        return 0;
    if ((st = rmem_read(p->mem, p->runtime, dbg, sizeof(dbg))) < 0)
        return st;
    for (int i = 0; i < PYABI_SHAPES && a->debug[i]; i++) {
        const struct py_debug_shape *s = a->debug[i];
        if (bytes_load_u64(dbg + s->fr_instr) != p->L.fr.instr ||
            bytes_load_u64(dbg + s->co_firstlineno) != p->L.co.firstlineno)
            continue;
        if (bytes_load_u64(dbg + s->fr_instr + 8) == o->fr_locals &&
            bytes_load_u64(dbg + s->co_firstlineno + 8) == o->argcount &&
            bytes_load_u64(dbg + s->co_firstlineno + 16) == o->lp_names &&
            bytes_load_u64(dbg + s->co_firstlineno + 24) == o->lp_kinds)
            return 0;
        return APP_E_VERSION;
    }
    return APP_E_VERSION;
}

/* --- finding the thread and its frames ------------------------------------------------- */

static int read_ptr(struct pyproc *p, uint64_t addr, uint64_t *v)
{
    int st = rmem_read(p->mem, addr, v, sizeof(*v));

    if (st == 0 && *v && !bytes_ptr_ok(*v))
        st = APP_E_STALE;
    return st;
}

/* The thread state of ident, in any interpreter, and a copy of it. */
static int find_tstate(struct pyproc *p, uint64_t ident, uint64_t *ts, uint8_t *copy)
{
    const struct py_layout *L = &p->L;
    size_t len = L->ts.size < PYABI_TSTATE_READ ? L->ts.size : PYABI_TSTATE_READ;
    uint64_t interp, t;
    int st = read_ptr(p, p->runtime + L->rt.interp_head, &interp);

    for (int i = 0; st == 0 && interp && i < PYPROC_MAX_INTERPS; i++) {
        st = read_ptr(p, interp + L->is.threads_head, &t);
        for (int k = 0; st == 0 && t && k < PYPROC_DEFAULT_THREADS; k++) {
            if ((st = rmem_read(p->mem, t, copy, len)) < 0)
                break;
            if (bytes_load_u64(copy + L->ts.thread_id) == ident) {
                *ts = t;
                return 0;
            }
            t = bytes_load_u64(copy + L->ts.next);
            if (t && !bytes_ptr_ok(t))
                st = APP_E_STALE;
        }
        if (st == 0)
            st = read_ptr(p, interp + L->is.next, &interp);
    }
    return st < 0 ? st : APP_E_NOTFOUND;
}

static int top_frame(struct pyproc *p, const uint8_t *ts, uint64_t *frame)
{
    const struct py_layout *L = &p->L;
    uint64_t cf;
    int st;

    if (L->ts.frame >= 0) {
        *frame = bytes_load_u64(ts + L->ts.frame);
        return *frame && !bytes_ptr_ok(*frame) ? APP_E_STALE : 0;
    }
    cf = bytes_load_u64(ts + L->ts.cframe);
    if (!cf)
        return *frame = 0, 0;
    if (!bytes_ptr_ok(cf))
        return APP_E_STALE;
    st = read_ptr(p, cf + (uint64_t)L->ts.cframe_current, frame);
    return st;
}

/* One frame of the walk: its address, code and instruction offset. */
struct lframe {
    uint64_t frame, code;
    long q;
    bool gen;
};

/* One step: the frame at `frame` read into f; fills *out and returns 1 when it is a Python
 * frame to show, 0 to pass over it, or a negative status; *prev is the next frame. */
static int walk_one(struct pyproc *p, uint64_t frame, uint8_t *f, struct lframe *out,
                    uint64_t *prev)
{
    const struct py_layout *L = &p->L;
    int st = rmem_read(p->mem, frame, f, FRAME_HDR), owner;
    uint64_t code, instr;

    if (st < 0)
        return st;
    *prev = bytes_load_u64(f + L->fr.prev);
    code = bytes_load_u64(f + L->fr.code);
    if ((*prev && !bytes_ptr_ok(*prev)) || *prev == frame)
        return APP_E_STALE;
    if (L->fr.object) {
        int32_t lasti = bytes_load_i32(f + L->fr.instr);
        *out = (struct lframe){frame, code, lasti < 0 ? -1 : lasti * (L->fr.lasti_units ? 2 : 1),
                               false};
        return bytes_ptr_ok(code) ? 1 : APP_E_STALE;
    }
    if (L->fr.code_tagged)
        code &= ~(uint64_t)7;
    owner = f[L->fr.owner];
    if (owner == OWNER_FRAME_OBJECT)
        return APP_E_STALE; /* a returned frame's copy: the chain moved */
    if (owner >= L->fr.owner_skip || !code)
        return 0;
    if (!bytes_ptr_ok(code))
        return APP_E_STALE;
    instr = bytes_load_u64(f + L->fr.instr);
    *out = (struct lframe){frame, code,
                           instr ? (long)(instr - (code + (uint64_t)L->co.code_adaptive)) : -1,
                           owner == L->fr.owner_gen};
    return 1;
}

static int walk(struct pyproc *p, uint64_t frame, struct lframe *fr, uint32_t max, uint32_t *n)
{
    uint8_t f[FRAME_HDR];
    uint64_t prev;
    int st = 0;

    *n = 0;
    for (uint32_t step = 0; frame && *n < max && step < max * STEPS_PER_FRAME; step++) {
        if ((st = walk_one(p, frame, f, &fr[*n], &prev)) < 0)
            return st;
        *n += (uint32_t)st;
        frame = prev;
    }
    return 0;
}

/* --- names and values ----------------------------------------------------------------- */

struct slots {
    uint32_t n, nargs;
    uint64_t *name;  /* remote str objects */
    uint8_t *kind;   /* 3.11+ kinds, or made up for 3.8-3.10 */
    uint64_t *value; /* the frame's slots */
};

static void slots_free(struct slots *s)
{
    free(s->name), free(s->kind), free(s->value);
    memset(s, 0, sizeof(*s));
}

/* A tuple's items: *n of them into a fresh array. */
static int tuple_read(struct pyproc *p, uint32_t items, uint64_t t, uint64_t **out, uint32_t *n)
{
    int64_t len;
    int st;

    *out = NULL, *n = 0;
    if (!bytes_ptr_ok(t))
        return APP_E_STALE;
    if ((st = rmem_read(p->mem, t + 16, &len, sizeof(len))) < 0)
        return st;
    if (len < 0 || len > NAMES_MAX)
        return APP_E_STALE;
    *n = (uint32_t)len;
    *out = x_calloc(len ? (size_t)len : 1, sizeof(**out));
    if (len && (st = rmem_read(p->mem, t + items, *out, 8 * (size_t)len)) < 0)
        return st;
    return 0;
}

/* The names and kinds of the code object whose header is co: 3.11+. */
static int names_new(struct pyproc *p, const struct lo *o, uint32_t items, const uint8_t *co,
                     struct slots *s)
{
    uint64_t kinds = bytes_load_u64(co + o->lp_kinds);
    int64_t klen;
    int st = tuple_read(p, items, bytes_load_u64(co + o->lp_names), &s->name, &s->n);

    if (st < 0)
        return st;
    if (!bytes_ptr_ok(kinds))
        return APP_E_STALE;
    if ((st = rmem_read(p->mem, kinds + p->L.bytes.size, &klen, sizeof(klen))) < 0)
        return st;
    if (klen != (int64_t)s->n)
        return APP_E_STALE;
    s->kind = x_calloc(s->n + 1u, 1);
    return s->n ? rmem_read(p->mem, kinds + p->L.bytes.sval, s->kind, s->n) : 0;
}

/* 3.8-3.10: co_varnames, then co_cellvars and co_freevars, as f_localsplus holds them. */
static int names_old(struct pyproc *p, const struct lo *o, uint32_t items, const uint8_t *co,
                     struct slots *s)
{
    uint64_t *part[3] = {NULL, NULL, NULL};
    uint32_t np[3] = {0, 0, 0};
    const uint32_t off[3] = {o->varnames, o->cellvars, o->freevars};
    const uint8_t kind[3] = {0x20, KIND_CELL, KIND_FREE};
    int st = 0;

    for (int i = 0; i < 3 && st == 0; i++)
        st = tuple_read(p, items, bytes_load_u64(co + off[i]), &part[i], &np[i]);
    if (st == 0 && (int32_t)np[0] != bytes_load_i32(co + o->nlocals))
        st = APP_E_STALE;
    if (st == 0 && np[0] + np[1] + np[2] > NAMES_MAX)
        st = APP_E_STALE;
    if (st == 0) {
        s->n = np[0] + np[1] + np[2];
        s->name = x_calloc(s->n + 1u, sizeof(*s->name));
        s->kind = x_calloc(s->n + 1u, 1);
        for (uint32_t i = 0, k = 0; i < 3; i++)
            for (uint32_t j = 0; j < np[i]; j++, k++)
                s->name[k] = part[i][j], s->kind[k] = kind[i];
    }
    for (int i = 0; i < 3; i++)
        free(part[i]);
    return st;
}

/* The frame's n slots into vals, read in one piece with the frame's code word, which must
 * still be the code the names were taken from: a 3.11+ frame's memory is reused by the next
 * call as soon as it returns (3.8-3.10 frame objects are recycled too), and names of one code
 * with values of another would be a guess. */
static int slots_read(struct pyproc *p, const struct lo *o, const struct lframe *lf, uint32_t n,
                      uint64_t *vals)
{
    size_t len = o->fr_locals + 8 * (size_t)n;
    uint8_t *b = x_malloc(len);
    uint64_t code;
    int st = rmem_read(p->mem, lf->frame, b, len);

    if (st == 0) {
        code = bytes_load_u64(b + p->L.fr.code);
        if (p->L.fr.code_tagged)
            code &= ~(uint64_t)7;
        if (code != lf->code)
            st = APP_E_STALE;
        else
            memcpy(vals, b + o->fr_locals, 8 * (size_t)n);
    }
    free(b);
    return st;
}

/* Names, kinds and slot values of one frame; 0 or a negative status. */
static int frame_slots(struct pyproc *p, const struct lo *o, const struct lframe *lf,
                       struct slots *s)
{
    uint32_t items = p->L.minor >= 14 ? 32 : 24;
    uint8_t co[CODE_HDR];
    uint32_t flags;
    int st = rmem_read(p->mem, lf->code, co, sizeof(co));

    if (st < 0)
        return st;
    st = p->L.fr.object ? names_old(p, o, items, co, s) : names_new(p, o, items, co, s);
    if (st < 0)
        return st;
    flags = bytes_load_u32(co + o->flags);
    s->nargs = (uint32_t)bytes_load_i32(co + o->argcount) +
               (uint32_t)bytes_load_i32(co + o->kwonly) + !!(flags & CO_VARARGS) +
               !!(flags & CO_VARKEYWORDS);
    if (s->nargs > s->n)
        return APP_E_STALE;
    s->value = x_calloc(s->n + 1u, sizeof(*s->value));
    return slots_read(p, o, lf, s->n, s->value);
}

/* The object a slot refers to: 3.14+ slots are tagged references (the low two bits). Returns
 * false for an unbound slot; a tagged small int leaves *obj 0 and its value in *tagged. */
static bool slot_object(const struct pyproc *p, uint64_t v, uint64_t *obj, int64_t *tagged)
{
    *obj = v, *tagged = 0;
    if (p->L.minor >= 14) {
        if ((v & 3) == 3) {
            *obj = 0, *tagged = (int64_t)v >> 2;
            return true;
        }
        *obj = v & ~(uint64_t)3;
    }
    return *obj != 0;
}

/* A cell or free variable: the cell's content, which must be a cell. */
static int cell_deref(struct pyrepr *r, uint64_t cell, uint64_t *obj)
{
    char tn[16];
    uint64_t flags;
    int st = pyrepr_type(r, cell, tn, sizeof(tn), &flags);

    if (st == 0 && strcmp(tn, "cell"))
        st = APP_E_STALE;
    if (st == 0)
        st = rmem_read(r->m, cell + 16, obj, sizeof(*obj));
    return st;
}

static void local_fill(struct pyproc *p, struct pyrepr *r, const struct slots *s, uint32_t i,
                       struct pylocal *out)
{
    uint64_t obj;
    int64_t tagged;
    int st;

    slot_object(p, s->value[i], &obj, &tagged);
    out->kind = i < s->nargs                             ? PYLOCAL_ARG
                : (s->kind[i] & (KIND_CELL | KIND_FREE)) ? PYLOCAL_CELL
                                                         : PYLOCAL_LOCAL;
    if (!obj) {
        char b[32];
        snprintf(b, sizeof(b), "%lld", (long long)tagged);
        out->type = x_strdup("int"), out->repr = x_strdup(b);
        return;
    }
    st = 0;
    if (s->kind[i] & (KIND_CELL | KIND_FREE))
        st = cell_deref(r, obj, &obj);
    if (st == 0 && !obj) {
        out->type = x_strdup("-"), out->repr = x_strdup("<empty cell>");
        return;
    }
    if (st < 0) {
        out->type = x_strdup("?"), out->repr = x_strdup("<unreadable: not a cell>");
        return;
    }
    pyrepr_value(r, obj, &out->type, &out->repr);
}

/* The locals of one frame into lf_out (its strings set by the caller). */
static int frame_locals(struct pyproc *p, const struct lo *o, struct pyrepr *r,
                        const struct lframe *lf, struct pylocals_frame *out)
{
    struct slots s = {0};
    uint64_t *again;
    int st = frame_slots(p, o, lf, &s);

    if (st < 0)
        return slots_free(&s), st;
    out->locals = x_calloc(s.n + 1u, sizeof(*out->locals));
    for (uint32_t i = 0; i < s.n; i++) {
        uint64_t obj;
        int64_t tg;
        struct pylocal *l = &out->locals[out->nlocals];
        if ((s.kind[i] & KIND_HIDDEN) || !slot_object(p, s.value[i], &obj, &tg))
            continue; /* unbound, or hidden from locals() */
        l->name = pystr_read(p->mem, &p->L, s.name[i], &st);
        if (!l->name)
            l->name = x_strdup("?");
        local_fill(p, r, &s, i, l);
        out->nlocals++;
    }
    /* A slot that changed while we read its object shows as unreadable; a frame that runs
     * another code now, or is gone, shows none. */
    again = x_calloc(s.n + 1u, sizeof(*again));
    st = slots_read(p, o, lf, s.n, again);
    for (uint32_t i = 0, k = 0; i < s.n && k < out->nlocals; i++) {
        uint64_t obj;
        int64_t tg;
        if ((s.kind[i] & KIND_HIDDEN) || !slot_object(p, s.value[i], &obj, &tg))
            continue;
        if (st < 0 || again[i] != s.value[i]) {
            free(out->locals[k].type), free(out->locals[k].repr);
            out->locals[k].type = x_strdup("?");
            out->locals[k].repr = x_strdup("<unreadable: changed while read>");
        }
        k++;
    }
    free(again);
    slots_free(&s);
    return st; /* the frame runs other code now: none of it is shown */
}

/* --- the entry point ------------------------------------------------------------------ */

/* The frames to show, resolved: hidden ones (not yet at their first traceable instruction)
 * are dropped, as the sampler drops them. */
static void frames_fill(struct pyproc *p, const struct lo *o, struct lframe *fr, uint32_t n,
                        uint64_t interp, struct pylocals *out)
{
    uint64_t *codes = x_calloc(n + 1u, sizeof(*codes));
    struct pycode **res = x_calloc(n + 1u, sizeof(*res));
    struct pyrepr r;

    pyrepr_init(&r, p->mem, &p->L);
    r.interp = interp;
    for (uint32_t i = 0; i < n; i++)
        codes[i] = fr[i].code;
    pycode_cache_next_epoch(&p->codes);
    if (pycode_resolve(&p->codes, p->mem, &p->L, p->pycode_type, codes, n, res) < 0)
        memset(res, 0, (n + 1u) * sizeof(*res));
    out->frames = x_calloc(n + 1u, sizeof(*out->frames));
    for (uint32_t i = 0; i < n; i++) {
        struct pycode *e = res[i];
        struct pylocals_frame *f = &out->frames[out->nframes];
        if (e && p->L.co.firsttraceable >= 0 && !fr[i].gen && fr[i].q < 2L * e->firsttraceable)
            continue;
        out->nframes++;
        if (!e) {
            f->function = x_strdup("?"), f->file = x_strdup("?");
            f->status = APP_E_STALE;
            continue;
        }
        f->function = x_strdup(e->function), f->file = x_strdup(e->file);
        f->line = fr[i].q < 0 ? e->firstlineno : pycode_line(e, p->L.minor, fr[i].q);
        f->status = frame_locals(p, o, &r, &fr[i], f);
    }
    free(codes);
    free(res);
}

int pyproc_locals(struct pyproc *p, uint64_t ident, uint32_t max_frames, struct pylocals **out,
                  struct app_err *err)
{
    uint8_t ts[PYABI_TSTATE_READ];
    struct lframe *fr;
    uint64_t tsaddr, frame;
    uint32_t n;
    struct lo o;
    int st;

    *out = NULL;
    if (p->L.free_threaded || lo_for(p->L.minor, &o) < 0)
        return app_err_set(err, APP_E_VERSION, "locals are not read on this Python build");
    if ((st = lo_check(p, &o)) < 0)
        return app_err_set(err, st, "the target's debug offsets disagree with the locals layout");
    if ((st = find_tstate(p, ident, &tsaddr, ts)) < 0)
        return app_err_set(err, st, "thread %llu: %s", (unsigned long long)ident,
                           app_status_str(st));
    if ((st = top_frame(p, ts, &frame)) < 0)
        return app_err_set(err, st, "thread %llu: no top frame", (unsigned long long)ident);
    max_frames = max_frames ? max_frames : FRAMES_DEFAULT;
    fr = x_calloc(max_frames, sizeof(*fr));
    if ((st = walk(p, frame, fr, max_frames, &n)) < 0) {
        free(fr);
        return app_err_set(err, st, "thread %llu: the stack moved while read",
                           (unsigned long long)ident);
    }
    *out = x_calloc(1, sizeof(**out));
    frames_fill(p, &o, fr, n, bytes_load_u64(ts + p->L.ts.interp), *out);
    free(fr);
    return 0;
}

void pylocals_free(struct pylocals *l)
{
    if (!l)
        return;
    for (uint32_t i = 0; i < l->nframes; i++) {
        struct pylocals_frame *f = &l->frames[i];
        for (uint32_t k = 0; k < f->nlocals; k++)
            free(f->locals[k].name), free(f->locals[k].type), free(f->locals[k].repr);
        free(f->locals), free(f->function), free(f->file);
    }
    free(l->frames);
    free(l);
}
