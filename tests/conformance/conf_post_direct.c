// SPDX-License-Identifier: MIT
/*
 * A small one-sided operation done inside its post (req.c
 * sv_req_post_direct): an RDMA write, read or atomic posted to an idle
 * send queue of a QP whose peer shares the target is executed straight
 * from the work request, with no WQE filled.  Checked: its bytes (an
 * atomic's old and new values) are there when post returns, its
 * completion is the usual one (opcode, length, wr_id, QP number; none
 * when unsignalled, one under sq_sig_all), inline data is taken at the
 * post, every case the fast way must leave to the usual path takes it
 * (a queue with work in it, more SGEs than it handles, an inline read,
 * keys that do not check out, an unaligned atomic) with that path's
 * answer, and an atomic whose old value cannot be stored completes in
 * error as the usual path completes it.  That a WR took the fast way shows in
 * the send queue: its slot keeps the marker the test wrote there.
 */
#include <arpa/inet.h>
#include <string.h>
#include <sys/mman.h>

#include "objects.h"
#include "pair.h"

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define BUF	(1 << 16)
#define MARK	0x5eedf00dULL /* a WQE slot no post wrote */
#define REMOTE_RW                                           \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_READ)

static void pd_pair(struct sv_pair *p, bool sig_all)
{
	struct sv_end_opts o = sv_end_opts_default();

	o.buf_len = BUF;
	o.mr_access = REMOTE_RW | IBV_ACCESS_REMOTE_ATOMIC;
	o.qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		      IBV_ACCESS_REMOTE_ATOMIC;
	o.max_send_wr = 8;
	o.max_recv_wr = 8;
	o.max_send_sge = 8;
	o.max_inline = 64;
	o.sq_sig_all = sig_all;
	o.rnr_retry = 7; /* a send with no receive waits for one */
	sv_pair_open(p, &o, &o);
	/* one message first: the link is up (connecting is asynchronous) */
	ASSERT_OK(sv_end_recv(&p->b, 1, 0, 64));
	ASSERT_OK(sv_end_send(&p->a, 2, 0, 64, IBV_SEND_SIGNALED));
	EXPECT_WC(p->b.rcq, IBV_WC_SUCCESS, 1);
	EXPECT_WC(p->a.scq, IBV_WC_SUCCESS, 2);
}

/* Marks every send queue slot of e's QP: a post that fills one shows. */
static void mark_slots(struct sv_end *e)
{
	struct sv_qp *qp = to_sqp(e->qp);

	for (uint32_t i = 0; i < qp->sq.size; i++)
		qp->sq.wqe[i].wr_id = MARK;
}

/* How many slots of e's send queue a post wrote since mark_slots. */
static uint32_t slots_written(struct sv_end *e)
{
	struct sv_qp *qp = to_sqp(e->qp);
	uint32_t n = 0;

	for (uint32_t i = 0; i < qp->sq.size; i++)
		n += qp->sq.wqe[i].wr_id != MARK;
	return n;
}

static int post(struct sv_end *e, uint64_t wr_id, enum ibv_wr_opcode op,
		struct ibv_sge *sg, int n, uint64_t raddr, uint32_t rkey,
		unsigned int flags)
{
	struct ibv_send_wr wr = {.wr_id = wr_id,
				 .sg_list = sg,
				 .num_sge = n,
				 .opcode = op,
				 .send_flags = flags,
				 .wr.rdma = {raddr, rkey}};
	struct ibv_send_wr *bad = NULL;

	return ibv_post_send(e->qp, &wr, &bad);
}

/* One completion: every field the fast way fills. */
static void expect_done(struct sv_end *e, uint64_t wr_id, enum ibv_wc_opcode op,
			uint32_t len)
{
	struct ibv_wc wc;

	WAIT_WC(e->scq, &wc, SV_WC_TIMEOUT_MS);
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(wr_id, wc.wr_id);
	ASSERT_EQ(op, wc.opcode);
	ASSERT_EQ(len, wc.byte_len);
	ASSERT_EQ(e->qp->qp_num, wc.qp_num);
}

/* A write and a read, signalled or not, from one SGE or several, and an
 * inline write: done when post returns, with no slot written. */
SV_TEST(post_direct_write_and_read_fill_no_wqe)
{
	sv_test_needs_shm("one-sided operations in the peer's memory");
	uint64_t b = 0;
	struct sv_qp *qa;
	struct sv_pair p;
	uint8_t keep[48];

	pd_pair(&p, false);
	qa = to_sqp(p.a.qp);
	b = (uintptr_t)p.b.buf;
	mark_slots(&p.a);
	uint64_t ops = LOAD(qa->stats.direct_ops);

	/* a write of 100 bytes, signalled: there before any poll */
	sv_fill(p.a.buf, 100, 1);
	struct ibv_sge one = {(uintptr_t)p.a.buf, 100, p.a.mr->lkey};
	ASSERT_OK(post(&p.a, 1, IBV_WR_RDMA_WRITE, &one, 1, b + 1000,
		       p.b.mr->rkey, IBV_SEND_SIGNALED));
	ASSERT_EQ(-1, sv_check(p.b.buf + 1000, 100, 1));
	expect_done(&p.a, 1, IBV_WC_RDMA_WRITE, 100);

	/* a read from three SGEs' worth, unsignalled: no completion */
	sv_fill(p.b.buf + 8192, 3000, 2);
	struct ibv_sge three[3] = {
		{(uintptr_t)p.a.buf + 4096, 1000, p.a.mr->lkey},
		{(uintptr_t)p.a.buf + 6000, 0, p.a.mr->lkey},
		{(uintptr_t)p.a.buf + 7000, 2000, p.a.mr->lkey},
	};
	ASSERT_OK(post(&p.a, 2, IBV_WR_RDMA_READ, three, 3, b + 8192,
		       p.b.mr->rkey, 0));
	ASSERT_EQ(-1, sv_check(p.a.buf + 4096, 1000, 2));
	uint8_t want[3000];
	sv_fill(want, 3000, 2);
	ASSERT_OK(memcmp(want + 1000, p.a.buf + 7000, 2000));
	NO_WC(p.a.scq, 20);

	/* inline: the bytes are taken at the post, not later */
	sv_fill(keep, sizeof(keep), 3);
	memcpy(p.a.buf + 200, keep, sizeof(keep));
	struct ibv_sge two[2] = {{(uintptr_t)p.a.buf + 200, 16, 0},
				 {(uintptr_t)p.a.buf + 216, 32, 0}};
	ASSERT_OK(post(&p.a, 3, IBV_WR_RDMA_WRITE, two, 2, b + 300,
		       p.b.mr->rkey, IBV_SEND_SIGNALED | IBV_SEND_INLINE));
	memset(p.a.buf + 200, 0, sizeof(keep));
	ASSERT_OK(memcmp(keep, p.b.buf + 300, sizeof(keep)));
	expect_done(&p.a, 3, IBV_WC_RDMA_WRITE, 48);

	ASSERT_EQ(0, slots_written(&p.a));
	ASSERT_EQ(ops + 3, LOAD(qa->stats.direct_ops));
	ASSERT_EQ(qa->sq.post, qa->sq.comp);
	/* the queue still holds max_send_wr: nothing leaked a slot */
	for (int i = 0; i < 8; i++)
		ASSERT_OK(post(&p.a, 10 + i, IBV_WR_RDMA_WRITE, &one, 1,
			       b + 1000, p.b.mr->rkey, IBV_SEND_SIGNALED));
	for (int i = 0; i < 8; i++)
		expect_done(&p.a, 10 + i, IBV_WC_RDMA_WRITE, 100);
	sv_pair_close(&p);
}

/* sq_sig_all: an unsignalled WR done the fast way completes too. */
SV_TEST(post_direct_sq_sig_all_completes_each)
{
	sv_test_needs_shm("one-sided operations in the peer's memory");
	struct sv_pair p;

	pd_pair(&p, true);
	mark_slots(&p.a);
	struct ibv_sge sg = {(uintptr_t)p.a.buf, 8, p.a.mr->lkey};
	ASSERT_OK(post(&p.a, 5, IBV_WR_RDMA_READ, &sg, 1, (uintptr_t)p.b.buf,
		       p.b.mr->rkey, 0));
	ASSERT_OK(post(&p.a, 6, IBV_WR_RDMA_WRITE, &sg, 1, (uintptr_t)p.b.buf,
		       p.b.mr->rkey, 0));
	expect_done(&p.a, 5, IBV_WC_RDMA_READ, 8);
	expect_done(&p.a, 6, IBV_WC_RDMA_WRITE, 8);
	ASSERT_EQ(0, slots_written(&p.a));
	sv_pair_close(&p);
}

/* What the fast way leaves to the usual path, which then answers as it
 * always did: each of these writes a slot. */
SV_TEST(post_direct_leaves_the_rest_to_the_queue)
{
	sv_test_needs_shm("one-sided operations in the peer's memory");
	uint64_t b;
	struct sv_pair p;

	pd_pair(&p, false);
	b = (uintptr_t)p.b.buf;

	/* an inline read: EINVAL, as before, and nothing done */
	mark_slots(&p.a);
	struct ibv_sge sg = {(uintptr_t)p.a.buf, 8, p.a.mr->lkey};
	ASSERT_EQ(EINVAL,
		  post(&p.a, 1, IBV_WR_RDMA_READ, &sg, 1, b, p.b.mr->rkey,
		       IBV_SEND_SIGNALED | IBV_SEND_INLINE));
	NO_WC(p.a.scq, 20);

	/* five SGEs: more than the fast way takes; the usual path does it */
	struct ibv_sge five[5];
	for (int i = 0; i < 5; i++)
		five[i] = (struct ibv_sge){(uintptr_t)p.a.buf + 512 * i, 100,
					   p.a.mr->lkey};
	for (int i = 0; i < 5; i++)
		sv_fill(p.a.buf + 512 * i, 100, 40 + (uint32_t)i);
	mark_slots(&p.a);
	ASSERT_OK(post(&p.a, 2, IBV_WR_RDMA_WRITE, five, 5, b + 4096,
		       p.b.mr->rkey, IBV_SEND_SIGNALED));
	expect_done(&p.a, 2, IBV_WC_RDMA_WRITE, 500);
	for (int i = 0; i < 5; i++)
		ASSERT_EQ(-1, sv_check(p.b.buf + 4096 + 100 * i, 100,
				       40 + (uint32_t)i));
	ASSERT_EQ(1, slots_written(&p.a));

	/* a send waiting for its receive: a write behind it is queued and
	 * completes after it, in order */
	mark_slots(&p.a);
	ASSERT_OK(sv_end_send(&p.a, 3, 0, 64, IBV_SEND_SIGNALED));
	ASSERT_OK(post(&p.a, 4, IBV_WR_RDMA_WRITE, &sg, 1, b, p.b.mr->rkey,
		       IBV_SEND_SIGNALED));
	ASSERT_EQ(2, slots_written(&p.a));
	ASSERT_OK(sv_end_recv(&p.b, 7, 0, 64));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 3);
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 4);
	EXPECT_WC(p.b.rcq, IBV_WC_SUCCESS, 7);

	/* an rkey that names nothing: the peer's responder says so */
	mark_slots(&p.a);
	ASSERT_OK(post(&p.a, 5, IBV_WR_RDMA_READ, &sg, 1, b,
		       p.b.mr->rkey ^ 0x100, IBV_SEND_SIGNALED));
	EXPECT_WC(p.a.scq, IBV_WC_REM_ACCESS_ERR, 5);
	ASSERT_EQ(1, slots_written(&p.a));
	sv_pair_close(&p);
}

/* A local key that names nothing: the usual path's LOC_PROT_ERR. */
SV_TEST(post_direct_bad_lkey_is_a_local_error)
{
	sv_test_needs_shm("one-sided operations in the peer's memory");
	struct sv_pair p;

	pd_pair(&p, false);
	mark_slots(&p.a);
	struct ibv_sge sg = {(uintptr_t)p.a.buf, 8, p.a.mr->lkey ^ 0x100};
	ASSERT_OK(post(&p.a, 1, IBV_WR_RDMA_WRITE, &sg, 1, (uintptr_t)p.b.buf,
		       p.b.mr->rkey, IBV_SEND_SIGNALED));
	EXPECT_WC(p.a.scq, IBV_WC_LOC_PROT_ERR, 1);
	ASSERT_EQ(1, slots_written(&p.a));
	sv_pair_close(&p);
}

static int post_atomic(struct sv_end *e, uint64_t wr_id, enum ibv_wr_opcode op,
		       struct ibv_sge *sg, uint64_t raddr, uint32_t rkey,
		       uint64_t compare_add, uint64_t swap)
{
	struct ibv_send_wr wr = {.wr_id = wr_id,
				 .sg_list = sg,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED,
				 .wr.atomic = {raddr, compare_add, swap, rkey}};
	struct ibv_send_wr *bad = NULL;

	return ibv_post_send(e->qp, &wr, &bad);
}

/* Fetch-and-add and compare-and-swap (both outcomes): the old value in
 * our memory and the new one in the peer's when post returns, no slot
 * written; an unaligned target goes the usual way (the responder's
 * REM_INV_REQ_ERR). */
SV_TEST(post_direct_atomics_fill_no_wqe)
{
	sv_test_needs_shm("one-sided operations in the peer's memory");
	uint64_t *word, *old;
	struct sv_pair p;

	pd_pair(&p, false);
	word = (uint64_t *)(p.b.buf + 4096);
	old = (uint64_t *)(p.a.buf + 512);
	*word = 40;
	mark_slots(&p.a);
	struct ibv_sge sg = {(uintptr_t)old, 8, p.a.mr->lkey};
	ASSERT_OK(post_atomic(&p.a, 1, IBV_WR_ATOMIC_FETCH_AND_ADD, &sg,
			      (uintptr_t)word, p.b.mr->rkey, 2, 0));
	ASSERT_EQ(40, *old);
	ASSERT_EQ(42, *word);
	expect_done(&p.a, 1, IBV_WC_FETCH_ADD, 8);
	ASSERT_OK(post_atomic(&p.a, 2, IBV_WR_ATOMIC_CMP_AND_SWP, &sg,
			      (uintptr_t)word, p.b.mr->rkey, 42, 7));
	ASSERT_EQ(42, *old);
	ASSERT_EQ(7, *word);
	expect_done(&p.a, 2, IBV_WC_COMP_SWAP, 8);
	ASSERT_OK(post_atomic(&p.a, 3, IBV_WR_ATOMIC_CMP_AND_SWP, &sg,
			      (uintptr_t)word, p.b.mr->rkey, 42, 9));
	ASSERT_EQ(7, *old); /* no swap: the value it found */
	ASSERT_EQ(7, *word);
	expect_done(&p.a, 3, IBV_WC_COMP_SWAP, 8);
	ASSERT_EQ(0, slots_written(&p.a));
	ASSERT_OK(post_atomic(&p.a, 4, IBV_WR_ATOMIC_FETCH_AND_ADD, &sg,
			      (uintptr_t)word + 4, p.b.mr->rkey, 1, 0));
	EXPECT_WC(p.a.scq, IBV_WC_REM_INV_REQ_ERR, 4);
	ASSERT_EQ(1, slots_written(&p.a));
	ASSERT_EQ(7, *word);
	sv_pair_close(&p);
}

/* An atomic whose old value cannot be stored: its local buffer unmapped
 * under its MR.  The atomic was done (it is not done twice), the WR
 * completes with IBV_WC_LOC_PROT_ERR and the QP goes to ERROR, as on the
 * usual path (post.c's queue, comp.c fail_head). */
SV_TEST(post_direct_atomic_into_unmapped_memory)
{
	sv_test_needs_shm("one-sided operations in the peer's memory");
	uint64_t *word;
	struct ibv_mr *mr;
	struct sv_pair p;
	uint8_t *page;

	pd_pair(&p, false);
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(page != MAP_FAILED);
	mr = ibv_reg_mr(p.a.pd, page, 4096, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(munmap(page, 4096));
	word = (uint64_t *)(p.b.buf + 4096);
	*word = 5;
	struct ibv_sge sg = {(uintptr_t)page, 8, mr->lkey};
	mark_slots(&p.a);
	ASSERT_OK(post_atomic(&p.a, 1, IBV_WR_ATOMIC_FETCH_AND_ADD, &sg,
			      (uintptr_t)word, p.b.mr->rkey, 1, 0));
	EXPECT_WC(p.a.scq, IBV_WC_LOC_PROT_ERR, 1);
	ASSERT_EQ(0, slots_written(&p.a)); /* the fast way's own answer */
	ASSERT_EQ(6, *word);
	ASSERT_EQ(IBV_QPS_ERR, sv_end_state(&p.a));
	/* what is posted after it is flushed */
	ASSERT_OK(post_atomic(&p.a, 2, IBV_WR_ATOMIC_FETCH_AND_ADD, &sg,
			      (uintptr_t)word, p.b.mr->rkey, 1, 0));
	EXPECT_WC(p.a.scq, IBV_WC_WR_FLUSH_ERR, 2);
	ASSERT_EQ(6, *word);
	ASSERT_OK(ibv_dereg_mr(mr));
	sv_pair_close(&p);
}
