/* SPDX-License-Identifier: MIT */
/*
 * What the files of the UD transport share (sv.h declares its calls for
 * the rest of the provider).  The UD transport (IBA 9.8.4): one SOCK_DGRAM
 * abstract Unix socket per UD QP, bound to its QPN's name, so any QP of
 * any process of the user reaches it with no set-up; between hosts, UDP
 * to a listener per context.  Its files, one topic each:
 *   send.c  the send path: one datagram per WQE (or per group member),
 *           on this host or over UDP, and the context's sockets for it
 *   recv.c  the receive path: the QP's socket and lanes into its receives
 *   mac.c   with a shared secret: the MAC of a datagram between hosts and
 *           each sender's replay window
 *   door.c  the context's UDP listener, which passes datagrams from other
 *           hosts on to their QPs' sockets, and its multicast groups
 *   roce_ud.c  UD over RoCEv2: a datagram to another host as rxe sends
 *           it (BTH, DETH), and one that came so, checked by the listener
 */
#ifndef SV_UD_PRIV_H
#define SV_UD_PRIV_H

#include <stdbool.h>
#include <stddef.h>

#include <netinet/in.h>

#include "objects.h"
#include "roce.h"
#include "wire.h"

/*
 * How long a send waits for room at its destination on this host (the
 * socket's queue, the kernel's max_dgram_qlen, often 10 datagrams, or
 * its lane), and the UDP listener holds a datagram for a QP whose socket
 * is full (sv_ud_door).  Only the receiving process's not running keeps
 * its queue full (it drains into its receives, or drops what has none),
 * so this is how long a process may be starved before we lose what it
 * would take: an HCA would have placed it.  A stopped receiver costs one
 * such wait; after that, datagrams to it are lost at once while its queue
 * stays full (qp->ud.stalled, sv_ud_door.stalled), so the sender's or the
 * listener's other traffic is not held up again.  200 ms lost
 * ud_fan_in_8_processes' datagrams beside two busy loops: a sender's
 * listener held one for the starved receiver 213 ms.
 */
#define SV_UD_HOLD_NS	    2000000000ull
#define SV_UD_SLOW_NS	    200000000ull /* a wait this long is said (debug) */
#define SV_UD_RETRY_TICK_NS 1000000ull
/* How long after a datagram came the listener counts as busy */
#define SV_UD_BUSY_NS 1000000ull

/* mac.c: seals the datagram d of n bytes (room for the trailer follows)
 * for another host: the new length.  Under qp->lock. */
size_t sv_ud_seal(struct sv_qp *qp, void *d, size_t n);
/* mac.c: checks a datagram from the network or with a MAC (*n bytes): true
 * if it may go on (the MAC taken off), else dropped and counted. */
bool sv_ud_auth_check(struct sv_qp *qp, struct sv_ud_hdr *h, size_t *n);
/* recv.c: a datagram the QP does not take is dropped and counted. */
void sv_ud_drop(struct sv_qp *qp);
/* door.c: a poll of a UD QP of ctx's (any thread): while datagrams come
 * to the listener (SV_UD_BUSY_NS after one came), it takes them on
 * too, not only the progress thread's wake-ups. */
void sv_ud_door_poll(struct sv_context *ctx);

/* roce_ud.c.  The UDP source port rxe sends a UD QP's packets from. */
uint16_t sv_ud_roce_sport(uint32_t qpn);
/* The datagram h + data to w's host as one RoCEv2 packet (UD
 * SEND_ONLY[_IMM]): 0 sent, or -errno (-EAGAIN: the socket is full).
 * Under qp->lock. */
int sv_ud_roce_send(struct sv_qp *qp, const struct sv_swqe *w,
		    const struct sv_ud_hdr *h, const uint8_t *data);
/* The listener's RoCEv2 datagram in buf (*n bytes, cap room) from src
 * to dst (network order; tos, ttl of its IP header): checked (memo: the
 * listener's, for the ICRC's IP ID, wire/roce.h), then made
 * the transport's (struct sv_ud_hdr, SV_UD_ROCE, *n its new length);
 * false: dropped and counted in st. */
bool sv_ud_roce_take(struct sv_roce_idmemo *memo, struct sv_qp_stats *st,
		     void *buf, size_t *n, size_t cap,
		     const struct sockaddr_in *src, uint32_t dst, uint8_t tos,
		     uint8_t ttl);
/* A datagram at the listener that is QP1's (the IB CM's MADs, which a
 * UD QP never takes): passed on fwd to the process the MAD is for, by
 * its comm ID or its service (wire/cm_pass.h; lost: counted in st's
 * roce_drop_qpn).  False if it is not QP1's CM MAD. */
bool sv_ud_roce_qp1(int fwd, struct sv_qp_stats *st, const void *buf, size_t n,
		    const struct sockaddr_in *src, uint32_t dst);
/* The 40 bytes a receive's GRH area holds for an SV_UD_ROCE datagram,
 * as rxe fills it over IPv4: 20 zero, then the IPv4 header. */
void sv_ud_roce_grh(uint8_t g[SV_GRH_LEN], const struct sv_ud_hdr *h);

#endif
