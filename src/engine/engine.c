/* The sampling engine: collector threads writing one history.
 *
 * Threads: discovery (every disc period: device tools + /proc, publishes the target list and
 * device counters), sampler (stack samples of every target at the set rate), and optional
 * memory and GIL threads. Locking protocol: e->lock guards the history, the target list and
 * the statistics; a thread does its I/O (tools, /proc, process_vm_readv) with the lock
 * released, then takes it briefly to record the result. No lock is held across I/O, and the
 * sampler never waits on a tool. Each pyproc belongs to the one thread that opened it.
 *
 * Stopping: engine_stop sets stop, broadcasts and makes e->stop_fd (an eventfd) readable.
 * Threads that sleep wait on the condition (the sampler polls stop_fd: engine_sleep); threads
 * that block in I/O poll stop_fd (the exit thread), and the discovery thread names it as its
 * exec cancel descriptor, so a device tool that hangs is killed at once instead of at its
 * deadline. Every thread is then joined, for STOP_JOIN_NS at most (REMOTE_STOP_NS for the
 * remote collector, which lets its agents end first): a collector stuck in a system call (an
 * object of a target on a file system that never answers) must not keep ranktop from ending
 * once asked to. One that is not back by then is left running and said so; the engine is
 * then never freed (that thread may still use it), and the process ends with _exit
 * (engine_left_threads). */
#include "ranktop/engine/engine.h"
#include "engine_priv.h"

#include "ranktop/devices/exec.h"
#include "ranktop/python/pystack.h"
#include "ranktop/base/util.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* How long engine_stop waits for a thread: a local collector notices stop within a pass; the
 * remote collector gives its agents 1.5 s to end on their own (remote_stop) first. */
#define STOP_JOIN_NS 500000000ull
#define REMOTE_STOP_NS 2500000000ull

/* An engine a stuck thread still uses: kept reachable, so leak checkers do not count it; and
 * whether any thread was left (engine_left_threads). */
static struct engine *_Atomic left_running;
static atomic_bool threads_left;

/* ThreadSanitizer intercepts pthread_join and pthread_timedjoin_np but not
 * pthread_clockjoin_np: a thread joined through the latter is still running as far as it
 * knows, so it reports a thread leak, and since the join orders nothing for it, every write
 * engine_free makes after the thread's last access as a race. TSan builds therefore join with
 * pthread_timedjoin_np, whose deadline is on CLOCK_REALTIME (so a step of the wall clock
 * during shutdown lengthens or shortens the wait there); other builds keep the monotonic
 * deadline, which no clock step moves. */
#if defined(__SANITIZE_THREAD__)
#define ENGINE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ENGINE_TSAN 1
#endif
#endif
#ifdef ENGINE_TSAN
static const clockid_t join_clock = CLOCK_REALTIME;
#else
static const clockid_t join_clock = CLOCK_MONOTONIC;
#endif

/* Joins th unless it is still running at deadline (on join_clock); returns 0 once joined. */
static int join_until(pthread_t th, const struct timespec *deadline)
{
#ifdef ENGINE_TSAN
    return pthread_timedjoin_np(th, NULL, deadline);
#else
    return pthread_clockjoin_np(th, NULL, join_clock, deadline);
#endif
}

/* Sleeps until abs_ns (CLOCK_MONOTONIC) or until stop is set. Returns true when stopping. */
bool engine_wait(struct engine *e, uint64_t abs_ns)
{
    struct timespec ts = {(time_t)(abs_ns / 1000000000u), (long)(abs_ns % 1000000000u)};
    bool stop;

    pthread_mutex_lock(&e->lock);
    while (!e->stop && clock_mono_ns() < abs_ns)
        if (pthread_cond_timedwait(&e->cond, &e->lock, &ts) == ETIMEDOUT)
            break;
    stop = e->stop;
    pthread_mutex_unlock(&e->lock);
    return stop;
}

/* Waits for the first discovery (or stop). Before it there is no target: a collector's first
 * round would find nothing, and its next one is a period away, so a short run at a low rate
 * would end with nothing from it. */
void engine_wait_discovered(struct engine *e)
{
    pthread_mutex_lock(&e->lock);
    while (!e->stop && !e->discovered)
        pthread_cond_wait(&e->cond, &e->lock);
    pthread_mutex_unlock(&e->lock);
}

/* The sampler's wait: ppoll on stop_fd instead of the condition. A condition wait leaves its
 * mutex marked contended (glibc relocks it so after a wait), so the unlock after every timed
 * wait was a futex system call of its own: two calls a sample where one does. stop_fd ends the
 * wait at once as the broadcast did. Same contract as engine_wait: returns at abs_ns, true
 * when stopping; a wait already past its deadline still looks at stop_fd, so an overrun
 * sampler stops. */
bool engine_sleep(struct engine *e, uint64_t abs_ns)
{
    struct pollfd pf = {e->stop_fd, POLLIN, 0};

    for (;;) {
        uint64_t now = clock_mono_ns(), left = abs_ns > now ? abs_ns - now : 0;
        struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
        int r = ppoll(&pf, 1, &ts, NULL);

        if (r > 0 && (pf.revents & POLLIN))
            return true;
        if (r == 0 && clock_mono_ns() >= abs_ns)
            return false;
        if ((r < 0 && errno != EINTR) || r > 0) /* no valid descriptor: the old way */
            return engine_wait(e, abs_ns);
    }
}

static void device_label(const struct proc_rec *r, char *buf, size_t len)
{
    buf[0] = '\0';
    if (!r->ndevs || r->devs[0].index < 0)
        return;
    if (r->devs[0].chip >= 0)
        snprintf(buf, len, "%s %d.%d", smi_kind_name(r->devs[0].kind), r->devs[0].index,
                 r->devs[0].chip);
    else
        snprintf(buf, len, "%s %d", smi_kind_name(r->devs[0].kind), r->devs[0].index);
}

/* The devices' counters as events of the discovery collector (a device's series is named
 * after it; the recorder keeps this node's names as they are). */
static void device_counters(struct engine *e, const struct discovery *d, uint64_t now,
                            struct engine_evbuf *out)
{
    for (size_t i = 0; i < d->devs.ndevs; i++) {
        const struct smi_device *dv = &d->devs.devs[i];
        char name[48];
        bool npu = dv->kind == SMI_KIND_NPU;
        struct record_event *m;

        if ((npu && !e->o.npu) || (!npu && !e->o.gpu) || !(dv->valid & SMI_DEV_INDEX))
            continue;
        if (npu)
            snprintf(name, sizeof(name), "npu%d.%d", dv->index, dv->chip < 0 ? 0 : dv->chip);
        else
            snprintf(name, sizeof(name), "gpu%d", dv->index);
        if (dv->valid & SMI_DEV_UTIL) {
            m = engine_evbuf_add(out, RECORD_COUNTER);
            *m = record_counter_event(npu ? SERIES_NPU_AICORE : SERIES_DEV_UTIL, 0, (int64_t)now,
                                      (double)dv->util_pct);
            snprintf(m->u.counter.name, sizeof(m->u.counter.name), "%s", name);
        }
        if (dv->valid & SMI_DEV_MEM_USED) {
            m = engine_evbuf_add(out, RECORD_COUNTER);
            *m = record_counter_event(SERIES_DEV_MEM, 0, (int64_t)now, (double)dv->mem_used_mb);
            snprintf(m->u.counter.name, sizeof(m->u.counter.name), "%.40s mem", name);
        }
    }
}

static int64_t dev_field(const struct smi_device *d, uint32_t bit, int64_t v)
{
    return (d->valid & bit) ? v : -1;
}

/* The pass's whole device list (record_device.first), or that it found none. */
static void device_list(const struct discovery *d, struct engine_evbuf *out)
{
    struct record_device *m;

    for (size_t i = 0; i < d->devs.ndevs; i++) {
        const struct smi_device *dv = &d->devs.devs[i];

        m = &engine_evbuf_add(out, RECORD_DEVICE)->u.device;
        *m = (struct record_device){.npu = dv->kind == SMI_KIND_NPU,
                                    .index = (dv->valid & SMI_DEV_INDEX) ? dv->index : -1,
                                    .chip = dv->chip,
                                    .util_pct = dev_field(dv, SMI_DEV_UTIL, dv->util_pct),
                                    .mem_used_mb = dev_field(dv, SMI_DEV_MEM_USED, dv->mem_used_mb),
                                    .mem_total_mb =
                                        dev_field(dv, SMI_DEV_MEM_TOTAL, dv->mem_total_mb),
                                    .temp_c = dev_field(dv, SMI_DEV_TEMP, dv->temp_c),
                                    .power_w = (dv->valid & SMI_DEV_POWER) ? dv->power_w : -1.0,
                                    .first = i == 0};
        snprintf(m->name, sizeof(m->name), "%s", dv->name);
    }
    if (!d->devs.ndevs)
        *engine_evbuf_add(out, RECORD_DEVICE) =
            (struct record_event){.type = RECORD_DEVICE, .u.device = {.first = true, .none = true}};
}

/* Each live process's device memory (all its devices together; -1 none known), as the
 * device-memory part of its live figures. */
static void device_memory(const struct discovery *d, struct engine_evbuf *out)
{
    for (size_t i = 0; i < d->nprocs; i++) {
        int64_t mb = -1;

        if (!d->procs[i].alive)
            continue;
        for (size_t k = 0; k < d->procs[i].ndevs; k++)
            if (d->procs[i].devs[k].mem_mb >= 0)
                mb = (mb < 0 ? 0 : mb) + d->procs[i].devs[k].mem_mb;
        engine_evbuf_add(out, RECORD_LIVE)->u.live = (struct record_live){
            .pid = d->procs[i].pid, .set = RECORD_LIVE_DEVMEM, .dev_mem_mb = mb, .syscall = -1};
    }
}

/* A process named with -p is sampled even when discovery does not (yet) see Python in it:
 * a launcher wrapper may still be exec'ing the interpreter. */
static bool named(const struct engine *e, int pid)
{
    for (int i = 0; i < e->o.disc.npids; i++)
        if (e->o.disc.pids[i] == pid)
            return true;
    return false;
}

/* The sampler's targets for discovery's ranks: each rank, then its workers under it. */
static struct target *make_targets(struct engine *e, const struct discovery *d, size_t *n)
{
    size_t cap = 1;
    struct target *t;

    for (size_t i = 0; i < d->nprocs; i++)
        cap += 1 + d->procs[i].nchildren;
    t = x_calloc(cap, sizeof(*t));
    *n = 0;
    for (size_t i = 0; i < d->nprocs; i++) {
        const struct proc_rec *r = &d->procs[i];
        size_t me = *n;

        if (!r->alive || (!r->python && !named(e, r->pid)))
            continue;
        t[*n].pid = r->pid;
        t[*n].rank = r->id.rank;
        device_label(r, t[*n].device, sizeof(t[*n].device));
        (*n)++;
        for (size_t k = 0; k < r->nchildren; k++) {
            t[*n] = t[me];
            t[*n].pid = r->children[k];
            t[*n].owner = r->pid;
            (*n)++;
        }
    }
    return t;
}

/* Publishes the Python processes discovery found as the sampler's targets. */
static void publish_targets(struct engine *e, const struct discovery *d, uint64_t now)
{
    size_t n = 0, at = 0;
    struct target *t = make_targets(e, d, &n);
    struct engine_evbuf b = {0};

    /* The pass's device counters, device list and device memory: one batch. */
    device_counters(e, d, now, &b);
    device_list(d, &b);
    device_memory(d, &b);
    engine_emit_buf(e, ENGINE_Q_DISCOVERY, &b);
    engine_evbuf_free(&b);
    pthread_mutex_lock(&e->lock);
    free(e->targets);
    e->targets = t;
    e->ntargets = n;
    e->targets_gen++;
    e->discovered = true;
    e->errors[0] = '\0';
    for (size_t i = 0; i < d->nerrors; i++)
        at += (size_t)snprintf(e->errors + at, at < sizeof(e->errors) ? sizeof(e->errors) - at : 0,
                               "%s%s", i ? "; " : "", d->errors[i]);
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

static bool stopping(struct engine *e)
{
    bool stop;

    pthread_mutex_lock(&e->lock);
    stop = e->stop;
    pthread_mutex_unlock(&e->lock);
    return stop;
}

static void *discovery_main(void *arg)
{
    struct engine *e = arg;
    uint64_t next = clock_mono_ns();

    /* A tool this thread runs is killed as soon as the engine stops. */
    exec_cancel_on(e->stop_fd);
    do {
        struct discovery d;
        struct app_err err = {0};

        discovery_init(&d);
        /* A pass cut short by a stop holds the cancelled tools' errors: not worth showing. */
        if (discovery_run(&e->o.disc, &d, &err) == 0 && !stopping(e))
            publish_targets(e, &d, clock_mono_ns());
        discovery_fini(&d);
        next += (uint64_t)e->o.discovery_ms * 1000000u;
    } while (!engine_wait(e, next));
    exec_cancel_on(-1);
    return NULL;
}

static void engine_init_sync(struct engine *e)
{
    pthread_condattr_t ca;

    pthread_mutex_init(&e->lock, NULL);
    pthread_mutex_init(&e->view_lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&e->view_cond, NULL);
    engine_queues_init(e);
}

static int64_t wall_us(void)
{
    struct timeval tv;

    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

/* Starts fn; engine_stop waits up to grace_ns for it. */
static int spawn(struct engine *e, void *(*fn)(void *), uint64_t grace_ns, struct app_err *err)
{
    int rc = pthread_create(&e->th[e->nth], NULL, fn, e);

    if (rc != 0)
        return app_err_set(err, APP_E_IO, "cannot start a collector thread: %s", strerror(rc));
    e->th_grace_ns[e->nth++] = grace_ns;
    return 0;
}

/* The local collectors when this node is watched, and the remote collector for other hosts. */
static int start_threads(struct engine *e, struct app_err *err)
{
    const struct engine_opts *o = &e->o;
    bool local = !o->remote.nhosts || o->remote.local;
    int rc = 0;

    if (!o->wire) { /* the history's one writer, before any collector hands it a batch */
        pthread_mutex_lock(&e->view_lock);
        e->rec_running = true;
        pthread_mutex_unlock(&e->view_lock);
        rc = spawn(e, engine_recorder_main, STOP_JOIN_NS, err);
        if (rc < 0) {
            e->rec_running = false;
            return rc;
        }
    }
    if (o->remote.nhosts) {
        e->nhosts = o->remote.nhosts;
        e->hosts = x_calloc(e->nhosts, sizeof(*e->hosts));
        for (size_t i = 0; i < e->nhosts; i++) {
            snprintf(e->hosts[i].name, sizeof(e->hosts[i].name), "%s", o->remote.hosts[i]);
            e->hosts[i].state = ENGINE_HOST_CONNECTING;
            e->hosts[i].age_s = e->hosts[i].offset_err_ms = -1;
        }
        if (rc == 0)
            rc = spawn(e, engine_remote_main, REMOTE_STOP_NS, err);
    }
    if (!local)
        return rc;
    if (rc == 0)
        rc = spawn(e, discovery_main, STOP_JOIN_NS, err);
    if (rc == 0)
        rc = spawn(e, engine_sampler_main, STOP_JOIN_NS, err);
    if (rc == 0 && o->mem)
        rc = spawn(e, engine_mem_main, STOP_JOIN_NS, err);
    if (rc == 0 && o->gil)
        rc = spawn(e, engine_gil_main, STOP_JOIN_NS, err);
    if (rc == 0)
        rc = spawn(e, engine_exit_main, STOP_JOIN_NS, err);
    return rc;
}

/* This node's collectors as source 0: its hello is at the history's start on the history's
 * own clock, so the offset is 0 and recorded times are the collectors' own. */
static void local_source(struct engine *e, const char *host)
{
    struct record_event hello = {.type = RECORD_HELLO};

    rsource_init(&e->local, 0, host, &e->local_claims);
    hello.u.hello.mono_ns = (int64_t)e->t_start;
    recorder_apply(&e->hist, &e->local, &hello, 1, e->t_start, NULL);
}

int engine_start(const struct engine_opts *o, struct engine **out, struct app_err *err)
{
    struct engine *e = x_calloc(1, sizeof(*e));
    char host[64] = "";
    int rc;

    e->o = *o;
    if (e->o.rate_hz <= 0)
        e->o.rate_hz = 10;
    if (e->o.discovery_ms <= 0)
        e->o.discovery_ms = (o->gpu || o->npu) ? 1000 : 2000;
    e->period_ns = (uint64_t)(1e9 / e->o.rate_hz);
    engine_init_sync(e);
    e->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    e->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (e->stop_fd < 0 || e->wake_fd < 0) {
        rc = app_err_set(err, APP_E_IO, "eventfd: %s", strerror(errno));
        if (e->stop_fd >= 0)
            close(e->stop_fd);
        if (e->wake_fd >= 0)
            close(e->wake_fd);
        engine_queues_fini(e);
        pthread_mutex_destroy(&e->lock);
        pthread_mutex_destroy(&e->view_lock);
        pthread_cond_destroy(&e->cond);
        pthread_cond_destroy(&e->view_cond);
        free(e);
        return rc;
    }
    gethostname(host, sizeof(host) - 1);
    e->t_start = clock_mono_ns();
    history_init(&e->hist, e->t_start, wall_us(), host);
    local_source(e, host);
    e->hist.window_ns = o->history_ns;
    e->hist.mem_cap = o->mem_cap;
    rc = start_threads(e, err);
    if (rc < 0) {
        engine_stop(e);
        engine_free(e);
        return rc;
    }
    *out = e;
    return 0;
}

void engine_stop(struct engine *e)
{
    uint64_t one = 1;
    struct timespec now;

    pthread_mutex_lock(&e->lock);
    e->stop = true;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    /* The counter only grows; one write keeps stop_fd readable for good. */
    if (write(e->stop_fd, &one, sizeof(one)) < 0)
        perror("ranktop: engine stop");
    clock_gettime(join_clock, &now);
    for (int i = 0; i < e->nth; i++) {
        struct timespec deadline = now;

        deadline.tv_nsec += (long)(e->th_grace_ns[i] % 1000000000ull);
        deadline.tv_sec +=
            (time_t)(e->th_grace_ns[i] / 1000000000ull) + deadline.tv_nsec / 1000000000L;
        deadline.tv_nsec %= 1000000000L;
        if (join_until(e->th[i], &deadline) != 0) {
            pthread_detach(e->th[i]);
            e->abandoned++;
        }
    }
    if (e->abandoned) {
        atomic_store(&threads_left, true);
        fprintf(stderr,
                "ranktop: %d collector thread(s) did not stop in time (blocked in a system "
                "call); ending without them\n",
                e->abandoned);
    }
    /* Every collector has ended (or was left): what they handed over last is applied here,
     * unless the recorder itself was left running (it would apply it). */
    pthread_mutex_lock(&e->view_lock);
    if (!e->rec_running && !e->o.wire)
        engine_recorder_drain(e);
    pthread_mutex_unlock(&e->view_lock);
    e->nth = 0;
    engine_view_expire(e);
}

bool engine_left_threads(void)
{
    return atomic_load(&threads_left);
}

void engine_free(struct engine *e)
{
    if (!e)
        return;
    if (e->abandoned) { /* a thread left running may still use any of it */
        left_running = e;
        return;
    }
    engine_view_expire(e);
    pthread_mutex_destroy(&e->view_lock);
    history_fini(&e->hist);
    rsource_fini(&e->local);
    rclaims_free(&e->local_claims);
    engine_remote_free(e); /* other hosts' links and sources */
    free(e->targets);
    engine_live_free(e);
    free(e->hosts);
    engine_queues_fini(e);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->cond);
    pthread_cond_destroy(&e->view_cond);
    if (e->stop_fd >= 0)
        close(e->stop_fd);
    if (e->wake_fd >= 0)
        close(e->wake_fd);
    free(e);
}

void engine_clone_history(struct engine *e, struct history *out)
{
    pthread_mutex_lock(&e->lock);
    history_clone(&e->hist, out);
    pthread_mutex_unlock(&e->lock);
}

void engine_get_stats(struct engine *e, struct engine_stats *st)
{
    uint64_t now = clock_mono_ns();

    memset(st, 0, sizeof(*st));
    pthread_mutex_lock(&e->lock);
    /* Other nodes' agents count their own samples: passes is the busiest sampler's. */
    st->samples = e->samples > e->rpasses ? e->samples : e->rpasses;
    st->stacks = e->stacks + e->rstacks;
    st->errors = e->errs + e->rerrors;
    st->torn = e->torn;
    st->lost = e->lost + e->rlost;
    st->achieved_hz = now > e->t_start ? (double)st->samples * 1e9 / (double)(now - e->t_start) : 0;
    st->lag_ms = e->samples ? (double)e->lag_sum_ns / 1e6 / (double)e->samples : 0;
    st->lag_max_ms = (double)e->lag_max_ns / 1e6;
    st->history_bytes = history_memory(&e->hist);
    st->ranks = e->ranks_now;
    st->ranks_seen = e->ranks_seen;
    st->sampler_threads = e->sampler_threads;
    st->task_lane_cap = e->hist.task_lane_cap;
    st->tasks_folded = e->hist.tasks_folded;
    st->tasks_unlaned_max = e->hist.tasks_unlaned_max;
    st->reader = e->reader;
    st->reader_why = e->reader_why;
    pthread_mutex_unlock(&e->lock);
    st->cpu_ns = clock_process_cpu_ns();
}

void engine_set_rate(struct engine *e, double hz)
{
    hz = hz < 0.1 ? 0.1 : hz > 1000 ? 1000 : hz;
    pthread_mutex_lock(&e->lock);
    e->o.rate_hz = hz;
    e->period_ns = (uint64_t)(1e9 / hz);
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

void engine_set_async(struct engine *e, bool on)
{
    pthread_mutex_lock(&e->lock);
    e->o.async = on;
    pthread_mutex_unlock(&e->lock);
}

double engine_scale_rate(struct engine *e, double factor)
{
    double hz;

    pthread_mutex_lock(&e->lock);
    hz = e->o.rate_hz * factor;
    hz = hz < 0.1 ? 0.1 : hz > 1000 ? 1000 : hz;
    e->o.rate_hz = hz;
    e->period_ns = (uint64_t)(1e9 / hz);
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    return hz;
}

void engine_set_oncpu(struct engine *e, bool on)
{
    pthread_mutex_lock(&e->lock);
    e->o.oncpu = on;
    pthread_mutex_unlock(&e->lock);
}

double engine_rate(struct engine *e)
{
    double hz;

    pthread_mutex_lock(&e->lock);
    hz = e->o.rate_hz;
    pthread_mutex_unlock(&e->lock);
    return hz;
}

void engine_unread_locked(struct engine *e, int pid, const char *why)
{
    size_t i = 0;

    while (i < e->nunread && e->unread[i].pid != pid)
        i++;
    if (!why) {
        if (i < e->nunread)
            e->unread[i] = e->unread[--e->nunread];
        return;
    }
    if (i == e->nunread) {
        if (e->nunread == ENGINE_MAX_UNREAD)
            return;
        e->nunread++;
    }
    e->unread[i].pid = pid;
    snprintf(e->unread[i].why, sizeof(e->unread[i].why), "%s", why);
}

size_t engine_unreadable(struct engine *e, struct engine_unread *out, size_t max)
{
    size_t n;

    pthread_mutex_lock(&e->lock);
    n = e->nunread;
    if (out)
        memcpy(out, e->unread, (n < max ? n : max) * sizeof(*out));
    pthread_mutex_unlock(&e->lock);
    return n;
}

void engine_attach_error(struct engine *e, char *buf, size_t len)
{
    pthread_mutex_lock(&e->lock);
    snprintf(buf, len, "%s", e->attach_err);
    pthread_mutex_unlock(&e->lock);
}

void engine_last_errors(struct engine *e, char *buf, size_t len)
{
    pthread_mutex_lock(&e->lock);
    snprintf(buf, len, "%s%s%s", e->attach_err, e->attach_err[0] && e->errors[0] ? "; " : "",
             e->errors);
    pthread_mutex_unlock(&e->lock);
}

void engine_mem_focus(struct engine *e, int pid, bool new_baseline)
{
    pthread_mutex_lock(&e->lock);
    if (pid != e->focus_pid || new_baseline)
        e->focus_reset = true;
    e->focus_pid = pid;
    pthread_mutex_unlock(&e->lock);
}

size_t engine_mem_growth(struct engine *e, int *pid, struct engine_growth *out, size_t n)
{
    size_t k;

    pthread_mutex_lock(&e->lock);
    *pid = e->growth_pid;
    k = e->ngrowth < n ? e->ngrowth : n;
    memcpy(out, e->growth, k * sizeof(*out));
    pthread_mutex_unlock(&e->lock);
    return k;
}

bool engine_exit_listening(struct engine *e, int timeout_ms, char *why, size_t len)
{
    uint64_t end = clock_mono_ns() + (uint64_t)timeout_ms * 1000000u;
    struct timespec ts = {(time_t)(end / 1000000000u), (long)(end % 1000000000u)};
    bool on;

    pthread_mutex_lock(&e->lock);
    while (!e->exit_started && !e->stop)
        if (pthread_cond_timedwait(&e->cond, &e->lock, &ts) == ETIMEDOUT)
            break;
    on = e->exit_listening;
    snprintf(why, len, "%s",
             !e->exit_started ? "the exit thread has not subscribed yet"
             : on             ? ""
                              : e->exit_err);
    pthread_mutex_unlock(&e->lock);
    return on;
}

void engine_hosts(struct engine *e, struct engine_host **out, size_t *n)
{
    pthread_mutex_lock(&e->lock);
    *n = e->nhosts;
    *out = x_calloc(e->nhosts ? e->nhosts : 1, sizeof(**out));
    if (e->nhosts)
        memcpy(*out, e->hosts, e->nhosts * sizeof(**out));
    pthread_mutex_unlock(&e->lock);
}
