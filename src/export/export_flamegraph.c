/* Flame graph: one self-contained interactive SVG, the kind py-spy writes by default, written
 * from the SVG 1.1 and XML 1.0 specs. The bottom frame "all" spans every sample; on it stands
 * one frame per rank (lanes in rank order), on each rank its threads (by tid), on each thread
 * its frames, outermost first. A frame's width is its share of all samples, counted as
 * export_stacks.c aggregates them (the collapsed writer's counts); callees stand left-aligned
 * on their caller in name order, so the gap on a caller's right is its own samples. Each
 * frame is a <g> holding a <title> (tooltip: name, file:line, samples and percent), a <rect>
 * filled with a warm hue hashed from the function name (one name, one colour, in every file)
 * and a <text> cut to the width. data-x and data-w give a frame's offset and width in samples:
 * the inline script lays frames out again from them when one is clicked (zoom; "Reset zoom"
 * or Escape undo it) and sums the share a search matched (Ctrl-F, "/" or "Search"; a regular
 * expression, else plain text), matched frames turning magenta.
 *
 * Size bound: frames narrower than 0.1% of all samples (about a pixel) are left out together
 * with everything standing on them; their samples still count in their caller's width. So at
 * most 1000 frames are drawn per level however long the trace, and an hour-long record gives
 * a file of the same order as a minute-long one (bench_export: an hour of 64 ranks, 0.3 MB).
 * The price: a zoom shows no frame under 0.1% of the whole trace.
 *
 * XML: names come from the targets, so every one goes through fg_text: bytes that are not
 * UTF-8, C0 and C1 controls and U+FFFE/U+FFFF (XML 1.0 cannot carry most of these, not even
 * as character references) become U+FFFD, and & < > " ' become references. The script and style
 * are constant, inside CDATA; nothing outside the file is referenced. Runs on the caller's
 * thread. */
#include "export_priv.h"

#include "ranktop/base/hash.h"
#include "ranktop/base/util.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>

#define FG_W 1200    /* image width, px */
#define FG_PAD 10    /* margin left and right, px */
#define FG_ROW 16    /* height of a level, px */
#define FG_GLYPH 7.2 /* width of a 12 px monospace glyph (0.6 em), px */
#define FG_HEAD 62   /* title, subtitle and buttons above the frames, px */
#define FG_FOOT 26   /* details line below them, px */
#define FG_MIN 1000  /* frames under 1/FG_MIN of all samples are left out */
#define FG_MATCH "#e040e0"

enum fg_kind { FG_ALL, FG_LANE, FG_THREAD, FG_FUNC };

struct fg_node {
    uint32_t kind;
    uint32_t ref; /* FG_LANE: lane index; FG_THREAD: thread index in the lane; FG_FUNC: frame id */
    uint32_t parent;
    uint32_t depth;
    uint64_t x;     /* samples left of it */
    uint64_t total; /* samples of it and of all it called */
    uint64_t kids;  /* samples of its children so far: where the next child starts */
};

struct fg {
    struct xbuf *b;
    const struct xplan *p;
    struct fg_node *n; /* in depth-first order, n[0] = "all" */
    size_t nn, cap;
    uint32_t *path;  /* nodes of the stack being added: path[0] is its thread */
    struct xbuf lab; /* scratch for a label */
    uint32_t top;    /* deepest level drawn */
};

/* Sort key of a stack: the history travels along since qsort passes no context. */
struct fg_key {
    const struct history *h;
    uint32_t id;
};

static void fg_printf(struct xbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Numbers and constant text only; names go through fg_text. */
static void fg_printf(struct xbuf *b, const char *fmt, ...)
{
    char tmp[256], *big;
    va_list ap, again;
    int n;

    va_start(ap, fmt);
    va_copy(again, ap);
    n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    if (n > 0 && (size_t)n < sizeof(tmp)) {
        xb_put(b, tmp, (size_t)n);
    } else if (n > 0) {
        big = x_malloc((size_t)n + 1);
        vsnprintf(big, (size_t)n + 1, fmt, again);
        xb_put(b, big, (size_t)n);
        free(big);
    }
    va_end(again);
    va_end(ap);
}

/* The code point at s: its length in *len (1 for a stray byte), and whether it may stand as
 * it is in a name (no C0 or C1 controls, nothing that is not UTF-8, no U+FFFE or U+FFFF). */
static bool fg_cp(const unsigned char *s, size_t *len)
{
    size_t n;

    *len = 1;
    if (*s < 0x80)
        return *s >= 0x20 && *s != 0x7f;
    if (!(n = utf8_valid_len(s)))
        return false;
    *len = n;
    if (n == 2 && s[0] == 0xC2 && s[1] < 0xA0) /* C1 controls: legal, but no text */
        return false;
    return !(n == 3 && s[0] == 0xEF && s[1] == 0xBF && s[2] >= 0xBE);
}

/* Code points of s as fg_text counts them. */
static size_t fg_cps(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = 0, len;

    for (; *s; s += len, n++)
        (void)fg_cp(s, &len);
    return n;
}

/* The first max code points of s as XML character data or attribute text (see the file
 * comment). NULL is "". */
static void fg_text(struct xbuf *b, const char *str, size_t max)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    size_t len;

    for (size_t n = 0; *s && n < max; s += len, n++) {
        if (!fg_cp(s, &len)) {
            xb_put(b, "\xEF\xBF\xBD", 3);
            continue;
        }
        switch (*s) {
        case '&':
            xb_puts(b, "&amp;");
            break;
        case '<':
            xb_puts(b, "&lt;");
            break;
        case '>':
            xb_puts(b, "&gt;");
            break;
        case '"':
            xb_puts(b, "&quot;");
            break;
        case '\'':
            xb_puts(b, "&apos;");
            break;
        default:
            xb_put(b, (const char *)s, len);
        }
    }
}

static uint32_t fg_add(struct fg *g, enum fg_kind kind, uint32_t ref, uint32_t parent)
{
    struct fg_node *n;

    if (g->nn == g->cap) {
        g->cap = g->cap ? g->cap * 2 : 1024;
        g->n = x_reallocarray(g->n, g->cap, sizeof(*g->n));
    }
    n = &g->n[g->nn];
    *n = (struct fg_node){.kind = kind, .ref = ref, .parent = parent};
    if (g->nn) {
        n->depth = g->n[parent].depth + 1;
        n->x = g->n[parent].x + g->n[parent].kids;
    }
    return (uint32_t)g->nn++;
}

/* w more samples ending in node id: it and every caller below it grow. */
static void fg_weigh(struct fg *g, uint32_t id, uint64_t w)
{
    for (;;) {
        g->n[id].total += w;
        if (!id)
            return;
        id = g->n[id].parent;
        g->n[id].kids += w;
    }
}

static int fg_frame_cmp(const struct history *h, uint32_t a, uint32_t b)
{
    const struct hframe *x = &h->frames[a], *y = &h->frames[b];
    int c;

    if (a == b)
        return 0;
    if ((c = strcmp(xframe_fn(x), xframe_fn(y))) || (c = strcmp(xframe_file(x), xframe_file(y))))
        return c;
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    return a < b ? -1 : 1;
}

/* Stacks in name order, frame by frame from the outermost, a prefix before its extensions:
 * stacks sharing outer frames end up next to each other, so each node's callees are added
 * one after the other and its children never interleave. */
static int fg_stack_cmp(const void *pa, const void *pb)
{
    const struct fg_key *ka = pa, *kb = pb;
    const struct history *h = ka->h;
    uint32_t na = h->stacks[ka->id].nframes, nb = h->stacks[kb->id].nframes;
    const uint32_t *fa = history_stack_frames(h, ka->id), *fb = history_stack_frames(h, kb->id);

    for (uint32_t k = 0; k < na && k < nb; k++) {
        int c = fg_frame_cmp(h, fa[k], fb[k]);

        if (c)
            return c;
    }
    if (na != nb)
        return na < nb ? -1 : 1;
    return ka->id < kb->id ? -1 : ka->id > kb->id;
}

/* Adds thread ti of lane l (node lane) and its stacks to the tree. */
static void fg_thread(struct fg *g, struct xstacks *s, struct fg_key *keys, uint32_t lane,
                      const struct xlane *l, size_t ti)
{
    const struct history *h = g->p->h;
    const uint32_t *prev = NULL;
    uint32_t nprev = 0;

    xstacks_thread(s, g->p, l, &l->th[ti]);
    for (size_t i = 0; i < s->n; i++)
        keys[i] = (struct fg_key){h, s->order[i]};
    x_qsort(keys, s->n, sizeof(*keys), fg_stack_cmp);
    g->path[0] = fg_add(g, FG_THREAD, (uint32_t)ti, lane);
    for (size_t i = 0; i < s->n; i++) {
        uint32_t id = keys[i].id, n = h->stacks[id].nframes, k = 0;
        const uint32_t *f = history_stack_frames(h, id);

        while (k < n && k < nprev && f[k] == prev[k])
            k++;
        for (; k < n; k++)
            g->path[k + 1] = fg_add(g, FG_FUNC, f[k], g->path[k]);
        fg_weigh(g, g->path[n], s->weight[id]);
        prev = f;
        nprev = n;
    }
}

static void fg_build(struct fg *g)
{
    const struct history *h = g->p->h;
    struct fg_key *keys = x_calloc(h->nstacks ? h->nstacks : 1, sizeof(*keys));
    uint32_t deepest = 0;
    struct xstacks s;

    for (size_t i = 0; i < h->nstacks; i++)
        if (h->stacks[i].nframes > deepest)
            deepest = h->stacks[i].nframes;
    g->path = x_calloc((size_t)deepest + 1, sizeof(*g->path));
    xstacks_init(&s, h, false);
    fg_add(g, FG_ALL, 0, 0);
    for (size_t i = 0; i < g->p->nlane; i++) {
        uint32_t lane = fg_add(g, FG_LANE, (uint32_t)i, 0);

        for (size_t k = 0; k < g->p->lane[i].nth; k++)
            fg_thread(g, &s, keys, lane, &g->p->lane[i], k);
    }
    xstacks_fini(&s);
    free(keys);
}

static bool fg_drawn(const struct fg *g, size_t id)
{
    uint64_t all = g->n[0].total;

    return !id || (all && g->n[id].total >= (all + FG_MIN - 1) / FG_MIN);
}

/* A warm fill from the function name: hue 0-55° (red to yellow), saturation 75-95 %,
 * lightness 55-67 %. */
static void fg_fill(const char *fn, char out[8])
{
    uint64_t v = hash_mix(hash_str(fn), 0);
    double hue = (double)(v % 56) / 60.0, sat = 0.75 + (double)((v >> 16) % 21) / 100.0;
    double lit = 0.55 + (double)((v >> 32) % 13) / 100.0;
    double c = (1.0 - (2.0 * lit - 1.0 > 0 ? 2.0 * lit - 1.0 : 1.0 - 2.0 * lit)) * sat;
    double m = lit - c / 2.0;

    snprintf(out, 8, "#%02x%02x%02x", (unsigned)((c + m) * 255.0 + 0.5),
             (unsigned)((c * hue + m) * 255.0 + 0.5), (unsigned)(m * 255.0 + 0.5));
}

static const char *fg_basename(const char *path)
{
    const char *s = strrchr(path, '/');

    return s ? s + 1 : path;
}

/* The label of node n into g->lab (NUL-terminated, raw bytes) and its fill into fill. */
static void fg_label(struct fg *g, const struct fg_node *n, char fill[8])
{
    const struct xlane *l = n->kind == FG_LANE ? &g->p->lane[n->ref] : NULL;
    const struct hframe *f = n->kind == FG_FUNC ? &g->p->h->frames[n->ref] : NULL;

    g->lab.len = 0;
    if (n->kind == FG_ALL) {
        xb_puts(&g->lab, "all");
        snprintf(fill, 8, "#d6d6d6");
    } else if (l) {
        xb_puts(&g->lab, l->label);
        snprintf(fill, 8, "#c4cede");
    } else if (n->kind == FG_THREAD) {
        l = &g->p->lane[g->n[n->parent].ref];
        xb_puts(&g->lab, l->th[n->ref].name);
        snprintf(fill, 8, "#dbe1ea");
    } else {
        xb_puts(&g->lab, xframe_fn(f));
        if (f->file && f->file[0]) {
            xb_puts(&g->lab, " (");
            xb_puts(&g->lab, fg_basename(f->file));
            if (f->line > 0)
                fg_printf(&g->lab, ":%d", f->line);
            xb_puts(&g->lab, ")");
        }
        fg_fill(xframe_fn(f), fill);
    }
    xb_put(&g->lab, "", 1);
}

/* The tooltip's middle line: where the frame is, or which rank and thread. */
static void fg_where(struct fg *g, const struct fg_node *n)
{
    const struct hframe *f = n->kind == FG_FUNC ? &g->p->h->frames[n->ref] : NULL;
    const struct xlane *l;
    const struct xthread *x;

    if (n->kind == FG_ALL) {
        fg_printf(g->b, "\n%zu rank%s", g->p->nlane, g->p->nlane == 1 ? "" : "s");
    } else if (n->kind == FG_LANE) {
        xb_puts(g->b, "\n");
        fg_text(g->b, g->p->lane[n->ref].name, SIZE_MAX);
    } else if (n->kind == FG_THREAD) {
        l = &g->p->lane[g->n[n->parent].ref];
        x = &l->th[n->ref];
        xb_puts(g->b, "\nthread of ");
        fg_text(g->b, l->label, SIZE_MAX);
        if (x->t->tid > 0)
            fg_printf(g->b, ", tid %d", x->t->tid);
    } else if (f->file && f->file[0]) {
        xb_puts(g->b, "\n");
        fg_text(g->b, g->p->o->short_files ? path_short(f->file) : f->file, SIZE_MAX);
        if (f->line > 0)
            fg_printf(g->b, ":%d", f->line);
        if (f->native)
            xb_puts(g->b, " (native)");
    }
}

/* The label cut to w px of monospace text: all of it, or its start and "..", or nothing
 * under 3 glyphs. The script cuts the same way when it lays frames out again. */
static void fg_cut(struct xbuf *b, const char *label, double w)
{
    double fit = (w - 6.0) / FG_GLYPH;
    size_t n = fg_cps(label);

    if (fit < 3.0)
        return;
    if ((double)n <= fit) {
        fg_text(b, label, SIZE_MAX);
        return;
    }
    fg_text(b, label, (size_t)fit - 2);
    xb_puts(b, "..");
}

static void fg_frame(struct fg *g, const struct fg_node *n)
{
    uint64_t all = g->n[0].total;
    double scale = (double)(FG_W - 2 * FG_PAD) / (double)(all ? all : 1);
    double x = FG_PAD + (double)n->x * scale,
           w = all ? (double)n->total * scale : FG_W - 2 * FG_PAD;
    unsigned y = FG_HEAD + (g->top - n->depth) * FG_ROW;
    const char *unit = g->p->o->interval_ns ? "sample" : "\xC2\xB5s";
    char fill[8];

    fg_label(g, n, fill);
    fg_printf(g->b, "<g class=\"f\" data-x=\"%" PRIu64 "\" data-w=\"%" PRIu64 "\"><title>", n->x,
              n->total);
    fg_text(g->b, g->lab.p, SIZE_MAX);
    fg_where(g, n);
    fg_printf(g->b, "\n%" PRIu64 " %s%s (%.2f%%)</title>", n->total, unit,
              n->total == 1 || !g->p->o->interval_ns ? "" : "s",
              all ? 100.0 * (double)n->total / (double)all : 0.0);
    fg_printf(g->b, "<rect x=\"%.2f\" y=\"%u\" width=\"%.2f\" height=\"%d\" fill=\"%s\"/>", x, y, w,
              FG_ROW - 1, fill);
    fg_printf(g->b, "<text x=\"%.2f\" y=\"%u\">", x + 3, y + FG_ROW - 4);
    fg_cut(g->b, g->lab.p, w);
    xb_puts(g->b, "</text></g>\n");
}

static const char fg_style[] = "<style type=\"text/css\"><![CDATA[\n"
                               "text { font-family: monospace; font-size: 12px; fill: #000; }\n"
                               "#title { font: bold 17px sans-serif; text-anchor: middle; }\n"
                               "#sub { font: 12px sans-serif; fill: #555; text-anchor: middle; }\n"
                               ".btn { font: 12px sans-serif; fill: #1f4e8c; cursor: pointer; }\n"
                               ".btn:hover { text-decoration: underline; }\n"
                               ".hide { display: none; }\n"
                               ".f { cursor: pointer; }\n"
                               ".f:hover rect { stroke: #222; stroke-width: 0.6; }\n"
                               ".f text { pointer-events: none; }\n"
                               ".up rect { opacity: 0.55; }\n"
                               "]]></style>\n";

/* The viewer, constant; W, PAD, GLYPH and MATCH come before it from the #defines above. A
 * frame's tooltip (<title>) gives its name (first line) and counts (last line); search
 * matches the lines before the counts. */
static const char fg_script[] =
    "var frames = [], total = 1, matching = null;\n"
    "function byId(id) { return document.getElementById(id); }\n"
    "function cut(f, w) {\n"
    "  var fit = Math.floor((w - 6) / GLYPH);\n"
    "  if (fit < 3) return '';\n"
    "  return f.cps.length <= fit ? f.name : f.cps.slice(0, fit - 2).join('') + '..';\n"
    "}\n"
    "/* Shows f's part of [x0, x0 + w0) across the whole width. */\n"
    "function place(f, x0, w0) {\n"
    "  var s = (W - 2 * PAD) / w0, a = Math.max(f.x, x0), b = Math.min(f.x + f.w, x0 + w0);\n"
    "  var x = PAD + (a - x0) * s, w = (b - a) * s;\n"
    "  f.r.setAttribute('x', x.toFixed(2));\n"
    "  f.r.setAttribute('width', w.toFixed(2));\n"
    "  f.t.setAttribute('x', (x + 3).toFixed(2));\n"
    "  f.t.textContent = cut(f, w);\n"
    "}\n"
    "function unzoom() {\n"
    "  frames.forEach(function (o) {\n"
    "    o.g.classList.remove('hide', 'up');\n"
    "    place(o, 0, total);\n"
    "  });\n"
    "  byId('unzoom').classList.add('hide');\n"
    "}\n"
    "/* f and what it called fill the width; its callers stay, dimmed, below. */\n"
    "function zoom(f) {\n"
    "  if (f === frames[0]) return unzoom();\n"
    "  frames.forEach(function (o) {\n"
    "    var inside = o.y <= f.y && o.x >= f.x && o.x + o.w <= f.x + f.w;\n"
    "    var under = o.y > f.y && o.x <= f.x && o.x + o.w >= f.x + f.w;\n"
    "    o.g.classList.toggle('hide', !inside && !under);\n"
    "    o.g.classList.toggle('up', under);\n"
    "    if (inside || under) place(o, f.x, f.w);\n"
    "  });\n"
    "  byId('unzoom').classList.remove('hide');\n"
    "}\n"
    "function clearSearch() {\n"
    "  frames.forEach(function (o) { o.r.setAttribute('fill', o.fill); });\n"
    "  matching = null;\n"
    "  byId('matched').textContent = '';\n"
    "  byId('search').textContent = 'Search';\n"
    "}\n"
    "/* Highlights the frames term matches; the share is that of the union of their spans. */\n"
    "function search(term) {\n"
    "  var re, hits = [], sum = 0, end = -1;\n"
    "  try { re = new RegExp(term); }\n"
    "  catch (e) { re = new RegExp(term.replace(/[.*+?^${}()|[\\]\\\\]/g, '\\\\$&')); }\n"
    "  frames.forEach(function (o) {\n"
    "    var hit = re.test(o.info);\n"
    "    o.r.setAttribute('fill', hit ? MATCH : o.fill);\n"
    "    if (hit) hits.push(o);\n"
    "  });\n"
    "  hits.sort(function (a, b) { return a.x - b.x || b.w - a.w; });\n"
    "  hits.forEach(function (o) {\n"
    "    if (o.x + o.w > end) sum += o.x + o.w - Math.max(o.x, end);\n"
    "    end = Math.max(end, o.x + o.w);\n"
    "  });\n"
    "  matching = term;\n"
    "  byId('matched').textContent = 'Matched: ' + (100 * sum / total).toFixed(2) + '% (' +\n"
    "    hits.length + (hits.length === 1 ? ' frame)' : ' frames)');\n"
    "  byId('search').textContent = 'Reset search';\n"
    "}\n"
    "function ask() {\n"
    "  var term = window.prompt('Search frames (regular expression or text):', matching || '');\n"
    "  if (term === null) return;\n"
    "  if (term === '') clearSearch(); else search(term);\n"
    "}\n"
    "function init() {\n"
    "  var gs = document.querySelectorAll('g.f');\n"
    "  for (var i = 0; i < gs.length; i++) {\n"
    "    var g = gs[i], r = g.querySelector('rect'), t = g.querySelector('text');\n"
    "    var lines = g.querySelector('title').textContent.split('\\n');\n"
    "    var f = {g: g, r: r, t: t, x: +g.getAttribute('data-x'), w: +g.getAttribute('data-w'),\n"
    "             y: +r.getAttribute('y'), fill: r.getAttribute('fill'), name: lines[0],\n"
    "             cps: Array.from(lines[0]), info: lines.slice(0, Math.max(1, lines.length - "
    "1)).join(' '),\n"
    "             count: lines[lines.length - 1]};\n"
    "    frames.push(f);\n"
    "    g.addEventListener('click', zoom.bind(null, f));\n"
    "    g.addEventListener('mouseover', function () {\n"
    "      byId('details').textContent = this.name + ': ' + this.count;\n"
    "    }.bind(f));\n"
    "    g.addEventListener('mouseout', function () { byId('details').textContent = ' '; });\n"
    "  }\n"
    "  total = frames.length && frames[0].w ? frames[0].w : 1;\n"
    "  byId('unzoom').addEventListener('click', unzoom);\n"
    "  byId('search').addEventListener('click', function () {\n"
    "    if (matching === null) ask(); else clearSearch();\n"
    "  });\n"
    "  document.addEventListener('keydown', function (e) {\n"
    "    if (((e.ctrlKey || e.metaKey) && e.key === 'f') || e.key === '/') {\n"
    "      e.preventDefault();\n"
    "      ask();\n"
    "    } else if (e.key === 'Escape') {\n"
    "      unzoom();\n"
    "      clearSearch();\n"
    "    }\n"
    "  });\n"
    "  document.documentElement.setAttribute('data-ready', frames.length);\n"
    "}\n"
    "init();\n";

/* XML declaration, <svg>, style, title and subtitle, buttons. */
static void fg_head(struct fg *g, unsigned height)
{
    const struct export_opts *o = g->p->o;
    uint64_t all = g->n[0].total;

    fg_printf(g->b,
              "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
              "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
              "height=\"%u\" viewBox=\"0 0 %d %u\">\n",
              FG_W, height, FG_W, height);
    xb_puts(g->b, fg_style);
    fg_printf(g->b,
              "<rect width=\"100%%\" height=\"100%%\" fill=\"#fbf8f1\"/>\n"
              "<text id=\"title\" x=\"%d\" y=\"22\">Flame graph</text>\n",
              FG_W / 2);
    fg_printf(g->b, "<text id=\"sub\" x=\"%d\" y=\"40\">ranktop ", FG_W / 2);
    fg_text(g->b, o->version, 32);
    if (g->p->h->host[0]) {
        xb_puts(g->b, " \xC2\xB7 ");
        fg_text(g->b, g->p->h->host, SIZE_MAX);
    }
    fg_printf(g->b, " \xC2\xB7 %zu rank%s \xC2\xB7 ", g->p->nlane, g->p->nlane == 1 ? "" : "s");
    if (o->interval_ns)
        fg_printf(g->b, "%" PRIu64 " samples at %.4g Hz", all, 1e9 / (double)o->interval_ns);
    else
        fg_printf(g->b, "%" PRIu64 " \xC2\xB5s", all);
    xb_puts(g->b,
            " \xC2\xB7 click: zoom \xC2\xB7 Ctrl-F or /: search \xC2\xB7 Esc: reset</text>\n");
    fg_printf(g->b,
              "<text id=\"unzoom\" class=\"btn hide\" x=\"%d\" y=\"%d\">Reset zoom</text>\n"
              "<text id=\"search\" class=\"btn\" x=\"%d\" y=\"%d\" "
              "text-anchor=\"end\">Search</text>\n",
              FG_PAD, FG_HEAD - 8, FG_W - FG_PAD, FG_HEAD - 8);
}

static void fg_tail(struct fg *g, unsigned height)
{
    fg_printf(g->b,
              "<text id=\"details\" x=\"%d\" y=\"%u\"> </text>\n"
              "<text id=\"matched\" x=\"%d\" y=\"%u\" text-anchor=\"end\"></text>\n"
              "<script type=\"text/ecmascript\"><![CDATA[\n"
              "\"use strict\";\n"
              "var W = %d, PAD = %d, GLYPH = %.1f, MATCH = '%s';\n",
              FG_PAD, height - 8, FG_W - FG_PAD, height - 8, FG_W, FG_PAD, FG_GLYPH, FG_MATCH);
    xb_puts(g->b, fg_script);
    xb_puts(g->b, "]]></script>\n</svg>\n");
}

void export_flamegraph_stream(struct xbuf *b, const struct xplan *p)
{
    struct fg g = {.b = b, .p = p};
    unsigned height;

    xb_init(&g.lab, NULL);
    fg_build(&g);
    for (size_t i = 0; i < g.nn; i++)
        if (fg_drawn(&g, i) && g.n[i].depth > g.top)
            g.top = g.n[i].depth;
    height = FG_HEAD + (g.top + 1) * FG_ROW + FG_FOOT;
    fg_head(&g, height);
    xb_puts(b, "<g id=\"frames\">\n");
    for (size_t i = 0; i < g.nn; i++)
        if (fg_drawn(&g, i))
            fg_frame(&g, &g.n[i]);
    xb_puts(b, "</g>\n");
    fg_tail(&g, height);
    xb_fini(&g.lab);
    free(g.path);
    free(g.n);
}
