/* `ranktop watch`'s reports: the model of one report (a JSON object: verdict, rank table,
 * merged tree, every rank's stacks, traces) built from one engine view, then written twice,
 * as report.json and, rendered from that same object, as report.txt, so the two never
 * disagree. Stacks with native frames are taken once, at the moment of the report, by this
 * binary's own `dump -j --native --async` run as a child with a time limit: each rank is
 * stopped only for its unwind, and an unwinder in trouble cannot take the watcher with it.
 *
 * Atomicity: everything is written into DIR/.ranktop-report.PID.XXXXXX (files fsynced), then
 * the directory is renamed to its final name and DIR fsynced. A watcher killed at any moment
 * leaves either the whole report under its final name or only the hidden temp directory,
 * which the next watcher removes (watch_report_clean). Main thread only. */
#include "watch_report.h"

#include "cli.h"
#include "watch_waits.h"

#include "ranktop/export/export.h"
#include "ranktop/base/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TEMP_PREFIX ".ranktop-report."
#define DUMP_MAX_BYTES (256u << 20)

extern char **environ;

/* ---- Files and directories ---- */

/* dir/name into buf; false (buf cut) when it does not fit. */
static bool path_join(char *buf, size_t len, const char *dir, const char *name)
{
    int n = snprintf(buf, len, "%s/%s", dir, name);

    return n >= 0 && (size_t)n < len;
}

static int fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc;

    if (fd < 0)
        return -1;
    rc = fsync(fd);
    close(fd);
    return rc;
}

/* Writes s to dir/name, flushed and fsynced. */
static int write_text_file(const char *dir, const char *name, const char *s, struct app_err *err)
{
    char path[PATH_MAX];
    FILE *f;
    bool ok;

    if (!path_join(path, sizeof(path), dir, name))
        return app_err_set(err, APP_E_IO, "path too long in %s", dir);
    f = fopen(path, "wxe");
    if (!f)
        return app_err_set(err, APP_E_IO, "cannot write %s: %s", path, strerror(errno));
    ok = fputs(s, f) >= 0 && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok)
        return app_err_set(err, APP_E_IO, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

/* Removes dir and the plain files in it (a report directory has no subdirectory). */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;

    while (d && (de = readdir(d)) != NULL) {
        char path[PATH_MAX];

        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (path_join(path, sizeof(path), dir, de->d_name))
            unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

int watch_report_clean(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;

    while (d && (de = readdir(d)) != NULL) {
        size_t k = strlen(TEMP_PREFIX);
        char path[PATH_MAX];
        long pid;

        if (strncmp(de->d_name, TEMP_PREFIX, k) != 0)
            continue;
        pid = strtol(de->d_name + k, NULL, 10);
        /* A temp of a watcher still running (another one on this DIR) is left alone. */
        if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM))
            continue;
        if (!path_join(path, sizeof(path), dir, de->d_name))
            continue;
        remove_dir(path);
        n++;
    }
    if (d)
        closedir(d);
    return n;
}

/* Renames tmp to dir/PREFIX-YYYYmmdd-HHMMSS, or with -1, -2... when that is taken (rename
 * fails on an existing report, which is never empty). */
static int place(const char *dir, const char *tmp, const char *prefix, time_t wall, char *final,
                 size_t len, struct app_err *err)
{
    struct tm tm;
    char stamp[32];

    gmtime_r(&wall, &tm);
    strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
    for (int i = 0; i < 1000; i++) {
        if (i)
            snprintf(final, len, "%s/ranktop-%s-%s-%d", dir, prefix, stamp, i);
        else
            snprintf(final, len, "%s/ranktop-%s-%s", dir, prefix, stamp);
        if (rename(tmp, final) == 0) {
            fsync_path(dir);
            return 0;
        }
        if (errno != EEXIST && errno != ENOTEMPTY)
            break;
    }
    return app_err_set(err, APP_E_IO, "cannot rename %s into place: %s", tmp, strerror(errno));
}

/* ---- Times ---- */

/* The wall-clock time (UTC, ISO 8601) of monotonic time t, given one pair of clocks. */
static void iso_time(uint64_t t, uint64_t mono_now, const struct timespec *wall_now, char *buf,
                     size_t len)
{
    int64_t back = (int64_t)(mono_now - t);
    time_t s = wall_now->tv_sec - (time_t)(back / 1000000000);
    struct tm tm;

    if (t > mono_now)
        s = wall_now->tv_sec;
    gmtime_r(&s, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* A figure with one decimal, written as such ("3.9", not 3.8999999999999999). */
static json_object *num1(double v)
{
    char s[40];

    snprintf(s, sizeof(s), "%.1f", v);
    return json_object_new_double_s(round(v * 10) / 10, s);
}

/* A share (0..1) with three decimals. */
static json_object *num3(double v)
{
    char s[40];

    snprintf(s, sizeof(s), "%.3f", v);
    return json_object_new_double_s(round(v * 1000) / 1000, s);
}

static json_object *num_or_null(double v)
{
    return isfinite(v) ? num1(v) : NULL;
}

static json_object *rank_or_null(int id)
{
    return id >= 0 ? json_object_new_int(id) : NULL;
}

/* ---- The model ---- */

struct ctx {
    const struct watch_report_in *in;
    const struct history *h;
    struct timespec wall;
    json_object *root;
};

static const char *rank_host(const struct ctx *c, const struct hrank *r)
{
    return r->host[0] ? r->host : c->h->host;
}

static const struct hrank *rank_of_key(const struct history *h, int key)
{
    for (size_t i = h->nranks; i-- > 0;)
        if (h->ranks[i].pid == key)
            return &h->ranks[i];
    return NULL;
}

static json_object *exited_json(const struct ctx *c, const struct hrank *r)
{
    json_object *o = json_object_new_object();
    char how[32], t[32];

    view_exit_text(r, how, sizeof(how));
    iso_time(r->end, c->in->now, &c->wall, t, sizeof(t));
    json_object_object_add(o, "rank", rank_or_null(r->rank));
    json_object_object_add(o, "pid", json_object_new_int(history_key_pid(r->pid)));
    json_object_object_add(o, "host", cli_json_str(rank_host(c, r)));
    json_object_object_add(o, "exit", cli_json_str(how));
    json_object_object_add(o, "exit_code",
                           r->exit_code >= 0 ? json_object_new_int(r->exit_code) : NULL);
    json_object_object_add(o, "exit_signal",
                           r->exit_signal > 0 && app_signal_name(r->exit_signal)
                               ? cli_json_str(app_signal_name(r->exit_signal))
                               : NULL);
    json_object_object_add(o, "at", cli_json_str(t));
    return o;
}

static json_object *odd_json(const struct ctx *c, const struct view_hang_rank *k)
{
    const struct hrank *r = rank_of_key(c->h, k->pid);
    const struct hthread *t = r ? view_main_thread(r) : NULL;
    uint64_t since = view_since_fchange(c->h, t, c->in->now);
    json_object *o = json_object_new_object();
    char at[32];

    iso_time(c->in->now - since, c->in->now, &c->wall, at, sizeof(at));
    json_object_object_add(o, "rank", rank_or_null(k->rank));
    json_object_object_add(o, "pid", json_object_new_int(history_key_pid(k->pid)));
    json_object_object_add(o, "host", cli_json_str(r ? rank_host(c, r) : c->h->host));
    json_object_object_add(o, "where", cli_json_str(k->where));
    json_object_object_add(o, "since", cli_json_str(at));
    json_object_object_add(o, "since_s", num1((double)(since / 100000000) / 10));
    return o;
}

static const char *why_name(enum watch_why w)
{
    static const char *const n[] = {"hang", "exit", "ondemand", "straggler"};

    return n[w];
}

static json_object *verdict_json(const struct ctx *c)
{
    const struct view_hang *vh = c->in->hang;
    json_object *o = json_object_new_object(), *odd = json_object_new_array(),
                *ex = json_object_new_array();
    char since[32];

    iso_time(c->in->now - vh->since, c->in->now, &c->wall, since, sizeof(since));
    json_object_object_add(o, "hang", json_object_new_boolean(vh->hang));
    json_object_object_add(o, "text", vh->hang ? cli_json_str(vh->text) : NULL);
    json_object_object_add(o, "since", cli_json_str(since));
    json_object_object_add(o, "since_s", num1((double)(vh->since / 100000000) / 10));
    json_object_object_add(o, "live_ranks", json_object_new_int((int)vh->nlive));
    json_object_object_add(o, "majority_ranks", json_object_new_int((int)vh->nmajority));
    json_object_object_add(o, "where", cli_json_str(vh->where));
    for (size_t i = 0; i < vh->nodd; i++)
        json_object_array_add(odd, odd_json(c, &vh->odd[i]));
    json_object_object_add(o, "odd", odd);
    for (size_t i = 0; i < c->h->nranks; i++)
        if (c->h->ranks[i].exited)
            json_object_array_add(ex, exited_json(c, &c->h->ranks[i]));
    json_object_object_add(o, "exited", ex);
    return o;
}

/* Utilisation of the rank's device ("gpu 3" -> series "gpu3"), NAN unknown. */
static double device_util(const struct history *h, const char *device)
{
    char name[48];
    size_t n = 0;

    for (const char *p = device; *p && n + 1 < sizeof(name); p++)
        if (*p != ' ')
            name[n++] = *p;
    name[n] = '\0';
    if (!n)
        return NAN;
    for (size_t i = 0; i < h->nseries; i++) {
        const struct hseries *s = &h->series[i];

        if ((s->id == SERIES_DEV_UTIL || s->id == SERIES_NPU_AICORE) && s->n &&
            (!strcmp(s->name, name) || !strncmp(s->name, name, strlen(name))))
            return s->pts[s->n - 1].v;
    }
    return NAN;
}

static json_object *row_json(const struct ctx *c, const struct view_table_row *w)
{
    const struct hrank *r = &c->h->ranks[w->hrank];
    json_object *o = json_object_new_object();
    struct watch_wait wk;

    watch_wait_of(c->in->waits, c->h, r, c->in->now, &wk);
    json_object_object_add(o, "rank", rank_or_null(w->rank));
    json_object_object_add(o, "host", cli_json_str(rank_host(c, r)));
    json_object_object_add(o, "pid", json_object_new_int(history_key_pid(w->pid)));
    json_object_object_add(o, "state", cli_json_str(w->state));
    json_object_object_add(o, "wait", wk.kind ? cli_json_str(wk.kind) : NULL);
    json_object_object_add(o, "wait_why", wk.why[0] ? cli_json_str(wk.why) : NULL);
    json_object_object_add(o, "top", cli_json_str(w->top));
    json_object_object_add(o, "since_s", num_or_null(w->since_s));
    json_object_object_add(o, "cpu_pct", num_or_null(w->cpu));
    json_object_object_add(o, "gil_pct", w->gil >= 0 ? num_or_null(w->gil) : NULL);
    json_object_object_add(o, "rss_mib", num_or_null(w->rss_mib));
    json_object_object_add(o, "device", r->device[0] ? cli_json_str(r->device) : NULL);
    json_object_object_add(o, "device_mem_mib",
                           w->dev_mem_mb >= 0 ? json_object_new_int64(w->dev_mem_mb) : NULL);
    json_object_object_add(o, "device_util_pct", num_or_null(device_util(c->h, r->device)));
    return o;
}

static json_object *ranks_json(const struct ctx *c)
{
    const struct engine_view *v = c->in->v;
    struct view_table_in ti = {.sort = VIEW_SORT_RANK,
                               .live = v->live,
                               .nlive = v->nlive,
                               .stuck_after_ns = c->in->hang_after_ns};
    struct view_table t = {0};
    json_object *a = json_object_new_array();

    view_table(c->h, c->in->now, &ti, &t);
    for (size_t i = 0; i < t.n; i++)
        json_object_array_add(a, row_json(c, &t.rows[i]));
    view_table_fini(&t);
    return a;
}

static json_object *tree_json(const struct ctx *c)
{
    struct view_tree t = {0};
    json_object *a = json_object_new_array();

    view_merge(c->h, c->in->now, NULL, &t);
    for (size_t i = 0; i < t.nvisible; i++) {
        const struct view_node *n = &t.nodes[t.visible[i]];
        json_object *o = json_object_new_object();
        char set[512];

        view_rankset_format(n->ranks, n->nranks, set, sizeof(set));
        json_object_object_add(o, "depth", json_object_new_int(n->depth));
        json_object_object_add(o, "function", cli_json_str(n->function));
        json_object_object_add(o, "file", cli_json_str(n->file));
        json_object_object_add(o, "line", n->line > 0 ? json_object_new_int(n->line) : NULL);
        json_object_object_add(o, "ranks", cli_json_str(set));
        json_object_object_add(o, "count", json_object_new_int((int)n->count));
        json_object_object_add(o, "odd", json_object_new_boolean(n->odd));
        json_object_array_add(a, o);
    }
    view_merge_fini(&t);
    return a;
}

/* ---- Stacks: this node's by `dump`, the others' as last sampled ---- */

int watch_spawn(const char *path, char *const argv[], char *const envp[], const char *out,
                const char *err, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, all;
    int rc;

    sigemptyset(&none);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    if (err)
        posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    else
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    rc = posix_spawn(pid, path, &fa, &at, argv, envp ? envp : environ);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    return rc ? -rc : 0;
}

int watch_reap(pid_t pid, double timeout)
{
    uint64_t until = clock_mono_ns() + (uint64_t)(timeout * 1e9);
    int status = 0;
    pid_t r;

    while ((r = waitpid(pid, &status, WNOHANG)) == 0) {
        struct timespec ts = {0, 50 * 1000 * 1000};

        if (clock_mono_ns() > until) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        nanosleep(&ts, NULL);
    }
    return r < 0 ? 0 : status;
}

/* Runs `SELF dump -j --native --async -p PIDS` with its output in tmp/.dump.json, killed
 * past the time limit; its stderr is left out (the JSON carries each process's error).
 * Returns the parsed array, or NULL with why. */
static json_object *run_dump(const struct ctx *c, const char *tmp, const char *pids, char *why,
                             size_t len)
{
    char out[PATH_MAX];
    char *argv[] = {(char *)c->in->self,
                    (char *)"dump",
                    (char *)"-j",
                    (char *)"--native",
                    (char *)"--async",
                    (char *)"-p",
                    (char *)pids,
                    NULL,
                    NULL,
                    NULL};
    json_object *o = NULL, *arr = NULL;
    struct stat st;
    pid_t pid;
    int status, rc;

    if (c->in->waits_file) {
        argv[7] = (char *)"--waits";
        argv[8] = (char *)c->in->waits_file;
    }
    if (!path_join(out, sizeof(out), tmp, ".dump.json")) {
        snprintf(why, len, "path too long");
        return NULL;
    }
    if ((rc = watch_spawn(c->in->self, argv, NULL, out, "/dev/null", &pid)) < 0) {
        snprintf(why, len, "cannot run %s dump: %s", c->in->self, strerror(-rc));
        return NULL;
    }
    status = watch_reap(pid, c->in->dump_timeout);
    if (status == -1) {
        snprintf(why, len, "dump took more than %g s: killed", c->in->dump_timeout);
        unlink(out);
        return NULL;
    }
    if (stat(out, &st) == 0 && st.st_size > 0 && (size_t)st.st_size < DUMP_MAX_BYTES)
        o = json_object_from_file(out);
    unlink(out);
    /* dump's shape: {"processes": [...]} */
    if (o && json_object_object_get_ex(o, "processes", &arr) &&
        json_object_is_type(arr, json_type_array)) {
        json_object_get(arr);
        json_object_put(o);
        return arr;
    }
    {
        json_object_put(o);
        snprintf(why, len, "dump gave no stacks (wait status %d)", status);
        return NULL;
    }
    return o;
}

/* A rank of another node (or one dump could not read): its main thread as last sampled. */
static json_object *sampled_json(const struct ctx *c, const struct hrank *r, const char *note)
{
    const struct hthread *t = view_main_thread(r);
    uint32_t stack = view_thread_stack(c->h, t);
    json_object *o = json_object_new_object(), *threads = json_object_new_array(),
                *th = json_object_new_object(), *frames = json_object_new_array();

    json_object_object_add(o, "pid", json_object_new_int(history_key_pid(r->pid)));
    json_object_object_add(o, "rank", rank_or_null(r->rank));
    json_object_object_add(o, "host", cli_json_str(rank_host(c, r)));
    json_object_object_add(o, "source", cli_json_str("sampled"));
    json_object_object_add(o, "note", cli_json_str(note));
    if (stack != HSTACK_NONE) {
        const uint32_t *ids = history_stack_frames(c->h, stack);

        for (uint32_t i = c->h->stacks[stack].nframes; i-- > 0;) {
            const struct hframe *f = &c->h->frames[ids[i]];
            json_object *fo = json_object_new_object();

            json_object_object_add(fo, "kind", cli_json_str(f->native ? "native" : "python"));
            json_object_object_add(fo, "function", cli_json_str(f->function));
            json_object_object_add(fo, "file", cli_json_str(f->file));
            json_object_object_add(fo, "line", f->line > 0 ? json_object_new_int(f->line) : NULL);
            json_object_array_add(frames, fo);
        }
    }
    json_object_object_add(th, "tid", NULL);
    json_object_object_add(th, "name", cli_json_str("MainThread"));
    json_object_object_add(th, "frames", frames);
    json_object_array_add(threads, th);
    json_object_object_add(o, "threads", threads);
    return o;
}

static bool local_rank(const struct ctx *c, const struct hrank *r)
{
    return history_key_pid(r->pid) == r->pid && (!r->host[0] || !strcmp(r->host, c->h->host));
}

/* The dump's entry for pid, NULL when it has none. */
static json_object *dumped(json_object *arr, int pid)
{
    for (size_t i = 0; arr && i < json_object_array_length(arr); i++) {
        json_object *p = json_object_array_get_idx(arr, i), *v;

        if (json_object_object_get_ex(p, "pid", &v) && json_object_get_int(v) == pid)
            return p;
    }
    return NULL;
}

static json_object *stacks_json(struct ctx *c, const char *tmp)
{
    const struct history *h = c->h;
    json_object *a = json_object_new_array(), *arr = NULL;
    char *pids = x_calloc(h->nranks * 12 + 2, 1), why[256] = "";
    size_t n = 0;

    for (size_t i = 0; i < h->nranks; i++)
        if (!h->ranks[i].exited && local_rank(c, &h->ranks[i]))
            n += (size_t)sprintf(pids + n, "%s%d", n ? "," : "", h->ranks[i].pid);
    if (n)
        arr = run_dump(c, tmp, pids, why, sizeof(why));
    json_object_object_add(c->root, "dump_error", why[0] ? cli_json_str(why) : NULL);
    for (size_t i = 0; i < h->nranks; i++) {
        const struct hrank *r = &h->ranks[i];
        json_object *p;

        if (r->exited)
            continue;
        if (local_rank(c, r) && (p = dumped(arr, r->pid)) != NULL) {
            json_object_get(p);
            json_object_object_add(p, "host", cli_json_str(rank_host(c, r)));
            json_object_object_add(p, "source", cli_json_str("dump"));
            json_object_array_add(a, p);
            continue;
        }
        json_object_array_add(a, sampled_json(c, r,
                                              local_rank(c, r)
                                                  ? "not read by dump: main thread as sampled"
                                                  : "on another node: main thread as sampled, "
                                                    "Python frames only"));
    }
    json_object_put(arr);
    free(pids);
    return a;
}

static json_object *shares_json(const struct watch_shares *sh)
{
    json_object *o = json_object_new_object(), *per = json_object_new_array();

    json_object_object_add(o, "rank", rank_or_null(sh->rank));
    json_object_object_add(o, "odd_share", num3(sh->odd_share));
    for (size_t i = 0; i < sh->nranks; i++) {
        json_object *r = json_object_new_object(), *k = json_object_new_object();

        json_object_object_add(r, "rank", rank_or_null(sh->ranks[i]));
        for (size_t j = 0; j < sh->nkinds; j++)
            if (sh->share[i * sh->nkinds + j] > 0)
                json_object_object_add(k, sh->kinds[j], num3(sh->share[i * sh->nkinds + j]));
        json_object_object_add(r, "wait_shares", k);
        json_object_array_add(per, r);
    }
    json_object_object_add(o, "ranks", per);
    return o;
}

/* The process entry of pid in the stacks, NULL when none. */
static json_object *stacks_of(json_object *stacks, int pid)
{
    return dumped(stacks, pid);
}

/* dump's verdict on a rank it read (native frames and the GC flag seen) replaces the one made
 * from the sampled stack: in the rank table and for the odd ranks. */
static void prefer_dump_waits(json_object *root)
{
    json_object *stacks = NULL, *ranks = NULL, *verdict = NULL, *odd = NULL;

    json_object_object_get_ex(root, "stacks", &stacks);
    json_object_object_get_ex(root, "ranks", &ranks);
    json_object_object_get_ex(root, "verdict", &verdict);
    json_object_object_get_ex(verdict, "odd", &odd);
    for (size_t i = 0; ranks && i < json_object_array_length(ranks); i++) {
        json_object *row = json_object_array_get_idx(ranks, i), *pid, *p, *w, *v;

        if (!json_object_object_get_ex(row, "pid", &pid) ||
            !(p = stacks_of(stacks, json_object_get_int(pid))) ||
            !json_object_object_get_ex(p, "source", &v) ||
            strcmp(json_object_get_string(v), "dump") != 0 ||
            !json_object_object_get_ex(p, "wait", &w) || !w)
            continue;
        if (json_object_object_get_ex(w, "kind", &v))
            json_object_object_add(row, "wait", json_object_get(v));
        if (json_object_object_get_ex(w, "why", &v))
            json_object_object_add(row, "wait_why", json_object_get(v));
    }
    for (size_t i = 0; odd && i < json_object_array_length(odd); i++) {
        json_object *o = json_object_array_get_idx(odd, i), *pid, *v;

        json_object_object_get_ex(o, "pid", &pid);
        for (size_t k = 0; ranks && k < json_object_array_length(ranks); k++) {
            json_object *row = json_object_array_get_idx(ranks, k), *rp;

            if (json_object_object_get_ex(row, "pid", &rp) &&
                json_object_get_int(rp) == json_object_get_int(pid) &&
                json_object_object_get_ex(row, "wait", &v))
                json_object_object_add(o, "wait", json_object_get(v));
        }
    }
}

static void meta_json(struct ctx *c)
{
    char t[32];
    json_object *o = c->root;

    iso_time(c->in->now, c->in->now, &c->wall, t, sizeof(t));
    json_object_object_add(o, "schema", json_object_new_int(WATCH_REPORT_SCHEMA));
    json_object_object_add(o, "kind", cli_json_str(why_name(c->in->why)));
    json_object_object_add(o, "time", cli_json_str(t));
    json_object_object_add(o, "ranktop", cli_json_str(c->in->version));
    json_object_object_add(o, "host", cli_json_str(c->h->host));
    json_object_object_add(o, "hang_after_s", num1((double)c->in->hang_after_ns / 1e9));
    json_object_object_add(o, "window_s",
                           num1(c->h->window_ns ? (double)c->h->window_ns / 1e9 : 0));
    json_object_object_add(o, "rate_hz", num1(c->in->rate_hz));
    json_object_object_add(o, "exit_status_known", json_object_new_boolean(c->in->exit_known));
    if (c->in->why == WATCH_EXIT) {
        const struct hrank *r = rank_of_key(c->h, c->in->dead_key);

        json_object_object_add(o, "dead", r ? exited_json(c, r) : NULL);
    }
}

/* ---- Traces ---- */

/* Whether any stack was sampled: an empty trace is no trace (readers reject one). */
static bool something_recorded(const struct history *h)
{
    for (size_t i = 0; i < h->nranks; i++)
        for (size_t k = 0; k < h->ranks[i].nthreads; k++)
            for (size_t r = 0; r < h->ranks[i].threads[k].nruns; r++)
                if (history_run(&h->ranks[i].threads[k], r)->stack != HSTACK_NONE)
                    return true;
    return false;
}

static void traces(struct ctx *c, const char *tmp)
{
    static const struct {
        enum export_format fmt;
        const char *name, *key;
    } t[] = {{EXPORT_PERFETTO, "trace.pftrace.gz", "perfetto"},
             {EXPORT_CHROME, "trace.json.gz", "chrome"}};
    json_object *o = json_object_new_object();

    for (size_t i = 0; i < 2; i++) {
        struct export_opts xo = {.format = t[i].fmt,
                                 .interval_ns = (uint64_t)(1e9 / c->in->rate_hz),
                                 .version = c->in->version};
        struct app_err err = {0};
        char path[PATH_MAX];

        if (something_recorded(c->h) && path_join(path, sizeof(path), tmp, t[i].name) &&
            export_write(c->h, &xo, path, &err) == 0)
            json_object_object_add(o, t[i].key, cli_json_str(t[i].name));
        else
            json_object_object_add(o, t[i].key, NULL);
    }
    json_object_object_add(c->root, "trace", o);
}

int watch_report_write(const char *dir, const struct watch_report_in *in, char *final, size_t len,
                       struct app_err *err)
{
    struct ctx c = {.in = in, .h = &in->v->hist, .root = json_object_new_object()};
    char tmp[PATH_MAX], name[64], *txt;
    const char *js;
    int rc;

    clock_gettime(CLOCK_REALTIME, &c.wall);
    snprintf(name, sizeof(name), TEMP_PREFIX "%ld.XXXXXX", (long)getpid());
    if (!path_join(tmp, sizeof(tmp), dir, name) || !mkdtemp(tmp)) {
        json_object_put(c.root);
        return app_err_set(err, APP_E_IO, "cannot make a directory in %s: %s", dir,
                           strerror(errno));
    }
    meta_json(&c);
    json_object_object_add(c.root, "verdict", verdict_json(&c));
    if (in->sh)
        json_object_object_add(c.root, "straggler", shares_json(in->sh));
    json_object_object_add(c.root, "ranks", ranks_json(&c));
    json_object_object_add(c.root, "tree", tree_json(&c));
    json_object_object_add(c.root, "stacks", stacks_json(&c, tmp));
    prefer_dump_waits(c.root);
    traces(&c, tmp);
    js = json_object_to_json_string_ext(c.root,
                                        JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
    txt = watch_report_text(c.root);
    rc = write_text_file(tmp, "report.json", js, err);
    if (rc == 0)
        rc = write_text_file(tmp, "report.txt", txt, err);
    free(txt);
    if (rc == 0 && fsync_path(tmp) < 0)
        rc = app_err_set(err, APP_E_IO, "cannot sync %s: %s", tmp, strerror(errno));
    if (rc == 0)
        rc = place(dir, tmp, in->why == WATCH_EXIT ? "hang" : why_name(in->why), c.wall.tv_sec,
                   final, len, err);
    if (rc < 0)
        remove_dir(tmp);
    json_object_put(c.root);
    return rc;
}
