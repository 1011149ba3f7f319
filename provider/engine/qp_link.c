// SPDX-License-Identifier: MIT
/*
 * A QP's link, as the engine sees it: bring it up (connect, take the
 * peer's hello and its memory: sv_qp_link_step), let a link that lives by
 * itself run (TCP: sv_qp_link_run), and follow what happens to the peer
 * (a goodbye or its death: sv_qp_link_event).  Called by whoever drives
 * the QP (engine/drive.c: the app's poll and post, the progress thread's
 * callbacks) and by the verbs at a state change (verbs/qp.c), so it sits
 * in the engine, below them both; the link itself is transport/'s
 * (link.h).  The error transition and the link's close are qp_error.c.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "engine.h"
#include "inject.h"
#include "link.h"
#include "progress.h"
#include "rmem.h"

/* Says why a link cannot come up, once, on stderr (what failed and what
 * to do); the caller returns the error or moves the QP to ERROR. */
void sv_qp_link_error(struct sv_qp *qp, const char *what, int err)
{
	if (err == -EACCES)
		return; /* check_peer (shm.c) said who holds the socket */
	fprintf(stderr, "softverbs: qp %06x: %s: %s%s\n",
		qp->qpx.qp_base.qp_num, what, strerror(-err),
		err == -EMFILE || err == -ENFILE
			? "; each connected QP holds 3 fds: raise the limit "
			  "(ulimit -n) or use fewer QPs"
			: "");
}

/* Maps the peer context's shared registered memory (rmem.c), so our
 * one-sided operations go straight to it; refused, they go to its
 * responder.  The fds are ours to close. */
static void take_peer_memory(struct sv_qp *qp, int arena_fd, int table_fd,
			     uint32_t pd)
{
	if (qp->req.rpeer)
		sv_rpeer_put(qp->ctx, qp->req.rpeer);
	/* SOFTVERBS_FAULTS: every operation a packet that can be faulted
	 * (no direct one-sided operations, no single copy) */
	qp->req.rpeer =
		sv_inject.on ? NULL : sv_rpeer_get(qp->ctx, arena_fd, table_fd);
	if (!qp->req.rpeer)
		sv_dbg("qp %06x: peer memory refused: %s\n",
		       qp->qpx.qp_base.qp_num, strerror(errno));
	qp->req.peer_pd = pd;
	close(arena_fd);
	close(table_fd);
}

/* How long a network link that was up may stay broken: the requester's
 * budget (IBA: timeout x retry_cnt) and one ACK timeout more, so that a
 * request in flight fails by its own timer first (comp.c); for ever with
 * the infinite timeout (0), and for UC, which has none. */
static uint64_t link_down_max_ns(const struct sv_qp *qp)
{
	if (!qp->attr.timeout || qp->qpx.qp_base.qp_type == IBV_QPT_UC)
		return UINT64_MAX;
	return sv_qp_ack_timeout_ns(qp) * (qp->attr.retry_cnt + 2u);
}

/* A link that lives by itself (ops->run: TCP), from the engine and the
 * progress thread: moves it on and follows its state. */
void sv_qp_link_run(struct sv_qp *qp, uint64_t now)
{
	enum sv_link_state st;

	if (qp->attr.qp_state < IBV_QPS_RTR || !sv_link_runs(&qp->link))
		return; /* the peer QPN is not known yet */
	st = qp->link.ops->run(&qp->link, qp->attr.dest_qp_num,
			       sv_qp_ack_timeout_ns(qp), link_down_max_ns(qp),
			       now);
	if (st == qp->link.state || qp->link.state == SV_LINK_CLOSED)
		return;
	if (st == SV_LINK_UP || st == SV_LINK_CONNECTING) {
		sv_dbg("qp %06x: %s link %s -> %s\n", qp->qpx.qp_base.qp_num,
		       qp->link.ops->name, sv_link_state_names[qp->link.state],
		       sv_link_state_names[st]);
		qp->link.state = st;
	} else {
		sv_qp_link_event(qp, st);
	}
}

/*
 * Brings the link up: connects to the peer's listener (again, with backoff,
 * if it was not there yet) and takes the peer's hello.  Returns what makes
 * the link impossible (another user's socket, out of fds), else 0.  Caller
 * holds qp->lock.
 */
int sv_qp_link_connect(struct sv_qp *qp)
{
	struct sv_link *l = &qp->link;
	enum ibv_qp_state s = qp->attr.qp_state;
	uint32_t expect = SV_QPN_ANY, pd;
	int err, arena_fd, table_fd;

	if (s >= IBV_QPS_RTR && s <= IBV_QPS_SQE)
		expect = qp->attr.dest_qp_num;
	err = sv_link_step(l, qp->qpx.qp_base.qp_num, expect);
	if (err) {
		sv_qp_link_error(qp, "taking the peer's connection", err);
		return err;
	}
	if (l->ops && l->ops->peer_memory &&
	    l->ops->peer_memory(l, &arena_fd, &table_fd, &pd))
		take_peer_memory(qp, arena_fd, table_fd, pd);
	if (expect != SV_QPN_ANY && sv_link_runs(l))
		sv_qp_link_run(qp, 0);
	return 0;
}

/* From the engine and the progress thread: a link that cannot come up
 * takes the QP to ERROR (IBV_EVENT_QP_FATAL); the reason is on stderr. */
void sv_qp_link_step(struct sv_qp *qp)
{
	if (sv_qp_link_connect(qp))
		sv_qp_to_error(qp, IBV_EVENT_QP_FATAL);
}

void sv_qp_link_event(struct sv_qp *qp, enum sv_link_state st)
{
	/* after a goodbye the hang-up is expected: the peer said it all
	 * (a doorbell edge seen before the goodbye may bring us here) */
	if (st == qp->link.state || qp->link.state == SV_LINK_CLOSED)
		return;
	sv_dbg("qp %06x: link %s -> %s\n", qp->qpx.qp_base.qp_num,
	       sv_link_state_names[qp->link.state], sv_link_state_names[st]);
	sv_progress_del(qp->ctx, &qp->pfd[1]);
	sv_progress_del(qp->ctx, &qp->pfd[2]);
	if (st == SV_LINK_DEAD) {
		qp->link.state = SV_LINK_DEAD;
		/* its last words are still in the mapped rings: the ACKs of
		 * sends it took, and what it sent us */
		sv_comp_run(qp, sv_now_ns());
		if (qp->attr.qp_state != IBV_QPS_ERR)
			sv_resp_run(qp);
		if (qp->attr.qp_state == IBV_QPS_ERR)
			return;
		/* IBA: what was in flight can no longer be acknowledged */
		if (qp->sq.comp != qp->sq.post) {
			struct ibv_wc wc = {
				.status = IBV_WC_RETRY_EXC_ERR,
				.opcode = IBV_WC_SEND,
				.qp_num = qp->qpx.qp_base.qp_num,
			};

			wc.wr_id = qp->sq.wqe[qp->sq.comp & (qp->sq.size - 1)]
					   .wr_id;
			qp->sq.comp++;
			sv_cq_push(qp->scq, &wc, false);
			sv_stat_wc(qp, wc.status);
		}
		sv_qp_to_error(qp, IBV_EVENT_QP_FATAL);
	} else {
		qp->link.state = st;
	}
}
