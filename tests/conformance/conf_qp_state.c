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
