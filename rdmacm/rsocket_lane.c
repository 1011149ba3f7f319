// SPDX-License-Identifier: MIT
/*
 * rsockets' zero-copy lane: a second RC QP per rsocket that carries only
 * plain RDMA writes straight from the program's buffer (through an
 * implicit ODP MR, local access only): stream bytes into the peer's
 * ring, and riowrite's into the peer's riomap window (no count follows
 * those).
 *
 * Why a QP of its own: rsend may return only once the program's bytes
 * are where they go.  A verbs program learns that from the write's
 * completion, and an RC QP completes in order: on the connection's own
 * QP every write would complete behind the previous chunk's WRITE WITH
 * IMMEDIATE, which waits for the peer's acknowledgement.  On the lane
 * nothing waits: where the peer shares memory (one host), softverbs
 * executes the write inside ibv_post_send and its completion is there at
 * once.  Then the chunk's immediate goes on the connection's QP as a
 * zero-length WRITE WITH IMMEDIATE, after the bytes: one copy a byte on
 * the sender instead of two (into the bounce ring, then out of it).
 *
 * Where the write does not complete in its post (another host), rsend
 * (or riowrite) waits for that one completion, the program's buffer
 * being in use until then, and the rsocket copies from then on.  So does
 * one whose lane failed.  Any verbs device works; only where writes
 * complete at once does the lane pay.
 *
 * Set-up: each side makes the lane's QP with the connection's (INIT) and
 * names it in its hello (rs_hello.lane_qpn; 0: none).  The passive side
 * connects its lane before it accepts, so the active side may write as
 * soon as it has the REP; the active side connects its lane on
 * ESTABLISHED and then tells the passive side (RS_CTRL_LANE) that it may
 * write too.  PSNs start at 0 both ways.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "cm.h"
#include "rs.h"

#define RS_LANE_DEPTH	4    /* one write in flight, and room to spare */
#define RS_LANE_WAIT_MS 5000 /* for a write that did not complete at once */

void rs_lane_free(struct rs *rs)
{
	rs->zc = false;
	if (rs->lane) {
		ibv_destroy_qp(rs->lane);
		rs->lane = NULL;
	}
	if (rs->lane_cq) {
		ibv_destroy_cq(rs->lane_cq);
		rs->lane_cq = NULL;
	}
	if (rs->zmr) {
		ibv_dereg_mr(rs->zmr);
		rs->zmr = NULL;
	}
}

/* The lane's QP in INIT, with its CQ and MR; nothing if any of it fails. */
void rs_lane_setup(struct rs *rs)
{
	struct ibv_context *ctx = rs->pd->context;
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = {.max_send_wr = RS_LANE_DEPTH,
			.max_recv_wr = 1,
			.max_send_sge = 1,
			.max_recv_sge = 1},
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};

	rs->zmr = ibv_reg_mr(rs->pd, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND);
	if (!rs->zmr)
		return; /* no implicit ODP: the bounce ring only */
	rs->lane_cq = ibv_create_cq(ctx, 2 * RS_LANE_DEPTH, NULL, NULL, 0);
	if (!rs->lane_cq)
		goto fail;
	qa.send_cq = qa.recv_cq = rs->lane_cq;
	rs->lane = ibv_create_qp(rs->pd, &qa);
	if (!rs->lane)
		goto fail;
	if (ibv_modify_qp(rs->lane, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		goto fail;
	return;
fail:
	rs_lane_free(rs);
}

/*
 * RTR and RTS towards the peer's lane (rs->peer_lane), on the path the CM
 * found for the connection; false (and no lane) if it cannot be.
 */
bool rs_lane_connect(struct rs *rs)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR};
	int mask;

	if (!rs->lane || !rs->peer_lane)
		goto fail;
	if (rdma_init_qp_attr(rs->id, &a, &mask))
		goto fail;
	a.dest_qp_num = rs->peer_lane;
	a.rq_psn = 0;
	if (ibv_modify_qp(rs->lane, &a, mask))
		goto fail;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	if (rdma_init_qp_attr(rs->id, &a, &mask))
		goto fail;
	a.sq_psn = 0;
	if (ibv_modify_qp(rs->lane, &a, mask))
		goto fail;
	return true;
fail:
	rs_lane_free(rs);
	return false;
}

/*
 * The lane's one completion once it did not come in the post: 1, or 0
 * after RS_LANE_WAIT_MS (its QP's retries end long before; the peer is
 * gone).  Polls, then naps a little longer each time: this happens once
 * a connection, to a peer on another host.
 */
static int lane_wait(struct rs *rs, struct ibv_wc *wc)
{
	uint64_t end = cm_now_ms() + RS_LANE_WAIT_MS;
	struct timespec nap = {0, 1000};

	for (;;) {
		int n = ibv_poll_cq(rs->lane_cq, 1, wc);

		if (n)
			return n > 0;
		if (cm_now_ms() > end)
			return 0;
		nanosleep(&nap, NULL);
		if (nap.tv_nsec < 1000000)
			nap.tv_nsec *= 2;
	}
}

/*
 * Writes len bytes at p to the peer's raddr (its ring, or a riomap
 * window: rkey) on the lane.  0:
 * they are there; -EFAULT: p is not the program's memory (nothing of it
 * was written); -EAGAIN: the lane is gone, copy instead; -ECONNRESET: the
 * write failed or never completed, and a late packet of it could still
 * land in the ring, so the connection must go.  Waits only where the
 * write did not complete in its post, and then stops using the lane.
 */
int rs_lane_write(struct rs *rs, const void *p, uint32_t len, uint64_t raddr,
		  uint32_t rkey)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)p,
		.length = len,
		.lkey = rs->zmr->lkey,
	};
	struct ibv_send_wr wr =
				   {
					   .sg_list = &sge,
					   .num_sge = 1,
					   .opcode = IBV_WR_RDMA_WRITE,
					   .wr.rdma = {.remote_addr = raddr,
						       .rkey = rkey},
				   },
			   *bad;
	struct ibv_wc wc;
	int n;

	if (ibv_post_send(rs->lane, &wr, &bad)) {
		rs_lane_free(rs); /* nothing went */
		return -EAGAIN;
	}
	n = ibv_poll_cq(rs->lane_cq, 1, &wc);
	if (n == 0) {
		rs->zc = false; /* not at once: copying is as fast */
		n = lane_wait(rs, &wc);
	}
	if (n == 1 && wc.status == IBV_WC_SUCCESS)
		return 0;
	rs_lane_free(rs); /* its QP is in error, or stuck */
	if (n == 1 && wc.status == IBV_WC_LOC_PROT_ERR)
		return -EFAULT; /* refused before any byte left */
	return -ECONNRESET;
}
