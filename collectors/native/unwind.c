/* Native stacks of one process's threads: each thread is stopped on its own with
 * PTRACE_SEIZE + PTRACE_INTERRUPT, its registers read once with PTRACE_GETREGSET and the top
 * of its stack copied with one process_vm_readv from the stack pointer, and detached at once;
 * the copy is then unwound by libunwind's remote API (unwind tables from the mapped objects,
 * through /proc/PID/root) and named (symbols.c) while the thread runs again. Frames below the
 * copied part belong to callers that stay suspended while their callees run, so reading them
 * live afterwards sees what the thread had at the stop unless it returned past them.
 *
 * Invariants: a thread is never left stopped by us: every path after a successful seize
 * detaches, and if this process dies the kernel detaches it. libunwind's own accessors read
 * one word per PTRACE_PEEKDATA and all registers per register; ours serve both from the
 * copies taken while the thread is stopped, falling back to process_vm_readv for memory
 * outside the copy. The address space caches unwind info across threads (UNW_CACHE_GLOBAL).
 * One native_ctx belongs to one thread of ours. What differs by architecture (the register
 * set, libunwind's register numbers and table search) is in arch_ARCH.c behind arch.h. */
#include "arch.h"
#include "native_priv.h"

#include "ranktop/proc/procscan.h"
#include "ranktop/base/util.h"

#include <errno.h>
#include <libunwind-ptrace.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sched.h>
#include <time.h>

#define STACK_COPY (64 * 1024) /* bytes of stack copied from the stack pointer */
#define MAX_FRAMES 512
#define YIELD_NS 300000ull /* look without sleeping this long for a stop */

/* What the accessors serve while one thread is stopped; the arg libunwind passes them must
 * stay the _UPT handle (the kept accessors read it), so ours find this through the ctx. */
struct snap {
    struct native_ctx *ctx; /* NULL for a recorded state (native_walk_mem) */
    int pid;
    const struct native_mem *mem; /* where memory and unwind tables come from */
    struct arch_regs regs;
    uint64_t sp;
    uint8_t *stack;
    size_t nstack;
};

static _Thread_local struct snap *cur_snap;

/* Reads up to len bytes at addr; a read stops short where the mapping ends. Returns the
 * bytes read, 0 on failure. */
static size_t mem_read_some(int pid, uint64_t addr, void *buf, size_t len)
{
    struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
    ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);

    return got > 0 ? (size_t)got : 0;
}

/* The live memory source: the stopped thread's process, through process_vm_readv; its unwind
 * tables are found from the objects its maps name (symbols.c). */
static size_t live_read(void *src, uint64_t addr, void *buf, size_t len)
{
    return mem_read_some(((struct native_ctx *)src)->pid, addr, buf, len);
}

static bool live_ehframe(void *src, uint64_t ip, uint64_t *hdr, uint64_t *start, uint64_t *end)
{
    return native_syms_ehframe(((struct native_ctx *)src)->syms, ip, hdr, start, end);
}

static int mem_read(const struct snap *s, uint64_t addr, void *buf, size_t len)
{
    return s->mem->read(s->mem->src, addr, buf, len) == len ? 0 : -1;
}

static int acc_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg)
{
    struct snap *s = cur_snap;

    (void)as;
    (void)arg;
    if (write || !s)
        return -UNW_EINVAL; /* read-only towards the target, always */
    if (addr >= s->sp && addr + sizeof(*val) <= s->sp + s->nstack) {
        memcpy(val, s->stack + (addr - s->sp), sizeof(*val));
        return 0;
    }
    return mem_read(s, addr, val, sizeof(*val)) == 0 ? 0 : -UNW_EINVAL;
}

static int acc_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write, void *arg)
{
    struct snap *s = cur_snap;

    (void)as;
    (void)arg;
    if (write || !s)
        return -UNW_EBADREG;
    return arch_regs_get(&s->regs, reg, val);
}

#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_datarel 0x30

/* Unwind info for ip: the object's .eh_frame_hdr search table, found from its program headers
 * (read through /proc/PID/root, so a container's objects are the container's) and read from
 * the target's memory by libunwind's table search. libunwind's own lookup opens the path from
 * /proc/PID/maps with a plain open() -- a FIFO the target put there would block it for good,
 * with every signal blocked -- and maps the whole object again for every object change: it
 * is left for addresses outside file mappings, and an object without a usable
 * PT_GNU_EH_FRAME (.debug_frame only) is not unwound through. */
static int acc_find(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need, void *arg)
{
    struct snap *s = cur_snap;
    uint64_t hdr, start, end;
    uint8_t h[12];
    uint32_t count;
    unw_dyn_info_t di;

    if (!s)
        return -UNW_ENOINFO;
    if (s->ctx && !native_syms_in_file(s->ctx->syms, ip)) /* live only: there is a _UPT arg */
        return _UPT_find_proc_info(as, ip, pi, need, arg);
    if (!s->mem->ehframe(s->mem->src, ip, &hdr, &start, &end) || mem_read(s, hdr, h, sizeof(h)) < 0)
        return -UNW_ENOINFO;
    /* version 1; eh_frame_ptr 4 bytes; a 4-byte count; the table as (datarel sdata4) pairs */
    if (h[0] != 1 || ((h[1] & 0x0f) != DW_EH_PE_udata4 && (h[1] & 0x0f) != DW_EH_PE_sdata4) ||
        h[2] != DW_EH_PE_udata4 || h[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
        return -UNW_ENOINFO;
    memcpy(&count, h + 8, 4);
    if (!count || count > (1u << 24))
        return -UNW_ENOINFO;
    memset(&di, 0, sizeof(di));
    di.start_ip = start;
    di.end_ip = end;
    di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
    di.u.rti.segbase = hdr;
    di.u.rti.table_data = hdr + sizeof(h);
    di.u.rti.table_len = (unw_word_t)count * 8 / sizeof(unw_word_t);
    return arch_search_table(as, ip, &di, pi, need, arg);
}

/* Why tid cannot be traced, in words a user can act on. */
static int seize_error(int pid, int tid, int e, struct app_err *err)
{
    char path[64], *buf = NULL;
    size_t len;
    int tracer = 0;

    if (e == ESRCH)
        return app_err_set(err, APP_E_GONE, "thread %d exited", tid);
    if (e == ENOSYS)                        /* qemu-user emulates no ptrace for its guests */
        return app_err_set(err, APP_E_PERM, /* the same for every thread */
                           "native frames of %d: ptrace is not available to ranktop here "
                           "(ENOSYS: an emulator such as qemu-user); Python frames only",
                           pid);
    snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
    if (file_read_all(path, 1 << 16, &buf, &len) == 0) {
        const char *t = strstr(buf, "TracerPid:");

        tracer = t ? atoi(t + 10) : 0;
        free(buf);
    }
    if (tracer)
        return app_err_set(err, APP_E_PERM,
                           "native frames of %d: already traced by process %d (a debugger?); "
                           "Python frames only",
                           pid, tracer);
    return app_err_set(err, APP_E_PERM,
                       "native frames of %d: cannot trace it (%s): another user, or Yama's "
                       "kernel.yama.ptrace_scope (needs CAP_SYS_PTRACE); Python frames only",
                       pid, strerror(e));
}

enum stop_state { STOP_OURS, STOP_GONE, STOP_NOT_YET };

/* Waits for a seized thread's interrupt stop, for at most budget_ns: yielding the CPU between
 * looks for the first YIELD_NS (a running thread stops within microseconds, and a sleep
 * would overshoot by the timer slack), then sleeping 10 us, twice as long each time up to
 * 1 ms. A signal that arrives meanwhile is passed on, never swallowed. */
static enum stop_state await_stop(int tid, uint64_t budget_ns)
{
    uint64_t start = clock_mono_ns(), end = start + budget_ns, now;
    long nap = 10000;

    for (;;) {
        int st;
        pid_t r = waitpid(tid, &st, __WALL | WNOHANG);

        if (r < 0 || (r > 0 && (WIFEXITED(st) || WIFSIGNALED(st))))
            return STOP_GONE;
        if (r > 0 && WIFSTOPPED(st) && (st >> 16) == PTRACE_EVENT_STOP)
            return STOP_OURS;
        if (r > 0 && WIFSTOPPED(st)) { /* a signal on its way: deliver it, wait for our stop */
            ptrace(PTRACE_CONT, tid, 0, WSTOPSIG(st));
            continue;
        }
        now = clock_mono_ns();
        if (now >= end)
            return STOP_NOT_YET;
        if (now - start < YIELD_NS) { /* the usual case: stopped within microseconds */
            sched_yield();
            continue;
        }
        {
            struct timespec ts = {0, nap};

            nanosleep(&ts, NULL);
            nap = nap < 1000000 ? nap * 2 : 1000000;
        }
    }
}

/* Seizes tid and waits (at most about a second) until it is stopped by our interrupt.
 * Returns 0 with tid stopped, or a negative status: released, or (APP_E_TIMEOUT) still
 * seized until it stops, for the caller to keep as pending. */
static int stop_thread(int pid, int tid, struct app_err *err)
{
    if (ptrace(PTRACE_SEIZE, tid, 0, 0) < 0)
        return seize_error(pid, tid, errno, err);
    if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0) {
        int e = errno;

        ptrace(PTRACE_DETACH, tid, 0, 0);
        return seize_error(pid, tid, e, err);
    }
    switch (await_stop(tid, 1000000000ull)) {
    case STOP_OURS:
        return 0; /* our interrupt, or a group-stop (detaching keeps that one) */
    case STOP_GONE:
        return app_err_set(err, APP_E_GONE, "thread %d exited", tid);
    case STOP_NOT_YET:
        break;
    }
    /* Not stopped within a second (a long uninterruptible sleep): it stays seized until it
     * stops; release_pending detaches it then, and the kernel does if we exit first. */
    return app_err_set(err, APP_E_TIMEOUT, "thread %d did not stop within 1 s", tid);
}

/* Copies the registers and the top of the stack while tid is stopped. */
static int snapshot(struct native_ctx *c, int tid, struct snap *s, struct app_err *err)
{
    int rc = arch_regs_read(tid, &s->regs);

    if (rc < 0)
        return app_err_set(err, APP_E_IO, "registers of thread %d: %s", tid, strerror(-rc));
    s->ctx = c;
    s->pid = c->pid;
    s->mem = &c->live;
    s->sp = arch_regs_sp(&s->regs);
    s->stack = c->stack;
    /* One read: it stops short at the end of the stack's mapping, and what it got is kept. */
    s->nstack = mem_read_some(c->pid, s->sp, s->stack, STACK_COPY);
    return 0;
}

/* Walks the frames of the snapshot cur_snap into out->frames (ips only). */
static void walk_frames(unw_addr_space_t as, void *arg, struct native_stack *out)
{
    unw_cursor_t cur;

    out->frames = x_calloc(MAX_FRAMES, sizeof(*out->frames));
    if (unw_init_remote(&cur, as, arg) == 0) {
        do {
            unw_word_t ip = 0;

            if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 || !ip)
                break;
            out->frames[out->n++].ip = ip;
        } while (out->n < MAX_FRAMES && unw_step(&cur) > 0);
    }
}

/* Walks the frames of the snapshot (the thread runs again meanwhile). */
static void walk(struct native_ctx *c, int tid, struct native_stack *out)
{
    void *upt = _UPT_create(tid);

    if (!upt)
        app_fatal("out of memory");
    walk_frames(c->as, upt, out);
    _UPT_destroy(upt);
}

/* The accessors of a recorded state: no process behind it, so nothing of libunwind-ptrace
 * that needs one (its dynamic-info list, its own table lookup, resume, procedure names). */
static int rec_no_dyn(unw_addr_space_t as, unw_word_t *addr, void *arg)
{
    (void)as;
    (void)addr;
    (void)arg;
    return -UNW_ENOINFO;
}

static void rec_put_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
    (void)as;
    (void)arg;
    free(pi->unwind_info); /* what the table search allocated */
    pi->unwind_info = NULL;
}

static int rec_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write, void *arg)
{
    (void)as;
    (void)reg;
    (void)val;
    (void)write;
    (void)arg;
    return -UNW_EBADREG;
}

void native_walk_mem(const struct native_mem *mem, const struct arch_regs *regs,
                     struct native_stack *out)
{
    unw_accessors_t acc;
    unw_addr_space_t as;
    struct snap s;

    memset(out, 0, sizeof(*out));
    memset(&acc, 0, sizeof(acc));
    acc.find_proc_info = acc_find;
    acc.put_unwind_info = rec_put_info;
    acc.get_dyn_info_list_addr = rec_no_dyn;
    acc.access_mem = acc_mem;
    acc.access_reg = acc_reg;
    acc.access_fpreg = rec_fpreg;
    as = unw_create_addr_space(&acc, 0);
    if (!as)
        app_fatal("out of memory");
    memset(&s, 0, sizeof(s));
    s.mem = mem;
    s.regs = *regs;
    s.sp = arch_regs_sp(regs); /* no stack copy: every read goes to mem */
    cur_snap = &s;
    walk_frames(as, NULL, out);
    cur_snap = NULL;
    unw_destroy_addr_space(as);
}

/* Detaches the seized threads that have stopped (or exited) since they timed out; with wait,
 * gives each up to 100 ms. A thread never stays stopped because of us. */
static void release_pending(struct native_ctx *c, bool wait)
{
    size_t k = 0;

    for (size_t i = 0; i < c->npending; i++) {
        int tid = c->pending[i];
        enum stop_state st = await_stop(tid, wait ? 100000000ull : 0);

        if (st == STOP_OURS)
            ptrace(PTRACE_DETACH, tid, 0, 0);
        else if (st == STOP_NOT_YET)
            c->pending[k++] = tid;
    }
    c->npending = k;
}

/* The caller's tid comes from the target's own memory (3.11+ keeps it in the thread state), so
 * a thread that just exited, or a state read while it was freed, can name a thread of any
 * process: one that is not the target's (procscan_thread_of) is never stopped. */
static int not_ours(int pid, int tid, struct app_err *err)
{
    return app_err_set(err, APP_E_GONE, "thread %d is not a thread of process %d (exited?)", tid,
                       pid);
}

int native_unwind(struct native_ctx *c, int tid, const struct native_hook *hook,
                  struct native_stack *out, struct app_err *err)
{
    uint64_t t0 = clock_mono_ns();
    struct snap s;
    int rc;

    memset(out, 0, sizeof(*out));
    release_pending(c, false);
    if (!procscan_thread_of(c->pid, tid))
        return not_ours(c->pid, tid, err);
    rc = stop_thread(c->pid, tid, err);
    if (rc == APP_E_TIMEOUT) {
        c->pending = x_reallocarray(c->pending, c->npending + 1, sizeof(int));
        c->pending[c->npending++] = tid;
    }
    if (rc < 0)
        return rc;
    /* Stopped by us, the thread cannot exit and hand its tid on: this look settles that it
     * did not do so between the first look and the seize. */
    if (!procscan_thread_of(c->pid, tid)) {
        ptrace(PTRACE_DETACH, tid, 0, 0);
        return not_ours(c->pid, tid, err);
    }
    rc = snapshot(c, tid, &s, err);
    if (rc == 0 && hook && hook->while_stopped)
        hook->while_stopped(hook->arg, tid);
    ptrace(PTRACE_DETACH, tid, 0, 0); /* runs again: the unwind works on the copy */
    out->stopped_ns = clock_mono_ns() - t0;
    if (rc < 0)
        return rc;
    cur_snap = &s;
    walk(c, tid, out);
    cur_snap = NULL;
    native_symbolize(c->syms, out);
    return 0;
}

void native_stack_fini(struct native_stack *s)
{
    free(s->frames);
    memset(s, 0, sizeof(*s));
}

int native_open(int pid, struct native_ctx **out, struct app_err *err)
{
    struct native_ctx *c = x_calloc(1, sizeof(*c));
    int rc;

    c->pid = pid;
    c->live.read = live_read;
    c->live.ehframe = live_ehframe;
    c->live.src = c;
    c->acc = _UPT_accessors; /* unwind tables from the objects, as libunwind finds them */
    c->acc.access_mem = acc_mem;
    c->acc.access_reg = acc_reg;
    c->acc.find_proc_info = acc_find;
    c->as = unw_create_addr_space(&c->acc, 0);
    if (!c->as)
        app_fatal("out of memory");
    unw_set_caching_policy(c->as, UNW_CACHE_GLOBAL);
    c->stack = x_malloc(STACK_COPY);
    rc = native_syms_open(pid, &c->syms, err);
    if (rc < 0) {
        native_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

char *native_take_notes(struct native_ctx *c)
{
    return native_syms_take_notes(c->syms);
}

void native_close(struct native_ctx *c)
{
    if (!c)
        return;
    release_pending(c, true);
    free(c->pending);
    if (c->as)
        unw_destroy_addr_space(c->as);
    native_syms_close(c->syms);
    free(c->stack);
    free(c);
}
