/* Tests for rank_ident_parse (collectors/proc/procscan.c): the identity every launcher puts in
 * a rank's environment, and the precedence between launchers when several are present; and
 * for procexit_parse (collectors/proc/procexit.c) on hand-built process-event connector
 * datagrams: exits, thread exits, acknowledgements, other events, and malformed lengths.
 *
 * Environ images are built here exactly as the kernel shows /proc/PID/environ (NAME=value
 * entries each ended by a NUL) in an allocation of exactly their length, so the sanitizer
 * builds catch a read past the end. Single-threaded. */
#include "ranktop/procenv.h"
#include "ranktop/procexit.h"
#include "tsupport.h"

#include <check.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* An environ image of the NULL-terminated entries, in a buffer of exactly *len bytes. */
static char *env_image(size_t *len, ...)
{
    char tmp[4096];
    size_t n = 0;
    const char *e;
    va_list ap;
    char *out;

    va_start(ap, len);
    while ((e = va_arg(ap, const char *)) != NULL) {
        size_t l = strlen(e) + 1;

        ck_assert_uint_le(n + l, sizeof(tmp));
        memcpy(tmp + n, e, l);
        n += l;
    }
    va_end(ap);
    out = malloc(n ? n : 1);
    memcpy(out, tmp, n);
    *len = n;
    return out;
}

/* Parses the image and checks the four identity fields and the launcher name. */
static void expect(char *env, size_t len, int rank, int local, int world, const char *launcher)
{
    struct rank_ident id;

    rank_ident_parse(env, len, &id);
    ck_assert_int_eq(id.rank, rank);
    ck_assert_int_eq(id.local_rank, local);
    ck_assert_int_eq(id.world_size, world);
    ck_assert_str_eq(id.launcher, launcher);
    free(env);
}

START_TEST(test_none)
{
    size_t len;
    char *env = env_image(&len, "PATH=/usr/bin", "HOME=/root", (char *)NULL);

    expect(env, len, -1, -1, -1, "");
}
END_TEST

START_TEST(test_torchrun)
{
    size_t len;
    char *env = env_image(&len, "RANK=5", "LOCAL_RANK=1", "WORLD_SIZE=8", "LOCAL_WORLD_SIZE=4",
                          "GROUP_RANK=1", "MASTER_ADDR=n1", (char *)NULL);
    struct rank_ident id;

    rank_ident_parse(env, len, &id);
    ck_assert_int_eq(id.local_world_size, 4);
    ck_assert_int_eq(id.group_rank, 1);
    ck_assert_str_eq(id.master_addr, "n1");
    expect(env, len, 5, 1, 8, "torchrun");
}
END_TEST

START_TEST(test_openmpi)
{
    size_t len;
    char *env = env_image(&len, "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_LOCAL_RANK=1",
                          "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_SIZE=2", "PMIX_RANK=3",
                          (char *)NULL);
    struct rank_ident id;

    rank_ident_parse(env, len, &id);
    ck_assert_int_eq(id.local_world_size, 2);
    expect(env, len, 3, 1, 4, "openmpi");
}
END_TEST

START_TEST(test_mpich)
{
    size_t len;
    char *env = env_image(&len, "PMI_RANK=7", "PMI_SIZE=16", "MPI_LOCALRANKID=3",
                          "MPI_LOCALNRANKS=8", (char *)NULL);

    expect(env, len, 7, 3, 16, "mpich");
}
END_TEST

START_TEST(test_pmix)
{
    size_t len;
    char *env =
        env_image(&len, "PMIX_RANK=2", "PMIX_LOCAL_RANK=0", "PMIX_LOCAL_SIZE=2", (char *)NULL);
    struct rank_ident id;

    rank_ident_parse(env, len, &id);
    ck_assert_int_eq(id.local_world_size, 2);
    /* PMIx publishes no world size in the environment unless PMIX_SIZE is set. */
    expect(env, len, 2, 0, -1, "pmix");
}
END_TEST

START_TEST(test_mvapich2)
{
    size_t len;
    char *env = env_image(&len, "MV2_COMM_WORLD_RANK=9", "MV2_COMM_WORLD_LOCAL_RANK=1",
                          "MV2_COMM_WORLD_SIZE=12", (char *)NULL);

    expect(env, len, 9, 1, 12, "mvapich2");
}
END_TEST

START_TEST(test_horovod)
{
    size_t len;
    char *env = env_image(&len, "HOROVOD_RANK=4", "HOROVOD_LOCAL_RANK=0", "HOROVOD_SIZE=6",
                          "HOROVOD_LOCAL_SIZE=3", (char *)NULL);

    expect(env, len, 4, 0, 6, "horovod");
}
END_TEST

START_TEST(test_slurm)
{
    size_t len;
    char *env = env_image(&len, "SLURM_PROCID=11", "SLURM_LOCALID=3", "SLURM_NTASKS=16",
                          "SLURM_JOB_ID=77", (char *)NULL);

    expect(env, len, 11, 3, 16, "slurm");
}
END_TEST

/* torchrun under srun: one Slurm task per node starts the node's ranks, so every rank
 * carries the task's SLURM_PROCID / SLURM_LOCALID; torchrun's own variables must win and
 * none of the Slurm fields may leak into the identity. */
START_TEST(test_torchrun_under_srun)
{
    size_t len;
    char *env = env_image(&len, "SLURM_PROCID=1", "SLURM_LOCALID=0", "SLURM_NTASKS=2", "RANK=6",
                          "WORLD_SIZE=8", (char *)NULL);

    expect(env, len, 6, -1, 8, "torchrun");
}
END_TEST

/* srun --mpi=pmix with Open MPI: every MPI variable and Slurm's; Open MPI's come first. */
START_TEST(test_openmpi_under_srun)
{
    size_t len;
    char *env = env_image(&len, "SLURM_PROCID=5", "SLURM_LOCALID=1", "SLURM_NTASKS=8",
                          "PMIX_RANK=5", "OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_LOCAL_RANK=1",
                          "OMPI_COMM_WORLD_SIZE=8", (char *)NULL);

    expect(env, len, 5, 1, 8, "openmpi");
}
END_TEST

/* A rank variable that is not a number does not count: the next launcher supplies the
 * identity, and its fields are all its own. */
START_TEST(test_bad_rank_falls_through)
{
    size_t len;
    char *env = env_image(&len, "RANK=abc", "LOCAL_RANK=2", "WORLD_SIZE=4", "PMI_RANK=1",
                          "PMI_SIZE=2", (char *)NULL);

    expect(env, len, 1, -1, 2, "mpich");
}
END_TEST

/* Negative, overflowing, empty or trailing-garbage values are unknown, never a number. */
START_TEST(test_bad_values)
{
    size_t len;
    char *env = env_image(&len, "RANK=3", "LOCAL_RANK=-1", "WORLD_SIZE=99999999999",
                          "LOCAL_WORLD_SIZE=", (char *)NULL);
    struct rank_ident id;

    rank_ident_parse(env, len, &id);
    ck_assert_int_eq(id.local_world_size, -1);
    expect(env, len, 3, -1, -1, "torchrun");
}
END_TEST

/* Names that merely end like a rank variable, and an entry cut by the end of the image
 * (no final NUL), are not matches. */
START_TEST(test_near_names_and_truncation)
{
    size_t len;
    char *env = env_image(&len, "MY_RANK=1", "XPMI_RANK=2", "SLURM_PROCIDX=3", (char *)NULL);
    static const char cut[] = {'R', 'A', 'N', 'K', '=', '4'};
    char *img = malloc(sizeof(cut));

    expect(env, len, -1, -1, -1, "");
    memcpy(img, cut, sizeof(cut));
    expect(img, sizeof(cut), -1, -1, -1, "");
}
END_TEST

/* ---- procexit_parse ------------------------------------------------------------------ */

#define EV_EXIT 0x80000000u
#define EV_FORK 0x00000001u
#define EV_NONE 0u

/* Appends one netlink message holding a process event (what, then the u32 data words) to
 * buf at *len, as the kernel lays it out: nlmsghdr, cn_msg, proc_event (what, cpu,
 * timestamp, data), the message padded to 4 bytes. */
static void put_event(unsigned char *buf, size_t *len, uint32_t what, const uint32_t *data,
                      size_t nwords)
{
    size_t evlen = 16 + 4 * nwords, at = *len;
    struct nlmsghdr nh = {.nlmsg_len = (uint32_t)(NLMSG_HDRLEN + sizeof(struct cn_msg) + evlen),
                          .nlmsg_type = NLMSG_DONE};
    struct cn_msg cn = {.id = {CN_IDX_PROC, CN_VAL_PROC}, .len = (uint16_t)evlen};
    unsigned char ev[64] = {0};

    memcpy(ev, &what, 4);
    memcpy(ev + 16, data, 4 * nwords);
    memset(buf + at, 0, NLMSG_ALIGN(nh.nlmsg_len));
    memcpy(buf + at, &nh, sizeof(nh));
    memcpy(buf + at + NLMSG_HDRLEN, &cn, sizeof(cn));
    memcpy(buf + at + NLMSG_HDRLEN + sizeof(cn), ev, evlen);
    *len = at + NLMSG_ALIGN(nh.nlmsg_len);
}

/* An exit event: pid, tgid, wait status, exit_signal (SIGCHLD), parent pid and tgid. */
static void put_exit(unsigned char *buf, size_t *len, uint32_t pid, uint32_t tgid, uint32_t st)
{
    uint32_t d[6] = {pid, tgid, st, SIGCHLD, 1, 1};

    put_event(buf, len, EV_EXIT, d, 6);
}

/* Parses a copy of exactly len bytes (so ASan sees any overread). */
static int parse_exact(const unsigned char *buf, size_t len, struct procexit_event *ev, size_t max,
                       int *ack)
{
    unsigned char *copy = malloc(len ? len : 1);
    int n;

    memcpy(copy, buf, len);
    n = procexit_parse(copy, len, ev, max, ack);
    free(copy);
    return n;
}

START_TEST(test_exit_events)
{
    unsigned char buf[1024];
    size_t len = 0;
    struct procexit_event ev[4];
    int ack = -1;

    put_exit(buf, &len, 4242, 4242, 3 << 8);         /* exit(3) */
    put_exit(buf, &len, 4250, 4242, 3 << 8);         /* one of its threads: not a process exit */
    put_exit(buf, &len, 5000, 5000, SIGSEGV | 0x80); /* SIGSEGV with a core dump */
    put_exit(buf, &len, 5001, 5001, SIGKILL);
    ck_assert_int_eq(parse_exact(buf, len, ev, 4, &ack), 3);
    ck_assert_int_eq(ack, -1);
    ck_assert_int_eq(ev[0].pid, 4242);
    ck_assert(WIFEXITED(ev[0].status) && WEXITSTATUS(ev[0].status) == 3);
    ck_assert_int_eq(ev[1].pid, 5000);
    ck_assert(WIFSIGNALED(ev[1].status) && WTERMSIG(ev[1].status) == SIGSEGV);
    ck_assert(WIFSIGNALED(ev[2].status) && WTERMSIG(ev[2].status) == SIGKILL);
    /* The output bound holds. */
    ck_assert_int_eq(parse_exact(buf, len, ev, 1, &ack), 1);
}
END_TEST

START_TEST(test_ack_and_other_events)
{
    unsigned char buf[1024];
    size_t len = 0;
    uint32_t zero = 0, eperm = 1, fork_data[4] = {1, 1, 77, 77};
    struct procexit_event ev[4];
    int ack = -1;

    put_event(buf, &len, EV_FORK, fork_data, 4);
    put_event(buf, &len, EV_NONE, &zero, 1);
    ck_assert_int_eq(parse_exact(buf, len, ev, 4, &ack), 0);
    ck_assert_int_eq(ack, 0);
    len = 0;
    put_event(buf, &len, EV_NONE, &eperm, 1);
    ck_assert_int_eq(parse_exact(buf, len, ev, 4, &ack), 0);
    ck_assert_int_eq(ack, 1);
}
END_TEST

/* Another connector's message, and an exit whose event is shorter than an exit's data,
 * are skipped; what follows them is still read. */
START_TEST(test_skips_foreign_and_short)
{
    unsigned char buf[1024];
    size_t len = 0, first;
    struct procexit_event ev[4];
    struct cn_msg cn;
    uint32_t short_exit[2] = {9, 9};
    int ack = -1;

    put_exit(buf, &len, 7, 7, 0);
    memcpy(&cn, buf + NLMSG_HDRLEN, sizeof(cn));
    cn.id.idx = CN_IDX_PROC + 1;
    memcpy(buf + NLMSG_HDRLEN, &cn, sizeof(cn));
    first = len;
    put_event(buf, &len, EV_EXIT, short_exit, 2);
    put_exit(buf, &len, 8, 8, 1 << 8);
    ck_assert_uint_gt(len, first);
    ck_assert_int_eq(parse_exact(buf, len, ev, 4, &ack), 1);
    ck_assert_int_eq(ev[0].pid, 8);
}
END_TEST

/* Lengths that do not fit the datagram: a message longer than what was read, a connector
 * length beyond its message, a header cut in the middle, an empty datagram. */
START_TEST(test_malformed)
{
    unsigned char buf[1024];
    size_t len = 0;
    struct procexit_event ev[4];
    struct nlmsghdr nh;
    struct cn_msg cn;
    int ack = -1;

    put_exit(buf, &len, 7, 7, 0);
    put_exit(buf, &len, 8, 8, 0);
    /* The second message is cut: the first exit is kept, then the error. */
    ck_assert_int_eq(parse_exact(buf, len - 8, ev, 4, &ack), APP_E_PARSE);
    memcpy(&nh, buf, sizeof(nh));
    nh.nlmsg_len = 8;
    memcpy(buf, &nh, sizeof(nh));
    ck_assert_int_eq(parse_exact(buf, len, ev, 4, &ack), APP_E_PARSE);
    len = 0;
    put_exit(buf, &len, 7, 7, 0);
    memcpy(&cn, buf + NLMSG_HDRLEN, sizeof(cn));
    cn.len = 4000;
    memcpy(buf + NLMSG_HDRLEN, &cn, sizeof(cn));
    ck_assert_int_eq(parse_exact(buf, len, ev, 4, &ack), 0);
    ck_assert_int_eq(parse_exact(buf, 10, ev, 4, &ack), 0);
    ck_assert_int_eq(parse_exact(buf, 0, ev, 4, &ack), 0);
    ck_assert_int_eq(ack, -1);
}
END_TEST

/* Every prefix of a valid datagram parses without reading past it. */
START_TEST(test_every_prefix)
{
    unsigned char buf[1024];
    size_t len = 0;
    struct procexit_event ev[4];
    int ack = -1;

    put_exit(buf, &len, 7, 7, 0);
    put_exit(buf, &len, 8, 8, 0);
    for (size_t l = 0; l <= len; l++) {
        int n = parse_exact(buf, l, ev, 4, &ack);

        ck_assert(n == APP_E_PARSE || (n >= 0 && n <= 2));
    }
    ck_assert_int_eq(parse_exact(buf, len, ev, 4, &ack), 2);
}
END_TEST

static Suite *procenv_suite(void)
{
    Suite *s = suite_create("procenv");
    TCase *tc = tcase_create("launchers");

    tcase_add_test(tc, test_none);
    tcase_add_test(tc, test_torchrun);
    tcase_add_test(tc, test_openmpi);
    tcase_add_test(tc, test_mpich);
    tcase_add_test(tc, test_pmix);
    tcase_add_test(tc, test_mvapich2);
    tcase_add_test(tc, test_horovod);
    tcase_add_test(tc, test_slurm);
    tcase_add_test(tc, test_torchrun_under_srun);
    tcase_add_test(tc, test_openmpi_under_srun);
    tcase_add_test(tc, test_bad_rank_falls_through);
    tcase_add_test(tc, test_bad_values);
    tcase_add_test(tc, test_near_names_and_truncation);
    suite_add_tcase(s, tc);
    tc = tcase_create("procexit");
    tcase_add_test(tc, test_exit_events);
    tcase_add_test(tc, test_ack_and_other_events);
    tcase_add_test(tc, test_skips_foreign_and_short);
    tcase_add_test(tc, test_malformed);
    tcase_add_test(tc, test_every_prefix);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ts_run(procenv_suite());
}
