// SPDX-License-Identifier: MIT
/*
 * The responder: takes requests off the link in PSN order and runs the
 * handler the opcode table names (opcode.c): SEND payloads into the
 * posted receive WQEs (scatter, with key checks), RDMA writes into the
 * MR their rkey names, reads and atomics answered on the link's response
 * ring; it completes receives and acknowledges.  With no receive posted
 * it answers RNR NAK and keeps the packet until a receive arrives or the
 * requester gives up (the rnr word in the ring settles who wins).
 * Steps: check_psn (gaps NAK-seq'd, duplicates re-ACKed or answered
 * again, SOFTVERBS_FAULTS drop) -> check_packet -> the handler
 * (check_rkey, execute, respond) -> acknowledge.
 */
#include <string.h>

#include "resp.h"
#include "rmem.h"

#include "core.h"
#include "engine.h"
#include "guard.h"
#include "inject.h"
#include "pcap.h"
#include "transport.h"

enum resp_result {
	RESP_NEXT,  /* packet consumed; look at the next */
	RESP_WAIT,  /* leave it: no receive WQE yet */
	RESP_GONE,  /* dropped, RNR-NAKed: nothing more to acknowledge */
	RESP_FATAL, /* the QP went to ERROR */
};

/* Scatters len bytes at the receive cursor; false on a bad key/range or
 * on memory the application took away under its registration. */
static bool scatter(struct sv_qp *qp, struct sv_rwqe *r, const uint8_t *src,
		    uint32_t len)
{
	struct sv_pd *pd = sv_resp_pd(qp);
	const struct ibv_sge *sg = sv_rwqe_sge(qp, r);

	while (len) {
		const struct ibv_sge *s;
		uint32_t n;

		if (qp->resp.sge_idx >= r->num_sge)
			return false;
		s = &sg[qp->resp.sge_idx];
		n = s->length - qp->resp.sge_off;
		if (n > len)
			n = len;
		if (n) {
			uint8_t *at = sv_mr_at(qp->ctx, s->lkey, pd,
					       s->addr + qp->resp.sge_off, n,
					       IBV_ACCESS_LOCAL_WRITE);

			if (!at || sv_copy_guarded(at, src, n))
				return false;
		}
		src += n;
		len -= n;
		qp->resp.sge_off += n;
		if (qp->resp.sge_off == s->length) {
			qp->resp.sge_idx++;
			qp->resp.sge_off = 0;
		}
	}
	return true;
}

static void complete_recv_op(struct sv_qp *qp, enum ibv_wc_status status,
			     const struct sv_pkt *p, enum ibv_wc_opcode op)
{
	struct sv_rwqe *r = &qp->rq.wqe[qp->rq.comp & (qp->rq.size - 1)];
	struct ibv_wc wc = {
		.wr_id = r->wr_id,
		.status = status,
		.opcode = op,
		.byte_len = qp->resp.msg,
		.qp_num = qp->qpx.qp_base.qp_num,
		.src_qp = qp->attr.dest_qp_num,
		.slid = qp->attr.ah_attr.dlid,
		.sl = qp->attr.ah_attr.sl,
	};

	if (status == IBV_WC_SUCCESS && (p->flags & SV_PKT_IMM)) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = p->imm;
	}
	sv_resp_wc_inv(&wc, p);
	qp->rq.comp++;
	qp->resp.in_msg = false;
	sv_stat_wc(qp, status);
	sv_cq_push(qp->rcq, &wc, p->flags & SV_PKT_SOLICITED);
}

static void complete_recv(struct sv_qp *qp, enum ibv_wc_status status,
			  const struct sv_pkt *p)
{
	complete_recv_op(qp, status, p, IBV_WC_RECV);
}

/*
 * IBA 9.8.3: UC has no NAK: a message the responder cannot take (no
 * receive, a bad key, too long, a broken sequence) is dropped whole,
 * silently, and the QP goes on with the next.
 */
static enum resp_result drop_msg(struct sv_qp *qp, const struct sv_pkt *p)
{
	qp->resp.in_msg = qp->resp.write = false;
	qp->resp.drop = !(p->seg & SV_SEG_LAST);
	qp->resp.psn = sv_psn_add(qp->resp.psn, p->npsn);
	sv_link_rx_consume(&qp->link);
	return RESP_NEXT;
}

static bool is_uc(const struct sv_qp *qp)
{
	return qp->qpx.qp_base.qp_type == IBV_QPT_UC;
}

/* The requester broke the protocol: no guessing, the QP is done. */
static enum resp_result fatal(struct sv_qp *qp, const struct sv_pkt *p,
			      enum sv_syndrome syn, enum ibv_wc_status st)
{
	if (is_uc(qp))
		return drop_msg(qp, p);
	if (qp->xrc.fwd) /* no receive of ours holds it */
		qp->resp.in_msg = false;
	if ((qp->resp.in_msg && !qp->resp.write) || st != IBV_WC_SUCCESS)
		complete_recv(
			qp, st == IBV_WC_SUCCESS ? IBV_WC_REM_INV_REQ_ERR : st,
			p);
	sv_resp_nak(qp, p->psn, syn);
	sv_qp_to_error(qp, IBV_EVENT_QP_REQ_ERR);
	return RESP_FATAL;
}

/* IBA 9.7.5.2.8: no receive WQE (in the RQ, or the SRQ: IBA 10.2.9.2).
 * Returns false to wait: the packet stays, NAKed once, until a receive
 * comes or the requester gives up (the ring's rnr word); on a lossy
 * link it is gone (rnr_drop), and rnr_wait says RESP_GONE. */
static bool take_rwqe(struct sv_qp *qp, const struct sv_pkt *p)
{
	_Atomic uint32_t *rnr = &qp->link.rx.hdr->rnr;
	uint32_t expect = SV_RNR_WAIT;

	/* on an SRQ: one it holds (lent), else the SRQ's oldest;
	 * SOFTVERBS_FAULTS rnr: as if there were none */
	if ((SV_FAULT_ON(rnr) && !is_uc(qp) && sv_resp_fault_rnr(qp, p)) ||
	    (qp->srq ? !sv_srq_take(qp->srq, qp)
		     : qp->rq.comp == qp->rq.post)) {
		if (is_uc(qp)) { /* no RNR on UC: the message is lost */
			qp->resp.drop = true;
			return true;
		}
		if (sv_link_lossy(&qp->link)) {
			sv_resp_rnr_drop(qp, p);
			return false;
		}
		if (!qp->resp.rnr) {
			atomic_store(rnr, SV_RNR_WAIT);
			qp->resp.rnr = true;
			sv_resp_nak(qp, p->psn, SV_NAK_RNR);
		}
		return false;
	}
	if (qp->resp.rnr) {
		qp->resp.rnr = false;
		if (!atomic_compare_exchange_strong(rnr, &expect,
						    SV_RNR_NONE)) {
			/* the requester gave up on this message: drop it */
			atomic_store(rnr, SV_RNR_NONE);
			qp->resp.drop = true;
		}
	}
	return true;
}

/* What a responder that could not take a receive says: the packet
 * waits, or on a lossy link it went (rnr_drop). */
static enum resp_result rnr_wait(const struct sv_qp *qp)
{
	return sv_link_lossy(&qp->link) ? RESP_GONE : RESP_WAIT;
}

/* A send the requester placed in our receive buffer itself (req.c:
 * single copy): the receive it took completes, with no copy. */
static enum resp_result recv_placed(struct sv_qp *qp, const struct sv_pkt *p)
{
	const struct sv_rwqe *r;

	if (qp->resp.in_msg || p->seg != SV_SEG_ONLY || p->len)
		return fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_SUCCESS);
	if (!take_rwqe(qp, p))
		return rnr_wait(qp);
	qp->resp.psn = sv_psn_add(qp->resp.psn, p->npsn);
	sv_link_rx_consume(&qp->link);
	if (qp->resp.drop) {
		qp->resp.drop = false;
		return RESP_NEXT;
	}
	qp->resp.msg = p->msg_len;
	qp->resp.placed = true;
	r = &qp->rq.wqe[qp->rq.comp & (qp->rq.size - 1)];
	if (p->msg_len > r->length) {
		/* IBA 9.7.5.2.2: it does not fit (the sender ignored our
		 * description) */
		qp->resp.in_msg = true;
		return fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_LOC_LEN_ERR);
	}
	/* IBA 9.7.5.2.4: the receive as it stands now (its MR may have
	 * moved PD, memory or access since it was described; one never
	 * described could not be placed into) */
	if (r->stale || !r->placeable ||
	    !sv_sges_writable(qp->ctx, sv_resp_pd(qp), sv_rwqe_sge(qp, r),
			      r->num_sge, p->msg_len))
		return fatal(qp, p, SV_NAK_REM_OP, IBV_WC_LOC_PROT_ERR);
	if (!sv_resp_invalidate(qp, p)) {
		qp->resp.in_msg = true;
		return fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_REM_INV_REQ_ERR);
	}
	complete_recv(qp, IBV_WC_SUCCESS, p);
	return RESP_NEXT;
}

static enum resp_result refuse(struct sv_qp *qp, const struct sv_pkt *p,
			       enum sv_syndrome syn);

/* An XRC send whose SRQ is another context's (xrc.c): refused with
 * NAK-invalid request, and this QP goes to ERROR, as an RC responder's
 * invalid request does; nothing was taken from any receive queue. */
static enum resp_result fwd_refuse(struct sv_qp *qp, const struct sv_pkt *p)
{
	qp->resp.in_msg = false;
	qp->xrc.retry_ns = 0;
	return refuse(qp, p, SV_NAK_INV_REQ);
}

/* An XRC send for an SRQ of another context or process: assembled here
 * and forwarded at its last packet, which is ACKed once the SRQ's socket
 * took it.  A full socket (its owner has no WQE) leaves the packet at
 * the head, retried from the progress thread's timer. */
static enum resp_result recv_fwd(struct sv_qp *qp, const struct sv_pkt *p,
				 const uint8_t *payload)
{
	int err;

	if (p->flags & SV_PKT_PLACED)
		return fwd_refuse(qp, p);
	if (!qp->xrc.retry_ns) { /* its bytes are not in yet */
		if ((p->seg & SV_SEG_FIRST) ? qp->resp.in_msg
					    : !qp->resp.in_msg)
			return fwd_refuse(qp, p);
		if (sv_xrc_fwd_data(qp, p, payload))
			return fwd_refuse(qp, p); /* too long, or malformed */
		qp->resp.in_msg = true;
	}
	if (p->seg & SV_SEG_LAST) {
		err = sv_xrc_fwd_send(qp, p);
		if (err == -EAGAIN) {
			qp->xrc.retry_ns = sv_now_ns() + 1000000;
			return RESP_WAIT;
		}
		if (err) {
			sv_dbg("qp %06x: XRC SRQ %06x: %s\n",
			       qp->qpx.qp_base.qp_num, qp->xrc.srqn,
			       strerror(-err));
			return fwd_refuse(qp, p);
		}
		qp->xrc.retry_ns = 0;
		qp->resp.in_msg = false;
	}
	qp->resp.psn = sv_psn_add(qp->resp.psn, p->npsn);
	sv_link_rx_consume(&qp->link);
	return RESP_NEXT;
}

static enum resp_result recv_send(struct sv_qp *qp, const struct sv_pkt *p,
				  const uint8_t *payload)
{
	struct sv_rwqe *r;

	if (qp->xrc.fwd)
		return recv_fwd(qp, p, payload);
	if (p->flags & SV_PKT_PLACED)
		return recv_placed(qp, p);
	if (p->seg & SV_SEG_FIRST) {
		if (qp->resp.in_msg)
			return fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_SUCCESS);
		if (!take_rwqe(qp, p))
			return rnr_wait(qp);
		if (qp->resp.drop)
			goto consumed;
		r = &qp->rq.wqe[qp->rq.comp & (qp->rq.size - 1)];
		qp->resp.in_msg = true;
		qp->resp.msg =
			p->flags & SV_PKT_OPEN_LEN ? r->length : p->msg_len;
		qp->resp.placed = false;
		qp->resp.off = 0;
		qp->resp.sge_idx = qp->resp.sge_off = 0;
		if (qp->resp.msg > r->length) /* IBA 9.7.5.2.2 */
			return fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_LOC_LEN_ERR);
	} else if (qp->resp.drop) {
		goto consumed;
	} else if (!qp->resp.in_msg || qp->resp.write) {
		/* a middle or last send packet continues a send only: in a
		 * write, it would scatter into a receive nobody took */
		return fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_SUCCESS);
	}
	r = &qp->rq.wqe[qp->rq.comp & (qp->rq.size - 1)];
	if (p->len > qp->resp.msg - qp->resp.off)
		return fatal(qp, p, SV_NAK_INV_REQ,
			     p->flags & SV_PKT_OPEN_LEN ? IBV_WC_LOC_LEN_ERR
							: IBV_WC_SUCCESS);
	if ((p->seg & SV_SEG_LAST) && (p->flags & SV_PKT_OPEN_LEN))
		qp->resp.msg = qp->resp.off + p->len; /* it ends here */
	if ((p->seg & SV_SEG_LAST) && qp->resp.off + p->len != qp->resp.msg)
		return fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_SUCCESS);
	if (!scatter(qp, r, payload, p->len))
		return fatal(qp, p, SV_NAK_REM_OP, IBV_WC_LOC_PROT_ERR);
	qp->resp.off += p->len;
	if (!sv_resp_invalidate(qp, p))
		return fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_REM_INV_REQ_ERR);
consumed:
	qp->resp.psn = sv_psn_add(qp->resp.psn, p->npsn);
	sv_link_rx_consume(&qp->link);
	if (p->seg & SV_SEG_LAST) {
		if (qp->resp.drop)
			qp->resp.drop = false;
		else
			complete_recv(qp, IBV_WC_SUCCESS, p);
	}
	return RESP_NEXT;
}

/*
 * IBA 9.9.3.1.2, class C: a request the responder may not execute (the
 * QP does not allow the operation, or the key, bounds or access fail).
 * NAK, and this QP goes to ERROR as the requester's will.
 */
static enum resp_result refuse(struct sv_qp *qp, const struct sv_pkt *p,
			       enum sv_syndrome syn)
{
	if (is_uc(qp))
		return drop_msg(qp, p);
	sv_resp_nak(qp, p->psn, syn);
	qp->resp.in_msg = qp->resp.write = false;
	sv_qp_to_error(qp, syn == SV_NAK_REM_ACCESS ? IBV_EVENT_QP_ACCESS_ERR
						    : IBV_EVENT_QP_REQ_ERR);
	return RESP_FATAL;
}

/*
 * check_rkey: where [va, va+len) of rkey is in our memory, if the key
 * names a live MR of this QP's PD with every bit of access and the range
 * is inside it (IBA 10.6.3.2).  A zero-length range checks nothing
 * (IBA 9.4.4).  NULL with *syn otherwise.
 */
static uint8_t *check_rkey(struct sv_qp *qp, uint32_t rkey, uint64_t va,
			   uint64_t len, unsigned int access,
			   enum sv_syndrome *syn)
{
	struct sv_pd *pd = sv_resp_pd(qp);
	struct sv_mr *mr;

	*syn = SV_ACK;
	if (!len)
		return NULL;
	*syn = SV_NAK_REM_ACCESS;
	if (rkey & SV_KEY_MW) /* a memory window's (resp.h) */
		return sv_resp_mw_at(qp, rkey, va, len, access, syn);
	mr = pd ? sv_mr_lookup(qp->ctx, rkey, pd) : NULL;
	if (!mr || (mr->access & access) != access || va < mr->iova ||
	    va - mr->iova > mr->length || len > mr->length - (va - mr->iova))
		return NULL;
	*syn = SV_ACK;
	return mr->addr + (va - mr->iova);
}

/* The QP must allow the operation (IBA 10.2.4: qp_access_flags); an
 * operation it does not allow is an invalid request. */
static bool qp_allows(const struct sv_qp *qp, const struct sv_opcode_info *o)
{
	return (qp->attr.qp_access_flags & o->access) == o->access;
}

/* The receive a write with immediate consumes, at its last packet;
 * false to wait (RNR). */
static bool take_imm_rwqe(struct sv_qp *qp, const struct sv_pkt *p)
{
	if (!(p->flags & SV_PKT_IMM) || !(p->seg & SV_SEG_LAST))
		return true;
	return take_rwqe(qp, p);
}

/* After the last packet of a write: its immediate, if any, completes a
 * receive as IBV_WC_RECV_RDMA_WITH_IMM (IBA 9.4.3), with the write's
 * length (resp.msg: its FIRST's RETH; a LAST on the RoCE wire carries
 * none). */
static void write_done(struct sv_qp *qp, const struct sv_pkt *p)
{
	qp->resp.in_msg = qp->resp.write = false;
	if (!(p->flags & SV_PKT_IMM))
		return;
	if (qp->resp.drop) { /* the requester gave up on it (RNR) */
		qp->resp.drop = false;
		return;
	}
	complete_recv_op(qp, IBV_WC_SUCCESS, p, IBV_WC_RECV_RDMA_WITH_IMM);
}

static enum resp_result recv_write(struct sv_qp *qp, const struct sv_pkt *p,
				   const uint8_t *ext, const uint8_t *data)
{
	const struct sv_opcode_info *o = &sv_opcodes[SV_OP_WRITE];

	if (p->seg & SV_SEG_FIRST) {
		enum sv_syndrome syn;
		struct sv_reth r;
		uint8_t *dst;

		if (qp->resp.in_msg)
			return fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_SUCCESS);
		memcpy(&r, ext, sizeof(r));
		if (!qp_allows(qp, o) || r.dma_len != p->msg_len)
			return refuse(qp, p, SV_NAK_INV_REQ);
		dst = check_rkey(qp, r.rkey, r.va, r.dma_len, o->access, &syn);
		if (syn || (SV_FAULT_ON(access) && !is_uc(qp) &&
			    sv_resp_fault_access(qp, p)))
			return refuse(qp, p, syn ? syn : SV_NAK_REM_ACCESS);
		if (!take_imm_rwqe(qp, p))
			return rnr_wait(qp); /* nothing changed yet */
		qp->resp.in_msg = qp->resp.write = true;
		qp->resp.msg = p->msg_len;
		qp->resp.off = 0;
		qp->resp.wr_ptr = dst;
	} else {
		if (qp->resp.drop && !qp->resp.in_msg) /* UC: dropped */
			return drop_msg(qp, p);
		if (!qp->resp.in_msg || !qp->resp.write)
			return fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_SUCCESS);
		if (!take_imm_rwqe(qp, p))
			return rnr_wait(qp);
	}
	if (p->len > qp->resp.msg - qp->resp.off ||
	    ((p->seg & SV_SEG_LAST) && qp->resp.off + p->len != qp->resp.msg))
		return refuse(qp, p, SV_NAK_INV_REQ);
	if (p->len &&
	    sv_copy_guarded(qp->resp.wr_ptr + qp->resp.off, data, p->len))
		return refuse(qp, p, SV_NAK_REM_ACCESS); /* memory went */
	qp->resp.off += p->len;
	qp->resp.psn = sv_psn_add(qp->resp.psn, p->npsn);
	sv_link_rx_consume(&qp->link);
	if (p->seg & SV_SEG_LAST)
		write_done(qp, p);
	return RESP_NEXT;
}

/* The immediate of a write whose data the requester placed itself. */
static enum resp_result recv_note(struct sv_qp *qp, const struct sv_pkt *p)
{
	if (qp->resp.in_msg || p->seg != SV_SEG_ONLY ||
	    !(p->flags & SV_PKT_IMM))
		return fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_SUCCESS);
	if (!take_rwqe(qp, p))
		return rnr_wait(qp);
	qp->resp.msg = p->msg_len; /* the placed write's length */
	qp->resp.psn = sv_psn_add(qp->resp.psn, p->npsn);
	sv_link_rx_consume(&qp->link);
	write_done(qp, p);
	return RESP_NEXT;
}

/* The largest response train: whole MTUs, a quarter response ring, and
 * one MTU at least: with less, each call answered an empty train and the
 * read never ended (a 4 KiB response ring and a 4096-byte path MTU).
 * Our response rings hold two (SV_RSP_RING_MIN); a peer's that cannot
 * hold one keeps its read waiting, which harms only that peer. */
static uint32_t rsp_train_max(const struct sv_qp *qp)
{
	uint64_t m = qp->link.train_max ? qp->link.train_max : SV_MAX_TRAIN;

	if (qp->link.rsp_tx.size / 4 < m)
		m = qp->link.rsp_tx.size / 4;
	if (m < qp->mtu)
		m = qp->mtu;
	return (uint32_t)(m / qp->mtu * qp->mtu);
}

/* Puts one response on the response ring; false while it is full. */
static bool respond(struct sv_qp *qp, struct sv_pkt *h, const void *ext,
		    uint32_t ext_len, const uint8_t *data, bool *fault)
{
	int err = 0;
	struct sv_pkt *p = sv_link_rsp_reserve(
		&qp->link, sizeof(*p) + ext_len + h->len, &err);

	if (!p) {
		if (err) /* the peer corrupted its consumer index */
			*fault = true;
		return false;
	}
	if (ext_len)
		memcpy(p + 1, ext, ext_len);
	if (h->len &&
	    sv_copy_guarded((uint8_t *)(p + 1) + ext_len, data, h->len)) {
		*fault = true; /* never published */
		return false;
	}
	h->rec_len = qp->link.rsp_tx.last_rec;
	memcpy(p, h, offsetof(struct sv_pkt, seq));
	if (__builtin_expect(sv_pcap_on, 0))
		sv_pcap_train(qp, true, h, (uint8_t *)(p + 1),
			      (uint8_t *)(p + 1) + ext_len, NULL);
	sv_ring_publish(&qp->link.rsp_tx, p);
	if (unlikely(sv_inject.on))
		sv_inject_sent();
	sv_stat_add(qp, tx_pkts, h->npsn);
	sv_stat_add(qp, tx_bytes, h->len);
	return true;
}

/* An RDMA read: answered from our memory in MTU-sized PSNs, resumed where
 * it stopped when the response ring was full.  A duplicate (its response
 * was lost) is answered again from its RETH (IBA 9.7.5.1.2). */
static enum resp_result recv_read(struct sv_qp *qp, const struct sv_pkt *p,
				  const uint8_t *ext)
{
	bool dup = sv_psn_diff(p->psn, qp->resp.psn) < 0;
	const struct sv_opcode_info *o = &sv_opcodes[SV_OP_READ_REQ];
	uint32_t tmax = rsp_train_max(qp);
	enum sv_syndrome syn;
	struct sv_reth r;
	const uint8_t *src;
	bool fault = false;

	memcpy(&r, ext, sizeof(r));
	if ((qp->resp.in_msg && !dup) || p->seg != SV_SEG_ONLY || p->len)
		return fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_SUCCESS);
	if (!qp_allows(qp, o) || r.dma_len != p->msg_len)
		return refuse(qp, p, SV_NAK_INV_REQ);
	src = check_rkey(qp, r.rkey, r.va, r.dma_len, o->access, &syn);
	if (syn || (SV_FAULT_ON(access) && !dup && sv_resp_fault_access(qp, p)))
		return refuse(qp, p, syn ? syn : SV_NAK_REM_ACCESS);
	do {
		uint32_t chunk = r.dma_len - qp->resp.rd_sent;
		uint32_t k = qp->resp.rd_sent / qp->mtu;
		struct sv_pkt h = {.opcode = SV_OP_READ_RESP};

		if (chunk > tmax)
			chunk = tmax;
		h.seg = (qp->resp.rd_sent ? 0 : SV_SEG_FIRST) |
			(qp->resp.rd_sent + chunk == r.dma_len ? SV_SEG_LAST
							       : 0);
		h.psn = sv_psn_add(p->psn, k < p->npsn ? k : p->npsn - 1);
		h.npsn = chunk ? (chunk + qp->mtu - 1) / qp->mtu : 1;
		h.len = chunk;
		h.msg_len = r.dma_len;
		/* a zero-length read has no source (check_rkey: NULL) */
		if (!respond(qp, &h, NULL, 0,
			     chunk ? src + qp->resp.rd_sent : NULL, &fault)) {
			if (fault)
				return refuse(qp, p, SV_NAK_REM_ACCESS);
			return RESP_WAIT; /* the peer frees room, rings us */
		}
		qp->resp.rd_sent += chunk;
	} while (qp->resp.rd_sent < r.dma_len);
	qp->resp.rd_sent = 0;
	if (!dup)
		qp->resp.psn = sv_psn_add(qp->resp.psn, p->npsn);
	sv_link_rx_consume(&qp->link);
	return RESP_NEXT;
}

/* An ATOMIC_RESP record: its header and the AtomicAckETH. */
#define ATOMIC_RESP_LEN (sizeof(struct sv_pkt) + sizeof(struct sv_atomack))

/* Publishes the answer to the atomic at psn, the value before it, in
 * room (ATOMIC_RESP_LEN bytes reserved on the response ring): for the
 * atomic executed now and for a duplicate answered from the replay
 * cache alike (captured, counted, a packet for kill_at). */
static void atomic_publish(struct sv_qp *qp, void *room, uint32_t psn,
			   uint64_t orig)
{
	struct sv_pkt h = {.opcode = SV_OP_ATOMIC_RESP,
			   .seg = SV_SEG_ONLY,
			   .psn = psn,
			   .npsn = 1,
			   .msg_len = 8};
	struct sv_atomack ack = {.orig = orig};

	memcpy((struct sv_pkt *)room + 1, &ack, sizeof(ack));
	h.rec_len = qp->link.rsp_tx.last_rec;
	memcpy(room, &h, offsetof(struct sv_pkt, seq));
	if (__builtin_expect(sv_pcap_on, 0))
		sv_pcap_train(qp, true, &h, (uint8_t *)room + sizeof(h), NULL,
			      NULL);
	sv_ring_publish(&qp->link.rsp_tx, room);
	if (unlikely(sv_inject.on))
		sv_inject_sent();
	sv_stat_add(qp, tx_pkts, 1);
}

/* Compare-and-swap and fetch-and-add: one CPU atomic on our memory, so
 * they are atomic with the peers that execute theirs directly (req.c). */
static enum resp_result recv_atomic(struct sv_qp *qp, const struct sv_pkt *p,
				    const uint8_t *ext)
{
	const struct sv_opcode_info *o = &sv_opcodes[p->opcode];
	struct sv_atomack ack = {0};
	enum sv_syndrome syn;
	struct sv_atometh a;
	uint64_t *dst;
	int err = 0;
	void *room;

	memcpy(&a, ext, sizeof(a));
	if (qp->resp.in_msg || p->seg != SV_SEG_ONLY || p->len)
		return fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_SUCCESS);
	if (!qp_allows(qp, o) || (a.va & 7)) /* IBA 9.4.5: aligned */
		return refuse(qp, p, SV_NAK_INV_REQ);
	dst = (uint64_t *)check_rkey(qp, a.rkey, a.va, 8, o->access, &syn);
	if (syn || (SV_FAULT_ON(access) && sv_resp_fault_access(qp, p)))
		return refuse(qp, p, syn ? syn : SV_NAK_REM_ACCESS);
	if ((uintptr_t)dst & 7) /* an iova MR at an odd offset in memory */
		return refuse(qp, p, SV_NAK_INV_REQ);
	/* room for the answer first: an atomic is executed exactly once */
	room = sv_link_rsp_reserve(&qp->link, ATOMIC_RESP_LEN, &err);
	if (!room)
		return err ? refuse(qp, p, SV_NAK_REM_OP) : RESP_WAIT;
	/* the memory may go under the MR: a fault is an access error */
	if (sv_atomic_guarded(dst, a.compare, a.swap_add,
			      p->opcode == SV_OP_FETCH_ADD, &ack.orig))
		return refuse(qp, p, SV_NAK_REM_ACCESS); /* never published */
	atomic_publish(qp, room, p->psn, ack.orig);
	/* for a duplicate of it: its answer, not a second execution */
	qp->resp.atom_replay[qp->resp.atom_next % SV_ATOMIC_REPLAY].psn =
		p->psn;
	qp->resp.atom_replay[qp->resp.atom_next % SV_ATOMIC_REPLAY].orig =
		ack.orig;
	qp->resp.atom_replay[qp->resp.atom_next % SV_ATOMIC_REPLAY].valid =
		true;
	qp->resp.atom_next++;
	qp->resp.psn = sv_psn_add(qp->resp.psn, p->npsn);
	sv_link_rx_consume(&qp->link);
	return RESP_NEXT;
}

/* check_packet: an opcode we know as a request, its extension inside
 * the record; else NULL (the peer does not speak our protocol). */
static const struct sv_opcode_info *check_packet(const struct sv_pkt *p)
{
	const struct sv_opcode_info *o = sv_opcode(p->opcode);

	if (!o || !(o->mask & SV_M_REQ))
		return NULL;
	if ((uint64_t)sv_ext_len(o, p->seg) + p->len > p->rec_len - sizeof(*p))
		return NULL;
	if (p->len && !(o->mask & SV_M_PAYLOAD))
		return NULL;
	return o;
}

static enum resp_result execute(struct sv_qp *qp, const struct sv_pkt *p,
				const struct sv_opcode_info *o,
				const uint8_t *payload)
{
	const uint8_t *data = payload + sv_ext_len(o, p->seg);

	/* one-sided XRC needs the SRQ's PD and memory: its own context's */
	if (qp->xrc.fwd && o->handler != SV_H_SEND)
		return fwd_refuse(qp, p);
	switch ((enum sv_resp_handler)o->handler) {
	case SV_H_SEND:
		return recv_send(qp, p, payload);
	case SV_H_WRITE:
		return recv_write(qp, p, payload, data);
	case SV_H_READ:
		return recv_read(qp, p, payload);
	case SV_H_ATOMIC:
		return recv_atomic(qp, p, payload);
	case SV_H_NOTE:
		return recv_note(qp, p);
	case SV_H_NONE:
		break;
	}
	return fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_SUCCESS);
}

/*
 * IBA 9.3.6: on an XRC_RECV QP every request starts with an XRCETH, which
 * names the SRQ of its message; it is taken off the packet (p, payload)
 * and the SRQ bound.  Anywhere else a packet must not carry one.  -EINVAL:
 * the peer broke the protocol.
 */
static int take_xrceth(struct sv_qp *qp, struct sv_pkt *p,
		       const uint8_t **payload)
{
	struct sv_xrceth x;

	/* an XRC initiator has no responder: requests are for targets */
	if (qp->qpx.qp_base.qp_type == IBV_QPT_XRC_SEND)
		return -EINVAL;
	if (qp->qpx.qp_base.qp_type != IBV_QPT_XRC_RECV)
		return (p->flags & SV_PKT_XRC) ? -EINVAL : 0;
	if (!(p->flags & SV_PKT_XRC) || p->rec_len < sizeof(*p) + sizeof(x))
		return -EINVAL;
	memcpy(&x, *payload, sizeof(x));
	*payload += sizeof(x);
	p->rec_len -= sizeof(x);
	if (x.srqn > SV_PSN_MASK)
		return -EINVAL;
	return sv_xrc_bind(qp, x.srqn);
}

/* A duplicate atomic: its answer again, from the replay cache (IBA
 * 9.4.6: never executed twice); one the cache no longer holds is
 * dropped (the requester's next retry may find it... or time out). */
static enum resp_result dup_atomic(struct sv_qp *qp, const struct sv_pkt *p)
{
	int err = 0;
	void *room;
	uint32_t i;

	for (i = 0; i < SV_ATOMIC_REPLAY; i++)
		if (qp->resp.atom_replay[i].valid &&
		    qp->resp.atom_replay[i].psn == p->psn)
			break;
	if (i < SV_ATOMIC_REPLAY) {
		room = sv_link_rsp_reserve(&qp->link, ATOMIC_RESP_LEN, &err);
		if (!room)
			return err ? refuse(qp, p, SV_NAK_REM_OP) : RESP_WAIT;
		atomic_publish(qp, room, p->psn, qp->resp.atom_replay[i].orig);
		sv_link_rsp_commit(&qp->link);
	}
	sv_link_rx_consume(&qp->link);
	return RESP_NEXT;
}

/*
 * An XRC read or atomic again, on a lossy link (RoCE, or any with
 * SOFTVERBS_FAULTS drop): its answer may have been lost, so it is
 * answered again, its XRCETH taken off as for a new one; an SRQ bound
 * for it alone is let go after.  One that names another SRQ than the
 * message in progress is dropped.
 */
static enum resp_result dup_xrc(struct sv_qp *qp, struct sv_pkt *p,
				const uint8_t *payload)
{
	const struct sv_opcode_info *o = sv_opcode(p->opcode);
	bool bound = qp->srq || qp->xrc.fwd;
	enum resp_result res;

	if (take_xrceth(qp, p, &payload)) {
		sv_link_rx_consume(&qp->link);
		return RESP_NEXT;
	}
	if (o->handler == SV_H_ATOMIC) {
		res = dup_atomic(qp, p);
	} else if ((uint64_t)o->ext_len <= p->rec_len - sizeof(*p)) {
		res = recv_read(qp, p, payload);
	} else { /* a read request cut short: as a duplicate send */
		sv_link_rx_consume(&qp->link);
		res = RESP_NEXT;
	}
	if (!bound && !qp->resp.in_msg)
		sv_xrc_unbind(qp);
	return res;
}

/*
 * check_psn (IBA 9.7.5.1): d = the packet's PSN less the one we expect.
 * Ahead (a packet was lost before it): one NAK-seq for the expected PSN,
 * and later ones discarded silently until it arrives — but a packet at or
 * before the last one discarded may start the requester's next round,
 * whose first packet was lost too: if the next packet is out of sequence
 * as well, it is NAKed again; if it is the one we expect, it was only
 * late (reordered), and a NAK then would send the round a second time
 * (SOFTVERBS_FAULTS reorder_out: two or three rounds, and a socket full
 * of stale ones).  rxe NAKs a gap once and leaves the rest to the
 * requester's ACK timer.  Behind: a
 * duplicate, re-ACKed; a read is answered again and an atomic from the
 * replay cache.  In sequence (d 0, SOFTVERBS_FAULTS drop): the train is
 * lost with the probability that any of its PSNs is, each (PSN, attempt)
 * decided once.  RESP_WAIT: go on with the packet (d 0), or leave it at
 * the head (a duplicate read, no room for its answer).
 */
static enum resp_result check_psn(struct sv_qp *qp, struct sv_pkt *p,
				  const uint8_t *payload, int32_t d)
{
	const struct sv_opcode_info *o;

	if (d > 0) {
		if (!qp->resp.seq_naked || qp->resp.seq_suspect) {
			qp->resp.seq_naked = true;
			qp->resp.seq_nak_new = true;
			sv_resp_nak(qp, qp->resp.psn, SV_NAK_SEQ);
		} else if (sv_psn_diff(p->psn, qp->resp.nak_from) <= 0) {
			qp->resp.seq_suspect = true;
		}
		qp->resp.nak_from = p->psn;
		qp->resp.seq_dropped = true;
		sv_link_rx_consume(&qp->link);
		return RESP_NEXT;
	}
	if (d < 0) {
		o = sv_opcode(p->opcode);
		if (o && (p->flags & SV_PKT_XRC) &&
		    (sv_link_lossy(&qp->link) || SV_FAULT_ON(drop)) &&
		    (o->mask & SV_M_RD_ATOMIC))
			return dup_xrc(qp, p, payload);
		if (is_uc(qp) || !o || (p->flags & SV_PKT_XRC)) {
			sv_link_rx_consume(&qp->link);
			return RESP_NEXT;
		}
		if (o->handler == SV_H_READ &&
		    (uint64_t)o->ext_len <= p->rec_len - sizeof(*p))
			return recv_read(qp, p, payload);
		if (o->handler == SV_H_ATOMIC)
			return dup_atomic(qp, p);
		sv_link_rx_consume(&qp->link);
		return RESP_NEXT;
	}
	switch (sv_resp_fault_drop(qp, p)) {
	case SV_LOSS_NONE:
	case SV_LOSS_CUT: /* p: the packets before the lost one */
		return RESP_WAIT;
	case SV_LOSS_FIRST:
		/* its first packet lost, the next ones came out of
		 * sequence: one NAK-seq, the rest discarded */
		sv_link_rx_consume(&qp->link);
		sv_resp_cut_answer(qp, p->psn, p->npsn);
		return RESP_NEXT;
	case SV_LOSS_ALL:
		break;
	}
	if (is_uc(qp))
		return drop_msg(qp, p); /* the message is lost */
	sv_link_rx_consume(&qp->link);
	return RESP_NEXT;
}

/*
 * UC, a packet not at the PSN we expect (IBA 9.8.3; rxe check_psn): a
 * packet was lost (or came again, or late).  The message in progress is
 * dropped, its receive WQE kept for the next (no completion: UC never
 * says), and a FIRST or ONLY starts afresh at its PSN: false, *d 0, go
 * on with it.  Any other packet is dropped, and those after it until one
 * does: true, consumed.
 */
static bool uc_resync(struct sv_qp *qp, const struct sv_pkt *p, int32_t *d)
{
	qp->resp.in_msg = qp->resp.write = false;
	qp->resp.drop = false;
	if (p->seg & SV_SEG_FIRST) {
		qp->resp.psn = p->psn;
		*d = 0;
		return false;
	}
	sv_stat_add(qp, uc_seq_drops, 1);
	sv_link_rx_consume(&qp->link);
	return true;
}

/* A packet's XRCETH and header checked: its opcode's row, or NULL with
 * the QP in ERROR (the requester broke the protocol). */
static const struct sv_opcode_info *admit(struct sv_qp *qp, struct sv_pkt *p,
					  const uint8_t **payload)
{
	const struct sv_opcode_info *o = NULL;

	if (!take_xrceth(qp, p, payload))
		o = check_packet(p);
	if (!o)
		fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_SUCCESS);
	return o;
}

/* After a run: the answers out; the ACK of what was taken (ack, set at
 * ack_nak_seq) unless a NAK was written after it (RNR, sequence), which
 * stays, as it acknowledges what is before it too; the ring told what
 * was consumed, or the next receive read ahead. */
static void run_end(struct sv_qp *qp, bool consumed, bool responded, bool ack,
		    uint32_t ack_nak_seq)
{
	if (responded || qp->resp.rd_sent)
		sv_link_rsp_commit(&qp->link);
	if (qp->qpx.qp_base.qp_type != IBV_QPT_UC)
		sv_resp_refill_nak(qp);
	if (ack && ack_nak_seq == qp->resp.nak_seq)
		sv_resp_ack_last(qp);
	if (consumed)
		sv_link_rx_done(&qp->link);
	else if (qp->qpx.qp_base.qp_type == IBV_QPT_RC)
		sv_resp_warm(qp);
}

void sv_resp_run(struct sv_qp *qp)
{
	enum ibv_qp_state s = qp->attr.qp_state;
	bool ack = false, consumed = false, responded = false;
	uint32_t ack_nak_seq = 0; /* resp_nak_seq when ack was set */
	uint32_t npsn;		  /* the train's PSNs as it came */

	if (qp->qpx.qp_base.qp_type == IBV_QPT_UD) {
		/* datagrams, no link (ud/recv.c) */
		sv_ud_recv_run(qp, sv_srq_take);
		return;
	}
	if (s < IBV_QPS_RTR || s == IBV_QPS_ERR || !qp->link.rx_ready)
		return;
	for (;;) {
		const struct sv_opcode_info *o;
		const uint8_t *payload;
		struct sv_pkt p;
		int32_t d;
		int r = sv_link_rx_peek(&qp->link, &p, &payload);

		if (r == 0)
			break;
		if (r < 0 || p.npsn == 0 || p.npsn > (1u << 20)) {
			sv_dbg("qp %06x: malformed packet in ring\n",
			       qp->qpx.qp_base.qp_num);
			sv_qp_to_error(qp, IBV_EVENT_QP_FATAL);
			return;
		}
		if (__builtin_expect(sv_pcap_on, 0))
			sv_resp_pcap_rx(qp, &p, payload);
		npsn = p.npsn;
		d = sv_psn_diff(p.psn, qp->resp.psn);
		if (d != 0 && is_uc(qp) && uc_resync(qp, &p, &d)) {
			consumed = true;
			continue;
		}
		/* in sequence: a NAK-seq sent before no longer stands, and
		 * the next gap is NAKed again (check_psn) */
		if (d == 0)
			qp->resp.seq_naked = qp->resp.seq_suspect = false;
		if (d != 0 || SV_FAULT_ON(drop)) {
			if (d != 0)
				sv_stat_add(qp, rx_pkts, 1);
			switch (check_psn(qp, &p, payload, d)) {
			case RESP_NEXT:
				if (d < 0) { /* re-ACK a duplicate */
					ack = true;
					ack_nak_seq = qp->resp.nak_seq;
				}
				consumed = true;
				continue;
			case RESP_GONE: /* not from check_psn */
			case RESP_WAIT:
				break;
			case RESP_FATAL:
				return;
			}
			if (d != 0)
				break; /* a duplicate read waits for room */
		}
		o = admit(qp, &p, &payload);
		if (!o)
			return;
		switch (execute(qp, &p, o, payload)) {
		case RESP_NEXT:
			sv_stat_add(qp, rx_pkts,
				    p.opcode == SV_OP_READ_REQ ? 1 : p.npsn);
			sv_stat_add(qp, rx_bytes, p.len);
			if (qp->qpx.qp_base.qp_type == IBV_QPT_XRC_RECV &&
			    !qp->resp.in_msg)
				sv_xrc_unbind(qp); /* the message is done */
			if (p.seg & SV_SEG_LAST || p.npsn != npsn ||
			    (p.flags & SV_PKT_ACK_REQ)) {
				ack = true;
				ack_nak_seq = qp->resp.nak_seq;
			}
			if (p.npsn != npsn) /* cut: the rest was lost; a */
				sv_resp_cut_answer(qp, p.psn,
						   npsn); /* NAK stays */
			responded |= (o->mask & SV_M_RD_ATOMIC) != 0;
			consumed = true;
			continue;
		case RESP_GONE:
			consumed = true;
			continue;
		case RESP_WAIT:
			break;
		case RESP_FATAL:
			return;
		}
		break;
	}
	run_end(qp, consumed, responded, ack, ack_nak_seq);
}
