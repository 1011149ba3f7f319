// SPDX-License-Identifier: MIT
/* UD conformance helpers (ud_end.h). */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "ud_end.h"

struct ud_end_opts ud_end_opts(uint32_t depth, size_t len, uint32_t qkey)
{
	return (struct ud_end_opts){.send_wr = depth,
				    .recv_wr = depth,
				    .sge = 1,
				    .cqe = 4 * (int)depth,
				    .len = len,
				    .qkey = qkey,
				    .ready = true};
}

struct ibv_qp *ud_end_qp(struct ud_end *u, enum ibv_qp_type t, uint32_t depth,
			 uint32_t flags)
{
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = t,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = u->e.pd,
		.send_cq = u->scq,
		.recv_cq = u->cq,
		.cap = {.max_send_wr = depth ? depth : u->o.send_wr,
			.max_recv_wr = depth ? depth : u->o.recv_wr,
			.max_send_sge = u->o.sge,
			.max_recv_sge = u->o.sge}};
	struct ibv_qp *qp;

	if (flags) {
		ia.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
		ia.create_flags = flags;
		qp = ibv_create_qp_ex(u->e.ctx, &ia);
	} else {
		struct ibv_qp_init_attr a = {.qp_type = t,
					     .send_cq = ia.send_cq,
					     .recv_cq = ia.recv_cq,
					     .cap = ia.cap};

		qp = ibv_create_qp(u->e.pd, &a);
	}
	ASSERT_NOT_NULL(qp);
	ASSERT_EQ(t, qp->qp_type);
	return qp;
}

void ud_end_ready(struct ibv_qp *qp, uint32_t qkey)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = qkey};

	ASSERT_OK(ibv_modify_qp(qp, &a,
				IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					IBV_QP_QKEY));
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR};
	ASSERT_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE));
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .sq_psn = 7};
	ASSERT_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN));
}

void ud_end_open(struct ud_end *u, const struct ud_end_opts *o)
{
	memset(u, 0, sizeof(*u));
	u->o = *o;
	sv_end_open_ctx(&u->e);
	if (o->channel) {
		u->ch = ibv_create_comp_channel(u->e.ctx);
		ASSERT_NOT_NULL(u->ch);
	}
	u->cq = ibv_create_cq(u->e.ctx, o->cqe, NULL, u->ch, 0);
	ASSERT_NOT_NULL(u->cq);
	u->scq = u->cq;
	if (o->two_cqs) {
		u->scq = ibv_create_cq(u->e.ctx, o->cqe, NULL, u->ch, 0);
		ASSERT_NOT_NULL(u->scq);
	}
	u->buf = calloc(1, o->len);
	ASSERT_NOT_NULL(u->buf);
	u->mr = ibv_reg_mr(u->e.pd, u->buf, o->len, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(u->mr);
	u->qp = ud_end_qp(u, IBV_QPT_UD, 0, 0);
	if (o->ready)
		ud_end_ready(u->qp, o->qkey);
	if (o->ah) {
		struct ibv_ah_attr aa = {.dlid = u->e.lid, .port_num = 1};

		u->ah = ibv_create_ah(u->e.pd, &aa);
		ASSERT_NOT_NULL(u->ah);
	}
}

void ud_end_close(struct ud_end *u)
{
	if (u->ah)
		ASSERT_OK(ibv_destroy_ah(u->ah));
	if (u->qp)
		ASSERT_OK(ibv_destroy_qp(u->qp));
	ASSERT_OK(ibv_dereg_mr(u->mr));
	if (u->scq != u->cq)
		ASSERT_OK(ibv_destroy_cq(u->scq));
	ASSERT_OK(ibv_destroy_cq(u->cq));
	if (u->ch)
		ASSERT_OK(ibv_destroy_comp_channel(u->ch));
	free(u->buf);
	ASSERT_OK(ibv_dealloc_pd(u->e.pd));
	ASSERT_OK(ibv_close_device(u->e.ctx));
}

int ud_end_recv(struct ud_end *u, struct ibv_qp *qp, uint64_t id, size_t off,
		uint32_t len)
{
	struct ibv_sge sg = {(uintptr_t)u->buf + off, len, u->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sg, .num_sge = 1};
	struct ibv_recv_wr *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

int ud_end_send(struct ud_end *u, struct ibv_qp *qp, uint64_t id,
		enum ibv_wr_opcode op, size_t off, uint32_t len,
		struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct ibv_sge sg = {(uintptr_t)u->buf + off, len, u->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED,
				 .imm_data = htonl(0xabcd1234)};
	struct ibv_send_wr *bad;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	return ibv_post_send(qp, &wr, &bad);
}
