// SPDX-License-Identifier: MIT
/*
 * Shared receive queues (ibv_create_srq(3), ibv_modify_srq(3),
 * ibv_post_srq_recv(3); IBA 10.2.9, 11.5.2): the verbs with valid and
 * invalid arguments, an RC QP on an SRQ (no RQ of its own, receives from
 * the SRQ, RNR while it is empty), the limit event once per arming, the
 * last-WQE event, and 32 QPs sending into one SRQ under load, from one
 * process and from 4; single copy into receives the SRQ lends its QPs
 * (placed, taken back for another QP, returned when the QP fails).
 */
#include "objects.h"
#include "pair.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

/* A QP of e on srq (NULL: its own RQ), in RESET. */
static struct ibv_qp *make_qp(struct sv_end *e, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = e->scq,
		.recv_cq = e->rcq,
		.srq = srq,
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = {.max_send_wr = 64,
			.max_recv_wr = 64,
			.max_send_sge = 1,
			.max_recv_sge = 1},
	};
	struct ibv_qp *qp = ibv_create_qp(e->pd, &ia);

	ASSERT_NOT_NULL(qp);
	return qp;
}

/* Connects qp of e to dest (whose sq_psn is dest_psn), ours psn. */
static void connect_qp(struct sv_end *e, struct ibv_qp *qp, uint32_t psn,
		       uint32_t dest, uint32_t dest_psn)
{
	struct sv_end v = *e;

	v.qp = qp;
	v.o.psn = psn;
	sv_end_connect(&v, dest, dest_psn);
}

static struct ibv_srq *make_srq(struct sv_end *e, uint32_t max_wr,
				uint32_t max_sge)
{
	struct ibv_srq_init_attr a = {
		.attr = {.max_wr = max_wr, .max_sge = max_sge}};
	struct ibv_srq *srq = ibv_create_srq(e->pd, &a);

	ASSERT_NOT_NULL(srq);
	ASSERT_GE(a.attr.max_wr, max_wr);
	ASSERT_EQ(max_sge, a.attr.max_sge);
	return srq;
}

static int post_srq(struct sv_end *e, struct ibv_srq *srq, uint64_t wr_id,
		    size_t off, uint32_t len)
{
	struct ibv_sge sg = {.addr = (uintptr_t)(e->buf + off),
			     .length = len,
			     .lkey = e->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sg, .num_sge = 1};
	struct ibv_recv_wr *bad = NULL;

	return ibv_post_srq_recv(srq, &wr, &bad);
}

static int send_on(struct sv_end *e, struct ibv_qp *qp, uint64_t wr_id,
		   size_t off, uint32_t len)
{
	struct ibv_qp *keep = e->qp;
	int rc;

	e->qp = qp;
	rc = sv_end_send(e, wr_id, off, len, 0);
	e->qp = keep;
	return rc;
}

/* The next async event within ms, or false. */
static bool async_wait(struct ibv_context *ctx, struct ibv_async_event *ev,
		       int ms)
{
	struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};

	if (poll(&p, 1, ms) <= 0)
		return false;
	ASSERT_OK(ibv_get_async_event(ctx, ev));
	return true;
}

static void async_none(struct ibv_context *ctx, int ms)
{
	struct ibv_async_event ev;

	if (async_wait(ctx, &ev, ms))
		sv_test_fail(__FILE__, __LINE__, "unexpected async event %s",
			     ibv_event_type_str(ev.event_type));
}

/* An RC pair whose receiving end b is a QP on an SRQ of b's context. */
struct srq_pair {
	struct sv_end a, b; /* a sends; b's QP is on srq */
	struct ibv_srq *srq;
};

static void srq_pair_open(struct srq_pair *p, uint32_t max_wr)
{
	struct sv_end_opts o = sv_end_opts_default();

	o.cqe = 1024;
	o.buf_len = 1 << 20;
	sv_end_open(&p->a, &o);
	sv_end_open(&p->b, &o);
	p->srq = make_srq(&p->b, max_wr, 1);
	ASSERT_OK(ibv_destroy_qp(p->b.qp));
	p->b.qp = make_qp(&p->b, p->srq);
	connect_qp(&p->a, p->a.qp, 0x100, p->b.qp->qp_num, 0x200);
	connect_qp(&p->b, p->b.qp, 0x200, p->a.qp->qp_num, 0x100);
}

static void srq_pair_close(struct srq_pair *p)
{
	ASSERT_OK(ibv_destroy_qp(p->b.qp));
	p->b.qp = NULL;
	ASSERT_OK(ibv_destroy_srq(p->srq));
	sv_end_close(&p->a);
	sv_end_close(&p->b);
}

SV_TEST(srq_create_modify_query_destroy)
{
	struct ibv_srq_init_attr_ex ax;
	struct ibv_device_attr da;
	struct ibv_srq_attr q;
	struct ibv_srq *srq;
	struct sv_end e = {0}; /* sv_end_close frees what is set */

	sv_end_open_ctx(&e);
	ASSERT_OK(ibv_query_device(e.ctx, &da));
	ASSERT_GE(da.max_srq, 1);
	ASSERT_GE(da.max_srq_wr, 1024);
	ASSERT_GE(da.max_srq_sge, 1);
	ASSERT_TRUE(da.device_cap_flags & IBV_DEVICE_SRQ_RESIZE);

	srq = make_srq(&e, 100, 2);
	ASSERT_OK(ibv_query_srq(srq, &q));
	ASSERT_GE(q.max_wr, 100);
	ASSERT_EQ(2, q.max_sge);
	ASSERT_EQ(0, q.srq_limit);

	q = (struct ibv_srq_attr){.srq_limit = 10};
	ASSERT_OK(ibv_modify_srq(srq, &q, IBV_SRQ_LIMIT));
	q = (struct ibv_srq_attr){.max_wr = 300};
	ASSERT_OK(ibv_modify_srq(srq, &q, IBV_SRQ_MAX_WR));
	ASSERT_OK(ibv_query_srq(srq, &q));
	ASSERT_GE(q.max_wr, 300);
	ASSERT_EQ(10, q.srq_limit);

	/* invalid: no mask, unknown bits, limit above max_wr, resize to 0
	 * or past the device; a failed modify changes nothing */
	ASSERT_EQ(EINVAL, ibv_modify_srq(srq, &q, 0));
	ASSERT_EQ(EINVAL, ibv_modify_srq(srq, &q, 1 << 7));
	q.srq_limit = q.max_wr + 1;
	ASSERT_EQ(EINVAL, ibv_modify_srq(srq, &q, IBV_SRQ_LIMIT));
	q.max_wr = 0;
	ASSERT_EQ(EINVAL, ibv_modify_srq(srq, &q, IBV_SRQ_MAX_WR));
	q.max_wr = (uint32_t)da.max_srq_wr + 1;
	ASSERT_EQ(EINVAL, ibv_modify_srq(srq, &q, IBV_SRQ_MAX_WR));
	ASSERT_OK(ibv_query_srq(srq, &q));
	ASSERT_EQ(10, q.srq_limit);
	ASSERT_GE(q.max_wr, 300);

	/* the PD is held */
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(e.pd));
	ASSERT_OK(ibv_destroy_srq(srq));

	/* invalid creation: past the device's limits */
	{
		struct ibv_srq_init_attr a = {
			.attr = {.max_wr = (uint32_t)da.max_srq_wr + 1,
				 .max_sge = 1}};

		errno = 0;
		ASSERT_NULL(ibv_create_srq(e.pd, &a));
		ASSERT_EQ(EINVAL, errno);
		a.attr.max_wr = 16;
		a.attr.max_sge = (uint32_t)da.max_srq_sge + 1;
		errno = 0;
		ASSERT_NULL(ibv_create_srq(e.pd, &a));
		ASSERT_EQ(EINVAL, errno);
	}

	/* the extended verb: basic works; XRC needs its domain and CQ
	 * (conf_xrc) */
	memset(&ax, 0, sizeof(ax));
	ax.attr.max_wr = 8;
	ax.attr.max_sge = 1;
	ax.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE;
	ax.pd = e.pd;
	ax.srq_type = IBV_SRQT_BASIC;
	srq = ibv_create_srq_ex(e.ctx, &ax);
	ASSERT_NOT_NULL(srq);
	ASSERT_OK(ibv_destroy_srq(srq));
	ax.srq_type = IBV_SRQT_XRC;
	ax.comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	errno = 0;
	ASSERT_NULL(ibv_create_srq_ex(e.ctx, &ax));
	ASSERT_EQ(EINVAL, errno);
	ax.srq_type = IBV_SRQT_TM;
	errno = 0;
	ASSERT_NULL(ibv_create_srq_ex(e.ctx, &ax));
	ASSERT_EQ(EOPNOTSUPP, errno);
	ax.comp_mask = IBV_SRQ_INIT_ATTR_TYPE; /* no PD */
	ax.srq_type = IBV_SRQT_BASIC;
	errno = 0;
	ASSERT_NULL(ibv_create_srq_ex(e.ctx, &ax));
	ASSERT_EQ(EINVAL, errno);
	sv_end_close(&e);
}

SV_TEST(srq_destroy_busy_while_qp_attached)
{
	struct sv_end_opts o = sv_end_opts_default();
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct sv_end e;

	sv_end_open(&e, &o);
	srq = make_srq(&e, 16, 1);
	qp = make_qp(&e, srq);
	ASSERT_TRUE(qp->srq == srq);
	ASSERT_OK(ibv_query_qp(qp, &qa, IBV_QP_CAP, &ia));
	ASSERT_TRUE(ia.srq == srq);
	ASSERT_EQ(EBUSY, ibv_destroy_srq(srq));

	/* the QP has no RQ of its own */
	ASSERT_OK(sv_end_to_init(&(struct sv_end){.qp = qp, .o = o}));
	{
		struct ibv_sge sg = {.addr = (uintptr_t)e.buf,
				     .length = 8,
				     .lkey = e.mr->lkey};
		struct ibv_recv_wr wr = {.sg_list = &sg, .num_sge = 1};
		struct ibv_recv_wr *bad = NULL;

		ASSERT_EQ(EINVAL, ibv_post_recv(qp, &wr, &bad));
		ASSERT_TRUE(bad == &wr);
	}
	ASSERT_OK(ibv_destroy_qp(qp));
	ASSERT_OK(ibv_destroy_srq(srq));
	sv_end_close(&e);
}

SV_TEST(srq_post_full_enomem_and_bad_wr)
{
	struct ibv_srq_init_attr a = {.attr = {.max_wr = 10, .max_sge = 2}};
	struct ibv_sge sg[3];
	struct ibv_recv_wr wr[2], *bad;
	struct ibv_srq *srq;
	struct sv_end e;
	uint32_t n;

	sv_end_open(&e, NULL);
	srq = ibv_create_srq(e.pd, &a);
	ASSERT_NOT_NULL(srq);
	n = a.attr.max_wr;
	for (int i = 0; i < 3; i++)
		sg[i] = (struct ibv_sge){.addr = (uintptr_t)e.buf,
					 .length = 16,
					 .lkey = e.mr->lkey};

	/* num_sge past max_sge: EINVAL at that WR, the ones before it
	 * are posted */
	wr[0] = (struct ibv_recv_wr){.wr_id = 1, .sg_list = sg, .num_sge = 2};
	wr[1] = (struct ibv_recv_wr){.wr_id = 2, .sg_list = sg, .num_sge = 3};
	wr[0].next = &wr[1];
	bad = NULL;
	ASSERT_EQ(EINVAL, ibv_post_srq_recv(srq, wr, &bad));
	ASSERT_TRUE(bad == &wr[1]);
	for (uint32_t i = 1; i < n; i++)
		ASSERT_OK(post_srq(&e, srq, i, 0, 16));
	bad = NULL;
	wr[0].next = NULL;
	ASSERT_EQ(ENOMEM, ibv_post_srq_recv(srq, wr, &bad));
	ASSERT_TRUE(bad == &wr[0]);

	/* resize: not below what is posted; above it, room again */
	{
		struct ibv_srq_attr q = {.max_wr = n - 1};

		ASSERT_EQ(EINVAL, ibv_modify_srq(srq, &q, IBV_SRQ_MAX_WR));
		q.max_wr = n + 1;
		ASSERT_OK(ibv_modify_srq(srq, &q, IBV_SRQ_MAX_WR));
		ASSERT_GE(q.max_wr, n + 1);
		ASSERT_OK(post_srq(&e, srq, 99, 0, 16));
	}

	{
		struct ibv_ops_wr op = {.opcode = IBV_WR_TAG_ADD};
		struct ibv_ops_wr *bop = NULL;

		/* tag matching needs a tag-matching SRQ */
		ASSERT_EQ(EINVAL, ibv_post_srq_ops(srq, &op, &bop));
		ASSERT_TRUE(bop == &op);
	}
	ASSERT_OK(ibv_destroy_srq(srq));
	sv_end_close(&e);
}

/* A receive from the SRQ completes on the QP's recv CQ, with its qp_num
 * and the SRQ WQE's wr_id; RNR while the SRQ is empty (IBA 10.2.9.2),
 * and the message arrives once a WQE is posted. */
SV_TEST(srq_rnr_when_empty_then_receives)
{
	struct srq_pair p;
	struct ibv_wc wc;

	srq_pair_open(&p, 16);
	sv_fill(p.a.buf, 3000, 7);
	ASSERT_OK(send_on(&p.a, p.a.qp, 1, 0, 3000));
	NO_WC(p.b.rcq, 50);
	NO_WC(p.a.scq, 20);
	ASSERT_OK(post_srq(&p.b, p.srq, 77, 4096, 4096));
	WAIT_WC(p.b.rcq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(77, wc.wr_id);
	ASSERT_EQ(IBV_WC_RECV, wc.opcode);
	ASSERT_EQ(p.b.qp->qp_num, wc.qp_num);
	ASSERT_EQ(3000, wc.byte_len);
	ASSERT_EQ(-1, sv_check(p.b.buf + 4096, 3000, 7));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 1);
	srq_pair_close(&p);
}

/* IBA 11.5.2.3: below the armed limit, one event, then disarmed. */
SV_TEST(srq_limit_event_once_per_arming)
{
	struct ibv_srq_attr q = {.srq_limit = 4};
	struct ibv_async_event ev;
	struct srq_pair p;
	int sent = 0;

	srq_pair_open(&p, 16);
	for (int i = 0; i < 8; i++)
		ASSERT_OK(post_srq(&p.b, p.srq, (uint64_t)i, 64 * i, 64));
	ASSERT_OK(ibv_modify_srq(p.srq, &q, IBV_SRQ_LIMIT));
	/* 8 -> 4 posted: not below the limit yet */
	for (; sent < 4; sent++) {
		ASSERT_OK(send_on(&p.a, p.a.qp, 100, 0, 8));
		EXPECT_WC(p.b.rcq, IBV_WC_SUCCESS, (uint64_t)sent);
		EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 100);
	}
	async_none(p.b.ctx, 20);
	/* 3 < 4: the event, once */
	for (; sent < 7; sent++) {
		ASSERT_OK(send_on(&p.a, p.a.qp, 100, 0, 8));
		EXPECT_WC(p.b.rcq, IBV_WC_SUCCESS, (uint64_t)sent);
		EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 100);
	}
	ASSERT_TRUE(async_wait(p.b.ctx, &ev, SV_WC_TIMEOUT_MS));
	ASSERT_EQ(IBV_EVENT_SRQ_LIMIT_REACHED, ev.event_type);
	ASSERT_TRUE(ev.element.srq == p.srq);
	ibv_ack_async_event(&ev);
	async_none(p.b.ctx, 20);
	ASSERT_OK(ibv_query_srq(p.srq, &q));
	ASSERT_EQ(0, q.srq_limit); /* disarmed */

	/* armed again: 1 posted, limit 3: fires at the next take only */
	q.srq_limit = 3;
	ASSERT_OK(ibv_modify_srq(p.srq, &q, IBV_SRQ_LIMIT));
	async_none(p.b.ctx, 20);
	ASSERT_OK(post_srq(&p.b, p.srq, 50, 4096, 64));
	ASSERT_OK(send_on(&p.a, p.a.qp, 100, 0, 8));
	EXPECT_WC(p.b.rcq, IBV_WC_SUCCESS, 7);
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 100);
	ASSERT_TRUE(async_wait(p.b.ctx, &ev, SV_WC_TIMEOUT_MS));
	ASSERT_EQ(IBV_EVENT_SRQ_LIMIT_REACHED, ev.event_type);
	ibv_ack_async_event(&ev);
	ASSERT_OK(send_on(&p.a, p.a.qp, 100, 0, 8));
	EXPECT_WC(p.b.rcq, IBV_WC_SUCCESS, 50);
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 100);
	async_none(p.b.ctx, 20);
	srq_pair_close(&p);
}

/* A QP on an SRQ that goes to ERROR: IBV_EVENT_QP_LAST_WQE_REACHED, and
 * the SRQ's WQEs stay for the other QPs (IBA 10.3.1, 11.6.3). */
SV_TEST(srq_last_wqe_reached_keeps_srq_wqes)
{
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
	struct ibv_async_event ev;
	struct ibv_qp *a2, *b2;
	struct srq_pair p;
	struct ibv_wc wc;

	srq_pair_open(&p, 16);
	a2 = make_qp(&p.a, NULL);
	b2 = make_qp(&p.b, p.srq);
	connect_qp(&p.a, a2, 0x300, b2->qp_num, 0x400);
	connect_qp(&p.b, b2, 0x400, a2->qp_num, 0x300);
	for (int i = 0; i < 4; i++)
		ASSERT_OK(post_srq(&p.b, p.srq, (uint64_t)i, 64 * i, 64));

	ASSERT_OK(ibv_modify_qp(p.b.qp, &err, IBV_QP_STATE));
	ASSERT_TRUE(async_wait(p.b.ctx, &ev, SV_WC_TIMEOUT_MS));
	ASSERT_EQ(IBV_EVENT_QP_LAST_WQE_REACHED, ev.event_type);
	ASSERT_TRUE(ev.element.qp == p.b.qp);
	ibv_ack_async_event(&ev);
	NO_WC(p.b.rcq, 20); /* nothing flushed from the SRQ */

	for (int i = 0; i < 4; i++) {
		ASSERT_OK(send_on(&p.a, a2, 200, 0, 8));
		WAIT_WC(p.b.rcq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ((uint64_t)i, wc.wr_id);
		ASSERT_EQ(b2->qp_num, wc.qp_num);
		EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 200);
	}
	ASSERT_OK(ibv_destroy_qp(a2));
	ASSERT_OK(ibv_destroy_qp(b2));
	srq_pair_close(&p);
}

#define NQP	 32
#define NMSG	 300  /* per QP */
#define SLOT	 2048 /* the largest message */
#define NSLOT	 128  /* receives kept posted on the SRQ */
#define SQ_DEPTH 16   /* sends in flight per QP */

struct msg_hdr {
	uint32_t from; /* sender QP index */
	uint32_t seq;
};

/* Every 4th message is 2 KiB, above the single-copy threshold: placed
 * into a receive the SRQ lent the QP (srq.c lend) if it holds one, else
 * the ring's way. */
static uint32_t msg_len(uint32_t seq)
{
	return seq % 4 == 0 ? SLOT : 64;
}

/* Posts sender i's next message from its own buffer slot (sends complete
 * in order, so slot seq % SQ_DEPTH is free while out < SQ_DEPTH). */
static void post_next(struct sv_end *a, struct ibv_qp *qp, uint32_t i,
		      uint32_t seq)
{
	size_t off = ((size_t)i * SQ_DEPTH + seq % SQ_DEPTH) * SLOT;
	struct msg_hdr h = {i, seq};
	uint32_t len = msg_len(seq);

	memcpy(a->buf + off, &h, sizeof(h));
	sv_fill(a->buf + off + sizeof(h), len - sizeof(h), i * NMSG + seq);
	ASSERT_OK(send_on(a, qp, i, off, len));
}

/* Checks one receive by its content, counts it, and reposts its slot. */
static void take_recv(struct sv_end *b, struct ibv_srq *srq,
		      struct ibv_qp *const rx[], const struct ibv_wc *wc,
		      uint8_t *seen)
{
	const uint8_t *m = b->buf + wc->wr_id * SLOT;
	struct msg_hdr h;

	ASSERT_EQ(IBV_WC_SUCCESS, wc->status);
	ASSERT_TRUE(wc->wr_id < NSLOT);
	memcpy(&h, m, sizeof(h));
	ASSERT_TRUE(h.from < NQP && h.seq < NMSG);
	ASSERT_EQ(msg_len(h.seq), wc->byte_len);
	ASSERT_EQ(rx[h.from]->qp_num, wc->qp_num);
	ASSERT_EQ(-1, sv_check(m + sizeof(h), wc->byte_len - sizeof(h),
			       h.from * NMSG + h.seq));
	ASSERT_EQ(0, seen[h.from * NMSG + h.seq]); /* never twice */
	seen[h.from * NMSG + h.seq] = 1;
	ASSERT_OK(post_srq(b, srq, wc->wr_id, wc->wr_id * SLOT, SLOT));
}

/* 32 QPs of one context receive from one SRQ under load (fewer receives
 * posted than messages in flight: RNR and retries on the way); every
 * message arrives exactly once, on the QP its sender is connected to,
 * intact. */
SV_TEST(srq_32_qps_under_load_exactly_once)
{
	struct sv_end_opts o = sv_end_opts_default();
	struct ibv_qp *tx[NQP], *rx[NQP];
	uint32_t next[NQP] = {0}, out[NQP] = {0};
	uint8_t *seen = calloc(NQP * NMSG, 1);
	uint32_t got = 0, done = 0;
	uint64_t end = sv_now_ms() + 90000;
	struct ibv_srq *srq;
	struct sv_end a, b;

	ASSERT_NOT_NULL(seen);
	o.cqe = 4096;
	o.rnr_retry = 7;     /* RNR forever: the SRQ is refilled */
	o.min_rnr_timer = 1; /* 10 us */
	o.buf_len = (size_t)NQP * SQ_DEPTH * SLOT;
	sv_end_open(&a, &o);
	sv_end_open(&b, &o);
	srq = make_srq(&b, NSLOT, 1);
	for (int i = 0; i < NQP; i++) {
		tx[i] = make_qp(&a, NULL);
		rx[i] = make_qp(&b, srq);
	}
	for (uint32_t i = 0; i < NQP; i++) {
		connect_qp(&a, tx[i], 0x1000 + i, rx[i]->qp_num, 0x2000 + i);
		connect_qp(&b, rx[i], 0x2000 + i, tx[i]->qp_num, 0x1000 + i);
	}
	for (uint32_t k = 0; k < NSLOT; k++)
		ASSERT_OK(post_srq(&b, srq, k, (size_t)k * SLOT, SLOT));

	while (got < NQP * NMSG || done < NQP * NMSG) {
		struct ibv_wc wc[32];
		int n;

		if (sv_now_ms() > end)
			sv_test_fail(__FILE__, __LINE__,
				     "%u received, %u sent of %u", got, done,
				     NQP * NMSG);
		for (uint32_t i = 0; i < NQP; i++)
			while (next[i] < NMSG && out[i] < SQ_DEPTH) {
				post_next(&a, tx[i], i, next[i]++);
				out[i]++;
			}
		n = ibv_poll_cq(a.scq, 32, wc);
		ASSERT_GE(n, 0);
		for (int k = 0; k < n; k++) {
			ASSERT_EQ(IBV_WC_SUCCESS, wc[k].status);
			out[wc[k].wr_id]--;
			done++;
		}
		n = ibv_poll_cq(b.rcq, 32, wc);
		ASSERT_GE(n, 0);
		for (int k = 0; k < n; k++, got++)
			take_recv(&b, srq, rx, &wc[k], seen);
	}
	for (uint32_t i = 0; i < NQP * NMSG; i++)
		ASSERT_EQ(1, seen[i]);
	NO_WC(b.rcq, 20);
	for (int i = 0; i < NQP; i++) {
		ASSERT_OK(ibv_destroy_qp(tx[i]));
		ASSERT_OK(ibv_destroy_qp(rx[i]));
	}
	ASSERT_OK(ibv_destroy_srq(srq));
	sv_end_close(&a);
	sv_end_close(&b);
	free(seen);
}

#define NPROC	 4
#define PER_PROC (NQP / NPROC)

/* What a sender process tells the test: its index and its QPNs. */
struct peer_hello {
	uint32_t idx;
	uint32_t qpn[PER_PROC];
};

/*
 * One of the 4 sender processes: PER_PROC RC QPs, connected to the
 * test's QPs on its SRQ, each sending NMSG numbered messages (global
 * sender index idx * PER_PROC + j) with SQ_DEPTH in flight.
 * args: idx, ready fd (its struct peer_hello), go fd (the test's QPNs).
 */
SV_HELPER(srq_peer)
{
	struct sv_end_opts o = sv_end_opts_default();
	uint32_t idx = (uint32_t)atoi(argv[0]), base = idx * PER_PROC;
	int ready = atoi(argv[1]), go = atoi(argv[2]);
	uint32_t dest[PER_PROC], next[PER_PROC] = {0}, out[PER_PROC] = {0};
	uint32_t done = 0;
	uint64_t end = sv_now_ms() + 90000;
	struct ibv_qp *tx[PER_PROC];
	struct peer_hello h = {idx, {0}};
	struct sv_end a;

	(void)argc;
	o.cqe = 4096;
	o.rnr_retry = 7; /* RNR forever: the SRQ is refilled */
	o.min_rnr_timer = 1;
	o.buf_len = (size_t)NQP * SQ_DEPTH * SLOT;
	sv_end_open(&a, &o);
	for (uint32_t j = 0; j < PER_PROC; j++) {
		tx[j] = make_qp(&a, NULL);
		h.qpn[j] = tx[j]->qp_num;
	}
	/* one write below PIPE_BUF: the 4 senders' hellos never interleave */
	ASSERT_EQ((ssize_t)sizeof(h), write(ready, &h, sizeof(h)));
	ASSERT_EQ((ssize_t)sizeof(dest), read(go, dest, sizeof(dest)));
	for (uint32_t j = 0; j < PER_PROC; j++)
		connect_qp(&a, tx[j], 0x1000 + base + j, dest[j],
			   0x2000 + base + j);
	while (done < PER_PROC * NMSG) {
		struct ibv_wc wc[32];
		int n;

		if (sv_now_ms() > end)
			sv_test_fail(__FILE__, __LINE__, "sender %u: %u sent",
				     idx, done);
		for (uint32_t j = 0; j < PER_PROC; j++)
			while (next[j] < NMSG && out[j] < SQ_DEPTH) {
				post_next(&a, tx[j], base + j, next[j]++);
				out[j]++;
			}
		n = ibv_poll_cq(a.scq, 32, wc);
		ASSERT_GE(n, 0);
		for (int k = 0; k < n; k++) {
			ASSERT_EQ(IBV_WC_SUCCESS, wc[k].status);
			ASSERT_TRUE(wc[k].wr_id >= base &&
				    wc[k].wr_id < base + PER_PROC);
			out[wc[k].wr_id - base]--;
			done++;
		}
	}
	for (uint32_t j = 0; j < PER_PROC; j++)
		ASSERT_OK(ibv_destroy_qp(tx[j]));
	sv_end_close(&a);
	return 0;
}

/* Issue 10: many QPs, of several processes' peers, drawing receives from
 * one SRQ.  32 RC QPs on one SRQ here, connected to 8 QPs in each of 4
 * sender processes that all send at once, with fewer receives posted
 * than messages in flight; every message arrives exactly once, on the
 * QP its sender is connected to, intact (sequence numbers checked). */
SV_TEST(srq_32_qps_4_processes_exactly_once)
{
	struct sv_end_opts o = sv_end_opts_default();
	struct ibv_qp *rx[NQP];
	struct sv_proc p[NPROC];
	uint32_t txqpn[NQP], got = 0;
	uint8_t *seen = calloc(NQP * NMSG, 1);
	uint64_t end = sv_now_ms() + 90000;
	int ready[2], go[NPROC][2];
	char arg[3][NPROC][12];
	struct ibv_srq *srq;
	struct sv_end b;

	ASSERT_NOT_NULL(seen);
	o.cqe = 4096;
	o.buf_len = (size_t)NSLOT * SLOT;
	sv_end_open(&b, &o);
	srq = make_srq(&b, NSLOT, 1);
	for (int i = 0; i < NQP; i++)
		rx[i] = make_qp(&b, srq);
	ASSERT_OK(pipe(ready));
	for (int k = 0; k < NPROC; k++) {
		ASSERT_OK(pipe(go[k]));
		snprintf(arg[0][k], 12, "%d", k);
		snprintf(arg[1][k], 12, "%d", ready[1]);
		snprintf(arg[2][k], 12, "%d", go[k][0]);
		sv_proc_start_helper(
			&p[k], "srq_peer",
			(char *const[]){arg[0][k], arg[1][k], arg[2][k], NULL},
			NULL);
	}
	for (int k = 0; k < NPROC; k++) {
		struct pollfd pf = {.fd = ready[0], .events = POLLIN};
		struct peer_hello h;

		ASSERT_EQ(1, poll(&pf, 1, 20000));
		ASSERT_EQ((ssize_t)sizeof(h), read(ready[0], &h, sizeof(h)));
		ASSERT_TRUE(h.idx < NPROC);
		memcpy(&txqpn[h.idx * PER_PROC], h.qpn, sizeof(h.qpn));
	}
	for (uint32_t i = 0; i < NQP; i++)
		connect_qp(&b, rx[i], 0x2000 + i, txqpn[i], 0x1000 + i);
	for (uint32_t k = 0; k < NSLOT; k++)
		ASSERT_OK(post_srq(&b, srq, k, (size_t)k * SLOT, SLOT));
	for (int k = 0; k < NPROC; k++) {
		uint32_t dest[PER_PROC];

		for (int j = 0; j < PER_PROC; j++)
			dest[j] = rx[k * PER_PROC + j]->qp_num;
		ASSERT_EQ((ssize_t)sizeof(dest),
			  write(go[k][1], dest, sizeof(dest)));
	}
	while (got < NQP * NMSG) {
		struct ibv_wc wc[32];
		int n;

		if (sv_now_ms() > end)
			sv_test_fail(__FILE__, __LINE__, "%u received of %u",
				     got, NQP * NMSG);
		for (int k = 0; k < NPROC; k++)
			if (p[k].pid && sv_proc_poll(&p[k]) && p[k].status)
				sv_test_fail(__FILE__, __LINE__,
					     "sender %d failed:\n%s", k,
					     p[k].err);
		n = ibv_poll_cq(b.rcq, 32, wc);
		ASSERT_GE(n, 0);
		for (int k = 0; k < n; k++, got++)
			take_recv(&b, srq, rx, &wc[k], seen);
	}
	for (uint32_t i = 0; i < NQP * NMSG; i++)
		ASSERT_EQ(1, seen[i]);
	for (int k = 0; k < NPROC; k++) {
		if (p[k].pid) /* else reaped by sv_proc_poll already */
			sv_proc_wait(&p[k], 20000);
		ASSERT_EQ(0, p[k].status);
		sv_proc_free(&p[k]);
		close(go[k][0]);
		close(go[k][1]);
	}
	NO_WC(b.rcq, 20);
	for (int i = 0; i < NQP; i++)
		ASSERT_OK(ibv_destroy_qp(rx[i]));
	ASSERT_OK(ibv_destroy_srq(srq));
	sv_end_close(&b);
	close(ready[0]);
	close(ready[1]);
	free(seen);
}

/* --- single copy into an SRQ's receives (srq.c lend) ------------------- */

/* A receive of b's SRQ lent to b's QP: b takes one message (which lends
 * it the SRQ's next WQEs), then posting a 64 KiB send puts its bytes in
 * the next WQE's buffer at once, before b runs any verb: the sender
 * placed them. */
SV_TEST(srq_single_copy_is_placed_by_the_sender)
{
	sv_test_needs_shm("single-copy sends");
	struct srq_pair p;

	srq_pair_open(&p, 16);
	for (int i = 0; i < 4; i++)
		ASSERT_OK(post_srq(&p.b, p.srq, (uint64_t)i, 65536 * (size_t)i,
				   65536));
	ASSERT_OK(send_on(&p.a, p.a.qp, 100, 0, 64));
	EXPECT_WC(p.b.rcq, IBV_WC_SUCCESS, 0);
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 100);
	memset(p.b.buf, 0, 4 * 65536);
	sv_fill(p.a.buf, 65536, 5);
	ASSERT_OK(send_on(&p.a, p.a.qp, 101, 0, 65536));
	ASSERT_EQ(-1, sv_check(p.b.buf + 65536, 65536, 5));
	EXPECT_WC(p.b.rcq, IBV_WC_SUCCESS, 1);
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 101);
	/* and the ring's way, into the next lent one */
	sv_fill(p.a.buf, 512, 6);
	ASSERT_OK(send_on(&p.a, p.a.qp, 102, 0, 512));
	EXPECT_WC(p.b.rcq, IBV_WC_SUCCESS, 2);
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 102);
	ASSERT_EQ(-1, sv_check(p.b.buf + 2 * 65536, 512, 6));
	srq_pair_close(&p);
}

/* The sender's placed sends (req.c try_place), read as the test does
 * in conf_single_copy.c. */
static uint64_t placed_of(struct ibv_qp *qp)
{
	return __atomic_load_n(&to_sqp(qp)->stats.placed_sends,
			       __ATOMIC_RELAXED);
}

#define WIN 128 /* ib_send_bw's send window (tx depth) */

/* ib_send_bw --use-srq: a window of 128 sends of 16 KiB into an SRQ of
 * 256 receives.  The SRQ lends b's QP enough receives that the whole
 * window finds its receives described and is placed (srq.c lend, at most
 * SV_SRQ_LEND).  With 64 slots, half of it went through the ring
 * unplaced, filled it, and the rest waited off the link while the
 * sender's polls ran its QP: 2.5-7.9 million runs per 100,000 sends
 * (issue 27). */
SV_TEST(srq_lends_a_whole_send_window)
{
	sv_test_needs_shm("single-copy sends");
	struct sv_end_opts o = sv_end_opts_default();
	struct ibv_send_wr wr[WIN], *bad = NULL;
	struct ibv_sge sg = {.length = 16384};
	struct ibv_srq *srq;
	struct sv_end a, b;
	struct ibv_wc wc;
	uint64_t before;

	o.cqe = 1024;
	o.max_send_wr = 256;
	o.buf_len = (WIN + 1) * 16384;
	sv_end_open(&a, &o);
	sv_end_open(&b, &o);
	srq = make_srq(&b, 256, 1);
	ASSERT_OK(ibv_destroy_qp(b.qp));
	b.qp = make_qp(&b, srq);
	connect_qp(&a, a.qp, 0x100, b.qp->qp_num, 0x200);
	connect_qp(&b, b.qp, 0x200, a.qp->qp_num, 0x100);
	for (int i = 0; i <= WIN; i++)
		ASSERT_OK(post_srq(&b, srq, (uint64_t)i, 16384 * (size_t)i,
				   16384));
	/* the first message lends b's QP the SRQ's next receives */
	ASSERT_OK(send_on(&a, a.qp, 1000, 0, 64));
	EXPECT_WC(b.rcq, IBV_WC_SUCCESS, 0);
	EXPECT_WC(a.scq, IBV_WC_SUCCESS, 1000);
	before = placed_of(a.qp);
	sg.addr = (uintptr_t)a.buf;
	sg.lkey = a.mr->lkey;
	sv_fill(a.buf, 16384, 9);
	for (int i = 0; i < WIN; i++)
		wr[i] = (struct ibv_send_wr){.wr_id = (uint64_t)i,
					     .next = i + 1 < WIN ? &wr[i + 1]
								 : NULL,
					     .sg_list = &sg,
					     .num_sge = 1,
					     .opcode = IBV_WR_SEND,
					     .send_flags = IBV_SEND_SIGNALED};
	ASSERT_OK(ibv_post_send(a.qp, wr, &bad));
	for (int i = 0; i < WIN; i++) {
		WAIT_WC(b.rcq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ((uint64_t)i + 1, wc.wr_id); /* the SRQ's order */
		ASSERT_EQ(16384, wc.byte_len);
		ASSERT_EQ(-1,
			  sv_check(b.buf + 16384 * (size_t)(i + 1), 16384, 9));
		EXPECT_WC(a.scq, IBV_WC_SUCCESS, (uint64_t)i);
	}
	ASSERT_EQ(before + WIN, placed_of(a.qp));
	ASSERT_OK(ibv_destroy_qp(b.qp));
	b.qp = NULL;
	ASSERT_OK(ibv_destroy_srq(srq));
	sv_end_close(&a);
	sv_end_close(&b);
}

/* Two QPs of b on one SRQ of 8 receives.  b's first QP takes one message
 * and is lent some of the rest; then the second QP gets 7 messages: once
 * the SRQ is empty it must take back what the first holds unclaimed, not
 * wait in RNR while receives sit unused.  Each receive exactly once. */
SV_TEST(srq_lent_receives_go_to_the_qp_that_needs_them)
{
	struct ibv_qp *a2, *b2;
	struct srq_pair p;
	uint32_t seen = 0;
	struct ibv_wc wc;

	srq_pair_open(&p, 8);
	a2 = make_qp(&p.a, NULL);
	b2 = make_qp(&p.b, p.srq);
	connect_qp(&p.a, a2, 0x300, b2->qp_num, 0x400);
	connect_qp(&p.b, b2, 0x400, a2->qp_num, 0x300);
	for (int i = 0; i < 8; i++)
		ASSERT_OK(post_srq(&p.b, p.srq, (uint64_t)i, 4096 * (size_t)i,
				   4096));
	ASSERT_OK(send_on(&p.a, p.a.qp, 100, 0, 2048));
	EXPECT_WC(p.b.rcq, IBV_WC_SUCCESS, 0);
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 100);
	for (int i = 0; i < 7; i++) {
		sv_fill(p.a.buf + 4096 * (size_t)i, 2048, 10 + (uint32_t)i);
		ASSERT_OK(send_on(&p.a, a2, 200 + (uint64_t)i, 4096 * (size_t)i,
				  2048));
		WAIT_WC(p.b.rcq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ(b2->qp_num, wc.qp_num);
		ASSERT_TRUE(wc.wr_id >= 1 && wc.wr_id < 8);
		ASSERT_EQ(0, seen & (1u << wc.wr_id)); /* never twice */
		seen |= 1u << wc.wr_id;
		ASSERT_EQ(-1, sv_check(p.b.buf + 4096 * wc.wr_id, 2048,
				       10 + (uint32_t)i));
		EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 200 + (uint64_t)i);
	}
	ASSERT_OK(ibv_destroy_qp(a2));
	ASSERT_OK(ibv_destroy_qp(b2));
	srq_pair_close(&p);
}

/* A QP that was lent receives goes to ERROR: they return to the SRQ, in
 * their order, and are not flushed (IBA 10.3.1: the SRQ's WQEs stay for
 * the other QPs); the next QP takes them in posting order. */
SV_TEST(srq_lent_receives_return_when_the_qp_fails)
{
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
	struct ibv_async_event ev;
	struct ibv_qp *a2, *b2;
	struct srq_pair p;
	struct ibv_wc wc;

	srq_pair_open(&p, 8);
	a2 = make_qp(&p.a, NULL);
	b2 = make_qp(&p.b, p.srq);
	connect_qp(&p.a, a2, 0x300, b2->qp_num, 0x400);
	connect_qp(&p.b, b2, 0x400, a2->qp_num, 0x300);
	for (int i = 0; i < 8; i++)
		ASSERT_OK(post_srq(&p.b, p.srq, (uint64_t)i, 4096 * (size_t)i,
				   4096));
	ASSERT_OK(send_on(&p.a, p.a.qp, 100, 0, 2048));
	EXPECT_WC(p.b.rcq, IBV_WC_SUCCESS, 0);
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 100);

	ASSERT_OK(ibv_modify_qp(p.b.qp, &err, IBV_QP_STATE));
	ASSERT_TRUE(async_wait(p.b.ctx, &ev, SV_WC_TIMEOUT_MS));
	ASSERT_EQ(IBV_EVENT_QP_LAST_WQE_REACHED, ev.event_type);
	ibv_ack_async_event(&ev);
	NO_WC(p.b.rcq, 20); /* nothing flushed from the SRQ */
	for (int i = 1; i < 8; i++) {
		ASSERT_OK(send_on(&p.a, a2, 200, 0, 64));
		WAIT_WC(p.b.rcq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ((uint64_t)i, wc.wr_id); /* the SRQ's order */
		ASSERT_EQ(b2->qp_num, wc.qp_num);
		EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 200);
	}
	ASSERT_OK(ibv_destroy_qp(a2));
	ASSERT_OK(ibv_destroy_qp(b2));
	srq_pair_close(&p);
}
