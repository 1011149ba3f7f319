// SPDX-License-Identifier: MIT
/*
 * Memory windows (issue 28 item 2; man ibv_alloc_mw, ibv_bind_mw,
 * ibv_post_send): types 1 and 2, bound, used, invalidated locally and
 * remotely; every error where rdma-core's providers and rxe give it
 * (EINVAL/EPERM at the call, IBV_WC_MW_BIND_ERR, IBV_WC_LOC_QP_OP_ERR,
 * IBV_WC_REM_ACCESS_ERR, IBV_WC_REM_INV_REQ_ERR); and the attacks: the
 * key of an invalidated, unbound, deallocated or narrower window, over
 * an MR the initiator could otherwise reach in shared memory itself.
 * b is the target and binds; a initiates.  Run on shm and TCP.
 */
#include "pair.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#define BUF 65536
#define QP_REMOTE                                           \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
	 IBV_ACCESS_REMOTE_ATOMIC)
#define MR_BIND (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)
#define WIN_OFF 4096 /* the window: b's buf[WIN_OFF, WIN_OFF + WIN_LEN) */
#define WIN_LEN 8192
#define WIN_RW	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define WIN_ALL (WIN_RW | IBV_ACCESS_REMOTE_ATOMIC)

/* a and b with remote access on both QPs; b's MR with b_access. */
static void mw_pair(struct sv_pair *p, int b_access)
{
	struct sv_end_opts oa = sv_end_opts_default();
	struct sv_end_opts ob = sv_end_opts_default();

	oa.buf_len = ob.buf_len = BUF;
	oa.qp_access = ob.qp_access = QP_REMOTE;
	oa.mr_access = IBV_ACCESS_LOCAL_WRITE;
	ob.mr_access = b_access;
	oa.cqe = ob.cqe = 64;
	oa.max_send_wr = ob.max_send_wr = 16;
	sv_pair_open(p, &oa, &ob);
}

static struct ibv_wc expect_wc(const char *file, int line, struct ibv_cq *cq,
			       enum ibv_wc_status st, uint64_t id, int op)
{
	struct ibv_wc wc;

	sv_wc_wait_at(file, line, cq, &wc, SV_WC_TIMEOUT_MS);
	if (wc.status != st || wc.wr_id != id ||
	    (st == IBV_WC_SUCCESS && op >= 0 && (int)wc.opcode != op))
		sv_test_fail(file, line,
			     "completion wr_id %" PRIu64 " status %s opcode %d;"
			     " expected wr_id %" PRIu64 " status %s opcode %d",
			     (uint64_t)wc.wr_id, ibv_wc_status_str(wc.status),
			     wc.opcode, id, ibv_wc_status_str(st), op);
	return wc;
}
#define WC(cq, st, id, op) expect_wc(__FILE__, __LINE__, cq, st, id, op)
#define WC_OK(cq, id, op)  WC(cq, IBV_WC_SUCCESS, id, op)

/* ibv_bind_mw of a type 1 window over b's buf[off, off+len). */
static int bind1(struct sv_end *e, struct ibv_mw *mw, uint64_t id, size_t off,
		 size_t len, unsigned int acc)
{
	struct ibv_mw_bind b = {
		.wr_id = id,
		.send_flags = IBV_SEND_SIGNALED,
		.bind_info = {.mr = e->mr,
			      .addr = (uintptr_t)(e->buf + off),
			      .length = len,
			      .mw_access_flags = acc},
	};

	return ibv_bind_mw(e->qp, mw, &b);
}

/* IBV_WR_BIND_MW of a type 2 window with key rkey over mr[off, +len). */
static int bind2(struct sv_end *e, struct ibv_mw *mw, struct ibv_mr *mr,
		 uint32_t rkey, uint64_t id, size_t off, size_t len,
		 unsigned int acc)
{
	struct ibv_send_wr wr = {
		.wr_id = id,
		.opcode = IBV_WR_BIND_MW,
		.send_flags = IBV_SEND_SIGNALED,
		.bind_mw = {.mw = mw,
			    .rkey = rkey,
			    .bind_info = {.mr = mr,
					  .addr = (uintptr_t)(e->buf + off),
					  .length = len,
					  .mw_access_flags = acc}},
	};
	struct ibv_send_wr *bad = NULL;

	return ibv_post_send(e->qp, &wr, &bad);
}

/* A type 2 window of b bound over the window range, its key. */
static uint32_t bound2(struct sv_pair *p, struct ibv_mw **mw, unsigned acc)
{
	uint32_t key;

	*mw = ibv_alloc_mw(p->b.pd, IBV_MW_TYPE_2);
	ASSERT_NOT_NULL(*mw);
	key = ibv_inc_rkey((*mw)->rkey);
	ASSERT_OK(bind2(&p->b, *mw, p->b.mr, key, 7, WIN_OFF, WIN_LEN, acc));
	WC_OK(p->b.scq, 7, IBV_WC_BIND_MW);
	return key;
}

/* One signalled RDMA write/read of len bytes of a's buf at (raddr, rkey). */
static int rdma(struct sv_end *e, uint64_t id, enum ibv_wr_opcode op,
		uint64_t raddr, uint32_t rkey, uint32_t len)
{
	struct ibv_sge sg = {
		.addr = (uintptr_t)e->buf, .length = len, .lkey = e->mr->lkey};
	struct ibv_send_wr wr = {
		.wr_id = id,
		.sg_list = &sg,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = {.remote_addr = raddr, .rkey = rkey},
	};
	struct ibv_send_wr *bad = NULL;

	return ibv_post_send(e->qp, &wr, &bad);
}

static int local_inv(struct sv_end *e, uint64_t id, uint32_t rkey)
{
	struct ibv_send_wr wr = {.wr_id = id,
				 .opcode = IBV_WR_LOCAL_INV,
				 .send_flags = IBV_SEND_SIGNALED,
				 .invalidate_rkey = rkey};
	struct ibv_send_wr *bad = NULL;

	return ibv_post_send(e->qp, &wr, &bad);
}

/* b's window + off (off may be before it: negative) */
static uint64_t win(struct sv_end *b, long off)
{
	return (uintptr_t)(b->buf + WIN_OFF + off);
}

static uint8_t *b_at(struct sv_pair *p, long off)
{
	return p->b.buf + WIN_OFF + off;
}

/* a writes 64 bytes through key at b's window + off: must be refused
 * with IBV_WC_REM_ACCESS_ERR and leave b's bytes as they were. */
static void write_refused(struct sv_pair *p, uint32_t key, long off)
{
	uint8_t before[64];

	memcpy(before, b_at(p, off), 64);
	memset(p->a.buf, 0xee, 64);
	ASSERT_OK(rdma(&p->a, 66, IBV_WR_RDMA_WRITE, win(&p->b, off), key, 64));
	WC(p->a.scq, IBV_WC_REM_ACCESS_ERR, 66, -1);
	ASSERT_EQ(0, memcmp(before, b_at(p, off), 64));
}

/* a writes 64 bytes of pattern seed through key at the window + off and
 * reads them back; both succeed and b's bytes are the pattern. */
static void write_read_ok(struct sv_pair *p, uint32_t key, long off,
			  uint32_t seed)
{
	sv_fill(p->a.buf, 64, seed);
	ASSERT_OK(rdma(&p->a, 11, IBV_WR_RDMA_WRITE, win(&p->b, off), key, 64));
	WC_OK(p->a.scq, 11, IBV_WC_RDMA_WRITE);
	ASSERT_EQ(-1, sv_check(b_at(p, off), 64, seed));
	memset(p->a.buf, 0, 64);
	ASSERT_OK(rdma(&p->a, 12, IBV_WR_RDMA_READ, win(&p->b, off), key, 64));
	WC_OK(p->a.scq, 12, IBV_WC_RDMA_READ);
	ASSERT_EQ(-1, sv_check(p->a.buf, 64, seed));
}

/* --- alloc, dealloc, the device's limit ------------------------------- */

SV_TEST(mw_alloc_types_and_einval)
{
	struct sv_end e;
	struct ibv_mw *m1, *m2;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	m1 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_1);
	m2 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
	ASSERT_NOT_NULL(m1);
	ASSERT_NOT_NULL(m2);
	ASSERT_TRUE(m1->pd == e.pd && m1->context == e.ctx);
	ASSERT_EQ(IBV_MW_TYPE_1, m1->type);
	ASSERT_EQ(IBV_MW_TYPE_2, m2->type);
	ASSERT_NE(0, m1->rkey);
	ASSERT_NE(m1->rkey >> 8, m2->rkey >> 8); /* two windows */
	errno = 0;
	ASSERT_NULL(ibv_alloc_mw(e.pd, (enum ibv_mw_type)3));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_NULL(ibv_alloc_mw(e.pd, (enum ibv_mw_type)0));
	ASSERT_EQ(EINVAL, errno);
	/* a PD with a window on it is busy (the kernel's usecnt) */
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(e.pd));
	ASSERT_OK(ibv_dealloc_mw(m1));
	ASSERT_OK(ibv_dealloc_mw(m2));
	sv_end_close(&e);
}

/* max_mw windows live, and one more is EINVAL; freed, they come back. */
SV_TEST(mw_alloc_limit_max_mw)
{
	struct ibv_device_attr da;
	struct ibv_mw **mws;
	struct sv_end e;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	ASSERT_OK(ibv_query_device(e.ctx, &da));
	ASSERT_TRUE(da.max_mw > 0);
	ASSERT_TRUE(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
	ASSERT_TRUE(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	mws = calloc((size_t)da.max_mw, sizeof(*mws));
	ASSERT_NOT_NULL(mws);
	for (int i = 0; i < da.max_mw; i++) {
		mws[i] = ibv_alloc_mw(e.pd,
				      i & 1 ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1);
		ASSERT_NOT_NULL(mws[i]);
	}
	errno = 0;
	ASSERT_NULL(ibv_alloc_mw(e.pd, IBV_MW_TYPE_2));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_OK(ibv_dealloc_mw(mws[0]));
	mws[0] = ibv_alloc_mw(e.pd, IBV_MW_TYPE_1);
	ASSERT_NOT_NULL(mws[0]);
	for (int i = 0; i < da.max_mw; i++)
		ASSERT_OK(ibv_dealloc_mw(mws[i]));
	free(mws);
	sv_end_close(&e);
}

/* --- type 1 ------------------------------------------------------------ */

/* ibv_bind_mw: the completion, the new key (ibv_inc_rkey of the old);
 * the window reaches its range with its access, though the MR has no
 * remote access; then rebinding and unbinding kill the old keys. */
SV_TEST(mw_type1_bind_use_rebind_unbind)
{
	struct sv_pair p;
	struct ibv_mw *mw;
	uint32_t k0, k1, k2;

	mw_pair(&p, MR_BIND);
	mw = ibv_alloc_mw(p.b.pd, IBV_MW_TYPE_1);
	ASSERT_NOT_NULL(mw);
	k0 = mw->rkey;
	ASSERT_OK(bind1(&p.b, mw, 5, WIN_OFF, WIN_LEN, WIN_RW));
	k1 = mw->rkey;
	ASSERT_EQ(ibv_inc_rkey(k0), k1);
	WC_OK(p.b.scq, 5, IBV_WC_BIND_MW);
	write_read_ok(&p, k1, 0, 1);
	write_read_ok(&p, k1, WIN_LEN - 64, 2);
	/* the MR's own key gives nothing: it has no remote access */
	/* rebind over the first half: the old key is dead */
	ASSERT_OK(bind1(&p.b, mw, 6, WIN_OFF, WIN_LEN / 2, WIN_RW));
	k2 = mw->rkey;
	WC_OK(p.b.scq, 6, IBV_WC_BIND_MW);
	write_read_ok(&p, k2, 64, 3);
	/* unbind: length 0, no MR */
	{
		struct ibv_mw_bind ub = {.wr_id = 8,
					 .send_flags = IBV_SEND_SIGNALED};

		ASSERT_OK(ibv_bind_mw(p.b.qp, mw, &ub));
		WC_OK(p.b.scq, 8, IBV_WC_BIND_MW);
	}
	write_refused(&p, k1, 0);
	ASSERT_OK(ibv_dealloc_mw(mw));
	sv_pair_close(&p);
}

SV_TEST(mw_type1_old_key_refused)
{
	struct sv_pair p;
	struct ibv_mw *mw;
	uint32_t k1;

	mw_pair(&p, MR_BIND);
	mw = ibv_alloc_mw(p.b.pd, IBV_MW_TYPE_1);
	ASSERT_OK(bind1(&p.b, mw, 5, WIN_OFF, WIN_LEN, WIN_RW));
	k1 = mw->rkey;
	WC_OK(p.b.scq, 5, IBV_WC_BIND_MW);
	ASSERT_OK(bind1(&p.b, mw, 6, WIN_OFF, WIN_LEN, WIN_RW));
	WC_OK(p.b.scq, 6, IBV_WC_BIND_MW);
	write_refused(&p, k1, 0);
	ASSERT_OK(ibv_dealloc_mw(mw));
	sv_pair_close(&p);
}

/* Outside the window (before, after, across its end) and beyond its
 * access: refused, though the MR holds the bytes. */
static void refused_case(long off, unsigned int acc, bool atomic)
{
	struct sv_pair p;
	struct ibv_mw *mw;

	mw_pair(&p, MR_BIND);
	mw = ibv_alloc_mw(p.b.pd, IBV_MW_TYPE_1);
	ASSERT_OK(bind1(&p.b, mw, 5, WIN_OFF, WIN_LEN, acc));
	WC_OK(p.b.scq, 5, IBV_WC_BIND_MW);
	if (atomic) {
		struct ibv_sge sg = {.addr = (uintptr_t)p.a.buf,
				     .length = 8,
				     .lkey = p.a.mr->lkey};
		struct ibv_send_wr wr = {
			.wr_id = 9,
			.sg_list = &sg,
			.num_sge = 1,
			.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.atomic = {.remote_addr = win(&p.b, off),
				      .compare_add = 1,
				      .rkey = mw->rkey},
		};
		struct ibv_send_wr *bad;

		ASSERT_OK(ibv_post_send(p.a.qp, &wr, &bad));
		WC(p.a.scq, IBV_WC_REM_ACCESS_ERR, 9, -1);
	} else {
		write_refused(&p, mw->rkey, off);
	}
	ASSERT_OK(ibv_dealloc_mw(mw));
	sv_pair_close(&p);
}

SV_TEST(mw_type1_before_window_refused)
{
	refused_case(-64, WIN_RW, false);
}

SV_TEST(mw_type1_after_window_refused)
{
	refused_case(WIN_LEN, WIN_RW, false);
}

SV_TEST(mw_type1_across_end_refused)
{
	refused_case(WIN_LEN - 32, WIN_RW, false);
}

SV_TEST(mw_type1_read_only_window_refuses_write)
{
	refused_case(0, IBV_ACCESS_REMOTE_READ, false);
}

SV_TEST(mw_type1_no_atomic_access_refuses_atomic)
{
	refused_case(0, WIN_RW, true);
}

/* An atomic through a window that allows it. */
SV_TEST(mw_type1_atomic)
{
	struct sv_pair p;
	struct ibv_mw *mw;
	struct ibv_sge sg;
	struct ibv_send_wr wr, *bad;
	uint64_t *target;

	mw_pair(&p, MR_BIND);
	mw = ibv_alloc_mw(p.b.pd, IBV_MW_TYPE_1);
	ASSERT_OK(bind1(&p.b, mw, 5, WIN_OFF, WIN_LEN, WIN_ALL));
	WC_OK(p.b.scq, 5, IBV_WC_BIND_MW);
	target = (uint64_t *)b_at(&p, 8);
	*target = 40;
	sg = (struct ibv_sge){
		.addr = (uintptr_t)p.a.buf, .length = 8, .lkey = p.a.mr->lkey};
	wr = (struct ibv_send_wr){
		.wr_id = 9,
		.sg_list = &sg,
		.num_sge = 1,
		.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.atomic = {.remote_addr = win(&p.b, 8),
			      .compare_add = 2,
			      .rkey = mw->rkey},
	};
	ASSERT_OK(ibv_post_send(p.a.qp, &wr, &bad));
	WC_OK(p.a.scq, 9, IBV_WC_FETCH_ADD);
	ASSERT_EQ(40, *(uint64_t *)p.a.buf);
	ASSERT_EQ(42, __atomic_load_n(target, __ATOMIC_SEQ_CST));
	ASSERT_OK(ibv_dealloc_mw(mw));
	sv_pair_close(&p);
}

/* What the call itself refuses (verbs.h's inline and our provider, as
 * rxe's): nothing is posted. */
SV_TEST(mw_bind_call_errors)
{
	struct sv_pair p;
	struct ibv_mw *m1, *m2;
	struct ibv_pd *pd2;
	struct ibv_mr *mr2;
	struct ibv_mw_bind b = {.wr_id = 1};

	mw_pair(&p, MR_BIND);
	m1 = ibv_alloc_mw(p.b.pd, IBV_MW_TYPE_1);
	m2 = ibv_alloc_mw(p.b.pd, IBV_MW_TYPE_2);
	/* type 2 through ibv_bind_mw */
	ASSERT_EQ(EINVAL, bind1(&p.b, m2, 1, WIN_OFF, WIN_LEN, WIN_RW));
	/* a range with no MR */
	b.bind_info.length = 64;
	ASSERT_EQ(EINVAL, ibv_bind_mw(p.b.qp, m1, &b));
	/* zero-based windows are not offered */
	ASSERT_EQ(EINVAL, bind1(&p.b, m1, 1, WIN_OFF, WIN_LEN,
				WIN_RW | IBV_ACCESS_ZERO_BASED));
	/* unknown access */
	ASSERT_EQ(EINVAL, bind1(&p.b, m1, 1, WIN_OFF, WIN_LEN, 1u << 30));
	/* an MR of another PD */
	pd2 = ibv_alloc_pd(p.b.ctx);
	ASSERT_NOT_NULL(pd2);
	mr2 = ibv_reg_mr(pd2, p.b.buf, BUF, MR_BIND);
	ASSERT_NOT_NULL(mr2);
	b.bind_info.mr = mr2;
	b.bind_info.addr = (uintptr_t)p.b.buf;
	ASSERT_EQ(EPERM, ibv_bind_mw(p.b.qp, m1, &b));
	/* type 1 through ibv_post_send: ibv_bind_mw only */
	ASSERT_EQ(EINVAL, bind2(&p.b, m1, p.b.mr, ibv_inc_rkey(m1->rkey), 1,
				WIN_OFF, WIN_LEN, WIN_RW));
	/* type 2 bind with no MR: LOCAL_INV unbinds it */
	ASSERT_EQ(EINVAL, bind2(&p.b, m2, NULL, ibv_inc_rkey(m2->rkey), 1, 0, 0,
				WIN_RW));
	NO_WC(p.b.scq, 50);
	ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&p.b));
	ASSERT_OK(ibv_dereg_mr(mr2));
	ASSERT_OK(ibv_dealloc_pd(pd2));
	ASSERT_OK(ibv_dealloc_mw(m1));
	ASSERT_OK(ibv_dealloc_mw(m2));
	sv_pair_close(&p);
}

/* What the bind's execution refuses: IBV_WC_MW_BIND_ERR, the QP in
 * ERROR (rxe), the window unchanged. */
enum bind_fault {
	NO_MW_BIND,	/* the MR was registered without IBV_ACCESS_MW_BIND */
	PAST_MR,	/* the range leaves the MR */
	WRITE_NO_LOCAL, /* remote write on an MR without local write */
	T2_WRONG_INDEX, /* type 2: a key with other index bits */
	T2_BOUND_TWICE, /* type 2: bound while valid */
	T2_OTHER_PD,	/* type 2: window and MR of a PD not the QP's */
	T1_OTHER_PD,	/* type 1: the same */
};

static void bind_fault_case(enum bind_fault f)
{
	int acc = f == NO_MW_BIND	? IBV_ACCESS_LOCAL_WRITE
		  : f == WRITE_NO_LOCAL ? IBV_ACCESS_MW_BIND
					: MR_BIND;
	struct sv_pair p;
	struct ibv_mw *mw;
	struct ibv_pd *pd2 = NULL;
	struct ibv_mr *mr2 = NULL;
	uint32_t old;

	mw_pair(&p, acc);
	if (f == T2_OTHER_PD || f == T1_OTHER_PD) {
		pd2 = ibv_alloc_pd(p.b.ctx);
		ASSERT_NOT_NULL(pd2);
		mr2 = ibv_reg_mr(pd2, p.b.buf, BUF, MR_BIND);
		ASSERT_NOT_NULL(mr2);
		mw = ibv_alloc_mw(pd2, f == T2_OTHER_PD ? IBV_MW_TYPE_2
							: IBV_MW_TYPE_1);
		ASSERT_NOT_NULL(mw);
		if (f == T2_OTHER_PD) {
			ASSERT_OK(bind2(&p.b, mw, mr2, ibv_inc_rkey(mw->rkey),
					9, WIN_OFF, WIN_LEN, WIN_RW));
		} else {
			struct ibv_mw_bind b = {
				.wr_id = 9,
				.send_flags = IBV_SEND_SIGNALED,
				.bind_info = {.mr = mr2,
					      .addr = win(&p.b, 0),
					      .length = WIN_LEN,
					      .mw_access_flags = WIN_RW}};

			ASSERT_OK(ibv_bind_mw(p.b.qp, mw, &b));
		}
	} else if (f == T2_BOUND_TWICE) {
		old = bound2(&p, &mw, WIN_RW);
		ASSERT_OK(bind2(&p.b, mw, p.b.mr, ibv_inc_rkey(old), 9, WIN_OFF,
				WIN_LEN, WIN_RW));
	} else if (f == T2_WRONG_INDEX) {
		mw = ibv_alloc_mw(p.b.pd, IBV_MW_TYPE_2);
		ASSERT_NOT_NULL(mw);
		ASSERT_OK(bind2(&p.b, mw, p.b.mr, (mw->rkey ^ 0x100) + 1, 9,
				WIN_OFF, WIN_LEN, WIN_RW));
	} else {
		mw = ibv_alloc_mw(p.b.pd, IBV_MW_TYPE_1);
		ASSERT_NOT_NULL(mw);
		ASSERT_OK(bind1(&p.b, mw, 9,
				f == PAST_MR ? BUF - WIN_LEN / 2 : WIN_OFF,
				WIN_LEN, WIN_RW));
	}
	WC(p.b.scq, IBV_WC_MW_BIND_ERR, 9, -1);
	ASSERT_EQ(IBV_QPS_ERR, sv_end_state(&p.b));
	ASSERT_OK(ibv_dealloc_mw(mw));
	if (mr2) {
		ASSERT_OK(ibv_dereg_mr(mr2));
		ASSERT_OK(ibv_dealloc_pd(pd2));
	}
	sv_pair_close(&p);
}

SV_TEST(mw_bind_err_mr_without_mw_bind)
{
	bind_fault_case(NO_MW_BIND);
}

SV_TEST(mw_bind_err_range_past_mr)
{
	bind_fault_case(PAST_MR);
}

SV_TEST(mw_bind_err_remote_write_needs_local_write)
{
	bind_fault_case(WRITE_NO_LOCAL);
}

SV_TEST(mw_bind_err_type2_wrong_index)
{
	bind_fault_case(T2_WRONG_INDEX);
}

SV_TEST(mw_bind_err_type2_bound_twice)
{
	bind_fault_case(T2_BOUND_TWICE);
}

SV_TEST(mw_bind_err_type2_qp_of_other_pd)
{
	bind_fault_case(T2_OTHER_PD);
}

SV_TEST(mw_bind_err_type1_qp_of_other_pd)
{
	bind_fault_case(T1_OTHER_PD);
}

/* --- type 2 ------------------------------------------------------------ */

/* A second connected QP pair on the pair's contexts, PDs and CQs. */
static void second_pair(struct sv_pair *p, struct sv_end *a2, struct sv_end *b2)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 8,
			.max_recv_wr = 8,
			.max_send_sge = 1,
			.max_recv_sge = 1},
	};

	*a2 = p->a;
	*b2 = p->b;
	ia.send_cq = ia.recv_cq = p->a.scq;
	a2->qp = ibv_create_qp(p->a.pd, &ia);
	ia.send_cq = ia.recv_cq = p->b.scq;
	b2->qp = ibv_create_qp(p->b.pd, &ia);
	ASSERT_NOT_NULL(a2->qp);
	ASSERT_NOT_NULL(b2->qp);
	sv_end_connect(a2, b2->qp->qp_num, b2->o.psn);
	sv_end_connect(b2, a2->qp->qp_num, a2->o.psn);
}

/* Type 2B: a window bound to b's QP is not reached through b2, another
 * QP of the same PD (a2 -> b2 is refused while a -> b works). */
SV_TEST(mw_type2_other_qp_refused)
{
	struct sv_pair p;
	struct sv_end a2, b2;
	struct ibv_mw *mw;
	uint32_t key;

	mw_pair(&p, MR_BIND);
	second_pair(&p, &a2, &b2);
	key = bound2(&p, &mw, WIN_RW);
	write_read_ok(&p, key, 0, 11);
	sv_fill(p.a.buf, 64, 12);
	ASSERT_OK(rdma(&a2, 30, IBV_WR_RDMA_WRITE, win(&p.b, 0), key, 64));
	WC(p.a.scq, IBV_WC_REM_ACCESS_ERR, 30, -1);
	ASSERT_EQ(-1, sv_check(b_at(&p, 0), 64, 11));
	ASSERT_OK(ibv_destroy_qp(a2.qp));
	ASSERT_OK(ibv_destroy_qp(b2.qp));
	ASSERT_OK(ibv_dealloc_mw(mw));
	sv_pair_close(&p);
}

/* Destroying the QP a type 2 window is bound to invalidates it: it
 * binds again (only an invalid type 2 window does). */
SV_TEST(mw_type2_qp_destroy_invalidates)
{
	struct sv_pair p;
	struct sv_end a2, b2;
	struct ibv_mw *mw;
	uint32_t key;

	mw_pair(&p, MR_BIND);
	second_pair(&p, &a2, &b2);
	mw = ibv_alloc_mw(p.b.pd, IBV_MW_TYPE_2);
	key = ibv_inc_rkey(mw->rkey);
	ASSERT_OK(bind2(&b2, mw, p.b.mr, key, 31, WIN_OFF, WIN_LEN, WIN_RW));
	WC_OK(p.b.scq, 31, IBV_WC_BIND_MW);
	ASSERT_OK(ibv_destroy_qp(b2.qp));
	ASSERT_OK(ibv_destroy_qp(a2.qp));
	key = ibv_inc_rkey(key);
	ASSERT_OK(bind2(&p.b, mw, p.b.mr, key, 32, WIN_OFF, WIN_LEN, WIN_RW));
	WC_OK(p.b.scq, 32, IBV_WC_BIND_MW);
	write_read_ok(&p, key, 0, 13);
	ASSERT_OK(ibv_dealloc_mw(mw));
	sv_pair_close(&p);
}

/* Bind by IBV_WR_BIND_MW, use, IBV_WR_LOCAL_INV (IBV_WC_LOCAL_INV), then
 * the attack: the invalidated key is refused; rebound with a new key. */
SV_TEST(mw_type2_bind_use_local_inv)
{
	struct sv_pair p;
	struct ibv_mw *mw;
	uint32_t key, k2;

	mw_pair(&p, MR_BIND);
	key = bound2(&p, &mw, WIN_RW);
	write_read_ok(&p, key, 128, 4);
	ASSERT_OK(local_inv(&p.b, 10, key));
	WC_OK(p.b.scq, 10, IBV_WC_LOCAL_INV);
	/* invalid now: bindable again, with the next key */
	k2 = ibv_inc_rkey(key);
	ASSERT_OK(bind2(&p.b, mw, p.b.mr, k2, 11, WIN_OFF, WIN_LEN, WIN_RW));
	WC_OK(p.b.scq, 11, IBV_WC_BIND_MW);
	write_read_ok(&p, k2, 0, 5);
	write_refused(&p, key, 128);
	ASSERT_OK(ibv_dealloc_mw(mw));
	sv_pair_close(&p);
}

/* The attack: the invalidated window's key, at once after the local
 * invalidate's completion, over an MR the initiator could reach itself
 * in shared memory (remote write on the MR: its key is in the table a
 * peer maps) — refused, and not a byte written. */
SV_TEST(mw_attack_invalidated_window_key)
{
	struct sv_pair p;
	struct ibv_mw *mw;
	uint32_t key;

	mw_pair(&p, MR_BIND | IBV_ACCESS_REMOTE_WRITE);
	key = bound2(&p, &mw, WIN_RW);
	write_read_ok(&p, key, 0, 6);
	ASSERT_OK(local_inv(&p.b, 10, key));
	WC_OK(p.b.scq, 10, IBV_WC_LOCAL_INV);
	write_refused(&p, key, 0);
	ASSERT_OK(ibv_dealloc_mw(mw));
	sv_pair_close(&p);
}

/* A narrower window over a remotely writable MR: its key reaches only
 * its range, though the MR's key would reach all of it (and a peer
 * could resolve the MR's key itself). */
SV_TEST(mw_attack_window_narrower_than_mr)
{
	struct sv_pair p;
	struct ibv_mw *mw;
	uint32_t key;

	mw_pair(&p, MR_BIND | IBV_ACCESS_REMOTE_WRITE);
	key = bound2(&p, &mw, WIN_RW);
	write_refused(&p, key, WIN_LEN);
	ASSERT_OK(ibv_dealloc_mw(mw));
	sv_pair_close(&p);
}

/* A window's key is no lkey: a local SGE naming it fails the WQE with
 * IBV_WC_LOC_PROT_ERR. */
SV_TEST(mw_key_is_not_an_lkey)
{
	struct sv_pair p;
	struct ibv_mw *mw;
	struct ibv_sge sg;
	struct ibv_send_wr wr, *bad;
	uint32_t key;

	mw_pair(&p, MR_BIND);
	key = bound2(&p, &mw, WIN_RW);
	sg = (struct ibv_sge){.addr = win(&p.b, 0), .length = 64, .lkey = key};
	wr = (struct ibv_send_wr){.wr_id = 12,
				  .sg_list = &sg,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED};
	ASSERT_OK(ibv_post_send(p.b.qp, &wr, &bad));
	WC(p.b.scq, IBV_WC_LOC_PROT_ERR, 12, -1);
	ASSERT_OK(ibv_dealloc_mw(mw));
	sv_pair_close(&p);
}

/* Deallocating a bound window, or deregistering its MR, kills its key. */
SV_TEST(mw_dealloc_kills_key)
{
	struct sv_pair p;
	struct ibv_mw *mw;
	uint32_t key;

	mw_pair(&p, MR_BIND);
	key = bound2(&p, &mw, WIN_RW);
	ASSERT_OK(ibv_dealloc_mw(mw));
	write_refused(&p, key, 0);
	sv_pair_close(&p);
}

SV_TEST(mw_dereg_mr_kills_key)
{
	struct sv_pair p;
	struct ibv_mw *mw;
	struct ibv_mr *mr2;
	uint32_t key;

	mw_pair(&p, MR_BIND);
	mr2 = ibv_reg_mr(p.b.pd, p.b.buf + WIN_OFF, WIN_LEN, MR_BIND);
	ASSERT_NOT_NULL(mr2);
	mw = ibv_alloc_mw(p.b.pd, IBV_MW_TYPE_2);
	key = ibv_inc_rkey(mw->rkey);
	ASSERT_OK(bind2(&p.b, mw, mr2, key, 7, WIN_OFF, WIN_LEN, WIN_RW));
	WC_OK(p.b.scq, 7, IBV_WC_BIND_MW);
	write_read_ok(&p, key, 0, 7);
	ASSERT_OK(ibv_dereg_mr(mr2));
	write_refused(&p, key, 0);
	ASSERT_OK(ibv_dealloc_mw(mw));
	sv_pair_close(&p);
}

/* LOCAL_INV of what is not a valid type 2 window of the PD: a type 1
 * window's key, a made-up key, an MR's key: IBV_WC_LOC_QP_OP_ERR. */
static void local_inv_fault(int which)
{
	struct sv_pair p;
	struct ibv_mw *mw;
	uint32_t key;

	mw_pair(&p, MR_BIND);
	mw = ibv_alloc_mw(p.b.pd, IBV_MW_TYPE_1);
	ASSERT_OK(bind1(&p.b, mw, 5, WIN_OFF, WIN_LEN, WIN_RW));
	WC_OK(p.b.scq, 5, IBV_WC_BIND_MW);
	key = which == 0 ? mw->rkey : which == 1 ? 0x80123456u : p.b.mr->rkey;
	ASSERT_OK(local_inv(&p.b, 10, key));
	WC(p.b.scq, IBV_WC_LOC_QP_OP_ERR, 10, -1);
	ASSERT_OK(ibv_dealloc_mw(mw));
	sv_pair_close(&p);
}

SV_TEST(mw_local_inv_type1_refused)
{
	local_inv_fault(0);
}

SV_TEST(mw_local_inv_unknown_key_refused)
{
	local_inv_fault(1);
}

SV_TEST(mw_local_inv_mr_key_refused)
{
	local_inv_fault(2);
}

/* --- SEND with Invalidate ---------------------------------------------- */

static int send_inv(struct sv_end *e, uint64_t id, uint32_t rkey, uint32_t len)
{
	struct ibv_sge sg = {
		.addr = (uintptr_t)e->buf, .length = len, .lkey = e->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND_WITH_INV,
				 .send_flags = IBV_SEND_SIGNALED,
				 .invalidate_rkey = rkey};
	struct ibv_send_wr *bad = NULL;

	return ibv_post_send(e->qp, &wr, &bad);
}

/* The target's receive says IBV_WC_WITH_INV and the key; the window is
 * invalid after it (its key refused); small and multi-packet sends. */
static void send_inv_case(uint32_t len)
{
	struct sv_pair p;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	uint32_t key;

	mw_pair(&p, MR_BIND);
	key = bound2(&p, &mw, WIN_RW);
	write_read_ok(&p, key, 0, 8);
	ASSERT_OK(sv_end_recv(&p.b, 20, 2 * WIN_OFF + WIN_LEN, len));
	sv_fill(p.a.buf, len, 9);
	ASSERT_OK(send_inv(&p.a, 21, key, len));
	WC_OK(p.a.scq, 21, IBV_WC_SEND);
	wc = WC_OK(p.b.rcq, 20, IBV_WC_RECV);
	ASSERT_TRUE(wc.wc_flags & IBV_WC_WITH_INV);
	ASSERT_FALSE(wc.wc_flags & IBV_WC_WITH_IMM);
	ASSERT_EQ(key, wc.invalidated_rkey);
	ASSERT_EQ(len, wc.byte_len);
	ASSERT_EQ(-1, sv_check(p.b.buf + 2 * WIN_OFF + WIN_LEN, len, 9));
	write_refused(&p, key, 0);
	ASSERT_OK(ibv_dealloc_mw(mw));
	sv_pair_close(&p);
}

SV_TEST(mw_send_with_inv_small)
{
	send_inv_case(64);
}

SV_TEST(mw_send_with_inv_large)
{
	send_inv_case(3 * 4096 + 5);
}

/* A key that names no valid type 2 window of the target: class J, the
 * initiator's IBV_WC_REM_INV_REQ_ERR, the target's receive in error. */
SV_TEST(mw_send_with_inv_bad_key)
{
	struct sv_pair p;
	struct ibv_mw *mw;
	struct ibv_wc wc;

	mw_pair(&p, MR_BIND);
	mw = ibv_alloc_mw(p.b.pd, IBV_MW_TYPE_1);
	ASSERT_OK(bind1(&p.b, mw, 5, WIN_OFF, WIN_LEN, WIN_RW));
	WC_OK(p.b.scq, 5, IBV_WC_BIND_MW);
	ASSERT_OK(sv_end_recv(&p.b, 20, 2 * WIN_OFF + WIN_LEN, 64));
	ASSERT_OK(send_inv(&p.a, 21, mw->rkey, 64)); /* type 1: no */
	WC(p.a.scq, IBV_WC_REM_INV_REQ_ERR, 21, -1);
	wc = WC(p.b.rcq, IBV_WC_REM_INV_REQ_ERR, 20, -1);
	(void)wc;
	/* the type 1 window still works for others: not invalidated */
	ASSERT_OK(ibv_dealloc_mw(mw));
	sv_pair_close(&p);
}

/* SEND_WITH_INV on UD and local operations on UD: EINVAL. */
SV_TEST(mw_ops_refused_on_ud)
{
	struct sv_end e;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_init_attr ia = {0};
	struct ibv_qp_attr at = {0};
	struct ibv_send_wr wr = {.opcode = IBV_WR_LOCAL_INV,
				 .invalidate_rkey = 0x80000100u},
			   *bad;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	cq = ibv_create_cq(e.ctx, 8, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(e.pd, &ia);
	ASSERT_NOT_NULL(qp);
	at.qp_state = IBV_QPS_INIT;
	at.port_num = 1;
	at.qkey = 0x11;
	ASSERT_OK(ibv_modify_qp(qp, &at,
				IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					IBV_QP_QKEY));
	at.qp_state = IBV_QPS_RTR;
	ASSERT_OK(ibv_modify_qp(qp, &at, IBV_QP_STATE));
	at.qp_state = IBV_QPS_RTS;
	at.sq_psn = 0;
	ASSERT_OK(ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_SQ_PSN));
	ASSERT_EQ(EINVAL, ibv_post_send(qp, &wr, &bad));
	wr.opcode = IBV_WR_SEND_WITH_INV;
	ASSERT_EQ(EINVAL, ibv_post_send(qp, &wr, &bad));
	ASSERT_OK(ibv_destroy_qp(qp));
	ASSERT_OK(ibv_destroy_cq(cq));
	sv_end_close(&e);
}

/* --- the ibv_wr_* builder ---------------------------------------------- */

/* e with an RC QP from ibv_create_qp_ex (send_ops_flags ops). */
static void ex_end_open(struct sv_end *e, uint64_t ops, int access)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 16,
			.max_recv_wr = 16,
			.max_send_sge = 1,
			.max_recv_sge = 1},
		.comp_mask =
			IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = ops,
	};

	memset(e, 0, sizeof(*e));
	e->o = sv_end_opts_default();
	e->o.buf_len = BUF;
	e->o.qp_access = QP_REMOTE;
	sv_end_open_ctx(e);
	e->buf = calloc(1, BUF);
	ASSERT_NOT_NULL(e->buf);
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF, access);
	ASSERT_NOT_NULL(e->mr);
	e->scq = e->rcq = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
	ASSERT_NOT_NULL(e->scq);
	a.send_cq = a.recv_cq = e->scq;
	a.pd = e->pd;
	e->qp = ibv_create_qp_ex(e->ctx, &a);
	ASSERT_NOT_NULL(e->qp);
}

/* b binds with ibv_wr_bind_mw and invalidates with ibv_wr_local_inv;
 * a sends with ibv_wr_send_inv: the same answers as ibv_post_send's. */
SV_TEST(mw_wr_builder_bind_local_inv_send_inv)
{
	struct sv_pair p;
	struct ibv_qp_ex *bx, *ax;
	struct ibv_mw *mw;
	struct ibv_mw_bind_info bi;
	struct ibv_wc wc;
	uint32_t key;

	ex_end_open(&p.a,
		    IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
			    IBV_QP_EX_WITH_SEND_WITH_INV,
		    IBV_ACCESS_LOCAL_WRITE);
	ex_end_open(&p.b, IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV,
		    MR_BIND);
	p.b.o.psn = 0x4321;
	sv_end_connect(&p.a, p.b.qp->qp_num, p.b.o.psn);
	sv_end_connect(&p.b, p.a.qp->qp_num, p.a.o.psn);
	ax = ibv_qp_to_qp_ex(p.a.qp);
	bx = ibv_qp_to_qp_ex(p.b.qp);
	mw = ibv_alloc_mw(p.b.pd, IBV_MW_TYPE_2);
	ASSERT_NOT_NULL(mw);
	bi = (struct ibv_mw_bind_info){.mr = p.b.mr,
				       .addr = win(&p.b, 0),
				       .length = WIN_LEN,
				       .mw_access_flags = WIN_RW};
	key = ibv_inc_rkey(mw->rkey);
	ibv_wr_start(bx);
	bx->wr_id = 7;
	bx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(bx, mw, key, &bi);
	ASSERT_OK(ibv_wr_complete(bx));
	WC_OK(p.b.scq, 7, IBV_WC_BIND_MW);
	write_read_ok(&p, key, 0, 10);
	ibv_wr_start(bx);
	bx->wr_id = 8;
	bx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_local_inv(bx, key);
	ASSERT_OK(ibv_wr_complete(bx));
	WC_OK(p.b.scq, 8, IBV_WC_LOCAL_INV);
	/* bound again with the next key, then killed by a's send */
	key = ibv_inc_rkey(key);
	ibv_wr_start(bx);
	bx->wr_id = 9;
	bx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(bx, mw, key, &bi);
	ASSERT_OK(ibv_wr_complete(bx));
	WC_OK(p.b.scq, 9, IBV_WC_BIND_MW);
	ASSERT_OK(sv_end_recv(&p.b, 20, 2 * WIN_OFF + WIN_LEN, 64));
	ibv_wr_start(ax);
	ax->wr_id = 21;
	ax->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_inv(ax, key);
	ibv_wr_set_sge(ax, p.a.mr->lkey, (uintptr_t)p.a.buf, 64);
	ASSERT_OK(ibv_wr_complete(ax));
	WC_OK(p.a.scq, 21, IBV_WC_SEND);
	wc = WC_OK(p.b.rcq, 20, IBV_WC_RECV);
	ASSERT_TRUE(wc.wc_flags & IBV_WC_WITH_INV);
	ASSERT_EQ(key, wc.invalidated_rkey);
	/* a type 1 window through the builder: the batch fails (EINVAL) */
	{
		struct ibv_mw *m1 = ibv_alloc_mw(p.b.pd, IBV_MW_TYPE_1);

		ibv_wr_start(bx);
		ibv_wr_bind_mw(bx, m1, ibv_inc_rkey(m1->rkey), &bi);
		ASSERT_EQ(EINVAL, ibv_wr_complete(bx));
		ASSERT_OK(ibv_dealloc_mw(m1));
	}
	write_refused(&p, key, 0);
	ASSERT_OK(ibv_dealloc_mw(mw));
	sv_pair_close(&p);
}

/* --- threads ----------------------------------------------------------- */

struct churn {
	struct sv_pair *p;
	struct ibv_mw *mw;
	int rounds;
};

/* b's thread: binds and locally invalidates a type 2 window, again and
 * again, each waited for. */
static void *churn_run(void *arg)
{
	struct churn *c = arg;
	uint32_t key = c->mw->rkey;

	for (int i = 0; i < c->rounds; i++) {
		key = ibv_inc_rkey(key);
		ASSERT_OK(bind2(&c->p->b, c->mw, c->p->b.mr, key, 100, 0,
				WIN_OFF, WIN_RW));
		WC_OK(c->p->b.scq, 100, IBV_WC_BIND_MW);
		ASSERT_OK(local_inv(&c->p->b, 101, key));
		WC_OK(c->p->b.scq, 101, IBV_WC_LOCAL_INV);
	}
	return NULL;
}

/* a writes and reads through a type 1 window while b's thread binds and
 * invalidates another window of the same table: every access of a lands
 * (the seqlock and the table under both threads; label tsan). */
SV_TEST(mw_bind_churn_beside_peer_access)
{
	struct sv_pair p;
	struct ibv_mw *w1;
	struct churn c;
	pthread_t t;

	mw_pair(&p, MR_BIND);
	w1 = ibv_alloc_mw(p.b.pd, IBV_MW_TYPE_1);
	ASSERT_OK(bind1(&p.b, w1, 5, WIN_OFF, WIN_LEN, WIN_RW));
	WC_OK(p.b.scq, 5, IBV_WC_BIND_MW);
	c = (struct churn){.p = &p,
			   .mw = ibv_alloc_mw(p.b.pd, IBV_MW_TYPE_2),
			   .rounds = 200};
	ASSERT_NOT_NULL(c.mw);
	ASSERT_OK(pthread_create(&t, NULL, churn_run, &c));
	for (int i = 0; i < 200; i++)
		write_read_ok(&p, w1->rkey, (i % 64) * 64, (uint32_t)i + 100);
	ASSERT_OK(pthread_join(t, NULL));
	ASSERT_OK(ibv_dealloc_mw(c.mw));
	ASSERT_OK(ibv_dealloc_mw(w1));
	sv_pair_close(&p);
}
