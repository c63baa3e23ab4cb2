/* The monitor's keys: one table that maps each key to its action and gives the key bar's
 * label and the help screen's line, so dispatch, key bar and help cannot disagree; and the
 * actions themselves (moving, views, search and filter prompts, tree/flat, tags, pause,
 * baseline, rate, export). Search and filter apply as they are typed, as in htop: the search
 * highlights the lower pane's matching lines and moves its cursor to one (the move is made
 * by the next draw, which builds the lines); the filter narrows the rank table. The table is
 * constant. UI thread only: actions change struct ui and may ask the engine for a short change
 * (rate, native frames, asyncio tasks, memory focus), never wait on it. They are the UI's only
 * engine calls besides taking views: a toggle reads the state it toggles from the engine, not
 * from the view on screen, which may predate the last key; the screen then asks for the
 * engine's next view (ui_refresh_soon) to show the change. */
#include "ui_priv.h"

#include <curses.h>
#include <stdio.h>
#include <string.h>

#include "ranktop/base/util.h"

#define KEY_ESC 27
#define HELP_KEYS_W 19 /* the help screen's key column */
#define HELP_TEXT_W 23 /* the left text column when a second key shares the line */

/* Moves a cursor: the lower pane's (lower), else the rank table's. The Merged tree's cursor
 * is then anchored on the node the user saw under it. */
static void nav_in(struct ui *u, bool lower, int delta)
{
    int n = lower ? ui_lower_rows(u) : (int)u->table.n;
    int *sel = lower ? &u->lsel : &u->sel;

    *sel += delta;
    if (*sel >= n)
        *sel = n - 1;
    if (*sel < 0)
        *sel = 0;
    if (lower)
        ui_tree_anchor(u);
}

/* Moves the cursor the arrows own: the tree's in the Rank view, and in the Merged view after
 * w; else the rank table's. */
static void nav(struct ui *u, int delta)
{
    nav_in(u, ui_tree_owns_arrows(u), delta);
}

/* A page of the pane the arrows move. */
static int page(const struct ui *u)
{
    int rows = ui_tree_owns_arrows(u) ? u->lay.lower.h - 1 : ui_table_rows(u);

    return rows > 1 ? rows - 1 : 1;
}

static void act_up(struct ui *u, int ch)
{
    nav(u, ch == KEY_PPAGE ? -page(u) : ch == KEY_HOME ? -1000000 : -1);
}

static void act_down(struct ui *u, int ch)
{
    nav(u, ch == KEY_NPAGE ? page(u) : ch == KEY_END ? 1000000 : 1);
}

/* Enter drills into the selected rank from the other views; in the Rank view it folds or
 * unfolds the thread under the cursor, or shows the locals of the frame under it; in the
 * Merged view, on the tree cursor's node (w) or a search match, that frame's locals on every
 * rank of its set, or, on a node that is no frame, folds or unfolds it. */
static void act_enter(struct ui *u, int ch)
{
    uint64_t node = ui_lower_node(u);
    const struct ui_line *l = u->lsel >= 0 && u->lsel < u->nlines ? &u->lines[u->lsel] : NULL;

    (void)ch;
    if (u->loc_on) {
        ui_locals_close(u);
    } else if (u->view == VIEW_RANK && l && l->frame) {
        ui_locals_rank(u, l);
    } else if (u->view == VIEW_MERGED && !u->flat && node && l && (l->hit || u->tree_focus)) {
        if (ui_locals_merged(u, node) == 0) /* a thread's node (t) folds, as in the Rank view */
            ui_toggle_collapsed(u, node);
    } else if (u->view != VIEW_RANK) {
        if (u->table.n) {
            u->drill_pid = u->table.rows[u->sel].pid;
            u->view = VIEW_RANK;
            u->lsel = u->lscroll = 0;
        }
    } else if (node) {
        ui_toggle_collapsed(u, node);
    }
}

/* Back clears a search or filter first, and only then leaves for the merged view. */
static void act_back(struct ui *u, int ch)
{
    (void)ch;
    if (u->loc_on) {
        ui_locals_close(u);
        return;
    }
    if (u->search[0] || u->filter[0]) {
        u->search[0] = u->filter[0] = '\0';
        u->search_miss = false;
        if (u->view != VIEW_RANK)
            u->lsel = u->lscroll = 0;
        ui_build_rows(u); /* at once, also while paused */
        return;
    }
    u->view = VIEW_MERGED;
    u->drill_pid = 0;
    u->lsel = u->lscroll = 0;
}

static void act_view(struct ui *u, int ch)
{
    u->view = ch == '\t' ? (enum ui_view)(u->view % UI_VIEWS + 1) : (enum ui_view)(ch - '0');
    u->lsel = u->lscroll = 0;
}

/* w: the Merged view's arrows move the tree cursor, or (again) the rank table's selection. */
static void act_focus(struct ui *u, int ch)
{
    (void)ch;
    if (u->view != VIEW_MERGED || u->flat) {
        ui_set_status(u, "w (arrows to the tree or the rank table) applies to the Merged tree");
        return;
    }
    u->tree_focus = !u->tree_focus;
    if (u->tree_focus) {
        ui_tree_anchor(u); /* where the cursor is now: a search match, or the first line */
        ui_set_status(u, "arrows move the tree: Enter on a frame shows its locals on every rank "
                         "(w: rank table)");
    } else {
        ui_set_status(u, "arrows move the rank table (w: tree)");
    }
}

static void act_prompt(struct ui *u, int ch)
{
    (void)ch;
    u->input = INPUT_FORMAT;
    u->edit[0] = '\0';
}

/* '/' opens a new search; F3 too when none is set, else it moves to the next match (Shift-F3
 * to the previous one). The search is what the prompt holds, so it starts empty. */
static void act_search(struct ui *u, int ch)
{
    if (ch != '/' && u->search[0]) {
        u->jump = ch == KEY_F(15) ? SEARCH_PREV : SEARCH_NEXT;
        return;
    }
    u->input = INPUT_SEARCH;
    u->edit[0] = u->search[0] = '\0';
    u->search_miss = false;
}

/* '\' or F4: the filter prompt, holding the filter set now so it can be edited. */
static void act_filter(struct ui *u, int ch)
{
    (void)ch;
    u->input = INPUT_FILTER;
    snprintf(u->edit, sizeof(u->edit), "%s", u->filter);
}

/* F5: tree or flat. Flat shows the top functions (of every rank in the Merged view, of the
 * rank in the Rank view); in the Top view, already flat, it goes to the merged tree. */
static void act_flat(struct ui *u, int ch)
{
    (void)ch;
    if (u->view == VIEW_TOP) {
        u->view = VIEW_MERGED;
        u->flat = false;
    } else if (u->view == VIEW_MERGED || u->view == VIEW_RANK) {
        u->flat = !u->flat;
    } else {
        ui_set_status(u, "F5 (tree / flat) applies to the Merged, Rank and Top views");
        return;
    }
    u->lsel = u->lscroll = 0;
    ui_set_status(u, u->flat ? "flat: top functions (F5: tree)" : "tree (F5: flat)");
}

static void act_sort(struct ui *u, int ch)
{
    (void)ch;
    u->sort = (enum view_sort)((u->sort + 1) % VIEW_SORT_COUNT);
    ui_build_rows(u); /* at once, also while paused */
    ui_set_status(u, "sort: %s",
                  u->sort == VIEW_SORT_RANK    ? "RANK (lowest first)"
                  : u->sort == VIEW_SORT_CPU   ? "CPU% (largest first)"
                  : u->sort == VIEW_SORT_RSS   ? "RSS (largest first)"
                  : u->sort == VIEW_SORT_SINCE ? "SINCE (longest unchanged first)"
                                               : "GIL% (busiest first)");
}

static void act_tag(struct ui *u, int ch)
{
    int pid;

    (void)ch;
    if (u->table.n) {
        pid = u->table.rows[u->sel].pid;
        for (int i = 0; i < u->ntags; i++)
            if (u->tags[i] == pid) {
                u->tags[i] = u->tags[--u->ntags];
                pid = 0;
                break;
            }
        if (pid && u->ntags < UI_MAX_TAGS)
            u->tags[u->ntags++] = pid;
        if (u->ntags)
            ui_set_status(u, "%d tagged: the merged tree and exports show only them (U: untag all)",
                          u->ntags);
        else
            ui_set_status(u, "no rank tagged: the merged tree and exports show every rank");
    }
    nav_in(u, false, 1); /* on to the next rank, whichever pane has the arrows */
}

static void act_untag(struct ui *u, int ch)
{
    (void)ch;
    u->ntags = 0;
    ui_set_status(u, "tags cleared: the merged tree and exports show every rank");
}

static void act_pause(struct ui *u, int ch)
{
    (void)ch;
    u->paused = !u->paused;
    ui_set_status(u, u->paused ? "display paused (sampling continues)" : "display resumed");
}

/* Native frames for the selected rank: the engine samples it at ENGINE_NATIVE_HZ while on,
 * every thread stopped briefly per sample; the UI only asks. */
static void act_native(struct ui *u, int ch)
{
    struct app_err err = {0};
    int pid = u->drill_pid ? u->drill_pid : u->table.n ? u->table.rows[u->sel].pid : 0;
    bool on;

    (void)ch;
    if (!pid) {
        ui_set_status(u, "no rank selected");
        return;
    }
    if (engine_toggle_native(u->e, pid, &on, &err) < 0) {
        ui_set_status(u, "%s", err.msg);
        return;
    }
    ui_refresh_soon(u);
    if (on)
        ui_set_status(u, "native frames for pid %d, %d samples/s (n: off)", history_key_pid(pid),
                      ENGINE_NATIVE_HZ);
    else
        ui_set_status(u, "native frames off for pid %d", history_key_pid(pid));
}

/* The memory baseline: every shown rank's RSS now, and a new mapping baseline of the
 * selected rank in the engine's memory thread (it reads smaps; the UI only asks). */
static void act_baseline(struct ui *u, int ch)
{
    (void)ch;
    view_baseline_set(&u->base, &u->table, clock_mono_ns());
    if (u->table.n && u->sel < (int)u->table.n)
        engine_mem_focus(u->e, u->table.rows[u->sel].pid, true);
    ui_refresh_soon(u);
    ui_set_status(u, "memory baseline set");
}

static void act_threads(struct ui *u, int ch)
{
    (void)ch;
    u->all_threads = !u->all_threads;
    ui_set_status(u, u->all_threads ? "all threads" : "main thread only");
}

/* asyncio tasks in the Rank view: the engine reads them (at most ENGINE_ASYNC_HZ a second,
 * every rank) only while they are shown, so the first press turns its reads on. */
static void act_tasks(struct ui *u, int ch)
{
    (void)ch;
    u->tasks = !u->tasks;
    engine_set_async(u->e, u->tasks);
    ui_refresh_soon(u);
    ui_set_status(u, u->tasks ? "asyncio tasks shown under their threads (a: off)"
                              : "asyncio tasks hidden");
}

/* On-CPU samples only: what is sampled from now on changes; the history already taken stays
 * as it is. */
static void act_oncpu(struct ui *u, int ch)
{
    (void)ch;
    u->oncpu = !u->oncpu;
    engine_set_oncpu(u->e, u->oncpu);
    ui_refresh_soon(u);
    ui_set_status(u, u->oncpu ? "on-CPU samples only: idle threads leave gaps (o: off)"
                              : "idle samples kept again");
}

static void act_rate(struct ui *u, int ch)
{
    double hz = engine_scale_rate(u->e, ch == '-' ? 0.5 : 2.0);

    ui_refresh_soon(u);
    ui_set_status(u, "sampling rate %.4g Hz", hz);
}

static void act_export(struct ui *u, int ch)
{
    (void)ch;
    ui_start_export(u, EXPORT_CHROME);
}

static void act_core(struct ui *u, int ch)
{
    (void)ch;
    ui_start_core(u);
}

static void act_quit(struct ui *u, int ch)
{
    (void)ch;
    u->quit = true;
}

static void act_help(struct ui *u, int ch)
{
    (void)ch;
    u->help = true;
}

static void act_mouse(struct ui *u, int ch)
{
    MEVENT ev;

    (void)ch;
    if (getmouse(&ev) != OK)
        return;
    if (ev.bstate & BUTTON4_PRESSED)
        nav(u, -3);
    else if (ev.bstate & BUTTON5_PRESSED)
        nav(u, 3);
    else if (ev.y >= u->table_y && ev.y < u->table_y + u->table_h && u->table.n) {
        int row = u->scroll + ev.y - u->table_y;

        if (row >= 0 && row < (int)u->table.n)
            u->sel = row;
    }
}

/* In help order. Entries without help text share the line of one before them (Down is told
 * with Up); help_right puts the line to the right of the previous one. */
static const struct ui_key keys[] = {
    {{KEY_UP, 'k', KEY_PPAGE, KEY_HOME},
     act_up,
     NULL,
     NULL,
     0,
     "Arrows, j/k, PgUp/PgDn, Home/End",
     "move in the rank table (the tree in the Rank view, and after w)",
     false},
    {{KEY_DOWN, 'j', KEY_NPAGE, KEY_END}, act_down, NULL, NULL, 0, NULL, NULL, false},
    {{'\n', KEY_ENTER, KEY_RIGHT},
     act_enter,
     NULL,
     NULL,
     0,
     "Enter / Right",
     "drill into the selected rank; on a frame: its locals",
     false},
    {{'w'},
     act_focus,
     NULL,
     NULL,
     0,
     "w",
     "Merged view: arrows to the tree (Enter: a frame's locals, all ranks) / ranks",
     false},
    {{KEY_ESC, KEY_BACKSPACE, 127, KEY_LEFT},
     act_back,
     NULL,
     NULL,
     0,
     "Esc / Backspace",
     "back to the merged view, clear search and filter",
     false},
    {{'1', '2', '3', '4', '5', '\t'},
     act_view,
     NULL,
     NULL,
     0,
     "1-6 / Tab",
     "views: Merged, Rank, Top, GIL, Memory, Hosts",
     false},
    {{'6'}, act_view, NULL, NULL, 0, NULL, NULL, false},
    {{KEY_F(3), '/', KEY_F(15)},
     act_search,
     "F3",
     "Search",
     2,
     "F3 or /",
     "search as you type (Esc cancels); F3/Shift-F3: next/previous",
     false},
    {{KEY_F(4), '\\'},
     act_filter,
     "F4",
     "Filter",
     3,
     "F4 or \\",
     "filter ranks as you type (rank, pid, frame); Esc clears",
     false},
    {{KEY_F(5)},
     act_flat,
     "F5",
     "Tree",
     4,
     "F5",
     "tree / flat (top functions) in the Merged and Rank views",
     false},
    {{'s', KEY_F(6)},
     act_sort,
     "F6",
     "Sort",
     5,
     "s / F6",
     "sort: rank, CPU, RSS, stuck time, GIL (shown in the header)",
     false},
    {{' '},
     act_tag,
     "Spc",
     "Tag",
     6,
     "Space",
     "tag a rank (*): merged tree and exports show only tagged ones",
     false},
    {{'U'}, act_untag, NULL, NULL, 0, "U", "untag all ranks", false},
    {{'p', 'Z'},
     act_pause,
     "Z",
     "Pause",
     7,
     "p / Z",
     "pause the display (sampling continues)",
     true},
    {{'m'},
     act_baseline,
     "m",
     "Base",
     8,
     "m",
     "memory baseline (and mapping growth of the selected rank)",
     false},
    {{'t'}, act_threads, "t", "Threads", 9, "t", "main thread / all threads", false},
    {{'c'}, act_core, NULL, NULL, 0, "c", "dump --core of a dead rank's core", true},
    {{'n'},
     act_native,
     NULL,
     NULL,
     0,
     "n",
     "native (C/C++) frames of the selected rank on/off (2 samples/s)",
     false},
    {{'a'},
     act_tasks,
     NULL,
     NULL,
     0,
     "a",
     "asyncio tasks under their threads in the Rank view on/off",
     false},
    {{'o'},
     act_oncpu,
     NULL,
     NULL,
     0,
     "o",
     "on-CPU samples only (idle threads leave gaps) on/off",
     false},
    {{'+', '=', '-'},
     act_rate,
     "+-",
     "Rate",
     10,
     "+ / -",
     "double / halve the sampling rate",
     false},
    {{'e'},
     act_export,
     "e",
     "Export",
     11,
     "e",
     "export the history window as a Chrome trace to --export-dir",
     false},
    {{'E'},
     act_prompt,
     NULL,
     NULL,
     0,
     "E",
     "export in a format the prompt asks for (5 formats: c s f g p)",
     false},
    {{'q', KEY_F(10)}, act_quit, "F10", "Quit", UI_BAR_RIGHT, "q / F10", "quit", false},
    {{'?', KEY_F(1), 'h'}, act_help, "F1", "Help", 1, "? / F1", "this help", true},
    {{KEY_MOUSE}, act_mouse, NULL, NULL, 0, NULL, NULL, false},
};

/* Key sequences that terminals send whatever TERM claims: xterm's and the VT220's (which
 * tmux and screen send for their panes), rxvt's Home/End, the cursor keys in both modes and
 * xterm's Shift-F3. Terminfo decodes the keys of TERM (keypad); these are added only where
 * TERM's own entry binds the sequence to nothing, so a terminal's own meaning always wins
 * (vt100's F5-F10 are ESC O t..x, its application keypad's digits) and no added sequence
 * is the prefix of one TERM has. */
static const struct {
    const char *seq;
    int code;
} extra_seqs[] = {
    {"\033[1~", KEY_HOME},   {"\033[7~", KEY_HOME},    {"\033[H", KEY_HOME},
    {"\033OH", KEY_HOME},    {"\033[4~", KEY_END},     {"\033[8~", KEY_END},
    {"\033[F", KEY_END},     {"\033OF", KEY_END},      {"\033[5~", KEY_PPAGE},
    {"\033[6~", KEY_NPAGE},  {"\033[A", KEY_UP},       {"\033[B", KEY_DOWN},
    {"\033[C", KEY_RIGHT},   {"\033[D", KEY_LEFT},     {"\033OA", KEY_UP},
    {"\033OB", KEY_DOWN},    {"\033OC", KEY_RIGHT},    {"\033OD", KEY_LEFT},
    {"\033OP", KEY_F(1)},    {"\033OQ", KEY_F(2)},     {"\033OR", KEY_F(3)},
    {"\033OS", KEY_F(4)},    {"\033[11~", KEY_F(1)},   {"\033[12~", KEY_F(2)},
    {"\033[13~", KEY_F(3)},  {"\033[14~", KEY_F(4)},   {"\033[15~", KEY_F(5)},
    {"\033[17~", KEY_F(6)},  {"\033[18~", KEY_F(7)},   {"\033[19~", KEY_F(8)},
    {"\033[20~", KEY_F(9)},  {"\033[21~", KEY_F(10)},  {"\033[23~", KEY_F(11)},
    {"\033[24~", KEY_F(12)}, {"\033[1;2R", KEY_F(15)}, {"\033OM", KEY_ENTER},
};

void ui_keys_define(void)
{
    for (size_t i = 0; i < sizeof(extra_seqs) / sizeof(*extra_seqs); i++)
        if (key_defined(extra_seqs[i].seq) == 0)
            define_key(extra_seqs[i].seq, extra_seqs[i].code);
}

const struct ui_key *ui_keys(size_t *n)
{
    *n = sizeof(keys) / sizeof(*keys);
    return keys;
}

/* The entry for key code ch; NULL when no entry has it. 0 ends a code list, so it never
 * matches (ncurses reports Ctrl-Space as 0: it stays unbound). */
static const struct ui_key *key_find(int ch)
{
    for (size_t i = 0; ch && i < sizeof(keys) / sizeof(*keys); i++)
        for (size_t k = 0; k < UI_KEY_CODES && keys[i].codes[k]; k++)
            if (keys[i].codes[k] == ch)
                return &keys[i];
    return NULL;
}

int ui_keys_help(char (*lines)[UI_HELP_W], int max)
{
    int n = 0;

    for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++) {
        const struct ui_key *k = &keys[i];
        size_t at;

        if (!k->help_keys)
            continue;
        if (k->help_right && n > 0) { /* pad the left text and append */
            at = strlen(lines[n - 1]);
            snprintf(lines[n - 1] + at, UI_HELP_W - at, "%*s%s  %s",
                     at < HELP_KEYS_W + HELP_TEXT_W ? (int)(HELP_KEYS_W + HELP_TEXT_W - at) : 1, "",
                     k->help_keys, k->help_text);
            continue;
        }
        if (n >= max)
            break;
        if (strlen(k->help_keys) < HELP_KEYS_W)
            snprintf(lines[n++], UI_HELP_W, "%-*s%s", HELP_KEYS_W, k->help_keys, k->help_text);
        else
            snprintf(lines[n++], UI_HELP_W, "%s   %s", k->help_keys, k->help_text);
    }
    return n;
}

/* The search or filter takes the prompt's text as it is typed. */
static void input_apply(struct ui *u)
{
    if (u->input == INPUT_SEARCH) {
        snprintf(u->search, sizeof(u->search), "%s", u->edit);
        u->jump = SEARCH_HERE;
        u->search_miss = false;
        if (!u->search[0] && u->view != VIEW_RANK) /* only a search moves these views' cursor */
            u->lsel = u->lscroll = 0;
    } else {
        snprintf(u->filter, sizeof(u->filter), "%s", u->edit);
        u->sel = u->scroll = 0;
        ui_build_rows(u);
    }
}

/* Line editing for the search and filter prompts. Enter keeps what is typed; Esc cancels:
 * the search or filter is cleared (htop's F3 and F4). In the search prompt F3 and Shift-F3
 * move between matches. */
static void edit_line(struct ui *u, int ch)
{
    size_t n = strlen(u->edit);

    if (ch == KEY_ESC) {
        u->edit[0] = '\0';
        input_apply(u);
        u->input = INPUT_NONE;
        return;
    }
    if (ch == '\n' || ch == KEY_ENTER) {
        u->input = INPUT_NONE;
        return;
    }
    if (u->input == INPUT_SEARCH && (ch == KEY_F(3) || ch == KEY_F(15))) {
        u->jump = ch == KEY_F(15) ? SEARCH_PREV : SEARCH_NEXT;
        return;
    }
    if ((ch == KEY_BACKSPACE || ch == 127 || ch == 8) && n)
        u->edit[n - 1] = '\0';
    else if (ch >= 32 && ch < 256 && n + 1 < sizeof(u->edit)) {
        u->edit[n] = (char)ch;
        u->edit[n + 1] = '\0';
    } else
        return;
    input_apply(u);
}

/* The answer to Ctrl-C's question about the job started with `-- CMD`: y stops it and quits,
 * n quits and leaves it running, Esc keeps watching; other keys wait for an answer. */
static void key_stop_job(struct ui *u, int ch)
{
    if (ch == 'y' || ch == 'Y' || ch == 'n' || ch == 'N') {
        u->o->job->stop = ch == 'y' || ch == 'Y';
        u->quit = true;
    }
    if (ch == KEY_ESC || u->quit)
        u->input = INPUT_NONE;
}

/* The E prompt's format key, or the line editing of search and filter. */
static void key_input(struct ui *u, int ch)
{
    if (u->input == INPUT_STOP_JOB) {
        key_stop_job(u, ch);
        return;
    }
    if (u->input == INPUT_FORMAT) {
        int f = ch == 'c'   ? EXPORT_CHROME
                : ch == 's' ? EXPORT_SPEEDSCOPE
                : ch == 'f' ? EXPORT_COLLAPSED
                : ch == 'g' ? EXPORT_FLAMEGRAPH
                : ch == 'p' ? EXPORT_PERFETTO
                            : -1;
        u->input = INPUT_NONE;
        if (f >= 0)
            ui_start_export(u, (enum export_format)f);
        else
            ui_set_status(u, "export cancelled");
        return;
    }
    edit_line(u, ch);
}

void ui_key(struct ui *u, int ch)
{
    const struct ui_key *k;

    if (u->input != INPUT_NONE) {
        key_input(u, ch);
        return;
    }
    k = key_find(ch);
    /* The help screen is modal, as htop's: its own key, Back (Esc) or Quit (q, F10) close
     * it, without quitting; other keys are ignored. */
    if (u->help && ch != KEY_RESIZE) {
        if (k && (k->run == act_help || k->run == act_back || k->run == act_quit))
            u->help = false;
        return;
    }
    if (k)
        k->run(u, ch);
}
