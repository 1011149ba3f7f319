// SPDX-License-Identifier: MIT
/*
 * SOFTVERBS_PCAP at the responder: each request as it came, once.
 */
#include "resp.h"

#include "core.h"
#include "engine.h"
#include "pcap.h"

/*
 * SOFTVERBS_PCAP: a request as it came.  A send the requester placed in
 * our receive buffer (req.c try_place) shows its bytes from there: the
 * receive it takes is our next (rq_comp; on an SRQ one lent to us, as
 * warm.c finds it), if this is the PSN we expect.  A duplicate's
 * receive is done with: its bytes are not at hand (written as cut).
 */
static __attribute__((noinline, cold)) void
pcap_rx(struct sv_qp *qp, const struct sv_pkt *p, const uint8_t *payload)
{
	struct sv_pd *pd = sv_resp_pd(qp);
	struct ibv_sge s[SV_RDESC_SGE];
	struct sv_pcap_sg sg = {.sge = s, .n = 0};
	const struct sv_rwqe *r;
	const struct ibv_sge *rs;
	bool have;

	if (!(p->flags & SV_PKT_PLACED) || p->psn != qp->resp.psn || !pd) {
		sv_pcap_train(qp, false, p, payload, payload, NULL);
		return;
	}
	if (qp->srq) {
		sv_lock(&qp->srq->lock);
		have = qp->rq.comp != qp->rq.post;
		sv_unlock(&qp->srq->lock);
	} else {
		have = qp->rq.comp != qp->rq.post;
	}
	r = &qp->rq.wqe[qp->rq.comp & (qp->rq.size - 1)];
	rs = sv_rwqe_sge(qp, r);
	for (uint32_t k = 0; have && r->length >= p->msg_len && k < r->num_sge;
	     k++) {
		struct sv_mr *mr = sv_mr_lookup(qp->ctx, rs[k].lkey, pd);
		uint64_t a = rs[k].addr;

		if (!rs[k].length)
			continue;
		if (sg.n == SV_RDESC_SGE || !mr || a < mr->iova ||
		    a - mr->iova > mr->length ||
		    rs[k].length > mr->length - (a - mr->iova)) {
			sg.n = 0; /* not a receive the sender could place in */
			break;
		}
		s[sg.n].addr =
			(uintptr_t)((uint8_t *)mr->addr + (a - mr->iova));
		s[sg.n].length = rs[k].length;
		sg.n++;
	}
	sv_pcap_train(qp, false, p, payload, payload, &sg);
}

/* The capture shows a packet once, however often an RNR wait peeks at
 * it; a duplicate is a packet of its own. */
void sv_resp_pcap_rx(struct sv_qp *qp, const struct sv_pkt *p,
		     const uint8_t *payload)
{
	if (qp->pcap.rx_valid && sv_psn_diff(p->psn, qp->pcap.rx_next) < 0 &&
	    sv_psn_diff(p->psn, qp->resp.psn) >= 0)
		return;
	pcap_rx(qp, p, payload);
	qp->pcap.rx_next = sv_psn_add(p->psn, p->npsn);
	qp->pcap.rx_valid = true;
}
