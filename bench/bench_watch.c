/* bench_watch: the CPU `ranktop watch` costs on a node of many ranks (issue 27: at most 1 % of
 * one core for 64 local ranks at 1 Hz). Starts N Python ranks (default 64; RANK set, the main
 * thread in a sleep loop, a second thread too), runs `ranktop watch -p PIDS -r 1` on them with
 * a --hang-after no run reaches (so no report is written: reports are rare and cost their own
 * dump), lets it warm up WARM seconds (default 10: discovery, attaching) and prints its CPU over
 * the next SECONDS (default 60) from /proc/PID/stat, as % of one core. Not a test.
 *
 * Usage: bench_watch [--ranks N] [--seconds S] [--warm S] [PYTHON] */
#include "bench_support.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 120 /* bench_track keeps 128 children */

static const char rank_code[] = "import threading, time\n"
                                "def beat():\n"
                                "    while True: time.sleep(0.5)\n"
                                "threading.Thread(target=beat, daemon=True).start()\n"
                                "while True: time.sleep(1)\n";

static pid_t start_rank(const char *python, int rank)
{
    pid_t pid = fork();

    if (pid == 0) {
        char r[16];

        snprintf(r, sizeof(r), "%d", rank);
        setenv("RANK", r, 1);
        setenv("WORLD_SIZE", "64", 1);
        execl(python, python, "-S", "-c", rank_code, (char *)NULL);
        _exit(127);
    }
    if (pid > 0)
        bench_track(pid);
    return pid;
}

/* utime + stime of pid in seconds, -1 when unreadable. */
static double cpu_s(pid_t pid)
{
    char path[64], buf[2048], *p;
    unsigned long long ut = 0, st = 0;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return -1;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

int main(int argc, char **argv)
{
    int nranks = 64;
    double seconds = 60, warm = 10, a, b;
    const char *python = bench_python(11);
    char pids[MAX_RANKS * 12] = "", out[] = "/tmp/bench-watch-XXXXXX";
    size_t n = 0;
    pid_t w;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
            nranks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--warm") && i + 1 < argc)
            warm = atof(argv[++i]);
        else
            python = argv[i];
    }
    if (nranks < 1 || nranks > MAX_RANKS || !mkdtemp(out)) {
        fprintf(stderr, "bench_watch: --ranks 1..%d, and a temp directory\n", MAX_RANKS);
        return 2;
    }
    bench_handlers_install();
    for (int r = 0; r < nranks; r++) {
        pid_t pid = start_rank(python, r);

        n += (size_t)snprintf(pids + n, sizeof(pids) - n, "%s%d", r ? "," : "", (int)pid);
    }
    bench_sleep_s(2); /* let the interpreters start */
    w = fork();
    if (w == 0) {
        execl(BENCH_RANKTOP, BENCH_RANKTOP, "watch", "-p", pids, "-r", "1", "--hang-after",
              "1000000", "--out", out, "--nvidia-smi", "/nonexistent", "--npu-smi", "/nonexistent",
              (char *)NULL);
        _exit(127);
    }
    bench_track(w);
    bench_sleep_s(warm);
    a = cpu_s(w);
    bench_sleep_s(seconds);
    b = cpu_s(w);
    bench_print_load("during");
    printf("ranktop watch, %d ranks at 1 Hz: %.3f s CPU in %.0f s = %.2f %% of one core\n", nranks,
           b - a, seconds, 100 * (b - a) / seconds);
    kill(w, SIGTERM);
    waitpid(w, NULL, 0);
    bench_untrack(w);
    bench_kill_tracked();
    rmdir(out);
    return 0;
}
