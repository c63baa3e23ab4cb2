/* Tests for rank_ident_parse (collectors/proc/procscan.c): the identity every launcher puts in
 * a rank's environment, and the precedence between launchers when several are present; and
 * for procexit_parse (collectors/proc/procexit.c) on hand-built process-event connector
 * datagrams: exits, thread exits, acknowledgements, other events, and malformed lengths.
 *
 * Environ images are built here exactly as the kernel shows /proc/PID/environ (NAME=value
 * entries each ended by a NUL) in an allocation of exactly their length, so the sanitizer
 * builds catch a read past the end. Single-threaded. */
#include "ranktop/proc/procenv.h"
#include "ranktop/proc/procexit.h"
#include "tsupport.h"

#include <check.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define MAX_VARS 8

/* One environment and the identity it must give. */
struct ident_case {
    const char *what;
    const char *env[MAX_VARS]; /* NULL-terminated */
    int rank, local_rank, world_size, local_world_size;
    const char *launcher;
};

static const struct ident_case cases[] = {
    {"none", {"PATH=/usr/bin", "HOME=/root"}, -1, -1, -1, -1, ""},
    {"torchrun",
     {"RANK=5", "LOCAL_RANK=1", "WORLD_SIZE=8", "LOCAL_WORLD_SIZE=4", "GROUP_RANK=1"},
     5,
     1,
     8,
     4,
     "torchrun"},
    {"openmpi",
     {"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_SIZE=4",
      "OMPI_COMM_WORLD_LOCAL_SIZE=2", "PMIX_RANK=3"},
     3,
     1,
     4,
     2,
     "openmpi"},
    {"mpich",
     {"PMI_RANK=7", "PMI_SIZE=16", "MPI_LOCALRANKID=3", "MPI_LOCALNRANKS=8"},
     7,
     3,
     16,
     8,
     "mpich"},
    /* PMIx publishes no world size in the environment unless PMIX_SIZE is set. */
    {"pmix", {"PMIX_RANK=2", "PMIX_LOCAL_RANK=0", "PMIX_LOCAL_SIZE=2"}, 2, 0, -1, 2, "pmix"},
    {"mvapich2",
     {"MV2_COMM_WORLD_RANK=9", "MV2_COMM_WORLD_LOCAL_RANK=1", "MV2_COMM_WORLD_SIZE=12"},
     9,
     1,
     12,
     -1,
     "mvapich2"},
    {"horovod",
     {"HOROVOD_RANK=4", "HOROVOD_LOCAL_RANK=0", "HOROVOD_SIZE=6", "HOROVOD_LOCAL_SIZE=3"},
     4,
     0,
     6,
     3,
     "horovod"},
    {"slurm",
     {"SLURM_PROCID=11", "SLURM_LOCALID=3", "SLURM_NTASKS=16", "SLURM_JOB_ID=77"},
     11,
     3,
     16,
     -1,
     "slurm"},
    /* torchrun under srun: one Slurm task per node starts the node's ranks, so every rank
     * carries the task's SLURM_PROCID / SLURM_LOCALID; torchrun's variables win and none of
     * the Slurm fields leaks into the identity. */
    {"torchrun under srun",
     {"SLURM_PROCID=1", "SLURM_LOCALID=0", "SLURM_NTASKS=2", "RANK=6", "WORLD_SIZE=8"},
     6,
     -1,
     8,
     -1,
     "torchrun"},
    /* srun --mpi=pmix with Open MPI: every MPI variable and Slurm's; Open MPI's come first. */
    {"openmpi under srun",
     {"SLURM_PROCID=5", "SLURM_LOCALID=1", "SLURM_NTASKS=8", "PMIX_RANK=5",
      "OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_SIZE=8"},
     5,
     1,
     8,
     -1,
     "openmpi"},
    /* A rank that is not a number does not count: the next launcher supplies the identity,
     * all of its fields its own. */
    {"bad rank falls through",
     {"RANK=abc", "LOCAL_RANK=2", "WORLD_SIZE=4", "PMI_RANK=1", "PMI_SIZE=2"},
     1,
     -1,
     2,
     -1,
     "mpich"},
    /* Negative, overflowing or empty values are unknown, never a number. */
    {"bad values",
     {"RANK=3", "LOCAL_RANK=-1", "WORLD_SIZE=99999999999", "LOCAL_WORLD_SIZE="},
     3,
     -1,
     -1,
     -1,
     "torchrun"},
    /* Names that merely end or start like a rank variable are not matches. */
    {"near names", {"MY_RANK=1", "XPMI_RANK=2", "SLURM_PROCIDX=3"}, -1, -1, -1, -1, ""},
};

/* An environ image of the entries in a buffer of exactly *len bytes. */
static char *env_image(const char *const *entries, size_t *len)
{
    size_t n = 0;
    char *out;

    for (int i = 0; i < MAX_VARS && entries[i]; i++)
        n += strlen(entries[i]) + 1;
    out = malloc(n ? n : 1);
    *len = 0;
    for (int i = 0; i < MAX_VARS && entries[i]; i++) {
        memcpy(out + *len, entries[i], strlen(entries[i]) + 1);
        *len += strlen(entries[i]) + 1;
    }
    return out;
}

START_TEST(test_launcher)
{
    const struct ident_case *c = &cases[_i];
    struct rank_ident id;
    size_t len;
    char *env = env_image(c->env, &len);

    rank_ident_parse(env, len, &id);
    free(env);
    ck_assert_msg(id.rank == c->rank && id.local_rank == c->local_rank &&
                      id.world_size == c->world_size && id.local_world_size == c->local_world_size,
                  "%s: got rank %d local %d world %d local world %d", c->what, id.rank,
                  id.local_rank, id.world_size, id.local_world_size);
    ck_assert_msg(!strcmp(id.launcher, c->launcher), "%s: launcher '%s'", c->what, id.launcher);
}
END_TEST

/* The launcher-independent fields are read too. */
START_TEST(test_other_fields)
{
    static const char *const vars[] = {"GROUP_RANK=1", "MASTER_ADDR=n1", "MASTER_PORT=29500",
                                       "CUDA_VISIBLE_DEVICES=2,3", NULL};
    struct rank_ident id;
    size_t len;
    char *env = env_image(vars, &len);

    rank_ident_parse(env, len, &id);
    free(env);
    ck_assert_int_eq(id.group_rank, 1);
    ck_assert_str_eq(id.master_addr, "n1");
    ck_assert_str_eq(id.master_port, "29500");
    ck_assert_str_eq(id.cuda_visible, "2,3");
    ck_assert_str_eq(id.launcher, "");
}
END_TEST

/* An entry cut by the end of the image (no final NUL) is not a match. */
START_TEST(test_truncated_entry)
{
    static const char cut[] = {'R', 'A', 'N', 'K', '=', '4'};
    char *img = malloc(sizeof(cut));
    struct rank_ident id;

    memcpy(img, cut, sizeof(cut));
    rank_ident_parse(img, sizeof(cut), &id);
    free(img);
    ck_assert_int_eq(id.rank, -1);
    ck_assert_str_eq(id.launcher, "");
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

    tcase_add_loop_test(tc, test_launcher, 0, (int)(sizeof(cases) / sizeof(cases[0])));
    tcase_add_test(tc, test_other_fields);
    tcase_add_test(tc, test_truncated_entry);
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
