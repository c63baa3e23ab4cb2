/* agent_replay: stands in for `RSH HOST ranktop agent ...` in bench_head. It writes, in real
 * time, the stream an agent on HOST would write for a training job, in the agent protocol as
 * the encoder writes it (hello; frames, stacks, ranks and threads defined once; runs on
 * change; a tick every 100 ms; RSS once a second), and exits when its stdin closes.
 *
 * Job shape (environment): REPLAY_RANKS ranks per host (default 8), REPLAY_THREADS threads per
 * rank (default 8). Every main thread alternates between forward and backward at each tick
 * until REPLAY_STALL_AT (CLOCK_MONOTONIC ns; 0 never); from then on every rank waits in
 * all_reduce, except rank 0 of the host named REPLAY_ODD_HOST, which waits in
 * load_batch_slowly. Ranks are numbered from the digits in the host name: sim007 holds ranks
 * 56-63 with 8 per host.
 *
 * REPLAY_BACKLOG (default 0) runs per main thread are written first, as fast as the head reads
 * them: the runs a long recording would hold (7200 is an hour at 10 Hz of a stack that changes
 * every 5 samples), packed 1 ns apart right after the hello, because the head's history starts
 * with the head and clamps older times to its start. Usage: agent_replay HOST [ignored...]. */
#include <ctype.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);

    return v && *v ? strtol(v, NULL, 10) : dflt;
}

static void definitions(const char *host, int base, int nranks, int nthreads)
{
    static const char *const fr[][3] = {
        {"<module>", "/job/train.py", "1"},
        {"main", "/job/train.py", "10"},
        {"forward", "/job/model.py", "20"},
        {"backward", "/job/model.py", "40"},
        {"all_reduce", "/torch/distributed_c10d.py", "1541"},
        {"load_batch_slowly", "/job/train.py", "12"},
        {"_bootstrap", "/py/threading.py", "995"},
        {"wait", "/py/threading.py", "320"},
    };
    unsigned long long t = now_ns();

    printf("{\"t\":\"hello\",\"proto\":[1,0],\"ver\":\"replay\",\"host\":\"%s\",\"mono\":%llu}\n",
           host, t);
    for (int i = 0; i < 8; i++)
        printf("{\"t\":\"f\",\"id\":%d,\"fn\":\"%s\",\"file\":\"%s\",\"ln\":%s}\n", i, fr[i][0],
               fr[i][1], fr[i][2]);
    printf("{\"t\":\"s\",\"id\":0,\"n\":3,\"at\":0,\"f\":[0,1,2]}\n"
           "{\"t\":\"s\",\"id\":1,\"n\":3,\"at\":0,\"f\":[0,1,3]}\n"
           "{\"t\":\"s\",\"id\":2,\"n\":3,\"at\":0,\"f\":[0,1,4]}\n"
           "{\"t\":\"s\",\"id\":3,\"n\":3,\"at\":0,\"f\":[0,1,5]}\n"
           "{\"t\":\"s\",\"id\":4,\"n\":2,\"at\":0,\"f\":[6,7]}\n");
    for (int r = 0; r < nranks; r++) {
        printf("{\"t\":\"r\",\"p\":%d,\"rank\":%d,\"dev\":\"gpu %d\",\"py\":\"3.11.7\",\"x\":false,"
               "\"ts\":%llu}\n",
               1000 + r, base + r, r, t);
        for (int k = 0; k < nthreads; k++) {
            int id = r * nthreads + k;

            printf("{\"t\":\"th\",\"id\":%d,\"p\":%d,\"w\":0,\"i\":%d,\"tid\":%d,\"m\":%s,"
                   "\"name\":\"%s\"}\n",
                   id, 1000 + r, 140000 + k, 1000 + r * 100 + k, k ? "false" : "true",
                   k ? "pin_memory" : "MainThread");
            if (k)
                printf("{\"t\":\"o\",\"th\":%d,\"s\":4,\"ts\":%llu}\n", id, t);
        }
    }
}

/* The backlog: n runs per main thread alternating forward and backward, 1 ns apart. */
static void backlog(long n, int nranks, int nthreads)
{
    unsigned long long t = now_ns();

    for (long k = 0; k < n; k++)
        for (int r = 0; r < nranks; r++)
            printf("{\"t\":\"o\",\"th\":%d,\"s\":%ld,\"ts\":%llu}\n", r * nthreads, k % 2,
                   t + (unsigned long long)k);
}

int main(int argc, char **argv)
{
    const char *host = argc > 1 ? argv[1] : "sim", *odd = getenv("REPLAY_ODD_HOST");
    int nranks = (int)env_long("REPLAY_RANKS", 8), nthreads = (int)env_long("REPLAY_THREADS", 8);
    unsigned long long stall = (unsigned long long)env_long("REPLAY_STALL_AT", 0), seq = 0;
    const char *d = host;
    int *cur, base;

    while (*d && !isdigit((unsigned char)*d))
        d++;
    base = atoi(d) * nranks;
    cur = calloc((size_t)nranks, sizeof(int));
    for (int r = 0; r < nranks; r++)
        cur[r] = -1;
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    definitions(host, base, nranks, nthreads);
    backlog(env_long("REPLAY_BACKLOG", 0), nranks, nthreads);
    for (;;) {
        struct pollfd p = {.fd = 0, .events = POLLIN};
        unsigned long long t = now_ns();
        char buf[512];

        for (int r = 0; r < nranks; r++) {
            bool stalled = stall && t >= stall;
            int s = !stalled ? (int)(seq % 2) : (odd && !strcmp(odd, host) && r == 0) ? 3 : 2;

            if (s != cur[r])
                printf("{\"t\":\"o\",\"th\":%d,\"s\":%d,\"ts\":%llu}\n", r * nthreads, s, t);
            cur[r] = s;
            if (seq % 10 == 0)
                printf("{\"t\":\"c\",\"p\":%d,\"id\":2,\"v\":%d,\"ts\":%llu}\n", 1000 + r, 2048 + r,
                       t);
        }
        seq++;
        printf("{\"t\":\"k\",\"seq\":%llu,\"ts\":%llu,\"n\":%llu,\"st\":%llu}\n", seq, t, seq,
               seq * (unsigned long long)(nranks * nthreads));
        if (fflush(stdout) == EOF)
            return 0; /* the head is gone */
        if (poll(&p, 1, 100) > 0 && read(0, buf, sizeof(buf)) <= 0)
            return 0; /* stdin closed: the head is gone */
    }
}
