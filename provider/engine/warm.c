// SPDX-License-Identifier: MIT
/*
 * The responder's read-ahead.  While idle, reads the next receive's
 * buffer into our cache, a few lines a look: the copy out of the ring
 * then writes warm lines.  A program
 * that cycles through many buffers (UCX rc_verbs: 4095 of 8 KiB on an
 * SRQ) otherwise pays a miss per line of every receive on its critical
 * path (bench/results/srq/README.md).  As long as the last message, at
 * most SV_WARM_RECV_MAX bytes (larger ones are placed by the sender, or
 * are bandwidth-bound), and only after a send that came through the
 * ring: one the sender placed (req.c place_pays: a warm buffer, a busy
 * receiver) tells that it writes the next one too, and lines we pulled
 * over would cost its writes a trip each (ib_send_lat -s 4096, which
 * reuses one buffer and never reads it: 0.78 -> 1.74 us a round trip
 * when we read ahead regardless).  Only a hint: a WQE taken back by the SRQ
 * meanwhile costs a few useless reads, and an address the application unmapped
 * none.
 */
#include "core.h"
#include "objects.h"
#include "resp.h"

#define SV_WARM_RECV_MAX 8192u
#define SV_WARM_STEP	 1024u /* bytes read ahead per idle look */

void sv_resp_warm(struct sv_qp *qp)
{
	uint32_t len = qp->resp.msg, n;

	if (!len || len > SV_WARM_RECV_MAX || qp->resp.in_msg ||
	    qp->resp.placed)
		return;
	if (qp->resp.warm_wqe != qp->rq.comp + 1) {
		const struct sv_rwqe *r;
		const struct ibv_sge *sg;
		struct sv_mr *mr;
		bool have;

		qp->resp.warm_len = qp->resp.warm_done = 0;
		if (qp->srq) { /* lent WQEs: under the SRQ's lock */
			sv_lock(&qp->srq->lock);
			have = qp->rq.comp != qp->rq.post;
			sv_unlock(&qp->srq->lock);
		} else {
			have = qp->rq.comp != qp->rq.post;
		}
		if (!have)
			return; /* looked for again next time */
		qp->resp.warm_wqe = qp->rq.comp + 1;
		r = &qp->rq.wqe[qp->rq.comp & (qp->rq.size - 1)];
		sg = sv_rwqe_sge(qp, r);
		if (!r->num_sge || !sg[0].length)
			return;
		mr = sv_mr_lookup(qp->ctx, sg[0].lkey, sv_resp_pd(qp));
		if (!mr || sg[0].addr < mr->iova ||
		    sg[0].addr - mr->iova >= mr->length)
			return;
		if (len > sg[0].length)
			len = sg[0].length;
		if (len > mr->length - (sg[0].addr - mr->iova))
			len = (uint32_t)(mr->length - (sg[0].addr - mr->iova));
		qp->resp.warm_buf = mr->addr + (sg[0].addr - mr->iova);
		qp->resp.warm_len = len;
	}
	if (qp->resp.warm_done >= qp->resp.warm_len)
		return;
	n = qp->resp.warm_len - qp->resp.warm_done;
	if (n > SV_WARM_STEP)
		n = SV_WARM_STEP;
	for (uint32_t o = 0; o < n; o += 64)
		__builtin_prefetch(qp->resp.warm_buf + qp->resp.warm_done + o,
				   0, 3);
	qp->resp.warm_done += n;
	if (qp->resp.warm_done >= qp->resp.warm_len)
		sv_stat_add(qp, warmed_recvs, 1);
}

bool sv_resp_warm_done(const struct sv_qp *qp)
{
	uint32_t len = qp->resp.msg;

	if (qp->qpx.qp_base.qp_type != IBV_QPT_RC || !len ||
	    len > SV_WARM_RECV_MAX || qp->resp.in_msg || qp->resp.placed)
		return true;
	/* no receive posted: nothing to read ahead until one is, and its
	 * post changes rq.post (an SRQ's lent WQEs are under its lock: it
	 * is asked by a run) */
	if (!qp->srq && qp->rq.comp == qp->rq.post)
		return true;
	return qp->resp.warm_wqe == qp->rq.comp + 1 &&
	       qp->resp.warm_done >= qp->resp.warm_len;
}
