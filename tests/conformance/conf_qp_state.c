// SPDX-License-Identifier: MIT
/*
 * The RC QP state machine (IBA 11.2.4.2 / ibv_modify_qp(3)): every valid
 * transition with its required mask succeeds; a missing required bit, an
 * unallowed optional bit, an invalid transition or a bad value is EINVAL;
 * ibv_query_qp reports what was set.
 */
#include "pair.h"

static int modify(struct sv_end *e, struct ibv_qp_attr *a, int mask)
{
	return ibv_modify_qp(e->qp, a, mask);
}

static int to_state(struct sv_end *e, enum ibv_qp_state s, int mask)
{
	struct ibv_qp_attr a = {.qp_state = s};

	return modify(e, &a, IBV_QP_STATE | mask);
}

#define INIT_MASK (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define RTR_MASK                                                         \
	(IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | \
	 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define RTS_MASK                                             \
	(IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | \
	 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)

static struct ibv_qp_attr init_attr(void)
{
	return (struct ibv_qp_attr){.qp_state = IBV_QPS_INIT, .port_num = 1};
}

static struct ibv_qp_attr rtr_attr(struct sv_end *e, uint32_t dest)
{
	return (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_2048,
		.dest_qp_num = dest,
		.rq_psn = 0xabcde,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 5,
		.ah_attr = {.dlid = e->lid, .port_num = 1},
	};
}

static struct ibv_qp_attr rts_attr(void)
{
	return (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTS,
		.sq_psn = 0x123456,
		.timeout = 17,
		.retry_cnt = 6,
		.rnr_retry = 3,
		.max_rd_atomic = 1,
	};
}

SV_TEST(qp_state_valid_transitions)
{
	struct sv_end e, peer;
	struct ibv_qp_attr a, q;
	struct ibv_qp_init_attr qi;

	sv_end_open(&e, NULL);
	sv_end_open(&peer, NULL);

	ASSERT_OK(to_state(&e, IBV_QPS_RESET, 0)); /* RESET -> RESET */
	a = init_attr();
	ASSERT_OK(modify(&e, &a, IBV_QP_STATE | INIT_MASK));
	ASSERT_EQ(IBV_QPS_INIT, sv_end_state(&e));
	a = init_attr();
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
	ASSERT_OK(modify(&e, &a, IBV_QP_STATE | INIT_MASK)); /* INIT->INIT */
	ASSERT_OK(modify(&e, &a, IBV_QP_ACCESS_FLAGS));	     /* no state bit */
	ASSERT_EQ(IBV_QPS_INIT, sv_end_state(&e));

	a = rtr_attr(&e, peer.qp->qp_num);
	ASSERT_OK(modify(&e, &a, IBV_QP_STATE | RTR_MASK));
	memset(&q, 0, sizeof(q));
	ASSERT_OK(ibv_query_qp(e.qp, &q, IBV_QP_STATE | RTR_MASK, &qi));
	ASSERT_EQ(IBV_QPS_RTR, q.qp_state);
	ASSERT_EQ(peer.qp->qp_num, q.dest_qp_num);
	ASSERT_EQ(0xabcde, q.rq_psn);
	ASSERT_EQ(IBV_MTU_2048, q.path_mtu);
	ASSERT_EQ(5, q.min_rnr_timer);
	ASSERT_EQ(e.lid, q.ah_attr.dlid);
	ASSERT_EQ(IBV_ACCESS_LOCAL_WRITE, q.qp_access_flags);
	ASSERT_TRUE(qi.send_cq == e.scq && qi.recv_cq == e.rcq);
	ASSERT_EQ(IBV_QPT_RC, qi.qp_type);

	a = rts_attr();
	ASSERT_OK(modify(&e, &a, IBV_QP_STATE | RTS_MASK));
	memset(&q, 0, sizeof(q));
	ASSERT_OK(ibv_query_qp(e.qp, &q, IBV_QP_STATE | RTS_MASK, &qi));
	ASSERT_EQ(IBV_QPS_RTS, q.qp_state);
	ASSERT_EQ(0x123456, q.sq_psn);
	ASSERT_EQ(17, q.timeout);
	ASSERT_EQ(6, q.retry_cnt);
	ASSERT_EQ(3, q.rnr_retry);

	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .min_rnr_timer = 9};
	ASSERT_OK(modify(&e, &a, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER));
	ASSERT_OK(ibv_query_qp(e.qp, &q, IBV_QP_MIN_RNR_TIMER, &qi));
	ASSERT_EQ(9, q.min_rnr_timer);
	ASSERT_EQ(IBV_QPS_RTS, q.qp_state);

	ASSERT_OK(to_state(&e, IBV_QPS_SQD, 0));
	ASSERT_EQ(IBV_QPS_SQD, sv_end_state(&e));
	ASSERT_OK(to_state(&e, IBV_QPS_RTS, 0));
	ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&e));
	ASSERT_OK(to_state(&e, IBV_QPS_ERR, 0));
	ASSERT_EQ(IBV_QPS_ERR, sv_end_state(&e));
	ASSERT_OK(to_state(&e, IBV_QPS_RESET, 0));
	ASSERT_EQ(IBV_QPS_RESET, sv_end_state(&e));
	/* RESET forgets the connection: it can be set up again */
	a = init_attr();
	ASSERT_OK(modify(&e, &a, IBV_QP_STATE | INIT_MASK));

	sv_end_close(&e);
	sv_end_close(&peer);
}

/* Brings e from RESET to s (INIT, RTR, RTS or SQD). */
static void bring_to(struct sv_end *e, uint32_t dest, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = init_attr();

	ASSERT_OK(modify(e, &a, IBV_QP_STATE | INIT_MASK));
	if (s == IBV_QPS_INIT)
		return;
	a = rtr_attr(e, dest);
	ASSERT_OK(modify(e, &a, IBV_QP_STATE | RTR_MASK));
	if (s == IBV_QPS_RTR)
		return;
	a = rts_attr();
	ASSERT_OK(modify(e, &a, IBV_QP_STATE | RTS_MASK));
	if (s == IBV_QPS_SQD)
		ASSERT_OK(to_state(e, IBV_QPS_SQD, 0));
	ASSERT_EQ(s, sv_end_state(e));
}

SV_TEST(qp_state_any_to_err_and_reset)
{
	static const enum ibv_qp_state from[] = {
		IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR,
		IBV_QPS_RTS,   IBV_QPS_SQD,
	};
	struct sv_end e, peer;

	sv_end_open(&e, NULL);
	sv_end_open(&peer, NULL);
	for (size_t i = 0; i < sizeof(from) / sizeof(from[0]); i++) {
		if (from[i] != IBV_QPS_RESET)
			bring_to(&e, peer.qp->qp_num, from[i]);
		ASSERT_OK(to_state(&e, IBV_QPS_ERR, 0));
		ASSERT_EQ(IBV_QPS_ERR, sv_end_state(&e));
		ASSERT_OK(to_state(&e, IBV_QPS_ERR, 0)); /* ERR -> ERR */
		ASSERT_OK(to_state(&e, IBV_QPS_RESET, 0));
		ASSERT_EQ(IBV_QPS_RESET, sv_end_state(&e));
		if (from[i] != IBV_QPS_RESET) {
			bring_to(&e, peer.qp->qp_num, from[i]);
			ASSERT_OK(to_state(&e, IBV_QPS_RESET, 0));
			ASSERT_EQ(IBV_QPS_RESET, sv_end_state(&e));
		}
	}
	sv_end_close(&e);
	sv_end_close(&peer);
}

SV_TEST(qp_state_bad_masks_einval)
{
	struct sv_end e, peer;
	struct ibv_qp_attr a;

	sv_end_open(&e, NULL);
	sv_end_open(&peer, NULL);

	/* invalid transitions from RESET */
	a = rts_attr();
	ASSERT_EQ(EINVAL, modify(&e, &a, IBV_QP_STATE | RTS_MASK));
	a = rtr_attr(&e, peer.qp->qp_num);
	ASSERT_EQ(EINVAL, modify(&e, &a, IBV_QP_STATE | RTR_MASK));
	/* RESET -> INIT: a required bit missing, an unallowed one present */
	a = init_attr();
	ASSERT_EQ(EINVAL, modify(&e, &a,
				 IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					 IBV_QP_ACCESS_FLAGS));
	ASSERT_EQ(EINVAL,
		  modify(&e, &a, IBV_QP_STATE | INIT_MASK | IBV_QP_SQ_PSN));
	ASSERT_EQ(IBV_QPS_RESET, sv_end_state(&e));

	a = init_attr();
	ASSERT_OK(modify(&e, &a, IBV_QP_STATE | INIT_MASK));
	a = rts_attr(); /* INIT -> RTS skips RTR */
	ASSERT_EQ(EINVAL, modify(&e, &a, IBV_QP_STATE | RTS_MASK));
	a = rtr_attr(&e, peer.qp->qp_num);
	ASSERT_EQ(EINVAL,
		  modify(&e, &a, IBV_QP_STATE | (RTR_MASK & ~IBV_QP_DEST_QPN)));
	ASSERT_EQ(EINVAL,
		  modify(&e, &a, IBV_QP_STATE | (RTR_MASK & ~IBV_QP_AV)));
	ASSERT_EQ(EINVAL,
		  modify(&e, &a, IBV_QP_STATE | RTR_MASK | IBV_QP_SQ_PSN));
	ASSERT_EQ(IBV_QPS_INIT, sv_end_state(&e));

	a = rtr_attr(&e, peer.qp->qp_num);
	ASSERT_OK(modify(&e, &a, IBV_QP_STATE | RTR_MASK));
	a = rts_attr();
	ASSERT_EQ(EINVAL,
		  modify(&e, &a, IBV_QP_STATE | (RTS_MASK & ~IBV_QP_SQ_PSN)));
	ASSERT_EQ(EINVAL,
		  modify(&e, &a, IBV_QP_STATE | RTS_MASK | IBV_QP_DEST_QPN));
	ASSERT_EQ(IBV_QPS_RTR, sv_end_state(&e));
	ASSERT_EQ(EINVAL, to_state(&e, IBV_QPS_SQD, 0)); /* RTR -> SQD */

	a = rts_attr();
	ASSERT_OK(modify(&e, &a, IBV_QP_STATE | RTS_MASK));
	ASSERT_EQ(EINVAL, to_state(&e, IBV_QPS_RTR, 0)); /* backwards */
	ASSERT_EQ(EINVAL, to_state(&e, IBV_QPS_INIT, 0));
	ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&e));

	ASSERT_OK(to_state(&e, IBV_QPS_ERR, 0));
	ASSERT_EQ(EINVAL, to_state(&e, IBV_QPS_RTS, 0)); /* only to RESET */
	ASSERT_EQ(EINVAL, to_state(&e, IBV_QPS_INIT, 0));
	ASSERT_EQ(IBV_QPS_ERR, sv_end_state(&e));

	sv_end_close(&e);
	sv_end_close(&peer);
}

SV_TEST(qp_state_bad_values_einval)
{
	struct sv_end e, peer;
	struct ibv_qp_attr a;

	sv_end_open(&e, NULL);
	sv_end_open(&peer, NULL);

	a = init_attr();
	a.port_num = 2;
	ASSERT_EQ(EINVAL, modify(&e, &a, IBV_QP_STATE | INIT_MASK));
	a.port_num = 0;
	ASSERT_EQ(EINVAL, modify(&e, &a, IBV_QP_STATE | INIT_MASK));
	ASSERT_EQ(IBV_QPS_RESET, sv_end_state(&e));
	a = init_attr();
	ASSERT_OK(modify(&e, &a, IBV_QP_STATE | INIT_MASK));

	a = rtr_attr(&e, peer.qp->qp_num);
	a.path_mtu = 0;
	ASSERT_EQ(EINVAL, modify(&e, &a, IBV_QP_STATE | RTR_MASK));
	a.path_mtu = (enum ibv_mtu)6;
	ASSERT_EQ(EINVAL, modify(&e, &a, IBV_QP_STATE | RTR_MASK));
	a = rtr_attr(&e, peer.qp->qp_num);
	a.dest_qp_num = 1u << 24;
	ASSERT_EQ(EINVAL, modify(&e, &a, IBV_QP_STATE | RTR_MASK));
	a = rtr_attr(&e, peer.qp->qp_num);
	a.rq_psn = 1u << 24;
	ASSERT_EQ(EINVAL, modify(&e, &a, IBV_QP_STATE | RTR_MASK));
	a = rtr_attr(&e, peer.qp->qp_num);
	a.min_rnr_timer = 32;
	ASSERT_EQ(EINVAL, modify(&e, &a, IBV_QP_STATE | RTR_MASK));
	a = rtr_attr(&e, peer.qp->qp_num);
	a.ah_attr.port_num = 2;
	ASSERT_EQ(EINVAL, modify(&e, &a, IBV_QP_STATE | RTR_MASK));
	ASSERT_EQ(IBV_QPS_INIT, sv_end_state(&e));

	a = rtr_attr(&e, peer.qp->qp_num);
	ASSERT_OK(modify(&e, &a, IBV_QP_STATE | RTR_MASK));
	a = rts_attr();
	a.timeout = 32;
	ASSERT_EQ(EINVAL, modify(&e, &a, IBV_QP_STATE | RTS_MASK));
	a = rts_attr();
	a.retry_cnt = 8;
	ASSERT_EQ(EINVAL, modify(&e, &a, IBV_QP_STATE | RTS_MASK));
	a = rts_attr();
	a.rnr_retry = 8;
	ASSERT_EQ(EINVAL, modify(&e, &a, IBV_QP_STATE | RTS_MASK));
	a = rts_attr();
	a.sq_psn = 1u << 24;
	ASSERT_EQ(EINVAL, modify(&e, &a, IBV_QP_STATE | RTS_MASK));
	a = rts_attr(); /* cur_qp_state that is not the current state */
	a.cur_qp_state = IBV_QPS_INIT;
	ASSERT_EQ(EINVAL,
		  modify(&e, &a, IBV_QP_STATE | RTS_MASK | IBV_QP_CUR_STATE));
	ASSERT_EQ(IBV_QPS_RTR, sv_end_state(&e));
	a = rts_attr();
	ASSERT_OK(modify(&e, &a, IBV_QP_STATE | RTS_MASK));

	sv_end_close(&e);
	sv_end_close(&peer);
}

/*
 * ibv_destroy_qp leaves none of the QP's completions behind, as mlx4 and
 * mlx5 clean their CQs at destroy: neither those made and not polled yet
 * nor flushes of its outstanding work (a program may free each WR's
 * context with the QP: libfabric's rxm did, and crashed on one polled
 * later).  Another QP's completions on the same CQ stay, in order.
 */
SV_TEST(qp_destroy_leaves_no_completions)
{
	struct sv_pair P;
	struct ibv_qp_init_attr ia = {
		.cap = {.max_send_wr = 4,
			.max_recv_wr = 4,
			.max_send_sge = 1,
			.max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_attr a = init_attr();
	struct ibv_recv_wr rw = {.num_sge = 1}, *bad;
	struct ibv_sge sg;
	struct ibv_wc wc[8];
	struct ibv_qp *c;
	int n;

	sv_pair_open(&P, NULL, NULL);
	ia.send_cq = P.b.scq;
	ia.recv_cq = P.b.rcq;
	c = ibv_create_qp(P.b.pd, &ia);
	ASSERT_NOT_NULL(c);
	ASSERT_OK(ibv_modify_qp(c, &a,
				IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					IBV_QP_ACCESS_FLAGS));
	sg = (struct ibv_sge){(uintptr_t)P.b.buf + 4096, 64, P.b.mr->lkey};
	rw.sg_list = &sg;
	for (int i = 0; i < 4; i++)
		ASSERT_OK(sv_end_recv(&P.b, 10 + i, 64 * i, 64));

	/* b's CQ: b's receive 10, c's flushes 20 and 21, b's receive 11;
	 * b has 12 and 13 outstanding */
	ASSERT_OK(sv_end_send(&P.a, 1, 0, 64, IBV_SEND_SIGNALED));
	EXPECT_WC(P.a.scq, IBV_WC_SUCCESS, 1);
	for (int i = 0; i < 2; i++) {
		rw.wr_id = 20 + i;
		ASSERT_OK(ibv_post_recv(c, &rw, &bad));
	}
	a.qp_state = IBV_QPS_ERR;
	ASSERT_OK(ibv_modify_qp(c, &a, IBV_QP_STATE));
	ASSERT_OK(sv_end_send(&P.a, 2, 0, 64, IBV_SEND_SIGNALED));
	EXPECT_WC(P.a.scq, IBV_WC_SUCCESS, 2);

	ASSERT_OK(ibv_destroy_qp(P.b.qp));
	P.b.qp = NULL;
	n = ibv_poll_cq(P.b.rcq, 8, wc);
	ASSERT_EQ(2, n);
	for (int i = 0; i < n; i++) {
		ASSERT_EQ(20 + i, wc[i].wr_id);
		ASSERT_EQ(c->qp_num, wc[i].qp_num);
		ASSERT_EQ(IBV_WC_WR_FLUSH_ERR, wc[i].status);
	}
	NO_WC(P.b.rcq, 20);
	NO_WC(P.b.scq, 20);
	ASSERT_OK(ibv_destroy_qp(c));
	sv_pair_close(&P);
}

/*
 * When the program moves a QP to ERR without having polled, what the
 * peer had acknowledged and what had arrived complete successfully, as
 * an HCA makes those completions as ACKs and packets arrive; only the
 * rest is flushed.
 */
SV_TEST(qp_err_completes_what_was_acked)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	struct sv_pair P;

	sv_test_needs_shm("over TCP the ACK travels on its own time: "
			  "whether it arrived before the modify is not "
			  "known to the test");
	sv_pair_open(&P, NULL, NULL);
	ASSERT_OK(sv_end_recv(&P.b, 10, 0, 64));
	ASSERT_OK(sv_end_recv(&P.a, 20, 128, 64));
	ASSERT_OK(sv_end_recv(&P.a, 21, 192, 64));
	ASSERT_OK(sv_end_send(&P.a, 1, 0, 64, IBV_SEND_SIGNALED));
	EXPECT_WC(P.b.rcq, IBV_WC_SUCCESS, 10);	   /* b took it: ACKed */
	ASSERT_OK(sv_end_send(&P.b, 2, 0, 64, 0)); /* to a, not polled */
	ASSERT_OK(ibv_modify_qp(P.a.qp, &a, IBV_QP_STATE));
	EXPECT_WC(P.a.scq, IBV_WC_SUCCESS, 1);
	NO_WC(P.a.scq, 20);
	EXPECT_WC(P.a.rcq, IBV_WC_SUCCESS, 20);
	EXPECT_WC(P.a.rcq, IBV_WC_WR_FLUSH_ERR, 21);
	sv_pair_close(&P);
}
