/* SPDX-License-Identifier: MIT */
/*
 * The responder's own (resp.c, warm.c): what its parts share.
 */
#ifndef SV_RESP_H
#define SV_RESP_H

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

/* While idle, reads a little more of the next receive's buffer (warm.c). */
void sv_resp_warm(struct sv_qp *qp);

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

#endif
