/* SPDX-License-Identifier: MIT */
/*
 * What ib_link.c (the IB CM's MADs on QP1 over RoCEv2), ib_resend.c (their
 * retransmission) and ib_sidr.c (SIDR for UD ids) share, inside rdmacm/:
 * every function with cm_core.lock held.
 */
#ifndef SV_CM_IB_LINK_H
#define SV_CM_IB_LINK_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cm.h"
#include "ib_mad.h"

static inline const struct sockaddr_in *cm_ib_src(const struct cm_id *c)
{
	return (const struct sockaddr_in *)&c->id.route.addr.src_addr;
}

static inline const struct sockaddr_in *cm_ib_dst(const struct cm_id *c)
{
	return (const struct sockaddr_in *)&c->id.route.addr.dst_addr;
}

#define CM_IB_QP1_SPORT 0xd872 /* rxe's QP1 source port */

/* ib_link.c */
/* A UDP socket bound to (at's address, port), SO_REUSEPORT if reuse,
 * IP_PMTUDISC_DO (IP ID 0): its fd or -errno. */
int cm_ib_udp_socket(const struct sockaddr_in *at, uint16_t port, bool reuse);
/* The 256 bytes of a MAD from src to dst's QP1 as a RoCEv2 UD SEND on
 * fd (SOFTVERBS_CM_MAD_DROP may lose it on purpose); c only for logs:
 * 0 or -errno. */
int cm_ib_send_raw(int fd, const struct sockaddr_in *src,
		   const struct sockaddr_in *dst,
		   const uint8_t mad[CM_MAD_SIZE], uint16_t attr, bool again,
		   const void *c);
void cm_ib_port_put(int i); /* a receiving socket's reference dropped */

void cm_ib_port_hold(int i); /* one more reference to socket i */

/* ib_resend.c */
/* Timewait: our DREP mad, just sent, answers a DREQ that comes again
 * after c closed, CM_DREP_WAIT_MS long. */
void cm_ib_timewait_arm(struct cm_id *c, const uint8_t mad[CM_MAD_SIZE]);
/* MAD d on receiving socket i is a DREQ a timewait answers: true if so
 * (answered). */
bool cm_ib_timewait_answered(int i, const struct cm_mad *d);
void cm_ib_again_drop(struct cm_id *c); /* its kept MAD forgotten */
/* cm_ib_resend_all's walks of the ids with a MAD kept, and the ids they
 * looked at, ever (SOFTVERBS_DEBUG's exit line) */
void cm_ib_resend_counts(uint64_t *walks, uint64_t *visits);
/* MAD mad, just sent, kept to go again if it waits for an answer. */
void cm_ib_again_arm(struct cm_id *c, uint16_t attr,
		     const uint8_t mad[CM_MAD_SIZE]);
/* MRA d for c: the peer has c's kept REQ (msg_kind 0) or REP (1) and
 * asks us to wait its service_timeout (IBA 12.6.6): the resends hold;
 * one for a MAD c does not keep is dropped (counted, logged). */
void cm_ib_mra(struct cm_id *c, const struct cm_mad *d);
/* c, being destroyed, leaves its DREQ to be resent: true if taken
 * (with c's sockets). */
bool cm_ib_orphan_adopt(struct cm_id *c);
/* MAD d on receiving socket i answers an orphan's DREQ: true if so. */
bool cm_ib_orphan_answered(int i, const struct cm_mad *d);

/* ib_door.c: UD data at a listener's socket */
/* A listener's datagram buffer: a UD datagram of SV_UD_MTU bytes, and
 * its 64-byte transport header (ib_door.c rewrites it in place). */
#define SV_UD_DOOR_BUF (4096 + 64 + 128)
/* Datagram b (n bytes of cap) from `from` to dst (network order), TOS
 * tos, TTL ttl: true if it was RoCE UD data for a QP (passed on to the
 * QP's socket, or dropped as bad), false if it is the IB CM's to read. */
bool cm_ib_door_pass(uint8_t *b, size_t n, size_t cap,
		     const struct sockaddr_in *from, uint32_t dst, uint8_t tos,
		     uint8_t ttl);

/* One datagram at a listener's socket fd into b (cap bytes): its length,
 * where it came from, where it was sent (network order), its TOS and
 * TTL (IP_PKTINFO, IP_RECVTOS, IP_RECVTTL); -1 with errno, or -2: not
 * one to read (truncated, not IPv4). */
ssize_t cm_ib_listen_recv(int fd, uint8_t *b, size_t cap,
			  struct sockaddr_in *from, uint32_t *dst, uint8_t *tos,
			  uint8_t *ttl);

/* A MAD's datagram as it came, for passing it on (ib_pass.c): b, n
 * bytes, from the peer's address to ours (network order); passed: it
 * came from another process of the host, and goes nowhere else. */
struct cm_ib_rx {
	const uint8_t *b;
	size_t n;
	uint32_t from, to;
	bool passed;
};

/* ib_pass.c: MADs the kernel gave the wrong process of the host */
/* The top 16 bits of our comm IDs, ours on the host (its name bound at
 * the first call; without a name, a random one). */
uint16_t cm_ib_pass_prefix(void);
/* rx's MAD, which no id of ours takes, to the process it is for (by
 * how key names it): true if passed (counted); false if it is ours, or
 * came passed, or its owner is not found (the caller drops it). */
bool cm_ib_pass(const struct cm_ib_rx *rx);
/* Listener l's service name bound (its REQs that reach another process
 * come to it): 0, or -errno (said; l works without it). */
int cm_ib_pass_listen(struct cm_id *l);
void cm_ib_pass_unlisten(struct cm_id *l);
/* ib_link.c: MAD d that another process passed us, checked as from the
 * wire (rx->passed): to our id by comm ID (to_service false), or to the
 * listener of its service. */
void cm_ib_passed(const struct cm_mad *d, const struct cm_ib_rx *rx,
		  bool to_service);
/* ib_link.c: one datagram from a peer's QP1, n bytes at b: its MAD
 * checked (counted and logged if not), or false. */
bool cm_ib_take(const uint8_t *b, ssize_t n, struct cm_mad *d);

/* ib_sidr.c: SIDR for UD ids */
/* conn.c's SIDR REQ or REP record m as its MAD d (d's header filled):
 * 0 or -EINVAL. */
int cm_ib_sidr_mad(struct cm_id *c, const struct cm_msg *m, struct cm_mad *d);
/* The peer's SIDR REP d as conn.c's record r (common fields filled):
 * false if it answers another request or service. */
bool cm_ib_sidr_record(struct cm_id *c, const struct cm_mad *d,
		       struct cm_msg *r);
void cm_ib_sidr_keep(struct cm_id *c, const uint8_t mad[CM_MAD_SIZE]);
/* A SIDR REQ from `from` whose REP was sent: true (its REP again). */
bool cm_ib_sidr_again(const struct cm_mad *d, const struct sockaddr_in *from);
/* A SIDR REQ no listener of ours takes: "unsupported" when nobody on
 * this host holds its port, else dropped. */
void cm_ib_sidr_unserved(const struct cm_mad *d,
			 const struct sockaddr_in *from);

#endif
