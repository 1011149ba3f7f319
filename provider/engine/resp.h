/* SPDX-License-Identifier: MIT */
/*
 * The responder's own (resp.c, warm.c): what its parts share.
 */
#ifndef SV_RESP_H
#define SV_RESP_H

#include "core.h"
#include "objects.h"

/* The PD that checks keys: the QP's, or on an XRC_RECV QP the PD of the
 * XRC SRQ the message names (IBA 11.8: the target QP has none). */
static inline struct sv_pd *sv_resp_pd(const struct sv_qp *qp)
{
	if (qp->qpx.qp_base.qp_type == IBV_QPT_XRC_RECV)
		return qp->srq ? to_spd(qp->srq->ibv.pd) : NULL;
	return to_spd(qp->qpx.qp_base.pd);
}

/* The SGEs of receive WQE r. */
static inline struct ibv_sge *sv_rwqe_sge(struct sv_qp *qp,
					  const struct sv_rwqe *r)
{
	return &qp->rq.sge[(size_t)(r - qp->rq.wqe) * qp->max_recv_sge];
}

/* Memory windows at the responder (core/mw.c), here so that resp.c
 * stays one call each.  check_rkey's window key: where [va, va+len) is,
 * through this QP (a type 2 window's own), or NULL with *syn as set. */
static inline uint8_t *sv_resp_mw_at(struct sv_qp *qp, uint32_t rkey,
				     uint64_t va, uint64_t len,
				     unsigned int access, enum sv_syndrome *syn)
{
	uint8_t *at = sv_mw_at(qp->ctx, rkey, sv_resp_pd(qp),
			       qp->qpx.qp_base.qp_num, va, len, access);

	if (at)
		*syn = SV_ACK;
	return at;
}

/* IBA 9.4.1.1, SEND with Invalidate: the last packet's key, a type 2
 * window of our PD bound to this QP, is invalid from now on; false if it
 * names no such window (class J: an invalid request). */
static inline bool sv_resp_invalidate(struct sv_qp *qp, const struct sv_pkt *p)
{
	return !(p->flags & SV_PKT_INV) || !(p->seg & SV_SEG_LAST) ||
	       !sv_mw_invalidate(qp->ctx, p->imm, sv_resp_pd(qp),
				 qp->qpx.qp_base.qp_num);
}

/* A receive's completion says which key a SEND with Invalidate killed. */
static inline void sv_resp_wc_inv(struct ibv_wc *wc, const struct sv_pkt *p)
{
	if (wc->status == IBV_WC_SUCCESS && (p->flags & SV_PKT_INV)) {
		wc->wc_flags |= IBV_WC_WITH_INV;
		wc->invalidated_rkey = p->imm;
	}
}

/* While idle, reads a little more of the next receive's buffer (warm.c). */
void sv_resp_warm(struct sv_qp *qp);
/* Whether sv_resp_warm would do nothing now. */
bool sv_resp_warm_done(const struct sv_qp *qp);

/* SOFTVERBS_FAULTS at the responder (resp_inject.c): true if this
 * attempt of the message at the head is refused as RNR / as a bad key. */
bool sv_resp_fault_rnr(struct sv_qp *qp, const struct sv_pkt *p);
bool sv_resp_fault_access(struct sv_qp *qp, const struct sv_pkt *p);

/* What drop does to a train that came in sequence. */
enum sv_resp_loss {
	SV_LOSS_NONE,  /* it arrived whole */
	SV_LOSS_CUT,   /* p now holds only the packets before the lost one */
	SV_LOSS_FIRST, /* its first packet was lost, later ones came */
	SV_LOSS_ALL,   /* lost whole */
};
enum sv_resp_loss sv_resp_fault_drop(struct sv_qp *qp, struct sv_pkt *p);

/* SOFTVERBS_PCAP: a request as it came, once (resp_pcap.c). */
void sv_resp_pcap_rx(struct sv_qp *qp, const struct sv_pkt *p,
		     const uint8_t *payload);

/* resp_ack.c: what the responder tells the requester.  A NAK of kind
 * syn at psn; an ACK of all before the PSN we expect; a train cut short
 * at psn (npsn PSNs) by a loss, NAK-seq'd if the rest matters; the NAK
 * of a gap filled in the same run (refill); an RNR NAK that drops the
 * packet (a lossy link). */
void sv_resp_nak(struct sv_qp *qp, uint32_t psn, enum sv_syndrome syn);
void sv_resp_ack_last(struct sv_qp *qp);
void sv_resp_cut_answer(struct sv_qp *qp, uint32_t psn, uint32_t npsn);
void sv_resp_refill_nak(struct sv_qp *qp);
void sv_resp_rnr_drop(struct sv_qp *qp, const struct sv_pkt *p);

#endif
