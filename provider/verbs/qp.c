// SPDX-License-Identifier: MIT
/*
 * Queue pairs: creation (classic and extended), the state machine's
 * effects (modify_qp: connect at RTR, PSNs at RTS, flush at ERR),
 * destroy with flush, and error handling shared by the engine.  The
 * transition rules themselves live in qp_state.c; the send/receive posting
 * in post.c; the engine in req.c, resp.c, comp.c; the attributes'
 * checks and query in qp_attr.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "qp_attr.h"
#include "qp_state.h"
#include "rmem.h"
#include "shm.h"
#include "sv.h"
#include "tcp.h"

/* SOFTVERBS_RING_KB, rounded up to a power of two. */
static uint64_t ring_size(void)
{
	return sv_roundup_pow2((uint32_t)sv_env_uint(SV_ENV_RING_KB)) * 1024ull;
}

/* Flushes the send queue alone (SQE: receives go on). */
void sv_qp_flush_sq(struct sv_qp *qp)
{
	struct ibv_wc wc = {.status = IBV_WC_WR_FLUSH_ERR,
			    .opcode = IBV_WC_SEND,
			    .qp_num = qp->qpx.qp_base.qp_num};

	for (; qp->sq_comp != qp->sq_post; qp->sq_comp++) {
		if (qp->destroying)
			continue; /* no completion outlives its QP */
		wc.wr_id = qp->sq[qp->sq_comp & (qp->sq_size - 1)].wr_id;
		sv_cq_push(qp->scq, &wc, false);
	}
	qp->sq_send = qp->sq_post;
}

static void flush_rq(struct sv_qp *qp)
{
	struct ibv_wc wc = {.status = IBV_WC_WR_FLUSH_ERR,
			    .opcode = IBV_WC_RECV,
			    .qp_num = qp->qpx.qp_base.qp_num};

	for (; qp->rq_comp != qp->rq_post; qp->rq_comp++) {
		if (qp->destroying)
			continue;
		wc.wr_id = qp->rq[qp->rq_comp & (qp->rq_size - 1)].wr_id;
		sv_cq_push(qp->rcq, &wc, false);
	}
	qp->resp_rnr = false;
}

/* IBA 10.3.1: in the Error state every outstanding and new WR completes
 * with a flush error.  Caller holds qp->lock. */
void sv_qp_flush(struct sv_qp *qp)
{
	if (qp->sq_comp != qp->sq_post || qp->rq_comp != qp->rq_post)
		sv_dbg("qp %06x: flushing %u sends, %u receives%s\n",
		       qp->qpx.qp_base.qp_num, qp->sq_post - qp->sq_comp,
		       qp->rq_post - qp->rq_comp,
		       qp->destroying ? " (destroyed: no completions)" : "");
	sv_qp_flush_sq(qp);
	flush_rq(qp);
}

static void link_close(struct sv_qp *qp, bool bye)
{
	sv_srq_return(qp); /* while the descriptors are mapped */
	sv_progress_del(qp->ctx, &qp->pfd[1]);
	sv_progress_del(qp->ctx, &qp->pfd[2]);
	sv_tcp_close(&qp->link, bye);
	sv_pfd_set_kind(&qp->pfd[1], SV_PFD_DOORBELL);
	sv_pfd_set_kind(&qp->pfd[2], SV_PFD_CONN);
	sv_shm_close(&qp->link, qp->qpx.qp_base.qp_num, bye);
	qp->link.state = SV_LINK_IDLE;
	if (qp->rpeer)
		sv_rpeer_put(qp->ctx, qp->rpeer);
	qp->rpeer = NULL;
}

static void qp_event(struct sv_qp *qp, enum ibv_event_type ev)
{
	struct ibv_async_event e = {.event_type = ev};

	e.element.qp = &qp->qpx.qp_base;
	sv_async_event(qp->ctx, &e);
}

/* Moves the QP to ERR and flushes; ev, if not 0, is raised async.
 * Caller holds qp->lock. */
void sv_qp_to_error(struct sv_qp *qp, enum ibv_event_type ev)
{
	if (qp->attr.qp_state == IBV_QPS_ERR)
		return;
	sv_dbg("qp %06x: %s -> ERR\n", qp->qpx.qp_base.qp_num,
	       sv_qp_state_names[qp->attr.qp_state]);
	/* the engine's state only: ibv_qp.state is the program's, which
	 * modify and query write, as rdma-core's libibverbs does (UCX
	 * asserts on it) */
	qp->attr.qp_state = IBV_QPS_ERR;
	if (qp->link.state != SV_LINK_IDLE)
		link_close(qp, qp->link.state != SV_LINK_DEAD);
	sv_qp_flush(qp);
	if (ev)
		qp_event(qp, ev);
	if (qp->qpx.qp_base.qp_type == IBV_QPT_XRC_RECV) {
		sv_xrc_unbind(qp); /* the SRQ was the message's, not ours */
		return;
	}
	/* IBA 10.3.1, 11.6.3: this QP takes no more WQEs from its SRQ (the
	 * SRQ's stay there, for the other QPs) */
	if (qp->srq)
		qp_event(qp, IBV_EVENT_QP_LAST_WQE_REACHED);
}

/* Registers the link's connection sockets: for hang-up detection, and
 * ours to the peer for its doorbell (from the moment we connect). */
static void watch_link(struct sv_qp *qp)
{
	if (qp->link.conn_fd >= 0 && qp->pfd[1].fd != qp->link.conn_fd) {
		sv_progress_del(qp->ctx, &qp->pfd[1]);
		sv_progress_add(qp->ctx, &qp->pfd[1], qp->link.conn_fd);
	}
	if (qp->link.acc_fd >= 0 && qp->pfd[2].fd != qp->link.acc_fd) {
		sv_progress_del(qp->ctx, &qp->pfd[2]);
		sv_progress_add(qp->ctx, &qp->pfd[2], qp->link.acc_fd);
	}
}

/* Says why a link cannot come up, once, on stderr (what failed and what
 * to do); the caller returns the error or moves the QP to ERROR. */
static void say_link_error(struct sv_qp *qp, const char *what, int err)
{
	if (err == -EACCES)
		return; /* check_peer (shm.c) said who holds the socket */
	fprintf(stderr, "softverbs: qp %06x: %s: %s%s\n",
		qp->qpx.qp_base.qp_num, what, strerror(-err),
		err == -EMFILE || err == -ENFILE
			? "; each connected QP holds 3 fds: raise the limit "
			  "(ulimit -n) or use fewer QPs"
			: "");
}

/* Maps the peer context's shared registered memory (rmem.c), so our
 * one-sided operations go straight to it; refused, they go to its
 * responder.  The fds are the link's until here. */
static void take_peer_memory(struct sv_qp *qp)
{
	struct sv_link *l = &qp->link;

	if (qp->rpeer)
		sv_rpeer_put(qp->ctx, qp->rpeer);
	/* SOFTVERBS_FAULTS: every operation a packet that can be faulted
	 * (no direct one-sided operations, no single copy) */
	qp->rpeer = sv_inject.on ? NULL
				 : sv_rpeer_get(qp->ctx, l->peer_arena_fd,
						l->peer_table_fd);
	if (!qp->rpeer)
		sv_dbg("qp %06x: peer memory refused: %s\n",
		       qp->qpx.qp_base.qp_num, strerror(errno));
	qp->peer_pd = l->peer_pd;
	close(l->peer_arena_fd);
	close(l->peer_table_fd);
	l->peer_arena_fd = l->peer_table_fd = -1;
}

/* How long a TCP link that was up may stay broken: the requester's
 * budget (IBA: timeout x retry_cnt) and one ACK timeout more, so that a
 * request in flight fails by its own timer first (comp.c); for ever with
 * the infinite timeout (0), and for UC, which has none. */
static uint64_t link_down_max_ns(const struct sv_qp *qp)
{
	if (!qp->attr.timeout || qp->qpx.qp_base.qp_type == IBV_QPT_UC)
		return UINT64_MAX;
	return sv_qp_ack_timeout_ns(qp) * (qp->attr.retry_cnt + 2u);
}

/* A TCP link, from the engine and the progress thread: moves it on
 * (tcp.c) and follows its state. */
void sv_qp_tcp_run(struct sv_qp *qp, uint64_t now)
{
	enum sv_link_state st;

	if (qp->attr.qp_state < IBV_QPS_RTR)
		return; /* the peer QPN is not known yet */
	st = sv_tcp_run(&qp->link, qp->attr.dest_qp_num,
			sv_qp_ack_timeout_ns(qp), link_down_max_ns(qp), now);
	if (st == qp->link.state || qp->link.state == SV_LINK_CLOSED)
		return;
	if (st == SV_LINK_UP || st == SV_LINK_CONNECTING) {
		sv_dbg("qp %06x: tcp link %s -> %s\n", qp->qpx.qp_base.qp_num,
		       sv_link_state_names[qp->link.state],
		       sv_link_state_names[st]);
		qp->link.state = st;
	} else {
		sv_qp_link_event(qp, st);
	}
}

/*
 * Brings the link up: connects to the peer's listener (again, with backoff,
 * if it was not there yet) and takes the peer's hello.  Returns what makes
 * the link impossible (another user's socket, out of fds), else 0.  Caller
 * holds qp->lock.
 */
static int link_step(struct sv_qp *qp)
{
	struct sv_link *l = &qp->link;
	uint32_t qpn = qp->qpx.qp_base.qp_num;
	enum ibv_qp_state s = qp->attr.qp_state;
	uint32_t expect = SV_QPN_ANY;
	int got, err = 0;

	if (s >= IBV_QPS_RTR && s <= IBV_QPS_SQE)
		expect = qp->attr.dest_qp_num;
	sv_tcp_spare(l, false); /* room for a TCP caller's socket */
	got = sv_shm_accept(l, qpn, expect);
	sv_tcp_spare(l, true);
	if (l->tcp) { /* our listener passes TCP callers too (tcp.c) */
		if (got < 0 && !l->tx_ready) {
			say_link_error(qp, "taking the peer's connection", got);
			return got;
		}
		if (expect != SV_QPN_ANY)
			sv_qp_tcp_run(qp, 0);
		return 0;
	}
	if (got > 0 && l->peer_qpn != expect && expect != SV_QPN_ANY)
		sv_shm_drop_tx(l);
	if (got < 0 && l->state == SV_LINK_CONNECTING && !l->tx_ready) {
		/* our peer's hello is lost or cannot be taken */
		say_link_error(qp, "taking the peer's connection", got);
		return got;
	}
	if (expect == SV_QPN_ANY)
		return 0;
	if (l->tx_ready && l->peer_qpn != expect)
		sv_shm_drop_tx(l); /* an early hello from someone else */
	if (l->conn_fd < 0 && l->state == SV_LINK_CONNECTING) {
		uint64_t now = sv_now_ns();

		if (now >= l->next_connect_ns) {
			struct ibv_pd *pd = qp->qpx.qp_base.pd;
			struct sv_shm_share sh = {.pd_id = pd ? pd->handle : 0};

			/* our registered memory, for the peer's one-sided
			 * operations; without it they reach our responder
			 * (always, for XRC_RECV: the PD is each SRQ's) */
			if (!pd ||
			    sv_rmem_fds(qp->ctx, &sh.arena_fd, &sh.table_fd))
				sh.arena_fd = sh.table_fd = -1;
			err = sv_shm_connect(l, qpn, expect, &sh);
		}
		if (err == -EACCES)
			return err;
		if (err)
			l->next_connect_ns =
				sv_shm_backoff(&l->connect_wait_ns, now);
		if (err && err != -EAGAIN)
			sv_dbg("qp %06x: connect to %06x: %s\n", qpn, expect,
			       strerror(-err));
	}
	if (l->tx_ready && l->peer_arena_fd >= 0)
		take_peer_memory(qp);
	if (l->state == SV_LINK_CONNECTING && l->conn_fd >= 0 && l->tx_ready) {
		l->state = SV_LINK_UP;
		/* what we acked before we could ring: the peer may sleep */
		sv_link_ring_doorbell(l->acc_fd);
	}
	watch_link(qp);
	return 0;
}

/* From the engine and the progress thread: a link that cannot come up
 * takes the QP to ERROR (IBV_EVENT_QP_FATAL); the reason is on stderr. */
void sv_qp_link_step(struct sv_qp *qp)
{
	if (link_step(qp))
		sv_qp_to_error(qp, IBV_EVENT_QP_FATAL);
}

/*
 * Where a link goes: shared memory (0), or TCP to *dst (1).  The address
 * decides — a GID of another host is reached over TCP, anything of this
 * host (LID, or a GID in our table) over shared memory — unless
 * SOFTVERBS_TRANSPORT says (tcp: this host too, at the GID's address or
 * 127.0.0.1).  sv_av_check refused what neither can reach.
 */
static int link_route(const struct sv_qp *qp, union sv_sockaddr *dst,
		      union sv_sockaddr *src)
{
	const struct ibv_ah_attr *a = &qp->attr.ah_attr;
	bool local = !a->is_global || sv_gid_is_local(&a->grh.dgid);
	uint16_t port = sv_tcp_connect_port();
	int mode = sv_tcp_mode();

	memset(src, 0, sizeof(*src)); /* AF_UNSPEC: the kernel's choice */
	if (mode == 1 || (local && mode != 2))
		return 0;
	if (a->is_global) { /* the IP source is the source GID's, as RoCE */
		union ibv_gid g;

		if (sv_query_gid((struct ibv_context *)&qp->ctx->vctx.context,
				 1, a->grh.sgid_index, &g) ||
		    !sv_gid_sockaddr(&g, 0, src))
			memset(src, 0, sizeof(*src));
	}
	if (a->is_global && sv_gid_sockaddr(&a->grh.dgid, port, dst))
		return 1;	      /* IPv4 or IPv6 */
	memset(dst, 0, sizeof(*dst)); /* LID or our link-local GID */
	dst->in.sin_family = AF_INET;
	dst->in.sin_port = htons(port);
	dst->in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return 1;
}

/* SOFTVERBS_PCAP: the addresses the QP's packets show (pcap.c): the
 * GIDs of its path, ::ffff:127.0.0.1 for one it does not have. */
static void pcap_addr(struct sv_qp *qp)
{
	static const uint8_t lo[16] = {0, 0, 0,	   0,	 0,   0, 0, 0,
				       0, 0, 0xff, 0xff, 127, 0, 0, 1};
	const struct ibv_ah_attr *a = &qp->attr.ah_attr;
	struct sv_pcap_addr *p = &qp->pcap_addr;
	union ibv_gid g;
	uint32_t x = qp->qpx.qp_base.qp_num, y = qp->attr.dest_qp_num;

	memcpy(p->src, lo, 16);
	memcpy(p->dst, lo, 16);
	if (a->is_global) {
		if (!sv_query_gid(&qp->ctx->vctx.context, 1, a->grh.sgid_index,
				  &g))
			memcpy(p->src, g.raw, 16);
		memcpy(p->dst, a->grh.dgid.raw, 16);
	}
	/* RoCE's entropy: one port per QP pair, the same both ways */
	x = (x < y ? x : y) * 0x9e3779b1u ^ (x < y ? y : x);
	p->sport = (uint16_t)(0xc000 | (x >> 18));
	qp->pcap_psn_off = 0;
	qp->pcap_rx_valid = false;
	qp->pcap_msn = 0;
}

/* At RTR: the link's resources now, and a first connect.  -errno, and the
 * QP stays as it was. */
static int link_start(struct sv_qp *qp)
{
	union sv_sockaddr dst, src;
	int err;

	qp->link.state = SV_LINK_CONNECTING;
	qp->link.next_connect_ns = 0;
	qp->link.connect_wait_ns = 0;
	if (link_route(qp, &dst, &src)) {
		sv_tcp_door_open(qp->ctx); /* the peer calls us there */
		/* one connection: pfd[1], which look() drains (progress.c);
		 * pfd[2] (shared memory's accepted connection) holds a
		 * caller that proves itself (tcp.c, pend_step) */
		sv_pfd_set_kind(&qp->pfd[1], SV_PFD_TCP);
		sv_pfd_set_kind(&qp->pfd[2], SV_PFD_TCP);
		err = sv_tcp_prepare(&qp->link, qp->qpx.qp_base.qp_num,
				     qp->attr.dest_qp_num, ring_size(), &dst,
				     &src, qp->ctx, &qp->pfd[1], &qp->pfd[2]);
		if (err)
			say_link_error(qp, "modify to RTR (TCP)", err);
		else
			sv_tcp_count_into(&qp->link, &qp->stats);
		return err;
	}
	/* receive descriptors for single-copy sends, one per RQ slot (on an
	 * SRQ, per WQE it may hold lent: srq.c lend) */
	err = sv_shm_prepare(&qp->link, qp->qpx.qp_base.qp_num, ring_size(),
			     /* UC drops messages: the sender could not know
			      * which receive a send takes */
			     sv_single_copy_min() == UINT32_MAX ||
					     qp->qpx.qp_base.qp_type !=
						     IBV_QPT_RC
				     ? 0
				     : qp->rq_size);
	if (err) {
		say_link_error(qp, "modify to RTR", err);
		return err;
	}
	sv_rq_describe(qp, qp->rq_comp); /* those posted in INIT */
	return 0;
}

/* Back to the state of a new QP (IBA 10.3.1: RESET drops all WRs). */
static void reset_qp(struct sv_qp *qp)
{
	if (qp->link.state != SV_LINK_IDLE)
		link_close(qp, true);
	qp->sq_post = qp->sq_send = qp->sq_comp = 0;
	qp->rq_post = qp->rq_comp = qp->rq_held = 0;
	qp->resp_off = qp->resp_msg = 0;
	qp->resp_rnr = qp->resp_in_msg = qp->resp_drop = false;
	qp->sq_stopped = false;
	qp->comp_ack = SV_ACK_NONE;
	qp->comp_deadline = 0;
	qp->comp_retries = qp->comp_rnr_retries = 0;
	qp->comp_rnr_wait = false;
	qp->comp_acked_valid = false;
	qp->rd_out = qp->ring_rdma = qp->recv_msgs = 0;
	qp->resp_wr_ptr = NULL;
	qp->resp_rd_sent = 0;
	qp->xrc_retry_ns = 0;
	qp->resp_seq_naked = false;
	qp->fault_try = qp->fault_rnr_try = 0;
	qp->fault_rnr_until = 0;
	sv_comp_fault_free(qp); /* delay_us's held responses */
	memset(qp->atom_replay, 0, sizeof(qp->atom_replay));
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
	if (qp->link.tcp)
		sv_qp_tcp_run(qp, now); /* what arrived, into the rings */
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
			qp->comp_ack = SV_ACK_NONE;
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
		err = link_step(qp);
		if (err && cur == IBV_QPS_INIT) {
			qp->qpx.qp_base.state = cur;
			qp->attr.qp_state = cur;
			goto err_link;
		}
		if (err)
			sv_qp_to_error(qp, IBV_EVENT_QP_FATAL);
		else if (qp->link.state == SV_LINK_CONNECTING &&
			 qp->link.conn_fd < 0)
			sv_progress_note_work(qp->ctx); /* its retry timer */
	}
	return 0;

err_link:
	link_close(qp, false);
	return err;
}

int sv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct sv_qp *qp = to_sqp(ibqp);
	enum ibv_qp_state cur, next;
	int err;

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
	qp->sq_max = cap->max_send_wr;
	qp->rq_max = no_rq ? 0 : cap->max_recv_wr;
	qp->sq_size = sv_roundup_pow2(cap->max_send_wr ? cap->max_send_wr : 1);
	qp->rq_size = sv_roundup_pow2(qp->rq_max ? qp->rq_max : 1);
	if (qp->srq && type == IBV_QPT_RC) /* WQEs lent for single copy */
		qp->rq_size = SV_SRQ_LEND;
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
	qp->sq = calloc(qp->sq_size, sizeof(*qp->sq));
	qp->sq_sge = calloc((size_t)qp->sq_size * qp->max_send_sge,
			    sizeof(*qp->sq_sge));
	qp->rq = calloc(qp->rq_size, sizeof(*qp->rq));
	qp->rq_sge = calloc((size_t)qp->rq_size * qp->max_recv_sge,
			    sizeof(*qp->rq_sge));
	if (qp->max_inline)
		qp->sq_inline = malloc((size_t)qp->sq_size * qp->max_inline);
	if (!qp->sq || !qp->sq_sge || !qp->rq || !qp->rq_sge ||
	    (qp->max_inline && !qp->sq_inline))
		return -ENOMEM;
	return 0;
}

static void free_queues(struct sv_qp *qp)
{
	free(qp->sq);
	free(qp->sq_sge);
	free(qp->sq_inline);
	free(qp->rq);
	free(qp->rq_sge);
	qp->sq = NULL;
	qp->rq = NULL;
	qp->sq_sge = qp->rq_sge = NULL;
	qp->sq_inline = NULL;
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
	zero(&qp->drives + 1, qp + 1);
	qp->qpx.qp_base.state = IBV_QPS_RESET;
	sv_unlock(&qp->lock);
	return qp;
}

/* Caller holds ctx->qp_lock for writing.  The QP no longer counts
 * against max_qp. */
static void qp_put(struct sv_context *ctx, struct sv_qp *qp)
{
	sv_obj_put(ctx, SV_OBJ_QP);
	free_queues(qp);
	sv_comp_fault_free(qp);
	sv_lanes_rx_close(qp); /* UD: its senders see CLOSED (lane.c) */
	free(qp->ud_replay);   /* UD: its senders' windows (ud.c) */
	qp->ud_replay = NULL;
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
			link_close(qp, qp->link.state != SV_LINK_DEAD);
		sv_shm_close(&qp->link, qp->qpx.qp_base.qp_num, false);
		close(qp->link.listen_fd);
		if (qp->qpx.qp_base.qp_type == IBV_QPT_XRC_RECV) {
			sv_xrc_unbind(qp);
			sv_xrc_qp_del(qp);
			atomic_fetch_sub(&qp->xrcd->users, 1);
		}
		if (qp->xrc_sock >= 0)
			close(qp->xrc_sock);
		free(qp->xrc_buf);
		qp->xrc_buf = NULL;
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
		sv_pd_get(to_spd(a->pd));
	if (qp->srq)
		atomic_fetch_add(&qp->srq->users, 1);
	if (qp->xrcd) {
		atomic_fetch_add(&qp->xrcd->users, 1);
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
	qp->xrc_sock = -1;
	qp->fault_idx = sv_inject_qp_index();
	err = -alloc_queues(qp, a->qp_type, &a->cap);
	if (err)
		goto err_free;
	sv_link_init(&qp->link);
	for (int i = 0; i < 3; i++) {
		/* field by field: a stale event may be read for this slot */
		sv_pfd_set_kind(&qp->pfd[i], i == 0 && a->qp_type == IBV_QPT_UD
						     ? SV_PFD_UD
					     : i == 0 ? SV_PFD_LISTEN
					     : i == 1 ? SV_PFD_DOORBELL
						      : SV_PFD_CONN);
		qp->pfd[i].fd = -1;
		qp->pfd[i].qp = qp;
		qp->pfd[i].srq = NULL;
		atomic_store(&qp->pfd[i].rung, false);
		qp->pfd[i].quiet = false;
		qp->pfd[i].out = false;
	}
	/* the QPN is a socket's name: a listener, or UD's datagram socket */
	err = a->qp_type == IBV_QPT_UD
		      ? -sv_ud_bind(&qp->link, &qpn)
		      : -sv_shm_bind(&qp->link, SV_SHM_SOCK, &qpn);
	if (err)
		goto err_free;
	qp->ctx = ctx;
	if (a->qp_type == IBV_QPT_UD)
		sv_ud_door_open(ctx); /* datagrams from other hosts */
	if (a->qp_type == IBV_QPT_XRC_RECV) {
		/* its receives complete on each message's SRQ's CQ */
		a->pd = NULL;
		a->send_cq = a->recv_cq = NULL;
		qp->xrcd = to_sxrcd(a->xrcd);
	} else if (a->qp_type == IBV_QPT_XRC_SEND) {
		a->recv_cq = NULL;
	}
	qp->scq = a->send_cq ? to_scq(a->send_cq) : NULL;
	qp->rcq = a->recv_cq ? to_scq(a->recv_cq) : NULL;
	qp->sq_sig_all = a->sq_sig_all;
	qp->mcast_block_self =
		(a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
		(a->create_flags & IBV_QP_CREATE_BLOCK_SELF_MCAST_LB);

	ibqp = &qp->qpx.qp_base;
	fill_ibqp(ibqp, c, a, qpn);

	pthread_rwlock_wrlock(&ctx->qp_lock);
	if ((qp->scq && sv_cq_attach_qp(qp->scq, qp)) ||
	    (qp->rcq && sv_cq_attach_qp(qp->rcq, qp))) {
		if (qp->scq)
			sv_cq_detach_qp(qp->scq, qp);
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
	sv_shm_close(&qp->link, qpn, false);
	close(qp->link.listen_fd);
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
	more = --qp->xrc_opens > 0;
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
	struct sv_pd *pd = ibqp->pd ? to_spd(ibqp->pd) : NULL;
	struct sv_srq *srq;
	struct sv_xrcd *xrcd = qp->xrcd;

	if (xrc_close_handle(qp))
		return 0;
	/* unhook first: no poller or progress thread can reach it after */
	pthread_rwlock_wrlock(&ctx->qp_lock);
	sv_list_del(&qp->ctx_node);
	atomic_store_explicit(&qp->listed, false, memory_order_relaxed);
	if (qp->scq)
		sv_cq_detach_qp(qp->scq, qp);
	if (qp->rcq && ibqp->qp_type != IBV_QPT_XRC_RECV)
		sv_cq_detach_qp(qp->rcq, qp);
	sv_progress_del(ctx, &qp->pfd[0]);
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
		link_close(qp, true);
	if (qp->scq)
		sv_cq_clean(qp->scq, ibqp->qp_num);
	if (qp->rcq && qp->rcq != qp->scq && ibqp->qp_type != IBV_QPT_XRC_RECV)
		sv_cq_clean(qp->rcq, ibqp->qp_num);
	/* an SRQ of its own (an XRC_RECV QP's bound one went in to_error) */
	srq = ibqp->qp_type == IBV_QPT_XRC_RECV ? NULL : qp->srq;
	if (ibqp->qp_type == IBV_QPT_XRC_RECV)
		sv_xrc_unbind(qp);
	if (qp->xrc_sock >= 0)
		close(qp->xrc_sock);
	qp->xrc_sock = -1;
	free(qp->xrc_buf);
	qp->xrc_buf = NULL;
	qp->xrc_cap = 0;
	sv_unlock(&qp->lock);
	pthread_rwlock_unlock(&ctx->qp_lock);

	sv_async_forget(ctx, ibqp);
	pthread_mutex_lock(&ibqp->mutex);
	while (ibqp->events_completed != qp->async_got)
		pthread_cond_wait(&ibqp->cond, &ibqp->mutex);
	pthread_mutex_unlock(&ibqp->mutex);

	sv_mcast_detach_all(qp); /* its QPN leaves the groups' registry */
	sv_shm_close(&qp->link, ibqp->qp_num, false);
	close(qp->link.listen_fd);
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
		sv_pd_put(pd);
	return 0;
}
