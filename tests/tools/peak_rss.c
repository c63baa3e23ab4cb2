/* peak_rss OUT CMD [ARG...]: runs CMD and writes its peak resident set in KiB to OUT; exits
 * with CMD's status (128 + N when a signal N ended it), and CMD keeps stdin, stdout, stderr.
 *
 * The figure is the kernel's own: VmHWM of /proc/PID/status, read every 20 ms while CMD runs,
 * and at the end the same high-water mark as wait4() reports it (ru_maxrss is VmHWM when the
 * process exited, so a peak in CMD's last moments, while it writes its output, is not
 * missed). A small C program starts CMD, not a script's interpreter: ru_maxrss also keeps the
 * resident set of the process that forked before the exec, which must stay negligible. Test
 * tool, one thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long hwm_read(pid_t pid)
{
    char path[64], line[256];
    long kib = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if (!(f = fopen(path, "r")))
        return 0;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmHWM:", 6))
            kib = strtol(line + 6, NULL, 10);
    fclose(f);
    return kib;
}

int main(int argc, char **argv)
{
    struct timespec nap = {0, 20000000};
    struct rusage ru;
    long peak = 0;
    int status = 0;
    pid_t pid;
    FILE *out;

    if (argc < 3) {
        fprintf(stderr, "usage: peak_rss OUT CMD [ARG...]\n");
        return 2;
    }
    if ((pid = fork()) < 0)
        return perror("fork"), 2;
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    while (wait4(pid, &status, WNOHANG, &ru) == 0) {
        long now = hwm_read(pid);

        peak = now > peak ? now : peak;
        nanosleep(&nap, NULL);
    }
    peak = ru.ru_maxrss > peak ? ru.ru_maxrss : peak;
    if (!(out = fopen(argv[1], "w")) || fprintf(out, "%ld\n", peak) < 0 || fclose(out) != 0)
        return perror(argv[1]), 2;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
