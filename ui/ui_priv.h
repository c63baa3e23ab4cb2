/* State shared by the UI's files: ui.c (loop, keys, terminal), ui_panes.c (drawing). UI
 * thread only, except `export_*`, which the export thread writes under export_lock. */
#ifndef RANKTOP_UI_PRIV_H
#define RANKTOP_UI_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "ranktop/engine.h"
#include "ranktop/export.h"
#include "ranktop/history.h"
#include "ranktop/ui.h"
#include "ranktop/view.h"

enum ui_view { VIEW_MERGED = 1, VIEW_RANK, VIEW_TOP, VIEW_GIL, VIEW_MEMORY };
enum ui_input { INPUT_NONE, INPUT_SEARCH, INPUT_FILTER, INPUT_FORMAT };
enum ui_sort { SORT_RANK, SORT_CPU, SORT_RSS, SORT_SINCE, SORT_GIL, SORT_COUNT };

#define UI_MAX_TAGS 256

struct ui_row { /* one rank in the table, after filter and sort */
    int pid, rank;
    size_t hrank; /* index into hist.ranks */
    double cpu, rss_mib, drss_mib, gil;
    int64_t dev_mem;
    double since_s;
    const char *top;
    bool exited;
};

struct ui {
    const struct ui_opts *o;
    struct engine *e;
    bool utf8, paused, help, all_threads, quit;
    enum ui_view view;
    enum ui_input input;
    enum ui_sort sort;
    char search[64], filter[64], edit[64];
    int sel, scroll, lsel, lscroll;
    int table_y, table_h; /* where the last draw put the rank rows (mouse clicks) */
    int drill_pid;        /* rank shown in the Rank view (0: the selected row) */
    int tags[UI_MAX_TAGS];
    int ntags;
    char status[256];
    uint64_t status_until;
    /* data, refreshed each tick unless paused */
    struct history hist;
    bool have_hist;
    struct smi_device *devs;
    size_t ndevs;
    struct engine_rank_live *live;
    size_t nlive;
    struct engine_stats stats;
    struct ui_row *rows;
    size_t nrows;
    struct view_hang hang;
    /* memory baseline: RSS per pid when `m` was pressed */
    int *base_pid;
    double *base_rss;
    size_t nbase;
    uint64_t base_t;
    /* collapsed nodes of the merged tree and the rank view */
    uint64_t *collapsed;
    size_t ncollapsed;
    /* export in the background */
    pthread_mutex_t export_lock;
    pthread_t export_thread;
    bool export_running, export_joinable;
    char export_msg[512];
    bool export_msg_new;
};

/* ui_panes.c */
void ui_draw(struct ui *u);
void ui_build_rows(struct ui *u);
void ui_set_status(struct ui *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Rows of the lower pane (for scrolling bounds), computed by the last draw. */
int ui_lower_rows(const struct ui *u);
int ui_table_rows(const struct ui *u);
bool ui_is_collapsed(const struct ui *u, uint64_t id);
void ui_toggle_collapsed(struct ui *u, uint64_t id);
/* The node id under the lower-pane cursor in tree views, 0 if none. */
uint64_t ui_lower_node(const struct ui *u);

#endif
