/* The head's collector of other nodes: one thread that starts `ranktop agent` on every host
 * with the cluster's own launcher, reads every agent's output and hands each host's stream to
 * the recorder thread (engine_remote_emit), which turns it into history records
 * (engine_rapply.c).
 *
 * Launchers: with a remote shell (ssh) each host has a process of its own; srun starts one
 * step whose tasks are the agents, its output labelled "TASK: " (a task is matched to its host
 * by the node name in its hello); pdsh starts every agent and labels lines "HOST: ".
 *
 * Threads and locking: this thread owns every process and link but the link's record source,
 * which is the recorder's (engine lock), as are the hosts' live figures and devices
 * (engine_live.c); it reads and parses with no lock held, hands each read's events over as one
 * batch, and publishes each host's state (engine_hosts) under the engine lock. Invariants: agent
 * output is untrusted: lines are capped, labels and messages validated; no local shell runs
 * anything (argv words are ours, host names were validated; the agent's words are quoted where the
 * remote end parses them as a shell command line). A process that fails is restarted with capped
 * backoff; stopping closes every agent's stdin (agents exit on EOF), then kills what is left.
 *
 * --ship (ranktop/remote/ship.h): the remote command is the ship script; its request line is
 * answered by writing the binary to the launcher's stdin, non-blocking and resumed each pass, and
 * the stdin carries no ping or command until the agents said hello, so that nothing follows the
 * binary in the pipe while the node's head -c reads it. */
#include "engine_remote_priv.h"

#include "ranktop/remote/kube.h"
#include "ranktop/remote/rsh.h"
#include "ranktop/base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define PING_EVERY_NS 2000000000ull
#define LINE_CAP (64 * 1024)         /* the head's own cap: srun keeps lines far shorter */
#define LABEL_MAX 80                 /* bytes of a "TASK: " or "HOST: " label */
#define HELLO_WAIT_NS 10000000000ull /* a host without a hello by then "never answered" */
#define END_WAIT_NS 3000000000ull    /* a launcher whose output ended: time to exit and say why */

/* A launcher process and the links (hosts) whose agents it carries: rm->l[first, first + n). */
struct rproc {
    pid_t pid; /* -1: it exited on its own and was reaped (status), its end not yet told */
    int in_fd, out_fd, err_fd;
    struct agentproto_lines lines, errs;
    size_t first, n;
    int *task_link; /* srun: task id -> link index, -1 until its hello names its node */
    uint64_t next_connect, backoff_ns, next_ping, up_since;
    unsigned connects;
    bool ticking;     /* some agent of this process ticked since it started */
    bool stderr_said; /* the launcher explained itself on stderr since it started */

    /* How it ended, for its hosts' errors (end_error). */
    char prog[48];        /* the launcher's program (argv[0]'s last component) */
    struct rsh_tail tail; /* its last stderr lines that named none of its hosts */
    uint64_t end_by;      /* its output ended: by then its end is told (0: running) */
    int status;           /* waitpid's status, once pid is -1 */
    /* --ship: the binary being written to the launcher's stdin (header, then bytes), resumed
     * each pass; nothing else is written until the agents said hello (ship.h). */
    const struct ship_bin *bin;
    size_t ship_at;            /* bytes of header + binary written */
    uint64_t ship_t0, ship_ns; /* the request's time; the transfer's duration once done */
    size_t ship_bytes;
    bool hold; /* no pings or commands on stdin yet */
};

struct remote {
    struct engine *e;
    struct rlink *l;
    size_t n;
    struct rproc *p;
    size_t np;
    enum engine_launcher how;
    double rate_hz;             /* the sampling rate the agents were last told */
    struct engine_rbatch batch; /* what the lines read this pass said, for the recorder */
};

/* The agent's own arguments: fixed words and numbers, never text from elsewhere. */
static void agent_args(struct engine *e, char **v, size_t *n, bool heartbeat)
{
    char rate[32];

    v[(*n)++] =
        x_strdup(e->o.remote.ranktop && e->o.remote.ranktop[0] ? e->o.remote.ranktop : "ranktop");
    v[(*n)++] = x_strdup("agent");
    snprintf(rate, sizeof(rate), "%g", engine_rate(e));
    v[(*n)++] = x_strdup("--rate");
    v[(*n)++] = x_strdup(rate);
    if (e->o.all_threads)
        v[(*n)++] = x_strdup("--all-threads");
    if (!e->o.gil)
        v[(*n)++] = x_strdup("--no-gil");
    if (e->o.gil_only)
        v[(*n)++] = x_strdup("--gil");
    if (e->o.oncpu)
        v[(*n)++] = x_strdup("--oncpu");
    if (!e->o.mem)
        v[(*n)++] = x_strdup("--no-mem");
    if (e->o.native)
        v[(*n)++] = x_strdup("--native");
    if (!heartbeat) /* pdsh forwards no stdin: the head's pings never arrive */
        v[(*n)++] = x_strdup("--heartbeat=0");
}

/* "a,b,c": the hosts of a process, for srun -w and pdsh -w. */
static char *host_csv(const struct remote *rm, const struct rproc *p)
{
    size_t len = 1;
    char *s;

    for (size_t i = 0; i < p->n; i++)
        len += strlen(rm->l[p->first + i].name) + 1;
    s = x_calloc(len, 1);
    for (size_t i = 0; i < p->n; i++) {
        if (i)
            strcat(s, ",");
        strcat(s, rm->l[p->first + i].name);
    }
    return s;
}

/* The launcher's argv. ssh: the template with the host (at %h, else last), then RANKTOP agent
 * ARGS quoted for the login shell that parses them. srun: the step options, --label, -N/-n/-w
 * for every host, then the agent's words as they are. pdsh: its options (the template's words
 * before a "--"), -f/-w, then the words after "--" (e.g. an exec module's command, %h left for
 * pdsh) and the agent's words quoted (pdsh's ssh module hands them to a shell). kubectl: its
 * template with the pod, -n/-c, "--" and the agent's words as they are (kube_exec_argv). */
static void argv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

static char **proc_argv(const struct remote *rm, const struct rproc *p)
{
    const struct engine_remote_opts *r = &rm->e->o.remote;
    struct rsh_tmpl t = {r->rsh, r->nrsh, r->rsh_has_host};
    char **cmd = x_calloc(24, sizeof(char *)), **w, **v, num[32], *csv;
    size_t n = 0, dash = r->nrsh;

    agent_args(rm->e, cmd, &n, rm->how != ENGINE_LAUNCH_PDSH);
    if (r->ship) { /* sh -c SCRIPT sh agent ARGS: the script ships and runs the binary */
        const char **sc = ship_cmd((const char *const *)cmd);
        char **copy = x_calloc(28, sizeof(char *));

        for (n = 0; sc[n]; n++) /* copies: sc borrows from cmd */
            copy[n] = x_strdup(sc[n]);
        free(sc);
        argv_free(cmd);
        cmd = copy;
    }
    if (rm->how == ENGINE_LAUNCH_KUBECTL) {
        v = kube_exec_argv(&t, rm->l[p->first].name, r->kube_ns, r->kube_container,
                           (const char *const *)cmd);
        argv_free(cmd);
        return v;
    }
    if (rm->how == ENGINE_LAUNCH_RSH) {
        v = rsh_argv(&t, rm->l[p->first].name, NULL, (const char *const *)cmd, true);
        argv_free(cmd);
        return v;
    }
    for (size_t i = 0; i < r->nrsh; i++)
        if (rm->how == ENGINE_LAUNCH_PDSH && !strcmp(r->rsh[i], "--") && dash == r->nrsh)
            dash = i;
    /* The template's words rearranged around the hosts': a %h left in them stays "%h". */
    w = x_calloc(r->nrsh + 8, sizeof(char *));
    n = 0;
    for (size_t i = 0; i < dash; i++)
        w[n++] = r->rsh[i];
    snprintf(num, sizeof(num), "%zu", p->n); /* pdsh: every agent at once, fanout >= hosts */
    csv = host_csv(rm, p);
    if (rm->how == ENGINE_LAUNCH_SRUN) {
        w[n++] = (char *)"--label";
        w[n++] = (char *)"-N";
        w[n++] = num;
    }
    w[n++] = rm->how == ENGINE_LAUNCH_SRUN ? (char *)"-n" : (char *)"-f";
    w[n++] = num;
    w[n++] = (char *)"-w";
    w[n++] = csv;
    for (size_t i = dash + 1; i < r->nrsh; i++)
        w[n++] = r->rsh[i];
    t.w = w;
    t.n = n;
    v = rsh_argv(&t, NULL, NULL, (const char *const *)cmd, rm->how == ENGINE_LAUNCH_PDSH);
    free(w);
    free(csv);
    argv_free(cmd);
    return v;
}

static int nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);

    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Every link of the process gets the same error line (the launcher failed for all). */
static void proc_error(struct remote *rm, struct rproc *p, const char *msg)
{
    for (size_t i = 0; i < p->n; i++)
        if (!rm->l[p->first + i].refused)
            rlink_set_error(&rm->l[p->first + i], "%s", msg);
}

/* Starts the launcher with three pipes, in a process group of its own so that stopping can
 * kill it and whatever it started locally. Returns 0 or -errno. */
static int proc_spawn(struct remote *rm, struct rproc *p)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, rc;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, dfl;
    char **argv = proc_argv(rm, p), msg[300];
    const char *slash = strrchr(argv[0], '/');

    snprintf(p->prog, sizeof(p->prog), "%s", slash ? slash + 1 : argv[0]);

    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
        rc = -errno;
        goto out;
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    posix_spawnattr_init(&at);
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &dfl);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETPGROUP);
    rc = -posix_spawnp(&p->pid, argv[0], &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
out:
    /* The child's ends are closed here in any case; ours are kept only on success. */
    close_fd(&in[0]);
    close_fd(&out[1]);
    close_fd(&err[1]);
    if (rc == 0) {
        p->in_fd = in[1];
        p->out_fd = out[0];
        p->err_fd = err[0];
        nonblock(p->in_fd);
        nonblock(p->out_fd);
        nonblock(p->err_fd);
    } else {
        close_fd(&in[1]);
        close_fd(&out[0]);
        close_fd(&err[0]);
        p->pid = 0;
        snprintf(msg, sizeof(msg), "cannot start '%.200s': %s", argv[0], strerror(-rc));
        proc_error(rm, p, msg);
    }
    argv_free(argv);
    return rc;
}

/* A remote shell that ended with "command not found" (127; kubectl's "executable file not
 * found", 126 or 127) before its agent said hello: the node has no ranktop, and the error says
 * what would send one. */
static void hint_ship(struct remote *rm, struct rproc *p, int code)
{
    for (size_t i = 0; i < p->n; i++) {
        struct rlink *l = &rm->l[p->first + i];
        size_t len;

        pthread_mutex_lock(&rm->e->lock);
        len = strlen(l->src.error);
        if (!l->hello && (code == 127 || (code == 126 && strstr(l->src.error, "not found"))) &&
            !strstr(l->src.error, "--ship") && len + 32 < sizeof(l->src.error))
            snprintf(l->src.error + len, sizeof(l->src.error) - len, "%s--ship sends ranktop there",
                     len ? "; " : "");
        pthread_mutex_unlock(&rm->e->lock);
    }
}

/* Adds event m of link li (or, with ENGINE_RLINK_RESET, the marker) to the pass's batch. */
static void batch_add(struct remote *rm, size_t li, uint32_t flags, const struct record_event *m)
{
    struct engine_rbatch *b = &rm->batch;

    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 256;
        b->ev = x_reallocarray(b->ev, b->cap, sizeof(*b->ev));
        b->link = x_reallocarray(b->link, b->cap, sizeof(*b->link));
    }
    if (m)
        b->ev[b->n] = *m;
    else
        b->ev[b->n].type = RECORD_UNKNOWN;
    b->link[b->n++] = (uint32_t)li | flags;
}

/* Ends the process: stdin closed first (agents exit on EOF), then its group killed; the
 * child is reaped. Its hosts go down; it is started again after the backoff. */
static void proc_down(struct remote *rm, struct rproc *p, uint64_t now, const char *why)
{
    int code = -1; /* the launcher's exit status, when it exited */

    close_fd(&p->in_fd);
    close_fd(&p->out_fd);
    close_fd(&p->err_fd);
    if (p->pid > 0) { /* not when reaped: its pid may be another process's by now */
        int st = 0;

        kill(-p->pid, SIGTERM);
        kill(p->pid, SIGTERM);
        if (waitpid(p->pid, &st, WNOHANG) == 0) {
            kill(-p->pid, SIGKILL);
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
        }
        code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    } else if (p->pid < 0) { /* reaped by proc_end, its status kept */
        code = WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -1;
    }
    p->pid = 0;
    for (size_t i = 0; i < p->n; i++) {
        struct rlink *l = &rm->l[p->first + i];

        if (why && why[0] && !l->refused && !p->stderr_said) /* ssh's own words are better */
            rlink_set_error(l, "%s", why);
        l->state = ENGINE_HOST_DOWN;
    }
    if (code >= 0 && !rm->e->o.remote.ship)
        hint_ship(rm, p, code);
    /* An agent that dies right after its hello must not be restarted every second. */
    if (p->ticking && now - p->up_since > BACKOFF_MAX_NS)
        p->backoff_ns = BACKOFF_MIN_NS;
    p->next_connect = now + p->backoff_ns;
    p->backoff_ns = p->backoff_ns * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : p->backoff_ns * 2;
}

static void proc_connect(struct remote *rm, struct rproc *p, uint64_t now)
{
    for (size_t i = 0; i < p->n; i++) {
        struct rlink *l = &rm->l[p->first + i];

        rlink_keep_totals(l);
        /* The recorder forgets what the last agent defined, after applying what it sent. */
        batch_add(rm, p->first + i, ENGINE_RLINK_RESET, NULL);
        l->hello = false;
        l->refused = l->cut; /* a host cut off stays so when the launcher restarts */
        l->silent_said = false;
        memset(&l->said, 0, sizeof(l->said));
        l->state = l->cut ? ENGINE_HOST_DOWN : ENGINE_HOST_CONNECTING;
        l->last_msg = 0;
    }
    for (size_t i = 0; p->task_link && i < p->n; i++)
        p->task_link[i] = -1;
    agentproto_lines_fini(&p->lines);
    agentproto_lines_fini(&p->errs);
    agentproto_lines_init(&p->lines, LINE_CAP);
    agentproto_lines_init(&p->errs, 4096);
    p->connects++;
    p->ticking = p->stderr_said = false;
    memset(&p->tail, 0, sizeof(p->tail));
    p->end_by = 0;
    p->bin = NULL;
    p->ship_at = p->ship_bytes = 0;
    p->ship_ns = 0;
    p->hold = rm->e->o.remote.ship != NULL;
    p->up_since = now;
    p->next_ping = now + PING_EVERY_NS;
    engine_remote_emit(rm->e, &rm->batch);
    if (proc_spawn(rm, p) < 0)
        proc_down(rm, p, now, NULL);
}

/* The link a labelled line belongs to, and where its payload starts; NULL to drop the line.
 * An srun task is matched to its host by the hello it sends first: until then *task is set
 * and NULL returned. */
static struct rlink *route(struct remote *rm, struct rproc *p, const char *line, size_t len,
                           size_t *skip, long *task_out)
{
    const char *colon = len > 2 ? memchr(line, ':', len < LABEL_MAX ? len : LABEL_MAX) : NULL;
    size_t at;

    *skip = 0;
    *task_out = -1;
    if (engine_launch_per_host(rm->how))
        return &rm->l[p->first];
    if (!colon || (size_t)(colon - line) + 1 >= len || colon[1] != ' ')
        return NULL; /* not a labelled line: a launcher's own chatter */
    at = (size_t)(colon - line);
    *skip = at + 2;
    if (rm->how == ENGINE_LAUNCH_PDSH) {
        for (size_t i = 0; i < p->n; i++)
            if (strlen(rm->l[p->first + i].name) == at &&
                !memcmp(rm->l[p->first + i].name, line, at))
                return &rm->l[p->first + i];
        return NULL;
    }
    {
        char num[LABEL_MAX + 1];
        char *end;
        long task;

        memcpy(num, line, at);
        num[at] = '\0';
        task = strtol(num, &end, 10);
        if (end == num || *end || task < 0 || (size_t)task >= p->n)
            return NULL;
        if (p->task_link[task] < 0) {
            *task_out = task; /* unmatched yet: the caller looks for a hello */
            return NULL;
        }
        return &rm->l[p->task_link[task]];
    }
}

/* An srun task's hello: the node it names (SLURMD_NODENAME, else its host name) is one of
 * the process's hosts; from now on that task's lines are that host's. */
static struct rlink *match_task(struct remote *rm, struct rproc *p, long task,
                                const struct record_event *m)
{
    if (m->type != RECORD_HELLO)
        return NULL;
    for (size_t i = 0; i < p->n; i++) {
        struct rlink *l = &rm->l[p->first + i];

        if (!strcmp(l->name, m->u.hello.node) || !strcmp(l->name, m->u.hello.host)) {
            p->task_link[task] = (int)(p->first + i);
            return l;
        }
    }
    return NULL;
}

/* Bytes of header + binary still to write for --ship (0: none asked or all written). */
static size_t ship_left(const struct rproc *p)
{
    size_t hl;

    if (!p->bin)
        return 0;
    hl = strlen(p->bin->header);
    return hl + (p->bin->data ? p->bin->len : 0) - p->ship_at;
}

/* Writes what the launcher's stdin takes now of the binary (non-blocking; resumed on the
 * next pass, or as soon as poll says the pipe has room). */
static void ship_write(struct remote *rm, struct rproc *p, uint64_t now)
{
    while (p->in_fd >= 0 && ship_left(p)) {
        size_t hl = strlen(p->bin->header);
        const char *from =
            p->ship_at < hl ? p->bin->header + p->ship_at : p->bin->data + (p->ship_at - hl);
        size_t n = p->ship_at < hl ? hl - p->ship_at : p->bin->len - (p->ship_at - hl);
        ssize_t w = write(p->in_fd, from, n);

        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return;
        if (w <= 0) { /* the script is gone: its stderr says why */
            close_fd(&p->in_fd);
            return;
        }
        p->ship_at += (size_t)w;
        if (!ship_left(p) && p->bin->data) {
            p->ship_ns = now > p->ship_t0 ? clock_mono_ns() - p->ship_t0 : 0;
            p->ship_bytes = p->bin->len;
        }
    }
    (void)rm;
}

/* A node's "ranktop-ship need ARCH": the first one of a process is answered (srun broadcasts
 * one answer to every task; a task of another architecture refuses it and says so). */
static bool ship_request(struct remote *rm, struct rproc *p, const char *payload, size_t len,
                         uint64_t now)
{
    char arch[SHIP_ARCH_MAX];

    if (!rm->e->o.remote.ship || !ship_need(payload, len, arch))
        return false;
    if (p->bin)
        return true;
    p->bin = ship_cache_get(rm->e->o.remote.ship, arch);
    p->ship_t0 = now;
    if (!p->bin->data)
        proc_error(rm, p, p->bin->why);
    ship_write(rm, p, now);
    return true;
}

static void apply_lines(struct remote *rm, struct rproc *p, uint64_t now)
{
    const char *line;
    long len;

    while ((len = agentproto_lines_next(&p->lines, &line)) >= 0) {
        struct record_event m;
        struct app_err err = {0};
        size_t skip;
        long task;
        bool tick;
        struct rlink *l = route(rm, p, line, (size_t)len, &skip, &task);

        if ((l || task >= 0) && ship_request(rm, p, line + skip, (size_t)len - skip, now))
            continue;
        if ((!l && task < 0) || (l && l->refused))
            continue;
        if (agentproto_parse(line + skip, (size_t)len - skip, &m, &err) < 0) {
            if (l)
                rlink_set_error(l, "agent stream: %s", err.msg);
            continue;
        }
        if (!l && !(l = match_task(rm, p, task, &m)))
            continue;
        l->last_msg = now;
        l->win_bytes += (uint64_t)len + 1;
        if (!rlink_note(l, &m, &tick))
            continue;
        p->ticking |= tick;
        batch_add(rm, (size_t)(l - rm->l), 0, &m);
    }
    if (p->lines.oversized)
        proc_error(rm, p, "agent stream: a line over 64 KiB dropped");
}

/* Reads what the agents wrote and hands every complete line's event to the recorder, one
 * batch per read. Returns false when the output ended. */
static bool proc_read(struct remote *rm, struct rproc *p, uint64_t now)
{
    char buf[65536];
    ssize_t n;
    bool open = true;

    while ((n = read(p->out_fd, buf, sizeof(buf))) > 0) {
        agentproto_lines_feed(&p->lines, buf, (size_t)n);
        if (n < (ssize_t)sizeof(buf))
            break;
    }
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        open = false;
    apply_lines(rm, p, now);
    engine_remote_emit(rm->e, &rm->batch);
    return open;
}

/* The launcher's own complaints (ssh: connection refused, unknown host; pdsh: "pdsh@head:
 * node01: ssh exited with exit code 255"): a line that names hosts is theirs, any other is all
 * its hosts'; each host's error is its last lines so far, until the launcher's end says more
 * (proc_end). */
static void proc_read_err(struct remote *rm, struct rproc *p)
{
    char buf[4096], last[256], words[sizeof(rm->l[0].src.error)];
    const char *line;
    ssize_t n;
    long len;

    while ((n = read(p->err_fd, buf, sizeof(buf))) > 0)
        agentproto_lines_feed(&p->errs, buf, (size_t)n);
    while ((len = agentproto_lines_next(&p->errs, &line)) >= 0) {
        bool named = false;

        if (len == 0)
            continue;
        snprintf(last, sizeof(last), "%.*s", (int)len, line);
        str_scrub(last);
        for (size_t i = 0; p->n > 1 && i < p->n; i++) {
            struct rlink *l = &rm->l[p->first + i];

            if (l->cut || !strstr(last, l->name))
                continue;
            rsh_tail_add(&l->said, line, (size_t)len);
            rsh_tail_join(&l->said, words, sizeof(words));
            rlink_set_error(l, "%s", words);
            named = true;
            /* pdsh's "HOST: ... exited with exit code 255", srun's "task N: Exited":
             * that host's agent is gone while the others go on. */
            if (strstr(last, "xited"))
                l->state = ENGINE_HOST_DOWN;
        }
        if (!named) {
            rsh_tail_add(&p->tail, line, (size_t)len);
            rsh_tail_join(&p->tail, words, sizeof(words));
            proc_error(rm, p, words);
        }
        p->stderr_said = true;
    }
    if (p->bin && !p->bin->data) /* --ship found no binary: the head's words name where */
        proc_error(rm, p, p->bin->why);
    if (n == 0)
        close_fd(&p->err_fd);
}

/* A host's error once its launcher has ended (or closed the agents' output and was given up
 * on): the launcher's own words, its exit status and its last stderr lines (those that named
 * this host, else the others). A launcher that said nothing leaves room for a guess: after
 * the agent's hello, its stream ended; before it, with status 0, what answered was not an
 * agent of this version. */
static void end_error(const struct rproc *p, struct rlink *l)
{
    const struct rsh_tail *t = l->said.n ? &l->said : &p->tail;
    int code = p->pid < 0 && WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -1;
    int sig = p->pid < 0 && WIFSIGNALED(p->status) ? WTERMSIG(p->status) : 0;
    char words[sizeof(l->src.error)];

    if (l->refused)
        return;
    if (p->pid > 0) { /* still running: it closed the agents' output and is killed now */
        rsh_tail_join(t, words, sizeof(words));
        rlink_set_error(l, "%s closed the agent's output%s%s", p->prog, t->n ? ": " : "", words);
        return;
    }
    rsh_explain(words, sizeof(words), p->prog, code, sig, t);
    if ((code == 0 || l->hello) && !t->n)
        rlink_set_error(l,
                        l->hello ? "the agent's stream ended (%s)"
                                 : "%s before its agent said hello (a different version?)",
                        words);
    else
        rlink_set_error(l, "%s", words);
}

/* The launcher's output ended. What it says about why is complete once it has exited and its
 * stderr has closed, which may come a little later: proc_end tells it then (or at end_by). */
static void proc_ending(struct rproc *p, uint64_t now)
{
    close_fd(&p->out_fd);
    p->end_by = now + END_WAIT_NS;
}

/* A launcher whose output ended: reaped when it has exited; once it has and its stderr is
 * read to the end (or END_WAIT_NS has passed), every host of it gets its words and goes down. */
static void proc_end(struct remote *rm, struct rproc *p, uint64_t now)
{
    int st;

    if (p->err_fd >= 0)
        proc_read_err(rm, p);
    if (p->pid > 0 && waitpid(p->pid, &st, WNOHANG) == p->pid) {
        p->pid = -1;
        p->status = st;
    }
    if ((p->pid > 0 || p->err_fd >= 0) && now < p->end_by)
        return;
    for (size_t i = 0; i < p->n; i++)
        if (!rm->l[p->first + i].cut)
            end_error(p, &rm->l[p->first + i]);
    proc_down(rm, p, now, NULL);
}

/* One command line to the launcher's stdin (its agents'); the stdin is closed once the
 * other end is gone. A pipe that cannot take a short line now means a stuck link: the line is
 * lost, and pings try again. */
static void proc_send(struct rproc *p, const char *cmd, int n)
{
    if (p->hold) /* --ship: the binary first, and nothing a script's head -c could swallow */
        return;
    if (p->in_fd >= 0 && n > 0 && write(p->in_fd, cmd, (size_t)n) < 0 && errno == EPIPE)
        close_fd(&p->in_fd);
}

static void proc_ping(struct rproc *p, uint64_t now)
{
    char cmd[48];
    int n = snprintf(cmd, sizeof(cmd), "ping %llu\n", (unsigned long long)now);

    p->next_ping = now + PING_EVERY_NS;
    proc_send(p, cmd, n);
}

static void publish_totals(struct remote *rm)
{
    struct engine *e = rm->e;

    e->rpasses = 0;
    e->rstacks = e->rerrors = e->rlost = 0;
    for (size_t i = 0; i < rm->n; i++) { /* the busiest sampler's passes; the others' sums */
        const struct rlink *l = &rm->l[i];
        uint64_t passes = l->base[0] + l->passes;

        e->rpasses = passes > e->rpasses ? passes : e->rpasses;
        e->rstacks += l->base[1] + l->nstack;
        e->rerrors += l->base[2] + l->errors;
        e->rlost += l->base[3] + l->lost;
    }
}

/* The node host i (a pod) runs on, or NULL. */
static const char *node_of(const struct engine *e, size_t i)
{
    const char *n = e->o.remote.nodes ? e->o.remote.nodes[i] : NULL;

    return n && n[0] ? n : NULL;
}

static void publish_host(const struct rlink *l, const struct rproc *p, struct engine_host *h,
                         uint64_t now)
{
    snprintf(h->name, sizeof(h->name), "%s", l->name);
    snprintf(h->agent_host, sizeof(h->agent_host), "%s", l->src.host);
    snprintf(h->version, sizeof(h->version), "%s", l->version);
    snprintf(h->error, sizeof(h->error), "%s", l->src.error);
    h->state = l->state;
    h->ranks = (int)l->src.nkeys;
    h->age_s = l->last_msg ? (double)(now - l->last_msg) / 1e9 : -1;
    h->bytes_per_s = l->bps;
    h->offset_ms = (double)l->src.offset_ns / 1e6;
    h->offset_err_ms = l->src.rtt_ns == INT64_MAX ? -1 : (double)l->src.rtt_ns / 2e6;
    h->connects = p->connects;
    h->ship_bytes = p->ship_bytes;
    h->ship_s = (double)p->ship_ns / 1e9;
}

/* A host whose launcher runs but whose agent has not said hello within HELLO_WAIT_NS: said
 * once per connection, after what the launcher said (ssh's own words name the cause). */
static void check_silent(struct remote *rm, struct rlink *l, uint64_t now)
{
    const struct rproc *p = &rm->p[l->proc];
    char was[sizeof(l->src.error)];

    if (l->hello || l->refused || l->silent_said || !p->pid || now - p->up_since < HELLO_WAIT_NS)
        return;
    l->silent_said = true;
    snprintf(was, sizeof(was), "%s", l->src.error);
    rlink_set_error_locked(l, "never answered: no hello from its agent in %llu s%s%.200s",
                           HELLO_WAIT_NS / 1000000000ull, was[0] ? "; last said: " : "", was);
}

/* Host states and totals for readers, under the lock. */
static void publish(struct remote *rm, uint64_t now)
{
    struct engine *e = rm->e;

    pthread_mutex_lock(&e->lock);
    for (size_t i = 0; i < rm->n; i++) {
        struct rlink *l = &rm->l[i];

        if (l->src_cut && !l->cut) /* the recorder cut its source off: so goes the host */
            rlink_cut(l);
        check_silent(rm, l, now);
        if (l->state == ENGINE_HOST_UP && l->last_msg && now - l->last_msg > ENGINE_LAG_NS)
            l->state = ENGINE_HOST_LAGGING;
        else if (l->state == ENGINE_HOST_LAGGING && now - l->last_msg <= ENGINE_LAG_NS)
            l->state = ENGINE_HOST_UP;
        if (now - l->win_t0 >= 2000000000ull) {
            l->bps = (double)l->win_bytes * 1e9 / (double)(now - l->win_t0);
            l->win_t0 = now;
            l->win_bytes = 0;
        }
        publish_host(l, &rm->p[l->proc], &e->hosts[i], now);
        snprintf(e->hosts[i].node, sizeof(e->hosts[i].node), "%s",
                 node_of(e, i) ? node_of(e, i) : "");
    }
    publish_totals(rm);
    pthread_mutex_unlock(&e->lock);
}

static bool all_refused(const struct remote *rm, const struct rproc *p)
{
    for (size_t i = 0; i < p->n; i++)
        if (!rm->l[p->first + i].refused)
            return false;
    return true;
}

static bool all_cut(const struct remote *rm, const struct rproc *p)
{
    for (size_t i = 0; i < p->n; i++)
        if (!rm->l[p->first + i].cut)
            return false;
    return true;
}

/* The monitor's + and - reach every agent: "rate HZ" on each launcher's stdin (srun
 * broadcasts it to every task; pdsh forwards none, so its agents keep their rate). */
static void forward_rate(struct remote *rm)
{
    double hz = engine_rate(rm->e);
    char cmd[48];
    int n;

    if (hz == rm->rate_hz)
        return;
    rm->rate_hz = hz;
    n = snprintf(cmd, sizeof(cmd), "rate %g\n", hz);
    for (size_t i = 0; i < rm->np; i++)
        proc_send(&rm->p[i], cmd, n);
}

int engine_remote_native(struct engine *e, int key, bool on, struct app_err *err)
{
    size_t slot = (size_t)key >> HISTORY_KEY_PID_BITS;
    int rc = 0;

    pthread_mutex_lock(&e->lock);
    if (slot < 1 || slot > e->o.remote.nhosts)
        rc = app_err_set(err, APP_E_NOTFOUND, "no host for rank key %d", key);
    else if (e->o.remote.launcher == ENGINE_LAUNCH_PDSH)
        rc = app_err_set(err, APP_E_USAGE,
                         "pdsh passes no input to the agents: native frames of other hosts' "
                         "ranks need --native at the start");
    else if (e->nrnative == ENGINE_MAX_NATIVE)
        rc = app_err_set(err, APP_E_LIMIT, "too many native toggles at once; try again");
    if (rc == 0) {
        e->rnative[e->nrnative].key = key;
        e->rnative[e->nrnative++].on = on;
        engine_native_toggle_locked(e, key, on); /* for the views' native state */
    }
    pthread_mutex_unlock(&e->lock);
    return rc;
}

/* The monitor's native toggles for other hosts' ranks: "native PID on|off" on the stdin of
 * the rank's host (srun broadcasts to every task, so its line names the node; an agent acts
 * only on its own). */
static void forward_native(struct remote *rm)
{
    struct engine *e = rm->e;
    int keys[ENGINE_MAX_NATIVE];
    bool on[ENGINE_MAX_NATIVE];
    size_t n;

    pthread_mutex_lock(&e->lock);
    n = e->nrnative;
    for (size_t i = 0; i < n; i++) {
        keys[i] = e->rnative[i].key;
        on[i] = e->rnative[i].on;
    }
    e->nrnative = 0;
    pthread_mutex_unlock(&e->lock);
    for (size_t i = 0; i < n; i++) {
        size_t slot = (size_t)keys[i] >> HISTORY_KEY_PID_BITS;
        const struct rlink *l;
        struct rproc *p;
        char cmd[160];
        int len;

        if (slot < 1 || slot > rm->n)
            continue;
        l = &rm->l[slot - 1];
        p = &rm->p[l->proc];
        len = snprintf(cmd, sizeof(cmd), "native %d %s%s%s\n", history_key_pid(keys[i]),
                       on[i] ? "on" : "off", rm->how == ENGINE_LAUNCH_SRUN ? " " : "",
                       rm->how == ENGINE_LAUNCH_SRUN ? l->name : "");
        proc_send(p, cmd, len);
    }
}

/* --ship: once the binary is written and every agent of the process said hello (or the
 * hello wait is over: a node that failed must not starve the others of pings), the stdin
 * carries the head's lines again, the current rate first. */
static void ship_release(struct remote *rm, struct rproc *p, uint64_t now)
{
    bool all = true;

    if (!p->hold || !p->pid || !p->bin || ship_left(p))
        return;
    for (size_t i = 0; i < p->n; i++)
        all &= rm->l[p->first + i].hello || rm->l[p->first + i].refused;
    if (!all && now - p->up_since < HELLO_WAIT_NS)
        return;
    p->hold = false;
    rm->rate_hz = -1; /* forward_rate tells every agent the rate again */
}

/* One pass: (re)start what is due, ping, wait for output up to 100 ms, read it. */
static void remote_pass(struct remote *rm)
{
    struct pollfd *pf = x_calloc(rm->np * 3 + 1, sizeof(*pf));
    uint64_t now = clock_mono_ns();
    bool behind;

    forward_rate(rm);
    forward_native(rm);
    for (size_t i = 0; i < rm->np; i++) {
        struct rproc *p = &rm->p[i];

        if (!p->pid && now >= p->next_connect && !all_cut(rm, p))
            proc_connect(rm, p, now);
        if (p->pid && now >= p->next_ping)
            proc_ping(p, now);
    }
    /* The recorder is a queue's worth behind (a burst of backlogs): the agents' output waits
     * in the pipes meanwhile, and agents that cannot write wait too. */
    behind = engine_rqueue_full(rm->e);
    pf[0] = (struct pollfd){.fd = rm->e->stop_fd, .events = POLLIN};
    for (size_t i = 0; i < rm->np; i++) {
        pf[1 + 2 * i] = (struct pollfd){.fd = behind ? -1 : rm->p[i].out_fd, .events = POLLIN};
        pf[2 + 2 * i] = (struct pollfd){.fd = rm->p[i].err_fd, .events = POLLIN};
        /* --ship: a stdin with binary bytes pending wakes the pass when it has room. */
        pf[1 + 2 * rm->np + i] =
            (struct pollfd){.fd = ship_left(&rm->p[i]) ? rm->p[i].in_fd : -1, .events = POLLOUT};
    }
    if (poll(pf, rm->np * 3 + 1, 100) > 0) {
        now = clock_mono_ns();
        for (size_t i = 0; i < rm->np; i++) {
            struct rproc *p = &rm->p[i];

            if (pf[1 + 2 * rm->np + i].revents)
                ship_write(rm, p, now);

            if (p->err_fd >= 0 && pf[2 + 2 * i].revents)
                proc_read_err(rm, p);
            if (p->out_fd >= 0 && pf[1 + 2 * i].revents && !proc_read(rm, p, now))
                proc_ending(p, now);
        }
    }
    for (size_t i = 0; i < rm->np; i++)
        if (rm->p[i].pid && rm->p[i].end_by)
            proc_end(rm, &rm->p[i], now);
    for (size_t i = 0; i < rm->np; i++) { /* a protocol refused by every host of a process */
        if (rm->p[i].pid && all_refused(rm, &rm->p[i]))
            proc_down(rm, &rm->p[i], now, NULL);
        ship_release(rm, &rm->p[i], now);
    }
    free(pf);
    publish(rm, clock_mono_ns());
}

/* Closes every agent's stdin (each exits on EOF within a second), gives the launchers 1.5 s
 * to end, then kills what is left; frees everything. */
static void remote_stop(struct remote *rm)
{
    uint64_t end = clock_mono_ns() + 1500000000ull;
    bool any = true;

    for (size_t i = 0; i < rm->np; i++)
        close_fd(&rm->p[i].in_fd);
    while (any && clock_mono_ns() < end) {
        any = false;
        for (size_t i = 0; i < rm->np; i++) {
            int st;

            if (rm->p[i].pid > 0 && waitpid(rm->p[i].pid, &st, WNOHANG) == rm->p[i].pid)
                rm->p[i].pid = 0;
            any |= rm->p[i].pid > 0;
        }
        if (any)
            usleep(20000);
    }
    for (size_t i = 0; i < rm->np; i++) {
        proc_down(rm, &rm->p[i], 0, NULL);
        agentproto_lines_fini(&rm->p[i].lines);
        agentproto_lines_fini(&rm->p[i].errs);
        free(rm->p[i].task_link);
    }
    /* The links stay the engine's: the recorder may still apply what they sent last. */
    free(rm->batch.ev);
    free(rm->batch.link);
    free(rm->p);
}

/* One process per host with a remote shell; one for all hosts with srun or pdsh. */
static void remote_init(struct remote *rm, struct engine *e, uint64_t now)
{
    rm->e = e;
    rm->n = e->o.remote.nhosts;
    rm->how = e->o.remote.launcher;
    rm->rate_hz = engine_rate(e); /* what new agents are started with */
    rm->l = x_calloc(rm->n ? rm->n : 1, sizeof(*rm->l));
    pthread_mutex_lock(&e->lock);
    e->rl = rm->l;
    e->nrl = rm->n;
    pthread_mutex_unlock(&e->lock);
    rm->np = engine_launch_per_host(rm->how) ? rm->n : 1;
    rm->p = x_calloc(rm->np ? rm->np : 1, sizeof(*rm->p));
    for (size_t i = 0; i < rm->n; i++) {
        struct rlink *l = &rm->l[i];

        l->e = e;
        snprintf(l->name, sizeof(l->name), "%s", e->o.remote.hosts[i]);
        /* Its ranks are shown on the name the head was given (without a user@), never on
         * what its agent calls itself. */
        {
            /* A pod's ranks are on POD@NODE (two pods on one node show it), or on the pod
             * alone when both do not fit: the pod's name is never cut. */
            char host[sizeof(l->src.host)], both[sizeof(l->src.host) * 2];

            snprintf(host, sizeof(host), "%s",
                     strchr(l->name, '@') ? strchr(l->name, '@') + 1 : l->name);
            if (node_of(e, i) &&
                snprintf(both, sizeof(both), "%s@%s", l->name, node_of(e, i)) < (int)sizeof(host))
                memcpy(host, both, strlen(both) + 1);
            pthread_mutex_lock(&e->lock);
            rsource_init(&l->src, (int)i + 1, host, &e->rclaims);
            pthread_mutex_unlock(&e->lock);
        }
        l->proc = engine_launch_per_host(rm->how) ? i : 0;
        l->state = ENGINE_HOST_CONNECTING;
        l->win_t0 = now;
    }
    for (size_t i = 0; i < rm->np; i++) {
        struct rproc *p = &rm->p[i];

        p->in_fd = p->out_fd = p->err_fd = -1;
        p->first = engine_launch_per_host(rm->how) ? i : 0;
        p->n = engine_launch_per_host(rm->how) ? 1 : rm->n;
        p->backoff_ns = BACKOFF_MIN_NS;
        if (rm->how == ENGINE_LAUNCH_SRUN)
            p->task_link = x_calloc(p->n ? p->n : 1, sizeof(int));
    }
}

void *engine_remote_main(void *arg)
{
    struct engine *e = arg;
    struct remote rm = {0};

    signal(SIGPIPE, SIG_IGN); /* a dead link is an EPIPE to handle, not a reason to die */
    remote_init(&rm, e, clock_mono_ns());
    while (!engine_wait(e, 0))
        remote_pass(&rm);
    remote_stop(&rm);
    return NULL;
}
