/* Rank discovery: device sources, the /proc scan, and the join into one record per process.
 *
 * Candidates are the processes the user named (-p, --children-of, --match) or, when none was
 * named, the processes the device tools report plus every Python process whose environment
 * gives it a rank under one of the launchers rank_ident_parse knows (RANK, OMPI_COMM_WORLD_RANK,
 * PMI_RANK, PMIX_RANK, MV2_COMM_WORLD_RANK, HOROVOD_RANK, SLURM_PROCID). Each candidate gets
 * its identity, Python-ness, devices and memory; a Python child with its parent's rank (a
 * DataLoader worker) is folded into its parent's record.
 * Runs on one thread; the result is read-only afterwards. */
#include "ranktop/discovery/discovery.h"

#include "ranktop/devices/devsrc.h"
#include "ranktop/proc/procenv.h"
#include "ranktop/proc/procscan.h"
#include "ranktop/base/util.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

void discovery_init(struct discovery *d)
{
    memset(d, 0, sizeof(*d));
    smi_result_init(&d->devs);
}

void discovery_fini(struct discovery *d)
{
    for (size_t i = 0; i < d->nprocs; i++) {
        free(d->procs[i].devs);
        free(d->procs[i].children);
    }
    free(d->procs);
    for (size_t i = 0; i < d->nerrors; i++)
        free(d->errors[i]);
    free(d->errors);
    smi_result_fini(&d->devs);
    memset(d, 0, sizeof(*d));
}

struct pidset {
    int *v;
    size_t n;
};

static void pidset_add(struct pidset *s, int pid)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i] == pid)
            return;
    s->v = x_reallocarray(s->v, s->n + 1, sizeof(int));
    s->v[s->n++] = pid;
}

/* Our PID for a PID printed by a device tool: the same number when it exists here, else the
 * process whose innermost namespaced PID it is (the tool ran inside a container). */
static int local_pid(const struct pslist *ps, int pid)
{
    int mapped;

    if (procscan_find(ps, pid) >= 0)
        return pid;
    mapped = procscan_from_inner(ps, pid);
    return mapped ? mapped : pid;
}

/* A rank named with -p brings its DataLoader-style workers along: the Python descendants
 * that carry its rank (group_workers folds them under it), never other ranks it started. */
static void add_workers_of(const struct pslist *ps, int pid, struct pidset *c)
{
    struct rank_ident me, id;
    int *v = NULL;
    size_t n = 0;

    if (procscan_ident(pid, &me) < 0 || me.rank < 0)
        return;
    procscan_descendants(ps, pid, &v, &n);
    for (size_t k = 0; k < n; k++)
        if (procscan_ident(v[k], &id) == 0 && id.rank == me.rank && procscan_is_python(v[k]))
            pidset_add(c, v[k]);
    free(v);
}

static void add_named(const struct discovery_opts *o, const struct pslist *ps, const regex_t *re,
                      struct pidset *c)
{
    int self = (int)getpid();

    for (int i = 0; i < o->npids; i++) {
        pidset_add(c, o->pids[i]);
        add_workers_of(ps, o->pids[i], c);
    }
    for (int i = 0; i < o->nchildren_of; i++) {
        int *v = NULL;
        size_t n = 0;

        procscan_descendants(ps, o->children_of[i], &v, &n);
        for (size_t k = 0; k < n; k++)
            pidset_add(c, v[k]);
        free(v);
    }
    for (size_t i = 0; re && i < ps->n; i++) {
        char cmd[4096];

        if (ps->pid[i] != self && procenv_cmdline(ps->pid[i], cmd, sizeof(cmd)) == 0 && cmd[0] &&
            regexec(re, cmd, 0, NULL, 0) == 0)
            pidset_add(c, ps->pid[i]);
    }
}

/* Whether pid runs torchrun's launcher (torchrun, python -m torch.distributed.run or .launch):
 * its workers are the ranks, never the launcher itself. */
static bool is_torch_launcher(int pid)
{
    char cmd[4096];

    return procenv_cmdline(pid, cmd, sizeof(cmd)) == 0 &&
           (strstr(cmd, "torch.distributed.run") || strstr(cmd, "torch.distributed.launch") ||
            strstr(cmd, "/torchrun ") || !strncmp(cmd, "torchrun ", 9));
}

/* The job ranktop started (o->job): the Python processes of its tree, the root included, that
 * carry a launcher's rank; while none does (a plain `python3 train.py`, or torchrun before its
 * workers start), every Python process of the tree. A torchrun launcher is never one (under
 * srun it carries SLURM_PROCID, a rank of its own). DataLoader-style
 * workers of a rank are folded under it later (group_workers). */
static void add_job(int root, const struct pslist *ps, struct pidset *c)
{
    int *v = NULL;
    size_t n = 0, ranked = 0;
    bool *python;

    if (procscan_find(ps, root) < 0)
        return;
    procscan_descendants(ps, root, &v, &n);
    v = x_reallocarray(v, n + 1, sizeof(int));
    v[n++] = root;
    python = x_calloc(n, sizeof(bool));
    for (size_t k = 0; k < n; k++) {
        struct rank_ident id;

        python[k] = procscan_is_python(v[k]) && !is_torch_launcher(v[k]);
        if (python[k] && procscan_ident(v[k], &id) == 0 && id.rank >= 0) {
            pidset_add(c, v[k]);
            ranked++;
        }
    }
    for (size_t k = 0; !ranked && k < n; k++)
        if (python[k])
            pidset_add(c, v[k]);
    free(python);
    free(v);
}

/* No names given: the device tools' processes, then Python processes with a launcher's rank
 * (rank_ident_parse decides which variables count). */
static void add_default(struct discovery *d, const struct pslist *ps, struct pidset *c)
{
    for (size_t i = 0; i < d->devs.nprocs; i++)
        if (d->devs.procs[i].valid & SMI_PROC_PID)
            pidset_add(c, local_pid(ps, d->devs.procs[i].pid));
    size_t hidden = 0;

    for (size_t i = 0; i < ps->n; i++) {
        struct rank_ident id;
        int rc = procscan_ident(ps->pid[i], &id);

        if (rc == 0 && id.rank >= 0 && procscan_is_python(ps->pid[i]))
            pidset_add(c, ps->pid[i]);
        else if (rc == APP_E_PERM && procscan_comm_python(ps->pid[i]))
            hidden++;
    }
    /* Ranks of other users are out of sight: say how many, rather than that none exist. */
    if (hidden)
        strv_addf(&d->errors, &d->nerrors,
                  "%zu Python process%s of other users could not be checked for a rank: "
                  "permission denied to read their environment (run ranktop as their owner or "
                  "as root, or name them with -p)",
                  hidden, hidden == 1 ? "" : "es");
}

static struct proc_rec *new_rec(struct discovery *d, int pid)
{
    struct proc_rec *r;

    d->procs = x_reallocarray(d->procs, d->nprocs + 1, sizeof(*d->procs));
    r = memset(&d->procs[d->nprocs++], 0, sizeof(*r));
    r->pid = pid;
    rank_ident_parse("", 0, &r->id);
    return r;
}

static void fill_rec(struct discovery *d, struct proc_rec *r, const struct pslist *ps)
{
    long i = procscan_find(ps, r->pid);
    char path[64];
    struct stat st;

    r->alive = i >= 0 && procscan_name(r->pid, r->name, sizeof(r->name)) == 0;
    if (r->alive && procscan_state(r->pid) == 'Z') { /* exited, not yet reaped by its parent */
        r->alive = false;
        strv_addf(&d->errors, &d->nerrors,
                  "process %d has exited (a zombie its parent has not "
                  "reaped)",
                  r->pid);
    }
    if (!r->alive)
        return;
    r->ppid = ps->ppid[i];
    r->python = procscan_is_python(r->pid);
    if (procscan_ident(r->pid, &r->id) != APP_E_PERM)
        return;
    /* Another user's process: say so, rather than "not Python, no rank". */
    r->unreadable = true;
    snprintf(path, sizeof(path), "/proc/%d", r->pid);
    strv_addf(&d->errors, &d->nerrors,
              "process %d: cannot read its environment and memory map: permission denied (it "
              "belongs to uid %ld; run ranktop as that user or as root)",
              r->pid, stat(path, &st) == 0 ? (long)st.st_uid : -1L);
}

/* Attaches the device tools' rows to records; rows of processes we did not select are
 * ignored, rows of processes that do not exist here become records flagged not alive. */
static void attach_devices(struct discovery *d, const struct pslist *ps, bool explicit)
{
    for (size_t i = 0; i < d->devs.nprocs; i++) {
        const struct smi_proc *sp = &d->devs.procs[i];
        int pid = (sp->valid & SMI_PROC_PID) ? local_pid(ps, sp->pid) : 0;
        struct proc_rec *r = NULL;

        if (!pid)
            continue;
        for (size_t k = 0; k < d->nprocs && !r; k++)
            if (d->procs[k].pid == pid)
                r = &d->procs[k];
        if (!r && explicit)
            continue;
        if (!r) {
            r = new_rec(d, pid);
            snprintf(r->name, sizeof(r->name), "%s", sp->name);
        }
        if (!r->alive && !r->name[0] && (sp->valid & SMI_PROC_NAME))
            snprintf(r->name, sizeof(r->name), "%s", sp->name);
        r->devs = x_reallocarray(r->devs, r->ndevs + 1, sizeof(*r->devs));
        r->devs[r->ndevs++] =
            (struct proc_dev){sp->kind, (sp->valid & SMI_PROC_DEV) ? sp->dev_index : -1,
                              (sp->valid & SMI_PROC_CHIP) ? sp->chip : -1,
                              (sp->valid & SMI_PROC_MEM) ? sp->mem_mb : -1};
    }
}

static struct proc_rec *find_rec(struct discovery *d, int pid)
{
    for (size_t i = 0; i < d->nprocs; i++)
        if (d->procs[i].pid == pid)
            return &d->procs[i];
    return NULL;
}

/* The record of pid's parent when that parent is a Python process of the same rank. */
static struct proc_rec *same_rank_parent(struct discovery *d, const struct proc_rec *w)
{
    struct proc_rec *p = w->ppid ? find_rec(d, w->ppid) : NULL;

    if (!p || p == w || !p->python || p->id.rank < 0 || p->id.rank != w->id.rank)
        return NULL;
    return p;
}

/* Folds DataLoader-style workers (Python descendants carrying their parent's rank and using
 * no device themselves) into the record of the topmost process of that rank. Owners are
 * decided for every record before any record moves. */
static void group_workers(struct discovery *d)
{
    int *owner = x_calloc(d->nprocs ? d->nprocs : 1, sizeof(int));
    size_t kept = 0;

    for (size_t i = 0; i < d->nprocs; i++) {
        const struct proc_rec *w = &d->procs[i], *p = w;

        if (!w->python || w->ndevs)
            continue;
        for (int hops = 0; hops < 64 && same_rank_parent(d, p); hops++)
            p = same_rank_parent(d, p);
        owner[i] = p != w ? p->pid : 0;
    }
    for (size_t i = 0; i < d->nprocs; i++) {
        struct proc_rec *p = owner[i] ? find_rec(d, owner[i]) : NULL;

        if (!p)
            continue;
        p->children = x_reallocarray(p->children, p->nchildren + 1, sizeof(int));
        p->children[p->nchildren++] = d->procs[i].pid;
    }
    for (size_t i = 0; i < d->nprocs; i++) {
        if (owner[i]) {
            free(d->procs[i].devs);
            free(d->procs[i].children);
            continue;
        }
        d->procs[kept++] = d->procs[i];
    }
    d->nprocs = kept;
    free(owner);
}

static int cmp_rec(const void *a, const void *b)
{
    const struct proc_rec *x = a, *y = b;
    int rx = x->id.rank < 0 ? 1 << 30 : x->id.rank, ry = y->id.rank < 0 ? 1 << 30 : y->id.rank;

    if (rx != ry)
        return rx < ry ? -1 : 1;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

int discovery_run(const struct discovery_opts *o, struct discovery *d, struct app_err *err)
{
    bool explicit = o->npids || o->nchildren_of || o->match || o->job;
    struct pidset cand = {0};
    struct devsrc *src;
    struct pslist ps;
    regex_t re;
    int rc;

    if (o->match && (rc = regcomp(&re, o->match, REG_EXTENDED | REG_NOSUB)) != 0) {
        char msg[128];

        regerror(rc, &re, msg, sizeof(msg));
        return app_err_set(err, APP_E_USAGE, "bad --match expression '%s': %s", o->match, msg);
    }
    gethostname(d->host, sizeof(d->host) - 1);
    src = devsrc_new(&o->dev);
    d->any_tool = devsrc_collect(src, SMI_KIND_GPU, &d->devs, &d->errors, &d->nerrors);
    d->any_tool |= devsrc_collect(src, SMI_KIND_NPU, &d->devs, &d->errors, &d->nerrors);
    devsrc_free(src);
    procscan_list(&ps);
    if (o->job)
        add_job(o->job, &ps, &cand);
    if (explicit)
        add_named(o, &ps, o->match ? &re : NULL, &cand);
    else
        add_default(d, &ps, &cand);
    for (size_t i = 0; i < cand.n; i++) {
        if (explicit && procscan_find(&ps, cand.v[i]) < 0) {
            strv_addf(&d->errors, &d->nerrors, "process %d: no such process", cand.v[i]);
            continue;
        }
        fill_rec(d, new_rec(d, cand.v[i]), &ps);
    }
    attach_devices(d, &ps, explicit);
    group_workers(d);
    x_qsort(d->procs, d->nprocs, sizeof(*d->procs), cmp_rec);
    free(cand.v);
    procscan_list_fini(&ps);
    if (o->match)
        regfree(&re);
    return 0;
}
