// SPDX-License-Identifier: MIT
/*
 * Unreliable connected QPs (IBA 9.8): the UC state machine's attribute
 * masks, sends and RDMA writes (with immediate) that complete at the
 * sender as soon as they are sent, no reads or atomics, and a responder
 * that drops what it cannot take — no receive posted, a bad key, a
 * message too long — silently, with no error on either side, and goes on
 * with the next message.
 */
#include <arpa/inet.h>

#include "pair.h"

#define LEN    (1 << 20)
#define REMOTE (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

struct uc_end {
	struct sv_end e;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
};

static void uc_open(struct uc_end *u)
{
	struct ibv_qp_init_attr ia = {.qp_type = IBV_QPT_UC,
				      .cap = {.max_send_wr = 16,
					      .max_recv_wr = 16,
					      .max_send_sge = 1,
					      .max_recv_sge = 1}};

	memset(u, 0, sizeof(*u));
	sv_end_open_ctx(&u->e);
	u->cq = ibv_create_cq(u->e.ctx, 64, NULL, NULL, 0);
	ASSERT_NOT_NULL(u->cq);
	ia.send_cq = ia.recv_cq = u->cq;
	u->qp = ibv_create_qp(u->e.pd, &ia);
	ASSERT_NOT_NULL(u->qp);
	ASSERT_EQ(IBV_QPT_UC, u->qp->qp_type);
	u->buf = calloc(1, LEN);
	ASSERT_NOT_NULL(u->buf);
	u->mr = ibv_reg_mr(u->e.pd, u->buf, LEN, REMOTE);
	ASSERT_NOT_NULL(u->mr);
}

static void uc_close(struct uc_end *u)
{
	ASSERT_OK(ibv_destroy_qp(u->qp));
	ASSERT_OK(ibv_dereg_mr(u->mr));
	ASSERT_OK(ibv_destroy_cq(u->cq));
	free(u->buf);
	ASSERT_OK(ibv_dealloc_pd(u->e.pd));
	ASSERT_OK(ibv_close_device(u->e.ctx));
}

/* RESET -> INIT -> RTR -> RTS with UC's masks, toward peer. */
static void uc_connect(struct uc_end *u, const struct uc_end *peer)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE};

	ASSERT_OK(ibv_modify_qp(u->qp, &a,
				IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					IBV_QP_ACCESS_FLAGS));
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = peer->qp->qp_num,
		.rq_psn = 0x100,
		.ah_attr = {.dlid = peer->e.lid, .port_num = 1}};
	ASSERT_OK(ibv_modify_qp(u->qp, &a,
				IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					IBV_QP_DEST_QPN | IBV_QP_RQ_PSN));
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .sq_psn = 0x100};
	ASSERT_OK(ibv_modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN));
}

static void uc_pair(struct uc_end *a, struct uc_end *b)
{
	uc_open(a);
	uc_open(b);
	uc_connect(a, b);
	uc_connect(b, a);
}

static int post_recv(struct uc_end *u, uint64_t id, size_t off, uint32_t len)
{
	struct ibv_sge sg = {(uintptr_t)u->buf + off, len, u->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sg, .num_sge = 1};
	struct ibv_recv_wr *bad;

	return ibv_post_recv(u->qp, &wr, &bad);
}

static int post(struct uc_end *u, uint64_t id, enum ibv_wr_opcode op,
		size_t off, uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sg = {(uintptr_t)u->buf + off, len, u->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED,
				 .imm_data = htonl(0x1234)};
	struct ibv_send_wr *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(u->qp, &wr, &bad);
}

/* A completion of wr_id with status, and its opcode. */
static enum ibv_wc_opcode expect(struct ibv_cq *cq, uint64_t id,
				 enum ibv_wc_status st)
{
	struct ibv_wc wc;

	WAIT_WC(cq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(st, wc.status);
	ASSERT_EQ(id, wc.wr_id);
	return wc.opcode;
}

static enum ibv_qp_state state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	ASSERT_OK(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia));
	return a.qp_state;
}

/* UC's masks: RC's acknowledgement and read/atomic attributes refused. */
SV_TEST(uc_state_masks)
{
	struct uc_end u, v;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};

	uc_open(&u);
	uc_open(&v);
	ASSERT_EQ(EINVAL, ibv_modify_qp(u.qp, &a, IBV_QP_STATE | IBV_QP_PORT));
	ASSERT_OK(ibv_modify_qp(u.qp, &a,
				IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					IBV_QP_ACCESS_FLAGS));
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR,
				 .path_mtu = IBV_MTU_1024,
				 .dest_qp_num = v.qp->qp_num,
				 .ah_attr = {.dlid = v.e.lid, .port_num = 1},
				 .max_dest_rd_atomic = 1,
				 .min_rnr_timer = 12};
	/* what RC requires is not even allowed on UC */
	ASSERT_EQ(EINVAL,
		  ibv_modify_qp(u.qp, &a,
				IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					IBV_QP_MAX_DEST_RD_ATOMIC |
					IBV_QP_MIN_RNR_TIMER));
	ASSERT_OK(ibv_modify_qp(u.qp, &a,
				IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					IBV_QP_DEST_QPN | IBV_QP_RQ_PSN));
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .timeout = 14};
	ASSERT_EQ(EINVAL,
		  ibv_modify_qp(u.qp, &a,
				IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT));
	ASSERT_OK(ibv_modify_qp(u.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN));
	ASSERT_EQ(IBV_QPS_RTS, state(u.qp));
	uc_close(&u);
	uc_close(&v);
}

SV_TEST(uc_send_write_write_imm)
{
	struct uc_end a, b;

	uc_pair(&a, &b);
	/* send */
	ASSERT_OK(post_recv(&b, 1, 0, 65536));
	sv_fill(a.buf, 5000, 1);
	ASSERT_OK(post(&a, 2, IBV_WR_SEND, 0, 5000, 0, 0));
	ASSERT_EQ(IBV_WC_SEND, expect(a.cq, 2, IBV_WC_SUCCESS));
	ASSERT_EQ(IBV_WC_RECV, expect(b.cq, 1, IBV_WC_SUCCESS));
	ASSERT_EQ(-1, sv_check(b.buf, 5000, 1));
	/* write */
	sv_fill(a.buf + 100000, 70000, 2);
	ASSERT_OK(post(&a, 3, IBV_WR_RDMA_WRITE, 100000, 70000,
		       (uintptr_t)b.buf + 200000, b.mr->rkey));
	ASSERT_EQ(IBV_WC_RDMA_WRITE, expect(a.cq, 3, IBV_WC_SUCCESS));
	/* write with immediate: consumes a receive, tells the data is in */
	ASSERT_OK(post_recv(&b, 4, 0, 0));
	ASSERT_OK(post(&a, 5, IBV_WR_RDMA_WRITE_WITH_IMM, 0, 10,
		       (uintptr_t)b.buf + 500000, b.mr->rkey));
	ASSERT_EQ(IBV_WC_RDMA_WRITE, expect(a.cq, 5, IBV_WC_SUCCESS));
	ASSERT_EQ(IBV_WC_RECV_RDMA_WITH_IMM, expect(b.cq, 4, IBV_WC_SUCCESS));
	ASSERT_EQ(-1, sv_check(b.buf + 200000, 70000, 2));
	ASSERT_EQ(-1, sv_check(b.buf + 500000, 10, 1));
	uc_close(&a);
	uc_close(&b);
}

/* No reads or atomics on UC: EINVAL at post, EOPNOTSUPP in send_ops. */
SV_TEST(uc_no_read_no_atomic)
{
	struct uc_end a, b;
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_UC,
		.comp_mask =
			IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags =
			IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ,
		.cap = {.max_send_wr = 4,
			.max_recv_wr = 4,
			.max_send_sge = 1,
			.max_recv_sge = 1}};

	uc_pair(&a, &b);
	ASSERT_EQ(EINVAL, post(&a, 1, IBV_WR_RDMA_READ, 0, 64, (uintptr_t)b.buf,
			       b.mr->rkey));
	ASSERT_EQ(EINVAL, post(&a, 1, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, 8,
			       (uintptr_t)b.buf, b.mr->rkey));
	ia.pd = a.e.pd;
	ia.send_cq = ia.recv_cq = a.cq;
	errno = 0;
	ASSERT_NULL(ibv_create_qp_ex(a.e.ctx, &ia));
	ASSERT_EQ(EOPNOTSUPP, errno);
	uc_close(&a);
	uc_close(&b);
}

/* What the responder cannot take is lost, with no error anywhere; the
 * next message arrives. */
SV_TEST(uc_drops_silently)
{
	struct uc_end a, b;
	uint8_t *m = malloc(LEN);

	ASSERT_NOT_NULL(m);
	uc_pair(&a, &b);
	memset(b.buf, 0xee, LEN);
	/* no receive posted: the sender completes, the message is gone */
	sv_fill(a.buf, 3000, 1);
	ASSERT_OK(post(&a, 1, IBV_WR_SEND, 0, 3000, 0, 0));
	ASSERT_EQ(IBV_WC_SEND, expect(a.cq, 1, IBV_WC_SUCCESS));
	/* a bad rkey, and a write past the MR: dropped too */
	ASSERT_OK(post(&a, 2, IBV_WR_RDMA_WRITE, 0, 64, (uintptr_t)b.buf,
		       b.mr->rkey ^ 0x100));
	ASSERT_EQ(IBV_WC_RDMA_WRITE, expect(a.cq, 2, IBV_WC_SUCCESS));
	ASSERT_OK(post(&a, 3, IBV_WR_RDMA_WRITE, 0, 64,
		       (uintptr_t)b.buf + LEN - 32, b.mr->rkey));
	ASSERT_EQ(IBV_WC_RDMA_WRITE, expect(a.cq, 3, IBV_WC_SUCCESS));
	/* a message longer than the receive: dropped, the receive stays */
	ASSERT_OK(post_recv(&b, 10, 0, 1000));
	ASSERT_OK(post(&a, 4, IBV_WR_SEND, 0, 3000, 0, 0));
	ASSERT_EQ(IBV_WC_SEND, expect(a.cq, 4, IBV_WC_SUCCESS));
	/* the next message takes that receive */
	sv_fill(a.buf + 8192, 900, 2);
	ASSERT_OK(post(&a, 5, IBV_WR_SEND, 8192, 900, 0, 0));
	ASSERT_EQ(IBV_WC_SEND, expect(a.cq, 5, IBV_WC_SUCCESS));
	ASSERT_EQ(IBV_WC_RECV, expect(b.cq, 10, IBV_WC_SUCCESS));
	ASSERT_EQ(-1, sv_check(b.buf, 900, 2));
	memcpy(m, b.buf, LEN);
	memset(m, 0xee, 900);
	for (size_t i = 0; i < LEN; i++)
		ASSERT_EQ(0xee, m[i]); /* nothing of the dropped ones */
	NO_WC(b.cq, 50);
	ASSERT_EQ(IBV_QPS_RTS, state(a.qp));
	ASSERT_EQ(IBV_QPS_RTS, state(b.qp));
	uc_close(&a);
	uc_close(&b);
	free(m);
}

/* A UC QP of b on srq, in place of b's own, connected to a. */
static void uc_on_srq(struct uc_end *b, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_UC,
		.srq = srq,
		.cap = {.max_send_wr = 16, .max_send_sge = 1}};

	ASSERT_OK(ibv_destroy_qp(b->qp));
	ia.send_cq = ia.recv_cq = b->cq;
	b->qp = ibv_create_qp(b->e.pd, &ia);
	ASSERT_NOT_NULL(b->qp);
	ASSERT_EQ(srq, b->qp->srq);
	ASSERT_EQ(0, ia.cap.max_recv_wr);
}

static int post_srq(struct uc_end *u, struct ibv_srq *srq, uint64_t id,
		    size_t off, uint32_t len)
{
	struct ibv_sge sg = {(uintptr_t)u->buf + off, len, u->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sg, .num_sge = 1};
	struct ibv_recv_wr *bad;

	return ibv_post_srq_recv(srq, &wr, &bad);
}

/* UC QPs on a shared receive queue: two senders' sends and a write with
 * immediate take the SRQ's WQEs in order, on the QP they arrived on; a
 * send while the SRQ is empty is lost (no RNR on UC) and the SRQ's next
 * WQE goes to the next message; ibv_post_recv on the QP is refused. */
SV_TEST(uc_on_srq)
{
	struct uc_end a, a2, b, b2;
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 16, .max_sge = 1}};
	struct ibv_srq *srq;
	struct ibv_wc wc;

	uc_open(&a);
	uc_open(&a2);
	uc_open(&b);
	b2 = b; /* a second QP of b's context, on the same SRQ */
	srq = ibv_create_srq(b.e.pd, &sa);
	ASSERT_NOT_NULL(srq);
	uc_on_srq(&b, srq);
	b2.qp = NULL;
	{
		struct ibv_qp_init_attr ia = {
			.qp_type = IBV_QPT_UC,
			.srq = srq,
			.send_cq = b.cq,
			.recv_cq = b.cq,
			.cap = {.max_send_wr = 4, .max_send_sge = 1}};

		b2.qp = ibv_create_qp(b.e.pd, &ia);
		ASSERT_NOT_NULL(b2.qp);
	}
	uc_connect(&a, &b);
	uc_connect(&b, &a);
	uc_connect(&a2, &b2);
	uc_connect(&b2, &a2);
	ASSERT_EQ(EINVAL, post_recv(&b, 99, 0, 64));

	for (int i = 0; i < 3; i++)
		ASSERT_OK(post_srq(&b, srq, 10 + i, (size_t)i * 8192, 8192));
	sv_fill(a.buf, 3000, 1);
	ASSERT_OK(post(&a, 1, IBV_WR_SEND, 0, 3000, 0, 0));
	ASSERT_EQ(IBV_WC_SEND, expect(a.cq, 1, IBV_WC_SUCCESS));
	WAIT_WC(b.cq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(10, wc.wr_id);
	ASSERT_EQ(b.qp->qp_num, wc.qp_num);
	ASSERT_EQ(3000, wc.byte_len);
	ASSERT_EQ(-1, sv_check(b.buf, 3000, 1));

	sv_fill(a2.buf, 2000, 2);
	ASSERT_OK(post(&a2, 2, IBV_WR_SEND, 0, 2000, 0, 0));
	ASSERT_EQ(IBV_WC_SEND, expect(a2.cq, 2, IBV_WC_SUCCESS));
	WAIT_WC(b.cq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(11, wc.wr_id);
	ASSERT_EQ(b2.qp->qp_num, wc.qp_num);
	ASSERT_EQ(-1, sv_check(b.buf + 8192, 2000, 2));

	/* write with immediate: the data, and the SRQ's next WQE */
	ASSERT_OK(post(&a, 3, IBV_WR_RDMA_WRITE_WITH_IMM, 0, 100,
		       (uintptr_t)b.buf + 500000, b.mr->rkey));
	ASSERT_EQ(IBV_WC_RDMA_WRITE, expect(a.cq, 3, IBV_WC_SUCCESS));
	WAIT_WC(b.cq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(IBV_WC_RECV_RDMA_WITH_IMM, wc.opcode);
	ASSERT_EQ(12, wc.wr_id);
	ASSERT_EQ(-1, sv_check(b.buf + 500000, 100, 1));

	/* the SRQ is empty: lost, silently; the next one arrives */
	ASSERT_OK(post(&a, 4, IBV_WR_SEND, 0, 3000, 0, 0));
	ASSERT_EQ(IBV_WC_SEND, expect(a.cq, 4, IBV_WC_SUCCESS));
	NO_WC(b.cq, 50);
	ASSERT_OK(post_srq(&b, srq, 13, 0, 8192));
	sv_fill(a.buf + 8192, 500, 3);
	ASSERT_OK(post(&a, 5, IBV_WR_SEND, 8192, 500, 0, 0));
	ASSERT_EQ(IBV_WC_SEND, expect(a.cq, 5, IBV_WC_SUCCESS));
	WAIT_WC(b.cq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(13, wc.wr_id);
	ASSERT_EQ(500, wc.byte_len);
	ASSERT_EQ(-1, sv_check(b.buf, 500, 3));
	NO_WC(b.cq, 20);
	ASSERT_EQ(IBV_QPS_RTS, state(b.qp));

	ASSERT_EQ(EBUSY, ibv_destroy_srq(srq));
	ASSERT_OK(ibv_destroy_qp(b2.qp));
	ASSERT_OK(ibv_destroy_qp(b.qp));
	b.qp = NULL;
	ASSERT_OK(ibv_destroy_srq(srq));
	b.qp = ibv_create_qp(
		b.e.pd, &(struct ibv_qp_init_attr){.qp_type = IBV_QPT_UC,
						   .send_cq = b.cq,
						   .recv_cq = b.cq,
						   .cap = {.max_send_wr = 1,
							   .max_recv_wr = 1,
							   .max_send_sge = 1,
							   .max_recv_sge = 1}});
	ASSERT_NOT_NULL(b.qp);
	uc_close(&a);
	uc_close(&a2);
	uc_close(&b);
}
