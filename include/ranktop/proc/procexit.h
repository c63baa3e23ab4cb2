/* Exit statuses of processes that are not our children, from the kernel's process-event
 * connector (netlink NETLINK_CONNECTOR, group CN_IDX_PROC). Subscribing needs CAP_NET_ADMIN
 * in the initial user and PID namespaces; elsewhere procexit_open is refused and the
 * statuses stay unknown. */
#ifndef RANKTOP_PROCEXIT_H
#define RANKTOP_PROCEXIT_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_PROC)
#error "ranktop/proc/procexit.h belongs to collectors/proc/, a layer this one may not use"
#endif

#include <stddef.h>

#include "ranktop/base/status.h"

/* The exit of a whole process (its thread-group leader). */
struct procexit_event {
    int pid;    /* the process (thread-group id), in the initial PID namespace */
    int status; /* wait status: WIFEXITED / WEXITSTATUS / WIFSIGNALED / WTERMSIG apply */
};

/* Pure: parses one datagram of len bytes read from the connector socket (one or more netlink
 * messages). Appends to out (at most max) the exits of thread-group leaders, and sets *ack_err
 * to the kernel's answer to a subscription (0 accepted, else an errno) when the datagram
 * holds one, leaving it alone otherwise. Other events, other connectors' messages and exits
 * of non-leader threads are skipped. Returns how many exits it stored, or APP_E_PARSE for a
 * message whose lengths do not fit the datagram. */
int procexit_parse(const void *buf, size_t len, struct procexit_event *out, size_t max,
                   int *ack_err);

/* Opens a non-blocking connector socket and subscribes to process events, waiting at most
 * timeout_ms for the kernel to acknowledge. Returns the descriptor, or APP_E_PERM (no
 * CAP_NET_ADMIN, or no acknowledgement: not in the initial namespaces), APP_E_NOTFOUND (no
 * connector in this kernel) or APP_E_IO, with err filled. Any thread. */
int procexit_open(int timeout_ms, struct app_err *err);

/* Reads what is pending on fd into out (at most max exits). Returns the count (0: nothing
 * pending, or only other events), or APP_E_IO when the socket failed. Lost events (the
 * receive buffer overflowed on a busy node) are skipped silently: their statuses stay
 * unknown. */
int procexit_read(int fd, struct procexit_event *out, size_t max);

/* Unsubscribes and closes fd (ignores -1). */
void procexit_close(int fd);

#endif
