// SPDX-License-Identifier: MIT
/*
 * The extended verbs the reference programs use: ibv_create_cq_ex with
 * completion timestamps and the start/next/end_poll iterator, and
 * ibv_create_qp_ex with send_ops_flags and the ibv_wr_* builder.
 */
#include "pair.h"

/* A QP on cq built with ibv_create_qp_ex; NULL with errno on failure. */
static struct ibv_qp *create_qp_ex(struct sv_end *e, struct ibv_cq *cq,
				   uint64_t ops)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
		.cap = {.max_send_wr = 16,
			.max_recv_wr = 16,
			.max_send_sge = 2,
			.max_recv_sge = 2},
		.comp_mask =
			IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = e->pd,
		.send_ops_flags = ops,
	};

	return ibv_create_qp_ex(e->ctx, &a);
}

SV_TEST(ex_cq_timestamps_and_qp_ex_send)
{
	struct sv_end a, b;
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 16,
		.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			    IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM,
	};
	struct ibv_cq_ex *cqx;
	struct ibv_qp_ex *qpx;
	struct ibv_poll_cq_attr pa = {0};
	uint64_t ts[3] = {0};
	int got = 0, ret;
	uint64_t end;

	/* a: the extended objects; b: a plain end */
	memset(&a, 0, sizeof(a));
	a.o = sv_end_opts_default();
	sv_end_open_ctx(&a);
	a.buf = calloc(1, a.o.buf_len);
	ASSERT_NOT_NULL(a.buf);
	a.mr = ibv_reg_mr(a.pd, a.buf, a.o.buf_len, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(a.mr);
	cqx = ibv_create_cq_ex(a.ctx, &ca);
	ASSERT_NOT_NULL(cqx);
	a.scq = a.rcq = ibv_cq_ex_to_cq(cqx);
	a.qp = create_qp_ex(&a, a.scq, IBV_QP_EX_WITH_SEND);
	ASSERT_NOT_NULL(a.qp);
	qpx = ibv_qp_to_qp_ex(a.qp);
	ASSERT_NOT_NULL(qpx);
	sv_end_open(&b, NULL);
	b.o.psn = 0x5678;
	sv_end_connect(&a, b.qp->qp_num, b.o.psn);
	sv_end_connect(&b, a.qp->qp_num, a.o.psn);

	for (int i = 0; i < 3; i++)
		ASSERT_OK(sv_end_recv(&b, (uint64_t)i, (size_t)i * 1024, 1024));
	sv_fill(a.buf, 3 * 1024, 8);
	ibv_wr_start(qpx);
	for (int i = 0; i < 3; i++) {
		qpx->wr_id = 40 + (uint64_t)i;
		qpx->wr_flags = i == 1 ? 0 : IBV_SEND_SIGNALED;
		ibv_wr_send(qpx);
		ibv_wr_set_sge(qpx, a.mr->lkey, (uintptr_t)a.buf + i * 1024,
			       100 + (uint32_t)i);
	}
	ASSERT_OK(ibv_wr_complete(qpx));
	for (int i = 0; i < 3; i++) {
		struct ibv_wc wc;

		WAIT_WC(b.rcq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ(i, wc.wr_id);
		ASSERT_EQ(100 + i, wc.byte_len);
		ASSERT_OK(memcmp(b.buf + i * 1024, a.buf + i * 1024, 100 + i));
	}

	/* two signalled sends complete: 40 and 42 (41 was unsignalled) */
	end = sv_now_ms() + SV_WC_TIMEOUT_MS;
	while (got < 2) {
		ASSERT_TRUE(sv_now_ms() < end);
		ret = ibv_start_poll(cqx, &pa);
		if (ret == ENOENT)
			continue;
		ASSERT_OK(ret);
		do {
			ASSERT_TRUE(got < 2);
			ASSERT_EQ(IBV_WC_SUCCESS, cqx->status);
			ASSERT_EQ(got ? 42 : 40, cqx->wr_id);
			ASSERT_EQ(IBV_WC_SEND, ibv_wc_read_opcode(cqx));
			ASSERT_EQ(a.qp->qp_num, ibv_wc_read_qp_num(cqx));
			ASSERT_EQ(got ? 102 : 100, ibv_wc_read_byte_len(cqx));
			ts[got] = ibv_wc_read_completion_ts(cqx);
			ASSERT_NE(0, ts[got]);
			got++;
		} while ((ret = ibv_next_poll(cqx)) == 0);
		ASSERT_EQ(ENOENT, ret);
		ibv_end_poll(cqx);
	}
	ASSERT_LE(ts[0], ts[1]);
	ASSERT_EQ(ENOENT, ibv_start_poll(cqx, &pa)); /* nothing more */

	ASSERT_OK(ibv_destroy_qp(a.qp));
	a.qp = NULL;
	ASSERT_OK(ibv_destroy_cq(a.scq));
	a.scq = a.rcq = NULL;
	sv_end_close(&a);
	sv_end_close(&b);
}

SV_TEST(ex_qp_unsupported_ops)
{
	struct sv_end e;
	struct ibv_cq *cq;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	cq = ibv_create_cq(e.ctx, 4, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	errno = 0;
	ASSERT_NULL(
		create_qp_ex(&e, cq, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_TSO));
	ASSERT_EQ(EOPNOTSUPP, errno);
	/* and the context is still fine for a supported one */
	e.qp = create_qp_ex(&e, cq, IBV_QP_EX_WITH_SEND);
	ASSERT_NOT_NULL(e.qp);
	ASSERT_OK(ibv_destroy_qp(e.qp));
	e.qp = NULL;
	ASSERT_OK(ibv_destroy_cq(cq));
	sv_end_close(&e);
}
