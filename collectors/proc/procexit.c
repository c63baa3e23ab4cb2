/* Exit statuses of processes we did not start, from the kernel's process-event connector.
 *
 * A rank is not our child, so waitpid cannot tell how it ended, and its parent reaps it at
 * once. The connector multicasts an event for every task that exits, carrying the wait
 * status. procexit_parse is pure and bounded: every length in a message (netlink header,
 * connector header, event) is checked against the datagram before a field is read, and
 * fields are copied out with memcpy because the event sits at an unaligned offset. The event
 * layout is written out here rather than taken from <linux/cn_proc.h>, whose enum holds a
 * value outside int that a strict C11 build rejects; it is part of the kernel ABI and
 * stable. The socket functions run on whichever one thread owns the descriptor (the engine's
 * exit thread). */
#include "ranktop/proc/procexit.h"

#include <errno.h>
#include <arpa/inet.h>
#include <linux/connector.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ranktop/base/bytes.h"
#include "ranktop/base/util.h"

/* struct proc_event: what (u32), cpu (u32), timestamp (u64), then the event data. */
#define EV_WHAT 0
#define EV_DATA 16
#define EV_NONE 0x00000000u
#define EV_EXIT 0x80000000u
/* Exit data: process_pid, process_tgid, exit_code, exit_signal, parent_pid, parent_tgid. */
#define EXIT_PID (EV_DATA + 0)
#define EXIT_TGID (EV_DATA + 4)
#define EXIT_CODE (EV_DATA + 8)
#define EXIT_LEN (EV_DATA + 24)
#define ACK_LEN (EV_DATA + 4)
/* enum proc_cn_mcast_op */
#define MCAST_LISTEN 1u
#define MCAST_IGNORE 2u

/* One process event of len bytes: an exit goes to out, an acknowledgement to *ack_err. */
static void parse_event(const unsigned char *ev, size_t len, struct procexit_event *out, size_t max,
                        size_t *n, int *ack_err)
{
    uint32_t what;

    if (len < EV_DATA)
        return;
    what = bytes_load_u32(ev + EV_WHAT);
    if (what == EV_NONE && len >= ACK_LEN) {
        *ack_err = (int)bytes_load_u32(ev + EV_DATA);
    } else if (what == EV_EXIT && len >= EXIT_LEN && *n < max) {
        uint32_t pid = bytes_load_u32(ev + EXIT_PID), tgid = bytes_load_u32(ev + EXIT_TGID);

        /* A thread's exit carries its own id in pid; only the leader's ends the process. */
        if (pid != tgid || pid == 0 || pid > INT32_MAX)
            return;
        out[*n].pid = (int)pid;
        out[(*n)++].status = (int)bytes_load_u32(ev + EXIT_CODE);
    }
}

int procexit_parse(const void *buf, size_t len, struct procexit_event *out, size_t max,
                   int *ack_err)
{
    const unsigned char *p = buf;
    size_t n = 0, at = 0;

    while (len - at >= NLMSG_HDRLEN) {
        struct nlmsghdr nh;
        struct cn_msg cn;
        size_t body = at + NLMSG_HDRLEN;

        memcpy(&nh, p + at, sizeof(nh));
        if (nh.nlmsg_len < NLMSG_HDRLEN || nh.nlmsg_len > len - at)
            return APP_E_PARSE;
        if (nh.nlmsg_type == NLMSG_DONE && nh.nlmsg_len >= NLMSG_HDRLEN + sizeof(cn)) {
            memcpy(&cn, p + body, sizeof(cn));
            if (cn.id.idx == CN_IDX_PROC && cn.id.val == CN_VAL_PROC &&
                cn.len <= nh.nlmsg_len - NLMSG_HDRLEN - sizeof(cn))
                parse_event(p + body + sizeof(cn), cn.len, out, max, &n, ack_err);
        }
        /* Messages are padded to 4 bytes; the padding of the last one may be missing. */
        if (NLMSG_ALIGN(nh.nlmsg_len) >= len - at)
            break;
        at += NLMSG_ALIGN(nh.nlmsg_len);
    }
    return (int)n;
}

/* Sends a subscription change (listen or ignore) to the process-event connector. */
static int send_op(int fd, uint32_t op)
{
    unsigned char m[NLMSG_HDRLEN + sizeof(struct cn_msg) + sizeof(op)];
    struct nlmsghdr nh = {.nlmsg_len = sizeof(m), .nlmsg_type = NLMSG_DONE};
    struct cn_msg cn = {.id = {CN_IDX_PROC, CN_VAL_PROC}, .len = sizeof(op)};
    struct sockaddr_nl to = {.nl_family = AF_NETLINK};

    nh.nlmsg_pid = (uint32_t)getpid();
    memset(m, 0, sizeof(m));
    memcpy(m, &nh, sizeof(nh));
    memcpy(m + NLMSG_HDRLEN, &cn, sizeof(cn));
    memcpy(m + NLMSG_HDRLEN + sizeof(cn), &op, sizeof(op));
    return sendto(fd, m, sizeof(m), 0, (struct sockaddr *)&to, sizeof(to)) < 0 ? -errno : 0;
}

/* Waits for the kernel's acknowledgement of the subscription. The kernel answers nothing at
 * all to a process outside the initial namespaces, hence the deadline. */
static int wait_ack(int fd, int timeout_ms)
{
    uint64_t end = clock_mono_ns() + (uint64_t)timeout_ms * 1000000u;
    struct procexit_event ev[16];
    unsigned char buf[8192];

    for (;;) {
        struct pollfd pf = {fd, POLLIN, 0};
        uint64_t now = clock_mono_ns();
        int ack = -1;
        ssize_t n;

        if (now >= end || poll(&pf, 1, (int)((end - now) / 1000000u) + 1) == 0)
            return APP_E_PERM;
        n = recv(fd, buf, sizeof(buf), 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == ENOBUFS))
            continue;
        if (n < 0)
            return APP_E_IO;
        procexit_parse(buf, (size_t)n, ev, 16, &ack);
        if (ack == 0)
            return 0;
        if (ack > 0)
            return ack == EPERM ? APP_E_PERM : APP_E_IO;
    }
}

/* A socket filter that lets through only what procexit_parse keeps: acknowledgements and the
 * exits of processes (a thread's exit has pid != tgid). The connector sends every fork, exec,
 * comm change and thread exit of the machine, each a wakeup of the exit thread otherwise. A
 * datagram too short to hold an event passes, for the parser to judge. Loads are big-endian,
 * hence ntohl on the host-order constants. Optional: where it cannot be attached, every
 * event still goes through the parser. */
static void filter_exits(int fd)
{
    const uint32_t ev = NLMSG_HDRLEN + sizeof(struct cn_msg);
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, ev + EXIT_LEN, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, 0xffffffffu),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ev + EV_WHAT),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ntohl(EV_NONE), 6, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ntohl(EV_EXIT), 0, 6),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ev + EXIT_TGID),
        BPF_STMT(BPF_ST, 0),
        BPF_STMT(BPF_LDX | BPF_W | BPF_MEM, 0),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ev + EXIT_PID),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_X, 0, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, 0xffffffffu),
        BPF_STMT(BPF_RET | BPF_K, 0),
    };
    struct sock_fprog prog = {sizeof(code) / sizeof(code[0]), code};

    setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog));
}

int procexit_open(int timeout_ms, struct app_err *err)
{
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = CN_IDX_PROC};
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_CONNECTOR);
    int rcvbuf = 1 << 20, rc;

    if (fd < 0)
        return app_err_set(err, errno == EPROTONOSUPPORT ? APP_E_NOTFOUND : APP_E_IO,
                           "process-event connector: %s", strerror(errno));
    /* A bigger buffer loses fewer events when many processes exit at once. */
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    filter_exits(fd);
    sa.nl_pid = 0; /* let the kernel pick a unique port id */
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        rc = errno == EPERM || errno == EACCES ? APP_E_PERM : APP_E_IO;
        app_err_set(err, rc, "process-event connector: bind: %s", strerror(errno));
        close(fd);
        return rc;
    }
    rc = send_op(fd, MCAST_LISTEN);
    rc = rc < 0 ? (rc == -EPERM ? APP_E_PERM : APP_E_IO) : wait_ack(fd, timeout_ms);
    if (rc < 0) {
        app_err_set(err, rc, "process-event connector refused%s",
                    rc == APP_E_PERM ? " (needs CAP_NET_ADMIN in the initial namespaces)" : "");
        close(fd);
        return rc;
    }
    return fd;
}

int procexit_read(int fd, struct procexit_event *out, size_t max)
{
    unsigned char buf[16384];
    int ack = -1;
    ssize_t n;

    do
        n = recv(fd, buf, sizeof(buf), 0);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EAGAIN || errno == ENOBUFS ? 0 : APP_E_IO;
    n = procexit_parse(buf, (size_t)n, out, max, &ack);
    return n < 0 ? 0 : (int)n;
}

void procexit_close(int fd)
{
    if (fd < 0)
        return;
    send_op(fd, MCAST_IGNORE);
    close(fd);
}
