/* One-shot remote commands: each host's command runs on a thread of its own through
 * exec_run (deadline, process group killed at the end), so one slow or dead host costs its
 * deadline, not the sum. The argv is ours: the remote shell's template (rsh.h), a validated
 * host name, the remote ranktop and fixed arguments, quoted where the remote end re-parses
 * them as a shell command line (ssh, pdsh); no local shell runs anything. With --ship the
 * command is ship.h's script, and exec_run_fed answers its request with the binary. */
#include "cli_remote.h"

#include "ranktop/remote/kube.h"
#include "ranktop/remote/rsh.h"
#include "ranktop/base/util.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARALLEL 32

struct job {
    const struct engine_remote_opts *o;
    const char *const *args;
    int timeout_ms;
    struct cli_remote_result *r;
};

/* The launcher's argv for one host and the remote command cmd (NULL-terminated). ssh: the
 * template with the host (at %h, else last), then cmd quoted for the login shell that parses
 * it; kubectl: kube_exec_argv (the pod, -n/-c, "--", cmd as is); srun: its options, -N1 -n1 -w
 * HOST, then cmd as is; pdsh: its options (the template's words before a "--"), -w HOST, the words
 * after the "--" (e.g. an exec module's command, %h left for pdsh), then cmd quoted (pdsh's ssh
 * module hands it to a shell). */
static char **host_argv(const struct engine_remote_opts *o, const char *host,
                        const char *const *cmd)
{
    struct rsh_tmpl t = {o->rsh, o->nrsh, o->rsh_has_host};
    char **w, **v;
    size_t dash = o->nrsh, n = 0;

    if (o->launcher == ENGINE_LAUNCH_RSH)
        return rsh_argv(&t, host, NULL, cmd, true);
    if (o->launcher == ENGINE_LAUNCH_KUBECTL)
        return kube_exec_argv(&t, host, o->kube_ns, o->kube_container, cmd);
    for (size_t i = 0; i < o->nrsh; i++)
        if (o->launcher == ENGINE_LAUNCH_PDSH && !strcmp(o->rsh[i], "--") && dash == o->nrsh)
            dash = i;
    /* The template's words rearranged around the host's: a %h left in them stays "%h". */
    w = x_calloc(o->nrsh + 5, sizeof(char *));
    for (size_t i = 0; i < dash; i++)
        w[n++] = o->rsh[i];
    if (o->launcher == ENGINE_LAUNCH_SRUN) {
        w[n++] = (char *)"-N1";
        w[n++] = (char *)"-n1";
    }
    w[n++] = (char *)"-w";
    w[n++] = (char *)host;
    for (size_t i = dash + 1; i < o->nrsh; i++)
        w[n++] = o->rsh[i];
    t.w = w;
    t.n = n;
    v = rsh_argv(&t, NULL, NULL, cmd, o->launcher == ENGINE_LAUNCH_PDSH);
    free(w);
    return v;
}

/* --ship's side of one host: the node's request line answered with the binary for its
 * architecture (ship.h). */
struct shipper {
    struct ship_cache *cache;
    const struct ship_bin *bin;
    uint64_t asked_ns;
};

static bool ship_answer(void *ctx, const char *out, size_t len, struct exec_send *send)
{
    struct shipper *s = ctx;
    const char *nl = memchr(out, '\n', len);
    char arch[SHIP_ARCH_MAX];

    if (!nl)
        return len > 256; /* not a request: send nothing, close the stdin */
    if (!ship_need(out, (size_t)(nl - out), arch))
        return true;
    s->bin = ship_cache_get(s->cache, arch);
    s->asked_ns = clock_mono_ns();
    send->p[0] = s->bin->header;
    send->n[0] = strlen(s->bin->header);
    send->p[1] = s->bin->data;
    send->n[1] = s->bin->data ? s->bin->len : 0;
    return true;
}

/* The request line leaves the output that the command's caller parses. */
static void drop_request(struct exec_result *res)
{
    char *nl;

    if (!res->out || strncmp(res->out, SHIP_NEED, strlen(SHIP_NEED)) ||
        !(nl = strchr(res->out, '\n')))
        return;
    res->out_len -= (size_t)(nl + 1 - res->out);
    memmove(res->out, nl + 1, res->out_len + 1);
}

/* pdsh labels every line "HOST: ": the command's own output is what follows. */
static void unlabel(char *out, const char *host)
{
    size_t hl = strlen(host);
    char *w = out;

    for (char *r = out; *r;) {
        char *nl = strchr(r, '\n');
        size_t len = nl ? (size_t)(nl - r) + 1 : strlen(r);

        if (len > hl + 1 && !strncmp(r, host, hl) && r[hl] == ':' && r[hl + 1] == ' ') {
            r += hl + 2;
            len -= hl + 2;
        }
        memmove(w, r, len);
        w += len;
        r += len;
    }
    *w = '\0';
}

/* Why a host's command failed, in the remote shell's own words: ssh's "Permission denied",
 * the login shell's "not found", kubectl's "pods ... not found", with the status they came
 * with; a shell killed at the deadline, with what it had said by then. */
static void explain(struct cli_remote_result *r, const char *prog, const struct app_err *err)
{
    struct rsh_tail t = {0};
    size_t at;

    if (r->res.err)
        rsh_tail_feed(&t, r->res.err, r->res.err_len);
    if (r->rc == 0 && r->res.status != 0) {
        rsh_explain(r->why, sizeof(r->why), prog, r->res.status, 0, &t);
    } else if (r->rc < 0) {
        snprintf(r->why, sizeof(r->why), "%s", err->msg);
        at = strlen(r->why);
        if (r->rc == APP_E_TIMEOUT && t.n && at + 2 < sizeof(r->why)) {
            memcpy(r->why + at, ": ", 3);
            rsh_tail_join(&t, r->why + at + 2, sizeof(r->why) - at - 2);
        }
    }
}

/* The command through ship.h's script: the node asks for its binary, ship_answer sends it.
 * The cost is kept in the result; a missing binary is the head's own error. */
static void run_shipped(struct job *j, const char *const *cmd, struct app_err *err)
{
    struct shipper s = {j->o->ship, NULL, 0};
    struct exec_feed feed = {ship_answer, &s};
    const char **sc = ship_cmd(cmd);
    char **argv = host_argv(j->o, j->r->host, sc);

    j->r->rc = exec_run_fed((const char *const *)argv, j->timeout_ms, &feed, &j->r->res, err);
    drop_request(&j->r->res);
    if (s.bin && s.bin->data && j->r->res.fed_ns) {
        j->r->ship_bytes = s.bin->len;
        j->r->ship_s = (double)(j->r->res.fed_ns - s.asked_ns) / 1e9;
    }
    if (s.bin && !s.bin->data) /* the head's own words: where it looked */
        snprintf(j->r->why, sizeof(j->r->why), "%s", s.bin->why);
    rsh_argv_free(argv);
    free(sc);
}

static void *run_one(void *arg)
{
    struct job *j = arg;
    const struct engine_remote_opts *o = j->o;
    size_t na = 0;
    const char **cmd;
    struct app_err err = {0};

    while (j->args[na])
        na++;
    cmd = x_calloc(na + 2, sizeof(char *));
    cmd[0] = o->ranktop && o->ranktop[0] ? o->ranktop : "ranktop";
    for (size_t i = 0; i < na; i++)
        cmd[i + 1] = j->args[i];
    if (o->ship) {
        run_shipped(j, cmd, &err);
    } else {
        char **argv = host_argv(o, j->r->host, cmd);

        j->r->rc = exec_run((const char *const *)argv, j->timeout_ms, &j->r->res, &err);
        rsh_argv_free(argv);
    }
    if (o->launcher == ENGINE_LAUNCH_PDSH && j->r->res.out)
        unlabel(j->r->res.out, j->r->host);
    if (!j->r->why[0])
        explain(j->r, o->nrsh ? o->rsh[0] : "the remote shell", &err);
    /* No ranktop there: the remote shell's "command not found" (127) says what; say the cure. */
    if (!o->ship && j->r->res.status == 127 && strlen(j->r->why) < sizeof(j->r->why) - 40)
        strcat(j->r->why, " (--ship sends ranktop there)");
    free(cmd);
    return NULL;
}

void cli_remote_run(const struct engine_remote_opts *o, const char *const *args, int timeout_ms,
                    struct cli_remote_result **out)
{
    struct cli_remote_result *r = x_calloc(o->nhosts ? o->nhosts : 1, sizeof(*r));
    struct job *j = x_calloc(o->nhosts ? o->nhosts : 1, sizeof(*j));
    pthread_t th[MAX_PARALLEL];

    if (o->ship) /* a node that stops reading the binary is an EPIPE, not our death */
        signal(SIGPIPE, SIG_IGN);
    for (size_t at = 0; at < o->nhosts; at += MAX_PARALLEL) {
        size_t n = o->nhosts - at < MAX_PARALLEL ? o->nhosts - at : MAX_PARALLEL;
        bool started[MAX_PARALLEL] = {false};

        for (size_t i = 0; i < n; i++) {
            r[at + i].host = o->hosts[at + i];
            j[at + i] = (struct job){o, args, timeout_ms, &r[at + i]};
            started[i] = pthread_create(&th[i], NULL, run_one, &j[at + i]) == 0;
            if (!started[i])
                run_one(&j[at + i]);
        }
        for (size_t i = 0; i < n; i++)
            if (started[i])
                pthread_join(th[i], NULL);
    }
    free(j);
    for (size_t i = 0; i < o->nhosts; i++)
        if (r[i].ship_bytes)
            fprintf(stderr, "ranktop --ship: %s: %zu bytes in %.2f s\n", r[i].host, r[i].ship_bytes,
                    r[i].ship_s);
    *out = r;
}

void cli_remote_free(struct cli_remote_result *r, size_t n)
{
    for (size_t i = 0; r && i < n; i++)
        exec_result_fini(&r[i].res);
    free(r);
}
