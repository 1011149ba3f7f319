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

#endif
