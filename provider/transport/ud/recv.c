// SPDX-License-Identifier: MIT
/*
 * The UD transport's receive path (ud_priv.h says how the files divide
 * it): the QP's socket (sv_ud_bind: bound to its QPN's name, the sender's
 * credentials attached) and its lanes (lane.c).  On arrival, datagrams
 * from another user, malformed, for another QP, with a wrong qkey, or
 * with no receive posted are dropped silently (counted in qp->ud.drops);
 * the rest go into the next receive, after its 40-byte GRH.  A multicast
 * is taken by a QP attached to the group.  What came from the network, or
 * with a MAC, is checked by mac.c first.
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

int sv_ud_bind(struct sv_link *l, uint32_t *qpn)
{
	int one = 1, err;

	err = sv_link_bind(l, SOCK_DGRAM, qpn);
	if (err)
		return err;
	/* the kernel then attaches every sender's credentials */
	if (setsockopt(l->listen_fd, SOL_SOCKET, SO_PASSCRED, &one,
		       sizeof(one))) {
		err = -errno;
		close(l->listen_fd);
		l->listen_fd = -1;
		return err;
	}
	return 0;
}

/* The 40-byte GRH (IBA 8.3) in front of a datagram that came with one:
 * IPv6-like, next header 0x1b (IB), the sender's GID as source. */
static void make_grh(struct ibv_grh *g, const struct sv_ud_hdr *h)
{
	memset(g, 0, sizeof(*g));
	g->version_tclass_flow = htonl(6u << 28);
	g->paylen = htons((uint16_t)(h->len + 8)); /* BTH+DETH-ish + data */
	g->next_hdr = 0x1b;
	g->hop_limit = 64;
	memcpy(g->sgid.raw, h->sgid, 16);
	memcpy(g->dgid.raw, h->dgid, 16);
}

/* Scatters the GRH (or skips its 40 bytes) and the payload into the
 * receive r; false on a bad key or vanished memory. */
static bool scatter(struct sv_qp *qp, const struct sv_rwqe *r,
		    const struct ibv_grh *grh, const uint8_t *data,
		    uint32_t len)
{
	struct sv_pd *pd = to_spd(qp->qpx.qp_base.pd);
	const struct ibv_sge *sg =
		&qp->rq.sge[(size_t)(r - qp->rq.wqe) * qp->max_recv_sge];
	uint32_t pos = 0, total = SV_GRH_LEN + len;

	for (uint32_t i = 0; i < r->num_sge && pos < total; i++) {
		uint32_t n = sg[i].length, off = 0;
		struct sv_mr *mr;
		uint8_t *p;

		if (!n)
			continue;
		if (n > total - pos)
			n = total - pos;
		mr = sv_mr_lookup(qp->ctx, sg[i].lkey, pd);
		if (!mr || !(mr->access & IBV_ACCESS_LOCAL_WRITE) ||
		    sg[i].addr < mr->iova ||
		    sg[i].addr - mr->iova > mr->length ||
		    n > mr->length - (sg[i].addr - mr->iova))
			return false;
		p = mr->addr + (sg[i].addr - mr->iova);
		if (pos < SV_GRH_LEN) {
			off = SV_GRH_LEN - pos < n ? SV_GRH_LEN - pos : n;
			if (grh &&
			    sv_copy_guarded(p, (const uint8_t *)grh + pos, off))
				return false;
		}
		if (n > off &&
		    sv_copy_guarded(p + off, data + (pos + off - SV_GRH_LEN),
				    n - off))
			return false;
		pos += n;
	}
	return true;
}

/* IBA 10.2.5.2: a receive's slid is the sender's LID.  From another
 * host (SV_UD_NET: the listener wrote its address into the sgid), the
 * LID of its address on SOFTVERBS_SUBNET; else this host's. */
static uint16_t sender_lid(const struct sv_ud_hdr *h)
{
	union ibv_gid g;
	struct in_addr a;
	uint16_t lid;

	memcpy(g.raw, h->sgid, 16);
	if ((h->flags & SV_UD_NET) && sv_gid_ipv4(&g, &a) &&
	    (lid = sv_ipv4_lid(a)))
		return lid;
	return sv_local_lid();
}

/* The receive the datagram takes, completed; IBA 9.8.4 / rxe class D: a
 * receive too small for GRH + payload completes with LOC_LEN_ERR (the
 * QP stays as it is), one that faults with LOC_PROT_ERR. */
static void deliver(struct sv_qp *qp, const struct sv_ud_hdr *h,
		    const uint8_t *data)
{
	struct sv_rwqe *r = &qp->rq.wqe[qp->rq.comp & (qp->rq.size - 1)];
	struct ibv_grh grh;
	struct ibv_wc wc = {
		.wr_id = r->wr_id,
		.status = IBV_WC_SUCCESS,
		.opcode = IBV_WC_RECV,
		.byte_len = SV_GRH_LEN + h->len,
		.qp_num = qp->qpx.qp_base.qp_num,
		.src_qp = h->src_qpn,
		.slid = sender_lid(h),
		.pkey_index = 0,
	};

	if (h->flags & SV_UD_ROCE) { /* the IPv4 header, as rxe */
		sv_ud_roce_grh((uint8_t *)&grh, h);
		wc.wc_flags |= IBV_WC_GRH;
		wc.slid = 0; /* RoCE has no LIDs */
	} else if (h->flags & SV_UD_GRH) {
		make_grh(&grh, h);
		wc.wc_flags |= IBV_WC_GRH;
	}
	if (h->flags & SV_UD_IMM) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = h->imm;
	}
	if (r->length < SV_GRH_LEN + h->len)
		wc.status = IBV_WC_LOC_LEN_ERR;
	else if (!scatter(qp, r, (h->flags & SV_UD_GRH) ? &grh : NULL, data,
			  h->len))
		wc.status = IBV_WC_LOC_PROT_ERR;
	qp->rq.comp++;
	if (__builtin_expect(sv_pcap_on, 0))
		sv_pcap_ud(qp, false, h, h->flags & SV_UD_GRH ? h->sgid : NULL,
			   h->flags & SV_UD_GRH ? h->dgid : NULL, data);
	sv_stat_add(qp, rx_pkts, 1);
	sv_stat_add(qp, rx_bytes, h->len);
	sv_stat_wc(qp, wc.status);
	sv_cq_push(qp->rcq, &wc, h->flags & SV_UD_SOLICITED);
}

/* True if the GID (of a datagram's header) is this host's. */
static bool from_here(const uint8_t sgid[16])
{
	union ibv_gid g;

	memcpy(g.raw, sgid, 16);
	return sv_gid_is_local(&g);
}

/* A datagram for this QP: addressed to its QPN, or a multicast with a
 * GRH naming a group the QP is attached to (the registry is only a hint:
 * a stale or forged entry must not make us take another group's). */
static bool for_us(const struct sv_qp *qp, const struct sv_ud_hdr *h)
{
	/* our own copy: our QPN from this host (QPNs are unique per host;
	 * the listener writes another host's address into the sgid) */
	if (h->dst_qpn == SV_MCAST_QPN)
		return (h->flags & SV_UD_GRH) &&
		       sv_mcast_attached(qp, h->dgid) &&
		       !(qp->ud.mcast_block_self &&
			 h->src_qpn == qp->qpx.qp_base.qp_num &&
			 from_here(h->sgid));
	return h->dst_qpn == qp->qpx.qp_base.qp_num;
}

/* SOFTVERBS_FAULTS drop: the datagram is lost (decided by its number
 * among those this QP could take: UD has no PSN). */
static bool fault_drop(struct sv_qp *qp)
{
	if (!sv_inject_hit(sv_inject.drop, sv_inject.seed, SV_FAULT_UD,
			   qp->inject.idx, qp->inject.try++, 0))
		return false;
	SV_STAT_INC(qp, fault_drops);
	return true;
}

/* A receive for the datagram: the QP's own, or on an SRQ its oldest,
 * moved into the QP's one slot (engine/srq.c; it raises the SRQ's limit
 * event).  None: the datagram is dropped (UD has no RNR). */
static bool has_recv(struct sv_qp *qp, sv_srq_take_fn srq_take)
{
	if (qp->rq.comp != qp->rq.post)
		return true;
	return qp->srq && srq_take(qp->srq, qp);
}

/* IBA 10.2.5: the datagram's qkey must be the QP's.  The loss is decided
 * before a receive is taken from an SRQ: none is held for nothing. */
static bool take(struct sv_qp *qp, const struct sv_ud_hdr *h, size_t n,
		 sv_srq_take_fn srq_take)
{
	enum ibv_qp_state s = qp->attr.qp_state;

	/* IBA 10.3.1: RESET and INIT take nothing; in ERR it is flushed */
	return s >= IBV_QPS_RTR && s != IBV_QPS_ERR && sv_ud_hdr_ok(h, n) &&
	       for_us(qp, h) && h->qkey == qp->attr.qkey &&
	       (!(h->flags & SV_UD_ROCE) || qp->ud.roce) &&
	       !(SV_FAULT_ON(drop) && fault_drop(qp)) && has_recv(qp, srq_take);
}

/* What came with a datagram: true if its sender is our user (and *pid
 * who it is); *fd the first fd passed (a lane offered), or -1; any other
 * fd is closed. */
static bool sender_of(struct msghdr *m, pid_t *pid, int *fd)
{
	bool ok = false;

	*fd = -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		if (c->cmsg_type == SCM_CREDENTIALS &&
		    c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
			struct ucred cr;

			memcpy(&cr, CMSG_DATA(c), sizeof(cr));
			ok = cr.uid == getuid() || cr.uid == geteuid();
			*pid = cr.pid;
		} else if (c->cmsg_type == SCM_RIGHTS) {
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			for (size_t i = 0; i < k; i++) {
				int f;

				memcpy(&f, CMSG_DATA(c) + i * sizeof(int),
				       sizeof(f));
				if (*fd < 0)
					*fd = f;
				else
					close(f);
			}
		}
	}
	return ok;
}

void sv_ud_drop(struct sv_qp *qp)
{
	/* silently, as on a wire; tests read the count without the lock */
	__atomic_store_n(&qp->ud.drops, qp->ud.drops + 1, __ATOMIC_RELAXED);
	sv_stat_add(qp, ud_drops, 1);
	sv_dbg("qp %06x: datagram dropped (%llu)\n", qp->qpx.qp_base.qp_num,
	       (unsigned long long)qp->ud.drops);
}

/* The socket's datagrams: those of senders without a lane (multicast,
 * other hosts', lanes off or full, a lane's first), lane offers and
 * doorbells (empty). */
static void recv_socket(struct sv_qp *qp, sv_srq_take_fn srq_take)
{
	struct {
		struct sv_ud_hdr h;
		uint8_t data[SV_UD_MTU + sizeof(struct sv_ud_mac)];
	} d;
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(sizeof(struct ucred)) +
			 CMSG_SPACE(sizeof(int))];
	} u;

	for (;;) {
		struct iovec iov = {&d, sizeof(d)};
		struct msghdr m = {.msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = u.buf,
				   .msg_controllen = sizeof(u.buf)};
		ssize_t n =
			recvmsg(qp->link.listen_fd, &m,
				MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);
		bool ok, whole;
		pid_t pid = 0;
		size_t len;
		int fd;

		if (n < 0)
			return; /* EAGAIN: all taken */
		ok = sender_of(&m, &pid, &fd);
		whole = !(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC));
		if (fd >= 0) {
			/* a lane for us, with a datagram we could take */
			if (ok && whole && sv_ud_hdr_ok(&d.h, (size_t)n) &&
			    d.h.dst_qpn == qp->qpx.qp_base.qp_num)
				sv_lane_offer(qp, fd, pid);
			else
				close(fd);
		}
		if (n == 0 && ok && whole)
			continue; /* a lane's doorbell */
		if (!whole || !ok) {
			sv_ud_drop(qp);
			continue;
		}
		len = (size_t)n;
		/* from another host (the listener marks it), or a MAC */
		/* RoCEv2 has none: it is taken only by a RoCE QP (take) */
		if ((d.h.flags & (SV_UD_NET | SV_UD_MAC)) &&
		    !(d.h.flags & SV_UD_ROCE) &&
		    !sv_ud_auth_check(qp, &d.h, &len))
			continue; /* counted */
		if (!take(qp, &d.h, len, srq_take)) {
			sv_ud_drop(qp);
			continue;
		}
		deliver(qp, &d.h, d.data);
	}
}

/* The lanes' records, checked as datagrams are (a lane is unicast); at
 * most a lane's worth from each per run, so a producer that keeps
 * writing cannot keep us here. */
static void recv_lanes(struct sv_qp *qp, sv_srq_take_fn srq_take)
{
	for (uint32_t i = 0; i < qp->ud.nlanes; i++) {
		struct sv_lane_rx *l = &qp->ud.lanes[i];

		for (uint32_t k = 0; k < SV_LANE_SLOTS; k++) {
			struct sv_ud_hdr h;
			const uint8_t *p;

			if (!sv_lane_peek(l, &h, &p))
				break;
			if (h.dst_qpn == SV_MCAST_QPN || h.len > SV_UD_MTU ||
			    (h.flags & (SV_UD_NET | SV_UD_MAC | SV_UD_ROCE)) ||
			    !take(qp, &h, sizeof(h) + h.len, srq_take)) {
				sv_ud_drop(qp);
			} else {
				/* counted before its completion is seen */
				atomic_store_explicit(
					&qp->ud.lane_rx,
					atomic_load_explicit(
						&qp->ud.lane_rx,
						memory_order_relaxed) +
						1,
					memory_order_release);
				deliver(qp, &h, p);
			}
			sv_lane_consume(l);
		}
	}
}

void sv_ud_recv_run(struct sv_qp *qp, sv_srq_take_fn srq_take)
{
	atomic_bool *rung = &qp->pfd[0].rung;

	/* with lanes, the socket is read only once its edge was seen (the
	 * progress thread raises rung): no system call per poll.  While the
	 * context's listener holds a datagram for a full socket (a burst
	 * from another host), every poll reads: the room it makes lets the
	 * rest on at the next poll (sv_ud_door_poll) without a wake-up of
	 * the thread */
	sv_ud_door_poll(qp->ctx);
	if (!sv_env_bool(SV_ENV_UD_LANES) ||
	    atomic_load_explicit(&qp->ctx->udoor_holds, memory_order_relaxed) ||
	    (atomic_load_explicit(rung, memory_order_relaxed) &&
	     atomic_exchange(rung, false)))
		recv_socket(qp, srq_take);
	if (qp->ud.nlanes)
		recv_lanes(qp, srq_take);
}
