/* `ranktop agent`: runs this node's collectors and writes the agent stream
 * (ranktop/remote/agentproto.h) on stdout for a head on another node, started there through ssh,
 * srun or pdsh. Its engine keeps no history (engine_opts.wire). Main thread: it writes the
 * hello, then every tick what the collectors found since (engine_wire_tick), and reads
 * one-line commands on stdin (rate HZ, threads all|main, ping NS, quit).
 *
 * An agent never outlives its head: it exits within a second when stdin reaches EOF, when a
 * write fails (EPIPE: SIGPIPE is ignored), or when no line came from the head for
 * --heartbeat seconds (remote shells forward no signals). Output lines stay under 1024 bytes
 * (srun splits longer ones). */
#include "cli.h"
#include "cli_discovery.h"
#include "cli_opts.h"
#include "ranktop/remote/agentproto.h"
#include "ranktop/engine/engine.h"
#include "ranktop/base/util.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

enum {
    OPT_ALL = 0x2000,
    OPT_NO_GIL,
    OPT_GIL_ONLY,
    OPT_NO_MEM,
    OPT_HEARTBEAT,
    OPT_TICK,
    OPT_NATIVE,
    OPT_ONCPU
};

struct agent {
    struct engine *e;
    struct engine_wire *w;
    struct engine_out out;
    size_t sent;         /* bytes of out already written */
    double heartbeat_s;  /* 0: off */
    uint64_t last_input; /* the head's last line */
    char in[4096];
    size_t inlen;
    bool quit;
};

static const struct cli_opt agent_opts[] = {
    {'r', "rate", "HZ", "stack samples per second (default 10)"},
    {OPT_ALL, "all-threads", NULL, "every Python thread (default: main thread only)"},
    {OPT_NO_GIL, "no-gil", NULL, "no GIL counters"},
    {OPT_GIL_ONLY, "gil", NULL, "only stacks of threads holding the GIL (record --gil)"},
    {OPT_ONCPU, "oncpu", NULL, "only stacks of threads running on a CPU (record --oncpu)"},
    {OPT_NATIVE, "native", NULL,
     "native (C/C++) frames merged into every sample (stops each thread briefly per sample; "
     "keep the rate low)"},
    {OPT_NO_MEM, "no-mem", NULL, "no memory counters"},
    {OPT_HEARTBEAT, "heartbeat", "S",
     "exit when the head sent nothing for S s (default 30; 0 off)"},
    {OPT_TICK, "tick", "MS", "milliseconds between writes (default 100)"},
    {0},
};

static const struct cli_opt *const agent_tables[] = {agent_opts, cli_opts_help, cli_disc_opts,
                                                     NULL};

static void agent_usage(FILE *f)
{
    fputs("usage: ranktop agent [options]\n"
          "\n"
          "Started on each node by the head (ranktop, record, ls or dump with --hosts):\n"
          "runs this node's collectors and writes a stream of JSON lines on stdout. Exits\n"
          "when its stdin closes. Not meant to be run by hand.\n"
          "\n",
          f);
    cli_opts_usage(f, agent_tables);
    fputs("\nExit status: 0 when the head is gone (stdin closed, heartbeat), 1 when the\n"
          "collectors cannot start, 2 on bad usage.\n",
          f);
}

/* Writes what is buffered; false when the head is gone (EPIPE, or any other failure). */
static bool flush_out(struct agent *a)
{
    while (a->sent < a->out.len) {
        ssize_t n = write(1, a->out.buf + a->sent, a->out.len - a->sent);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        a->sent += (size_t)n;
    }
    a->out.len = a->sent = 0;
    return true;
}

/* Writes event m's line on stdout at once (the hello, or the bye of an agent that cannot start). */
static void say(const struct record_event *m)
{
    char line[AGENTPROTO_LINE_MAX];

    if (agentproto_write(line, sizeof(line), m))
        fputs(line, stdout);
    fflush(stdout);
}

static void hello(double rate)
{
    struct record_event m = {.type = RECORD_HELLO};
    struct record_hello *h = &m.u.hello;
    const char *node = getenv("SLURMD_NODENAME"); /* srun's tasks: the head's name for us */
    char host[64] = "", *b = NULL;
    struct timeval tv;
    size_t len;

    gethostname(host, sizeof(host) - 1);
    if (file_read_all("/proc/sys/kernel/random/boot_id", 64, &b, &len) == 0) {
        b[strcspn(b, "\n")] = '\0';
        agentproto_copy_text(h->boot_id, sizeof(h->boot_id), b);
        free(b);
    }
    gettimeofday(&tv, NULL);
    h->major = AGENTPROTO_MAJOR;
    h->minor = AGENTPROTO_MINOR;
    agentproto_copy_text(h->version, sizeof(h->version), RANKTOP_VERSION);
    agentproto_copy_text(h->host, sizeof(h->host), host);
    agentproto_copy_text(h->node, sizeof(h->node), node ? node : "");
    h->pid = (int)getpid();
    h->mono_ns = (int64_t)clock_mono_ns();
    h->wall_us = (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
    h->rate_hz = rate;
    say(&m);
}

/* "native PID on|off [NODE]": the monitor's native toggle for one of our ranks; srun sends
 * every task the line, naming the node it is meant for (its SLURMD_NODENAME or host name). */
static void native_command(struct agent *a, const char *args)
{
    char what[8] = "", node[80] = "", host[64] = "";
    const char *mine = getenv("SLURMD_NODENAME");
    int pid = 0;

    if (sscanf(args, "%d %7s %79s", &pid, what, node) < 2 || pid <= 0)
        return;
    gethostname(host, sizeof(host) - 1);
    if (node[0] && strcmp(node, host) && !(mine && !strcmp(node, mine)))
        return;
    if (!strcmp(what, "on") || !strcmp(what, "off"))
        engine_set_native(a->e, pid, !strcmp(what, "on"), NULL);
}

/* One command line from the head. Unknown commands are ignored: a newer head may send more. */
static void command(struct agent *a, char *line)
{
    unsigned long long ns;
    double hz;
    char buf[AGENTPROTO_LINE_MAX];

    if (sscanf(line, "ping %llu", &ns) == 1) {
        struct record_event m = {.type = RECORD_PONG};
        size_t n;

        m.u.pong = (struct record_pong){(int64_t)ns, (int64_t)clock_mono_ns()};
        n = agentproto_write(buf, sizeof(buf), &m);
        if (a->out.len + (size_t)n + 1 > a->out.cap) {
            a->out.cap = (a->out.len + (size_t)n + 1) * 2;
            a->out.buf = x_reallocarray(a->out.buf, a->out.cap, 1);
        }
        memcpy(a->out.buf + a->out.len, buf, (size_t)n + 1);
        a->out.len += (size_t)n;
    } else if (sscanf(line, "rate %lf", &hz) == 1 && hz > 0) {
        engine_set_rate(a->e, hz);
    } else if (!strncmp(line, "native ", 7)) {
        native_command(a, line + 7);
    } else if (!strcmp(line, "quit")) {
        a->quit = true;
    }
}

/* Reads what stdin has; false at EOF or on an error (the head is gone). */
static bool read_input(struct agent *a)
{
    ssize_t n = read(0, a->in + a->inlen, sizeof(a->in) - a->inlen);
    char *nl;

    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (n <= 0)
        return false;
    a->inlen += (size_t)n;
    a->last_input = clock_mono_ns();
    while ((nl = memchr(a->in, '\n', a->inlen))) {
        *nl = '\0';
        command(a, a->in);
        a->inlen -= (size_t)(nl + 1 - a->in);
        memmove(a->in, nl + 1, a->inlen);
    }
    if (a->inlen == sizeof(a->in)) /* a line this long is no command: drop it */
        a->inlen = 0;
    return true;
}

static int agent_loop(struct agent *a, int tick_ms)
{
    uint64_t next = clock_mono_ns();

    a->last_input = next;
    while (!a->quit) {
        struct pollfd p = {.fd = 0, .events = POLLIN};
        uint64_t now = clock_mono_ns();
        int wait = next > now ? (int)((next - now) / 1000000u) : 0;

        if (poll(&p, 1, wait) > 0 && !read_input(a))
            return 0;                    /* stdin closed: the head is gone */
        if (a->out.len && !flush_out(a)) /* a pong goes at once: its delay is the error */
            return 0;
        now = clock_mono_ns();
        if (a->heartbeat_s > 0 && (double)(now - a->last_input) / 1e9 > a->heartbeat_s) {
            fprintf(stderr, "ranktop agent: no word from the head for %g s, leaving\n",
                    a->heartbeat_s);
            return 0;
        }
        if (now < next)
            continue;
        next = now + (uint64_t)tick_ms * 1000000u;
        engine_wire_tick(a->e, a->w, &a->out);
        if (!flush_out(a))
            return 0; /* EPIPE: the head is gone */
    }
    return 0;
}

static int agent_option(int c, const char *arg, struct engine_opts *o, struct agent *a,
                        int *tick_ms)
{
    char *end;
    double v;

    switch (c) {
    case 'r':
    case OPT_HEARTBEAT:
    case OPT_TICK:
        v = strtod(arg, &end);
        if (end == arg || *end || !(v >= 0) || v > 1e6 || (c == 'r' && !(v >= 0.1 && v <= 1000)) ||
            (c == OPT_TICK && !(v >= 10))) {
            fprintf(stderr, "ranktop agent: bad value '%s'\n", arg);
            return -1;
        }
        if (c == 'r')
            o->rate_hz = v;
        else if (c == OPT_HEARTBEAT)
            a->heartbeat_s = v;
        else
            *tick_ms = (int)v;
        return 0;
    case OPT_ALL:
        o->all_threads = true;
        return 0;
    case OPT_NO_GIL:
        o->gil = false;
        return 0;
    case OPT_GIL_ONLY:
        o->gil_only = true;
        return 0;
    case OPT_ONCPU:
        o->oncpu = true;
        return 0;
    case OPT_NO_MEM:
        o->mem = false;
        return 0;
    case OPT_NATIVE:
        o->native = true;
        return 0;
    default:
        return cli_disc_handle(c, arg, &o->disc, "agent") == 1 ? 0 : -1;
    }
}

int cmd_agent(int argc, char **argv)
{
    static struct cli_getopt g;
    struct engine_opts o = {
        .rate_hz = 10, .gil = true, .mem = true, .gpu = true, .npu = true, .wire = true};
    struct agent a = {.heartbeat_s = 30};
    struct app_err err = {0};
    int c, tick_ms = 100, rc;

    cli_opts_getopt(agent_tables, &g);
    optind = 1;
    while ((c = getopt_long(argc, argv, g.shorts, g.longs, NULL)) != -1) {
        if (c == 'h') {
            agent_usage(stdout);
            return 0;
        }
        if (c == '?' || agent_option(c, optarg, &o, &a, &tick_ms) < 0) {
            cli_disc_fini(&o.disc);
            return cli_try_help("agent");
        }
    }
    signal(SIGPIPE, SIG_IGN);
    if (engine_start(&o, &a.e, &err) < 0) {
        struct record_event m = {.type = RECORD_BYE};
        char why[sizeof(err.msg) + 16];

        snprintf(why, sizeof(why), "cannot start: %s", err.msg);
        agentproto_copy_text(m.u.text, sizeof(m.u.text), why);
        say(&m);
        fprintf(stderr, "ranktop agent: %s\n", err.msg);
        cli_disc_fini(&o.disc);
        return 1;
    }
    a.w = engine_wire_new();
    hello(o.rate_hz);
    rc = agent_loop(&a, tick_ms);
    engine_stop(a.e);
    engine_wire_free(a.w);
    engine_free(a.e);
    engine_out_fini(&a.out);
    cli_disc_fini(&o.disc);
    return rc;
}
