// SPDX-License-Identifier: MIT
/*
 * Conformance helpers (pair.h): build an end of an RC connection through
 * the public verbs API, connect two of them, post over the registered
 * buffer and wait for completions with deadlines.
 */
#include "pair.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct sv_end_opts sv_end_opts_default(void)
{
	return (struct sv_end_opts){
		.cqe = 64,
		.max_send_wr = 32,
		.max_recv_wr = 32,
		.max_send_sge = 4,
		.max_recv_sge = 4,
		.max_inline = 0,
		.sq_sig_all = true,
		.buf_len = 65536,
		.mtu = IBV_MTU_1024,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.min_rnr_timer = 12,
		.psn = 0x1234,
	};
}

void sv_end_open_ctx(struct sv_end *e)
{
	struct ibv_device **list;
	struct ibv_port_attr pa;
	int n = 0;

	list = ibv_get_device_list(&n);
	ASSERT_NOT_NULL(list);
	ASSERT_GE(n, 1);
	ASSERT_STR_EQ("softverbs0", ibv_get_device_name(list[0]));
	e->ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	ASSERT_NOT_NULL(e->ctx);
	e->pd = ibv_alloc_pd(e->ctx);
	ASSERT_NOT_NULL(e->pd);
	ASSERT_OK(ibv_query_port(e->ctx, 1, &pa));
	ASSERT_EQ(IBV_PORT_ACTIVE, pa.state);
	ASSERT_NE(0, pa.lid);
	e->lid = pa.lid;
}

bool sv_end_share_memory(struct sv_end *e)
{
	struct ibv_cq *cq = ibv_create_cq(e->ctx, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = {.qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 1,
					      .max_recv_wr = 1,
					      .max_send_sge = 1,
					      .max_recv_sge = 1}};
	struct sv_end q[2];

	ASSERT_NOT_NULL(cq);
	ia.send_cq = ia.recv_cq = cq;
	for (int i = 0; i < 2; i++) {
		q[i] = *e;
		q[i].o = sv_end_opts_default();
		q[i].qp = ibv_create_qp(e->pd, &ia);
		ASSERT_NOT_NULL(q[i].qp);
	}
	for (int i = 0; i < 2; i++)
		sv_end_connect(&q[i], q[1 - i].qp->qp_num, q[1 - i].o.psn);
	for (int i = 0; i < 2; i++)
		ASSERT_OK(ibv_destroy_qp(q[i].qp));
	ASSERT_OK(ibv_destroy_cq(cq));
	return !sv_test_wire();
}

void sv_end_open(struct sv_end *e, const struct sv_end_opts *o)
{
	struct ibv_qp_init_attr ia;

	memset(e, 0, sizeof(*e));
	e->o = o ? *o : sv_end_opts_default();
	o = &e->o;
	sv_end_open_ctx(e);
	if (o->channel) {
		e->ch = ibv_create_comp_channel(e->ctx);
		ASSERT_NOT_NULL(e->ch);
	}
	e->scq = ibv_create_cq(e->ctx, o->cqe, e, e->ch, 0);
	ASSERT_NOT_NULL(e->scq);
	if (o->shared_cq) {
		e->rcq = e->scq;
	} else {
		e->rcq = ibv_create_cq(e->ctx, o->cqe, e, e->ch, 0);
		ASSERT_NOT_NULL(e->rcq);
	}
	e->buf = aligned_alloc(4096, (o->buf_len + 4095) & ~(size_t)4095);
	ASSERT_NOT_NULL(e->buf);
	memset(e->buf, 0, o->buf_len);
	e->mr = ibv_reg_mr(e->pd, e->buf, o->buf_len,
			   o->mr_access ? o->mr_access
					: IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(e->mr);

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = e->scq;
	ia.recv_cq = e->rcq;
	ia.qp_type = IBV_QPT_RC;
	ia.sq_sig_all = o->sq_sig_all;
	ia.cap.max_send_wr = o->max_send_wr;
	ia.cap.max_recv_wr = o->max_recv_wr;
	ia.cap.max_send_sge = o->max_send_sge;
	ia.cap.max_recv_sge = o->max_recv_sge;
	ia.cap.max_inline_data = o->max_inline;
	ia.qp_context = e;
	e->qp = ibv_create_qp(e->pd, &ia);
	ASSERT_NOT_NULL(e->qp);
	ASSERT_EQ(IBV_QPS_RESET, e->qp->state);
	ASSERT_GE(ia.cap.max_inline_data, o->max_inline);
}

void sv_end_on_objects(struct sv_end *e, struct ibv_context *ctx,
		       struct ibv_pd *pd, struct ibv_mr *mr, uint8_t *buf)
{
	struct ibv_qp_init_attr ia = {0};
	struct ibv_port_attr pa;

	memset(e, 0, sizeof(*e));
	e->o = sv_end_opts_default();
	e->o.qp_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			 IBV_ACCESS_REMOTE_READ;
	e->ctx = ctx;
	e->pd = pd;
	e->mr = mr;
	e->buf = buf;
	ASSERT_OK(ibv_query_port(ctx, 1, &pa));
	e->lid = pa.lid;
	e->scq = e->rcq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	ASSERT_NOT_NULL(e->scq);
	ia.send_cq = ia.recv_cq = e->scq;
	ia.qp_type = IBV_QPT_RC;
	ia.sq_sig_all = 1;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 2;
	e->qp = ibv_create_qp(pd, &ia);
	ASSERT_NOT_NULL(e->qp);
}

void sv_end_off_objects(struct sv_end *e)
{
	ASSERT_OK(ibv_destroy_qp(e->qp));
	ASSERT_OK(ibv_destroy_cq(e->scq));
}

void sv_end_close(struct sv_end *e)
{
	if (e->qp)
		ASSERT_OK(ibv_destroy_qp(e->qp));
	if (e->mr)
		ASSERT_OK(ibv_dereg_mr(e->mr));
	if (e->rcq && e->rcq != e->scq)
		ASSERT_OK(ibv_destroy_cq(e->rcq));
	if (e->scq)
		ASSERT_OK(ibv_destroy_cq(e->scq));
	if (e->ch)
		ASSERT_OK(ibv_destroy_comp_channel(e->ch));
	if (e->pd)
		ASSERT_OK(ibv_dealloc_pd(e->pd));
	if (e->ctx)
		ASSERT_OK(ibv_close_device(e->ctx));
	free(e->buf);
	memset(e, 0, sizeof(*e));
}

int sv_end_to_init(struct sv_end *e)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = (unsigned int)e->o.qp_access,
	};

	return ibv_modify_qp(e->qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS);
}

int sv_end_to_rtr(struct sv_end *e, uint32_t dest_qpn, uint32_t rq_psn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = e->o.mtu,
		.dest_qp_num = dest_qpn,
		.rq_psn = rq_psn,
		.max_dest_rd_atomic = e->o.rd_atomic ? e->o.rd_atomic : 1,
		.min_rnr_timer = e->o.min_rnr_timer,
		.ah_attr = {.dlid = e->lid, .port_num = 1},
	};

	return ibv_modify_qp(e->qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER);
}

int sv_end_to_rts(struct sv_end *e)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS,
		.sq_psn = e->o.psn,
		.timeout = e->o.timeout,
		.retry_cnt = e->o.retry_cnt,
		.rnr_retry = e->o.rnr_retry,
		.max_rd_atomic = e->o.rd_atomic ? e->o.rd_atomic : 1,
	};

	return ibv_modify_qp(e->qp, &a,
			     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

void sv_end_connect(struct sv_end *e, uint32_t dest_qpn, uint32_t dest_psn)
{
	ASSERT_OK(sv_end_to_init(e));
	ASSERT_OK(sv_end_to_rtr(e, dest_qpn, dest_psn));
	ASSERT_OK(sv_end_to_rts(e));
}

enum ibv_qp_state sv_end_state(struct sv_end *e)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	ASSERT_OK(ibv_query_qp(e->qp, &a, IBV_QP_STATE, &ia));
	return a.qp_state;
}

void sv_pair_open(struct sv_pair *p, const struct sv_end_opts *oa,
		  const struct sv_end_opts *ob)
{
	struct sv_end_opts db = sv_end_opts_default();

	db.psn = 0x5678;
	sv_end_open(&p->a, oa);
	sv_end_open(&p->b, ob ? ob : &db);
	sv_end_connect(&p->a, p->b.qp->qp_num, p->b.o.psn);
	sv_end_connect(&p->b, p->a.qp->qp_num, p->a.o.psn);
}

void sv_pair_close(struct sv_pair *p)
{
	sv_end_close(&p->a);
	sv_end_close(&p->b);
}

void sv_pair_ping(struct sv_pair *p)
{
	struct ibv_wc wc;

	ASSERT_OK(sv_end_recv(&p->b, 1, 0, 64));
	ASSERT_OK(sv_end_send(&p->a, 2, 0, 64, 0));
	WAIT_WC(p->b.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	WAIT_WC(p->a.scq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
}

int sv_end_send(struct sv_end *e, uint64_t wr_id, size_t off, uint32_t len,
		unsigned int flags)
{
	struct ibv_sge sg = {
		.addr = (uintptr_t)(e->buf + off),
		.length = len,
		.lkey = e->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sg,
		.num_sge = len ? 1 : 0,
		.opcode = IBV_WR_SEND,
		.send_flags = flags,
	};
	struct ibv_send_wr *bad = NULL;

	return ibv_post_send(e->qp, &wr, &bad);
}

int sv_end_recv(struct sv_end *e, uint64_t wr_id, size_t off, uint32_t len)
{
	struct ibv_sge sg = {
		.addr = (uintptr_t)(e->buf + off),
		.length = len,
		.lkey = e->mr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sg,
		.num_sge = 1,
	};
	struct ibv_recv_wr *bad = NULL;

	return ibv_post_recv(e->qp, &wr, &bad);
}

static void pause_us(long us)
{
	struct timespec ts = {0, us * 1000};

	nanosleep(&ts, NULL);
}

bool sv_wc_poll(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms)
{
	uint64_t end = sv_now_ms() + (uint64_t)timeout_ms;
	unsigned int spins = 0;

	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0)
			sv_test_fail(__FILE__, __LINE__, "ibv_poll_cq: %d", n);
		if (n == 1)
			return true;
		if (sv_now_ms() > end)
			return false;
		/* 2 CPUs: after a short spin, give the peer's thread room */
		if (++spins > 1000)
			pause_us(50);
	}
}

void sv_wc_wait_at(const char *file, int line, struct ibv_cq *cq,
		   struct ibv_wc *wc, int timeout_ms)
{
	if (!sv_wc_poll(cq, wc, timeout_ms))
		sv_test_fail(file, line, "no completion within %d ms",
			     timeout_ms);
}

void sv_wc_none_at(const char *file, int line, struct ibv_cq *cq, int ms)
{
	struct ibv_wc wc;

	if (sv_wc_poll(cq, &wc, ms))
		sv_test_fail(file, line,
			     "unexpected completion: wr_id %" PRIu64
			     " status %s (%d) opcode %d",
			     (uint64_t)wc.wr_id, ibv_wc_status_str(wc.status),
			     wc.status, wc.opcode);
}

static uint8_t pattern(size_t i, uint32_t seed)
{
	uint32_t x = (uint32_t)i * 2654435761u + seed * 40503u;

	return (uint8_t)(x >> 13 ^ x >> 5 ^ seed);
}

void sv_fill(uint8_t *buf, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(i, seed);
}

long sv_check(const uint8_t *buf, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pattern(i, seed))
			return (long)i;
	return -1;
}

int sv_unix_dgram_qlen(void)
{
	FILE *f = fopen("/proc/sys/net/unix/max_dgram_qlen", "r");
	int n = 10;

	if (f) {
		if (fscanf(f, "%d", &n) != 1 || n <= 0)
			n = 10;
		fclose(f);
	}
	return n;
}
