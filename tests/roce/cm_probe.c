// SPDX-License-Identifier: MIT
/*
 * Issue 26 item 3: the IB CM codec (rdmacm/ib_mad.c) against the
 * kernel's CM, before librdmacm speaks it.  On a plain UDP socket at
 * LOCAL:4791 it plays an active rdma_cm side's MADs to a listener (rping
 * -s in the rxe VM) as RoCEv2 UD packets on QP1 (dest QPN 1, Q_Key
 * 0x80010000, the ICRC right: IP ID 0): a REQ for service (RDMA_PS_TCP,
 * PORT) with the cma_hdr, then, to the REP the kernel answers, an RTU,
 * then a DREQ, and waits for the DREP.  Each MAD that comes back is
 * parsed as hostile (the RoCE codec, then cm_mad_decode) and must name
 * our communication ID.  The QPN it offers is made up: no data moves.
 * Prints each MAD's fields; exit 0 when REQ -> REP -> RTU -> DREQ -> DREP
 * completed, 1 otherwise (a REJ says its reason).  A probe, not shipped.
 * `hostile`: every kind of bad MAD once, then 500 REQs for a port nobody
 * listens on, to a listener at PORT (roce.netns row rdma_cm_hostile).
 * `mra`: to the REP, an MRA asking 4.096 us x 2^19 (2.1 s), then counts
 * the REPs that come again in the next 1.5 s (printed) before the RTU
 * (roce.netns row rdma_cm_mra).  `mra-req`: the passive side instead:
 * to the first REQ from REMOTE, the same MRA, the REQs again counted
 * likewise, then a REJ (consumer reject); PORT unused.
 *   cm_probe [hostile|mra|mra-req] LOCAL_IPv4 REMOTE_IPv4 PORT [SECS]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ib_mad.h"
#include "roce.h"

static struct sockaddr_in me, peer;
static struct sv_roce_ip ip;
static int tx_fd = -1; /* mra: sends from rxe's QP1 port, as our CM's
			* sockets expect (ib_link.h CM_IB_QP1_SPORT) */
static uint32_t psn = 1;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void mapped(uint8_t gid[16], const struct in_addr *a)
{
	memset(gid, 0, 16);
	gid[10] = gid[11] = 0xff;
	memcpy(gid + 12, a, 4);
}

/* m as a UD SEND_ONLY from our QP1 to the peer's QP1. */
static int send_mad(int fd, const struct cm_mad *m)
{
	uint8_t mad[CM_MAD_SIZE], pkt[CM_MAD_SIZE + SV_ROCE_HDR_MAX + 8];
	struct sv_roce_pkt p = {.opcode = SV_IB_UD | SV_IB_SEND_ONLY,
				.pkey = 0xffff,
				.dqpn = 1,
				.psn = psn++ & 0xffffff,
				.qkey = CM_MAD_QKEY,
				.src_qpn = 1,
				.payload = mad,
				.len = CM_MAD_SIZE};
	int n;

	if (cm_mad_encode(m, mad))
		return -EINVAL;
	n = sv_roce_build(pkt, sizeof(pkt), &p, &ip);
	if (n < 0)
		return n;
	if (sendto(tx_fd >= 0 ? tx_fd : fd, pkt, (size_t)n, 0,
		   (struct sockaddr *)&peer, sizeof(peer)) != n)
		return -errno;
	printf("sent attr 0x%04x local 0x%08x remote 0x%08x\n", m->attr,
	       m->local_id, m->remote_id);
	return 0;
}

/* n bytes of a MAD as a UD SEND to QP1 (or, raw, the bytes alone). */
static void send_bytes(int fd, const uint8_t *mad, uint32_t n, bool raw)
{
	uint8_t pkt[4096];
	struct sv_roce_pkt p = {.opcode = SV_IB_UD | SV_IB_SEND_ONLY,
				.pkey = 0xffff,
				.dqpn = 1,
				.psn = psn++ & 0xffffff,
				.qkey = CM_MAD_QKEY,
				.src_qpn = 1,
				.payload = mad,
				.len = n};
	int len = raw ? (int)n : sv_roce_build(pkt, sizeof(pkt), &p, &ip);

	if (len > 0 && sendto(fd, raw ? mad : pkt, (size_t)len, 0,
			      (struct sockaddr *)&peer, sizeof(peer)) != len)
		perror("cm_probe: sendto");
}

/* The next CM MAD from the peer within deadline: 0, or -ETIMEDOUT. */
static int recv_mad(int fd, uint64_t deadline, struct cm_mad *m)
{
	uint8_t b[4096];

	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		uint64_t t = now_ms();
		struct sv_roce_pkt p;
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		enum cm_mad_verdict v;
		ssize_t n;

		if (t >= deadline)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, (int)(deadline - t)) <= 0)
			continue;
		n = recvfrom(fd, b, sizeof(b), 0, (struct sockaddr *)&from,
			     &fl);
		if (n <= 0 || from.sin_addr.s_addr != peer.sin_addr.s_addr)
			continue;
		if (sv_roce_parse(b, (size_t)n, NULL, &p) != SV_ROCE_OK ||
		    p.opcode != (SV_IB_UD | SV_IB_SEND_ONLY) || p.dqpn != 1 ||
		    p.qkey != CM_MAD_QKEY) {
			printf("dropped a datagram that is no GSI MAD\n");
			continue;
		}
		v = cm_mad_decode(p.payload, p.len, m);
		if (v != CM_MAD_OK) {
			printf("dropped a MAD: %s\n", cm_mad_verdict_name(v));
			continue;
		}
		printf("got attr 0x%04x local 0x%08x remote 0x%08x from QPN "
		       "%u (udp sport %u)\n",
		       m->attr, m->local_id, m->remote_id, p.src_qpn,
		       ntohs(from.sin_port));
		return 0;
	}
}

/* The REQ an active rdma_cm side sends for port (cm_format_req's
 * values, as rxe's own REQ in tests/cm/ib_mad_rxe.h). */
static struct cm_mad req_for(uint16_t port, uint32_t id)
{
	struct cm_mad m = {.method = CM_MAD_METHOD_SEND,
			   .tid = id,
			   .attr = CM_MAD_REQ,
			   .local_id = id,
			   .service_id = cm_mad_service_id(CM_MAD_PS_TCP, port),
			   .ca_guid = 0x0200000000000001ULL,
			   .qpn = 0x000123,
			   .resp_res = 1,
			   .init_depth = 1,
			   .remote_cm_timeout = 0x14,
			   .psn = 0x00abcd,
			   .local_cm_timeout = 0x14,
			   .retry = 7,
			   .pkey = 0xffff,
			   .mtu = IBV_MTU_1024,
			   .rnr_retry = 7,
			   .max_cm_retries = 15,
			   .primary = {.local_lid = 0xffff,
				       .remote_lid = 0xffff,
				       .hop_limit = 64,
				       .ack_timeout = 0x13}};
	struct sockaddr_in dst = peer;

	mapped(m.primary.local_gid, &me.sin_addr);
	mapped(m.primary.remote_gid, &peer.sin_addr);
	dst.sin_port = htons(port);
	me.sin_port = htons(40000 + id % 20000);
	cm_mad_cma_put(m.pdata, (struct sockaddr *)&me,
		       (struct sockaddr *)&dst);
	me.sin_port = htons(SV_ROCE_PORT);
	return m;
}

static struct cm_mad req_for(uint16_t port, uint32_t id);

/* Every kind of bad MAD once, then a flood of REQs for a port nobody
 * listens on, to a listener at PORT: it must drop them all (and say why
 * with SOFTVERBS_DEBUG=1) and still take a real client after. */
static int hostile(int fd, uint16_t port)
{
	uint8_t mad[CM_MAD_SIZE + 8];
	struct cm_mad m = req_for(port, 0x1234567);

	cm_mad_encode(&m, mad);
	send_bytes(fd, mad, 40, true);		     /* not RoCE at all */
	send_bytes(fd, mad, CM_MAD_SIZE - 1, false); /* a short MAD */
	mad[1] = 0x01;				     /* the SM's class */
	send_bytes(fd, mad, CM_MAD_SIZE, false);
	mad[1] = CM_MAD_CLASS;
	mad[2] = 1; /* class version */
	send_bytes(fd, mad, CM_MAD_SIZE, false);
	mad[2] = CM_MAD_CLASS_VERSION;
	mad[3] = 0x83; /* a response */
	send_bytes(fd, mad, CM_MAD_SIZE, false);
	mad[3] = CM_MAD_METHOD_SEND;
	mad[17] = 0x30; /* no such attribute */
	send_bytes(fd, mad, CM_MAD_SIZE, false);
	mad[17] = CM_MAD_LAP;
	send_bytes(fd, mad, CM_MAD_SIZE, false);
	mad[17] = CM_MAD_REQ;
	mad[24 + 32] = mad[24 + 33] = 0; /* a REQ naming QP1 as its QP */
	mad[24 + 34] = 1;
	send_bytes(fd, mad, CM_MAD_SIZE, false);
	/* an RTU and a DREQ for comm IDs nobody has */
	m = (struct cm_mad){.method = CM_MAD_METHOD_SEND,
			    .attr = CM_MAD_RTU,
			    .local_id = 77,
			    .remote_id = 78};
	send_mad(fd, &m);
	m.attr = CM_MAD_DREQ;
	send_mad(fd, &m);
	/* a REQ whose rdma_cm header claims another source address */
	m = req_for(port, 0x2345679);
	m.pdata[19] ^= 1;
	send_mad(fd, &m);
	/* SIDR: a REQ whose rdma_cm header lies about its source, one for
	 * the TCP port space, a REP nobody asked for; none is answered */
	m = (struct cm_mad){.method = CM_MAD_METHOD_SEND,
			    .attr = CM_MAD_SIDR_REQ,
			    .local_id = 0x3456789,
			    .pkey = 0xffff,
			    .service_id = cm_mad_service_id(
				    CM_MAD_PS_UDP, (uint16_t)(port + 2))};
	{
		struct sockaddr_in dst = peer, src = me;

		dst.sin_port = htons((uint16_t)(port + 2));
		src.sin_addr.s_addr ^= htonl(1);
		cm_mad_cma_put(m.pdata, (struct sockaddr *)&src,
			       (struct sockaddr *)&dst);
	}
	send_mad(fd, &m);
	m.service_id = cm_mad_service_id(CM_MAD_PS_TCP, (uint16_t)(port + 2));
	send_mad(fd, &m);
	m = (struct cm_mad){.method = CM_MAD_METHOD_SEND,
			    .attr = CM_MAD_SIDR_REP,
			    .local_id = 0x456789a,
			    .qpn = 0x123,
			    .qkey = 0x01234567};
	send_mad(fd, &m);
	for (uint32_t i = 0; i < 500; i++) { /* a flood, no listener */
		m = req_for((uint16_t)(port + 1), 0x10000001 + 2 * i);
		cm_mad_encode(&m, mad);
		send_bytes(fd, mad, CM_MAD_SIZE, false);
	}
	printf("cm_probe: hostile MADs sent\n");
	return 0;
}

/* Waits for attr answering id; a REJ ends the probe. */
static int expect(int fd, uint64_t deadline, uint16_t attr, uint32_t id,
		  struct cm_mad *m)
{
	while (recv_mad(fd, deadline, m) == 0) {
		if (m->remote_id != id)
			continue;
		if (m->attr == CM_MAD_REJ) {
			printf("REJ reason %u\n", m->reason);
			return -ECONNREFUSED;
		}
		if (m->attr == attr)
			return 0;
	}
	printf("no attr 0x%04x in time\n", attr);
	return -ETIMEDOUT;
}

/* mra-req: the passive side of one REQ, which an MRA holds, then a REJ
 * ends (the count of REQs again in the hold printed): 0, or 1. */
static int held_req(int fd, uint64_t deadline, uint32_t id)
{
	struct cm_mad req, m;
	uint64_t until;
	unsigned int again = 0;

	do {
		if (recv_mad(fd, deadline, &req))
			return 1;
	} while (req.attr != CM_MAD_REQ);
	m = (struct cm_mad){.method = CM_MAD_METHOD_SEND,
			    .tid = req.tid,
			    .attr = CM_MAD_MRA,
			    .local_id = id,
			    .remote_id = req.local_id,
			    .msg_kind = 0,
			    .service_timeout = 19};
	if (send_mad(fd, &m))
		return 1;
	until = now_ms() + 1500;
	while (recv_mad(fd, until, &m) == 0)
		again += m.attr == CM_MAD_REQ && m.local_id == req.local_id;
	printf("REQs again during the MRA's hold: %u\n", again);
	m = (struct cm_mad){.method = CM_MAD_METHOD_SEND,
			    .tid = req.tid,
			    .attr = CM_MAD_REJ,
			    .local_id = id,
			    .remote_id = req.local_id,
			    .msg_kind = 0,
			    .reason = 28}; /* consumer reject */
	return send_mad(fd, &m) ? 1 : 0;
}

int main(int argc, char **argv)
{
	int on = IP_PMTUDISC_DO, fd;
	uint32_t id;
	uint64_t deadline;
	struct cm_mad m, rep;

	bool bad = argc > 1 && !strcmp(argv[1], "hostile");
	bool mra = argc > 1 && !strcmp(argv[1], "mra");
	bool mra_req = argc > 1 && !strcmp(argv[1], "mra-req");

	if (bad || mra || mra_req) {
		argv++;
		argc--;
	}
	if (argc < 4) {
		fprintf(stderr, "usage: cm_probe [hostile|mra|mra-req] LOCAL "
				"REMOTE PORT "
				"[SECS]\n");
		return 2;
	}
	me = (struct sockaddr_in){.sin_family = AF_INET,
				  .sin_port = htons(SV_ROCE_PORT)};
	peer = me;
	if (inet_pton(AF_INET, argv[1], &me.sin_addr) != 1 ||
	    inet_pton(AF_INET, argv[2], &peer.sin_addr) != 1)
		return 2;
	deadline = now_ms() + 1000ULL * (argc > 4 ? atoi(argv[4]) : 60);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 ||
	    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &on, sizeof(on)) ||
	    bind(fd, (struct sockaddr *)&me, sizeof(me))) {
		perror("cm_probe: socket at LOCAL:4791");
		return 1;
	}
	mapped(ip.src, &me.sin_addr);
	mapped(ip.dst, &peer.sin_addr);
	ip.sport = SV_ROCE_PORT;
	if (bad)
		return hostile(fd, (uint16_t)atoi(argv[3]));
	if (mra || mra_req) {
		struct sockaddr_in qp1 = me;

		qp1.sin_port = htons(0xd872);
		tx_fd = socket(AF_INET, SOCK_DGRAM, 0);
		if (tx_fd < 0 ||
		    setsockopt(tx_fd, IPPROTO_IP, IP_MTU_DISCOVER, &on,
			       sizeof(on)) ||
		    bind(tx_fd, (struct sockaddr *)&qp1, sizeof(qp1))) {
			perror("cm_probe: socket at LOCAL:0xd872");
			return 1;
		}
		ip.sport = 0xd872;
	}
	srandom((unsigned int)getpid());
	id = (uint32_t)random() | 1;
	if (mra_req)
		return held_req(fd, deadline, id);
	m = req_for((uint16_t)atoi(argv[3]), id);
	if (send_mad(fd, &m) || expect(fd, deadline, CM_MAD_REP, id, &rep))
		return 1;
	printf("REP: QPN 0x%06x PSN 0x%06x resp_res %u init_depth %u "
	       "rnr_retry %u srq %u ca_guid 0x%016llx\n",
	       rep.qpn, rep.psn, rep.resp_res, rep.init_depth, rep.rnr_retry,
	       rep.srq, (unsigned long long)rep.ca_guid);
	if (mra) {
		uint64_t until = now_ms() + 1500;
		unsigned int again = 0;

		m = (struct cm_mad){.method = CM_MAD_METHOD_SEND,
				    .tid = id,
				    .attr = CM_MAD_MRA,
				    .local_id = id,
				    .remote_id = rep.local_id,
				    .msg_kind = 1,
				    .service_timeout = 19};
		if (send_mad(fd, &m))
			return 1;
		while (recv_mad(fd, until, &m) == 0)
			again += m.attr == CM_MAD_REP && m.remote_id == id;
		printf("REPs again during the MRA's hold: %u\n", again);
	}
	m = (struct cm_mad){.method = CM_MAD_METHOD_SEND,
			    .tid = id,
			    .attr = CM_MAD_RTU,
			    .local_id = id,
			    .remote_id = rep.local_id};
	if (send_mad(fd, &m))
		return 1;
	m.attr = CM_MAD_DREQ;
	m.qpn = rep.qpn;
	if (send_mad(fd, &m) || expect(fd, deadline, CM_MAD_DREP, id, &m))
		return 1;
	printf("cm_probe: REQ REP RTU DREQ DREP done\n");
	return 0;
}
