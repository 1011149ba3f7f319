// SPDX-License-Identifier: MIT
/*
 * The responder's side of a shared receive queue: sv_srq_take moves one
 * WQE into the QP that takes it, and raises IBV_EVENT_SRQ_LIMIT_REACHED
 * once per arming, as rxe's rxe_srq.c and the IBA (10.2.9.4, 11.5.2.3)
 * say; WQEs lent ahead to a QP whose peer shares memory, taken back
 * (steal) and returned with the QP's link (sv_srq_return).  The SRQ
 * verbs (create, modify, query, post, destroy) are verbs/srq.c.
 */
#include <string.h>

#include "core.h"
#include "engine.h"

static void limit_reached(struct sv_srq *srq)
{
	struct ibv_async_event e = {.event_type = IBV_EVENT_SRQ_LIMIT_REACHED};

	e.element.srq = &srq->ibv;
	sv_async_event(srq->ctx, &e);
}

/* The SRQ's oldest WQE into the QP's RQ at rq_post.  Caller holds
 * srq->lock; the SRQ is not empty. */
static void move_oldest(struct sv_srq *srq, struct sv_qp *qp)
{
	uint32_t slot = srq->comp & (srq->size - 1);
	uint32_t to = qp->rq.post & (qp->rq.size - 1);

	qp->rq.wqe[to] = srq->q[slot];
	/* shown to this QP's peer only once described here (lend) */
	qp->rq.wqe[to].placeable = false;
	memcpy(&qp->rq.sge[(size_t)to * qp->max_recv_sge],
	       &srq->sge[(size_t)slot * srq->max_sge],
	       srq->q[slot].num_sge * sizeof(struct ibv_sge));
	srq->comp++;
	qp->rq.post++;
}

/* The QP's WQE i back at the SRQ's head (it was the oldest when lent:
 * returned newest first, the SRQ's order is kept).  There is room: the
 * lent WQEs count against max_wr.  Caller holds srq->lock. */
static void push_front(struct sv_srq *srq, struct sv_qp *qp, uint32_t i)
{
	uint32_t from = i & (qp->rq.size - 1);
	uint32_t slot = --srq->comp & (srq->size - 1);

	srq->q[slot] = qp->rq.wqe[from];
	memcpy(&srq->sge[(size_t)slot * srq->max_sge],
	       &qp->rq.sge[(size_t)from * qp->max_recv_sge],
	       qp->rq.wqe[from].num_sge * sizeof(struct ibv_sge));
}

/* Whether the peer may no longer place into the QP's lent WQE i: the
 * descriptor that shows it (post.c describe) still says i + 1, and we
 * take it back with a CAS, as the sender claims it with one (req.c
 * try_place), so exactly one side wins.  The peer may write the word
 * as it likes: that only decides which of its own sends are placed. */
static bool unshow(struct sv_qp *qp, uint32_t i)
{
	struct sv_rdesc *d = &qp->link.rx.desc[i & (qp->link.rx.ndesc - 1)];
	uint32_t expect = i + 1;

	return atomic_compare_exchange_strong(&d->seq, &expect, 0);
}

/* Keeps srq->lenders (the QPs holding lent WQEs) in step with qp's
 * count.  Caller holds srq->lock. */
static void lender_update(struct sv_srq *srq, struct sv_qp *qp, bool was)
{
	bool is = qp->rq.post != qp->rq.held;

	if (is && !was)
		sv_list_add_tail(&srq->lenders, &qp->srq_node);
	else if (!is && was)
		sv_list_del(&qp->srq_node);
}

/* The SRQ is empty but other QPs hold lent WQEs: takes back the newest
 * one of the first whose peer has not claimed it.  Their queues are
 * changed under srq->lock alone (their responders read rq_post and
 * rq_held only under it; rq_comp and the held WQE are theirs).  Caller
 * holds srq->lock. */
static bool steal(struct sv_srq *srq, struct sv_qp *qp)
{
	struct sv_list *n;

	sv_list_for_each(n, &srq->lenders)
	{
		struct sv_qp *o = container_of(n, struct sv_qp, srq_node);

		if (o == qp || !unshow(o, o->rq.post - 1))
			continue;
		push_front(srq, o, o->rq.post - 1);
		o->rq.post--;
		srq->lent--;
		lender_update(srq, o, true);
		return true;
	}
	return false;
}

/*
 * Single copy on an SRQ: which QP takes which WQE is known only at
 * arrival, so the SRQ *lends* each RC QP whose peer shares memory a few
 * WQEs ahead of its messages, in its own RQ, shown to the peer in its
 * ring's descriptors as an RQ's are; the sender places a send into the
 * one its message will take, claiming it first (req.c try_place).  A QP
 * holds at most its share: the WQEs not yet taken divided among the
 * attached QPs, within its RQ's slots; an empty SRQ takes unclaimed ones
 * back (steal), and a QP whose link closes returns them (sv_srq_return),
 * so no receive is stranded while another QP needs one.  Lent WQEs count
 * as the SRQ's for max_wr and the limit.  Caller holds srq->lock and
 * qp->lock.
 */
static void lend(struct sv_srq *srq, struct sv_qp *qp)
{
	uint32_t users =
		atomic_load_explicit(&srq->users, memory_order_relaxed);
	uint32_t share, from = qp->rq.post;
	bool was = qp->rq.post != qp->rq.held;

	if (!qp->link.rx_ready || !qp->link.rx.ndesc)
		return;
	share = (srq->post - srq->comp + srq->lent) / (users ? users : 1);
	while (srq->comp != srq->post && qp->rq.post - qp->rq.held < share &&
	       qp->rq.post - qp->rq.comp < qp->rq.size) {
		move_oldest(srq, qp);
		srq->lent++;
	}
	if (qp->rq.post != from)
		sv_rq_describe(qp, from);
	lender_update(srq, qp, was);
}

bool sv_srq_take(struct sv_srq *srq, struct sv_qp *qp)
{
	bool was, fire = false;

	sv_lock(&srq->lock);
	was = qp->rq.post != qp->rq.held;
	if (qp->rq.comp == qp->rq.post) {
		if (srq->comp == srq->post && !steal(srq, qp)) {
			/* inside the lock: a post after ours sees it and
			 * wakes us */
			atomic_store_explicit(&srq->rnr, true,
					      memory_order_relaxed);
			sv_unlock(&srq->lock);
			return false;
		}
		move_oldest(srq, qp);
		qp->rq.held = qp->rq.post;
	} else if (qp->rq.held == qp->rq.comp) {
		qp->rq.held++; /* the first lent WQE is this message's */
		srq->lent--;
	} /* else the QP holds one already (a dropped message's) */
	lender_update(srq, qp, was);
	lend(srq, qp);
	/* IBA 11.5.2.3: once below the limit, one event, then disarmed */
	if (srq->limit && srq->post - srq->comp + srq->lent < srq->limit) {
		srq->limit = 0;
		fire = true;
	}
	sv_unlock(&srq->lock);
	if (fire)
		limit_reached(srq);
	return true;
}

void sv_srq_return(struct sv_qp *qp)
{
	struct sv_srq *srq = qp->srq;
	uint32_t keep[SV_SRQ_LEND], k = 0;

	if (!srq || qp->rq.post == qp->rq.held)
		return;
	sv_lock(&srq->lock);
	srq->lent -= qp->rq.post - qp->rq.held;
	for (uint32_t i = qp->rq.post; i-- != qp->rq.held;) {
		if (unshow(qp, i))
			push_front(srq, qp, i);
		else /* claimed: the peer's send is on its way into it */
			keep[k++] = i;
	}
	/* the claimed stay the QP's, in order, flushed with it */
	for (uint32_t j = 0; j < k; j++) {
		uint32_t to = (qp->rq.held + j) & (qp->rq.size - 1);
		uint32_t from = keep[k - 1 - j] & (qp->rq.size - 1);

		qp->rq.wqe[to] = qp->rq.wqe[from];
		memmove(&qp->rq.sge[(size_t)to * qp->max_recv_sge],
			&qp->rq.sge[(size_t)from * qp->max_recv_sge],
			qp->max_recv_sge * sizeof(struct ibv_sge));
	}
	qp->rq.post = qp->rq.held = qp->rq.held + k;
	sv_list_del(&qp->srq_node);
	sv_unlock(&srq->lock);
}
