/* State shared by the UI's files: ui.c (loop, terminal, export thread), keys.c (the key
 * table and its actions), ui_panes.c (drawing). All of the UI's state lives in struct ui; UI
 * thread only, except `export_*`, which the export thread writes under export_lock. */
#ifndef RANKTOP_UI_PRIV_H
#define RANKTOP_UI_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "ranktop/engine/engine.h"
#include "ranktop/export/export.h"
#include "ranktop/model/history.h"
#include "ranktop/ui/ui.h"
#include "ranktop/views/view.h"

#include "layout.h"
#include "theme.h"

enum ui_view { VIEW_MERGED = 1, VIEW_RANK, VIEW_TOP, VIEW_GIL, VIEW_MEMORY, VIEW_HOSTS };
#define UI_VIEWS 6
enum ui_input { INPUT_NONE, INPUT_SEARCH, INPUT_FILTER, INPUT_FORMAT, INPUT_STOP_JOB };
/* A search move, made by the next draw once the lower pane's lines (and their hits) exist:
 * to the cursor's line or the next match (as typed), the next match, the previous one. */
enum ui_jump { SEARCH_STAY, SEARCH_HERE, SEARCH_NEXT, SEARCH_PREV };

#define UI_MAX_TAGS 256
#define UI_MAX_LINES 4096 /* lines of the lower pane kept by one draw */
#define UI_TREE_PATH 64   /* ids the Merged view's tree cursor keeps: its node, then ancestors */

/* One line of the lower pane: built by a draw, then drawn with scrolling; node is the tree
 * node (merged view) or thread (rank view) it belongs to, 0 for none. */
struct ui_line {
    char text[512];
    enum theme_role role;
    uint64_t node;
    bool hit; /* matches the search: highlighted, and a stop for F3 */
    /* A Rank view frame line: frame fk (outermost first) of stack fstack, of thread fident of
     * the rank with pid fpid (in worker process fworker, 0: the rank's own). */
    bool frame;
    int fpid, fworker;
    uint64_t fident;
    uint32_t fstack, fk;
    int tdepth; /* a Merged tree line: its node's depth (ui_tree.c walks up to its ancestors) */
};

struct ui {
    const struct ui_opts *o;
    struct engine *e;
    bool utf8, paused, help, all_threads, quit;
    bool tasks;       /* a: the Rank view shows asyncio tasks under their threads */
    bool oncpu;       /* o: only samples of running threads are taken (engine_set_oncpu) */
    bool flat;        /* F5: the Merged and Rank views show top functions, not the tree */
    int jump;         /* search move the next draw makes: SEARCH_* */
    bool search_miss; /* no line matches the search; a move waits for one */
    enum ui_view view;
    enum ui_input input;
    enum view_sort sort;
    char search[64], filter[64], edit[64];
    int sel, scroll, lsel, lscroll;
    /* The Merged view's tree cursor (ui_tree.c): w gives it the arrows; it is kept as the ids
     * of its node and of that node's ancestors, innermost first, not as a row. */
    bool tree_focus;
    uint64_t tpath[UI_TREE_PATH];
    int ntpath;
    int table_y, table_h; /* where the last draw put the rank rows (mouse clicks) */
    int drill_pid;        /* rank shown in the Rank view (0: the selected row) */
    int tags[UI_MAX_TAGS];
    int ntags;
    char status[256];
    uint64_t status_until;
    /* data: the engine view of the last refresh (held until the next one; kept while paused)
     * and what is built from it. NULL only before the first refresh. */
    const struct engine_view *v;
    uint64_t next_refresh;   /* when the loop takes the next view */
    struct view_rate rate;   /* pass counts per refresh: the header's achieved rate */
    struct view_table table; /* the rank table: filtered, sorted */
    struct view_hang hang;
    struct view_baseline base; /* RSS per rank when `m` was pressed */
    /* what the last draw laid out: the screen's rectangles and the lower pane's lines */
    struct layout lay;
    struct ui_line *lines;
    int nlines;
    /* collapsed nodes of the merged tree and the rank view */
    uint64_t *collapsed;
    size_t ncollapsed;
    /* export in the background */
    pthread_mutex_t export_lock;
    pthread_t export_thread;
    bool export_running, export_joinable;
    char export_msg[512];
    bool export_msg_new;
    /* the locals pane (ui_locals.c): shown instead of the view's lines while loc_on */
    bool loc_on;
    struct ui_line *loc;
    int nloc;
};

/* ui.c */
void ui_set_status(struct ui *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Starts an export of the history window to --export-dir on its own thread. */
void ui_start_export(struct ui *u, enum export_format fmt);

/* c: writes `dump --core` of the selected dead rank's core to --export-dir, on the export
 * thread (ui_opts.core_text); a status line says where, or why not. */
void ui_start_core(struct ui *u);
/* Frees what struct ui owns (its engine view, models, lines) after joining the export thread. */
void ui_fini(struct ui *u);
/* After a command to the engine (rate, native frames, tasks, memory baseline): the next view
 * is taken as soon as the engine publishes one, so the screen shows the change. */
void ui_refresh_soon(struct ui *u);

/* keys.c: the one key table behind dispatch, key bar and help. */
#define UI_KEY_CODES 6    /* key codes per entry; 0 ends a shorter list */
#define UI_BAR_RIGHT (-1) /* bar_pos of the key pinned at the bar's right end */
#define UI_HELP_W 128     /* bytes of a help line */

struct ui_key {
    int codes[UI_KEY_CODES];
    void (*run)(struct ui *u, int ch); /* the action; ch is the code that was pressed */
    const char *bar_key, *bar_text;    /* key bar label ("F1", "Help"); NULL: not shown */
    int bar_pos;                       /* 1.. left to right, UI_BAR_RIGHT, 0 not shown */
    const char *help_keys, *help_text; /* help line; NULL: told with an entry before it */
    bool help_right;                   /* on the previous help line, in its right column */
};

/* After keypad(): binds the sequences terminals commonly send (xterm, VT220, rxvt) that
 * TERM's terminfo entry leaves unbound, so Home, End and the F-keys work whatever TERM says. */
void ui_keys_define(void);
/* The table, in help order. */
const struct ui_key *ui_keys(size_t *n);
/* The help screen's key lines into lines[0..max); returns how many. */
int ui_keys_help(char (*lines)[UI_HELP_W], int max);
/* Answers one key code: prompt editing, the modal help, or the table's action. */
void ui_key(struct ui *u, int ch);

/* ui_panes.c */
/* A frame's file as the panes show it: package-relative (path_short) unless --full-filenames. */
const char *ui_file(const struct ui *u, const char *file);
void ui_draw(struct ui *u);
/* Rebuilds u->table from the current copies (filter, sort, baseline). */
void ui_build_rows(struct ui *u);
/* Rows of the lower pane (for scrolling bounds), computed by the last draw. */
int ui_lower_rows(const struct ui *u);
int ui_table_rows(const struct ui *u);
bool ui_is_collapsed(const struct ui *u, uint64_t id);
void ui_toggle_collapsed(struct ui *u, uint64_t id);
/* The node id under the lower-pane cursor in tree views, 0 if none. */
uint64_t ui_lower_node(const struct ui *u);

/* ui_tree.c: the Merged view's tree cursor. */
/* Whether the arrows move the lower pane's cursor (the Rank view's, or the Merged view's tree
 * cursor after w) rather than the rank table's selection. */
bool ui_tree_owns_arrows(const struct ui *u);
/* Records the node under the lower-pane cursor, with its ancestors, as the tree cursor: after a
 * key moved it over the lines the user saw, or a search moved it. */
void ui_tree_anchor(struct ui *u);
/* After the Merged tree's lines are rebuilt: puts the cursor on the anchored node's line, or
 * on its deepest ancestor still shown (gone for now, or folded away). */
void ui_tree_restore(struct ui *u);

/* ui_locals.c: the locals pane. Reads the locals of the Rank view's frame line l now, or of
 * the Merged view's tree node for every rank in its set (1; 0: the node is no frame, a thread
 * or <exited>; -1: it is gone); close hides the pane. */
void ui_locals_rank(struct ui *u, const struct ui_line *l);
int ui_locals_merged(struct ui *u, uint64_t node);
void ui_locals_close(struct ui *u);

#endif
