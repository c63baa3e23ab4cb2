/* `ranktop -- CMD...`, `ranktop record ... -- CMD...` (and any command that launches the job it
 * watches): CMD started in a process group of its own, its state polled, and stopped on request
 * (SIGTERM to the group, SIGKILL after a grace). Its ranks are found by discovery from its
 * process tree (discovery_opts.job). Main thread only. */
#ifndef RANKTOP_CLI_LAUNCH_H
#define RANKTOP_CLI_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>

struct cli_job {
    int pid;     /* CMD's process, the leader of its own process group; 0 before the start */
    bool ended;  /* the leader has exited and was reaped */
    int status;  /* its waitpid status, once ended */
    bool killed; /* cli_job_stop had to send SIGKILL */
};

/* CMD after "--" on a command line that getopt_long parsed up to at (its optind): argv + at when
 * the argument before it was "--" and a command follows, else NULL. */
char **cli_job_argv(int argc, char **argv, int at);

/* Whether the command line ends with a "--" that no command follows (a usage error). */
bool cli_job_missing(int argc, char **argv, int at);

/* Starts argv (argv[0] looked up on PATH) in a new process group, with the signal mask and the
 * dispositions ranktop changed back to their defaults. Its standard input is /dev/null when
 * ranktop's is a terminal (a background group reading the terminal would be stopped); its
 * output goes to the file out (created or truncated; both stdout and stderr) or, with out
 * NULL, where ranktop's goes. Returns 0, or -1 with a message in err (a command that cannot
 * be run included: the child reports its exec error before it exits with 127). */
int cli_job_start(struct cli_job *j, char *const *argv, const char *out, char *err, size_t errlen);

/* Whether the job's leader has ended (reaped without waiting; j->status holds how). */
bool cli_job_ended(struct cli_job *j);

/* Stops the job: SIGTERM to its process group, up to grace_s seconds for the leader to end,
 * then SIGKILL to the group. Reaps the leader. Nothing when it already ended. */
void cli_job_stop(struct cli_job *j, double grace_s);

/* The exit status a command that ran the job leaves with: the leader's exit code, 128 + the
 * signal that killed it (as a shell says). -1 while it runs. */
int cli_job_exit(const struct cli_job *j);

/* "exited with status 3", "killed by signal 15 (Terminated)" into out. */
void cli_job_describe(const struct cli_job *j, char *out, size_t len);

/* py-spy's name for a recording without -o: "NAME-YYYY-MM-DDTHH:MM:SS+ZZ:ZZ.EXT" (local time),
 * NAME being the basename of what (the job's command, a pid, "ranks"), EXT the format's
 * suffix without the dot. */
void cli_job_default_name(const char *what, const char *ext, char *out, size_t len);

#endif
