// SPDX-License-Identifier: MIT
/*
 * The UD transport (IBA 9.8.4): one SOCK_DGRAM abstract Unix socket per
 * UD QP, bound to its QPN's name, so any QP of any process of the user
 * reaches it with no set-up.  A send is one datagram (wire.h struct
 * sv_ud_hdr + payload) handed to the kernel with MSG_DONTWAIT and
 * completed at once; what the kernel will not take is lost, as on a wire.
 * On arrival, datagrams from another user, malformed, for another QP,
 * with a wrong qkey, or with no receive posted are dropped silently
 * (counted in qp->ud.drops); the rest go into the next receive, after
 * its 40-byte GRH.  A multicast goes to each member of the group the
 * registry lists (mcast.c), and is taken by a QP attached to the group.
 *
 * Between hosts (an AH naming another host's IPv4-mapped or IPv6 GID, or
 * every AH with SOFTVERBS_TRANSPORT=tcp) the same datagram goes over UDP
 * to the well-known port (SOFTVERBS_TCP_PORT, 4791, as RoCEv2), with a
 * CRC-32C of it in the header's rsvd word (UDP's own checksum is weak, as
 * for the TCP transport's frames).  Every context with a UD QP listens
 * there with SO_REUSEPORT (one dual-stack socket: IPv6 and IPv4), as the
 * TCP door (tcp.h); the one the kernel picks
 * checks the datagram, puts the source address in the GRH's sgid (what a
 * RoCE receiver sees: the IP header's) and passes it on, unchanged
 * otherwise, to the QP's socket by its QPN, where it is checked again
 * like any other.  Lost on the way (a stopped process's listener takes
 * its share and holds it) is lost, as on a wire.
 *
 * With SOFTVERBS_SECRET_FILE (auth.h) a datagram to another host carries
 * a MAC instead of the CRC (wire.h struct sv_ud_mac: a random id of the
 * sending QP and its seq).  The listener marks what it passes on as from
 * the network (SV_UD_NET) and checks no MAC (the process may have no
 * secret): the QP does, in its own receive path, where all its
 * datagrams pass whichever listener the kernel picked, and keeps each
 * sender's window of seqs (a replay is dropped).  A receiver with a
 * secret drops datagrams from the network without a MAC that checks; one
 * without drops those with a MAC; each says so once and counts them
 * (ud_auth_drops, ud_replay_drops).  Between QPs of one host (Unix
 * sockets, SCM_CREDENTIALS) no MAC travels.
 *
 * Multicast between hosts: a group whose MGID is IPv4-mapped multicast
 * (mcast.c) is that IPv4 group too.  The listener joins it while a QP of
 * the context is attached (IP_MULTICAST_ALL off: it hears only its own
 * groups); a send to it goes to this host's members as before and as one
 * UDP datagram to (group, port) from the AH's source GID's address, with
 * IP_MULTICAST_LOOP off (this host's members have theirs already).  The
 * listener takes a datagram sent to a group (IP_PKTINFO: the IP header's
 * destination) only with DQPN 0xffffff and a GRH naming that group, and
 * passes it to each QP of its context attached to it.  With
 * SOFTVERBS_TRANSPORT=tcp a group is on lo only, and only over UDP
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
#include "progress.h"
#include "shm.h"
#include "tcp.h"
#include "transport.h"
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

/* The truncated MAC (wire.h struct sv_ud_mac) of the datagram h, its
 * payload and t's sender and seq, into out.  The header as the sender
 * wrote it: the listener that passes it on writes sgid (the IP source),
 * rsvd and SV_UD_NET, so those are left out, as ESP leaves out the IP
 * header: the source address a receiver sees is the IP header's. */
static void mac_of(const struct sv_ud_hdr *h, const void *payload,
		   const struct sv_ud_mac *t, uint8_t out[sizeof(t->mac)])
{
	struct sv_ud_hdr c = *h;
	uint8_t full[SV_AUTH_MAC_LEN];
	struct iovec iov[3] = {{&c, sizeof(c)},
			       {(void *)payload, h->len},
			       {(void *)t, SV_UD_MAC_COVERS}};

	c.rsvd = 0;
	c.flags &= (uint16_t)~SV_UD_NET;
	memset(c.sgid, 0, sizeof(c.sgid));
	/* zeros on failure: they match no MAC a peer sent */
	sv_auth_mac_use(SV_AUTH_UD, iov, 3, full);
	memcpy(out, full, sizeof(t->mac));
}

/* Appends the MAC trailer to the datagram d of n bytes (room for it
 * follows): the QP's next seq under its sender id.  The new length.
 * Runs under qp->lock (the send engine), so seqs leave in order. */
static size_t seal(struct sv_qp *qp, void *d, size_t n)
{
	struct sv_ud_hdr *h = d;
	struct sv_ud_mac t;

	while (!qp->ud.tx_id)
		sv_auth_random(&qp->ud.tx_id, sizeof(qp->ud.tx_id));
	t.sender = qp->ud.tx_id;
	t.seq = ++qp->ud.tx_seq;
	h->flags |= SV_UD_MAC; /* set before the MAC: it is covered */
	h->rsvd = 0;	       /* no CRC: the MAC covers every bit */
	mac_of(h, h + 1, &t, t.mac);
	memcpy((uint8_t *)d + n, &t, sizeof(t));
	return n + sizeof(t);
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
	if (ip) { /* another host's: over UDP, sealed */
		h->rsvd = 0;
		if (sv_auth_on()) /* d has room for the trailer */
			iov.iov_len = seal(qp, d, n);
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
		if (st == IBV_WC_SUCCESS) {
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
		.slid = sv_local_lid(),
		.pkey_index = 0,
	};

	if (h->flags & SV_UD_GRH) {
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

/* IBA 10.2.5: the datagram's qkey must be the QP's. */
static bool take(struct sv_qp *qp, const struct sv_ud_hdr *h, size_t n)
{
	enum ibv_qp_state s = qp->attr.qp_state;

	/* IBA 10.3.1: RESET and INIT take nothing; in ERR it is flushed */
	return s >= IBV_QPS_RTR && s != IBV_QPS_ERR && sv_ud_hdr_ok(h, n) &&
	       for_us(qp, h) && h->qkey == qp->attr.qkey &&
	       qp->rq.comp != qp->rq.post &&
	       !(SV_FAULT_ON(drop) && fault_drop(qp));
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

static void drop(struct sv_qp *qp)
{
	/* silently, as on a wire; tests read the count without the lock */
	__atomic_store_n(&qp->ud.drops, qp->ud.drops + 1, __ATOMIC_RELAXED);
	sv_stat_add(qp, ud_drops, 1);
	sv_dbg("qp %06x: datagram dropped (%llu)\n", qp->qpx.qp_base.qp_num,
	       (unsigned long long)qp->ud.drops);
}

/*
 * With a secret, the senders from other hosts a QP has heard, each with
 * its window of seqs (RFC 4303 3.4.3's, 64 wide): a seq seen, or 64 or
 * more below the highest seen, is a replay.  Only a datagram whose MAC
 * checks makes an entry, so a stranger holds nothing here; the table is
 * made at the first one and never grows: SV_UD_SENDERS entries (4 KB)
 * whatever arrives.  A new sender takes the entry used least recently.
 * What this leaves open, accepted: an evicted sender's recorded
 * datagrams (after SV_UD_SENDERS other senders with the secret) are
 * taken once more if replayed, and so are a destroyed QP's by a new QP
 * that draws the same random QPN and has the same Q_Key.
 */
#define SV_UD_SENDERS 128
#define SV_UD_WINDOW  64

struct sv_ud_replay {
	uint64_t id[SV_UD_SENDERS];   /* sender id, 0: free (scanned) */
	uint64_t top[SV_UD_SENDERS];  /* highest seq taken */
	uint64_t seen[SV_UD_SENDERS]; /* bit i: seq top - i taken */
	uint64_t used[SV_UD_SENDERS]; /* tick of its last datagram */
	uint64_t tick;		      /* datagrams checked */
	uint32_t last;		      /* the entry last used: tried first */
};

/* The entry of sender id in r, a new one (the least recently used
 * evicted) if it has none; *fresh tells which. */
static uint32_t replay_entry(struct sv_ud_replay *r, uint64_t id, bool *fresh)
{
	uint32_t old = 0;

	*fresh = false;
	if (r->id[r->last] == id)
		return r->last;
	for (uint32_t i = 0; i < SV_UD_SENDERS; i++) {
		if (r->id[i] == id)
			return i;
		if (r->used[i] < r->used[old])
			old = i; /* a free entry's used is 0: taken first */
	}
	*fresh = true;
	if (r->id[old])
		sv_dbg("udp: sender %016llx's window evicted\n",
		       (unsigned long long)r->id[old]);
	r->id[old] = id;
	return old;
}

/* True if (id, seq) is new to qp, and then marks it seen.  The MAC has
 * checked.  Under qp->lock. */
static bool replay_check(struct sv_qp *qp, uint64_t id, uint64_t seq)
{
	struct sv_ud_replay *r = qp->ud.replay;
	uint32_t i;
	bool fresh;

	if (!seq || !id)
		return false; /* never sent */
	if (!r) {
		r = qp->ud.replay = calloc(1, sizeof(*r));
		if (!r)
			return false; /* no memory: never taken twice */
	}
	i = replay_entry(r, id, &fresh);
	r->last = i;
	r->used[i] = ++r->tick;
	if (fresh) {
		r->top[i] = seq;
		r->seen[i] = 1;
	} else if (seq > r->top[i]) {
		uint64_t d = seq - r->top[i];

		r->seen[i] = d >= SV_UD_WINDOW ? 1 : (r->seen[i] << d) | 1;
		r->top[i] = seq;
	} else {
		uint64_t d = r->top[i] - seq;

		if (d >= SV_UD_WINDOW || (r->seen[i] >> d) & 1)
			return false;
		r->seen[i] |= 1ull << d;
	}
	return true;
}

/* A datagram from another host dropped for want of proof of the
 * secret: counted, and said once per process (the peer cannot hear
 * it: UD has no answer). */
static void auth_drop(struct sv_qp *qp, const struct sv_ud_hdr *h,
		      const char *why)
{
	static atomic_bool said;
	char from[INET6_ADDRSTRLEN] = "another host";

	sv_stat_add(qp, ud_auth_drops, 1);
	drop(qp);
	if (atomic_exchange(&said, true))
		return;
	if (h->flags & SV_UD_GRH) { /* the listener wrote the IP source */
		if (!memcmp(h->sgid, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12))
			inet_ntop(AF_INET, h->sgid + 12, from, sizeof(from));
		else
			inet_ntop(AF_INET6, h->sgid, from, sizeof(from));
	}
	fprintf(stderr,
		"softverbs: UD datagram from %s to QP %06x dropped: the peer "
		"does not prove the shared secret (%s); such datagrams are "
		"counted in ud_auth_drops (softverbs-stat)\n",
		from, qp->qpx.qp_base.qp_num, why);
}

/*
 * A datagram the socket gave (*n bytes) that is marked as from the
 * network or carries a MAC: true if it may go on (its MAC checked and
 * taken off: *n and the flag no longer count it), else dropped and
 * counted.  With a secret every datagram from another host must carry
 * a MAC that checks, under a sender and seq not seen before; without
 * one, none may carry a MAC (it proves a secret we cannot check).
 */
static bool auth_check(struct sv_qp *qp, struct sv_ud_hdr *h, size_t *n)
{
	bool mac = h->flags & SV_UD_MAC;
	struct sv_ud_mac t;
	uint8_t want[sizeof(t.mac)];

	if (!(h->flags & SV_UD_NET) || !sv_ud_hdr_ok(h, *n)) {
		drop(qp); /* a MAC only comes from the network */
		return false;
	}
	if (!sv_auth_on()) {
		if (!mac && !sv_auth_failed())
			return true; /* no secret: as ever */
		auth_drop(qp, h,
			  mac ? "it sent a MAC and this process has no "
				"SOFTVERBS_SECRET_FILE"
			      : "SOFTVERBS_SECRET_FILE cannot be read here");
		return false;
	}
	if (!mac) {
		auth_drop(qp, h,
			  "it sent no MAC: no SOFTVERBS_SECRET_FILE there?");
		return false;
	}
	memcpy(&t, (uint8_t *)h + *n - sizeof(t), sizeof(t));
	mac_of(h, h + 1, &t, want);
	if (!sv_auth_equal(want, t.mac, sizeof(want))) {
		auth_drop(qp, h,
			  "its MAC does not check: another secret, or the "
			  "datagram was changed on the way");
		return false;
	}
	if (!replay_check(qp, t.sender, t.seq)) {
		sv_stat_add(qp, ud_replay_drops, 1);
		drop(qp);
		return false;
	}
	h->flags &= (uint16_t)~SV_UD_MAC;
	*n -= sizeof(t);
	return true;
}

/* The socket's datagrams: those of senders without a lane (multicast,
 * other hosts', lanes off or full, a lane's first), lane offers and
 * doorbells (empty). */
static void recv_socket(struct sv_qp *qp)
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
			drop(qp);
			continue;
		}
		len = (size_t)n;
		/* from another host (the listener marks it), or a MAC */
		if ((d.h.flags & (SV_UD_NET | SV_UD_MAC)) &&
		    !auth_check(qp, &d.h, &len))
			continue; /* counted */
		if (!take(qp, &d.h, len)) {
			drop(qp);
			continue;
		}
		deliver(qp, &d.h, d.data);
	}
}

/* The lanes' records, checked as datagrams are (a lane is unicast); at
 * most a lane's worth from each per run, so a producer that keeps
 * writing cannot keep us here. */
static void recv_lanes(struct sv_qp *qp)
{
	for (uint32_t i = 0; i < qp->ud.nlanes; i++) {
		struct sv_lane_rx *l = &qp->ud.lanes[i];

		for (uint32_t k = 0; k < SV_LANE_SLOTS; k++) {
			struct sv_ud_hdr h;
			const uint8_t *p;

			if (!sv_lane_peek(l, &h, &p))
				break;
			if (h.dst_qpn == SV_MCAST_QPN || h.len > SV_UD_MTU ||
			    (h.flags & (SV_UD_NET | SV_UD_MAC)) ||
			    !take(qp, &h, sizeof(h) + h.len)) {
				drop(qp);
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

void sv_ud_recv_run(struct sv_qp *qp)
{
	atomic_bool *rung = &qp->pfd[0].rung;

	/* with lanes, the socket is read only once its edge was seen (the
	 * progress thread raises rung): no system call per poll */
	if (!sv_env_bool(SV_ENV_UD_LANES) ||
	    (atomic_load_explicit(rung, memory_order_relaxed) &&
	     atomic_exchange(rung, false)))
		recv_socket(qp);
	if (qp->ud.nlanes)
		recv_lanes(qp);
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
	else {
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

/* A datagram that arrived while its QP's socket was full waits here
 * (and the listener is out of epoll: the UDP socket's buffer holds the
 * rest) for up to SV_UD_HOLD_NS: a receiver that is starved catches
 * up, a stopped one loses them. */
struct sv_ud_door {
	int fd;
	uint32_t held;	  /* bytes in d, 0: none */
	uint32_t dst;	  /* d's IP destination (network order): a group? */
	uint32_t mc_next; /* a group's: members below this QPN have it */
	uint32_t stalled; /* a QPN whose full socket outlasted a hold: its
			   * datagrams are dropped, not held, until it takes
			   * one again; 0: none */
	socklen_t slen;	  /* d's source address length */
	uint64_t since, next_ns;
	struct {
		struct sv_ud_hdr h;
		uint8_t data[SV_UD_MTU + sizeof(struct sv_ud_mac)];
	} d;
};

static void door_event(struct sv_io *io, uint32_t revents);

void sv_ud_door_open(struct sv_context *ctx)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(sv_transport_port()),
				.sin_addr.s_addr = htonl(INADDR_ANY)};
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6,
				  .sin6_port = htons(sv_transport_port()),
				  .sin6_addr = IN6ADDR_ANY_INIT};
	static atomic_bool said;
	int one = 1, off = 0, buf = 4 << 20, err;
	struct sv_ud_door *d;
	bool v6 = true;

	if (sv_transport_mode() == SV_TRANSPORT_SHM)
		return; /* SOFTVERBS_TRANSPORT=shm: this host only */
	pthread_mutex_lock(&ctx->door_lock);
	if (ctx->udoor_st || ctx->udoor_failed)
		goto out;
	d = calloc(1, sizeof(*d));
	if (!d) {
		errno = ENOMEM;
		goto fail;
	}
	/* IPv6 and IPv4 on one socket (IPv4 senders arrive v4-mapped; the
	 * IPv4 options below apply to them), or IPv4 only where the kernel
	 * has no IPv6 */
	d->fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (d->fd < 0 ||
	    setsockopt(d->fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off))) {
		if (d->fd >= 0)
			close(d->fd);
		v6 = false;
		d->fd = socket(AF_INET,
			       SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	}
	ctx->ud_fwd_fd =
		socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (d->fd < 0 || ctx->ud_fwd_fd < 0)
		goto fail;
	setsockopt(d->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(d->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	setsockopt(d->fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	/* a datagram's destination says if it went to a group; and only
	 * the groups this listener joined reach it, not every group a
	 * socket of the host joined */
	if (setsockopt(d->fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one)) ||
	    setsockopt(d->fd, IPPROTO_IP, IP_MULTICAST_ALL, &(int){0},
		       sizeof(int)))
		goto fail;
	if (v6 ? bind(d->fd, (struct sockaddr *)&a6, sizeof(a6))
	       : bind(d->fd, (struct sockaddr *)&a, sizeof(a)))
		goto fail;
	ctx->udoor_st = d;
	sv_pfd_set(&ctx->udoor, door_event, false);
	sv_progress_add(ctx, &ctx->udoor, d->fd);
	goto out;
fail:
	err = errno;
	if (d && d->fd >= 0)
		close(d->fd);
	free(d);
	if (ctx->ud_fwd_fd >= 0)
		close(ctx->ud_fwd_fd);
	ctx->ud_fwd_fd = -1;
	ctx->udoor_failed = true;
	if (!atomic_exchange(&said, true))
		fprintf(stderr,
			"softverbs: UDP port %u: %s: datagrams from other "
			"hosts will not reach this process's UD QPs\n",
			sv_transport_port(), strerror(err));
out:
	pthread_mutex_unlock(&ctx->door_lock);
}

static bool door_pump(struct sv_context *ctx, struct sv_ud_door *d,
		      uint64_t now, bool live);

/* Takes the listener out of its port's SO_REUSEPORT group: the kernel
 * steers no datagram to a connected member, while what it queued stays
 * readable.  0, or -1 with errno. */
static int door_leave_group(struct sv_ud_door *d)
{
	union sv_sockaddr a;
	socklen_t len = sizeof(a);

	if (getsockname(d->fd, &a.sa, &len))
		return -1;
	if (a.sa.sa_family == AF_INET6)
		a.in6.sin6_addr = in6addr_loopback;
	else
		a.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return connect(d->fd, &a.sa, len);
}

/* Passes on all that d holds and has queued, a held datagram waiting
 * for room until end at most. */
static void door_drain(struct sv_context *ctx, struct sv_ud_door *d,
		       uint64_t end)
{
	struct timespec tick = {0, SV_UD_RETRY_TICK_NS};

	while (door_pump(ctx, d, sv_now_ns(), false) && sv_now_ns() < end)
		if (d->held)
			nanosleep(&tick, NULL);
}

void sv_ud_door_close(struct sv_context *ctx)
{
	struct sv_ud_door *d = ctx->udoor_st;

	/* the progress thread has stopped (its epoll is gone).  What the
	 * kernel gave our listener is other processes' QPs' too: passed on
	 * before it closes, waiting for a full QP socket as a sender does
	 * (SV_UD_HOLD_NS at most); only a process that is killed loses
	 * its listener's share, as a wire would.  First out of the port's
	 * group: the kernel picks no connected socket of it, so nothing
	 * more comes once the queue is drained (still in the group, a
	 * sender's next datagrams came after the last drain and went with
	 * the socket: a whole sender's 32 of ud_fan_in_8_processes under
	 * load).  Connected to our own port on loopback, whose source only
	 * a listener could be, and listeners never send. */
	if (d) {
		uint64_t end = sv_now_ns() + SV_UD_HOLD_NS;
		struct timespec tick = {0, SV_UD_RETRY_TICK_NS};

		if (door_leave_group(d))
			sv_dbg("udp: leaving the port's group: %s\n",
			       strerror(errno));
		door_drain(ctx, d, end);
		/* a datagram the kernel steered to us just before is
		 * queued after its lookup: one tick for it */
		nanosleep(&tick, NULL);
		door_drain(ctx, d, end);
		close(d->fd);
		free(d);
		ctx->udoor_st = NULL;
	}
	if (ctx->ud_fwd_fd >= 0)
		close(ctx->ud_fwd_fd);
	if (ctx->ud_tx_fd >= 0)
		close(ctx->ud_tx_fd);
	if (ctx->ud_tx6_fd >= 0)
		close(ctx->ud_tx6_fd);
	ctx->ud_fwd_fd = ctx->ud_tx_fd = ctx->ud_tx6_fd = -1;
}

/* Passes d's datagram (n bytes) to QP qpn's socket: 0 passed or lost
 * (no such QP), -1 when its socket is full. */
static int pass_to(struct sv_context *ctx, struct sv_ud_door *d, size_t n,
		   uint32_t qpn)
{
	struct sockaddr_un a;
	socklen_t alen = sv_link_qp_addr(&a, qpn);

	if (sendto(ctx->ud_fwd_fd, &d->d, n, MSG_DONTWAIT | MSG_NOSIGNAL,
		   (struct sockaddr *)&a, alen) >= 0)
		return 0;
	if (errno == EAGAIN || errno == ENOBUFS)
		return -1;
	sv_dbg("udp: datagram for %06x lost: %s\n", qpn, strerror(errno));
	return 0;
}

/* A datagram that arrived at the listener, n bytes in d: 0 passed on,
 * or dropped (malformed, bad CRC, no such QP: lost, as on a wire), -1
 * when the QP's socket is full.  One sent to a group goes to each QP of
 * this context attached to it (none: dropped), in QPN order, mc_next
 * remembering who has it. */
static int door_pass(struct sv_context *ctx, struct sv_ud_door *d, size_t n)
{
	uint32_t m[SV_MAX_MCAST_QP_ATTACH];
	int k;

	if (!IN_MULTICAST(ntohl(d->dst))) {
		uint32_t qpn = d->d.h.dst_qpn;

		if (pass_to(ctx, d, n, qpn)) {
			if (qpn != d->stalled)
				return -1;
			sv_dbg("udp: datagram for %06x lost: it is stalled\n",
			       qpn);
			return 0; /* its queue is full, as on a wire */
		}
		if (qpn == d->stalled)
			d->stalled = 0; /* it takes again */
		return 0;
	}
	k = sv_mcast_ctx_members(ctx, d->d.h.dgid, m, SV_MAX_MCAST_QP_ATTACH);
	if (k < 0)
		return -1; /* attach holds the list: a moment */
	for (int i = 0; i < k; i++) {
		if (m[i] < d->mc_next)
			continue;
		if (pass_to(ctx, d, n, m[i]))
			return -1;
		d->mc_next = m[i] + 1;
	}
	return 0;
}

/* Checks a datagram from the network (d->dst: where it was sent) and
 * makes it what the QP's socket takes: false to drop it.  Sent to a group
 * it must be a multicast (DQPN 0xffffff) with a GRH naming that group;
 * sent to us, not a multicast. */
static bool door_check(struct sv_ud_door *d, size_t n,
		       const union sv_sockaddr *src, socklen_t slen)
{
	bool mc = IN_MULTICAST(ntohl(d->dst));
	uint32_t crc, grp;

	if (n > sizeof(d->d) ||
	    (src->sa.sa_family != AF_INET && src->sa.sa_family != AF_INET6) ||
	    slen != sv_sockaddr_len(src) || !sv_ud_hdr_ok(&d->d.h, n) ||
	    (d->d.h.dst_qpn == SV_MCAST_QPN) != mc ||
	    d->d.h.dst_qpn > SV_PSN_MASK ||
	    (mc && (!(d->d.h.flags & SV_UD_GRH) ||
		    !sv_mcast_ipv4(d->d.h.dgid, &grp) || grp != d->dst))) {
		sv_dbg("udp: datagram dropped: malformed\n");
		return false;
	}
	crc = d->d.h.rsvd;
	d->d.h.rsvd = 0;
	/* with a MAC, its QP checks every bit (and counts what fails; this
	 * process may have no secret to check it with) */
	if (!(d->d.h.flags & SV_UD_MAC) && sv_crc32c(0, &d->d, n) != crc) {
		sv_dbg("udp: datagram for %06x dropped: bad CRC\n",
		       d->d.h.dst_qpn);
		return false;
	}
	d->d.h.flags |= SV_UD_NET; /* the QP asks a secret's proof of it */
	/* the sender's address is the IP header's, not its word (from
	 * this host, the GID it names: any of ours is the same host) */
	if (!(d->d.h.flags & SV_UD_GRH))
		return true;
	if (src->sa.sa_family == AF_INET6) {
		if (!IN6_IS_ADDR_LOOPBACK(&src->in6.sin6_addr))
			memcpy(d->d.h.sgid, &src->in6.sin6_addr, 16);
	} else if ((ntohl(src->in.sin_addr.s_addr) >> 24) != 127) {
		memset(d->d.h.sgid, 0, 10);
		d->d.h.sgid[10] = d->d.h.sgid[11] = 0xff;
		memcpy(&d->d.h.sgid[12], &src->in.sin_addr.s_addr, 4);
	}
	return true;
}

/* One datagram from the listener into d (its source in *src, an IPv4
 * one as AF_INET even on the dual-stack socket; d->dst where it was
 * sent): its length, or -1 when none is waiting. */
static ssize_t door_recv(struct sv_ud_door *d, union sv_sockaddr *src)
{
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(sizeof(struct in_pktinfo))];
	} u;
	struct iovec iov = {&d->d, sizeof(d->d)};
	struct msghdr m = {.msg_name = src,
			   .msg_namelen = sizeof(*src),
			   .msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	ssize_t n = recvmsg(d->fd, &m, MSG_DONTWAIT | MSG_TRUNC);

	d->dst = 0;
	d->mc_next = 0;
	d->slen = m.msg_namelen;
	if (n < 0)
		return -1;
	if (d->slen == sizeof(src->in6) && src->sa.sa_family == AF_INET6 &&
	    IN6_IS_ADDR_V4MAPPED(&src->in6.sin6_addr)) {
		struct sockaddr_in in = {.sin_family = AF_INET,
					 .sin_port = src->in6.sin6_port};

		memcpy(&in.sin_addr, &src->in6.sin6_addr.s6_addr[12], 4);
		memset(src, 0, sizeof(*src));
		src->in = in;
		d->slen = sizeof(in);
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO &&
		    c->cmsg_len >= CMSG_LEN(sizeof(struct in_pktinfo))) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			d->dst = pi.ipi_addr.s_addr;
		}
	return n;
}

/* Passes on what arrived: the held datagram first, then a bounded batch
 * (the rest wakes us again: the fd is level-triggered); never waits.
 * live: the progress thread runs (the listener goes out of its epoll
 * while a datagram is held).  false when all was taken. */
static bool door_pump(struct sv_context *ctx, struct sv_ud_door *d,
		      uint64_t now, bool live)
{
	if (d->held) {
		if (door_pass(ctx, d, d->held)) {
			if (now - d->since < SV_UD_HOLD_NS) {
				d->next_ns = now + SV_UD_RETRY_TICK_NS;
				return true;
			}
			sv_dbg("udp: datagram for %06x lost: its socket was "
			       "full "
			       "for %llu ms\n",
			       d->d.h.dst_qpn,
			       (unsigned long long)(now - d->since) / 1000000);
			if (!IN_MULTICAST(ntohl(d->dst)))
				d->stalled = d->d.h.dst_qpn;
		} else if (now - d->since > SV_UD_SLOW_NS) {
			sv_dbg("udp: datagram for %06x passed after %llu ms\n",
			       d->d.h.dst_qpn,
			       (unsigned long long)(now - d->since) / 1000000);
		}
		d->held = 0;
		if (live)
			sv_progress_add(ctx, &ctx->udoor, d->fd);
	}
	for (int i = 0; i < 64; i++) {
		union sv_sockaddr src;
		ssize_t n = door_recv(d, &src);

		if (n < 0)
			return false; /* EAGAIN: all taken */
		if (!door_check(d, (size_t)n, &src, d->slen))
			continue;
		if (door_pass(ctx, d, (size_t)n)) {
			/* the QP's socket is full: hold it, and the rest
			 * in the UDP socket's buffer */
			d->held = (uint32_t)n;
			d->since = now;
			d->next_ns = now + SV_UD_RETRY_TICK_NS;
			if (live)
				sv_progress_del(ctx, &ctx->udoor);
			return true;
		}
	}
	return true;
}

/* The listener's callback in the progress thread's loop: datagrams. */
static void door_event(struct sv_io *io, uint32_t revents)
{
	struct sv_context *ctx = container_of(io, struct sv_pfd, io)->ctx;

	(void)revents;
	if (ctx->udoor_st)
		door_pump(ctx, ctx->udoor_st, sv_now_ns(), true);
}

uint64_t sv_ud_door_next_ns(struct sv_context *ctx, uint64_t now)
{
	struct sv_ud_door *d = ctx->udoor_st;

	if (!d || !d->held)
		return UINT64_MAX;
	if (now >= d->next_ns)
		door_pump(ctx, d, now, true);
	return d->held ? d->next_ns : UINT64_MAX;
}

/* The interfaces an IPv4 group is joined on: every IPv4 one that is up
 * and does multicast, not lo; with SOFTVERBS_TRANSPORT=tcp (one host) lo
 * only.  Up to max ifindexes, each once. */
static int mcast_ifs(int *idx, int max)
{
	bool lo = sv_transport_mode() == SV_TRANSPORT_TCP;
	struct ifaddrs *ifs;
	int n = 0;

	if (getifaddrs(&ifs))
		return -errno;
	for (struct ifaddrs *i = ifs; i && n < max; i = i->ifa_next) {
		unsigned int k;
		int j;

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    !(i->ifa_flags & IFF_UP) ||
		    !!(i->ifa_flags & IFF_LOOPBACK) != lo ||
		    (!lo && !(i->ifa_flags & IFF_MULTICAST)))
			continue;
		k = if_nametoindex(i->ifa_name);
		for (j = 0; j < n && idx[j] != (int)k; j++)
			;
		if (k && j == n)
			idx[n++] = (int)k;
	}
	freeifaddrs(ifs);
	return n;
}

int sv_ud_mcast_join(struct sv_context *ctx, uint32_t grp, bool join)
{
	int idx[32], n, ok = 0, err = 0;

	pthread_mutex_lock(&ctx->door_lock);
	if (!ctx->udoor_st)
		goto out; /* no listener (shm only, or it failed: said) */
	n = mcast_ifs(idx, 32);
	if (n < 0)
		err = n;
	for (int i = 0; i < n; i++) {
		struct ip_mreqn m = {.imr_multiaddr.s_addr = grp,
				     .imr_ifindex = idx[i]};

		if (!setsockopt(ctx->udoor_st->fd, IPPROTO_IP,
				join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP,
				&m, sizeof(m)))
			ok++;
		else
			err = -errno; /* ENOBUFS: igmp_max_memberships */
	}
	if (ok || !join || n == 0)
		err = 0; /* no interface: the group is this host's */
out:
	pthread_mutex_unlock(&ctx->door_lock);
	if (err)
		sv_dbg("udp: joining group %08x: %s\n", ntohl(grp),
		       strerror(-err));
	return err;
}
