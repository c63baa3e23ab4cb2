/* The monitor's main loop: terminal set-up and restore, data refresh, export thread.
 *
 * Runs on the main thread, the only one that touches curses. It waits in poll() on the
 * terminal with a short timeout, answers every key at once (keys.c), takes the engine's
 * published view every UI_REFRESH_NS (engine_acquire: a reference, held until the next one,
 * so drawing reads it without a lock) and redraws. Exports run on their own thread over a
 * view of their own, so a slow disk never freezes the screen. SIGINT/SIGTERM set a
 * flag; a crash restores the terminal (the fatal hook, run by the crash report of
 * src/base/crash.c) before the report and the default action. */
#include "ranktop/ui/ui.h"
#include "ui_priv.h"

#include "ranktop/base/util.h"
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

/* The signal that asked to quit: SIGINT asks first when the monitor started the job. */
static void on_quit(int sig)
{
    g_quit = sig;
}

/* Whether the loop goes on after a quit signal or the job's end: a first Ctrl-C with a job
 * asks whether to stop it too (the prompt's answer quits); a second one, SIGTERM or SIGHUP
 * quit at once and leave it running. */
static bool keep_running(struct ui *u)
{
    struct ui_job *job = u->o->job;

    if (job && job->ended(job->arg))
        return false;
    if (g_quit == SIGINT && job && u->input != INPUT_STOP_JOB) {
        g_quit = 0;
        u->input = INPUT_STOP_JOB;
        u->help = false;
    }
    return !u->quit && !g_quit;
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

/* The built-in terminfo entry's note from ui_open, for the status line of ui_run. */
static char g_note[512];

int ui_open(struct app_err *err)
{
    if (g_curses)
        return 0;
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        return app_err_set(err, APP_E_USAGE,
                           "the monitor needs a terminal (use `ranktop "
                           "record` or `ranktop dump` in scripts)");
    setlocale(LC_ALL, "");
    if (termopen_start(g_note, sizeof(g_note)) < 0)
        return app_err_set(err, APP_E_IO, "cannot initialise the terminal: %s", g_note);
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
    return 0;
}

static int term_init(struct ui *u, struct app_err *err)
{
    const char *cs;
    int rc = ui_open(err);

    if (rc < 0)
        return rc;
    cs = nl_langinfo(CODESET);
    u->utf8 = cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));
    /* The built-in entry is said once, longer than other notices: the keys and colours it
     * assumes may not be this terminal's. */
    if (g_note[0]) {
        ui_set_status(u, "%s", g_note);
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

/* Takes the engine's view in place of the last one and rebuilds the models that depend only
 * on it. The old one is given back first, so that the engine may free it before it copies
 * the history anew (the recorder thread frees it: engine_release_later, off the frame); a
 * view built at the same time is the same one, and the rate then has no new point. */
static void refresh_data(struct ui *u)
{
    uint64_t old_t = u->v ? u->v->t : 0;

    engine_release_later(u->e, u->v);
    u->v = engine_acquire(u->e);
    if (u->v->t != old_t)
        view_rate_add(&u->rate, u->v->t, u->v->stats.samples);
    view_hang_fini(&u->hang);
    view_hang(
        &u->v->hist, clock_mono_ns(), (uint64_t)(u->o->hang_after_s * 1e9),
        &(struct view_hang_in){.waits = u->o->waits, .live = u->v->live, .nlive = u->v->nlive},
        &u->hang);
    ui_build_rows(u);
}

void ui_refresh_soon(struct ui *u)
{
    uint64_t soon = u->v ? u->v->t + ENGINE_VIEW_PERIOD_NS : 0;

    if (soon < u->next_refresh)
        u->next_refresh = soon;
}

struct export_job {
    struct ui *u;
    const struct engine_view *v; /* held until the file is written; NULL for a core */
    int tags[UI_MAX_TAGS];       /* only these ranks when ntags */
    int ntags;
    struct export_opts xo;
    char path[4096];
    char core[256]; /* c: the dead rank's core, whose dump --core text goes to path */
};

/* Writes the view's history, or a copy of it narrowed to the tagged ranks (the view itself
 * is never written). */
static int export_job_write(struct export_job *j, struct app_err *err)
{
    struct history h;
    int rc;

    if (j->core[0])
        return j->u->o->core_text(j->core, j->path, err);
    if (!j->ntags)
        return export_write(&j->v->hist, &j->xo, j->path, err);
    history_clone(&j->v->hist, &h);
    history_keep_ranks(&h, j->tags, (size_t)j->ntags);
    rc = export_write(&h, &j->xo, j->path, err);
    history_fini(&h);
    return rc;
}

static void *export_main(void *arg)
{
    struct export_job *j = arg;
    struct app_err err = {0};
    int rc = export_job_write(j, &err);

    pthread_mutex_lock(&j->u->export_lock);
    if (rc == 0)
        snprintf(j->u->export_msg, sizeof(j->u->export_msg), "%s %.480s",
                 j->core[0] ? "wrote" : "exported", j->path);
    else
        snprintf(j->u->export_msg, sizeof(j->u->export_msg), "export failed: %.480s", err.msg);
    j->u->export_msg_new = true;
    j->u->export_running = false;
    pthread_mutex_unlock(&j->u->export_lock);
    engine_release(j->v);
    free(j);
    return NULL;
}

/* Claims the export thread: false (and a status line) while one runs. */
static bool export_claim(struct ui *u)
{
    bool busy;

    pthread_mutex_lock(&u->export_lock);
    busy = u->export_running;
    u->export_running = true;
    pthread_mutex_unlock(&u->export_lock);
    if (busy) {
        ui_set_status(u, "an export is already running");
        return false;
    }
    if (u->export_joinable)
        pthread_join(u->export_thread, NULL);
    return true;
}

static void export_launch(struct ui *u, struct export_job *j)
{
    u->export_joinable = pthread_create(&u->export_thread, NULL, export_main, j) == 0;
    if (!u->export_joinable) {
        engine_release(j->v);
        free(j);
        u->export_running = false;
        ui_set_status(u, "export failed: cannot start a thread");
    }
}

void ui_start_core(struct ui *u)
{
    const struct hrank *r =
        u->v && u->table.n ? &u->v->hist.ranks[u->table.rows[u->sel].hrank] : NULL;
    struct export_job *j;

    if (!r || !r->exited || !r->core[0]) {
        ui_set_status(u, "c: the selected rank has not left a core");
        return;
    }
    /* Another node's core is on that node's disk (its key has a source slot). */
    if (r->core[0] != '/' || !u->o->core_text || history_key_pid(r->pid) != r->pid) {
        ui_set_status(u, "core on %s: %s (dump --core needs the file there)", r->host, r->core);
        return;
    }
    if (!export_claim(u))
        return;
    j = x_calloc(1, sizeof(*j));
    j->u = u;
    snprintf(j->core, sizeof(j->core), "%s", r->core);
    snprintf(j->path, sizeof(j->path), "%s/ranktop-core-%d.txt", u->o->export_dir,
             history_key_pid(r->pid));
    ui_set_status(u, "dump --core %s > %s ...", j->core, j->path);
    export_launch(u, j);
}

void ui_start_export(struct ui *u, enum export_format fmt)
{
    struct export_job *j;
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;

    if (!export_claim(u))
        return;
    j = x_calloc(1, sizeof(*j));
    j->u = u;
    /* The engine's state now, not the screen's: a paused screen may be minutes old. */
    j->v = engine_acquire_fresh(u->e);
    j->xo = (struct export_opts){.format = fmt,
                                 .all_threads = true,
                                 .interval_ns = j->v->stats.achieved_hz > 0
                                                    ? (uint64_t)(1e9 / j->v->stats.achieved_hz)
                                                    : 100000000u,
                                 .version = RANKTOP_VERSION,
                                 .no_lines = u->o->no_lines,
                                 .short_files = !u->o->full_filenames,
                                 .waits = u->o->waits};
    localtime_r(&now, &tm);
    strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
    snprintf(j->path, sizeof(j->path), "%s/ranktop-%s%s", u->o->export_dir, stamp,
             export_format_ext(fmt));
    /* Tagged ranks, when there are any, are what the user wants to look at. */
    if (u->ntags) {
        j->ntags = u->ntags;
        memcpy(j->tags, u->tags, (size_t)u->ntags * sizeof(*j->tags));
        ui_set_status(u, "exporting %d tagged ranks to %s ...", u->ntags, j->path);
    } else {
        ui_set_status(u, "exporting to %s ...", j->path);
    }
    export_launch(u, j);
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
    engine_release(u->v);
    u->v = NULL;
    view_hang_fini(&u->hang);
    view_table_fini(&u->table);
    view_baseline_fini(&u->base);
    free(u->lines);
    free(u->loc);
    free(u->collapsed);
}

int ui_run(const struct ui_opts *o, struct app_err *err)
{
    struct ui u = {.o = o, .e = o->engine, .view = VIEW_MERGED, .all_threads = o->all_threads};
    int rc;

    pthread_mutex_init(&u.export_lock, NULL);
    rc = term_init(&u, err);
    if (rc < 0) {
        pthread_mutex_destroy(&u.export_lock);
        return rc;
    }
    install_signals();
    while (keep_running(&u)) {
        struct pollfd pf = {STDIN_FILENO, POLLIN, 0};
        int ch;

        if (clock_mono_ns() >= u.next_refresh && !u.paused) {
            refresh_data(&u);
            u.next_refresh = clock_mono_ns() + UI_REFRESH_NS;
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
