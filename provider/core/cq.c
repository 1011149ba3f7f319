// SPDX-License-Identifier: MIT
/*
 * A CQ's producer side: sv_cq_push, which the engine, the UD transport,
 * XRC delivery and the progress loop call for every completion.  It lives
 * in core/, below all of them, so their calls go down; the CQ verbs
 * (create, poll, notify, resize, destroy) are verbs/cq.c.
 */
#include "core.h"
#include "objects.h"

void sv_cq_push(struct sv_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	struct ibv_async_event ev;
	bool notify = false, overrun = false;
	struct sv_cqe *e;

	sv_lock(&cq->lock);
	if (cq->head - cq->tail == cq->size || cq->overrun) {
		/* IBA 11.4.2.1: overrun is an error, reported async */
		overrun = !cq->overrun;
		cq->overrun = true;
		sv_unlock(&cq->lock);
		if (overrun) {
			ev.event_type = IBV_EVENT_CQ_ERR;
			ev.element.cq = (struct ibv_cq *)&cq->ex;
			sv_async_event(cq->ctx, &ev);
		}
		return;
	}
	e = &cq->q[cq->head & (cq->size - 1)];
	e->wc = *wc;
	if (cq->wc_flags & (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK))
		e->ts = sv_now_ns();
	/* release: the entry is written before pollers see head move */
	atomic_store_explicit(&cq->head, cq->head + 1, memory_order_release);
	if (cq->armed &&
	    (cq->armed == 1 || solicited || wc->status != IBV_WC_SUCCESS)) {
		cq->armed = 0;
		notify = true;
	}
	sv_unlock(&cq->lock);
	if (notify && cq->ex.channel)
		sv_channel_signal(to_schannel(cq->ex.channel), cq);
}
