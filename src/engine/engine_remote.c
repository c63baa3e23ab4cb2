/* The head's collector of other nodes: one thread that starts `ranktop agent` on every host
 * through the remote shell, reads every agent stream and turns it into history records, as
 * the local collectors do for this node.
 *
 * Threads and locking: this thread owns every link (process, pipes, parse state and id
 * tables); it reads with the engine lock released, then takes the lock once per batch of
 * lines to apply them, and publishes each host's state (engine_hosts) and devices under it.
 * Invariants: agent output is untrusted: lines are capped, messages validated by the parser,
 * ids bounded, and a message that refers to something undefined is dropped and counted as
 * that host's error, never a crash. A rank on a host is keyed engine_key(slot, pid). No shell
 * string is ever built: the remote shell is exec'd with an argv whose words are ours (host
 * names were validated before). A host whose link fails is reconnected with capped backoff;
 * stopping closes every agent's stdin (agents exit on EOF), then kills what is left. */
#include "engine_priv.h"

#include "ranktop/agentproto.h"
#include "ranktop/util.h"

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

#define BACKOFF_MIN_NS 1000000000ull
#define BACKOFF_MAX_NS 30000000000ull
#define PING_EVERY_NS 2000000000ull
#define LINE_CAP (64 * 1024) /* the head's own cap: srun keeps lines far shorter */
#define FRAME_GROWTH 65536   /* an id may run at most this far past the table */

struct rframe {
    char *fn, *file;
    int line;
};

struct rstack {
    uint32_t head; /* the history's stack id; HSTACK_NONE while incomplete */
    uint32_t n, got;
    uint32_t *ids;
};

struct rthread {
    bool defined, gone;
    int key, worker, tid;
    uint64_t ident;
    bool main;
    char name[64];
    uint32_t cur;  /* current head stack */
    size_t ri, ti; /* cached indexes into the history, checked on use */
};

struct rlink {
    char name[64];
    int slot;
    pid_t pid;
    int in_fd, out_fd, err_fd;
    enum engine_host_state state;
    struct agentproto_lines lines, errs;
    bool hello, refused;
    char version[32], agent_host[64], error[256];
    int64_t offset_ns, rtt_ns;
    uint64_t last_msg, next_connect, backoff_ns, next_ping;
    uint64_t up_since; /* its hello; the backoff resets only after a while up */
    uint64_t win_t0, win_bytes;
    double bps;
    unsigned connects;
    uint64_t passes, nstack, errors, lost; /* the agent's totals (this connection) */
    uint64_t base[4];                      /* totals of earlier connections */
    struct rframe *frames;
    size_t nframes;
    struct rstack *stacks;
    size_t nstacks;
    struct rthread *threads;
    size_t nthreads;
    struct smi_device *devs;
    size_t ndevs;
    int *keys; /* rank keys this host has defined */
    size_t nkeys;
};

struct remote {
    struct engine *e;
    struct rlink *l;
    size_t n;
};

static void set_error(struct rlink *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(struct rlink *l, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(l->error, sizeof(l->error), fmt, ap);
    va_end(ap);
}

/* Forgets everything a previous agent on this link defined: a new agent numbers anew. */
static void link_reset_ids(struct rlink *l)
{
    for (size_t i = 0; i < l->nframes; i++) {
        free(l->frames[i].fn);
        free(l->frames[i].file);
    }
    for (size_t i = 0; i < l->nstacks; i++)
        free(l->stacks[i].ids);
    free(l->frames);
    free(l->stacks);
    free(l->threads);
    l->frames = NULL;
    l->stacks = NULL;
    l->threads = NULL;
    l->nframes = l->nstacks = l->nthreads = 0;
    l->hello = false;
    l->rtt_ns = INT64_MAX;
}

/* The remote command: RSH... HOST RANKTOP agent ARGS, every word ours. */
static char **agent_argv(const struct engine *e, const char *host)
{
    const struct engine_remote_opts *r = &e->o.remote;
    char **v = x_calloc(r->nrsh + 12, sizeof(char *));
    char rate[32];
    size_t n = 0;

    for (size_t i = 0; i < r->nrsh; i++)
        v[n++] = x_strdup(r->rsh[i]);
    v[n++] = x_strdup(host);
    v[n++] = x_strdup(r->ranktop && r->ranktop[0] ? r->ranktop : "ranktop");
    v[n++] = x_strdup("agent");
    snprintf(rate, sizeof(rate), "%g", e->o.rate_hz);
    v[n++] = x_strdup("--rate");
    v[n++] = x_strdup(rate);
    if (e->o.all_threads)
        v[n++] = x_strdup("--all-threads");
    if (!e->o.gil)
        v[n++] = x_strdup("--no-gil");
    if (!e->o.mem)
        v[n++] = x_strdup("--no-mem");
    return v;
}

static void argv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
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

/* Starts the remote shell with three pipes, in a process group of its own so that stopping
 * can kill it and whatever it started locally. Returns 0 or -errno. */
static int link_spawn(struct remote *rm, struct rlink *l)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, rc;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, dfl;
    char **argv = agent_argv(rm->e, l->name);

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
    rc = -posix_spawnp(&l->pid, argv[0], &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
out:
    /* The child's ends are closed here in any case; ours are kept only on success. */
    close_fd(&in[0]);
    close_fd(&out[1]);
    close_fd(&err[1]);
    if (rc == 0) {
        l->in_fd = in[1];
        l->out_fd = out[0];
        l->err_fd = err[0];
        nonblock(l->in_fd);
        nonblock(l->out_fd);
        nonblock(l->err_fd);
    } else {
        close_fd(&in[1]);
        close_fd(&out[0]);
        close_fd(&err[0]);
        l->pid = 0;
        set_error(l, "cannot start '%s': %s", argv[0], strerror(-rc));
    }
    argv_free(argv);
    return rc;
}

/* Ends the link's process: stdin closed first (the agent exits on EOF), then the group
 * killed; the child is reaped. The host goes down and is retried after the backoff. */
static void link_down(struct rlink *l, uint64_t now, const char *why)
{
    close_fd(&l->in_fd);
    close_fd(&l->out_fd);
    close_fd(&l->err_fd);
    if (l->pid > 0) {
        int st;

        kill(-l->pid, SIGTERM);
        kill(l->pid, SIGTERM);
        if (waitpid(l->pid, &st, WNOHANG) == 0) {
            kill(-l->pid, SIGKILL);
            kill(l->pid, SIGKILL);
            waitpid(l->pid, &st, 0);
        }
    }
    l->pid = 0;
    if (why && why[0] && !l->refused)
        set_error(l, "%s", why);
    l->state = ENGINE_HOST_DOWN;
    l->next_connect = now + l->backoff_ns;
    l->backoff_ns = l->backoff_ns * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : l->backoff_ns * 2;
}

/* Keeps what an agent counted when its connection ends: a new agent counts from 0. */
static void keep_totals(struct rlink *l)
{
    l->base[0] += l->passes;
    l->base[1] += l->nstack;
    l->base[2] += l->errors;
    l->base[3] += l->lost;
    l->passes = l->nstack = l->errors = l->lost = 0;
}

static void link_connect(struct remote *rm, struct rlink *l, uint64_t now)
{
    keep_totals(l);
    link_reset_ids(l);
    agentproto_lines_fini(&l->lines);
    agentproto_lines_fini(&l->errs);
    agentproto_lines_init(&l->lines, LINE_CAP);
    agentproto_lines_init(&l->errs, 4096);
    l->connects++;
    l->refused = false;
    if (link_spawn(rm, l) < 0) {
        l->state = ENGINE_HOST_DOWN;
        l->next_connect = now + l->backoff_ns;
        l->backoff_ns = l->backoff_ns * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : l->backoff_ns * 2;
        return;
    }
    l->state = ENGINE_HOST_CONNECTING;
    l->last_msg = 0;
    l->next_ping = now + PING_EVERY_NS;
}

/* ---- applying messages (engine lock held) ---- */

static uint64_t head_time(const struct engine *e, const struct rlink *l, int64_t agent_ns)
{
    int64_t t = agent_ns + l->offset_ns;

    return t < (int64_t)e->hist.t0 ? e->hist.t0 : (uint64_t)t;
}

/* Grows a table so that id is an index into it; false when id runs too far past its end
 * (a hostile id must not make the head allocate gigabytes). */
static bool fit(void **v, size_t *n, size_t size, uint32_t id)
{
    size_t m;

    if (id < *n)
        return true;
    if (id >= AGENTPROTO_ID_MAX || id > *n + FRAME_GROWTH)
        return false;
    m = id + 1 > *n * 2 ? id + 1 : *n * 2;
    *v = x_reallocarray(*v, m, size);
    memset((char *)*v + *n * size, 0, (m - *n) * size);
    *n = m;
    return true;
}

static void on_frame(struct rlink *l, const struct agentproto_frame *f)
{
    struct rframe *r;

    if (!fit((void **)&l->frames, &l->nframes, sizeof(*l->frames), f->id)) {
        set_error(l, "agent stream: frame id %u out of range", f->id);
        return;
    }
    r = &l->frames[f->id];
    free(r->fn);
    free(r->file);
    r->fn = x_strdup(f->function);
    r->file = x_strdup(f->file);
    r->line = f->line;
}

/* Interns a complete stack; its frames were defined before (else the stack is dropped). */
static void stack_done(struct engine *e, struct rlink *l, struct rstack *s, uint32_t id)
{
    struct hframe *fr = x_calloc(s->n ? s->n : 1, sizeof(*fr));

    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t f = s->ids[i];

        if (f >= l->nframes || !l->frames[f].fn) {
            set_error(l, "agent stream: stack %u names undefined frame %u", id, f);
            free(fr);
            return;
        }
        /* The wire has them outermost first; the history interns innermost first. */
        fr[s->n - 1 - i] = (struct hframe){l->frames[f].fn, l->frames[f].file, l->frames[f].line};
    }
    s->head = history_intern_stack(&e->hist, fr, s->n);
    free(fr);
}

static void on_stack(struct engine *e, struct rlink *l, const struct agentproto_stack *m)
{
    struct rstack *s;

    if (!fit((void **)&l->stacks, &l->nstacks, sizeof(*l->stacks), m->id)) {
        set_error(l, "agent stream: stack id %u out of range", m->id);
        return;
    }
    s = &l->stacks[m->id];
    if (m->at == 0) {
        free(s->ids);
        *s = (struct rstack){.head = HSTACK_NONE, .n = m->n};
        s->ids = x_calloc(m->n ? m->n : 1, sizeof(*s->ids));
    } else if (m->at != s->got || m->n != s->n || s->head != HSTACK_NONE) {
        set_error(l, "agent stream: stack %u chunk out of order", m->id);
        return;
    }
    memcpy(s->ids + s->got, m->frames, m->nchunk * sizeof(*s->ids));
    s->got += m->nchunk;
    if (s->got == s->n)
        stack_done(e, l, s, m->id);
}

static void remember_key(struct rlink *l, int key)
{
    for (size_t i = 0; i < l->nkeys; i++)
        if (l->keys[i] == key)
            return;
    l->keys = x_reallocarray(l->keys, l->nkeys + 1, sizeof(*l->keys));
    l->keys[l->nkeys++] = key;
}

/* A rank number another live process already has: said as this host's error. */
static void check_claim(const struct engine *e, struct rlink *l, int key, int rank)
{
    for (size_t i = 0; rank >= 0 && i < e->hist.nranks; i++) {
        const struct hrank *o = &e->hist.ranks[i];

        if (o->pid != key && o->rank == rank && !o->exited) {
            set_error(l, "rank %d is claimed twice: %s pid %d and %s pid %d", rank, o->host,
                      history_key_pid(o->pid), l->agent_host, history_key_pid(key));
            return;
        }
    }
}

static void on_rank(struct engine *e, struct rlink *l, const struct agentproto_rank *m)
{
    int key = engine_key(l->slot, m->pid);
    struct hrank *r = history_rank(&e->hist, key, m->rank, m->device);

    if (r->rank != m->rank || !r->start)
        check_claim(e, l, key, m->rank);
    remember_key(l, key);
    snprintf(r->host, sizeof(r->host), "%s", l->agent_host);
    r->rank = m->rank;
    snprintf(r->device, sizeof(r->device), "%s", m->device);
    snprintf(r->python, sizeof(r->python), "%s", m->python);
    if (!r->start)
        r->start = head_time(e, l, m->ts);
    if (m->exited && !r->exited) {
        history_rank_exit(r, head_time(e, l, m->ts));
        r->exit_code = m->exit_code;
        r->exit_signal = m->exit_signal;
    }
}

static void on_thread(struct rlink *l, const struct agentproto_thread *m)
{
    struct rthread *t;

    if (!fit((void **)&l->threads, &l->nthreads, sizeof(*l->threads), m->id)) {
        set_error(l, "agent stream: thread id %u out of range", m->id);
        return;
    }
    t = &l->threads[m->id];
    if (!t->defined)
        *t = (struct rthread){.cur = HSTACK_NONE, .ri = SIZE_MAX, .ti = SIZE_MAX};
    t->defined = true;
    t->key = engine_key(l->slot, m->pid);
    t->worker = m->worker;
    t->ident = m->ident;
    t->tid = m->tid;
    t->main = m->main;
    snprintf(t->name, sizeof(t->name), "%s", m->name);
    t->ti = SIZE_MAX; /* the name may have changed: look it up again */
}

/* The history's record of a remote thread, through cached indexes checked on every use
 * (records are only appended, so an index stays right once found). */
static struct hthread *hist_thread(struct engine *e, struct rthread *t)
{
    struct history *h = &e->hist;
    struct hrank *r;
    struct hthread *ht;

    if (t->ri >= h->nranks || h->ranks[t->ri].pid != t->key) {
        t->ri = SIZE_MAX;
        for (size_t i = h->nranks; i-- > 0 && t->ri == SIZE_MAX;)
            if (h->ranks[i].pid == t->key)
                t->ri = i;
        if (t->ri == SIZE_MAX)
            return NULL; /* a thread of a rank the agent never defined */
        t->ti = SIZE_MAX;
    }
    r = &h->ranks[t->ri];
    if (t->ti < r->nthreads) {
        ht = &r->threads[t->ti];
        if (ht->ident == t->ident && ht->worker == t->worker && !ht->gone)
            return ht;
    }
    ht = t->worker ? history_worker_thread(r, t->worker, t->ident, t->tid, t->name)
                   : history_thread(r, t->ident, t->tid, t->name, t->main);
    t->ti = (size_t)(ht - r->threads);
    return ht;
}

static struct rthread *thread_of(struct rlink *l, uint32_t id)
{
    if (id >= l->nthreads || !l->threads[id].defined) {
        set_error(l, "agent stream: undefined thread %u", id);
        return NULL;
    }
    return &l->threads[id];
}

static void on_run(struct engine *e, struct rlink *l, const struct agentproto_run *m)
{
    struct rthread *t = thread_of(l, m->thread);
    struct hthread *ht;
    uint32_t s = HSTACK_NONE;

    if (!t)
        return;
    if (m->stack >= 0) {
        if ((size_t)m->stack >= l->nstacks || l->stacks[m->stack].head == HSTACK_NONE) {
            set_error(l, "agent stream: undefined stack %lld", (long long)m->stack);
            return;
        }
        s = l->stacks[m->stack].head;
    }
    if (!(ht = hist_thread(e, t)))
        return;
    t->cur = s;
    t->gone = false;
    history_observe(ht, s, head_time(e, l, m->ts));
}

static void on_gone(struct engine *e, struct rlink *l, const struct agentproto_run *m)
{
    struct rthread *t = thread_of(l, m->thread);
    struct hthread *ht;

    if (!t || t->gone || !(ht = hist_thread(e, t)))
        return;
    history_thread_gone(ht, head_time(e, l, m->ts));
    t->gone = true;
}

/* Every live thread of the host still showed its stack at ts: its run extends to ts. */
static void on_tick(struct engine *e, struct rlink *l, int64_t ts)
{
    uint64_t t = head_time(e, l, ts);

    for (size_t i = 0; i < l->nthreads; i++) {
        struct rthread *rt = &l->threads[i];
        struct hthread *ht;

        if (rt->defined && !rt->gone && (ht = hist_thread(e, rt)) && ht->nruns)
            history_observe(ht, rt->cur, t);
    }
}

static void on_counter(struct engine *e, struct rlink *l, const struct agentproto_counter *m)
{
    char name[48];
    enum series_id id = (enum series_id)m->id;

    if (m->id <= SERIES_NONE || m->id >= SERIES_COUNT)
        return;             /* a counter a newer agent knows: ignored */
    if (!series_name(id)) { /* a device's: named after it, and the host tells devices apart */
        snprintf(name, sizeof(name), "%.20s %.26s", l->agent_host, m->name);
        history_counter(&e->hist, id, name, 0, head_time(e, l, m->ts), m->v);
        return;
    }
    if (m->pid)
        history_counter(&e->hist, id, NULL, engine_key(l->slot, m->pid), head_time(e, l, m->ts),
                        m->v);
}

static void on_live(struct engine *e, struct rlink *l, const struct agentproto_live *m)
{
    struct engine_rank_live *v = engine_live_locked(e, engine_key(l->slot, m->pid));

    v->dev_mem_mb = m->dev_mem_mb;
    v->gil_busy_pct = m->gil_busy_pct;
    v->gil_switches = m->gil_switches;
    v->gil_waiters = m->gil_waiters;
    v->nshares = m->nshares < 16 ? m->nshares : 16;
    for (size_t i = 0; i < v->nshares; i++) {
        v->shares[i].ident = m->shares[i].ident;
        v->shares[i].pct = m->shares[i].pct;
    }
}

static void on_device(struct rlink *l, const struct agentproto_device *m)
{
    struct smi_device *d = NULL;

    for (size_t i = 0; i < l->ndevs && !d; i++)
        if ((l->devs[i].kind == SMI_KIND_NPU) == m->npu && l->devs[i].index == m->index &&
            l->devs[i].chip == m->chip)
            d = &l->devs[i];
    if (!d) {
        if (l->ndevs >= 256)
            return;
        l->devs = x_reallocarray(l->devs, l->ndevs + 1, sizeof(*l->devs));
        d = &l->devs[l->ndevs++];
    }
    memset(d, 0, sizeof(*d));
    d->kind = m->npu ? SMI_KIND_NPU : SMI_KIND_GPU;
    d->index = m->index;
    d->chip = m->chip;
    d->valid = SMI_DEV_INDEX | SMI_DEV_NAME | (m->npu ? SMI_DEV_CHIP : 0);
    snprintf(d->name, sizeof(d->name), "%s", m->name);
    snprintf(d->host, sizeof(d->host), "%s", l->agent_host);
#define DEV_FIELD(bit, field, v)                                                                   \
    if ((v) >= 0) {                                                                                \
        d->valid |= (bit);                                                                         \
        d->field = (v);                                                                            \
    }
    DEV_FIELD(SMI_DEV_UTIL, util_pct, m->util_pct)
    DEV_FIELD(SMI_DEV_MEM_USED, mem_used_mb, m->mem_used_mb)
    DEV_FIELD(SMI_DEV_MEM_TOTAL, mem_total_mb, m->mem_total_mb)
    DEV_FIELD(SMI_DEV_TEMP, temp_c, m->temp_c)
    DEV_FIELD(SMI_DEV_POWER, power_w, m->power_w)
#undef DEV_FIELD
}

static void on_hello(struct engine *e, struct rlink *l, const struct agentproto_hello *m,
                     uint64_t now)
{
    (void)e;
    if (m->major != AGENTPROTO_MAJOR) {
        set_error(l,
                  "agent speaks protocol %d.%d (ranktop %s); this head speaks %d: install the "
                  "same ranktop on every node",
                  m->major, m->minor, m->version, AGENTPROTO_MAJOR);
        l->refused = true;
        return;
    }
    l->hello = true;
    snprintf(l->version, sizeof(l->version), "%s", m->version);
    snprintf(l->agent_host, sizeof(l->agent_host), "%s", m->host[0] ? m->host : l->name);
    /* First guess: the line took no time to come; pings refine it. */
    l->offset_ns = (int64_t)now - m->mono_ns;
    l->state = ENGINE_HOST_UP;
    l->error[0] = '\0';
    l->up_since = now;
}

/* Cristian's method: the ping with the shortest round trip bounds the offset best. */
static void on_pong(struct rlink *l, int64_t head_ns, int64_t agent_ns, uint64_t now)
{
    int64_t rtt = (int64_t)now - head_ns;

    if (rtt < 0 || head_ns <= 0 || rtt >= l->rtt_ns)
        return;
    l->rtt_ns = rtt;
    l->offset_ns = (head_ns + rtt / 2) - agent_ns;
}

static void apply(struct engine *e, struct rlink *l, const struct agentproto_msg *m, uint64_t now)
{
    if (!l->hello && m->type != AGENTPROTO_HELLO) {
        set_error(l, "agent stream: a message before the hello");
        return;
    }
    switch (m->type) {
    case AGENTPROTO_HELLO:
        on_hello(e, l, &m->u.hello, now);
        break;
    case AGENTPROTO_FRAME:
        on_frame(l, &m->u.frame);
        break;
    case AGENTPROTO_STACK:
        on_stack(e, l, &m->u.stack);
        break;
    case AGENTPROTO_RANK:
        on_rank(e, l, &m->u.rank);
        break;
    case AGENTPROTO_THREAD:
        on_thread(l, &m->u.thread);
        break;
    case AGENTPROTO_RUN:
        on_run(e, l, &m->u.run);
        break;
    case AGENTPROTO_GONE:
        on_gone(e, l, &m->u.run);
        break;
    case AGENTPROTO_TICK:
        on_tick(e, l, m->u.tick.ts);
        /* An agent that dies right after its hello must not be restarted every second. */
        if (now - l->up_since > BACKOFF_MAX_NS)
            l->backoff_ns = BACKOFF_MIN_NS;
        l->passes = m->u.tick.passes;
        l->nstack = m->u.tick.stacks;
        l->errors = m->u.tick.errors;
        l->lost = m->u.tick.lost;
        break;
    case AGENTPROTO_COUNTER:
        on_counter(e, l, &m->u.counter);
        break;
    case AGENTPROTO_LIVE:
        on_live(e, l, &m->u.live);
        break;
    case AGENTPROTO_DEVICE:
        on_device(l, &m->u.device);
        break;
    case AGENTPROTO_PONG:
        on_pong(l, m->u.pong.head_ns, m->u.pong.agent_ns, now);
        break;
    case AGENTPROTO_ERROR:
        if (m->u.text[0])
            set_error(l, "agent: %s", m->u.text);
        break;
    case AGENTPROTO_BYE:
        set_error(l, "agent left: %s", m->u.text);
        break;
    case AGENTPROTO_UNKNOWN:
        break;
    }
}

/* Reads what the agent wrote and applies every complete line under one lock. Returns false
 * when the stream ended. */
static bool link_read(struct engine *e, struct rlink *l, uint64_t now)
{
    char buf[65536];
    ssize_t n;
    bool open = true;
    const char *line;
    long len;

    while ((n = read(l->out_fd, buf, sizeof(buf))) > 0) {
        agentproto_lines_feed(&l->lines, buf, (size_t)n);
        l->win_bytes += (uint64_t)n;
        if (n < (ssize_t)sizeof(buf))
            break;
    }
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        open = false;
    pthread_mutex_lock(&e->lock);
    while ((len = agentproto_lines_next(&l->lines, &line)) >= 0 && !l->refused) {
        struct agentproto_msg m;
        struct app_err err = {0};

        if (agentproto_parse(line, (size_t)len, &m, &err) < 0) {
            set_error(l, "agent stream: %s", err.msg);
            continue;
        }
        l->last_msg = now;
        apply(e, l, &m, now);
    }
    pthread_mutex_unlock(&e->lock);
    if (l->lines.oversized)
        set_error(l, "agent stream: %llu line(s) over %d bytes dropped",
                  (unsigned long long)l->lines.oversized, LINE_CAP);
    return open && !l->refused;
}

/* The remote shell's own complaints (ssh: connection refused, unknown host...): the last
 * line is the host's error when the link fails. */
static void link_read_err(struct rlink *l)
{
    char buf[4096], last[256] = "";
    const char *line;
    ssize_t n;
    long len;

    while ((n = read(l->err_fd, buf, sizeof(buf))) > 0)
        agentproto_lines_feed(&l->errs, buf, (size_t)n);
    while ((len = agentproto_lines_next(&l->errs, &line)) >= 0)
        if (len > 0) {
            snprintf(last, sizeof(last), "%.*s", (int)len, line);
            for (char *c = last; *c; c++)
                if ((unsigned char)*c < 0x20 || *c == 0x7f)
                    *c = '?';
        }
    if (last[0])
        set_error(l, "%s", last);
    if (n == 0)
        close_fd(&l->err_fd);
}

static void link_ping(struct rlink *l, uint64_t now)
{
    char cmd[48];
    int n = snprintf(cmd, sizeof(cmd), "ping %llu\n", (unsigned long long)now);

    l->next_ping = now + PING_EVERY_NS;
    /* A pipe that cannot take 30 bytes now means a stuck link: the next ping tries again. */
    if (l->in_fd >= 0 && write(l->in_fd, cmd, (size_t)n) < 0 && errno == EPIPE)
        close_fd(&l->in_fd);
}

/* Host states and devices for readers, under the lock. */
static void publish(struct remote *rm, uint64_t now)
{
    struct engine *e = rm->e;
    size_t nd = 0;

    pthread_mutex_lock(&e->lock);
    for (size_t i = 0; i < rm->n; i++) {
        struct rlink *l = &rm->l[i];
        struct engine_host *h = &e->hosts[i];

        if (l->state == ENGINE_HOST_UP && l->last_msg && now - l->last_msg > ENGINE_LAG_NS)
            l->state = ENGINE_HOST_LAGGING;
        else if (l->state == ENGINE_HOST_LAGGING && now - l->last_msg <= ENGINE_LAG_NS)
            l->state = ENGINE_HOST_UP;
        if (now - l->win_t0 >= 2000000000ull) {
            l->bps = (double)l->win_bytes * 1e9 / (double)(now - l->win_t0);
            l->win_t0 = now;
            l->win_bytes = 0;
        }
        snprintf(h->name, sizeof(h->name), "%s", l->name);
        snprintf(h->agent_host, sizeof(h->agent_host), "%s", l->agent_host);
        snprintf(h->version, sizeof(h->version), "%s", l->version);
        snprintf(h->error, sizeof(h->error), "%s", l->error);
        h->state = l->state;
        h->ranks = (int)l->nkeys;
        h->age_s = l->last_msg ? (double)(now - l->last_msg) / 1e9 : -1;
        h->bytes_per_s = l->bps;
        h->offset_ms = (double)l->offset_ns / 1e6;
        h->offset_err_ms = l->rtt_ns == INT64_MAX ? -1 : (double)l->rtt_ns / 2e6;
        h->connects = l->connects;
        nd += l->ndevs;
    }
    e->rpasses = 0;
    e->rstacks = e->rerrors = e->rlost = 0;
    for (size_t i = 0; i < rm->n; i++) { /* the slowest-sampling host is not hidden by max */
        const struct rlink *l = &rm->l[i];
        uint64_t passes = l->base[0] + l->passes;

        e->rpasses = passes > e->rpasses ? passes : e->rpasses;
        e->rstacks += l->base[1] + l->nstack;
        e->rerrors += l->base[2] + l->errors;
        e->rlost += l->base[3] + l->lost;
    }
    free(e->rdevs);
    e->rdevs = x_calloc(nd ? nd : 1, sizeof(*e->rdevs));
    e->nrdevs = 0;
    for (size_t i = 0; i < rm->n; i++)
        for (size_t k = 0; k < rm->l[i].ndevs; k++)
            e->rdevs[e->nrdevs++] = rm->l[i].devs[k];
    pthread_mutex_unlock(&e->lock);
}

/* One pass: (re)connect what is due, ping, wait for output up to 100 ms, read it. */
static void remote_pass(struct remote *rm)
{
    struct pollfd *p = x_calloc(rm->n * 2 + 1, sizeof(*p));
    size_t np = 0;
    uint64_t now = clock_mono_ns();

    for (size_t i = 0; i < rm->n; i++) {
        struct rlink *l = &rm->l[i];

        if (l->state == ENGINE_HOST_DOWN && !l->pid && now >= l->next_connect)
            link_connect(rm, l, now);
        if (l->pid && l->hello && now >= l->next_ping)
            link_ping(l, now);
    }
    p[np++] = (struct pollfd){.fd = rm->e->stop_fd, .events = POLLIN};
    for (size_t i = 0; i < rm->n; i++) {
        p[np++] = (struct pollfd){.fd = rm->l[i].out_fd, .events = POLLIN};
        p[np++] = (struct pollfd){.fd = rm->l[i].err_fd, .events = POLLIN};
    }
    if (poll(p, np, 100) > 0) {
        now = clock_mono_ns();
        for (size_t i = 0; i < rm->n; i++) {
            struct rlink *l = &rm->l[i];

            if (l->err_fd >= 0 && p[2 + 2 * i].revents)
                link_read_err(l);
            if (l->out_fd >= 0 && p[1 + 2 * i].revents && !link_read(rm->e, l, now)) {
                if (l->err_fd >= 0)
                    link_read_err(l);
                link_down(l, now, l->error[0] ? NULL : "the agent's stream ended");
            }
        }
    }
    free(p);
    publish(rm, clock_mono_ns());
}

/* Closes every agent's stdin (each exits on EOF within a second), gives the remote shells
 * 1.5 s to end, then kills what is left; frees the links. */
static void remote_stop(struct remote *rm)
{
    uint64_t end = clock_mono_ns() + 1500000000ull;
    bool any = true;

    for (size_t i = 0; i < rm->n; i++)
        close_fd(&rm->l[i].in_fd);
    while (any && clock_mono_ns() < end) {
        any = false;
        for (size_t i = 0; i < rm->n; i++) {
            int st;

            if (rm->l[i].pid > 0 && waitpid(rm->l[i].pid, &st, WNOHANG) == rm->l[i].pid)
                rm->l[i].pid = 0;
            any |= rm->l[i].pid > 0;
        }
        if (any)
            usleep(20000);
    }
    for (size_t i = 0; i < rm->n; i++) {
        struct rlink *l = &rm->l[i];

        link_down(l, 0, NULL);
        link_reset_ids(l);
        agentproto_lines_fini(&l->lines);
        agentproto_lines_fini(&l->errs);
        free(l->devs);
        free(l->keys);
    }
    free(rm->l);
}

void *engine_remote_main(void *arg)
{
    struct engine *e = arg;
    struct remote rm = {.e = e, .n = e->o.remote.nhosts};
    uint64_t now = clock_mono_ns();

    signal(SIGPIPE, SIG_IGN); /* a dead link is an EPIPE to handle, not a reason to die */
    rm.l = x_calloc(rm.n ? rm.n : 1, sizeof(*rm.l));
    for (size_t i = 0; i < rm.n; i++) {
        struct rlink *l = &rm.l[i];

        snprintf(l->name, sizeof(l->name), "%s", e->o.remote.hosts[i]);
        snprintf(l->agent_host, sizeof(l->agent_host), "%s", l->name);
        l->slot = (int)i + 1;
        l->in_fd = l->out_fd = l->err_fd = -1;
        l->backoff_ns = BACKOFF_MIN_NS;
        l->state = ENGINE_HOST_DOWN;
        l->win_t0 = now;
    }
    while (!engine_wait(e, 0))
        remote_pass(&rm);
    remote_stop(&rm);
    return NULL;
}
