// SPDX-License-Identifier: MIT
/*
 * The UD transport's send path (ud_priv.h says how the files divide it):
 * a send is one datagram (wire.h struct sv_ud_hdr + payload) handed to
 * the kernel with MSG_DONTWAIT and completed at once; what the kernel
 * will not take is lost, as on a wire, after a destination on this host
 * with a full queue was waited for (SV_UD_HOLD_NS).  On this host it goes
 * to the QP's socket by its QPN, or into its lane (lane.c); a multicast
 * goes to each member of the group the registry lists (mcast.c).
 *
 * Between hosts (an AH naming another host's IPv4-mapped or IPv6 GID, or
 * every AH with SOFTVERBS_TRANSPORT=tcp; sv_ud_route, here, picks the
 * context's socket) the same datagram goes over UDP to the well-known
 * port (SOFTVERBS_TCP_PORT, 4791, as RoCEv2), where the listener (door.c)
 * takes it, with a CRC-32C of it in the header's rsvd word (UDP's own
 * checksum is weak, as for the TCP transport's frames), or sealed with a
 * MAC under SOFTVERBS_SECRET_FILE (mac.c).  A send to a group whose MGID
 * is IPv4-mapped multicast goes to this host's members as before and as
 * one UDP datagram to (group, port) from the AH's source GID's address,
 * with IP_MULTICAST_LOOP off (this host's members have theirs already).
 * With SOFTVERBS_TRANSPORT=tcp a group is on lo only, and only over UDP
 * (loop on: the sender's own copy comes back through its listener).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "auth.h"
#include "core.h"
#include "crc32c.h"
#include "env.h"
#include "guard.h"
#include "inject.h"
#include "lane.h"
#include "pcap.h"
#include "shm.h"
#include "tcp.h"
#include "transport.h"
#include "ud_priv.h"
#include "wire.h"

/* UD over RoCEv2 past the port's MTU (roce_ud.c): no packet. */
static bool roce_too_long(const struct sv_qp *qp, const struct sv_swqe *w)
{
	return qp->ud.roce && w->ud_ip && w->ud_qpn != SV_MCAST_QPN &&
	       w->length > qp->ud.roce_mtu;
}

/* Gathers a WQE's payload into dst (room SV_UD_MTU); -EFAULT or
 * -EINVAL on a bad key, bound or vanished memory. */
static int gather(struct sv_qp *qp, const struct sv_swqe *w, uint8_t *dst)
{
	struct sv_pd *pd = to_spd(qp->qpx.qp_base.pd);
	const struct ibv_sge *sg = sv_swqe_sge(qp, w);
	uint32_t slot = (uint32_t)(w - qp->sq.wqe);

	if (w->inl) {
		memcpy(dst, qp->sq.inline_buf + (size_t)slot * qp->max_inline,
		       w->length);
		return 0;
	}
	for (uint32_t i = 0; i < w->num_sge; i++) {
		struct sv_mr *mr;

		if (!sg[i].length)
			continue;
		mr = sv_mr_lookup(qp->ctx, sg[i].lkey, pd);
		if (!mr || sg[i].addr < mr->iova ||
		    sg[i].addr - mr->iova > mr->length ||
		    sg[i].length > mr->length - (sg[i].addr - mr->iova))
			return -EINVAL;
		if (sv_copy_guarded(dst, mr->addr + (sg[i].addr - mr->iova),
				    sg[i].length))
			return -EFAULT;
		dst += sg[i].length;
	}
	return 0;
}

/* IBA 10.2.5 (Q_Key): a remote_qkey with the high bit set means the
 * sending QP's own qkey. */
static uint32_t send_qkey(const struct sv_qp *qp, const struct sv_swqe *w)
{
	return (w->ud_qkey & 0x80000000u) ? qp->attr.qkey : w->ud_qkey;
}

/* The address a multicast to group ip leaves from (network order; 0:
 * the kernel's route): the AH's source GID's, so the interface that has
 * it; SOFTVERBS_TRANSPORT=tcp: lo's. */
static uint32_t mcast_src(const struct sv_swqe *w)
{
	struct in_addr a;

	if (sv_transport_mode() == SV_TRANSPORT_TCP)
		return htonl(INADDR_LOOPBACK);
	if (w->ud_grh && sv_gid_ipv4(&w->ud_sgid, &a))
		return a.s_addr;
	return 0;
}

static uint64_t now_ms_since(uint64_t t)
{
	return (sv_now_ns() - t) / 1000000;
}

/* No room for the datagram at its destination (the socket's queue, or
 * its lane): -EAGAIN while it may wait, then 0: lost. */
static int wait_room(struct sv_qp *qp, struct sv_swqe *w, uint32_t qpn)
{
	uint64_t now = sv_now_ns();

	if (!w->ud_first_ns)
		w->ud_first_ns = now;
	if (qpn != qp->ud.stalled && now - w->ud_first_ns < SV_UD_HOLD_NS) {
		qp->comp.deadline = now + SV_UD_RETRY_TICK_NS;
		return -EAGAIN;
	}
	sv_dbg("qp %06x: datagram to %06x lost: no room%s\n",
	       qp->qpx.qp_base.qp_num, qpn,
	       qpn == qp->ud.stalled ? " (stalled)" : "");
	qp->ud.stalled = qpn;
	atomic_store_explicit(
		&qp->ud.lost,
		atomic_load_explicit(&qp->ud.lost, memory_order_relaxed) + 1,
		memory_order_relaxed);
	w->ud_first_ns = 0;
	return 0;
}

/* A datagram went to qpn: it takes again if it was stalled. */
static void sent(struct sv_qp *qp, struct sv_swqe *w, uint32_t qpn)
{
	if (w->ud_first_ns &&
	    now_ms_since(w->ud_first_ns) > SV_UD_SLOW_NS / 1000000)
		sv_dbg("qp %06x: datagram to %06x went after %llu ms\n",
		       qp->qpx.qp_base.qp_num, qpn,
		       (unsigned long long)now_ms_since(w->ud_first_ns));
	w->ud_first_ns = 0;
	if (qpn == qp->ud.stalled)
		qp->ud.stalled = 0;
}

/* The datagram d of n bytes to QP qpn, on this host (ip 0: with a lane's
 * memfd when offer is not -1) or over UDP to ip: 0 sent or lost (no such
 * QP, its queue full for SV_UD_HOLD_NS), -EAGAIN to be tried again
 * later. */
static int send_to(struct sv_qp *qp, struct sv_swqe *w, void *d, size_t n,
		   uint32_t qpn, uint32_t ip, int offer)
{
	struct sockaddr_in in = {.sin_family = AF_INET,
				 .sin_port = htons(sv_transport_connect_port()),
				 .sin_addr.s_addr = ip};
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6,
				   .sin6_port =
					   htons(sv_transport_connect_port())};
	struct sockaddr_un a;
	struct iovec iov = {d, n};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(sizeof(struct in_pktinfo))];
	} u;
	struct sv_ud_hdr *h = d;
	int fd = qp->link.listen_fd;

	m.msg_name = &a;
	m.msg_namelen = sv_link_qp_addr(&a, qpn);
	if (ip && qp->ud.roce && !w->ud_ip6 && w->ud_grh &&
	    !IN_MULTICAST(ntohl(ip))) { /* as RoCEv2 (roce_ud.c) */
		int err = sv_ud_roce_send(qp, w, h, (const uint8_t *)(h + 1));

		if (!err) {
			sent(qp, w, qpn);
			return 0;
		}
		if (err == -EAGAIN || err == -ENOBUFS)
			return wait_room(qp, w, qpn);
		sv_dbg("qp %06x: RoCEv2 datagram to %06x lost: %s\n",
		       qp->qpx.qp_base.qp_num, qpn, strerror(-err));
		w->ud_first_ns = 0;
		return 0;
	}
	if (ip) { /* another host's: over UDP, sealed */
		h->rsvd = 0;
		if (sv_auth_on()) /* d has room for the trailer */
			iov.iov_len = sv_ud_seal(qp, d, n);
		else
			h->rsvd = sv_crc32c(0, d, n);
		fd = qp->ctx->ud_tx_fd;
		m.msg_name = &in;
		m.msg_namelen = sizeof(in);
		if (w->ud_ip6) { /* the host is the AH's IPv6 dgid */
			memcpy(&in6.sin6_addr, w->ud_dgid.raw, 16);
			fd = qp->ctx->ud_tx6_fd;
			m.msg_name = &in6;
			m.msg_namelen = sizeof(in6);
		}
	}
	if (ip && !w->ud_ip6 && IN_MULTICAST(ntohl(ip)) && mcast_src(w)) {
		struct in_pktinfo pi = {.ipi_spec_dst.s_addr = mcast_src(w)};
		struct cmsghdr *c;

		/* the kernel sends a multicast out of the interface that
		 * has this source address (no route needed) */
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = sizeof(u.buf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = IPPROTO_IP;
		c->cmsg_type = IP_PKTINFO;
		c->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(c), &pi, sizeof(pi));
	} else if (offer >= 0) { /* a lane, offered with this datagram */
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int));
		u.c.cmsg_level = SOL_SOCKET;
		u.c.cmsg_type = SCM_RIGHTS;
		u.c.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&u.c), &offer, sizeof(int));
	}
	/* never blocks; a full queue or no such QP: lost, as on a wire */
	if (sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) {
		sent(qp, w, qpn);
		if (unlikely(sv_inject.on))
			sv_inject_sent();
		return 0; /* a datagram goes whole or not */
	}
	if (errno == EAGAIN || errno == ENOBUFS) {
		if (offer >= 0)
			sv_lane_unoffered(qp->ctx, qpn);
		return wait_room(qp, w, qpn);
	}
	if (offer >= 0 && (errno == ECONNREFUSED || errno == ENOENT))
		sv_lane_gone(qp->ctx, qpn); /* no lane to a QP that is not */
	sv_dbg("qp %06x: datagram to %06x lost: %s\n", qp->qpx.qp_base.qp_num,
	       qpn, strerror(errno));
	w->ud_first_ns = 0;
	return 0;
}

/* A unicast datagram: into its lane when there is one (this host, lanes
 * on), else on the socket (offering a lane). */
static int send_uni(struct sv_qp *qp, struct sv_swqe *w, void *d, size_t n)
{
	int offer = -1;

	if (sv_env_bool(SV_ENV_UD_LANES) && !w->ud_ip) {
		int r = sv_lane_send(qp, d, n, w->ud_qpn, &offer);

		if (!r) {
			sent(qp, w, w->ud_qpn);
			return 0;
		}
		if (r == -EAGAIN) /* a full lane waits as a full queue */
			return wait_room(qp, w, w->ud_qpn);
	}
	return send_to(qp, w, d, n, w->ud_qpn, w->ud_ip, offer);
}

/* Most members a multicast send reaches: the group's limit, and room for
 * dead members' entries. */
#define SV_MCAST_SCAN (4 * SV_MAX_MCAST_QP_ATTACH)

/*
 * A multicast (DQPN 0xffffff, rxe: the group is the GRH's dgid, no GRH
 * no group): one datagram to each member of the group on this host,
 * the sender's own QP included when it is attached, as an IB switch
 * replicates to every member port (IPoIB drops its own copies itself).
 * Members are visited in QPN order and ud_mc_next remembers how far the
 * send got, so a member whose queue is full is retried without sending
 * twice to those before it.  An IPv4 group's (w->ud_ip) goes to other
 * hosts last, as one UDP datagram (with SOFTVERBS_TRANSPORT=tcp: only
 * that, its members here hear it through their listeners).
 */
static int send_mcast(struct sv_qp *qp, struct sv_swqe *w, void *d, size_t n)
{
	uint32_t m[SV_MCAST_SCAN];
	int k = 0;

	if (!w->ud_grh)
		return IBV_WC_SUCCESS; /* rxe drops it: no group named */
	if (!w->ud_ip || sv_transport_mode() != SV_TRANSPORT_TCP)
		k = sv_mcast_members(&w->ud_dgid, m, SV_MCAST_SCAN);
	for (int i = 0; i < k; i++) {
		if (m[i] < w->ud_mc_next)
			continue;
		if (send_to(qp, w, d, n, m[i], 0, -1))
			return -1;
		w->ud_mc_next = m[i] + 1;
	}
	w->ud_mc_next = SV_MCAST_QPN; /* this host's done */
	if (w->ud_ip && send_to(qp, w, d, n, SV_MCAST_QPN, w->ud_ip, -1))
		return -1;
	return IBV_WC_SUCCESS;
}

/* One WQE as one datagram, or one per member of a multicast group; the
 * status it completes with, or -1 when a destination's queue is full
 * and it should be tried again later. */
static int send_one(struct sv_qp *qp, struct sv_swqe *w)
{
	struct {
		struct sv_ud_hdr h;
		uint8_t data[SV_UD_MTU + sizeof(struct sv_ud_mac)];
	} d;

	if (roce_too_long(qp, w)) {
		/* IBA C10-93.1.1, as rxe: past the port's MTU, no packet
		 * and no error */
		SV_STAT_INC(qp, roce_ud_too_long);
		return IBV_WC_SUCCESS;
	}
	if (w->length > SV_UD_MTU)
		return IBV_WC_LOC_LEN_ERR; /* IBA 9.8.4: one packet */
	memset(&d.h, 0, sizeof(d.h));
	d.h.magic = SV_UD_MAGIC;
	d.h.version = SV_UD_VERSION;
	d.h.src_qpn = qp->qpx.qp_base.qp_num;
	d.h.dst_qpn = w->ud_qpn;
	d.h.qkey = send_qkey(qp, w);
	d.h.len = w->length;
	if (w->imm_valid) {
		d.h.flags |= SV_UD_IMM;
		d.h.imm = w->imm;
	}
	if (w->flags & IBV_SEND_SOLICITED)
		d.h.flags |= SV_UD_SOLICITED;
	if (w->ud_grh) {
		d.h.flags |= SV_UD_GRH;
		memcpy(d.h.sgid, w->ud_sgid.raw, 16);
		memcpy(d.h.dgid, w->ud_dgid.raw, 16);
	}
	if (gather(qp, w, d.data))
		return IBV_WC_LOC_PROT_ERR;
	if (__builtin_expect(sv_pcap_on, 0))
		sv_pcap_ud(qp, true, &d.h, w->ud_grh ? d.h.sgid : NULL,
			   w->ud_grh ? d.h.dgid : NULL, d.data);
	if (w->ud_qpn == SV_MCAST_QPN)
		return send_mcast(qp, w, &d, sizeof(d.h) + w->length);
	return send_uni(qp, w, &d, sizeof(d.h) + w->length) < 0
		       ? -1
		       : IBV_WC_SUCCESS;
}

void sv_ud_send_run(struct sv_qp *qp)
{
	if (unlikely(sv_inject.on))
		qp->inject.delay_until = 0; /* set again if delay_us holds */
	while (qp->attr.qp_state == IBV_QPS_RTS && qp->sq.send != qp->sq.post) {
		struct sv_swqe *w =
			&qp->sq.wqe[qp->sq.send & (qp->sq.size - 1)];
		struct ibv_wc wc;
		int st;

		if (unlikely(w->due_ns) && sv_now_ns() < w->due_ns) {
			/* SOFTVERBS_FAULTS delay_us: the datagram leaves
			 * that long after its post, in order (the progress
			 * thread wakes then, progress.c) */
			qp->inject.delay_until = w->due_ns;
			return;
		}
		st = send_one(qp, w);
		wc = (struct ibv_wc){
			.wr_id = w->wr_id,
			.status = (enum ibv_wc_status)st,
			.opcode = IBV_WC_SEND,
			.byte_len = w->length,
			.qp_num = qp->qpx.qp_base.qp_num,
		};
		if (st < 0)
			return; /* the head waits for room (progress timer) */
		qp->comp.deadline = 0;
		qp->sq.send++;
		qp->sq.comp++;
		if (st == IBV_WC_SUCCESS && !roce_too_long(qp, w)) {
			sv_stat_add(qp, tx_pkts, 1);
			sv_stat_add(qp, tx_bytes, w->length);
		}
		sv_stat_wc(qp, st);
		if (st == IBV_WC_SUCCESS && !qp->sq.sig_all &&
		    !(w->flags & IBV_SEND_SIGNALED))
			continue;
		sv_cq_push(qp->scq, &wc, false);
		if (st != IBV_WC_SUCCESS) {
			/* IBA 10.3.1: a UD send error stops the send queue
			 * (SQE); receives go on */
			qp->attr.qp_state = IBV_QPS_SQE;
			sv_qp_flush_sq(qp);
		}
	}
}

/* The context's socket for datagrams to other hosts' IPv6 addresses,
 * made at the first AH that needs it.  0 or -errno. */
static int ud_tx6(struct sv_context *ctx)
{
	int err = 0;

	pthread_mutex_lock(&ctx->door_lock);
	if (ctx->ud_tx6_fd < 0) {
		ctx->ud_tx6_fd = socket(
			AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (ctx->ud_tx6_fd < 0)
			err = -errno;
	}
	pthread_mutex_unlock(&ctx->door_lock);
	return err;
}

int sv_ud_route(struct sv_context *ctx, const struct ibv_ah_attr *a,
		uint32_t *ip, bool *ip6)
{
	struct in_addr in = {.s_addr = htonl(INADDR_LOOPBACK)};
	int mode = sv_transport_mode(), err = 0;
	union sv_sockaddr sa;
	uint32_t grp;
	bool local;

	*ip = 0;
	*ip6 = false;
	if (mode == 1)
		return 0; /* shared memory only */
	if (a->is_global && sv_mcast_ipv4(a->grh.dgid.raw, &grp))
		in.s_addr = grp; /* an IPv4 group: other hosts too */
	else if (a->is_global && a->grh.dgid.raw[0] == 0xff)
		return 0; /* another group is this host's */
	else if (!a->is_global && sv_lid_ipv4(a->dlid, &in)) {
		/* SOFTVERBS_SUBNET: another host's LID, its address (the
		 * datagram carries no GRH, as the AH none) */
		if (sv_ipv4_is_local(in) && mode != 2)
			return 0;
	} else {
		local = !a->is_global || sv_gid_is_local(&a->grh.dgid);
		if (local && mode != 2)
			return 0;
		if (a->is_global && sv_gid_sockaddr(&a->grh.dgid, 0, &sa) &&
		    sa.sa.sa_family == AF_INET6) {
			err = ud_tx6(ctx);
			if (!err) {
				*ip = htonl(INADDR_NONE);
				*ip6 = true;
			}
			return err;
		}
		if (a->is_global && !sv_gid_ipv4(&a->grh.dgid, &in))
			in.s_addr = htonl(INADDR_LOOPBACK); /* link-local GID */
	}
	pthread_mutex_lock(&ctx->door_lock);
	if (ctx->ud_tx_fd < 0) {
		/* our multicast loops back only where this host's members
		 * hear it through their listeners (tcp mode) */
		int loop = mode == 2;

		ctx->ud_tx_fd = socket(
			AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (ctx->ud_tx_fd < 0)
			err = -errno;
		else if (setsockopt(ctx->ud_tx_fd, IPPROTO_IP,
				    IP_MULTICAST_LOOP, &loop, sizeof(loop)))
			err = -errno;
		if (err && ctx->ud_tx_fd >= 0) {
			close(ctx->ud_tx_fd);
			ctx->ud_tx_fd = -1;
		}
	}
	pthread_mutex_unlock(&ctx->door_lock);
	*ip = in.s_addr;
	return err;
}
