// SPDX-License-Identifier: MIT
/*
 * The responder: takes packets off the link in PSN order, places SEND
 * payloads into the posted receive WQEs (scatter, with key checks),
 * completes them, and acknowledges.  With no receive posted it answers
 * RNR NAK and keeps the packet until a receive arrives or the requester
 * gives up (the rnr word in the ring settles who wins).
 */
#include <string.h>

#include "sv.h"

enum resp_result {
	RESP_NEXT,  /* packet consumed; look at the next */
	RESP_WAIT,  /* leave it: no receive WQE yet */
	RESP_FATAL, /* the QP went to ERROR */
};

static uint64_t ack_word(uint32_t psn, enum sv_syndrome syn, uint32_t timer,
			 uint32_t seq)
{
	return (psn & SV_PSN_MASK) | (uint64_t)syn << 24 |
	       (uint64_t)(timer & 0xff) << 32 | (uint64_t)seq << 40;
}

static void nak(struct sv_qp *qp, uint32_t psn, enum sv_syndrome syn)
{
	sv_link_ack_put(&qp->link, ack_word(psn, syn, qp->attr.min_rnr_timer,
					    ++qp->resp_nak_seq));
}

static struct ibv_sge *rwqe_sge(struct sv_qp *qp, const struct sv_rwqe *r)
{
	return &qp->rq_sge[(size_t)(r - qp->rq) * qp->max_recv_sge];
}

/* Scatters len bytes at the receive cursor; false on a bad key/range or
 * on memory the application took away under its registration. */
static bool scatter(struct sv_qp *qp, struct sv_rwqe *r, const uint8_t *src,
		    uint32_t len)
{
	struct sv_pd *pd = container_of(qp->qpx.qp_base.pd, struct sv_pd, ibv);
	const struct ibv_sge *sg = rwqe_sge(qp, r);

	while (len) {
		const struct ibv_sge *s;
		struct sv_mr *mr;
		uint32_t n;

		if (qp->resp_sge_idx >= r->num_sge)
			return false;
		s = &sg[qp->resp_sge_idx];
		n = s->length - qp->resp_sge_off;
		if (n > len)
			n = len;
		if (n) {
			uint64_t a = s->addr + qp->resp_sge_off;

			mr = sv_mr_lookup(qp->ctx, s->lkey, pd);
			if (!mr || !(mr->access & IBV_ACCESS_LOCAL_WRITE) ||
			    a < mr->iova || a - mr->iova > mr->length ||
			    n > mr->length - (a - mr->iova))
				return false;
			if (sv_copy_guarded(mr->addr + (a - mr->iova), src, n))
				return false;
		}
		src += n;
		len -= n;
		qp->resp_sge_off += n;
		if (qp->resp_sge_off == s->length) {
			qp->resp_sge_idx++;
			qp->resp_sge_off = 0;
		}
	}
	return true;
}

static void complete_recv(struct sv_qp *qp, enum ibv_wc_status status,
			  const struct sv_pkt *p)
{
	struct sv_rwqe *r = &qp->rq[qp->rq_comp & (qp->rq_size - 1)];
	struct ibv_wc wc = {
		.wr_id = r->wr_id,
		.status = status,
		.opcode = IBV_WC_RECV,
		.byte_len = qp->resp_msg,
		.qp_num = qp->qpx.qp_base.qp_num,
		.src_qp = qp->attr.dest_qp_num,
		.slid = qp->attr.ah_attr.dlid,
		.sl = qp->attr.ah_attr.sl,
	};

	if (status == IBV_WC_SUCCESS && (p->flags & SV_PKT_IMM)) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = p->imm;
	}
	qp->rq_comp++;
	qp->resp_in_msg = false;
	sv_cq_push(qp->rcq, &wc, p->flags & SV_PKT_SOLICITED);
}

/* The requester broke the protocol: no guessing, the QP is done. */
static enum resp_result fatal(struct sv_qp *qp, const struct sv_pkt *p,
			      enum sv_syndrome syn, enum ibv_wc_status st)
{
	if (qp->resp_in_msg || st != IBV_WC_SUCCESS)
		complete_recv(
			qp, st == IBV_WC_SUCCESS ? IBV_WC_REM_INV_REQ_ERR : st,
			p);
	nak(qp, p->psn, syn);
	sv_qp_to_error(qp, IBV_EVENT_QP_REQ_ERR);
	return RESP_FATAL;
}

/* IBA 9.7.5.2.8: no receive WQE.  Returns false to wait. */
static bool take_rwqe(struct sv_qp *qp, const struct sv_pkt *p)
{
	_Atomic uint32_t *rnr = &qp->link.rx.hdr->rnr;
	uint32_t expect = SV_RNR_WAIT;

	if (qp->rq_comp == qp->rq_post) {
		if (!qp->resp_rnr) {
			atomic_store(rnr, SV_RNR_WAIT);
			qp->resp_rnr = true;
			nak(qp, p->psn, SV_NAK_RNR);
		}
		return false;
	}
	if (qp->resp_rnr) {
		qp->resp_rnr = false;
		if (!atomic_compare_exchange_strong(rnr, &expect,
						    SV_RNR_NONE)) {
			/* the requester gave up on this message: drop it */
			atomic_store(rnr, SV_RNR_NONE);
			qp->resp_drop = true;
		}
	}
	return true;
}

static enum resp_result recv_send(struct sv_qp *qp, const struct sv_pkt *p,
				  const uint8_t *payload)
{
	struct sv_rwqe *r;

	if (p->seg & SV_SEG_FIRST) {
		if (qp->resp_in_msg)
			return fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_SUCCESS);
		if (!take_rwqe(qp, p))
			return RESP_WAIT;
		if (qp->resp_drop)
			goto consumed;
		r = &qp->rq[qp->rq_comp & (qp->rq_size - 1)];
		qp->resp_in_msg = true;
		qp->resp_msg = p->msg_len;
		qp->resp_off = 0;
		qp->resp_sge_idx = qp->resp_sge_off = 0;
		if (p->msg_len > r->length) /* IBA 9.7.5.2.2 */
			return fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_LOC_LEN_ERR);
	} else if (qp->resp_drop) {
		goto consumed;
	} else if (!qp->resp_in_msg) {
		return fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_SUCCESS);
	}
	r = &qp->rq[qp->rq_comp & (qp->rq_size - 1)];
	if (p->len > qp->resp_msg - qp->resp_off ||
	    ((p->seg & SV_SEG_LAST) && qp->resp_off + p->len != qp->resp_msg))
		return fatal(qp, p, SV_NAK_INV_REQ, IBV_WC_SUCCESS);
	if (!scatter(qp, r, payload, p->len))
		return fatal(qp, p, SV_NAK_REM_OP, IBV_WC_LOC_PROT_ERR);
	qp->resp_off += p->len;
consumed:
	qp->resp_psn = sv_psn_add(qp->resp_psn, p->npsn);
	sv_link_rx_consume(&qp->link);
	if (p->seg & SV_SEG_LAST) {
		if (qp->resp_drop)
			qp->resp_drop = false;
		else
			complete_recv(qp, IBV_WC_SUCCESS, p);
	}
	return RESP_NEXT;
}

void sv_resp_run(struct sv_qp *qp)
{
	enum ibv_qp_state s = qp->qpx.qp_base.state;
	bool ack = false, consumed = false;

	if (s < IBV_QPS_RTR || s == IBV_QPS_ERR || !qp->link.rx_ready)
		return;
	for (;;) {
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
		d = sv_psn_diff(p.psn, qp->resp_psn);
		if (d != 0) {
			/* a reliable ring never reorders: this peer is
			 * confused about PSNs (IBA 9.7.5.1.1: NAK-seq) */
			sv_link_rx_consume(&qp->link);
			nak(qp, qp->resp_psn, SV_NAK_SEQ);
			continue;
		}
		if (p.opcode != SV_OP_SEND) {
			fatal(qp, &p, SV_NAK_INV_REQ, IBV_WC_SUCCESS);
			return;
		}
		switch (recv_send(qp, &p, payload)) {
		case RESP_NEXT:
			ack |= (p.seg & SV_SEG_LAST) != 0;
			consumed = true;
			continue;
		case RESP_WAIT:
			break;
		case RESP_FATAL:
			return;
		}
		break;
	}
	if (ack)
		sv_link_ack_set(&qp->link,
				ack_word(sv_psn_add(qp->resp_psn, SV_PSN_MASK),
					 SV_ACK, 0, qp->resp_nak_seq));
	if (consumed)
		sv_link_rx_done(&qp->link);
}
