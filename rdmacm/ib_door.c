// SPDX-License-Identifier: MIT
/*
 * UD datagrams that reach a listener's IB CM socket (ib_link.c) instead
 * of the UD door.  A listener's socket is IPv4, bound to 4791 on its
 * address (or 0.0.0.0): the kernel's lookup ranks it above the UD door's
 * dual-stack [::]:4791 (provider/transport/ud/door.c), so while a process
 * listens with SOFTVERBS_TRANSPORT=roce it takes every unconnected
 * datagram to 4791 on that address, the UD data to any process's QPs
 * too (udaddy's server listens while its messages come).  Such a
 * datagram is done here as the door does it (roce_ud.c sv_ud_roce_take,
 * door.c pass_to): checked as hostile (the RoCEv2 codec's checks; the
 * ICRC is not: the door's per-peer rule, strict once a peer's ICRC was
 * right, is not kept here, and rxe's random IP IDs make a wrong ICRC
 * from a good packet; a UD opcode,
 * the default P_Key, not QP0, QP1 or multicast, at most SV_UD_MTU bytes),
 * rewritten into the UD transport's header (SV_UD_NET | SV_UD_ROCE, the
 * GIDs of the IP addresses, TOS and TTL as received) and passed to the
 * QP's abstract socket by its destination QPN, whichever process has it.
 * The QP checks it again as any datagram (recv.c).  What is dropped is
 * logged (SOFTVERBS_DEBUG) and counted as not a MAD (cm_mad_drop_pkt).
 * Also here: the read of one datagram at a listener's socket with where
 * it was sent, its TOS and TTL (cm_ib_listen_recv).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "../provider/wire/wire.h" /* struct sv_ud_hdr (rdmacm has a wire.h) */
#include "cm.h"
#include "ib_link.h"
#include "ib_stat.h"
#include "link.h" /* provider/transport/link.h: sv_link_qp_addr */
#include "roce.h" /* provider/wire/roce.h: the RoCEv2 codec */

static int fwd_fd = -1; /* the unbound datagram socket it leaves by */

static void mapped4(uint8_t g[16], uint32_t a)
{
	memset(g, 0, 16);
	g[10] = g[11] = 0xff;
	memcpy(g + 12, &a, 4);
}

bool cm_ib_door_pass(uint8_t *b, size_t n, size_t cap,
		     const struct sockaddr_in *from, uint32_t dst, uint8_t tos,
		     uint8_t ttl)
{
	struct sv_ud_hdr h = {.magic = SV_UD_MAGIC,
			      .version = SV_UD_VERSION,
			      .flags = SV_UD_NET | SV_UD_ROCE | SV_UD_GRH};
	struct sv_roce_pkt p;
	struct sockaddr_un a;
	socklen_t alen;

	/* QP1's MADs are ib_link.c's; anything else not RoCE UD is
	 * dropped there with its reason */
	if (sv_roce_parse(b, n, NULL, &p) != SV_ROCE_OK || p.dqpn == 1 ||
	    sv_roce_check_qpt(&p, IBV_QPT_UD) != SV_ROCE_OK)
		return false;
	if (!dst || !sv_roce_ud_hdr(&p, tos, ttl, cap, &h)) {
		cm_ib_count(CM_IB_DROP_PKT);
		cm_log("UD datagram at the IB CM's socket for QPN 0x%06x: "
		       "dropped\n",
		       p.dqpn);
		return true;
	}
	mapped4(h.sgid, from->sin_addr.s_addr);
	mapped4(h.dgid, dst);
	memmove(b + sizeof(h), p.payload, p.len);
	memcpy(b, &h, sizeof(h));
	if (fwd_fd < 0)
		fwd_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	alen = sv_link_qp_addr(&a, p.dqpn);
	if (fwd_fd < 0 ||
	    sendto(fwd_fd, b, sizeof(h) + p.len, MSG_DONTWAIT | MSG_NOSIGNAL,
		   (struct sockaddr *)&a, alen) < 0)
		cm_log("UD datagram for QPN 0x%06x: lost: %s\n", p.dqpn,
		       strerror(errno));
	return true;
}

/* One datagram at a listener's socket: n bytes, and where it was sent,
 * its TOS and TTL (IP_PKTINFO, IP_RECVTOS, IP_RECVTTL). */
ssize_t cm_ib_listen_recv(int fd, uint8_t *b, size_t cap,
			  struct sockaddr_in *from, uint32_t *dst, uint8_t *tos,
			  uint8_t *ttl)
{
	union {
		char buf[CMSG_SPACE(sizeof(struct in_pktinfo)) +
			 2 * CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = b, .iov_len = cap};
	struct msghdr m = {.msg_name = from,
			   .msg_namelen = sizeof(*from),
			   .msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	ssize_t n = recvmsg(fd, &m, MSG_DONTWAIT);
	int v;

	*dst = 0;
	*tos = 0;
	*ttl = 0;
	if (n < 0 || m.msg_namelen != sizeof(*from) ||
	    from->sin_family != AF_INET || (m.msg_flags & MSG_TRUNC))
		return n < 0 ? n : -2; /* -2: not one to read */
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != IPPROTO_IP)
			continue;
		if (c->cmsg_type == IP_PKTINFO &&
		    c->cmsg_len >= CMSG_LEN(sizeof(struct in_pktinfo))) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			*dst = pi.ipi_addr.s_addr;
		} else if ((c->cmsg_type == IP_TOS || c->cmsg_type == IP_TTL) &&
			   c->cmsg_len >= CMSG_LEN(1)) {
			v = 0;
			memcpy(&v, CMSG_DATA(c),
			       c->cmsg_type == IP_TOS ? 1 : sizeof(int));
			*(c->cmsg_type == IP_TOS ? tos : ttl) = (uint8_t)v;
		}
	}
	return n;
}
