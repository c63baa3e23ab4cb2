/* The monitor's main loop: terminal set-up and restore, data refresh, export thread.
 *
 * Runs on the main thread, the only one that touches curses. It waits in poll() on the
 * terminal with a short timeout, answers every key at once (keys.c), copies the engine's
 * history, live figures and mapping growth (each one short lock inside the engine) and
 * redraws. Exports run on their own
 * thread over a private copy, so a slow disk never freezes the screen. SIGINT/SIGTERM set a
 * flag; a crash restores the terminal (the fatal hook, run by the crash report of
 * src/base/crash.c) before the report and the default action. */
#include "ranktop/ui.h"
#include "ui_priv.h"

#include "ranktop/util.h"
#include "termopen.h"
#include "theme.h"

#include <curses.h>
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define UI_TICK_MS 100
#define UI_REFRESH_NS 500000000ull

/* Set by signal handlers, so they must be file statics of async-signal-safe type. */
static volatile sig_atomic_t g_quit;
static volatile sig_atomic_t g_curses;

void ui_restore(void)
{
    if (g_curses) {
        g_curses = 0;
        endwin();
    }
}

static void on_quit(int sig)
{
    (void)sig;
    g_quit = 1;
}

static void install_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_quit;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static int term_init(struct ui *u, struct app_err *err)
{
    const char *cs;
    char note[512];

    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        return app_err_set(err, APP_E_USAGE,
                           "the monitor needs a terminal (use `ranktop "
                           "record` or `ranktop dump` in scripts)");
    setlocale(LC_ALL, "");
    cs = nl_langinfo(CODESET);
    u->utf8 = cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));
    if (termopen_start(note, sizeof(note)) < 0)
        return app_err_set(err, APP_E_IO, "cannot initialise the terminal: %s", note);
    g_curses = 1;
    app_set_fatal_hook(ui_restore);
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    ui_keys_define();
    nodelay(stdscr, TRUE);
    curs_set(0);
    set_escdelay(25);
    mousemask(BUTTON1_CLICKED | BUTTON1_PRESSED | BUTTON4_PRESSED | BUTTON5_PRESSED, NULL);
    theme_init();
    /* The built-in entry is said once, longer than other notices: the keys and colours it
     * assumes may not be this terminal's. */
    if (note[0]) {
        ui_set_status(u, "%s", note);
        u->status_until = clock_mono_ns() + 30000000000ull;
    }
    return 0;
}

void ui_set_status(struct ui *u, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(u->status, sizeof(u->status), fmt, ap);
    va_end(ap);
    u->status_until = clock_mono_ns() + 6000000000ull;
}

/* Copies what the engine has (each copy one short lock inside the engine) and rebuilds the
 * models that depend only on the copies; the history copy replaces the previous one. */
static void refresh_data(struct ui *u)
{
    if (u->have_hist)
        history_fini(&u->hist);
    engine_clone_history(u->e, &u->hist);
    u->have_hist = true;
    free(u->devs);
    free(u->live);
    engine_snapshot_live(u->e, &u->devs, &u->ndevs, &u->live, &u->nlive);
    engine_get_stats(u->e, &u->stats);
    view_rate_add(&u->rate, clock_mono_ns(), u->stats.samples);
    free(u->hosts);
    engine_hosts(u->e, &u->hosts, &u->nhosts);
    u->ngrowth = engine_mem_growth(u->e, &u->growth_pid, u->growth, UI_MAX_GROWTH);
    view_hang_fini(&u->hang);
    view_hang(&u->hist, clock_mono_ns(), (uint64_t)(u->o->hang_after_s * 1e9), NULL, &u->hang);
    ui_build_rows(u);
}

struct export_job {
    struct ui *u;
    struct history h;
    struct export_opts xo;
    char path[4096];
};

static void *export_main(void *arg)
{
    struct export_job *j = arg;
    struct app_err err = {0};
    int rc = export_write(&j->h, &j->xo, j->path, &err);

    pthread_mutex_lock(&j->u->export_lock);
    if (rc == 0)
        snprintf(j->u->export_msg, sizeof(j->u->export_msg), "exported %.480s", j->path);
    else
        snprintf(j->u->export_msg, sizeof(j->u->export_msg), "export failed: %.480s", err.msg);
    j->u->export_msg_new = true;
    j->u->export_running = false;
    pthread_mutex_unlock(&j->u->export_lock);
    history_fini(&j->h);
    free(j);
    return NULL;
}

void ui_start_export(struct ui *u, enum export_format fmt)
{
    struct export_job *j;
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;

    pthread_mutex_lock(&u->export_lock);
    if (u->export_running) {
        pthread_mutex_unlock(&u->export_lock);
        ui_set_status(u, "an export is already running");
        return;
    }
    u->export_running = true;
    pthread_mutex_unlock(&u->export_lock);
    if (u->export_joinable)
        pthread_join(u->export_thread, NULL);
    j = x_calloc(1, sizeof(*j));
    j->u = u;
    engine_clone_history(u->e, &j->h);
    j->xo = (struct export_opts){.format = fmt,
                                 .all_threads = true,
                                 .interval_ns = u->stats.achieved_hz > 0
                                                    ? (uint64_t)(1e9 / u->stats.achieved_hz)
                                                    : 100000000u,
                                 .version = RANKTOP_VERSION};
    localtime_r(&now, &tm);
    strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
    snprintf(j->path, sizeof(j->path), "%s/ranktop-%s%s", u->o->export_dir, stamp,
             export_format_ext(fmt));
    /* Tagged ranks, when there are any, are what the user wants to look at. */
    if (u->ntags) {
        history_keep_ranks(&j->h, u->tags, (size_t)u->ntags);
        ui_set_status(u, "exporting %d tagged ranks to %s ...", u->ntags, j->path);
    } else {
        ui_set_status(u, "exporting to %s ...", j->path);
    }
    u->export_joinable = pthread_create(&u->export_thread, NULL, export_main, j) == 0;
    if (!u->export_joinable) {
        history_fini(&j->h);
        free(j);
        u->export_running = false;
        ui_set_status(u, "export failed: cannot start a thread");
    }
}

static void poll_export(struct ui *u)
{
    pthread_mutex_lock(&u->export_lock);
    if (u->export_msg_new) {
        u->export_msg_new = false;
        ui_set_status(u, "%s", u->export_msg);
    }
    pthread_mutex_unlock(&u->export_lock);
}

void ui_fini(struct ui *u)
{
    if (u->export_joinable)
        pthread_join(u->export_thread, NULL);
    pthread_mutex_destroy(&u->export_lock);
    if (u->have_hist)
        history_fini(&u->hist);
    view_hang_fini(&u->hang);
    free(u->devs);
    free(u->live);
    free(u->hosts);
    view_table_fini(&u->table);
    view_baseline_fini(&u->base);
    free(u->lines);
    free(u->collapsed);
}

int ui_run(const struct ui_opts *o, struct app_err *err)
{
    struct ui u = {.o = o, .e = o->engine, .view = VIEW_MERGED, .all_threads = o->all_threads};
    uint64_t next_refresh = 0;
    int rc;

    pthread_mutex_init(&u.export_lock, NULL);
    rc = term_init(&u, err);
    if (rc < 0) {
        pthread_mutex_destroy(&u.export_lock);
        return rc;
    }
    install_signals();
    while (!u.quit && !g_quit) {
        struct pollfd pf = {STDIN_FILENO, POLLIN, 0};
        int ch;

        if (clock_mono_ns() >= next_refresh && !u.paused) {
            refresh_data(&u);
            next_refresh = clock_mono_ns() + UI_REFRESH_NS;
        }
        poll_export(&u);
        ui_draw(&u);
        poll(&pf, 1, UI_TICK_MS);
        /* ncurses may hold bytes poll() cannot see: drain getch until ERR. */
        while ((ch = getch()) != ERR && !u.quit)
            ui_key(&u, ch);
    }
    ui_restore();
    ui_fini(&u);
    return 0;
}
