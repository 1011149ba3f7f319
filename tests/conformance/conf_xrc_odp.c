// SPDX-License-Identifier: MIT
/*
 * On-demand paging over XRC (issue 28 item 3): ibv_query_device_ex's
 * xrc_odp_caps, and what they claim, on ODP MRs over memory never touched
 * at registration on both sides: XRC_SEND from an ODP MR into an XRC SRQ
 * receive on an ODP MR of the target; RDMA write, read and atomic
 * through the target's XRC_RECV QP into an ODP MR; and a target ODP
 * receive buffer unmapped under its MR (the receive completes with a
 * local protection error, the send with a remote operation error).
 */
#include "pair.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE   4096
#define NPAGES 16
#define ODP_ALL                                              \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |  \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | \
	 IBV_ACCESS_ON_DEMAND)
#define XRC_CAPS                                                               \
	(IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ | \
	 IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV)

/* One context: the initiator's and the target's PDs and ODP MRs over
 * fresh anonymous memory, never touched before registration. */
struct xo {
	struct ibv_context *ctx;
	struct ibv_pd *ipd, *tpd;
	struct ibv_cq *cq;
	struct ibv_xrcd *xrcd;
	struct ibv_srq *srq;
	struct ibv_qp *ini, *tgt;
	uint8_t *imem, *tmem;
	struct ibv_mr *imr, *tmr;
	uint16_t lid;
};

static uint8_t *fresh(void)
{
	uint8_t *p = mmap(NULL, NPAGES * PAGE, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ASSERT_TRUE(p != MAP_FAILED);
	return p;
}

static void xo_open(struct xo *x)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_xrcd_init_attr xa = {.comp_mask = IBV_XRCD_INIT_ATTR_FD |
						     IBV_XRCD_INIT_ATTR_OFLAGS,
					.fd = -1,
					.oflags = O_CREAT};
	struct ibv_port_attr pa;

	memset(x, 0, sizeof(*x));
	ASSERT_NOT_NULL(l);
	ASSERT_NOT_NULL(l[0]);
	x->ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	ASSERT_NOT_NULL(x->ctx);
	ASSERT_OK(ibv_query_port(x->ctx, 1, &pa));
	x->lid = pa.lid;
	x->ipd = ibv_alloc_pd(x->ctx);
	x->tpd = ibv_alloc_pd(x->ctx);
	ASSERT_NOT_NULL(x->ipd);
	ASSERT_NOT_NULL(x->tpd);
	x->cq = ibv_create_cq(x->ctx, 64, NULL, NULL, 0);
	ASSERT_NOT_NULL(x->cq);
	x->imem = fresh();
	x->tmem = fresh();
	x->imr = ibv_reg_mr(x->ipd, x->imem, NPAGES * PAGE, ODP_ALL);
	x->tmr = ibv_reg_mr(x->tpd, x->tmem, NPAGES * PAGE, ODP_ALL);
	ASSERT_NOT_NULL(x->imr);
	ASSERT_NOT_NULL(x->tmr);
	x->xrcd = ibv_open_xrcd(x->ctx, &xa);
	ASSERT_NOT_NULL(x->xrcd);
	{
		struct ibv_srq_init_attr_ex a = {
			.attr = {.max_wr = 8, .max_sge = 1},
			.comp_mask = IBV_SRQ_INIT_ATTR_TYPE |
				     IBV_SRQ_INIT_ATTR_XRCD |
				     IBV_SRQ_INIT_ATTR_CQ |
				     IBV_SRQ_INIT_ATTR_PD,
			.srq_type = IBV_SRQT_XRC,
			.pd = x->tpd,
			.xrcd = x->xrcd,
			.cq = x->cq,
		};

		x->srq = ibv_create_srq_ex(x->ctx, &a);
		ASSERT_NOT_NULL(x->srq);
	}
	{
		struct ibv_qp_init_attr_ex a = {.qp_type = IBV_QPT_XRC_RECV,
						.comp_mask =
							IBV_QP_INIT_ATTR_XRCD,
						.xrcd = x->xrcd};

		x->tgt = ibv_create_qp_ex(x->ctx, &a);
		ASSERT_NOT_NULL(x->tgt);
	}
	{
		struct ibv_qp_init_attr_ex a = {
			.qp_type = IBV_QPT_XRC_SEND,
			.send_cq = x->cq,
			.cap = {.max_send_wr = 16, .max_send_sge = 1},
			.comp_mask = IBV_QP_INIT_ATTR_PD,
			.pd = x->ipd,
			.sq_sig_all = 1,
		};

		x->ini = ibv_create_qp_ex(x->ctx, &a);
		ASSERT_NOT_NULL(x->ini);
	}
}

static void to_init(struct ibv_qp *qp, int access)
{
	struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags = access};

	ASSERT_OK(ibv_modify_qp(qp, &m,
				IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					IBV_QP_ACCESS_FLAGS));
}

static void xo_connect(struct xo *x)
{
	struct ibv_qp_attr m = {.qp_state = IBV_QPS_RTR,
				.dest_qp_num = x->ini->qp_num,
				.path_mtu = IBV_MTU_1024,
				.rq_psn = 100,
				.max_dest_rd_atomic = 4,
				.min_rnr_timer = 1,
				.ah_attr = {.dlid = x->lid, .port_num = 1}};

	to_init(x->tgt, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC);
	to_init(x->ini, 0);
	ASSERT_OK(ibv_modify_qp(x->tgt, &m,
				IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					IBV_QP_MAX_DEST_RD_ATOMIC |
					IBV_QP_MIN_RNR_TIMER));
	m = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTS, .timeout = 14, .sq_psn = 7};
	ASSERT_OK(ibv_modify_qp(x->tgt, &m,
				IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN));
	m = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR,
				 .dest_qp_num = x->tgt->qp_num,
				 .path_mtu = IBV_MTU_1024,
				 .rq_psn = 7,
				 .ah_attr = {.dlid = x->lid, .port_num = 1}};
	ASSERT_OK(ibv_modify_qp(x->ini, &m,
				IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					IBV_QP_DEST_QPN | IBV_QP_RQ_PSN));
	m = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS,
				 .timeout = 14,
				 .retry_cnt = 7,
				 .rnr_retry = 7,
				 .sq_psn = 100,
				 .max_rd_atomic = 4};
	ASSERT_OK(ibv_modify_qp(x->ini, &m,
				IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN |
					IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					IBV_QP_MAX_QP_RD_ATOMIC));
}

static void xo_close(struct xo *x)
{
	ASSERT_OK(ibv_destroy_qp(x->ini));
	ASSERT_OK(ibv_destroy_qp(x->tgt));
	ASSERT_OK(ibv_destroy_srq(x->srq));
	ASSERT_OK(ibv_close_xrcd(x->xrcd));
	ASSERT_OK(ibv_dereg_mr(x->imr));
	ASSERT_OK(ibv_dereg_mr(x->tmr));
	ASSERT_OK(ibv_destroy_cq(x->cq));
	ASSERT_OK(ibv_dealloc_pd(x->ipd));
	ASSERT_OK(ibv_dealloc_pd(x->tpd));
	ASSERT_OK(ibv_close_device(x->ctx));
	munmap(x->imem, NPAGES * PAGE);
	munmap(x->tmem, NPAGES * PAGE);
}

static uint32_t srqn(struct ibv_srq *srq)
{
	uint32_t n = 0;

	ASSERT_OK(ibv_get_srq_num(srq, &n));
	return n;
}

static void srq_recv(struct xo *x, uint64_t id, uint8_t *at, uint32_t len)
{
	struct ibv_sge sg = {
		.addr = (uintptr_t)at, .length = len, .lkey = x->tmr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sg, .num_sge = 1},
			   *bad;

	ASSERT_OK(ibv_post_srq_recv(x->srq, &wr, &bad));
}

/* One WR of the initiator over imem[off, off+len) (remote: raddr). */
static void post(struct xo *x, uint64_t id, enum ibv_wr_opcode op, uint32_t off,
		 uint32_t len, uint64_t raddr, uint64_t add)
{
	struct ibv_sge sg = {.addr = (uintptr_t)(x->imem + off),
			     .length = len,
			     .lkey = x->imr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = op},
			   *bad;

	wr.qp_type.xrc.remote_srqn = srqn(x->srq);
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = x->tmr->rkey;
		wr.wr.atomic.compare_add = add;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = x->tmr->rkey;
	}
	ASSERT_OK(ibv_post_send(x->ini, &wr, &bad));
}

static void expect(struct xo *x, enum ibv_wc_status st, uint64_t id)
{
	EXPECT_WC(x->cq, st, id);
}

SV_TEST(xrc_odp_caps)
{
	struct ibv_device_attr_ex ax;
	struct xo x;

	xo_open(&x);
	ASSERT_OK(ibv_query_device_ex(x.ctx, NULL, &ax));
	ASSERT_EQ(XRC_CAPS, ax.xrc_odp_caps);
	ASSERT_TRUE(ax.odp_caps.general_caps & IBV_ODP_SUPPORT);
	xo_close(&x);
}

SV_TEST(xrc_odp_send_write_read_atomic)
{
	struct ibv_wc wc;
	struct xo x;

	xo_open(&x);
	xo_connect(&x);
	/* a send of 3 MTUs from untouched-until-now pages, into a receive
	 * on pages of the target nobody has touched */
	sv_fill(x.imem, 3000, 71);
	srq_recv(&x, 11, x.tmem + 2 * PAGE, 4096);
	post(&x, 1, IBV_WR_SEND, 0, 3000, 0, 0);
	for (int got = 0; got < 2; got++) {
		WAIT_WC(x.cq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		if (wc.opcode == IBV_WC_RECV) {
			ASSERT_EQ(11, wc.wr_id);
			ASSERT_EQ(3000, wc.byte_len);
			ASSERT_EQ(x.tgt->qp_num, wc.qp_num);
		} else {
			ASSERT_EQ(1, wc.wr_id);
		}
	}
	ASSERT_EQ(-1, sv_check(x.tmem + 2 * PAGE, 3000, 71));
	/* a page of the target never touched reads zeros */
	post(&x, 2, IBV_WR_RDMA_READ, 4 * PAGE, 2048,
	     (uintptr_t)x.tmem + 8 * PAGE, 0);
	expect(&x, IBV_WC_SUCCESS, 2);
	for (int i = 0; i < 2048; i++)
		ASSERT_EQ(0, x.imem[4 * PAGE + i]);
	/* write, read back, fetch-and-add */
	sv_fill(x.imem + PAGE, 2048, 72);
	post(&x, 3, IBV_WR_RDMA_WRITE, PAGE, 2048,
	     (uintptr_t)x.tmem + 9 * PAGE + 100, 0);
	expect(&x, IBV_WC_SUCCESS, 3);
	ASSERT_EQ(-1, sv_check(x.tmem + 9 * PAGE + 100, 2048, 72));
	post(&x, 4, IBV_WR_RDMA_READ, 5 * PAGE, 2048,
	     (uintptr_t)x.tmem + 9 * PAGE + 100, 0);
	expect(&x, IBV_WC_SUCCESS, 4);
	ASSERT_EQ(-1, sv_check(x.imem + 5 * PAGE, 2048, 72));
	*(uint64_t *)(x.tmem + 12 * PAGE) = 40;
	post(&x, 5, IBV_WR_ATOMIC_FETCH_AND_ADD, 6 * PAGE, 8,
	     (uintptr_t)x.tmem + 12 * PAGE, 2);
	expect(&x, IBV_WC_SUCCESS, 5);
	ASSERT_EQ(42, *(uint64_t *)(x.tmem + 12 * PAGE));
	ASSERT_EQ(40, *(uint64_t *)(x.imem + 6 * PAGE));
	/* outside the target's MR: refused at the target */
	post(&x, 6, IBV_WR_RDMA_WRITE, PAGE, 64,
	     (uintptr_t)x.tmem + NPAGES * PAGE - 32, 0);
	expect(&x, IBV_WC_REM_ACCESS_ERR, 6);
	xo_close(&x);
}

/* The target's receive buffer unmapped under its ODP MR: the receive
 * fails at the target (its own resource), the send remotely. */
SV_TEST(xrc_odp_receive_unmapped)
{
	struct ibv_wc wc;
	bool recv_seen = false, send_seen = false;
	struct xo x;

	xo_open(&x);
	xo_connect(&x);
	ASSERT_OK(munmap(x.tmem + 8 * PAGE, 8 * PAGE));
	/* keep the hole: nothing else may be mapped there meanwhile */
	ASSERT_TRUE(mmap(x.tmem + 8 * PAGE, 8 * PAGE, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
			 0) != MAP_FAILED);
	srq_recv(&x, 21, x.tmem + 8 * PAGE, 4096);
	sv_fill(x.imem, 1000, 73);
	post(&x, 7, IBV_WR_SEND, 0, 1000, 0, 0);
	for (int got = 0; got < 2; got++) {
		WAIT_WC(x.cq, &wc, SV_WC_TIMEOUT_MS);
		if (wc.wr_id == 21) {
			ASSERT_EQ(IBV_WC_LOC_PROT_ERR, wc.status);
			recv_seen = true;
		} else {
			ASSERT_EQ(7, wc.wr_id);
			ASSERT_EQ(IBV_WC_REM_OP_ERR, wc.status);
			send_seen = true;
		}
	}
	ASSERT_TRUE(recv_seen && send_seen);
	xo_close(&x);
}
