// SPDX-License-Identifier: MIT
/*
 * A QP's error transition (IBA 10.3.1, 11.6.3), which the engine takes
 * when a WR or a packet fails and the verbs when the program moves a QP
 * to ERR or destroys it: the link closed, every WR flushed (core/flush.c),
 * the async events raised.  The rules of the other transitions are
 * qp_state.c; their effects (modify_qp) verbs/qp.c.
 */
#include "core.h"
#include "engine.h"
#include "progress.h"
#include "qp_state.h"
#include "rmem.h"

/* Closes the QP's link: its SRQ's lent WQEs returned, its fds off the
 * progress thread, the transport's connection closed (bye: tell the
 * peer).  Caller holds qp->lock. */
void sv_qp_link_close(struct sv_qp *qp, bool bye)
{
	sv_srq_return(qp); /* while the descriptors are mapped */
	sv_progress_del(qp->ctx, &qp->pfd[1]);
	sv_progress_del(qp->ctx, &qp->pfd[2]);
	sv_link_close(&qp->link, qp->qpx.qp_base.qp_num, bye);
	if (qp->req.rpeer)
		sv_rpeer_put(qp->ctx, qp->req.rpeer);
	qp->req.rpeer = NULL;
}

static void qp_event(struct sv_qp *qp, enum ibv_event_type ev)
{
	struct ibv_async_event e = {.event_type = ev};

	e.element.qp = &qp->qpx.qp_base;
	sv_async_event(qp->ctx, &e);
}

/* Moves the QP to ERR and flushes; ev, if not 0, is raised async.
 * Caller holds qp->lock. */
void sv_qp_to_error(struct sv_qp *qp, enum ibv_event_type ev)
{
	if (qp->attr.qp_state == IBV_QPS_ERR)
		return;
	sv_dbg("qp %06x: %s -> ERR\n", qp->qpx.qp_base.qp_num,
	       sv_qp_state_names[qp->attr.qp_state]);
	/* the engine's state only: ibv_qp.state is the program's, which
	 * modify and query write, as rdma-core's libibverbs does (UCX
	 * asserts on it) */
	qp->attr.qp_state = IBV_QPS_ERR;
	if (qp->link.state != SV_LINK_IDLE)
		sv_qp_link_close(qp, qp->link.state != SV_LINK_DEAD);
	sv_qp_flush(qp);
	if (ev)
		qp_event(qp, ev);
	if (qp->qpx.qp_base.qp_type == IBV_QPT_XRC_RECV) {
		sv_xrc_unbind(qp); /* the SRQ was the message's, not ours */
		return;
	}
	/* IBA 10.3.1, 11.6.3: this QP takes no more WQEs from its SRQ (the
	 * SRQ's stay there, for the other QPs) */
	if (qp->srq)
		qp_event(qp, IBV_EVENT_QP_LAST_WQE_REACHED);
}
