// SPDX-License-Identifier: MIT
/*
 * Queue pairs: creation (classic and extended), the state machine's
 * effects (modify_qp: connect at RTR, PSNs at RTS, flush at ERR), query,
 * destroy with flush.  The error transition is engine/qp_error.c, the
 * flush core/flush.c; the transition rules themselves live in qp_state.c;
 * the send/receive posting in post.c; the engine in req.c, resp.c,
 * comp.c; the attributes' checks and query in qp_attr.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine.h"
#include "env.h"
#include "inject.h"
#include "link.h"
#include "pcap.h"
#include "progress.h"
#include "qp_attr.h"
#include "qp_state.h"
#include "rmem.h"
#include "roce_link.h"
#include "stat.h"
#include "transport.h"
#include "verbs.h"

/* SOFTVERBS_RING_KB, rounded up to a power of two. */
static uint64_t ring_size(void)
{
	return sv_roundup_pow2((uint32_t)sv_env_uint(SV_ENV_RING_KB)) * 1024ull;
}

/*
 * SOFTVERBS_SUBNET: a LID of another host is reached as its address's
 * GID would be, from our own address there (the peer checks it: the
 * address its AV names).  *a is the QP's AV, or in *g that GID.
 */
static const struct ibv_ah_attr *lid_route(const struct ibv_ah_attr *a,
					   struct ibv_ah_attr *g,
					   union sv_sockaddr *src)
{
	struct in_addr dst, self;

	if (a->is_global || !sv_lid_ipv4(a->dlid, &dst))
		return a;
	*g = *a;
	g->is_global = 1;
	memset(&g->grh.dgid, 0, sizeof(g->grh.dgid));
	g->grh.dgid.raw[10] = g->grh.dgid.raw[11] = 0xff;
	memcpy(&g->grh.dgid.raw[12], &dst, 4);
	if (sv_subnet_self(&self)) {
		src->in.sin_family = AF_INET;
		src->in.sin_addr = self;
	}
	return g;
}

/*
 * Where a link goes, and its transport (sv_transport_for): the address
 * decides — a GID of another host (or a LID of one, SOFTVERBS_SUBNET) is
 * reached over the network, anything of this host (LID, or a GID in our
 * table) over shared memory — unless SOFTVERBS_TRANSPORT says (tcp: this
 * host too, at the GID's address or 127.0.0.1).  sv_av_check refused
 * what neither can reach.  *dst and *src are for a network transport.
 */
static const struct sv_link_ops *link_route(const struct sv_qp *qp,
					    union sv_sockaddr *dst,
					    union sv_sockaddr *src)
{
	struct ibv_ah_attr by_lid;
	const struct ibv_ah_attr *a = &qp->attr.ah_attr;
	bool local;
	const struct sv_link_ops *ops;
	uint16_t port = sv_transport_connect_port();

	memset(src, 0, sizeof(*src)); /* AF_UNSPEC: the kernel's choice */
	if (!a->is_global) {
		a = lid_route(a, &by_lid, src);
	} else { /* the IP source is the source GID's, as RoCE */
		union ibv_gid g;

		if (sv_query_gid((struct ibv_context *)&qp->ctx->vctx.context,
				 1, a->grh.sgid_index, &g) ||
		    !sv_gid_sockaddr(&g, 0, src))
			memset(src, 0, sizeof(*src));
	}
	local = !a->is_global || sv_gid_is_local(&a->grh.dgid);
	/* softverbs_roce0: RoCEv2 to every peer, whatever the variable */
	ops = sv_ctx_is_roce(&qp->ctx->vctx.context) ? &sv_roce_link_ops
						     : sv_transport_for(local);
	if (a->is_global && sv_gid_sockaddr(&a->grh.dgid, port, dst))
		return ops;	      /* IPv4 or IPv6 */
	memset(dst, 0, sizeof(*dst)); /* LID or our link-local GID */
	dst->in.sin_family = AF_INET;
	dst->in.sin_port = htons(port);
	dst->in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return ops;
}

/* SOFTVERBS_PCAP: the addresses the QP's packets show (pcap.c): the
 * GIDs of its path, ::ffff:127.0.0.1 for one it does not have. */
static void pcap_addr(struct sv_qp *qp)
{
	static const uint8_t lo[16] = {0, 0, 0,	   0,	 0,   0, 0, 0,
				       0, 0, 0xff, 0xff, 127, 0, 0, 1};
	const struct ibv_ah_attr *a = &qp->attr.ah_attr;
	struct sv_pcap_addr *p = &qp->pcap.addr;
	struct ibv_ah_attr by_lid;
	union sv_sockaddr s = {.in.sin_family = AF_UNSPEC};
	union ibv_gid g;
	uint32_t x = qp->qpx.qp_base.qp_num, y = qp->attr.dest_qp_num;

	memcpy(p->src, lo, 16);
	memcpy(p->dst, lo, 16);
	if (lid_route(a, &by_lid, &s) != a) { /* SOFTVERBS_SUBNET */
		if (s.in.sin_family == AF_INET)
			memcpy(&p->src[12], &s.in.sin_addr, 4);
		memcpy(p->dst, by_lid.grh.dgid.raw, 16);
	} else if (a->is_global) {
		if (!sv_query_gid(&qp->ctx->vctx.context, 1, a->grh.sgid_index,
				  &g))
			memcpy(p->src, g.raw, 16);
		memcpy(p->dst, a->grh.dgid.raw, 16);
	}
	/* RoCE's entropy: one port per QP pair, the same both ways */
	x = (x < y ? x : y) * 0x9e3779b1u ^ (x < y ? y : x);
	p->sport = (uint16_t)(0xc000 | (x >> 18));
	qp->pcap.psn_off = 0;
	qp->pcap.rx_valid = false;
	qp->pcap.msn = 0;
}

/* At RTR: the link's resources now, and a first connect.  -errno, and the
 * QP stays as it was. */
static int link_start(struct sv_qp *qp)
{
	struct ibv_pd *pd = qp->qpx.qp_base.pd;
	union sv_sockaddr dst, src;
	struct sv_link_conf c = {
		.ctx = qp->ctx,
		.my_qpn = qp->qpx.qp_base.qp_num,
		.peer_qpn = qp->attr.dest_qp_num,
		.ring_size = ring_size(),
		/* receive descriptors for single-copy sends, one per RQ
		 * slot (on an SRQ, per WQE it may hold lent: srq.c lend);
		 * UC drops messages: the sender could not know which
		 * receive a send takes */
		.ndesc = sv_single_copy_min() == UINT32_MAX ||
					 qp->qpx.qp_base.qp_type != IBV_QPT_RC
				 ? 0
				 : qp->rq.size,
		/* our registered memory, for the peer's one-sided
		 * operations; without it they reach our responder (always,
		 * for XRC_RECV: the PD is each SRQ's) */
		.pd_id = pd ? to_spd(pd)->id : 0,
		.share_mem = pd != NULL,
		.dst = &dst,
		.src = &src,
		.pfd_conn = &qp->pfd[1],
		.pfd_acc = &qp->pfd[2],
		.stats = &qp->stats,
		.mtu = qp->mtu,
		.rq_psn = qp->attr.rq_psn,
		.uc = qp->qpx.qp_base.qp_type == IBV_QPT_UC,
		.xrc = qp->qpx.qp_base.qp_type == IBV_QPT_XRC_SEND ||
		       qp->qpx.qp_base.qp_type == IBV_QPT_XRC_RECV,
		.flow_label =
			qp->attr.ah_attr.is_global
				? qp->attr.ah_attr.grh.flow_label & 0xfffff
				: 0,
	};
	const struct sv_link_ops *ops = link_route(qp, &dst, &src);
	int err;

	/* a link that may idle (TCP): the polls of its CQs ask their
	 * readiness sets which links have bytes waiting (cq.c drive) */
	if (ops->idle && qp->scq)
		atomic_store(&qp->scq->links_idle, true);
	if (ops->idle && qp->rcq)
		atomic_store(&qp->rcq->links_idle, true);
	qp->link.state = SV_LINK_CONNECTING;
	err = sv_link_prepare(&qp->link, ops, &c);
	if (err) {
		char what[64];

		snprintf(what, sizeof(what), "modify to RTR (%s)", ops->name);
		sv_qp_link_error(qp, what, err);
		return err;
	}
	/* those posted in INIT (when the transport has descriptors) */
	sv_rq_describe(qp, qp->rq.comp);
	return 0;
}

/* Back to the state of a new QP (IBA 10.3.1: RESET drops all WRs). */
static void reset_qp(struct sv_qp *qp)
{
	if (qp->link.state != SV_LINK_IDLE)
		sv_qp_link_close(qp, true);
	qp->sq.post = qp->sq.send = qp->sq.comp = 0;
	qp->rq.post = qp->rq.comp = qp->rq.held = 0;
	qp->resp.off = qp->resp.msg = 0;
	qp->resp.rnr = qp->resp.in_msg = qp->resp.drop = false;
	qp->sq.stopped = false;
	qp->comp.ack = SV_ACK_NONE;
	qp->comp.deadline = 0;
	qp->comp.retries = qp->comp.rnr_retries = 0;
	qp->comp.rnr_wait = false;
	qp->comp.acked_valid = false;
	qp->req.rd_out = qp->req.ring_rdma = qp->req.recv_msgs = 0;
	qp->resp.wr_ptr = NULL;
	qp->resp.rd_sent = 0;
	qp->xrc.retry_ns = 0;
	qp->resp.seq_naked = false;
	qp->inject.try = qp->inject.rnr_try = 0;
	qp->inject.rnr_until = 0;
	sv_comp_fault_free(qp); /* delay_us's held responses */
	memset(qp->resp.atom_replay, 0, sizeof(qp->resp.atom_replay));
	if (qp->qpx.qp_base.qp_type == IBV_QPT_XRC_RECV)
		sv_xrc_unbind(qp);
	memset(&qp->attr, 0, sizeof(qp->attr));
}

/*
 * Before the program moves a connected QP to ERR: what the peer had
 * acknowledged and what had arrived by then completes as it would have
 * on an HCA, which makes those completions as ACKs and packets arrive,
 * not when the program next polls; only the rest is flushed.  (A peer
 * that sent its last message and closed at once — fi_pingpong's RDM
 * finalize over ofi_rxm — saw our ACKed send flushed.)
 */
static void settle(struct sv_qp *qp)
{
	uint64_t now = sv_now_ns();

	if (qp->attr.qp_state < IBV_QPS_RTR ||
	    qp->attr.qp_state == IBV_QPS_ERR || qp->link.state == SV_LINK_IDLE)
		return;
	sv_qp_link_run(qp, now); /* a link that runs: what arrived, into
				  * the rings */
	if (qp->attr.qp_state != IBV_QPS_ERR)
		sv_comp_run(qp, now);
	if (qp->attr.qp_state != IBV_QPS_ERR)
		sv_resp_run(qp);
}

/* -errno with the QP left in cur (IBA 11.2.1.2: a failed modify changes
 * nothing); EACCES when the destination's socket is another user's. */
static int enter_state(struct sv_qp *qp, enum ibv_qp_state next)
{
	enum ibv_qp_state cur = qp->attr.qp_state;
	int err;

	if (qp->qpx.qp_base.qp_type == IBV_QPT_UD) {
		/* no link: the socket takes datagrams from create on */
		if (next == IBV_QPS_ERR) {
			sv_qp_to_error(qp, 0);
			return 0;
		}
		if (next == IBV_QPS_RESET)
			reset_qp(qp);
		qp->qpx.qp_base.state = next;
		qp->attr.qp_state = next;
		return 0;
	}
	switch (next) {
	case IBV_QPS_RESET:
		reset_qp(qp);
		break;
	case IBV_QPS_RTR:
		if (cur == IBV_QPS_INIT) {
			if (sv_pcap_on)
				pcap_addr(qp);
			err = link_start(qp);
			if (err)
				goto err_link;
			qp->comp.ack = SV_ACK_NONE;
		}
		break;
	case IBV_QPS_ERR:
		settle(qp);
		if (qp->attr.qp_state != IBV_QPS_ERR) /* else the run did it */
			sv_qp_to_error(qp, 0);
		return 0;
	default:
		break;
	}
	qp->qpx.qp_base.state = next;
	qp->attr.qp_state = next;
	if (next >= IBV_QPS_RTR && next <= IBV_QPS_SQE) {
		err = sv_qp_link_connect(qp);
		if (err && cur == IBV_QPS_INIT) {
			qp->qpx.qp_base.state = cur;
			qp->attr.qp_state = cur;
			goto err_link;
		}
		if (err)
			sv_qp_to_error(qp, IBV_EVENT_QP_FATAL);
		else if (qp->link.state == SV_LINK_CONNECTING &&
			 sv_link_next_ns(&qp->link, 0) != UINT64_MAX)
			sv_qp_note_work(qp, sv_link_next_ns(&qp->link, 0));
		/* (its retry timer) */
	}
	return 0;

err_link:
	sv_qp_link_close(qp, false);
	return err;
}

int sv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct sv_qp *qp = to_sqp(ibqp);
	enum ibv_qp_state cur, next;
	int err;

	mask = sv_qp_mask_heeded(ibqp->qp_type, mask);
	sv_lock(&qp->lock);
	cur = qp->attr.qp_state; /* the engine's: ERROR may have come */
	next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state <= IBV_QPS_ERR)
		cur = attr->cur_qp_state == cur ? cur : IBV_QPS_ERR + 1;
	if (!sv_qp_mask_ok(ibqp->qp_type, cur, next, mask)) {
		err = EINVAL;
		goto out;
	}
	err = sv_qp_check_attr(qp, attr, mask);
	if (err)
		goto out;
	sv_qp_store_attr(qp, attr, mask);
	err = -enter_state(qp, next);
	/* the program's copy is what it asked for (libibverbs does so);
	 * the engine's may have gone on to ERROR meanwhile */
	if (!err && (mask & IBV_QP_STATE))
		ibqp->state = next;
	if (!err && qp->link.rx_ready)
		/* what the peer may do in our memory by itself (req.c) */
		atomic_store_explicit(&qp->link.rx.hdr->qp_access,
				      (uint32_t)qp->attr.qp_access_flags,
				      memory_order_release);
out:
	sv_unlock(&qp->lock);
	if (err)
		sv_dbg("modify_qp %06x: %s -> %s mask 0x%x: %s\n", ibqp->qp_num,
		       sv_qp_state_names[qp->attr.qp_state],
		       (mask & IBV_QP_STATE) && attr->qp_state <= IBV_QPS_ERR
			       ? sv_qp_state_names[attr->qp_state]
			       : "?",
		       mask, strerror(err));
	return err;
}

/* The queues' buffers, from the parent domain's allocator if the QP's PD
 * is one with an allocator (domain.c); bit i of buf_custom for free_queues'
 * bufs[i].  0 or -errno (ENOMEM, or EINVAL from a misaligned alloc). */
static int alloc_bufs(struct sv_qp *qp)
{
	struct ibv_pd *pd = qp->qpx.qp_base.pd;
	bool c;

	qp->sq.wqe = sv_dom_alloc(pd, qp->sq.size, sizeof(*qp->sq.wqe),
				  SV_RES_QP, &c);
	if (!qp->sq.wqe)
		return -errno;
	qp->buf_custom |= (uint8_t)c;
	qp->sq.sge = sv_dom_alloc(pd, (size_t)qp->sq.size * qp->max_send_sge,
				  sizeof(*qp->sq.sge), SV_RES_QP, &c);
	if (!qp->sq.sge)
		return -errno;
	qp->buf_custom |= (uint8_t)(c << 1);
	if (qp->max_inline) {
		qp->sq.inline_buf = sv_dom_alloc(pd, qp->sq.size,
						 qp->max_inline, SV_RES_QP, &c);
		if (!qp->sq.inline_buf)
			return -errno;
		qp->buf_custom |= (uint8_t)(c << 2);
	}
	qp->rq.wqe = sv_dom_alloc(pd, qp->rq.size, sizeof(*qp->rq.wqe),
				  SV_RES_QP, &c);
	if (!qp->rq.wqe)
		return -errno;
	qp->buf_custom |= (uint8_t)(c << 3);
	qp->rq.sge = sv_dom_alloc(pd, (size_t)qp->rq.size * qp->max_recv_sge,
				  sizeof(*qp->rq.sge), SV_RES_QP, &c);
	if (!qp->rq.sge)
		return -errno;
	qp->buf_custom |= (uint8_t)(c << 4);
	return 0;
}

/* On an SRQ the RQ is one slot of the SRQ's SGEs: the WQE the responder
 * took (srq.c); max_recv_wr and max_recv_sge are ignored.  XRC_RECV has
 * no SQ and that one slot, for any SRQ's WQE; XRC_SEND has no RQ. */
static int alloc_queues(struct sv_qp *qp, enum ibv_qp_type type,
			const struct ibv_qp_cap *cap)
{
	static const struct ibv_qp_cap xrc_recv = {.max_recv_sge =
							   SV_MAX_SRQ_SGE};
	bool no_rq =
		qp->srq || type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV;

	if (type == IBV_QPT_XRC_RECV)
		cap = &xrc_recv;
	qp->sq.max = cap->max_send_wr;
	qp->rq.max = no_rq ? 0 : cap->max_recv_wr;
	qp->sq.size = sv_roundup_pow2(cap->max_send_wr ? cap->max_send_wr : 1);
	qp->rq.size = sv_roundup_pow2(qp->rq.max ? qp->rq.max : 1);
	if (qp->srq && type == IBV_QPT_RC) { /* WQEs lent for single copy */
		uint32_t n;

		/* its slots now (a resize holds the lock); a later growth
		 * does not change this QP's */
		sv_lock(&qp->srq->lock);
		n = qp->srq->size;
		sv_unlock(&qp->srq->lock);
		qp->rq.size = n > SV_SRQ_LEND	    ? SV_SRQ_LEND
			      : n < SV_SRQ_LEND_MIN ? SV_SRQ_LEND_MIN
						    : n;
	}
	qp->max_send_sge = cap->max_send_sge ? cap->max_send_sge : 1;
	qp->max_recv_sge = qp->srq	       ? qp->srq->max_sge
			   : cap->max_recv_sge ? cap->max_recv_sge
					       : 1;
	/* What we can always carry inline, rounded up as hardware does: a
	 * request of 0 still gets the room of its SGEs (16 bytes each, as
	 * rxe's WQE; mlx5 gives more), which programs that post
	 * IBV_SEND_INLINE without asking (rdma_xclient) rely on.  No SQ
	 * (XRC_RECV), none. */
	if (cap->max_inline_data)
		qp->max_inline = SV_MAX_INLINE;
	else if (type == IBV_QPT_XRC_RECV)
		qp->max_inline = 0;
	else
		qp->max_inline = qp->max_send_sge * sizeof(struct ibv_sge);
	return alloc_bufs(qp);
}

static void free_queues(struct sv_qp *qp)
{
	struct ibv_pd *pd = qp->qpx.qp_base.pd;
	void *bufs[] = {qp->sq.wqe, qp->sq.sge, qp->sq.inline_buf, qp->rq.wqe,
			qp->rq.sge};

	for (unsigned int i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		sv_dom_free(pd, bufs[i], SV_RES_QP, qp->buf_custom & (1u << i));
	qp->buf_custom = 0;
	qp->sq.wqe = NULL;
	qp->rq.wqe = NULL;
	qp->sq.sge = qp->rq.sge = NULL;
	qp->sq.inline_buf = NULL;
}

static void zero(void *from, void *to)
{
	memset(from, 0, (size_t)((uint8_t *)to - (uint8_t *)from));
}

/*
 * QPs are type-stable: a destroyed QP goes on the context's free list, not
 * back to malloc, because a poller may still be driving it from a CQ's
 * QP set, which it reads without a lock (cq.c).  Such a poller finds it
 * in RESET and does nothing.
 */
static struct sv_qp *qp_get(struct sv_context *ctx)
{
	struct sv_qp *qp;

	pthread_rwlock_wrlock(&ctx->qp_lock);
	qp = ctx->qp_free;
	if (qp)
		ctx->qp_free = qp->next_free;
	pthread_rwlock_unlock(&ctx->qp_lock);
	if (!qp)
		return calloc(1, sizeof(*qp)); /* zero: RESET */
	/* A late poller may still drive it: it touches drives and lock, and
	 * the state only under the lock; the progress thread reads listed
	 * for an event of its old fds.  So those keep their words (no plain
	 * store under an atomic one; listed is false already) and the rest
	 * is zeroed under the lock: RESET, which the poller sees and
	 * leaves. */
	sv_lock(&qp->lock);
	zero(qp, &qp->lock);
	zero(&qp->lock + 1, &qp->listed);
	zero(&qp->prog.drives + 1, qp + 1);
	qp->qpx.qp_base.state = IBV_QPS_RESET;
	sv_unlock(&qp->lock);
	return qp;
}

/* UD over RoCEv2 (transport/ud/roce_ud.c): softverbs_roce0's UD QPs,
 * and every one with SOFTVERBS_TRANSPORT=roce; sends longer than the
 * port's active MTU go nowhere (IBA C10-93.1.1). */
static void ud_roce_init(struct sv_qp *qp, struct ibv_context *c)
{
	struct ibv_port_attr pa;

	qp->ud.roce_fd = -1;
	qp->ud.roce_mtu = SV_UD_MTU;
	qp->ud.roce =
		sv_ctx_is_roce(c) || sv_transport_mode() == SV_TRANSPORT_ROCE;
	if (sv_ctx_is_roce(c) && !sv_roce_query_port(1, &pa, sizeof(pa)))
		qp->ud.roce_mtu = 128u << pa.active_mtu;
}

/* Caller holds ctx->qp_lock for writing.  The QP no longer counts
 * against max_qp. */
static void qp_put(struct sv_context *ctx, struct sv_qp *qp)
{
	sv_obj_put(ctx, SV_OBJ_QP);
	free_queues(qp);
	sv_comp_fault_free(qp);
	sv_lanes_rx_close(qp); /* UD: its senders see CLOSED (lane.c) */
	free(qp->ud.replay);   /* UD: its senders' windows (ud/mac.c) */
	qp->ud.replay = NULL;
	if (qp->ud.roce && qp->ud.roce_fd >= 0)
		close(qp->ud.roce_fd); /* UD over RoCEv2 (ud/roce_ud.c) */
	qp->ud.roce = false;
	qp->qpx.qp_base.state = IBV_QPS_RESET;
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->dead = true;
	qp->next_free = ctx->qp_free;
	ctx->qp_free = qp;
}

void sv_qp_free_all(struct sv_context *ctx)
{
	while (ctx->qp_free) {
		struct sv_qp *qp = ctx->qp_free;

		ctx->qp_free = qp->next_free;
		free(qp);
	}
}

void sv_qp_close_all(struct sv_context *ctx)
{
	pthread_rwlock_wrlock(&ctx->qp_lock);
	while (!sv_list_empty(&ctx->qps)) {
		struct sv_qp *qp =
			container_of(ctx->qps.next, struct sv_qp, ctx_node);

		sv_list_del(&qp->ctx_node);
		atomic_store_explicit(&qp->listed, false, memory_order_relaxed);
		sv_progress_del(ctx, &qp->pfd[0]);
		sv_mcast_detach_all(qp);
		sv_lock(&qp->lock);
		/* its peer hears BYE, or the hang-up if it was dead */
		if (qp->link.state != SV_LINK_IDLE)
			sv_qp_link_close(qp, qp->link.state != SV_LINK_DEAD);
		sv_link_close(&qp->link, qp->qpx.qp_base.qp_num, false);
		sv_link_unbind(&qp->link);
		if (qp->qpx.qp_base.qp_type == IBV_QPT_XRC_RECV) {
			sv_xrc_unbind(qp);
			sv_xrc_qp_del(qp);
			atomic_fetch_sub(&qp->xrc.xrcd->users, 1);
		}
		if (qp->xrc.sock >= 0)
			close(qp->xrc.sock);
		free(qp->xrc.buf);
		qp->xrc.buf = NULL;
		qp_put(ctx, qp);
		sv_unlock(&qp->lock);
	}
	pthread_rwlock_unlock(&ctx->qp_lock);
}

/* The verbs' view of a new QP (RESET since qp_get, under its lock). */
static void fill_ibqp(struct ibv_qp *ibqp, struct ibv_context *c,
		      const struct ibv_qp_init_attr_ex *a, uint32_t qpn)
{
	ibqp->context = c;
	ibqp->qp_context = a->qp_context;
	ibqp->pd = a->pd;
	ibqp->send_cq = a->send_cq;
	ibqp->recv_cq = a->recv_cq;
	ibqp->srq = a->srq;
	ibqp->handle = qpn;
	ibqp->qp_num = qpn; /* state: RESET since qp_get, under its lock */
	ibqp->qp_type = a->qp_type;
	pthread_mutex_init(&ibqp->mutex, NULL);
	pthread_cond_init(&ibqp->cond, NULL);
}

/* What a new QP holds: its PD, SRQ and XRC domain stay while it lives. */
static void take_refs(struct sv_qp *qp, const struct ibv_qp_init_attr_ex *a)
{
	if (a->pd)
		sv_pd_hold(a->pd);
	if (qp->srq)
		atomic_fetch_add(&qp->srq->users, 1);
	if (qp->xrc.xrcd) {
		atomic_fetch_add(&qp->xrc.xrcd->users, 1);
		sv_xrc_qp_add(qp);
	}
}

/* Report what we give, as hardware does. */
static void report_caps(const struct sv_qp *qp, struct ibv_qp_cap *cap)
{
	cap->max_send_sge = qp->max_send_sge;
	cap->max_recv_sge = qp->srq ? 0 : qp->max_recv_sge;
	if (qp->srq)
		cap->max_recv_wr = 0;
	cap->max_inline_data = qp->max_inline;
}

/* The QP's fds in the loop, with their callbacks: listener (or UD's
 * datagram socket), our connection (the doorbell), the peer's (hang-up). */
static void init_pfds(struct sv_qp *qp, enum ibv_qp_type type)
{
	for (int i = 0; i < 3; i++) {
		/* field by field: a stale event may be read for this slot */
		sv_pfd_set(&qp->pfd[i],
			   i == 0 && type == IBV_QPT_UD ? sv_qp_on_ud
			   : i == 0			? sv_qp_on_listen
			   : i == 1			? sv_qp_on_doorbell
							: sv_qp_on_conn,
			   i != 2);
		qp->pfd[i].fd = -1;
		qp->pfd[i].qp = qp;
		qp->pfd[i].srq = NULL;
		atomic_store(&qp->pfd[i].rung, false);
		qp->pfd[i].quiet = false;
		qp->pfd[i].out = false;
	}
	/* a caller's connection whose hello is still coming (link.c):
	 * its hello steps the link as the listener's event does */
	for (int i = 0; i < SV_LINK_PENDING; i++) {
		sv_pfd_set(&qp->pend_pfd[i], sv_qp_on_listen, true);
		qp->pend_pfd[i].fd = -1;
		qp->pend_pfd[i].qp = qp;
		qp->pend_pfd[i].srq = NULL;
	}
	qp->link.pend_pfd = qp->pend_pfd;
}

static struct ibv_qp *create_qp(struct ibv_context *c,
				struct ibv_qp_init_attr_ex *a)
{
	struct sv_context *ctx = to_sctx(c);
	struct ibv_qp *ibqp;
	struct sv_qp *qp;
	uint32_t qpn;
	int err;

	err = sv_qp_check_init_attr(c, a);
	if (err)
		goto err_out;
	err = -sv_obj_get(ctx, SV_OBJ_QP); /* max_qp live: EINVAL */
	if (err)
		goto err_out;
	qp = qp_get(ctx);
	if (!qp) {
		sv_obj_put(ctx, SV_OBJ_QP);
		err = ENOMEM;
		goto err_out;
	}
	qp->srq = a->srq ? to_ssrq(a->srq) : NULL;
	sv_list_init(&qp->srq_node);
	qp->xrc.sock = -1;
	qp->inject.idx = sv_inject_qp_index();
	/* the PD whose allocator makes the queues (and frees them in
	 * qp_put); XRC_RECV has none, a->pd may be anything */
	qp->qpx.qp_base.pd = a->qp_type == IBV_QPT_XRC_RECV ? NULL : a->pd;
	err = -alloc_queues(qp, a->qp_type, &a->cap);
	if (err)
		goto err_free;
	sv_link_init(&qp->link);
	init_pfds(qp, a->qp_type);
	/* the QPN is a socket's name: a listener, or UD's datagram socket */
	err = a->qp_type == IBV_QPT_UD
		      ? -sv_ud_bind(&qp->link, &qpn)
		      : -sv_link_bind(&qp->link, SV_LINK_SOCK, &qpn);
	if (err)
		goto err_free;
	qp->ctx = ctx;
	qp->link.ctx = ctx; /* whose loop watches its callers (link.c) */
	if (a->qp_type == IBV_QPT_UD)
		sv_ud_door_open(ctx); /* datagrams from other hosts */
	if (a->qp_type == IBV_QPT_XRC_RECV) {
		/* its receives complete on each message's SRQ's CQ */
		a->pd = NULL;
		a->send_cq = a->recv_cq = NULL;
		qp->xrc.xrcd = to_sxrcd(a->xrcd);
	} else if (a->qp_type == IBV_QPT_XRC_SEND) {
		a->recv_cq = NULL;
	}
	qp->scq = a->send_cq ? to_scq(a->send_cq) : NULL;
	qp->rcq = a->recv_cq ? to_scq(a->recv_cq) : NULL;
	qp->sq.sig_all = a->sq_sig_all;
	qp->ud.mcast_block_self =
		(a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
		(a->create_flags & IBV_QP_CREATE_BLOCK_SELF_MCAST_LB);
	if (a->qp_type == IBV_QPT_UD)
		ud_roce_init(qp, c);

	ibqp = &qp->qpx.qp_base;
	fill_ibqp(ibqp, c, a, qpn);

	pthread_rwlock_wrlock(&ctx->qp_lock);
	if (sv_cq_attach_qp(qp)) {
		pthread_rwlock_unlock(&ctx->qp_lock);
		err = ENOMEM;
		goto err_close;
	}
	sv_list_add_tail(&ctx->qps, &qp->ctx_node);
	atomic_store_explicit(&qp->listed, true, memory_order_relaxed);
	pthread_rwlock_unlock(&ctx->qp_lock);
	sv_progress_add(ctx, &qp->pfd[0], qp->link.listen_fd);
	take_refs(qp, a);

	report_caps(qp, &a->cap);
	return ibqp;

err_close:
	sv_link_close(&qp->link, qpn, false);
	sv_link_unbind(&qp->link);
err_free:
	pthread_rwlock_wrlock(&ctx->qp_lock);
	qp_put(ctx, qp);
	pthread_rwlock_unlock(&ctx->qp_lock);
err_out:
	errno = err;
	return NULL;
}

struct ibv_qp *sv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ex;
	struct ibv_qp *qp;

	memset(&ex, 0, sizeof(ex));
	memcpy(&ex, attr, sizeof(*attr));
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd;
	qp = create_qp(pd->context, &ex);
	if (qp)
		attr->cap = ex.cap;
	return qp;
}

struct ibv_qp *sv_create_qp_ex(struct ibv_context *c,
			       struct ibv_qp_init_attr_ex *a)
{
	struct ibv_qp *ibqp;
	int err;

	if (a->comp_mask &
	    ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
			IBV_QP_INIT_ATTR_CREATE_FLAGS |
			IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* the one create flag we have: no multicast loopback (mcast.c) */
	if ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
	    (a->create_flags & ~(uint32_t)IBV_QP_CREATE_BLOCK_SELF_MCAST_LB)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* XRC_RECV has no PD (its SRQs have); every other type needs one */
	if (a->qp_type != IBV_QPT_XRC_RECV &&
	    (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd)) {
		errno = EINVAL;
		return NULL;
	}
	if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		err = sv_qp_ex_check_ops(a->qp_type, a->send_ops_flags);
		if (err) {
			errno = err;
			return NULL;
		}
	}
	ibqp = create_qp(c, a);
	if (ibqp && (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		sv_qp_init_ex_ops(to_sqp(ibqp), a->send_ops_flags);
	return ibqp;
}

struct ibv_qp_ex *sv_qp_to_qp_ex(struct ibv_qp *qp)
{
	return &to_sqp(qp)->qpx;
}

/* An XRC_RECV QP opened more than once (ibv_open_qp) loses one handle;
 * true if that was not the last. */
static bool xrc_close_handle(struct sv_qp *qp)
{
	bool more;

	if (qp->qpx.qp_base.qp_type != IBV_QPT_XRC_RECV)
		return false;
	sv_lock(&qp->lock);
	more = --qp->xrc.opens > 0;
	sv_unlock(&qp->lock);
	if (!more)
		sv_xrc_qp_del(qp);
	return more;
}

int sv_destroy_qp(struct ibv_qp *ibqp)
{
	struct sv_qp *qp = to_sqp(ibqp);
	struct sv_context *ctx = qp->ctx;
	/* qp may be reused after put */
	struct ibv_pd *pd = ibqp->pd;
	struct sv_srq *srq;
	struct sv_xrcd *xrcd = qp->xrc.xrcd;

	if (xrc_close_handle(qp))
		return 0;
	/* unhook first: no poller or progress thread can reach it after */
	pthread_rwlock_wrlock(&ctx->qp_lock);
	sv_list_del(&qp->ctx_node);
	atomic_store_explicit(&qp->listed, false, memory_order_relaxed);
	sv_cq_detach_qp(qp); /* O(1): it knows its slots (cq.c) */
	sv_progress_del(ctx, &qp->pfd[0]);
	sv_mw_qp_gone(ctx, ibqp->qp_num); /* its type 2 windows (mw.c) */
	sv_lock(&qp->lock);
	/* what already arrived and has a receive is taken and ACKed first,
	 * as an HCA has done by then: a peer's send that overshot our last
	 * poll (ibv_srq_pingpong's many QPs) does not fail for our exit */
	sv_resp_run(qp);
	/* outstanding work ends without completions, and none of this QP
	 * is left in its CQs for the program to poll after we return, as
	 * mlx4/mlx5 clean their CQs at destroy: a program may free each
	 * WR's context with the QP (libfabric's rxm does, and crashed on
	 * a flushed receive polled later) */
	qp->destroying = true;
	if (qp->attr.qp_state != IBV_QPS_RESET)
		sv_qp_to_error(qp, 0);
	if (qp->link.state != SV_LINK_IDLE)
		sv_qp_link_close(qp, true);
	if (qp->scq)
		sv_cq_clean(qp->scq, ibqp->qp_num);
	if (qp->rcq && qp->rcq != qp->scq && ibqp->qp_type != IBV_QPT_XRC_RECV)
		sv_cq_clean(qp->rcq, ibqp->qp_num);
	/* an SRQ of its own (an XRC_RECV QP's bound one went in to_error) */
	srq = ibqp->qp_type == IBV_QPT_XRC_RECV ? NULL : qp->srq;
	if (ibqp->qp_type == IBV_QPT_XRC_RECV)
		sv_xrc_unbind(qp);
	if (qp->xrc.sock >= 0)
		close(qp->xrc.sock);
	qp->xrc.sock = -1;
	free(qp->xrc.buf);
	qp->xrc.buf = NULL;
	qp->xrc.cap = 0;
	sv_unlock(&qp->lock);
	pthread_rwlock_unlock(&ctx->qp_lock);

	sv_async_forget(ctx, ibqp);
	pthread_mutex_lock(&ibqp->mutex);
	while (ibqp->events_completed != qp->async_got)
		pthread_cond_wait(&ibqp->cond, &ibqp->mutex);
	pthread_mutex_unlock(&ibqp->mutex);

	sv_mcast_detach_all(qp); /* its QPN leaves the groups' registry */
	sv_link_close(&qp->link, ibqp->qp_num, false);
	sv_link_unbind(&qp->link);
	sv_stat_qp_gone(qp); /* its counters stay in the context's */
	pthread_rwlock_wrlock(&ctx->qp_lock);
	sv_lock(&qp->lock); /* a late poller finishes first */
	qp_put(ctx, qp);
	sv_unlock(&qp->lock);
	pthread_rwlock_unlock(&ctx->qp_lock);
	if (srq) /* release: our responder's last take before a destroy */
		atomic_fetch_sub_explicit(&srq->users, 1, memory_order_release);
	if (xrcd)
		atomic_fetch_sub_explicit(&xrcd->users, 1,
					  memory_order_release);
	if (pd)
		sv_pd_drop(pd);
	return 0;
}
