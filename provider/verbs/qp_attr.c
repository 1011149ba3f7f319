// SPDX-License-Identifier: MIT
/*
 * A QP's attributes: the checks of ibv_create_qp's init attributes and of
 * ibv_modify_qp's values, what a modify stores (qp.c runs the state
 * change around these), and ibv_query_qp.  Every check returns a positive
 * errno and changes nothing.
 */
#include <string.h>

#include "qp_attr.h"
#include "verbs.h"

/* XRC_RECV (IBA 11.8): a domain of this context, and nothing else — no
 * PD, CQs, SRQ or queues (the kernel ignores them; we say EINVAL for an
 * SRQ, which could only mislead).  XRC_SEND: a PD and a send CQ, no
 * receive side. */
static int check_xrc_attr(struct ibv_context *ctx,
			  const struct ibv_qp_init_attr_ex *a)
{
	if (a->qp_type == IBV_QPT_XRC_RECV)
		return (a->comp_mask & IBV_QP_INIT_ATTR_XRCD) && a->xrcd &&
				       a->xrcd->context == ctx && !a->srq
			       ? 0
			       : EINVAL;
	if (!a->pd || !a->send_cq || a->srq || a->cap.max_recv_wr ||
	    a->cap.max_recv_sge)
		return EINVAL;
	return 0;
}

int sv_qp_check_init_attr(struct ibv_context *ctx,
			  const struct ibv_qp_init_attr_ex *a)
{
	const struct ibv_qp_cap *c = &a->cap;
	bool srq = a->srq != NULL;
	int err;

	if (sv_ctx_is_roce(ctx)) { /* RC only on softverbs_roce0 yet */
		err = sv_roce_qp_type_check(a->qp_type);
		if (err)
			return err;
	}

	if (a->qp_type == IBV_QPT_XRC_SEND || a->qp_type == IBV_QPT_XRC_RECV) {
		err = check_xrc_attr(ctx, a);
		if (err || a->qp_type == IBV_QPT_XRC_RECV)
			return err;
	} else if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC &&
		   a->qp_type != IBV_QPT_UD) {
		return EOPNOTSUPP; /* raw packet: not yet */
	} else if (!a->send_cq || !a->recv_cq) {
		return EINVAL;
	}
	/* an SRQ of this context (one process): its QPs share its memory */
	if (srq && a->srq->context != ctx)
		return EINVAL;
	if (c->max_send_wr > SV_MAX_QP_WR ||
	    (!srq && c->max_recv_wr > SV_MAX_QP_WR) ||
	    c->max_send_sge > SV_MAX_SGE ||
	    (!srq && c->max_recv_sge > SV_MAX_SGE) ||
	    c->max_inline_data > SV_MAX_INLINE)
		return EINVAL;
	return 0;
}

/* Value checks for the attributes present in mask. */
int sv_qp_check_attr(struct sv_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	if ((mask & IBV_QP_PORT) && a->port_num != 1)
		return EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0)
		return EINVAL;
	if ((mask & IBV_QP_PATH_MTU) && !sv_port_mtu_bytes(a->path_mtu))
		return EINVAL;
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > SV_PSN_MASK)
		return EINVAL;
	if ((mask & IBV_QP_RQ_PSN) && a->rq_psn > SV_PSN_MASK)
		return EINVAL;
	if ((mask & IBV_QP_SQ_PSN) && a->sq_psn > SV_PSN_MASK)
		return EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) &&
	    a->max_dest_rd_atomic > SV_MAX_RD_ATOM)
		return EINVAL;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) &&
	    a->max_rd_atomic > SV_MAX_RD_ATOM)
		return EINVAL;
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
		return EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
		return EINVAL;
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
		return EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
		return EINVAL;
	if ((mask & IBV_QP_CUR_STATE) && a->cur_qp_state != qp->attr.qp_state)
		return EINVAL;
	if ((mask & IBV_QP_AV) && sv_ctx_is_roce(&qp->ctx->vctx.context))
		return sv_roce_av_check(&a->ah_attr); /* a GRH: Ethernet */
	if (mask & IBV_QP_AV)
		return sv_av_check(&a->ah_attr, "ibv_modify_qp",
				   qp->qpx.qp_base.qp_type != IBV_QPT_UD);
	return 0;
}

void sv_qp_store_attr(struct sv_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	struct ibv_qp_attr *s = &qp->attr;

#define TAKE(bit, field)                     \
	do {                                 \
		if (mask & IBV_QP_##bit)     \
			s->field = a->field; \
	} while (0)
	TAKE(ACCESS_FLAGS, qp_access_flags);
	TAKE(PKEY_INDEX, pkey_index);
	TAKE(PORT, port_num);
	TAKE(AV, ah_attr);
	TAKE(PATH_MTU, path_mtu);
	TAKE(DEST_QPN, dest_qp_num);
	TAKE(RQ_PSN, rq_psn);
	TAKE(SQ_PSN, sq_psn);
	TAKE(MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
	TAKE(MAX_QP_RD_ATOMIC, max_rd_atomic);
	TAKE(MIN_RNR_TIMER, min_rnr_timer);
	TAKE(TIMEOUT, timeout);
	TAKE(RETRY_CNT, retry_cnt);
	TAKE(RNR_RETRY, rnr_retry);
	TAKE(ALT_PATH, alt_ah_attr);
	TAKE(PATH_MIG_STATE, path_mig_state);
	TAKE(EN_SQD_ASYNC_NOTIFY, en_sqd_async_notify);
	TAKE(QKEY, qkey);
#undef TAKE
	if (mask & IBV_QP_PATH_MTU)
		qp->mtu = (uint32_t)sv_port_mtu_bytes(a->path_mtu);
	if (mask & IBV_QP_RQ_PSN)
		qp->resp.psn = a->rq_psn;
	if (mask & IBV_QP_SQ_PSN)
		qp->req.psn = a->sq_psn;
}

int sv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		struct ibv_qp_init_attr *init)
{
	struct sv_qp *qp = to_sqp(ibqp);

	sv_lock(&qp->lock);
	*attr = qp->attr;
	attr->cur_qp_state = qp->attr.qp_state;
	/* as rdma-core's ibv_query_qp: the program's copy catches up */
	if (mask & IBV_QP_STATE)
		ibqp->state = qp->attr.qp_state;
	attr->cap.max_send_wr = qp->sq.max;
	attr->cap.max_recv_wr = qp->rq.max;
	attr->cap.max_send_sge = qp->max_send_sge;
	attr->cap.max_recv_sge = qp->srq ? 0 : qp->max_recv_sge;
	attr->cap.max_inline_data = qp->max_inline;
	attr->sq_draining = 0;
	sv_unlock(&qp->lock);
	memset(init, 0, sizeof(*init));
	init->qp_context = ibqp->qp_context;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = attr->cap;
	init->qp_type = ibqp->qp_type;
	init->sq_sig_all = qp->sq.sig_all;
	return 0;
}
