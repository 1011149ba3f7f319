// SPDX-License-Identifier: MIT
/*
 * UD over RoCEv2 (issue 26): a UD QP of softverbs_roce0, or of any
 * device with SOFTVERBS_TRANSPORT=roce, sends to another host's address
 * what rxe and a RoCE NIC send (IBA Annex A17): one UDP datagram to port
 * 4791 holding BTH (UD SEND_ONLY, or SEND_ONLY_WITH_IMMEDIATE), DETH
 * (Q_Key, source QPN), ImmDt, the payload, pad and ICRC, from the UDP
 * source port rxe gives the QP (0xc000 | hash_32(QPN, 14)).
 *
 * Receiving: port 4791 is shared by every softverbs process of the host
 * (SO_REUSEPORT); the kernel hands an unconnected datagram to one
 * member of the group by its hash, which knows nothing of QPNs.  The UD
 * transport's listener (door.c), one per context with a UD QP, already
 * passes each datagram it gets to its QP's socket by QPN, whichever
 * process owns the QP: a RoCEv2 datagram takes the same road.  The
 * listener that gets one checks it here as hostile (the codec's parser:
 * lengths, header version, opcode of the UD class, pad, ICRC where it
 * can), turns it into the transport's header (struct sv_ud_hdr, marked
 * SV_UD_NET | SV_UD_ROCE, the IP header's addresses in sgid/dgid) and
 * passes it on; the QP checks the rest (its QPN, Q_Key, state, a
 * receive posted) as for any datagram, and takes SV_UD_ROCE ones only if
 * it is a RoCE QP.  Why not a reuseport BPF program steering by the
 * BTH's DQPN: the group's members are sockets of different processes
 * with no shared index from QPN to member, one program serves the whole
 * group (the last attached wins, any process may replace it), and a
 * listener that leaves the group renumbers it; passing on costs one
 * local datagram and keeps one checked road.  What the listener drops
 * it counts in its context's counters (ctx->udoor_stats, shown in
 * softverbs-stat's totals), by the codec's reason.
 *
 * ICRC on receive: a UDP socket does not see the IPv4 ID, which the
 * ICRC covers.  As the RC link does (roce/in.c), the ID is solved from
 * the ICRC (wire/roce.h, id_span SV_ROCE_ID_ANY): softverbs sends ID 0,
 * rxe IDs of its kernel's count.
 *
 * QP1: with SOFTVERBS_TRANSPORT=roce a process's librdmacm is its own IB
 * CM, and a peer's first REQ (an unconnected datagram to 4791) may come
 * to a listener of this group.  It goes on to the listening process by
 * the REQ's service, and any other CM MAD by the comm ID it names
 * (wire/cm_pass.h, rdmacm/ib_pass.c), which checks it all again.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/filter.h>
#include <netinet/in.h>

#include "cm_pass.h"
#include "env.h"
#include "inject.h"
#include "roce.h"
#include "roce_link.h"
#include "transport.h"
#include "ud_priv.h"
#include "wire.h"

#define GOLDEN_RATIO_32 0x61C88647u

uint16_t sv_ud_roce_sport(uint32_t qpn)
{
	/* rxe_qp_init_req: RXE_ROCE_V2_SPORT + (hash_32(qpn, 14) & 0x3fff) */
	return (uint16_t)(0xc000u | ((qpn * GOLDEN_RATIO_32) >> 18));
}

/* The QP's sending socket: bound to its source port (shared: another
 * process's QP may hash to it too), IP ID 0 and DF (IP_PMTUDISC_DO, so
 * the ICRC is right), and deaf: a filter drops whatever comes to it. */
static int roce_socket(struct sv_qp *qp)
{
	struct sockaddr_in a = {
		.sin_family = AF_INET,
		.sin_port = htons(sv_ud_roce_sport(qp->qpx.qp_base.qp_num))};
	struct sock_filter drop = BPF_STMT(BPF_RET | BPF_K, 0);
	struct sock_fprog prog = {.len = 1, .filter = &drop};
	int one = 1, pmtu = IP_PMTUDISC_DO, fd, err;

	if (qp->ud.roce_fd >= 0)
		return qp->ud.roce_fd;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) ||
	    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu))) {
		err = -errno;
		close(fd);
		return err;
	}
	err = bind(fd, (struct sockaddr *)&a, sizeof(a)) ? -errno : 0;
	if (err == -EADDRINUSE) { /* another user's: any port, as a NIC may */
		a.sin_port = 0;
		err = bind(fd, (struct sockaddr *)&a, sizeof(a)) ? -errno : 0;
	}
	if (err) {
		close(fd);
		return err;
	}
	qp->ud.roce_fd = fd;
	return fd;
}

/* An IPv4-mapped GID's address as the ICRC's pseudo header has it. */
static bool mapped4(const union ibv_gid *g, uint8_t out[16])
{
	struct in_addr a;

	if (!sv_gid_ipv4(g, &a))
		return false;
	memset(out, 0, 10);
	out[10] = out[11] = 0xff;
	memcpy(out + 12, &a.s_addr, 4);
	return true;
}

int sv_ud_roce_send(struct sv_qp *qp, const struct sv_swqe *w,
		    const struct sv_ud_hdr *h, const uint8_t *data)
{
	uint8_t pkt[SV_ROCE_HDR_MAX + SV_UD_MTU + 8];
	struct sv_roce_pkt p = {
		.opcode = SV_IB_UD | (h->flags & SV_UD_IMM ? SV_IB_SEND_ONLY_IMM
							   : SV_IB_SEND_ONLY),
		.se = !!(h->flags & SV_UD_SOLICITED),
		.pkey = 0xffff,
		.dqpn = h->dst_qpn,
		.psn = qp->ud.roce_psn,
		.qkey = h->qkey,
		.src_qpn = h->src_qpn,
		.imm_be = h->imm,
		.payload = data,
		.len = h->len,
	};
	struct sv_roce_ip ip = {.dport = SV_ROCE_PORT};
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(SV_ROCE_PORT),
				 .sin_addr.s_addr = w->ud_ip};
	struct in_pktinfo pi = {0};
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(sizeof(struct in_pktinfo))];
	} u;
	struct iovec iov = {pkt, 0};
	struct msghdr m = {.msg_name = &to,
			   .msg_namelen = sizeof(to),
			   .msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	struct in_addr src;
	int fd, n;

	if (!mapped4(&w->ud_sgid, ip.src) || !mapped4(&w->ud_dgid, ip.dst) ||
	    !sv_gid_ipv4(&w->ud_sgid, &src))
		return -EAFNOSUPPORT;
	fd = roce_socket(qp);
	if (fd < 0)
		return fd;
	ip.sport = sv_ud_roce_sport(qp->qpx.qp_base.qp_num);
	n = sv_roce_build(pkt, sizeof(pkt), &p, &ip);
	if (n < 0)
		return n;
	iov.iov_len = (size_t)n;
	qp->ud.roce_psn = (qp->ud.roce_psn + 1) & SV_PSN_MASK;
	/* from the AH's source GID's address, which the ICRC covers */
	pi.ipi_spec_dst = src;
	memset(&u, 0, sizeof(u));
	u.c.cmsg_level = IPPROTO_IP;
	u.c.cmsg_type = IP_PKTINFO;
	u.c.cmsg_len = CMSG_LEN(sizeof(pi));
	memcpy(CMSG_DATA(&u.c), &pi, sizeof(pi));
	if (sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		return -errno;
	if (unlikely(sv_inject.on))
		sv_inject_sent();
	return 0;
}

bool sv_ud_roce_take(struct sv_roce_idmemo *memo, struct sv_qp_stats *st,
		     void *buf, size_t *n, size_t cap,
		     const struct sockaddr_in *src, uint32_t dst, uint8_t tos,
		     uint8_t ttl)
{
	struct sv_roce_ip ip = {.sport = ntohs(src->sin_port),
				.dport = SV_ROCE_PORT,
				.id_span = SV_ROCE_ID_ANY,
				.memo = memo};
	struct sv_ud_hdr h = {.magic = SV_UD_MAGIC,
			      .version = SV_UD_VERSION,
			      .flags = SV_UD_NET | SV_UD_ROCE | SV_UD_GRH};
	enum sv_roce_verdict v;
	struct sv_roce_pkt p;

	memset(ip.src, 0, 10);
	ip.src[10] = ip.src[11] = 0xff;
	memcpy(ip.dst, ip.src, 12);
	memcpy(ip.src + 12, &src->sin_addr.s_addr, 4);
	memcpy(ip.dst + 12, &dst, 4);
	v = sv_roce_parse(buf, *n, &ip, &p);
	if (v == SV_ROCE_OK && p.ip_id)
		sv_stats_add(st, roce_icrc_id, 1);
	if (v == SV_ROCE_OK)
		v = sv_roce_check_qpt(&p, IBV_QPT_UD);
	if (v != SV_ROCE_OK) {
		sv_roce_count_drop(st, v);
		return false;
	}
	/* the default P_Key only (as the QP's pkey_index 0); no multicast
	 * (DQPN 0xffffff), QP0 or QP1 here */
	if (!sv_roce_ud_hdr(&p, tos, ttl, cap, &h)) {
		sv_stats_add(st, roce_drop_qpn, 1);
		return false;
	}
	memcpy(h.sgid, ip.src, 16);
	memcpy(h.dgid, ip.dst, 16);
	/* the payload after the header (it moves up: memmove) */
	memmove((uint8_t *)buf + sizeof(h), p.payload, p.len);
	memcpy(buf, &h, sizeof(h));
	*n = sizeof(h) + p.len;
	return true;
}

bool sv_ud_roce_qp1(int fwd, struct sv_qp_stats *st, const void *buf, size_t n,
		    const struct sockaddr_in *src, uint32_t dst)
{
	struct sv_cm_pass_key k = sv_cm_pass_key_of(buf, n);
	int ret;

	if (k.by == SV_CM_PASS_NONE)
		return false;
	ret = sv_cm_pass_send(fwd, &k, buf, n, src->sin_addr.s_addr, dst);
	if (ret) {
		sv_stats_add(st, roce_drop_qpn, 1);
		sv_dbg("udp: an IB CM MAD for %s 0x%x: lost: %s\n",
		       k.by == SV_CM_PASS_BY_ID ? "comm ID" : "port",
		       k.by == SV_CM_PASS_BY_ID ? k.id : k.port,
		       strerror(-ret));
	}
	return true;
}

void sv_ud_roce_grh(uint8_t g[SV_GRH_LEN], const struct sv_ud_hdr *h)
{
	uint8_t *ip = g + 20;
	uint32_t sum = 0;
	/* the IP datagram as it came: IPv4, UDP, BTH, DETH, ImmDt,
	 * payload, pad, ICRC */
	uint32_t tot = 20 + 8 + SV_ROCE_BTH + 8 +
		       (h->flags & SV_UD_IMM ? 4 : 0) + ((h->len + 3) & ~3u) +
		       SV_ROCE_ICRC;

	/* rxe (RoCEv2 over IPv4): the first 20 bytes zero, the IPv4
	 * header in the last 20; the ID is not known here (0) */
	memset(g, 0, SV_GRH_LEN);
	ip[0] = 0x45;
	ip[1] = (uint8_t)(h->rsvd >> 8);
	ip[2] = (uint8_t)(tot >> 8);
	ip[3] = (uint8_t)tot;
	ip[6] = 0x40; /* DF */
	ip[8] = (uint8_t)h->rsvd ? (uint8_t)h->rsvd : 64;
	ip[9] = IPPROTO_UDP;
	memcpy(ip + 12, h->sgid + 12, 4);
	memcpy(ip + 16, h->dgid + 12, 4);
	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)ip[i] << 8 | ip[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	sum = ~sum & 0xffff;
	ip[10] = (uint8_t)(sum >> 8);
	ip[11] = (uint8_t)sum;
}
