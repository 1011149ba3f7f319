// SPDX-License-Identifier: MIT
/*
 * One-sided RDMA (issue 9) through the public verbs API: RDMA write,
 * write with immediate, inline write, read, compare-and-swap and
 * fetch-and-add, by ibv_post_send and by ibv_qp_ex; every byte checked,
 * every error with its status on both sides, no byte written outside an
 * MR (guard pages and canaries), ordering, fence and the rd_atomic
 * limit; and across processes: fetch-and-add from 2 processes x 2
 * threads, a target stopped by SIGSTOP, fork after registration.
 */
#include "pair.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define REMOTE_ALL                                          \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define QP_REMOTE_ALL                                       \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
	 IBV_ACCESS_REMOTE_ATOMIC)
/* Both ends' registered buffer: the largest message is the whole MR. */
#define BUF_LEN	  ((size_t)(2 << 20) + 65536)
#define GAP	  64   /* bytes between a multi-SGE list's pieces */
#define CANARY	  0x5a /* what nothing may overwrite */
#define GUARD_CAN 0xc5 /* bytes next to a guarded MR, same page */
#define PAGE	  4096

/* --- building blocks ---------------------------------------------------- */

static struct sv_end_opts rdma_opts(size_t len)
{
	struct sv_end_opts o = sv_end_opts_default();

	o.buf_len = len;
	o.mr_access = REMOTE_ALL;
	o.qp_access = QP_REMOTE_ALL;
	o.max_send_wr = 64;
	o.max_recv_wr = 32;
	o.cqe = 256;
	return o;
}

/* a initiates, b is the target; both with remote access everywhere. */
static void rdma_pair(struct sv_pair *p, size_t len)
{
	struct sv_end_opts oa = rdma_opts(len), ob = rdma_opts(len);

	ob.psn = 0x5678;
	sv_pair_open(p, &oa, &ob);
}

/* Posts one RDMA write/read (or write with immediate) over sg[0..n). */
static int post_rdma(struct sv_end *e, uint64_t wr_id, enum ibv_wr_opcode op,
		     struct ibv_sge *sg, int n, uint64_t raddr, uint32_t rkey,
		     unsigned int flags)
{
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = sg,
		.num_sge = n,
		.opcode = op,
		.send_flags = flags,
		.wr.rdma = {.remote_addr = raddr, .rkey = rkey},
	};
	struct ibv_send_wr *bad = NULL;

	if (op == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr.imm_data = htonl(0x1234abcd);
	return ibv_post_send(e->qp, &wr, &bad);
}

/* Posts one atomic; the old value lands at e->buf + off (8 bytes). */
static int post_atomic(struct sv_end *e, uint64_t wr_id, enum ibv_wr_opcode op,
		       size_t off, uint64_t raddr, uint32_t rkey,
		       uint64_t compare_add, uint64_t swap)
{
	struct ibv_sge sg = {
		.addr = (uintptr_t)(e->buf + off),
		.length = 8,
		.lkey = e->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sg,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.atomic = {.remote_addr = raddr,
			      .compare_add = compare_add,
			      .swap = swap,
			      .rkey = rkey},
	};
	struct ibv_send_wr *bad = NULL;

	return ibv_post_send(e->qp, &wr, &bad);
}

/* One completion: status, wr_id and (op >= 0) opcode, at the caller. */
static struct ibv_wc expect_wc(const char *file, int line, struct ibv_cq *cq,
			       enum ibv_wc_status st, uint64_t id, int op)
{
	struct ibv_wc wc;

	sv_wc_wait_at(file, line, cq, &wc, SV_WC_TIMEOUT_MS);
	if (wc.status != st || wc.wr_id != id ||
	    (op >= 0 && (int)wc.opcode != op))
		sv_test_fail(file, line,
			     "completion wr_id %" PRIu64 " status %s opcode %d;"
			     " expected wr_id %" PRIu64 " status %s opcode %d",
			     (uint64_t)wc.wr_id, ibv_wc_status_str(wc.status),
			     wc.opcode, id, ibv_wc_status_str(st), op);
	return wc;
}
#define WC(cq, st, id, op) expect_wc(__FILE__, __LINE__, cq, st, id, op)
#define WC_OK(cq, id, op)  WC(cq, IBV_WC_SUCCESS, id, op)

static void same_bytes(const char *file, int line, const uint8_t *got,
		       const uint8_t *want, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (got[i] != want[i])
			sv_test_fail(file, line,
				     "byte %zu of %zu: 0x%02x, expected 0x%02x",
				     i, len, got[i], want[i]);
}
#define ASSERT_BYTES(got, want, len) \
	same_bytes(__FILE__, __LINE__, got, want, len)

static void all_bytes(const char *file, int line, const uint8_t *buf,
		      size_t len, uint8_t v)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != v)
			sv_test_fail(file, line,
				     "byte %zu of %zu: 0x%02x, expected 0x%02x",
				     i, len, buf[i], v);
}
#define ASSERT_ALL(buf, len, v) all_bytes(__FILE__, __LINE__, buf, len, v)

/*
 * Lays a stream of len bytes out in e's buffer from off as n pieces
 * (the first takes the remainder) with GAP bytes between them.
 * Returns the number of SGEs (fewer when len < n).
 */
static int split(struct sv_end *e, size_t off, size_t len, int n,
		 struct ibv_sge *sg)
{
	size_t pos = off;

	if ((size_t)n > len)
		n = len ? (int)len : 1;
	for (int i = 0; i < n; i++) {
		size_t piece = len / (size_t)n + (i ? 0 : len % (size_t)n);

		sg[i] = (struct ibv_sge){.addr = (uintptr_t)(e->buf + pos),
					 .length = (uint32_t)piece,
					 .lkey = e->mr->lkey};
		pos += piece + GAP;
	}
	return n;
}

/* Copies the stream into (to_sges) or out of the SGEs' image `img`,
 * where img stands for e->buf. */
static void sg_copy(struct sv_end *e, uint8_t *img, const struct ibv_sge *sg,
		    int n, uint8_t *stream, bool to_sges)
{
	size_t pos = 0;

	for (int i = 0; i < n; i++) {
		uint8_t *at = img + ((uint8_t *)(uintptr_t)sg[i].addr - e->buf);

		if (to_sges)
			memcpy(at, stream + pos, sg[i].length);
		else
			memcpy(stream + pos, at, sg[i].length);
		pos += sg[i].length;
	}
}

/* --- data: every opcode, every size -------------------------------------- */

static const size_t odd_sizes[] = {1, 7, 4095, 4097, 65537, (1 << 20) + 3};

/*
 * RDMA write of len bytes gathered from nsge pieces of a's buffer to b's
 * buffer at roff: b's buffer afterwards is exactly its old image with the
 * stream at roff, and the requester's completion says RDMA_WRITE.
 */
static void write_case(struct sv_pair *p, size_t len, int nsge, size_t roff,
		       uint32_t seed)
{
	uint8_t *stream = malloc(len + 1), *img = malloc(BUF_LEN);
	struct ibv_sge sg[4];
	int n;

	ASSERT_NOT_NULL(stream);
	ASSERT_NOT_NULL(img);
	sv_fill(stream, len, seed);
	memset(p->a.buf, 0xee, BUF_LEN);
	n = split(&p->a, 0, len, nsge, sg);
	sg_copy(&p->a, p->a.buf, sg, n, stream, true);
	memset(p->b.buf, CANARY, BUF_LEN);
	memset(img, CANARY, BUF_LEN);
	memcpy(img + roff, stream, len);

	ASSERT_OK(post_rdma(&p->a, len, IBV_WR_RDMA_WRITE, sg, n,
			    (uintptr_t)(p->b.buf + roff), p->b.mr->rkey,
			    IBV_SEND_SIGNALED));
	WC_OK(p->a.scq, len, IBV_WC_RDMA_WRITE);
	ASSERT_BYTES(p->b.buf, img, BUF_LEN);
	NO_WC(p->b.rcq, 0); /* a write consumes no receive */
	free(stream);
	free(img);
}

/* RDMA read of len bytes at b's roff scattered into nsge pieces of a's
 * buffer: a's buffer is its old image with the pieces filled in. */
static void read_case(struct sv_pair *p, size_t len, int nsge, size_t roff,
		      uint32_t seed)
{
	uint8_t *stream = malloc(len + 1), *img = malloc(BUF_LEN);
	struct ibv_sge sg[4];
	int n;

	ASSERT_NOT_NULL(stream);
	ASSERT_NOT_NULL(img);
	memset(p->b.buf, 0x33, BUF_LEN);
	sv_fill(p->b.buf + roff, len, seed);
	memcpy(stream, p->b.buf + roff, len);
	memset(p->a.buf, CANARY, BUF_LEN);
	memset(img, CANARY, BUF_LEN);
	n = split(&p->a, 0, len, nsge, sg);
	sg_copy(&p->a, img, sg, n, stream, true);

	ASSERT_OK(post_rdma(&p->a, len, IBV_WR_RDMA_READ, sg, n,
			    (uintptr_t)(p->b.buf + roff), p->b.mr->rkey,
			    IBV_SEND_SIGNALED));
	WC_OK(p->a.scq, len, IBV_WC_RDMA_READ);
	ASSERT_BYTES(p->a.buf, img, BUF_LEN);
	free(stream);
	free(img);
}

/* The port allows a message as large as the whole MR we use. */
static void check_max_msg(struct sv_end *e)
{
	struct ibv_port_attr pa;

	ASSERT_OK(ibv_query_port(e->ctx, 1, &pa));
	ASSERT_GE(pa.max_msg_sz, BUF_LEN);
}

SV_TEST(rdma_write_sizes_one_sge)
{
	struct sv_pair p;

	rdma_pair(&p, BUF_LEN);
	check_max_msg(&p.a);
	for (size_t i = 0; i < sizeof(odd_sizes) / sizeof(odd_sizes[0]); i++)
		write_case(&p, odd_sizes[i], 1, 3, (uint32_t)i + 1);
	write_case(&p, BUF_LEN, 1, 0, 99); /* the whole MR */
	sv_pair_close(&p);
}

SV_TEST(rdma_write_sizes_multi_sge)
{
	struct sv_pair p;

	rdma_pair(&p, BUF_LEN);
	for (size_t i = 0; i < sizeof(odd_sizes) / sizeof(odd_sizes[0]); i++) {
		write_case(&p, odd_sizes[i], 3, 5, (uint32_t)i + 11);
		write_case(&p, odd_sizes[i], 4, 0, (uint32_t)i + 21);
	}
	write_case(&p, BUF_LEN - 4 * GAP, 4, 4 * GAP, 98);
	sv_pair_close(&p);
}

SV_TEST(rdma_read_sizes_one_sge)
{
	struct sv_pair p;

	rdma_pair(&p, BUF_LEN);
	for (size_t i = 0; i < sizeof(odd_sizes) / sizeof(odd_sizes[0]); i++)
		read_case(&p, odd_sizes[i], 1, 3, (uint32_t)i + 31);
	read_case(&p, BUF_LEN, 1, 0, 97); /* the whole MR */
	sv_pair_close(&p);
}

SV_TEST(rdma_read_sizes_multi_sge)
{
	struct sv_pair p;

	rdma_pair(&p, BUF_LEN);
	for (size_t i = 0; i < sizeof(odd_sizes) / sizeof(odd_sizes[0]); i++) {
		read_case(&p, odd_sizes[i], 3, 7, (uint32_t)i + 41);
		read_case(&p, odd_sizes[i], 4, 0, (uint32_t)i + 51);
	}
	read_case(&p, BUF_LEN - 4 * GAP, 4, 0, 96);
	sv_pair_close(&p);
}

/* A zero-length write or read succeeds and moves nothing. */
SV_TEST(rdma_zero_length)
{
	struct sv_pair p;

	rdma_pair(&p, 65536);
	memset(p.a.buf, 0x11, 65536);
	memset(p.b.buf, CANARY, 65536);
	ASSERT_OK(post_rdma(&p.a, 1, IBV_WR_RDMA_WRITE, NULL, 0,
			    (uintptr_t)p.b.buf, p.b.mr->rkey,
			    IBV_SEND_SIGNALED));
	WC_OK(p.a.scq, 1, IBV_WC_RDMA_WRITE);
	ASSERT_OK(post_rdma(&p.a, 2, IBV_WR_RDMA_READ, NULL, 0,
			    (uintptr_t)p.b.buf, p.b.mr->rkey,
			    IBV_SEND_SIGNALED));
	WC_OK(p.a.scq, 2, IBV_WC_RDMA_READ);
	/* an SGE of length 0 is a zero-length message too */
	{
		struct ibv_sge sg = {.addr = (uintptr_t)p.a.buf,
				     .length = 0,
				     .lkey = p.a.mr->lkey};

		ASSERT_OK(post_rdma(&p.a, 3, IBV_WR_RDMA_WRITE, &sg, 1,
				    (uintptr_t)p.b.buf + 100, p.b.mr->rkey,
				    IBV_SEND_SIGNALED));
		WC_OK(p.a.scq, 3, IBV_WC_RDMA_WRITE);
	}
	ASSERT_ALL(p.b.buf, 65536, CANARY);
	ASSERT_ALL(p.a.buf, 65536, 0x11);
	NO_WC(p.b.rcq, 0);
	ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&p.a));
	ASSERT_EQ(IBV_QPS_RTS, sv_end_state(&p.b));
	sv_pair_close(&p);
}

/*
 * Write with immediate: the data lands, a receive is consumed (its buffer
 * untouched) and completes as RECV_RDMA_WITH_IMM with the immediate and
 * the write's length; the requester's completion is RDMA_WRITE.
 */
SV_TEST(rdma_write_with_imm)
{
	static const uint32_t lens[] = {4097, 0, 1};
	struct sv_pair p;

	rdma_pair(&p, 65536);
	memset(p.b.buf, CANARY, 65536);
	for (int i = 0; i < 3; i++)
		ASSERT_OK(sv_end_recv(&p.b, 70 + (uint64_t)i, 32768, 4096));
	sv_fill(p.a.buf, 8192, 5);
	for (int i = 0; i < 3; i++) {
		struct ibv_sge sg = {.addr = (uintptr_t)p.a.buf,
				     .length = lens[i],
				     .lkey = p.a.mr->lkey};
		struct ibv_wc wc;

		ASSERT_OK(post_rdma(&p.a, 10 + (uint64_t)i,
				    IBV_WR_RDMA_WRITE_WITH_IMM, &sg,
				    lens[i] ? 1 : 0,
				    (uintptr_t)p.b.buf + 8192 * (uint64_t)i,
				    p.b.mr->rkey, IBV_SEND_SIGNALED));
		WC_OK(p.a.scq, 10 + (uint64_t)i, IBV_WC_RDMA_WRITE);
		wc = WC_OK(p.b.rcq, 70 + (uint64_t)i,
			   IBV_WC_RECV_RDMA_WITH_IMM);
		ASSERT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
		ASSERT_EQ(htonl(0x1234abcd), wc.imm_data);
		ASSERT_EQ(lens[i], wc.byte_len);
		ASSERT_EQ(p.b.qp->qp_num, wc.qp_num);
		ASSERT_EQ(p.a.qp->qp_num, wc.src_qp);
		ASSERT_EQ(-1, sv_check(p.b.buf + 8192 * i, lens[i], 5));
		ASSERT_EQ(CANARY, p.b.buf[8192 * i + lens[i]]);
	}
	ASSERT_ALL(p.b.buf + 32768, 32768, CANARY); /* receive buffer */
	/* a fourth finds no receive: RNR, then the receive lets it in */
	{
		struct ibv_sge sg = {.addr = (uintptr_t)p.a.buf,
				     .length = 16,
				     .lkey = p.a.mr->lkey};

		ASSERT_OK(post_rdma(&p.a, 13, IBV_WR_RDMA_WRITE_WITH_IMM, &sg,
				    1, (uintptr_t)p.b.buf + 1024, p.b.mr->rkey,
				    IBV_SEND_SIGNALED));
		NO_WC(p.a.scq, 20);
		ASSERT_OK(sv_end_recv(&p.b, 73, 32768, 4096));
		WC_OK(p.a.scq, 13, IBV_WC_RDMA_WRITE);
		WC_OK(p.b.rcq, 73, IBV_WC_RECV_RDMA_WITH_IMM);
		ASSERT_EQ(-1, sv_check(p.b.buf + 1024, 16, 5));
	}
	sv_pair_close(&p);
}

/* Inline write: the data is taken at post time from unregistered memory. */
SV_TEST(rdma_write_inline)
{
	struct sv_end_opts oa = rdma_opts(65536), ob = rdma_opts(65536);
	uint8_t data[100], want[100];
	struct sv_pair p;
	struct ibv_sge sg = {.addr = (uintptr_t)data, .length = 100};

	oa.max_inline = 128;
	ob.psn = 0x5678;
	sv_pair_open(&p, &oa, &ob);
	memset(p.b.buf, CANARY, 65536);
	sv_fill(data, sizeof(data), 9);
	memcpy(want, data, sizeof(data));
	ASSERT_OK(post_rdma(&p.a, 1, IBV_WR_RDMA_WRITE, &sg, 1,
			    (uintptr_t)p.b.buf + 1, p.b.mr->rkey,
			    IBV_SEND_SIGNALED | IBV_SEND_INLINE));
	memset(data, 0, sizeof(data)); /* ours again once posted */
	WC_OK(p.a.scq, 1, IBV_WC_RDMA_WRITE);
	ASSERT_BYTES(p.b.buf + 1, want, sizeof(want));
	ASSERT_EQ(CANARY, p.b.buf[0]);
	ASSERT_ALL(p.b.buf + 101, 65536 - 101, CANARY);
	sv_pair_close(&p);
}

static uint64_t u64_at(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

SV_TEST(rdma_compare_and_swap)
{
	uint64_t *target;
	struct sv_pair p;

	rdma_pair(&p, 65536);
	target = (uint64_t *)(p.b.buf + 4096);
	*target = 0x1111222233334444ull;
	target[1] = 0x77;
	/* hit: swapped, the old value returned */
	ASSERT_OK(post_atomic(&p.a, 1, IBV_WR_ATOMIC_CMP_AND_SWP, 0,
			      (uintptr_t)target, p.b.mr->rkey,
			      0x1111222233334444ull, 0xaaaabbbbccccddddull));
	WC_OK(p.a.scq, 1, IBV_WC_COMP_SWAP);
	ASSERT_EQ(0x1111222233334444ull, u64_at(p.a.buf));
	ASSERT_EQ(0xaaaabbbbccccddddull, *target);
	/* miss: unchanged, the current value returned */
	ASSERT_OK(post_atomic(&p.a, 2, IBV_WR_ATOMIC_CMP_AND_SWP, 8,
			      (uintptr_t)target, p.b.mr->rkey,
			      0x1111222233334444ull, 0x5555ull));
	WC_OK(p.a.scq, 2, IBV_WC_COMP_SWAP);
	ASSERT_EQ(0xaaaabbbbccccddddull, u64_at(p.a.buf + 8));
	ASSERT_EQ(0xaaaabbbbccccddddull, *target);
	ASSERT_EQ(0x77, target[1]);
	ASSERT_EQ(0, u64_at(p.b.buf + 4088));
	sv_pair_close(&p);
}

SV_TEST(rdma_fetch_and_add)
{
	uint64_t *target;
	struct sv_pair p;

	rdma_pair(&p, 65536);
	target = (uint64_t *)(p.b.buf + 8192);
	*target = 100;
	for (int i = 0; i < 3; i++) {
		ASSERT_OK(post_atomic(
			&p.a, (uint64_t)i, IBV_WR_ATOMIC_FETCH_AND_ADD,
			8 * (size_t)i, (uintptr_t)target, p.b.mr->rkey, 5, 0));
		WC_OK(p.a.scq, (uint64_t)i, IBV_WC_FETCH_ADD);
		ASSERT_EQ(100 + 5 * i, u64_at(p.a.buf + 8 * i));
	}
	ASSERT_EQ(115, *target);
	/* wraps modulo 2^64 */
	*target = UINT64_MAX;
	ASSERT_OK(post_atomic(&p.a, 9, IBV_WR_ATOMIC_FETCH_AND_ADD, 64,
			      (uintptr_t)target, p.b.mr->rkey, 2, 0));
	WC_OK(p.a.scq, 9, IBV_WC_FETCH_ADD);
	ASSERT_EQ(UINT64_MAX, u64_at(p.a.buf + 64));
	ASSERT_EQ(1, *target);
	ASSERT_EQ(0, u64_at(p.b.buf + 8200));
	sv_pair_close(&p);
}

/* The device says what it enforces; the QP takes rd_atomic within it. */
SV_TEST(rdma_device_attrs)
{
	struct ibv_device_attr da;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr ia;
	struct sv_end_opts oa = rdma_opts(4096), ob = rdma_opts(4096);
	struct sv_pair p;

	oa.rd_atomic = 2;
	ob.rd_atomic = 2;
	ob.psn = 0x5678;
	sv_pair_open(&p, &oa, &ob);
	ASSERT_OK(ibv_query_device(p.a.ctx, &da));
	ASSERT_NE(IBV_ATOMIC_NONE, da.atomic_cap);
	ASSERT_GE(da.max_qp_rd_atom, 2);
	ASSERT_GE(da.max_qp_init_rd_atom, 2);
	ASSERT_GE(da.max_res_rd_atom, da.max_qp_rd_atom);
	ASSERT_OK(ibv_query_qp(
		p.a.qp, &qa,
		IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC, &ia));
	ASSERT_EQ(2, qa.max_rd_atomic);
	ASSERT_EQ(2, qa.max_dest_rd_atomic);
	/* beyond the device's limit: refused */
	qa.max_rd_atomic = (uint8_t)(da.max_qp_init_rd_atom + 1);
	if (da.max_qp_init_rd_atom < 255)
		ASSERT_EQ(EINVAL,
			  ibv_modify_qp(p.a.qp, &qa, IBV_QP_MAX_QP_RD_ATOMIC));
	sv_pair_close(&p);
}

/* ibv_reg_mr(3): remote write or atomic access needs local write. */
SV_TEST(rdma_mr_remote_write_needs_local_write)
{
	struct sv_end e;
	uint8_t *buf = aligned_alloc(PAGE, PAGE);

	ASSERT_NOT_NULL(buf);
	sv_end_open_ctx(&e);
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(e.pd, buf, PAGE, IBV_ACCESS_REMOTE_WRITE));
	ASSERT_EQ(EINVAL, errno);
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(e.pd, buf, PAGE, IBV_ACCESS_REMOTE_ATOMIC));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_OK(ibv_dealloc_pd(e.pd));
	ASSERT_OK(ibv_close_device(e.ctx));
	free(buf);
}

/*
 * An MR registered with ibv_reg_mr_iova is addressed by its iova, both
 * as a remote address and in a local SGE: bytes land at buf + (address -
 * iova), and an address outside [iova, iova + len) is out of bounds.
 */
SV_TEST(rdma_iova_mr)
{
	const uint64_t iova = 0x7e5700000000ull;
	struct sv_pair p;
	struct ibv_mr *ra, *la;
	struct ibv_sge sg;
	uint8_t *rbuf = aligned_alloc(PAGE, 65536);
	uint8_t *lbuf = aligned_alloc(PAGE, 65536);

	ASSERT_NOT_NULL(rbuf);
	ASSERT_NOT_NULL(lbuf);
	rdma_pair(&p, 4096);
	memset(rbuf, CANARY, 65536);
	sv_fill(lbuf, 65536, 81);
	ra = ibv_reg_mr_iova(p.b.pd, rbuf, 65536, iova, REMOTE_ALL);
	ASSERT_NOT_NULL(ra);
	la = ibv_reg_mr_iova(p.a.pd, lbuf, 65536, iova + 0x100000,
			     IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(la);
	/* local SGE at iova + 0x100000 + 100 = lbuf + 100 */
	sg = (struct ibv_sge){.addr = iova + 0x100000 + 100,
			      .length = 5000,
			      .lkey = la->lkey};
	ASSERT_OK(post_rdma(&p.a, 1, IBV_WR_RDMA_WRITE, &sg, 1, iova + 7,
			    ra->rkey, IBV_SEND_SIGNALED));
	WC_OK(p.a.scq, 1, IBV_WC_RDMA_WRITE);
	ASSERT_BYTES(rbuf + 7, lbuf + 100, 5000);
	ASSERT_ALL(rbuf, 7, CANARY);
	ASSERT_ALL(rbuf + 5007, 65536 - 5007, CANARY);
	/* read back by iova into the iova-addressed local buffer */
	sg.addr = iova + 0x100000 + 20000;
	ASSERT_OK(post_rdma(&p.a, 2, IBV_WR_RDMA_READ, &sg, 1, iova + 7,
			    ra->rkey, IBV_SEND_SIGNALED));
	WC_OK(p.a.scq, 2, IBV_WC_RDMA_READ);
	ASSERT_BYTES(lbuf + 20000, lbuf + 100, 5000);
	/* the buffer's own address is not an address of this MR */
	sg.addr = iova + 0x100000;
	sg.length = 8;
	ASSERT_OK(post_rdma(&p.a, 3, IBV_WR_RDMA_WRITE, &sg, 1, (uintptr_t)rbuf,
			    ra->rkey, IBV_SEND_SIGNALED));
	WC(p.a.scq, IBV_WC_REM_ACCESS_ERR, 3, -1);
	ASSERT_ALL(rbuf, 7, CANARY);
	ASSERT_OK(ibv_dereg_mr(la));
	ASSERT_OK(ibv_dereg_mr(ra));
	sv_pair_close(&p);
	free(rbuf);
	free(lbuf);
}

/* A send and a receive whose SGEs are iovas of iova MRs (issue 9: the
 * send path took an SGE's address for a pointer). */
SV_TEST(rdma_iova_mr_send_recv)
{
	const uint64_t iova = 0x3b0000000000ull;
	uint8_t *sbuf = aligned_alloc(PAGE, 8192);
	uint8_t *rbuf = aligned_alloc(PAGE, 8192);
	struct ibv_send_wr sw, *sbad;
	struct ibv_recv_wr rw, *rbad;
	struct ibv_sge ss, rs;
	struct ibv_mr *smr, *rmr;
	struct sv_pair p;
	struct ibv_wc wc;

	ASSERT_NOT_NULL(sbuf);
	ASSERT_NOT_NULL(rbuf);
	rdma_pair(&p, 4096);
	sv_fill(sbuf, 8192, 82);
	memset(rbuf, CANARY, 8192);
	smr = ibv_reg_mr_iova(p.a.pd, sbuf, 8192, iova, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(smr);
	rmr = ibv_reg_mr_iova(p.b.pd, rbuf, 8192, iova + 0x10000,
			      IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(rmr);
	rs = (struct ibv_sge){
		.addr = iova + 0x10000 + 3, .length = 5000, .lkey = rmr->lkey};
	rw = (struct ibv_recv_wr){.wr_id = 7, .sg_list = &rs, .num_sge = 1};
	ASSERT_OK(ibv_post_recv(p.b.qp, &rw, &rbad));
	ss = (struct ibv_sge){
		.addr = iova + 11, .length = 4097, .lkey = smr->lkey};
	sw = (struct ibv_send_wr){.wr_id = 8,
				  .sg_list = &ss,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED};
	ASSERT_OK(ibv_post_send(p.a.qp, &sw, &sbad));
	WC_OK(p.a.scq, 8, IBV_WC_SEND);
	wc = WC_OK(p.b.rcq, 7, IBV_WC_RECV);
	ASSERT_EQ(4097, wc.byte_len);
	ASSERT_BYTES(rbuf + 3, sbuf + 11, 4097);
	ASSERT_ALL(rbuf, 3, CANARY);
	ASSERT_ALL(rbuf + 4100, 8192 - 4100, CANARY);
	ASSERT_OK(ibv_dereg_mr(smr));
	ASSERT_OK(ibv_dereg_mr(rmr));
	sv_pair_close(&p);
	free(sbuf);
	free(rbuf);
}

/* --- ordering ------------------------------------------------------------ */

/* The target sees the written bytes when it polls the next send's
 * receive completion. */
SV_TEST(rdma_write_then_send_visible)
{
	struct sv_pair p;
	struct ibv_sge sg;

	rdma_pair(&p, BUF_LEN);
	for (int round = 0; round < 20; round++) {
		size_t len = round & 1 ? 65536 : (1 << 20) + 3;

		sv_fill(p.a.buf, len, (uint32_t)round + 100);
		ASSERT_OK(sv_end_recv(&p.b, 500 + (uint64_t)round,
				      BUF_LEN - 4096, 4096));
		sg = (struct ibv_sge){.addr = (uintptr_t)p.a.buf,
				      .length = (uint32_t)len,
				      .lkey = p.a.mr->lkey};
		ASSERT_OK(post_rdma(&p.a, 1, IBV_WR_RDMA_WRITE, &sg, 1,
				    (uintptr_t)p.b.buf, p.b.mr->rkey, 0));
		ASSERT_OK(sv_end_send(&p.a, 2, BUF_LEN - 8192, 8, 0));
		WC_OK(p.b.rcq, 500 + (uint64_t)round, IBV_WC_RECV);
		ASSERT_EQ(-1, sv_check(p.b.buf, len, (uint32_t)round + 100));
		WC_OK(p.a.scq, 1, IBV_WC_RDMA_WRITE);
		WC_OK(p.a.scq, 2, IBV_WC_SEND);
	}
	sv_pair_close(&p);
}

/* A read after a write to the same address returns the written data. */
SV_TEST(rdma_read_after_write)
{
	struct sv_pair p;
	struct ibv_sge w, r;

	rdma_pair(&p, BUF_LEN);
	memset(p.b.buf, 0, BUF_LEN);
	for (int round = 0; round < 10; round++) {
		size_t len = round & 1 ? 4097 : 300001;

		sv_fill(p.a.buf, len, (uint32_t)round + 200);
		memset(p.a.buf + (1 << 20), 0, len);
		w = (struct ibv_sge){.addr = (uintptr_t)p.a.buf,
				     .length = (uint32_t)len,
				     .lkey = p.a.mr->lkey};
		r = (struct ibv_sge){.addr = (uintptr_t)p.a.buf + (1 << 20),
				     .length = (uint32_t)len,
				     .lkey = p.a.mr->lkey};
		/* posted back to back, no wait between them */
		ASSERT_OK(post_rdma(&p.a, 1, IBV_WR_RDMA_WRITE, &w, 1,
				    (uintptr_t)p.b.buf + 64, p.b.mr->rkey,
				    IBV_SEND_SIGNALED));
		ASSERT_OK(post_rdma(&p.a, 2, IBV_WR_RDMA_READ, &r, 1,
				    (uintptr_t)p.b.buf + 64, p.b.mr->rkey,
				    IBV_SEND_SIGNALED));
		WC_OK(p.a.scq, 1, IBV_WC_RDMA_WRITE);
		WC_OK(p.a.scq, 2, IBV_WC_RDMA_READ);
		ASSERT_EQ(-1, sv_check(p.a.buf + (1 << 20), len,
				       (uint32_t)round + 200));
	}
	sv_pair_close(&p);
}

/*
 * IBV_SEND_FENCE: a send fenced behind a read gathers only after the
 * read's data has arrived, so it carries the read's bytes, not the stale
 * ones that were in the buffer when it was posted.
 */
SV_TEST(rdma_fence_send_after_read)
{
	const uint32_t len = 65536;
	struct sv_pair p;
	struct ibv_sge r;

	rdma_pair(&p, BUF_LEN);
	for (int round = 0; round < 10; round++) {
		sv_fill(p.b.buf, len, (uint32_t)round + 300); /* remote */
		sv_fill(p.a.buf, len, 1);		      /* stale */
		ASSERT_OK(
			sv_end_recv(&p.b, 600 + (uint64_t)round, 1 << 20, len));
		r = (struct ibv_sge){.addr = (uintptr_t)p.a.buf,
				     .length = len,
				     .lkey = p.a.mr->lkey};
		ASSERT_OK(post_rdma(&p.a, 1, IBV_WR_RDMA_READ, &r, 1,
				    (uintptr_t)p.b.buf, p.b.mr->rkey,
				    IBV_SEND_SIGNALED));
		ASSERT_OK(sv_end_send(&p.a, 2, 0, len,
				      IBV_SEND_SIGNALED | IBV_SEND_FENCE));
		WC_OK(p.a.scq, 1, IBV_WC_RDMA_READ);
		WC_OK(p.a.scq, 2, IBV_WC_SEND);
		WC_OK(p.b.rcq, 600 + (uint64_t)round, IBV_WC_RECV);
		ASSERT_EQ(-1, sv_check(p.b.buf + (1 << 20), len,
				       (uint32_t)round + 300));
	}
	sv_pair_close(&p);
}

/*
 * More reads and atomics than max_rd_atomic outstanding, with sends and
 * writes between them: all complete, in posting order, with the right
 * data (the requester holds back what the limit does not allow).
 */
SV_TEST(rdma_rd_atomic_limit_and_order)
{
	struct sv_end_opts oa = rdma_opts(BUF_LEN), ob = rdma_opts(BUF_LEN);
	struct sv_pair p;
	uint64_t *ctr;
	struct ibv_sge sg;
	int nrecv = 0;

	oa.rd_atomic = 2;
	ob.rd_atomic = 2;
	ob.psn = 0x5678;
	sv_pair_open(&p, &oa, &ob);
	for (int i = 0; i < 16; i++)
		sv_fill(p.b.buf + (size_t)i * 8192, 4097, (uint32_t)i + 400);
	ctr = (uint64_t *)(p.b.buf + (1 << 20));
	*ctr = 7;
	memset(p.a.buf, 0, BUF_LEN);
	for (int i = 0; i < 8; i++)
		ASSERT_OK(sv_end_recv(&p.b, 900 + (uint64_t)i,
				      (1 << 20) + 65536 + (size_t)i * 64, 64));
	/* 40 WRs: R R A S W, eight times (read, atomic, send, write) */
	for (int i = 0; i < 40; i++) {
		int kind = i % 5, k = i / 5;
		uint64_t id = 1000 + (uint64_t)i;

		switch (kind) {
		case 0:
		case 1: /* reads: 16 of them */
			sg = (struct ibv_sge){.addr = (uintptr_t)p.a.buf +
						      (size_t)(2 * k + kind) *
							      8192,
					      .length = 4097,
					      .lkey = p.a.mr->lkey};
			ASSERT_OK(
				post_rdma(&p.a, id, IBV_WR_RDMA_READ, &sg, 1,
					  (uintptr_t)p.b.buf +
						  (size_t)(2 * k + kind) * 8192,
					  p.b.mr->rkey, IBV_SEND_SIGNALED));
			break;
		case 2: /* fetch-and-add 1 */
			ASSERT_OK(post_atomic(
				&p.a, id, IBV_WR_ATOMIC_FETCH_AND_ADD,
				(1 << 20) + 8 * (size_t)k, (uintptr_t)ctr,
				p.b.mr->rkey, 1, 0));
			break;
		case 3: /* send */
			ASSERT_OK(sv_end_send(&p.a, id, (1 << 20) + 4096, 64,
					      IBV_SEND_SIGNALED));
			nrecv++;
			break;
		default: /* write */
			sg = (struct ibv_sge){.addr = (uintptr_t)p.a.buf +
						      (1 << 20) + 4096,
					      .length = 64,
					      .lkey = p.a.mr->lkey};
			ASSERT_OK(
				post_rdma(&p.a, id, IBV_WR_RDMA_WRITE, &sg, 1,
					  (uintptr_t)p.b.buf + (1 << 20) + 8192,
					  p.b.mr->rkey, IBV_SEND_SIGNALED));
		}
	}
	for (int i = 0; i < 40; i++) {
		static const int ops[] = {IBV_WC_RDMA_READ, IBV_WC_RDMA_READ,
					  IBV_WC_FETCH_ADD, IBV_WC_SEND,
					  IBV_WC_RDMA_WRITE};

		WC_OK(p.a.scq, 1000 + (uint64_t)i, ops[i % 5]);
	}
	for (int i = 0; i < 16; i++)
		ASSERT_EQ(-1, sv_check(p.a.buf + (size_t)i * 8192, 4097,
				       (uint32_t)i + 400));
	for (int k = 0; k < 8; k++)
		ASSERT_EQ(7 + k, u64_at(p.a.buf + (1 << 20) + 8 * k));
	ASSERT_EQ(15, *ctr);
	for (int i = 0; i < nrecv; i++)
		WC_OK(p.b.rcq, 900 + (uint64_t)i, IBV_WC_RECV);
	sv_pair_close(&p);
}

/* --- errors, guard pages ------------------------------------------------- */

/*
 * A target MR inside its own mapping: PROT_NONE pages before and after,
 * and GUARD_CAN bytes around the MR inside its first and last pages.
 */
struct guard {
	uint8_t *map;  /* the whole mapping */
	size_t maplen; /* its length */
	uint8_t *data; /* the accessible pages */
	size_t datalen;
	uint8_t *at; /* the MR's first byte */
	size_t len;  /* the MR's length */
	struct ibv_mr *mr;
};

static void guard_open(struct guard *g, struct ibv_pd *pd, size_t len,
		       int access)
{
	g->datalen = (len + 128 + PAGE - 1) / PAGE * PAGE;
	g->maplen = g->datalen + 2 * PAGE;
	g->map = mmap(NULL, g->maplen, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(g->map != MAP_FAILED);
	ASSERT_OK(mprotect(g->map, PAGE, PROT_NONE));
	ASSERT_OK(mprotect(g->map + PAGE + g->datalen, PAGE, PROT_NONE));
	g->data = g->map + PAGE;
	memset(g->data, GUARD_CAN, g->datalen);
	g->at = g->data + 64;
	g->len = len;
	memset(g->at, 0, len);
	g->mr = ibv_reg_mr(pd, g->at, len, access);
	ASSERT_NOT_NULL(g->mr);
}

/* Nothing written outside the MR; inside, all `v`. */
static void guard_check(const char *file, int line, struct guard *g, uint8_t v)
{
	all_bytes(file, line, g->data, 64, GUARD_CAN);
	all_bytes(file, line, g->at + g->len, g->datalen - 64 - g->len,
		  GUARD_CAN);
	all_bytes(file, line, g->at, g->len, v);
}
#define GUARD_CHECK(g, v) guard_check(__FILE__, __LINE__, g, v)

static void guard_close(struct guard *g)
{
	if (g->mr)
		ASSERT_OK(ibv_dereg_mr(g->mr));
	ASSERT_OK(munmap(g->map, g->maplen));
}

enum err_op { E_WRITE, E_WRITE_IMM, E_READ, E_CMP_SWP, E_FETCH_ADD };

struct err_case {
	enum err_op op;
	int mr_access;	   /* the target MR's access; 0: REMOTE_ALL */
	int qp_access;	   /* the target QP's; 0: QP_REMOTE_ALL */
	bool other_pd;	   /* target MR in another PD of b's context */
	bool dereg;	   /* rkey of an MR deregistered before the post */
	uint32_t rkey_xor; /* forge the rkey */
	long off;	   /* remote address = MR start + off */
	uint32_t len;	   /* bytes (atomics: 8) */
	enum ibv_wc_status want;
};

/* Posts c's operation from a against g (wr_id 1). */
static void post_err_op(struct sv_pair *p, const struct err_case *c,
			struct guard *g, uint32_t rkey)
{
	uint64_t raddr = (uintptr_t)g->at + (uint64_t)c->off;
	struct ibv_sge sg = {.addr = (uintptr_t)p->a.buf,
			     .length = c->len,
			     .lkey = p->a.mr->lkey};

	switch (c->op) {
	case E_WRITE:
	case E_WRITE_IMM:
	case E_READ:
		ASSERT_OK(post_rdma(&p->a, 1,
				    c->op == E_READ ? IBV_WR_RDMA_READ
				    : c->op == E_WRITE
					    ? IBV_WR_RDMA_WRITE
					    : IBV_WR_RDMA_WRITE_WITH_IMM,
				    &sg, 1, raddr, rkey, IBV_SEND_SIGNALED));
		break;
	case E_CMP_SWP:
		ASSERT_OK(post_atomic(&p->a, 1, IBV_WR_ATOMIC_CMP_AND_SWP, 0,
				      raddr, rkey, 0, 0x4242424242424242ull));
		break;
	case E_FETCH_ADD:
		ASSERT_OK(post_atomic(&p->a, 1, IBV_WR_ATOMIC_FETCH_AND_ADD, 0,
				      raddr, rkey, 0x4242, 0));
		break;
	}
}

/*
 * The IBA's class C responder errors (rxe: do_class_ac_error): the
 * requester completes the WR with the NAK's status (REM_ACCESS_ERR for an
 * rkey, bounds or access violation, REM_INV_REQ_ERR for a misaligned
 * atomic), its QP goes to ERROR and the WRs behind it are flushed; the
 * responder's QP goes to ERROR too (its receives flushed).  Not a byte
 * moves: the target MR and its neighbours are unchanged, and so is the
 * requester's buffer for a read or an atomic.
 */
static void error_case(const struct err_case *c)
{
	struct sv_end_opts oa = rdma_opts(65536), ob = rdma_opts(65536);
	struct ibv_pd *pd2 = NULL;
	struct sv_pair p;
	struct guard g;
	uint32_t rkey;

	ob.psn = 0x5678;
	if (c->qp_access)
		ob.qp_access = c->qp_access == -1 ? 0 : c->qp_access;
	sv_pair_open(&p, &oa, &ob);
	if (c->other_pd) {
		pd2 = ibv_alloc_pd(p.b.ctx);
		ASSERT_NOT_NULL(pd2);
	}
	guard_open(&g, pd2 ? pd2 : p.b.pd, 8192 + 24,
		   c->mr_access ? c->mr_access : REMOTE_ALL);
	rkey = g.mr->rkey ^ c->rkey_xor;
	if (c->dereg) {
		/* used once first, so any cached translation goes stale */
		struct ibv_sge sg = {.addr = (uintptr_t)p.a.buf,
				     .length = 8,
				     .lkey = p.a.mr->lkey};

		memset(p.a.buf, 0, 8);
		ASSERT_OK(post_rdma(&p.a, 9, IBV_WR_RDMA_WRITE, &sg, 1,
				    (uintptr_t)g.at, rkey, IBV_SEND_SIGNALED));
		WC_OK(p.a.scq, 9, IBV_WC_RDMA_WRITE);
		ASSERT_OK(ibv_dereg_mr(g.mr));
		g.mr = NULL;
	}
	ASSERT_OK(sv_end_recv(&p.b, 100, 0, 4096));
	ASSERT_OK(sv_end_recv(&p.b, 101, 4096, 4096));
	memset(p.a.buf, 0x77, 65536);
	post_err_op(&p, c, &g, rkey);
	ASSERT_OK(sv_end_send(&p.a, 2, 8192, 16, IBV_SEND_SIGNALED));
	{
		struct ibv_sge sg = {.addr = (uintptr_t)p.a.buf,
				     .length = 8,
				     .lkey = p.a.mr->lkey};

		ASSERT_OK(post_rdma(&p.a, 3, IBV_WR_RDMA_WRITE, &sg, 1,
				    (uintptr_t)p.b.buf, p.b.mr->rkey,
				    IBV_SEND_SIGNALED));
	}
	WC(p.a.scq, c->want, 1, -1);
	WC(p.a.scq, IBV_WC_WR_FLUSH_ERR, 2, -1);
	WC(p.a.scq, IBV_WC_WR_FLUSH_ERR, 3, -1);
	ASSERT_EQ(IBV_QPS_ERR, sv_end_state(&p.a));
	if (c->op == E_WRITE_IMM) {
		/* the failed write with immediate took receive 100: it
		 * completes in error (rxe: with the NAK's status) */
		struct ibv_wc wc;

		WAIT_WC(p.b.rcq, &wc, SV_WC_TIMEOUT_MS);
		ASSERT_EQ(100, wc.wr_id);
		ASSERT_NE(IBV_WC_SUCCESS, wc.status);
	} else {
		WC(p.b.rcq, IBV_WC_WR_FLUSH_ERR, 100, -1);
	}
	WC(p.b.rcq, IBV_WC_WR_FLUSH_ERR, 101, -1);
	ASSERT_EQ(IBV_QPS_ERR, sv_end_state(&p.b));
	GUARD_CHECK(&g, 0);
	ASSERT_ALL(p.a.buf, 65536, 0x77);
	ASSERT_ALL(p.b.buf, 8, 0); /* the flushed write did not land */
	guard_close(&g);
	if (pd2)
		ASSERT_OK(ibv_dealloc_pd(pd2));
	sv_pair_close(&p);
}

SV_TEST(rdma_err_bad_rkey)
{
	static const enum err_op ops[] = {E_WRITE, E_WRITE_IMM, E_READ,
					  E_CMP_SWP, E_FETCH_ADD};

	for (int i = 0; i < 5; i++)
		error_case(&(struct err_case){.op = ops[i],
					      .rkey_xor = 0x5a5a5a5a,
					      .len = 64,
					      .want = IBV_WC_REM_ACCESS_ERR});
}

/* One byte past the end, one byte before the start, and a length
 * larger than the MR: each refused whole. */
SV_TEST(rdma_err_out_of_bounds)
{
	const long len = 8192 + 24;
	static const enum err_op ops[] = {E_WRITE, E_READ};

	for (int i = 0; i < 2; i++) {
		error_case(&(struct err_case){.op = ops[i],
					      .off = len - 7,
					      .len = 8,
					      .want = IBV_WC_REM_ACCESS_ERR});
		error_case(&(struct err_case){.op = ops[i],
					      .off = -1,
					      .len = 4,
					      .want = IBV_WC_REM_ACCESS_ERR});
		error_case(&(struct err_case){.op = ops[i],
					      .off = 0,
					      .len = (uint32_t)len + 1,
					      .want = IBV_WC_REM_ACCESS_ERR});
		error_case(&(struct err_case){.op = ops[i],
					      .off = 4096,
					      .len = 40000,
					      .want = IBV_WC_REM_ACCESS_ERR});
	}
	error_case(&(struct err_case){.op = E_FETCH_ADD,
				      .off = len,
				      .len = 8,
				      .want = IBV_WC_REM_ACCESS_ERR});
	error_case(&(struct err_case){.op = E_CMP_SWP,
				      .off = -8,
				      .len = 8,
				      .want = IBV_WC_REM_ACCESS_ERR});
}

SV_TEST(rdma_err_mr_without_remote_write)
{
	const int ro = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC;

	error_case(&(struct err_case){.op = E_WRITE,
				      .mr_access = ro,
				      .len = 64,
				      .want = IBV_WC_REM_ACCESS_ERR});
	error_case(&(struct err_case){.op = E_WRITE_IMM,
				      .mr_access = ro,
				      .len = 64,
				      .want = IBV_WC_REM_ACCESS_ERR});
}

SV_TEST(rdma_err_mr_without_remote_read)
{
	error_case(&(struct err_case){.op = E_READ,
				      .mr_access = IBV_ACCESS_LOCAL_WRITE |
						   IBV_ACCESS_REMOTE_WRITE |
						   IBV_ACCESS_REMOTE_ATOMIC,
				      .len = 64,
				      .want = IBV_WC_REM_ACCESS_ERR});
}

SV_TEST(rdma_err_mr_without_remote_atomic)
{
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		       IBV_ACCESS_REMOTE_READ;

	error_case(&(struct err_case){.op = E_FETCH_ADD,
				      .mr_access = rw,
				      .len = 8,
				      .want = IBV_WC_REM_ACCESS_ERR});
	error_case(&(struct err_case){.op = E_CMP_SWP,
				      .mr_access = rw,
				      .len = 8,
				      .want = IBV_WC_REM_ACCESS_ERR});
}

/*
 * The target QP's own access flags (INIT's qp_access_flags) gate too: an
 * operation the QP does not enable is an invalid request, not an access
 * violation (rxe: check_op_valid -> RESPST_ERR_UNSUPPORTED_OPCODE, class
 * C, NAK Invalid Request).
 */
SV_TEST(rdma_err_qp_without_remote_access)
{
	error_case(&(struct err_case){.op = E_WRITE,
				      .qp_access = IBV_ACCESS_REMOTE_READ,
				      .len = 64,
				      .want = IBV_WC_REM_INV_REQ_ERR});
	error_case(&(struct err_case){.op = E_READ,
				      .qp_access = IBV_ACCESS_REMOTE_WRITE,
				      .len = 64,
				      .want = IBV_WC_REM_INV_REQ_ERR});
	error_case(&(struct err_case){.op = E_FETCH_ADD,
				      .qp_access = -1, /* none */
				      .len = 8,
				      .want = IBV_WC_REM_INV_REQ_ERR});
}

/* IBA: an atomic's address must be 8-byte aligned; the responder NAKs
 * with Invalid Request (rxe: RESPST_ERR_MISALIGNED_ATOMIC). */
SV_TEST(rdma_err_misaligned_atomic)
{
	error_case(&(struct err_case){.op = E_FETCH_ADD,
				      .off = 4,
				      .len = 8,
				      .want = IBV_WC_REM_INV_REQ_ERR});
	error_case(&(struct err_case){.op = E_CMP_SWP,
				      .off = 1,
				      .len = 8,
				      .want = IBV_WC_REM_INV_REQ_ERR});
}

SV_TEST(rdma_err_deregistered_rkey)
{
	static const enum err_op ops[] = {E_WRITE, E_READ, E_FETCH_ADD};

	for (int i = 0; i < 3; i++)
		error_case(&(struct err_case){.op = ops[i],
					      .dereg = true,
					      .len = 8,
					      .want = IBV_WC_REM_ACCESS_ERR});
}

SV_TEST(rdma_err_mr_in_other_pd)
{
	static const enum err_op ops[] = {E_WRITE, E_READ, E_CMP_SWP};

	for (int i = 0; i < 3; i++)
		error_case(&(struct err_case){.op = ops[i],
					      .other_pd = true,
					      .len = 8,
					      .want = IBV_WC_REM_ACCESS_ERR});
}

/* --- ibv_qp_ex ----------------------------------------------------------- */

SV_TEST(rdma_qp_ex_all_opcodes)
{
	const uint64_t ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
			     IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
			     IBV_QP_EX_WITH_RDMA_READ |
			     IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	struct sv_end_opts ob = rdma_opts(65536);
	struct ibv_qp_init_attr_ex qa;
	struct ibv_qp_ex *qpx;
	struct ibv_sge rsg[2];
	struct sv_end a, b;
	uint8_t inl[33];
	uint64_t *ctr;
	struct ibv_wc wc;

	memset(&a, 0, sizeof(a));
	a.o = rdma_opts(65536);
	sv_end_open_ctx(&a);
	a.buf = aligned_alloc(PAGE, 65536);
	ASSERT_NOT_NULL(a.buf);
	memset(a.buf, 0, 65536);
	a.mr = ibv_reg_mr(a.pd, a.buf, 65536, REMOTE_ALL);
	ASSERT_NOT_NULL(a.mr);
	a.scq = a.rcq = ibv_create_cq(a.ctx, 64, NULL, NULL, 0);
	ASSERT_NOT_NULL(a.scq);
	qa = (struct ibv_qp_init_attr_ex){
		.send_cq = a.scq,
		.recv_cq = a.scq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 16,
			.max_recv_wr = 16,
			.max_send_sge = 2,
			.max_recv_sge = 2,
			.max_inline_data = 64},
		.comp_mask =
			IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = a.pd,
		.send_ops_flags = ops,
	};
	a.qp = ibv_create_qp_ex(a.ctx, &qa);
	ASSERT_NOT_NULL(a.qp);
	qpx = ibv_qp_to_qp_ex(a.qp);
	ASSERT_NOT_NULL(qpx);
	ob.psn = 0x5678;
	sv_end_open(&b, &ob);
	sv_end_connect(&a, b.qp->qp_num, b.o.psn);
	sv_end_connect(&b, a.qp->qp_num, a.o.psn);

	memset(b.buf, CANARY, 65536);
	ctr = (uint64_t *)(b.buf + 32768);
	*ctr = 1000;
	sv_fill(b.buf + 16384, 5001, 77); /* read source */
	sv_fill(a.buf, 4097, 76);	  /* write source */
	sv_fill(inl, sizeof(inl), 75);
	ASSERT_OK(sv_end_recv(&b, 50, 40960, 4096));
	rsg[0] = (struct ibv_sge){.addr = (uintptr_t)a.buf + 8192,
				  .length = 1000,
				  .lkey = a.mr->lkey};
	rsg[1] = (struct ibv_sge){.addr = (uintptr_t)a.buf + 12288,
				  .length = 4001,
				  .lkey = a.mr->lkey};

	ibv_wr_start(qpx);
	qpx->wr_flags = IBV_SEND_SIGNALED;
	qpx->wr_id = 1;
	ibv_wr_rdma_write(qpx, b.mr->rkey, (uintptr_t)b.buf + 1);
	ibv_wr_set_sge(qpx, a.mr->lkey, (uintptr_t)a.buf, 4097);
	qpx->wr_id = 2;
	ibv_wr_rdma_write_imm(qpx, b.mr->rkey, (uintptr_t)b.buf + 8192,
			      htonl(0xfeed));
	ibv_wr_set_sge(qpx, a.mr->lkey, (uintptr_t)a.buf, 7);
	qpx->wr_id = 3;
	ibv_wr_rdma_read(qpx, b.mr->rkey, (uintptr_t)b.buf + 16384);
	ibv_wr_set_sge_list(qpx, 2, rsg);
	qpx->wr_id = 4;
	ibv_wr_atomic_cmp_swp(qpx, b.mr->rkey, (uintptr_t)ctr, 1000, 2000);
	ibv_wr_set_sge(qpx, a.mr->lkey, (uintptr_t)a.buf + 20480, 8);
	qpx->wr_id = 5;
	ibv_wr_atomic_fetch_add(qpx, b.mr->rkey, (uintptr_t)ctr, 3);
	ibv_wr_set_sge(qpx, a.mr->lkey, (uintptr_t)a.buf + 20488, 8);
	qpx->wr_id = 6;
	qpx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_rdma_write(qpx, b.mr->rkey, (uintptr_t)b.buf + 24576);
	ibv_wr_set_inline_data(qpx, inl, sizeof(inl));
	ASSERT_OK(ibv_wr_complete(qpx));
	memset(inl, 0, sizeof(inl));

	WC_OK(a.scq, 1, IBV_WC_RDMA_WRITE);
	WC_OK(a.scq, 2, IBV_WC_RDMA_WRITE);
	WC_OK(a.scq, 3, IBV_WC_RDMA_READ);
	WC_OK(a.scq, 4, IBV_WC_COMP_SWAP);
	WC_OK(a.scq, 5, IBV_WC_FETCH_ADD);
	WC_OK(a.scq, 6, IBV_WC_RDMA_WRITE);
	wc = WC_OK(b.rcq, 50, IBV_WC_RECV_RDMA_WITH_IMM);
	ASSERT_EQ(htonl(0xfeed), wc.imm_data);
	ASSERT_EQ(7, wc.byte_len);

	ASSERT_EQ(CANARY, b.buf[0]);
	ASSERT_EQ(-1, sv_check(b.buf + 1, 4097, 76));
	ASSERT_EQ(CANARY, b.buf[4098]);
	ASSERT_EQ(-1, sv_check(b.buf + 8192, 7, 76));
	ASSERT_EQ(CANARY, b.buf[8199]);
	ASSERT_BYTES(a.buf + 8192, b.buf + 16384, 1000);
	ASSERT_BYTES(a.buf + 12288, b.buf + 16384 + 1000, 4001);
	ASSERT_EQ(0, a.buf[8192 + 1000]);
	ASSERT_EQ(0, a.buf[12288 + 4001]);
	ASSERT_EQ(1000, u64_at(a.buf + 20480));
	ASSERT_EQ(2000, u64_at(a.buf + 20488));
	ASSERT_EQ(2003, *ctr);
	ASSERT_EQ(-1, sv_check(b.buf + 24576, 33, 75));
	ASSERT_EQ(CANARY, b.buf[24576 + 33]);
	sv_end_close(&a);
	sv_end_close(&b);
}

/* --- across processes ---------------------------------------------------- */

/* What one end tells the other through a pipe. */
struct xinfo {
	uint32_t qpn, psn;
	uint64_t addr; /* the target's buffer */
	uint32_t rkey;
	uint32_t len;
};

static void xwrite(int fd, const void *p, size_t n)
{
	ASSERT_EQ((ssize_t)n, write(fd, p, n));
}

static void xread(int fd, void *p, size_t n)
{
	ASSERT_EQ((ssize_t)n, read(fd, p, n));
}

static void pipe_pair(int up[2], int down[2])
{
	ASSERT_OK(pipe(up));
	ASSERT_OK(pipe(down));
}

static char *num(char *buf, int v)
{
	snprintf(buf, 16, "%d", v);
	return buf;
}

#define FADD_ITERS 3000

/* One thread of an initiator: FADD_ITERS fetch-and-add 1, one at a time;
 * each old value larger than the one before. */
static void *fadd_thread(void *arg)
{
	struct sv_end *e = arg;
	struct xinfo *t = (struct xinfo *)(e->buf + 2048);
	uint64_t last = 0;

	for (int i = 0; i < FADD_ITERS; i++) {
		struct ibv_wc wc;
		uint64_t v;

		if (post_atomic(e, (uint64_t)i, IBV_WR_ATOMIC_FETCH_AND_ADD, 0,
				t->addr, t->rkey, 1, 0))
			return (void *)1;
		if (!sv_wc_poll(e->scq, &wc, 20000) ||
		    wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)i)
			return (void *)2;
		v = u64_at(e->buf);
		if (i && v <= last)
			return (void *)3;
		last = v;
	}
	return NULL;
}

/* An initiator process: two QPs, a thread each, against the target's
 * counter.  args: up-fd down-fd. */
SV_HELPER(fadd_initiator)
{
	struct sv_end e[2];
	pthread_t th[2];
	int up, down, bad = 0;

	ASSERT_EQ(2, argc);
	up = atoi(argv[0]);
	down = atoi(argv[1]);
	for (int i = 0; i < 2; i++) {
		struct xinfo me;

		sv_end_open(&e[i], NULL);
		me = (struct xinfo){.qpn = e[i].qp->qp_num, .psn = e[i].o.psn};
		xwrite(up, &me, sizeof(me));
	}
	for (int i = 0; i < 2; i++) {
		struct xinfo t;

		xread(down, &t, sizeof(t));
		memcpy(e[i].buf + 2048, &t, sizeof(t));
		sv_end_connect(&e[i], t.qpn, t.psn);
	}
	for (int i = 0; i < 2; i++)
		ASSERT_OK(pthread_create(&th[i], NULL, fadd_thread, &e[i]));
	for (int i = 0; i < 2; i++) {
		void *r;

		ASSERT_OK(pthread_join(th[i], &r));
		if (r) {
			fprintf(stderr, "thread %d failed: %ld\n", i, (long)r);
			bad = 1;
		}
	}
	for (int i = 0; i < 2; i++)
		sv_end_close(&e[i]);
	return bad;
}

/*
 * Two processes x two threads fetch-and-add 1 on one 8-byte counter in
 * this (a third) process's MR: it ends exact.
 */
SV_TEST(rdma_fetch_add_two_procs_two_threads)
{
	struct sv_end t, tq[4];
	struct sv_proc h[2];
	int up[2][2], down[2][2];
	uint64_t *ctr;
	struct sv_end_opts o = rdma_opts(4096);

	/* the first QP is t's own; three more on its PD and CQs */
	sv_end_open(&t, &o);
	ctr = (uint64_t *)(t.buf + 64);
	*ctr = 0;
	for (int i = 0; i < 4; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = t.scq,
			.recv_cq = t.rcq,
			.qp_type = IBV_QPT_RC,
			.sq_sig_all = 1,
			.cap = {.max_send_wr = 4,
				.max_recv_wr = 4,
				.max_send_sge = 1,
				.max_recv_sge = 1},
		};

		tq[i] = t;
		if (i) {
			tq[i].qp = ibv_create_qp(t.pd, &ia);
			ASSERT_NOT_NULL(tq[i].qp);
		}
	}
	for (int k = 0; k < 2; k++) {
		char a0[16], a1[16];
		char *args[] = {a0, a1, NULL};

		pipe_pair(up[k], down[k]);
		num(a0, up[k][1]);
		num(a1, down[k][0]);
		sv_proc_start_helper(&h[k], "fadd_initiator", args, NULL);
		close(up[k][1]);
		close(down[k][0]);
	}
	for (int k = 0; k < 2; k++) {
		for (int j = 0; j < 2; j++) {
			struct sv_end *q = &tq[2 * k + j];
			struct xinfo peer, me;

			xread(up[k][0], &peer, sizeof(peer));
			sv_end_connect(q, peer.qpn, peer.psn);
			me = (struct xinfo){.qpn = q->qp->qp_num,
					    .psn = q->o.psn,
					    .addr = (uintptr_t)ctr,
					    .rkey = t.mr->rkey,
					    .len = 8};
			xwrite(down[k][1], &me, sizeof(me));
		}
	}
	for (int k = 0; k < 2; k++) {
		sv_proc_wait(&h[k], 50000);
		if (h[k].code)
			fprintf(stderr, "initiator %d:\n%s%s", k, h[k].out,
				h[k].err);
		ASSERT_EQ(0, h[k].code);
		sv_proc_free(&h[k]);
	}
	ASSERT_EQ(4 * FADD_ITERS, *ctr);
	ASSERT_EQ(0, u64_at(t.buf + 56));
	ASSERT_EQ(0, u64_at(t.buf + 72));
	for (int i = 1; i < 4; i++)
		ASSERT_OK(ibv_destroy_qp(tq[i].qp));
	sv_end_close(&t);
}

/* The target's regions (offsets in its buffer). */
#define T_WRITE	  0	/* 4096 bytes the initiator writes (seed 22) */
#define T_UNTOUCH 4096	/* 4096 bytes nobody writes: zero */
#define T_READ	  8192	/* 4096 bytes the initiator reads (seed 21) */
#define T_WARM	  12288 /* the warm-up write */
#define T_CTR	  16384 /* counter: 1000, then three fetch-and-add 7 */
#define T_LEN	  65536

/*
 * A target process: registers T_LEN bytes (anonymous memory, a
 * MAP_SHARED file mapping with "file", or device memory with "dm": a
 * zero-based MR, its bytes set and read back by ibv_memcpy_to/from_dm),
 * connects, says ready, then only waits for 'V' on its pipe and checks
 * what the initiator left.  args: up-fd down-fd anon|file|dm.
 */
SV_HELPER(rdma_target)
{
	struct sv_end_opts o = rdma_opts(4096);
	struct sv_end e;
	struct xinfo me, peer;
	struct ibv_mr *mr;
	struct ibv_dm *dm = NULL;
	uint8_t *buf;
	int up, down, bad = 0;
	char c = 'R';

	ASSERT_EQ(3, argc);
	up = atoi(argv[0]);
	down = atoi(argv[1]);
	sv_end_open(&e, &o);
	if (!strcmp(argv[2], "file")) {
		char path[64];
		int fd;

		snprintf(path, sizeof(path), "/tmp/svrdma.%d", getpid());
		fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
		ASSERT_TRUE(fd >= 0);
		unlink(path);
		ASSERT_OK(ftruncate(fd, T_LEN));
		buf = mmap(NULL, T_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
			   0);
		ASSERT_TRUE(buf != MAP_FAILED);
		close(fd);
	} else {
		buf = mmap(NULL, T_LEN, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		ASSERT_TRUE(buf != MAP_FAILED);
	}
	memset(buf, 0, T_LEN);
	sv_fill(buf + T_READ, 4096, 21);
	memcpy(buf + T_CTR, &(uint64_t){1000}, 8);
	if (!strcmp(argv[2], "dm")) {
		dm = ibv_alloc_dm(e.ctx,
				  &(struct ibv_alloc_dm_attr){.length = T_LEN});
		ASSERT_NOT_NULL(dm);
		ASSERT_OK(ibv_memcpy_to_dm(dm, 0, buf, T_LEN));
		mr = ibv_reg_dm_mr(e.pd, dm, 0, T_LEN,
				   REMOTE_ALL | IBV_ACCESS_ZERO_BASED);
	} else {
		mr = ibv_reg_mr(e.pd, buf, T_LEN, REMOTE_ALL);
	}
	ASSERT_NOT_NULL(mr);
	me = (struct xinfo){.qpn = e.qp->qp_num,
			    .psn = e.o.psn,
			    .addr = dm ? 0 : (uintptr_t)buf,
			    .rkey = mr->rkey,
			    .len = T_LEN};
	xwrite(up, &me, sizeof(me));
	xread(down, &peer, sizeof(peer));
	sv_end_connect(&e, peer.qpn, peer.psn);
	xwrite(up, &c, 1);
	if (read(down, &c, 1) != 1 || c != 'V')
		return 3;
	if (dm)
		ASSERT_OK(ibv_memcpy_from_dm(buf, dm, 0, T_LEN));
	if (sv_check(buf + T_WRITE, 4096, 22) != -1)
		bad |= 4;
	for (int i = 0; i < 4096; i++)
		if (buf[T_UNTOUCH + i])
			bad |= 8;
	if (u64_at(buf + T_CTR) != 1021)
		bad |= 16;
	if (sv_check(buf + T_READ, 4096, 21) != -1)
		bad |= 32;
	if (bad)
		fprintf(stderr, "target: bad 0x%x\n", bad);
	ASSERT_OK(ibv_dereg_mr(mr));
	if (dm)
		ASSERT_OK(ibv_free_dm(dm));
	sv_end_close(&e);
	return bad;
}

struct remote_target {
	struct sv_proc h;
	int up, down;
	struct xinfo t;
};

static void target_start(struct remote_target *r, struct sv_end *a,
			 const char *mode)
{
	int up[2], down[2];
	char a0[16], a1[16];
	char *args[] = {a0, a1, (char *)mode, NULL};
	struct xinfo me;
	char c;

	pipe_pair(up, down);
	num(a0, up[1]);
	num(a1, down[0]);
	sv_proc_start_helper(&r->h, "rdma_target", args, NULL);
	close(up[1]);
	close(down[0]);
	r->up = up[0];
	r->down = down[1];
	xread(r->up, &r->t, sizeof(r->t));
	me = (struct xinfo){.qpn = a->qp->qp_num, .psn = a->o.psn};
	xwrite(r->down, &me, sizeof(me));
	sv_end_connect(a, r->t.qpn, r->t.psn);
	xread(r->up, &c, 1);
	ASSERT_EQ('R', c);
}

/* One warm-up write, so the rkey has been used once before the stop. */
static void warm_up(struct sv_end *a, struct remote_target *r)
{
	struct ibv_sge sg = {.addr = (uintptr_t)a->buf + 60000,
			     .length = 64,
			     .lkey = a->mr->lkey};

	ASSERT_OK(post_rdma(a, 99, IBV_WR_RDMA_WRITE, &sg, 1,
			    r->t.addr + T_WARM, r->t.rkey, IBV_SEND_SIGNALED));
	WC_OK(a->scq, 99, IBV_WC_RDMA_WRITE);
}

static void stop(pid_t pid)
{
	int st;

	ASSERT_OK(kill(pid, SIGSTOP));
	ASSERT_EQ(pid, waitpid(pid, &st, WUNTRACED));
	ASSERT_TRUE(WIFSTOPPED(st));
}

/* The write, the read and three fetch-and-adds (wr_ids 1..5). */
static void post_five(struct sv_end *a, struct remote_target *r)
{
	struct ibv_sge w = {
		.addr = (uintptr_t)a->buf, .length = 4096, .lkey = a->mr->lkey};
	struct ibv_sge rd = {.addr = (uintptr_t)a->buf + 8192,
			     .length = 4096,
			     .lkey = a->mr->lkey};

	sv_fill(a->buf, 4096, 22);
	memset(a->buf + 8192, 0, 4096);
	ASSERT_OK(post_rdma(a, 1, IBV_WR_RDMA_WRITE, &w, 1, r->t.addr + T_WRITE,
			    r->t.rkey, IBV_SEND_SIGNALED));
	ASSERT_OK(post_rdma(a, 2, IBV_WR_RDMA_READ, &rd, 1, r->t.addr + T_READ,
			    r->t.rkey, IBV_SEND_SIGNALED));
	for (int i = 0; i < 3; i++)
		ASSERT_OK(post_atomic(a, 3 + (uint64_t)i,
				      IBV_WR_ATOMIC_FETCH_AND_ADD,
				      16384 + 8 * (size_t)i, r->t.addr + T_CTR,
				      r->t.rkey, 7, 0));
}

static void check_five(struct sv_end *a)
{
	ASSERT_EQ(-1, sv_check(a->buf + 8192, 4096, 21));
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(1000 + 7 * i, u64_at(a->buf + 16384 + 8 * i));
}

static void target_verify(struct remote_target *r)
{
	char c = 'V';

	xwrite(r->down, &c, 1);
	sv_proc_wait(&r->h, 30000);
	if (r->h.code)
		fprintf(stderr, "target:\n%s%s", r->h.out, r->h.err);
	ASSERT_EQ(0, r->h.code);
	sv_proc_free(&r->h);
	close(r->up);
	close(r->down);
}

/*
 * Acceptance 3: the target does nothing.  Writes, reads and atomics
 * complete at the initiator while the target process is stopped; once
 * continued, it finds the bytes there.
 */
SV_TEST(rdma_target_stopped_completes)
{
	sv_test_needs_shm("one-sided operations the initiator does itself");
	struct sv_end_opts o = rdma_opts(65536);
	struct remote_target r;
	struct sv_end a;
	static const int ops[] = {IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ,
				  IBV_WC_FETCH_ADD, IBV_WC_FETCH_ADD,
				  IBV_WC_FETCH_ADD};

	sv_end_open(&a, &o);
	target_start(&r, &a, "anon");
	warm_up(&a, &r);
	stop(r.h.pid);
	post_five(&a, &r);
	for (int i = 0; i < 5; i++)
		WC_OK(a.scq, 1 + (uint64_t)i, ops[i]);
	check_five(&a);
	ASSERT_OK(kill(r.h.pid, SIGCONT));
	target_verify(&r);
	sv_end_close(&a);
}

/* The same with the target's MR on device memory: it is on the arena
 * from allocation, so the initiator does all five itself. */
SV_TEST(rdma_target_stopped_completes_on_dm)
{
	sv_test_needs_shm("one-sided operations the initiator does itself");
	struct sv_end_opts o = rdma_opts(65536);
	struct remote_target r;
	struct sv_end a;
	static const int ops[] = {IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ,
				  IBV_WC_FETCH_ADD, IBV_WC_FETCH_ADD,
				  IBV_WC_FETCH_ADD};

	sv_end_open(&a, &o);
	target_start(&r, &a, "dm");
	warm_up(&a, &r);
	stop(r.h.pid);
	post_five(&a, &r);
	for (int i = 0; i < 5; i++)
		WC_OK(a.scq, 1 + (uint64_t)i, ops[i]);
	check_five(&a);
	ASSERT_OK(kill(r.h.pid, SIGCONT));
	target_verify(&r);
	sv_end_close(&a);
}

/*
 * The fallback: the target's buffer is a shared file mapping (cannot be
 * re-backed).  Posted while the target is stopped, the operations may
 * wait; once it runs they all complete, with the same bytes.
 */
SV_TEST(rdma_target_stopped_file_mapping)
{
	struct sv_end_opts o = rdma_opts(65536);
	struct remote_target r;
	struct sv_end a;
	struct ibv_wc wc;
	int done = 0;
	static const int ops[] = {IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ,
				  IBV_WC_FETCH_ADD, IBV_WC_FETCH_ADD,
				  IBV_WC_FETCH_ADD};

	sv_end_open(&a, &o);
	target_start(&r, &a, "file");
	warm_up(&a, &r);
	stop(r.h.pid);
	post_five(&a, &r);
	/* a bounded look while it is stopped: whatever completes is right */
	while (done < 5 && sv_wc_poll(a.scq, &wc, 100)) {
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ(1 + done, wc.wr_id);
		ASSERT_EQ(ops[done], wc.opcode);
		done++;
	}
	printf("%d of 5 completed while the target was stopped\n", done);
	ASSERT_OK(kill(r.h.pid, SIGCONT));
	for (; done < 5; done++)
		WC_OK(a.scq, 1 + (uint64_t)done, ops[done]);
	check_five(&a);
	target_verify(&r);
	sv_end_close(&a);
}

/*
 * fork after registration, as with real verbs: the child's writes to the
 * registered buffer are its own; the peer reads the parent's bytes,
 * before and after the child exits, and sees the parent's later writes.
 */
SV_TEST(rdma_fork_after_registration)
{
	struct sv_pair p;
	struct ibv_sge sg;
	int down[2], up[2], st;
	pid_t pid;
	char c;

	rdma_pair(&p, 65536);
	sv_fill(p.b.buf, 65536, 61);
	sg = (struct ibv_sge){.addr = (uintptr_t)p.a.buf,
			      .length = 65536,
			      .lkey = p.a.mr->lkey};
	/* used once before the fork */
	ASSERT_OK(post_rdma(&p.a, 1, IBV_WR_RDMA_READ, &sg, 1,
			    (uintptr_t)p.b.buf, p.b.mr->rkey,
			    IBV_SEND_SIGNALED));
	WC_OK(p.a.scq, 1, IBV_WC_RDMA_READ);
	ASSERT_EQ(-1, sv_check(p.a.buf, 65536, 61));

	ASSERT_OK(pipe(down));
	ASSERT_OK(pipe(up));
	fflush(NULL);
	pid = fork();
	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		/* the child touches nothing but memory and its pipes */
		close(down[1]);
		close(up[0]);
		alarm(30);
		memset(p.b.buf, 0xcc, 65536);
		if (write(up[1], "w", 1) != 1)
			_exit(2);
		while (read(down[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(down[0]);
	close(up[1]);
	/* the child has written (or died trying, if the range is not
	 * inherited at all: MADV_DONTFORK) */
	if (read(up[0], &c, 1) != 1)
		fprintf(stderr, "child did not write: range not inherited\n");
	ASSERT_EQ(-1, sv_check(p.b.buf, 65536, 61)); /* ours, locally */
	memset(p.a.buf, 0, 65536);
	ASSERT_OK(post_rdma(&p.a, 2, IBV_WR_RDMA_READ, &sg, 1,
			    (uintptr_t)p.b.buf, p.b.mr->rkey,
			    IBV_SEND_SIGNALED));
	WC_OK(p.a.scq, 2, IBV_WC_RDMA_READ);
	ASSERT_EQ(-1, sv_check(p.a.buf, 65536, 61));
	/* the parent's writes after the fork are what the peer sees */
	sv_fill(p.b.buf, 4096, 62);
	ASSERT_OK(post_rdma(&p.a, 3, IBV_WR_RDMA_READ, &sg, 1,
			    (uintptr_t)p.b.buf, p.b.mr->rkey,
			    IBV_SEND_SIGNALED));
	WC_OK(p.a.scq, 3, IBV_WC_RDMA_READ);
	ASSERT_EQ(-1, sv_check(p.a.buf, 4096, 62));
	ASSERT_BYTES(p.a.buf, p.b.buf, 65536);
	/* and the peer's writes land in the parent's memory */
	sv_fill(p.a.buf, 65536, 63);
	ASSERT_OK(post_rdma(&p.a, 4, IBV_WR_RDMA_WRITE, &sg, 1,
			    (uintptr_t)p.b.buf, p.b.mr->rkey,
			    IBV_SEND_SIGNALED));
	WC_OK(p.a.scq, 4, IBV_WC_RDMA_WRITE);
	ASSERT_EQ(-1, sv_check(p.b.buf, 65536, 63));
	close(down[1]);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(!WIFEXITED(st) || WEXITSTATUS(st) == 0);
	/* after the child is gone, the same */
	ASSERT_OK(post_rdma(&p.a, 5, IBV_WR_RDMA_READ, &sg, 1,
			    (uintptr_t)p.b.buf, p.b.mr->rkey,
			    IBV_SEND_SIGNALED));
	WC_OK(p.a.scq, 5, IBV_WC_RDMA_READ);
	ASSERT_EQ(-1, sv_check(p.b.buf, 65536, 63));
	ASSERT_EQ(-1, sv_check(p.a.buf, 65536, 63));
	close(up[0]);
	sv_pair_close(&p);
}
