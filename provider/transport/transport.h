/* SPDX-License-Identifier: MIT */
/*
 * The transports (transport/, layer 3), as the layers above call them
 * beyond a link's ops (link.h, included here): this host's addresses,
 * UD datagrams and their lanes, the multicast registry's lookups.  The
 * transports' own parts have their own headers (shm.h, tcp.h, lane.h,
 * rmem.h, mcast.h).
 */
#ifndef SV_TRANSPORT_H
#define SV_TRANSPORT_H

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "link.h"
#include "objects.h"

/* This host's addresses (transport/addr.c). */
/* The port's LID: with SOFTVERBS_SUBNET the host part of this host's
 * address there, else one every process of the host agrees on. */
uint16_t sv_local_lid(void);
/* SOFTVERBS_SUBNET: the IPv4 address another host's LID names (true), or
 * false: no subnet, our own LID, or a LID no host of the subnet has. */
bool sv_lid_ipv4(uint16_t lid, struct in_addr *a);
/* SOFTVERBS_SUBNET: the LID of a host's address, 0 if it has none. */
uint16_t sv_ipv4_lid(struct in_addr a);
/* SOFTVERBS_SUBNET: this host's address there (its LID's); false: none */
bool sv_subnet_self(struct in_addr *a);
/* SOFTVERBS_SUBNET: the highest LID a host there can have; 0: unset */
uint16_t sv_subnet_lid_last(void);
uint64_t sv_node_guid(void);
/* Fills the GID table; returns its length (at most SV_GID_TBL_LEN). */
int sv_gid_table(union ibv_gid *gids);
bool sv_gid_is_local(const union ibv_gid *gid);
/* An IPv4 address of this host (its IPv4-mapped GID is local). */
bool sv_ipv4_is_local(struct in_addr a);
/* The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d); false if it
 * is not one. */
bool sv_gid_ipv4(const union ibv_gid *gid, struct in_addr *a);
/* A host's IP address for the TCP and UDP transports: IPv4 or IPv6. */
union sv_sockaddr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
};
/* The address (and port) a GID names another host by: an IPv4-mapped
 * GID's IPv4 address, or a global (or ULA, or ::1) IPv6 address itself;
 * false for any other GID (link-local, multicast, zero). */
bool sv_gid_sockaddr(const union ibv_gid *gid, uint16_t port,
		     union sv_sockaddr *a);
static inline socklen_t sv_sockaddr_len(const union sv_sockaddr *a)
{
	return a->sa.sa_family == AF_INET6 ? sizeof(a->in6) : sizeof(a->in);
}

/* UD (ud.c).  Caller holds qp->lock. */
/* Sends the posted WQEs as datagrams and completes them. */
void sv_ud_send_run(struct sv_qp *qp);
/* A receive from the QP's SRQ, moved into its RQ: engine/srq.c's
 * sv_srq_take, passed down (this layer calls nothing above it). */
typedef bool (*sv_srq_take_fn)(struct sv_srq *srq, struct sv_qp *qp);
/* Takes every datagram waiting on the QP's socket and lanes; a QP on an
 * SRQ takes its receives with srq_take. */
void sv_ud_recv_run(struct sv_qp *qp, sv_srq_take_fn srq_take);
/* UD lanes (lane.c; off with SOFTVERBS_UD_LANES=0).  Sender, under
 * qp->lock: the datagram d of n bytes to QP qpn through its lane: 0 sent,
 * -EAGAIN the lane is full, 1 send it on the socket, with the lane's memfd
 * (SCM_RIGHTS) when *offer_fd >= 0.  sv_lane_gone: the socket says there
 * is no such QP.  Receiver, under qp->lock: sv_lane_offer maps the lane
 * pid offered with a checked datagram (fd is consumed); peek/consume take
 * its records in order (peek: 1 and our copy of the header, or 0). */
int sv_lane_send(struct sv_qp *qp, const void *d, size_t n, uint32_t qpn,
		 int *offer_fd);
void sv_lane_gone(struct sv_context *ctx, uint32_t qpn);
/* The datagram that offered the lane to qpn did not go (a full queue):
 * the offer goes with the next one. */
void sv_lane_unoffered(struct sv_context *ctx, uint32_t qpn);
void sv_lanes_tx_close(struct sv_context *ctx);
void sv_lane_offer(struct sv_qp *qp, int fd, pid_t pid);
int sv_lane_peek(struct sv_lane_rx *l, struct sv_ud_hdr *h,
		 const uint8_t **payload);
void sv_lane_consume(struct sv_lane_rx *l);
void sv_lanes_rx_sleep(struct sv_qp *qp, bool sleep);
void sv_lanes_rx_reap(struct sv_qp *qp);
void sv_lanes_rx_close(struct sv_qp *qp);
/* The datagram socket of a new UD QP, bound to its QPN. */
int sv_ud_bind(struct sv_link *l, uint32_t *qpn);
/* Where an AH's UD sends go: *ip another host's address (network order)
 * when they go over UDP, else 0; an IPv6 host's: *ip6 true, *ip
 * INADDR_NONE (the address is the dgid); -errno if the socket for it
 * cannot be made. */
int sv_ud_route(struct sv_context *ctx, const struct ibv_ah_attr *a,
		uint32_t *ip, bool *ip6);
/* The context's UDP listener, at its first UD QP (a failure is said
 * once: datagrams from other hosts then do not reach it); closed with the
 * context.  Its callback in the loop (ud.c) passes datagrams on. */
void sv_ud_door_open(struct sv_context *ctx);
void sv_ud_door_close(struct sv_context *ctx);
/* When a datagram held for a full QP socket is tried again (UINT64_MAX:
 * none held); tries it when due.  Progress thread only. */
uint64_t sv_ud_door_next_ns(struct sv_context *ctx, uint64_t now);
/* The listener joins (join) or leaves IPv4 group grp (network order)
 * between hosts: 0, or -errno when no interface took the join.  No
 * listener: 0 (the group stays this host's).  ctx->mcast_lock held. */
int sv_ud_mcast_join(struct sv_context *ctx, uint32_t grp, bool join);

/* Multicast (transport/mcast.c). */
/* The members of group gid on this host: up to max QPNs, sorted, each
 * once; entries of dead members included (a datagram to them is lost). */
int sv_mcast_members(const union ibv_gid *gid, uint32_t *qpn, int max);
/* True if the QP is attached to group gid.  Caller holds qp->lock or
 * ctx->mcast_lock. */
bool sv_mcast_attached(const struct sv_qp *qp, const uint8_t gid[16]);
/* True if gid is an IPv4-mapped multicast address (::ffff:224.0.0.0/4,
 * RoCEv2's MGID for an IPv4 group): *grp its address (network order). */
bool sv_mcast_ipv4(const uint8_t gid[16], uint32_t *grp);
/* This context's QPs attached to gid, sorted (up to max): 0 when none,
 * -EAGAIN when the registry lock is busy (try again).  Never blocks. */
int sv_mcast_ctx_members(struct sv_context *ctx, const uint8_t gid[16],
			 uint32_t *qpn, int max);

#endif
