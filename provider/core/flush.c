// SPDX-License-Identifier: MIT
/*
 * A QP's flush (IBA 10.3.1): every outstanding WR completes with
 * IBV_WC_WR_FLUSH_ERR.  Called by the engine (post to an ERR QP, the error
 * transition, which destroy goes through) and by the UD transport (a
 * send queue in SQE), so it is in core/, below them all.
 */
#include "core.h"
#include "objects.h"

/* Flushes the send queue alone (SQE: receives go on). */
void sv_qp_flush_sq(struct sv_qp *qp)
{
	struct ibv_wc wc = {.status = IBV_WC_WR_FLUSH_ERR,
			    .opcode = IBV_WC_SEND,
			    .qp_num = qp->qpx.qp_base.qp_num};

	for (; qp->sq.comp != qp->sq.post; qp->sq.comp++) {
		if (qp->destroying)
			continue; /* no completion outlives its QP */
		wc.wr_id = qp->sq.wqe[qp->sq.comp & (qp->sq.size - 1)].wr_id;
		sv_cq_push(qp->scq, &wc, false);
		sv_stat_wc(qp, wc.status);
	}
	qp->sq.send = qp->sq.post;
}

static void flush_rq(struct sv_qp *qp)
{
	struct ibv_wc wc = {.status = IBV_WC_WR_FLUSH_ERR,
			    .opcode = IBV_WC_RECV,
			    .qp_num = qp->qpx.qp_base.qp_num};

	for (; qp->rq.comp != qp->rq.post; qp->rq.comp++) {
		if (qp->destroying)
			continue;
		wc.wr_id = qp->rq.wqe[qp->rq.comp & (qp->rq.size - 1)].wr_id;
		sv_cq_push(qp->rcq, &wc, false);
		sv_stat_wc(qp, wc.status);
	}
	qp->resp.rnr = false;
}

/* IBA 10.3.1: in the Error state every outstanding and new WR completes
 * with a flush error.  Caller holds qp->lock. */
void sv_qp_flush(struct sv_qp *qp)
{
	if (qp->sq.comp != qp->sq.post || qp->rq.comp != qp->rq.post)
		sv_dbg("qp %06x: flushing %u sends, %u receives%s\n",
		       qp->qpx.qp_base.qp_num, qp->sq.post - qp->sq.comp,
		       qp->rq.post - qp->rq.comp,
		       qp->destroying ? " (destroyed: no completions)" : "");
	sv_qp_flush_sq(qp);
	flush_rq(qp);
}
