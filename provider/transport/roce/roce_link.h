/* SPDX-License-Identifier: MIT */
/*
 * The RoCEv2 transport (this directory: roce_priv.h, conn.c, out.c,
 * in.c): a link (link.h) whose packets are IBA packets over UDP port 4791
 * (Annex A17), so that the peer may be a RoCE NIC, the kernel's rxe or
 * softverbs on another host.  The engine keeps working on rings, private
 * memory here as over TCP, but nothing is mirrored: each train our
 * requester or responder publishes leaves as path-MTU packets (BTH, the
 * opcode's extension headers, pad, ICRC) and is consumed at once; each
 * packet that arrives, checked as hostile (wire/roce.c), becomes a
 * one-PSN record in our receive or response ring, or, an ACK/NAK, our
 * copy of the peer's ACK word.  Packets may be lost, so the link is
 * lossy (struct sv_link_ops.lossy): the IBA's reliability is the
 * engine's (PSNs, NAK-seq, duplicates, the ACK timer with retry_cnt, RNR
 * NAKs and rnr_retry, reads and atomics answered again).  There is no
 * hello: a RoCE peer expects the QP usable at RTR with the QPN, PSN and
 * GID exchanged out of band, so the link is UP at RTR.
 *
 * Sockets (roce_priv.h): per link, one to receive, bound to our
 * address's port 4791 with SO_REUSEPORT and connected to the peer's
 * address and the UDP source port of the QP pair, and one to send, bound
 * to that source port.  The source port is the kernel's for the pair
 * (rdma_get_udp_sport: the flow label of the two QPNs, 0xc000 and up),
 * (sv_roce_sport, wire/roce.h), which rxe sends from and we send from too: a
 * connected UDP socket wins the kernel's lookup over the reuseport group, so
 * every softverbs process of a host shares port 4791 and each link gets its own
 * peer's packets.  Two QP pairs between the same two addresses whose QPNs
 * give the same source port (1 in 16,384) share one socket when they are
 * in one process (share.c); in two, the first relays the second's.
 */
#ifndef SV_ROCE_LINK_H
#define SV_ROCE_LINK_H

#include <stdint.h>

#include "link.h"
#include "objects.h"
#include "roce.h"

extern const struct sv_link_ops sv_roce_link_ops;

/* Counts a datagram the codec refused with verdict v in st's
 * roce_drop_* counters (in.c; the UD path, ud/roce_ud.c, counts there
 * too). */
void sv_roce_count_drop(struct sv_qp_stats *st, enum sv_roce_verdict v);

#endif
