// SPDX-License-Identifier: MIT
/*
 * Thread domains and parent domains (issue 28 item 5): ibv_alloc_td,
 * ibv_alloc_parent_domain with the program's allocators, the objects
 * made on a parent domain (QP, CQ, SRQ, MR, MW, AH) and who holds whom
 * (EBUSY), every refused argument; and the extended CQ's creation
 * flags and wallclock timestamps.
 */
#include <stdlib.h>
#include <time.h>

#include "pair.h"

/* The program's allocator: counts, by resource type, and what is live.
 * mode: what alloc answers. */
enum amode { A_ALLOC, A_DEFAULT, A_NULL, A_MISALIGN };

struct acct {
	enum amode mode;
	bool limited; /* A_ALLOC: budget more succeed, then NULL */
	int budget;
	int allocs[8],
		frees[8]; /* by the type's low bits (1 QP, 4 SRQ, 5 CQ) */
	int live;
	int bad_type;	   /* a type with driver bits, or out of range */
	int bad_align;	   /* an alignment that is not a power of two */
	struct ibv_pd *pd; /* what both callbacks must be given */
	int bad_pd;
};

static void *acct_alloc(struct ibv_pd *pd, void *ctx, size_t size, size_t align,
			uint64_t type)
{
	struct acct *a = ctx;
	size_t lo = (size_t)(type & 0xffffffffu);
	uint8_t *p;

	if (type >> 32 || lo >= 8) {
		a->bad_type++;
		return NULL;
	}
	if (!align || (align & (align - 1)) || align < sizeof(void *))
		a->bad_align++;
	if (pd != a->pd)
		a->bad_pd++;
	if (a->mode == A_DEFAULT)
		return IBV_ALLOCATOR_USE_DEFAULT;
	if (a->mode == A_NULL)
		return NULL;
	if (a->limited && a->budget-- <= 0)
		return NULL;
	/* room for size + align (the misaligned mode's shift), a multiple
	 * of the alignment as aligned_alloc wants */
	p = aligned_alloc(align * 2, (size / align + 2) * 2 * align);
	if (!p)
		return NULL;
	/* dirty: the provider must not trust anything but its own zeroing
	 * (the contract makes us zero it; a careless one may not) */
	memset(p, 0xa5, size + align);
	if (a->mode == A_MISALIGN)
		p += align / 2; /* freed below by the same offset */
	a->allocs[lo]++;
	a->live++;
	return p;
}

static void acct_free(struct ibv_pd *pd, void *ctx, void *ptr, uint64_t type)
{
	struct acct *a = ctx;
	size_t lo = (size_t)(type & 0xffffffffu);

	if (pd != a->pd)
		a->bad_pd++;
	if (lo >= 8 || type >> 32) {
		a->bad_type++;
		return;
	}
	if (a->mode == A_MISALIGN)
		ptr = (uint8_t *)ptr - ((uintptr_t)ptr & 63);
	a->frees[lo]++;
	a->live--;
	free(ptr);
}

static struct ibv_pd *pdom_alloc(struct sv_end *e, struct ibv_td *td,
				 struct acct *a)
{
	struct ibv_parent_domain_init_attr pa = {
		.pd = e->pd,
		.td = td,
	};
	struct ibv_pd *p;

	if (a) {
		pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
			       IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
		pa.alloc = acct_alloc;
		pa.free = acct_free;
		pa.pd_context = a;
	}
	p = ibv_alloc_parent_domain(e->ctx, &pa);
	if (p && a)
		a->pd = p;
	return p;
}

static struct ibv_cq_ex *cq_on(struct sv_end *e, struct ibv_pd *pdom, int cqe)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = (uint32_t)cqe,
		.wc_flags = IBV_WC_EX_WITH_BYTE_LEN,
		.comp_mask = pdom ? IBV_CQ_INIT_ATTR_MASK_PD : 0,
		.parent_domain = pdom,
	};

	return ibv_create_cq_ex(e->ctx, &ca);
}

static struct ibv_qp *qp_on(struct ibv_pd *pd, struct ibv_cq *cq,
			    uint32_t inline_len)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 16,
			.max_recv_wr = 16,
			.max_send_sge = 2,
			.max_recv_sge = 2,
			.max_inline_data = inline_len},
	};

	return ibv_create_qp(pd, &ia);
}

SV_TEST(td_alloc_and_comp_mask)
{
	struct ibv_td_init_attr ta = {0};
	struct sv_end e;
	struct ibv_td *td;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	td = ibv_alloc_td(e.ctx, &ta);
	ASSERT_NOT_NULL(td);
	ASSERT_TRUE(td->context == e.ctx);
	ta.comp_mask = 1; /* no optional field exists */
	errno = 0;
	ASSERT_NULL(ibv_alloc_td(e.ctx, &ta));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_OK(ibv_dealloc_td(td));
	sv_end_close(&e);
}

SV_TEST(parent_domain_refused_arguments)
{
	struct ibv_td_init_attr ta = {0};
	struct ibv_parent_domain_init_attr pa = {0};
	struct sv_end e, other;
	struct ibv_td *td, *td_other;
	struct ibv_pd *p;

	memset(&e, 0, sizeof(e));
	memset(&other, 0, sizeof(other));
	sv_end_open_ctx(&e);
	sv_end_open_ctx(&other);
	td = ibv_alloc_td(e.ctx, &ta);
	td_other = ibv_alloc_td(other.ctx, &ta);
	ASSERT_NOT_NULL(td);
	ASSERT_NOT_NULL(td_other);

	errno = 0; /* no PD */
	ASSERT_NULL(ibv_alloc_parent_domain(e.ctx, &pa));
	ASSERT_EQ(EINVAL, errno);
	pa.pd = other.pd; /* another context's PD */
	errno = 0;
	ASSERT_NULL(ibv_alloc_parent_domain(e.ctx, &pa));
	ASSERT_EQ(EINVAL, errno);
	pa.pd = e.pd;
	pa.td = td_other; /* another context's TD */
	errno = 0;
	ASSERT_NULL(ibv_alloc_parent_domain(e.ctx, &pa));
	ASSERT_EQ(EINVAL, errno);
	pa.td = td;
	pa.comp_mask = 1u << 7; /* unknown */
	errno = 0;
	ASSERT_NULL(ibv_alloc_parent_domain(e.ctx, &pa));
	ASSERT_EQ(EINVAL, errno);
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS; /* NULLs */
	errno = 0;
	ASSERT_NULL(ibv_alloc_parent_domain(e.ctx, &pa));
	ASSERT_EQ(EINVAL, errno);
	pa.alloc = acct_alloc; /* free still NULL */
	errno = 0;
	ASSERT_NULL(ibv_alloc_parent_domain(e.ctx, &pa));
	ASSERT_EQ(EINVAL, errno);
	/* none of the refusals took a reference */
	ASSERT_OK(ibv_dealloc_td(td_other));
	pa.comp_mask = 0;
	p = ibv_alloc_parent_domain(e.ctx, &pa);
	ASSERT_NOT_NULL(p);
	ASSERT_TRUE(p->context == e.ctx);
	ASSERT_EQ(e.pd->handle, p->handle); /* as rdma-core initializes it */
	ASSERT_OK(ibv_dealloc_pd(p));
	ASSERT_OK(ibv_dealloc_td(td));
	sv_end_close(&other);
	sv_end_close(&e);
}

/* Who holds whom: the parent domain its PD and TD, each object made on
 * it the parent domain; EBUSY until they go, in any order. */
SV_TEST(parent_domain_busy_while_used)
{
	struct ibv_td_init_attr ta = {0};
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
	struct ibv_ah_attr aa = {.port_num = 1};
	struct ibv_port_attr port;
	struct sv_end e;
	struct ibv_td *td;
	struct ibv_pd *p;
	struct ibv_cq_ex *cqx;
	struct ibv_qp *qp;
	struct ibv_srq *srq;
	struct ibv_mw *mw;
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	static uint8_t buf[4096];

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	td = ibv_alloc_td(e.ctx, &ta);
	ASSERT_NOT_NULL(td);
	p = pdom_alloc(&e, td, NULL);
	ASSERT_NOT_NULL(p);
	ASSERT_EQ(EBUSY, ibv_dealloc_td(td));
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(e.pd));

	cqx = cq_on(&e, p, 8);
	ASSERT_NOT_NULL(cqx);
	qp = qp_on(p, ibv_cq_ex_to_cq(cqx), 0);
	ASSERT_NOT_NULL(qp);
	ASSERT_TRUE(qp->pd == p);
	srq = ibv_create_srq(p, &sa);
	ASSERT_NOT_NULL(srq);
	mw = ibv_alloc_mw(p, IBV_MW_TYPE_2);
	ASSERT_NOT_NULL(mw);
	ASSERT_OK(ibv_query_port(e.ctx, 1, &port));
	aa.dlid = port.lid;
	ah = ibv_create_ah(p, &aa);
	ASSERT_NOT_NULL(ah);
	mr = ibv_reg_mr(p, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	ASSERT_TRUE(mr->pd == p);

	/* each object in turn keeps it */
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(p));
	ASSERT_OK(ibv_destroy_qp(qp));
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(p));
	ASSERT_OK(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)));
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(p));
	ASSERT_OK(ibv_destroy_srq(srq));
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(p));
	ASSERT_OK(ibv_dealloc_mw(mw));
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(p));
	ASSERT_OK(ibv_destroy_ah(ah));
	/* an MR holds the PD inside, as under mlx5 (the kernel's PD) */
	ASSERT_EQ(0, ibv_dealloc_pd(p));
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(e.pd));
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(ibv_dealloc_td(td));
	sv_end_close(&e);
}

/* A CQ takes a parent domain, never a plain PD (as mlx5); the flags. */
SV_TEST(cq_ex_parent_domain_and_flags)
{
	struct ibv_cq_init_attr_ex ca = {.cqe = 4};
	struct sv_end e, other;
	struct ibv_pd *p, *p_other;
	struct ibv_cq_ex *cqx;

	memset(&e, 0, sizeof(e));
	memset(&other, 0, sizeof(other));
	sv_end_open_ctx(&e);
	sv_end_open_ctx(&other);
	p = pdom_alloc(&e, NULL, NULL);
	p_other = pdom_alloc(&other, NULL, NULL);
	ASSERT_NOT_NULL(p);
	ASSERT_NOT_NULL(p_other);

	ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
	ca.parent_domain = e.pd; /* a PD, not a parent domain */
	errno = 0;
	ASSERT_NULL(ibv_create_cq_ex(e.ctx, &ca));
	ASSERT_EQ(EINVAL, errno);
	ca.parent_domain = NULL;
	errno = 0;
	ASSERT_NULL(ibv_create_cq_ex(e.ctx, &ca));
	ASSERT_EQ(EINVAL, errno);
	ca.parent_domain = p_other; /* another context's */
	errno = 0;
	ASSERT_NULL(ibv_create_cq_ex(e.ctx, &ca));
	ASSERT_EQ(EINVAL, errno);

	/* single-threaded is a promise we may take */
	ca.parent_domain = p;
	ca.comp_mask |= IBV_CQ_INIT_ATTR_MASK_FLAGS;
	ca.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
	cqx = ibv_create_cq_ex(e.ctx, &ca);
	ASSERT_NOT_NULL(cqx);
	ASSERT_OK(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)));
	/* an unknown flag is refused */
	ca.flags = 1u << 6;
	errno = 0;
	ASSERT_NULL(ibv_create_cq_ex(e.ctx, &ca));
	ASSERT_EQ(EOPNOTSUPP, errno);
	/* and overrun is always reported (IBV_EVENT_CQ_ERR), never ignored */
	ca.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
	errno = 0;
	ASSERT_NULL(ibv_create_cq_ex(e.ctx, &ca));
	ASSERT_EQ(EOPNOTSUPP, errno);
	/* a completion field we cannot fill */
	ca.flags = 0;
	ca.wc_flags = IBV_WC_EX_WITH_FLOW_TAG;
	errno = 0;
	ASSERT_NULL(ibv_create_cq_ex(e.ctx, &ca));
	ASSERT_EQ(EOPNOTSUPP, errno);

	/* no CQ moderation: max_cq_moderation_count 0, ibv_modify_cq
	 * EOPNOTSUPP */
	{
		struct ibv_device_attr_ex dx;
		struct ibv_modify_cq_attr mc = {
			.attr_mask = IBV_CQ_ATTR_MODERATE,
			.moderate = {.cq_count = 4, .cq_period = 10},
		};
		struct ibv_cq *cq = ibv_create_cq(e.ctx, 4, NULL, NULL, 0);

		ASSERT_NOT_NULL(cq);
		ASSERT_OK(ibv_query_device_ex(e.ctx, NULL, &dx));
		ASSERT_EQ(0, dx.cq_mod_caps.max_cq_count);
		ASSERT_EQ(0, dx.cq_mod_caps.max_cq_period);
		ASSERT_EQ(EOPNOTSUPP, ibv_modify_cq(cq, &mc));
		ASSERT_OK(ibv_destroy_cq(cq));
	}
	ASSERT_OK(ibv_dealloc_pd(p_other));
	ASSERT_OK(ibv_dealloc_pd(p));
	sv_end_close(&other);
	sv_end_close(&e);
}

/* One message each way between a (everything on a parent domain whose
 * allocator makes its queues) and b (plain); a's MR is on the PD. */
static void pingpong(struct sv_end *a, struct sv_end *b)
{
	struct ibv_wc wc;

	sv_end_connect(a, b->qp->qp_num, b->o.psn);
	sv_end_connect(b, a->qp->qp_num, a->o.psn);
	sv_fill(a->buf, 512, 3);
	sv_fill(b->buf + 512, 512, 4);
	ASSERT_OK(sv_end_recv(b, 1, 0, 512));
	ASSERT_OK(sv_end_recv(a, 2, 512, 512));
	ASSERT_OK(sv_end_send(a, 3, 0, 512, IBV_SEND_SIGNALED));
	EXPECT_WC(b->rcq, IBV_WC_SUCCESS, 1);
	EXPECT_WC(a->scq, IBV_WC_SUCCESS, 3);
	ASSERT_EQ(-1, sv_check(b->buf, 512, 3));
	/* inline: the inline buffer is the allocator's too */
	ASSERT_OK(sv_end_recv(b, 6, 1024, 64));
	ASSERT_OK(sv_end_send(b, 4, 512, 64, IBV_SEND_SIGNALED));
	ASSERT_OK(
		sv_end_send(a, 5, 0, 32, IBV_SEND_SIGNALED | IBV_SEND_INLINE));
	/* a's one CQ takes b's message (2) and a's own send (5) in either
	 * order: nothing orders b's send against a's (over TCP a loaded
	 * run saw 5 first) */
	for (int k = 0, seen = 0; k < 2; k++) {
		WAIT_WC(a->rcq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		if (wc.wr_id == 2) {
			ASSERT_EQ(IBV_WC_RECV, wc.opcode);
			ASSERT_EQ(64, wc.byte_len);
		} else {
			ASSERT_EQ(5, wc.wr_id);
			ASSERT_EQ(IBV_WC_SEND, wc.opcode);
		}
		ASSERT_EQ(0, seen & (wc.wr_id == 2 ? 1 : 2));
		seen |= wc.wr_id == 2 ? 1 : 2;
	}
	EXPECT_WC(b->scq, IBV_WC_SUCCESS, 4);
	EXPECT_WC(b->rcq, IBV_WC_SUCCESS, 6);
	ASSERT_EQ(-1, sv_check(a->buf + 512, 64, 4));
	ASSERT_EQ(-1, sv_check(b->buf + 1024, 32, 3));
}

SV_TEST(parent_domain_allocators_make_the_queues)
{
	struct acct acc = {.mode = A_ALLOC};
	struct ibv_td_init_attr ta = {0};
	struct sv_end a, b;
	struct ibv_td *td;
	struct ibv_pd *p;
	struct ibv_cq_ex *cqx;

	memset(&a, 0, sizeof(a));
	a.o = sv_end_opts_default();
	sv_end_open_ctx(&a);
	td = ibv_alloc_td(a.ctx, &ta);
	ASSERT_NOT_NULL(td);
	p = pdom_alloc(&a, td, &acc);
	ASSERT_NOT_NULL(p);
	cqx = cq_on(&a, p, 16);
	ASSERT_NOT_NULL(cqx);
	ASSERT_EQ(1, acc.allocs[5]);
	a.scq = a.rcq = ibv_cq_ex_to_cq(cqx);
	a.qp = qp_on(p, a.scq, 64);
	ASSERT_NOT_NULL(a.qp);
	ASSERT_EQ(5, acc.allocs[1]); /* SQ WQEs, SGEs, inline; RQ WQEs, SGEs */
	a.buf = calloc(1, a.o.buf_len);
	ASSERT_NOT_NULL(a.buf);
	a.mr = ibv_reg_mr(a.pd, a.buf, a.o.buf_len, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(a.mr);
	sv_end_open(&b, NULL);
	b.o.psn = 0x4321;
	pingpong(&a, &b);
	/* resize: a new array from the allocator, the old one back */
	ASSERT_OK(ibv_resize_cq(a.scq, 100));
	ASSERT_EQ(2, acc.allocs[5]);
	ASSERT_EQ(1, acc.frees[5]);

	ASSERT_OK(ibv_destroy_qp(a.qp));
	a.qp = NULL;
	ASSERT_EQ(5, acc.frees[1]);
	ASSERT_OK(ibv_destroy_cq(a.scq));
	a.scq = a.rcq = NULL;
	ASSERT_EQ(2, acc.frees[5]);
	ASSERT_EQ(0, acc.live);
	ASSERT_EQ(0, acc.bad_type);
	ASSERT_EQ(0, acc.bad_align);
	ASSERT_EQ(0, acc.bad_pd);
	ASSERT_OK(ibv_dealloc_pd(p));
	ASSERT_OK(ibv_dealloc_td(td));
	sv_end_close(&a);
	sv_end_close(&b);
}

/* IBV_ALLOCATOR_USE_DEFAULT: we allocate, and never call free. */
SV_TEST(parent_domain_allocator_use_default)
{
	struct acct acc = {.mode = A_DEFAULT};
	struct sv_end a, b;
	struct ibv_pd *p;
	struct ibv_cq_ex *cqx;

	memset(&a, 0, sizeof(a));
	a.o = sv_end_opts_default();
	sv_end_open_ctx(&a);
	p = pdom_alloc(&a, NULL, &acc);
	ASSERT_NOT_NULL(p);
	cqx = cq_on(&a, p, 16);
	ASSERT_NOT_NULL(cqx);
	a.scq = a.rcq = ibv_cq_ex_to_cq(cqx);
	a.qp = qp_on(p, a.scq, 64);
	ASSERT_NOT_NULL(a.qp);
	a.buf = calloc(1, a.o.buf_len);
	ASSERT_NOT_NULL(a.buf);
	/* an MR on the parent domain works with the QP as one on its PD */
	a.mr = ibv_reg_mr(p, a.buf, a.o.buf_len, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(a.mr);
	sv_end_open(&b, NULL);
	b.o.psn = 0x4321;
	pingpong(&a, &b);
	ASSERT_OK(ibv_destroy_qp(a.qp));
	a.qp = NULL;
	ASSERT_OK(ibv_destroy_cq(a.scq));
	a.scq = a.rcq = NULL;
	ASSERT_OK(ibv_dereg_mr(a.mr));
	a.mr = NULL;
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(0, acc.frees[i]);
	ASSERT_EQ(0, acc.bad_pd);
	ASSERT_OK(ibv_dealloc_pd(p));
	sv_end_close(&a);
	sv_end_close(&b);
}

/* alloc says NULL: ENOMEM, and what was made before is given back. */
SV_TEST(parent_domain_allocator_fails)
{
	struct acct acc = {.mode = A_NULL};
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
	struct sv_end e;
	struct ibv_pd *p;
	struct ibv_cq *cq;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	p = pdom_alloc(&e, NULL, &acc);
	ASSERT_NOT_NULL(p);
	errno = 0;
	ASSERT_NULL(cq_on(&e, p, 4));
	ASSERT_EQ(ENOMEM, errno);
	cq = ibv_create_cq(e.ctx, 4, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	errno = 0;
	ASSERT_NULL(qp_on(p, cq, 0));
	ASSERT_EQ(ENOMEM, errno);
	errno = 0;
	ASSERT_NULL(ibv_create_srq(p, &sa));
	ASSERT_EQ(ENOMEM, errno);
	/* the QP's fourth buffer fails: the three before are given back */
	acc.mode = A_ALLOC;
	acc.limited = true;
	acc.budget = 3;
	errno = 0;
	ASSERT_NULL(qp_on(p, cq, 16));
	ASSERT_EQ(ENOMEM, errno);
	ASSERT_EQ(3, acc.allocs[1]);
	ASSERT_EQ(3, acc.frees[1]);
	/* the SRQ's second */
	acc.budget = 1;
	errno = 0;
	ASSERT_NULL(ibv_create_srq(p, &sa));
	ASSERT_EQ(ENOMEM, errno);
	ASSERT_EQ(1, acc.frees[4]);
	/* nothing failed holds the parent domain */
	ASSERT_EQ(0, acc.live);
	ASSERT_OK(ibv_dealloc_pd(p));
	ASSERT_OK(ibv_destroy_cq(cq));
	sv_end_close(&e);
}

/* An allocator that breaks the alignment: EINVAL, its buffer returned. */
SV_TEST(parent_domain_allocator_misaligned)
{
	struct acct acc = {.mode = A_MISALIGN};
	struct sv_end e;
	struct ibv_pd *p;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	p = pdom_alloc(&e, NULL, &acc);
	ASSERT_NOT_NULL(p);
	errno = 0;
	ASSERT_NULL(cq_on(&e, p, 4));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_EQ(0, acc.live);
	ASSERT_OK(ibv_dealloc_pd(p));
	sv_end_close(&e);
}

/* An SRQ on a parent domain: its queue from the allocator, and again
 * when ibv_modify_srq grows it; posted WQEs survive the move. */
SV_TEST(parent_domain_srq_queue)
{
	struct acct acc = {.mode = A_ALLOC};
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
	struct ibv_srq_attr ma = {.max_wr = 64};
	struct ibv_recv_wr wr = {.wr_id = 7}, *bad;
	struct sv_end e;
	struct ibv_pd *p;
	struct ibv_srq *srq;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	p = pdom_alloc(&e, NULL, &acc);
	ASSERT_NOT_NULL(p);
	srq = ibv_create_srq(p, &sa);
	ASSERT_NOT_NULL(srq);
	ASSERT_EQ(2, acc.allocs[4]); /* WQEs, SGEs */
	ASSERT_OK(ibv_post_srq_recv(srq, &wr, &bad));
	ASSERT_OK(ibv_modify_srq(srq, &ma, IBV_SRQ_MAX_WR));
	ASSERT_EQ(4, acc.allocs[4]);
	ASSERT_EQ(2, acc.frees[4]);
	ASSERT_OK(ibv_destroy_srq(srq));
	ASSERT_EQ(4, acc.frees[4]);
	ASSERT_EQ(0, acc.live);
	ASSERT_OK(ibv_dealloc_pd(p));
	sv_end_close(&e);
}

/* A parent domain of a parent domain is one of the same PD (mlx5's
 * to_mpd); an AH on the PD serves a UD QP on the parent domain. */
SV_TEST(parent_domain_nested_and_interchangeable)
{
	struct ibv_parent_domain_init_attr pa = {0};
	struct ibv_ah_attr aa = {.port_num = 1};
	struct ibv_port_attr port;
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_UD,
		.cap = {.max_send_wr = 4,
			.max_recv_wr = 4,
			.max_send_sge = 1,
			.max_recv_sge = 1},
	};
	struct ibv_qp_attr qa = {
		.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11};
	struct ibv_send_wr wr = {.wr_id = 9,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct sv_end e;
	struct ibv_pd *p1, *p2;
	struct ibv_ah *ah;
	struct ibv_cq *cq;
	struct ibv_qp *qp;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	p1 = pdom_alloc(&e, NULL, NULL);
	ASSERT_NOT_NULL(p1);
	pa.pd = p1;
	p2 = ibv_alloc_parent_domain(e.ctx, &pa);
	ASSERT_NOT_NULL(p2);
	ASSERT_EQ(e.pd->handle, p2->handle);
	/* p2 holds the PD, not p1 */
	ASSERT_OK(ibv_dealloc_pd(p1));
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(e.pd));

	cq = ibv_create_cq(e.ctx, 8, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	ia.send_cq = ia.recv_cq = cq;
	qp = ibv_create_qp(p2, &ia);
	ASSERT_NOT_NULL(qp);
	ASSERT_OK(ibv_modify_qp(qp, &qa,
				IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					IBV_QP_QKEY));
	qa.qp_state = IBV_QPS_RTR;
	ASSERT_OK(ibv_modify_qp(qp, &qa, IBV_QP_STATE));
	qa.qp_state = IBV_QPS_RTS;
	qa.sq_psn = 0;
	ASSERT_OK(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN));
	ASSERT_OK(ibv_query_port(e.ctx, 1, &port));
	aa.dlid = port.lid;
	ah = ibv_create_ah(e.pd, &aa); /* on the PD inside */
	ASSERT_NOT_NULL(ah);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qp->qp_num;
	wr.wr.ud.remote_qkey = 0x11;
	/* accepted: the AH's PD is the QP's (a zero-length datagram to
	 * itself, which it has no receive for: dropped, as UD drops) */
	ASSERT_OK(ibv_post_send(qp, &wr, &bad));
	EXPECT_WC(cq, IBV_WC_SUCCESS, 9);
	ASSERT_OK(ibv_destroy_qp(qp));
	ASSERT_OK(ibv_destroy_ah(ah));
	ASSERT_OK(ibv_destroy_cq(cq));
	ASSERT_OK(ibv_dealloc_pd(p2));
	sv_end_close(&e);
}

/* IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK: ns of CLOCK_REALTIME,
 * between the real time before the completion and after the read. */
SV_TEST(cq_ex_wallclock_timestamp)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 4,
		.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
	};
	struct ibv_poll_cq_attr pa = {0};
	struct ibv_recv_wr rwr = {.wr_id = 1}, *bad;
	struct ibv_qp_attr qa = {.qp_state = IBV_QPS_ERR};
	struct timespec t0, t1;
	struct ibv_cq_ex *cqx;
	struct sv_end e;
	uint64_t ns, before, after;
	int ret;

	memset(&e, 0, sizeof(e));
	e.o = sv_end_opts_default();
	sv_end_open_ctx(&e);
	cqx = ibv_create_cq_ex(e.ctx, &ca);
	ASSERT_NOT_NULL(cqx);
	e.qp = qp_on(e.pd, ibv_cq_ex_to_cq(cqx), 0);
	ASSERT_NOT_NULL(e.qp);
	ASSERT_OK(sv_end_to_init(&e));
	ASSERT_OK(ibv_post_recv(e.qp, &rwr, &bad));
	clock_gettime(CLOCK_REALTIME, &t0);
	ASSERT_OK(ibv_modify_qp(e.qp, &qa, IBV_QP_STATE)); /* flushes it */
	for (uint64_t end = sv_now_ms() + SV_WC_TIMEOUT_MS;;) {
		ret = ibv_start_poll(cqx, &pa);
		if (ret != ENOENT)
			break;
		ASSERT_TRUE(sv_now_ms() < end);
	}
	ASSERT_OK(ret);
	ASSERT_EQ(IBV_WC_WR_FLUSH_ERR, cqx->status);
	ns = ibv_wc_read_completion_wallclock_ns(cqx);
	ibv_end_poll(cqx);
	clock_gettime(CLOCK_REALTIME, &t1);
	before = (uint64_t)t0.tv_sec * 1000000000ull + (uint64_t)t0.tv_nsec;
	after = (uint64_t)t1.tv_sec * 1000000000ull + (uint64_t)t1.tv_nsec;
	/* a millisecond of slack: the two clocks are read apart */
	ASSERT_LE(before, ns + 1000000);
	ASSERT_LE(ns, after + 1000000);
	ASSERT_OK(ibv_destroy_qp(e.qp));
	e.qp = NULL;
	ASSERT_OK(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)));
	sv_end_close(&e);
}

/* send_ops_flags: what each QP type takes, and what no type does. */
SV_TEST(qp_ex_send_ops_by_type)
{
	static const uint64_t all =
		IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
		IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
		IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
		IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_BIND_MW |
		IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV;
	static const struct {
		enum ibv_qp_type type;
		uint64_t ops;
		int err; /* 0: created */
	} rows[] = {
		{IBV_QPT_RC, all, 0},
		{IBV_QPT_RC, IBV_QP_EX_WITH_ATOMIC_WRITE, EOPNOTSUPP},
		{IBV_QPT_RC, IBV_QP_EX_WITH_TSO, EOPNOTSUPP},
		{IBV_QPT_RC, 1ull << 40, EOPNOTSUPP},
		{IBV_QPT_UC, IBV_QP_EX_WITH_RDMA_WRITE, 0},
		{IBV_QPT_UC, IBV_QP_EX_WITH_RDMA_READ, EOPNOTSUPP},
		{IBV_QPT_UC, IBV_QP_EX_WITH_SEND_WITH_INV, EOPNOTSUPP},
		{IBV_QPT_UD, IBV_QP_EX_WITH_SEND_WITH_IMM, 0},
		{IBV_QPT_UD, IBV_QP_EX_WITH_RDMA_WRITE, EOPNOTSUPP},
	};
	struct sv_end e;
	struct ibv_cq *cq;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	cq = ibv_create_cq(e.ctx, 8, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ibv_qp_init_attr_ex a = {
			.send_cq = cq,
			.recv_cq = cq,
			.qp_type = rows[i].type,
			.cap = {.max_send_wr = 4,
				.max_recv_wr = 4,
				.max_send_sge = 1,
				.max_recv_sge = 1},
			.comp_mask = IBV_QP_INIT_ATTR_PD |
				     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.pd = e.pd,
			.send_ops_flags = rows[i].ops,
		};
		struct ibv_qp *qp;
		struct ibv_qp_ex *qx;

		errno = 0;
		qp = ibv_create_qp_ex(e.ctx, &a);
		if (rows[i].err) {
			ASSERT_NULL(qp);
			ASSERT_EQ(rows[i].err, errno);
			continue;
		}
		ASSERT_NOT_NULL(qp);
		qx = ibv_qp_to_qp_ex(qp);
		/* a builder for each flag asked, none for the others */
		ASSERT_EQ(!!(rows[i].ops & IBV_QP_EX_WITH_SEND),
			  qx->wr_send != NULL);
		ASSERT_EQ(!!(rows[i].ops & IBV_QP_EX_WITH_RDMA_READ),
			  qx->wr_rdma_read != NULL);
		ASSERT_EQ(!!(rows[i].ops & IBV_QP_EX_WITH_SEND_WITH_INV),
			  qx->wr_send_inv != NULL);
		ASSERT_EQ(rows[i].type == IBV_QPT_UD,
			  qx->wr_set_ud_addr != NULL);
		ASSERT_OK(ibv_destroy_qp(qp));
	}
	ASSERT_OK(ibv_destroy_cq(cq));
	sv_end_close(&e);
}

/* ibv_create_qp_ex on a parent domain with send_ops_flags: the builder
 * posts, and the MR on the PD inside serves it. */
SV_TEST(parent_domain_qp_ex_builder)
{
	struct acct acc = {.mode = A_ALLOC};
	struct sv_end a, b;
	struct ibv_pd *p;
	struct ibv_qp_ex *qx;
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 8,
			.max_recv_wr = 8,
			.max_send_sge = 1,
			.max_recv_sge = 1},
		.comp_mask =
			IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_SEND,
	};

	memset(&a, 0, sizeof(a));
	a.o = sv_end_opts_default();
	sv_end_open_ctx(&a);
	p = pdom_alloc(&a, NULL, &acc);
	ASSERT_NOT_NULL(p);
	a.scq = a.rcq = ibv_create_cq(a.ctx, 16, NULL, NULL, 0);
	ASSERT_NOT_NULL(a.scq);
	ia.send_cq = ia.recv_cq = a.scq;
	ia.pd = p;
	a.qp = ibv_create_qp_ex(a.ctx, &ia);
	ASSERT_NOT_NULL(a.qp);
	ASSERT_TRUE(a.qp->pd == p);
	ASSERT_EQ(5, acc.allocs[1]); /* with inline room: SGEs' 16 bytes */
	a.buf = calloc(1, a.o.buf_len);
	ASSERT_NOT_NULL(a.buf);
	a.mr = ibv_reg_mr(a.pd, a.buf, a.o.buf_len, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(a.mr);
	sv_end_open(&b, NULL);
	b.o.psn = 0x2468;
	sv_end_connect(&a, b.qp->qp_num, b.o.psn);
	sv_end_connect(&b, a.qp->qp_num, a.o.psn);
	ASSERT_OK(sv_end_recv(&b, 1, 0, 256));
	sv_fill(a.buf, 200, 9);
	qx = ibv_qp_to_qp_ex(a.qp);
	ibv_wr_start(qx);
	qx->wr_id = 77;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, a.mr->lkey, (uintptr_t)a.buf, 200);
	ASSERT_OK(ibv_wr_complete(qx));
	EXPECT_WC(b.rcq, IBV_WC_SUCCESS, 1);
	EXPECT_WC(a.scq, IBV_WC_SUCCESS, 77);
	ASSERT_EQ(-1, sv_check(b.buf, 200, 9));
	ASSERT_OK(ibv_destroy_qp(a.qp));
	a.qp = NULL;
	ASSERT_EQ(0, acc.live);
	ASSERT_OK(ibv_dealloc_pd(p));
	sv_end_close(&a);
	sv_end_close(&b);
}
